/// The read-only file mappings of a process, from `/proc/PID/maps`: what the wrapper hands back to
/// the kernel (`MADV_PAGEOUT`) once its web views are released, so that the pages of WebKit,
/// JavaScriptCore and Mesa the views touched stop counting against the idle wrapper
/// (docs/wrapper.md, "Rendering, memory and wake-ups").
///
/// Only private mappings of a file that nobody can write through are chosen: their clean pages
/// are re-read from the file when next touched, and the pages the process changed (relocations)
/// are anonymous memory the kernel cannot drop without swap, so nothing is lost either way.
public enum MappedFiles {
    /// One mapping: its address range (`end` exclusive) and the file.
    public struct Range: Equatable, Sendable {
        public let start: UInt
        public let end: UInt
        public let path: String

        public init(start: UInt, end: UInt, path: String) {
            self.start = start
            self.end = end
            self.path = path
        }
    }

    /// The mappings of `maps` (the text of `/proc/PID/maps`) that may be paged out: private,
    /// not writable, backed by a file that still exists. Lines that do not parse are skipped.
    public static func readOnlyPrivate(maps: String) -> [Range] {
        var out: [Range] = []
        for line in maps.split(separator: "\n") {
            // address perms offset dev inode [path]; the path may contain spaces.
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6 else { continue }
            let perms = fields[1]
            guard perms.count == 4, perms.last == "p", !perms.contains("w") else { continue }
            let path = fields[5].drop(while: { $0 == " " })
            guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { continue }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16),
                  start < end else { continue }
            out.append(Range(start: start, end: end, path: String(path)))
        }
        return out
    }
}
