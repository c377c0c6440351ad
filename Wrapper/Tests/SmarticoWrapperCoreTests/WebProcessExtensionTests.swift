import SmarticoWrapperCore
import Testing

@Suite("WebProcessExtension.directory: where the wrapper finds its web process extension")
struct WebProcessExtensionTests {
    let built = "/src/Wrapper/.build/plugins/outputs/wrapper/smartico-wrapper/destination/WebExtensionBuild"

    @Test("as packaged: lib/smartico-wrapper beside the binary's bin, before the build's")
    func packaged() {
        let found = WebProcessExtension.directory(executable: "/usr/bin/smartico-wrapper", built: built) {
            $0 == "/usr/lib/smartico-wrapper/libsmartico-wrapper-web-extension.so" || $0 == built + "/libsmartico-wrapper-web-extension.so"
        }
        #expect(found == "/usr/lib/smartico-wrapper")
        let local = WebProcessExtension.directory(executable: "/opt/smartico/bin/smartico-wrapper", built: built) {
            $0 == "/opt/smartico/lib/smartico-wrapper/libsmartico-wrapper-web-extension.so"
        }
        #expect(local == "/opt/smartico/lib/smartico-wrapper")
    }

    @Test("run from the tree: where the build put it")
    func fromTheTree() {
        let found = WebProcessExtension.directory(executable: "/src/Wrapper/.build/x86_64-unknown-linux-gnu/debug/smartico-wrapper",
                                                  built: built) { $0 == self.built + "/libsmartico-wrapper-web-extension.so" }
        #expect(found == built)
    }

    @Test("nowhere: nil; an unknown executable path still finds the build's")
    func nowhere() {
        #expect(WebProcessExtension.directory(executable: "/usr/bin/smartico-wrapper", built: built) { _ in false } == nil)
        #expect(WebProcessExtension.directory(executable: "", built: built) { $0.hasPrefix(self.built) } == built)
        #expect(WebProcessExtension.directory(executable: "smartico-wrapper", built: "relative") { _ in true } == nil)
        #expect(WebProcessExtension.directory(executable: "/smartico-wrapper", built: "") { _ in true } == nil)
    }
}
