#if canImport(Glibc)
import Glibc
#endif
import SmarticoTestSupport
import Testing
import Transport

/// `ProcessMemory.returnFreePagesToSystem()` really gives freed heap pages back: blocks freed below a
/// block still in use are not trimmed by glibc on its own, and are after the call.
@Suite("IO: process memory")
struct IOProcessMemoryTests {
    static func rssAnonKiB() -> Int {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0 else { return -1 }
        let text = String(decoding: bytes[..<n], as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Int(line.dropFirst("RssAnon:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
        }
        return -1
    }

    @Test func freedHeapPagesGoBackToTheKernel() {
        // 48 MiB in 32 KiB blocks (below glibc's mmap threshold: they come from the heap), each
        // touched so it is resident; then all freed but the last, which pins the heap's top.
        let count = 1_536, size = 32 << 10
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<count {
            let p = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            memset(p, 0x5a, size)
            blocks.append(p)
        }
        let pin = blocks.removeLast()
        for p in blocks { p.deallocate() }
        let before = Self.rssAnonKiB()
        ProcessMemory.returnFreePagesToSystem()
        let after = Self.rssAnonKiB()
        pin.deallocate()
        #expect(before > 0 && after > 0)
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(before - after >= 32 << 10, "RssAnon \(before) KiB → \(after) KiB: less than 32 MiB given back")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("RssAnon \(before) KiB → \(after) KiB after returnFreePagesToSystem")
        }
    }
}
