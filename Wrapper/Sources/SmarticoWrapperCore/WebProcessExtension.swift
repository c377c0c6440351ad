/// Where the wrapper finds its web process extension, `libsmartico-wrapper-web-extension.so`: the
/// C library that WebKit loads into each web process of the wrapper's web context, so that the
/// wrapper can ask a web process to unmap the pages of its libraries' code once a page is on
/// screen (docs/wrapper.md, "Rendering, memory and wake-ups").
public enum WebProcessExtension {
    public static let fileName = "libsmartico-wrapper-web-extension.so"

    /// The directory to hand WebKit (which loads every `.so` in it) for the wrapper running from
    /// `executable`, its resolved path: the package's `lib/smartico-wrapper` beside the binary's
    /// `bin` (`/usr/bin` → `/usr/lib/smartico-wrapper`), else `built`, where the package's build
    /// put it (a build run from the tree). nil when neither has the file.
    public static func directory(executable: String, built: String, fileExists: (String) -> Bool) -> String? {
        var candidates: [String] = []
        if executable.hasPrefix("/"), let slash = executable.lastIndex(of: "/") {
            let bin = executable[..<slash]
            if let up = bin.lastIndex(of: "/") {
                candidates.append(String(bin[..<up]) + "/lib/smartico-wrapper")
            }
        }
        if built.hasPrefix("/") { candidates.append(built) }
        return candidates.first { fileExists($0 + "/" + fileName) }
    }
}
