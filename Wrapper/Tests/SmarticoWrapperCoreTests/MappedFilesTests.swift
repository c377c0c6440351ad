import SmarticoWrapperCore
import Testing

@Suite("MappedFiles: what the wrapper pages out after a release")
struct MappedFilesTests {
    let maps = """
        5581a9c00000-5581a9c52000 r--p 00000000 08:01 1311 /usr/bin/smartico-wrapper
        5581a9c52000-5581aa1a8000 r-xp 00052000 08:01 1311 /usr/bin/smartico-wrapper
        5581aa3a8000-5581aa3b0000 rw-p 005a8000 08:01 1311 /usr/bin/smartico-wrapper
        5581ab000000-5581ab400000 rw-p 00000000 00:00 0                          [heap]
        7f0c10000000-7f0c12000000 r-xp 00400000 08:01 2048 /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1
        7f0c12000000-7f0c12800000 r--p 02400000 08:01 2048 /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1
        7f0c13000000-7f0c13001000 rw-s 00000000 00:05 77 /memfd:wayland-shm (deleted)
        7f0c14000000-7f0c14100000 r--s 00000000 08:01 99 /var/cache/fontconfig/abc-le64.cache-8
        7f0c15000000-7f0c15010000 r--p 00000000 08:01 42 /tmp/My Fonts/a font.ttf
        7f0c16000000-7f0c16010000 r--p 00000000 08:01 43 /usr/lib/old.so (deleted)
        7f0c17000000-7f0c17010000 ---p 00000000 00:00 0
        7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
        ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
        garbage line
        7f0c18000000-7f0c17000000 r--p 00000000 08:01 44 /usr/lib/backwards.so
        """

    @Test("private read-only file mappings are chosen; writable, shared, anonymous, deleted and malformed ones are not")
    func choice() {
        let chosen = MappedFiles.readOnlyPrivate(maps: maps)
        #expect(chosen.map(\.path) == [
            "/usr/bin/smartico-wrapper", "/usr/bin/smartico-wrapper",
            "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1", "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
            "/tmp/My Fonts/a font.ttf",
        ])
        #expect(chosen[2] == .init(start: 0x7f0c10000000, end: 0x7f0c12000000, path: "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"))
    }

    @Test("an empty or unreadable maps text chooses nothing")
    func empty() {
        #expect(MappedFiles.readOnlyPrivate(maps: "").isEmpty)
        #expect(MappedFiles.readOnlyPrivate(maps: "\n\n").isEmpty)
    }
}
