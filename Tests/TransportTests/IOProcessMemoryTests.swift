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
        #expect(before - after >= 32 << 10, "RssAnon \(before) KiB → \(after) KiB: less than 32 MiB given back")
    }

    /// Rss of the mapping that starts at `address`; nil if there is none.
    static func mappingRssKiB(_ address: UnsafeRawPointer) -> Int? {
        let start = String(UInt(bitPattern: address), radix: 16) + "-"
        return ProcSmaps.residentKiB { $0.hasPrefix(start) }
    }

    /// A read-only file mapping that was read loses its resident pages, and reads the same bytes
    /// afterwards; a private writable mapping of the same file, written to, keeps its pages and its
    /// bytes (the call must never throw away modified data); a mapping made since the previous
    /// scan keeps its pages until the next one.
    @Test func readOnlyFilePagesAreDroppedAndWrittenOnesKept() throws {
        let size = 4 << 20
        var template = Array("/tmp/smartico-pageout-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        defer { close(fd); unlink(template) }
        var content = [UInt8](repeating: 0, count: size)
        for i in 0..<size { content[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 12) }
        #expect(write(fd, content, size) == size)
        #expect(fsync(fd) == 0)  // clean pages: reclaim needs no writeback

        let readOnly = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0))
        try #require(readOnly != MAP_FAILED)
        defer { munmap(readOnly, size) }
        let writable = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        try #require(writable != MAP_FAILED)
        defer { munmap(writable, size) }
        var sum = 0
        for page in stride(from: 0, to: size, by: 4096) {
            sum &+= Int(readOnly.load(fromByteOffset: page, as: UInt8.self))
            writable.storeBytes(of: 0xA5, toByteOffset: page, as: UInt8.self)  // copy-on-write
        }
        #expect(sum != 0)
        let before = try #require(Self.mappingRssKiB(readOnly))
        let writtenBefore = try #require(Self.mappingRssKiB(writable))
        #expect(before >= 4000, "the read-only mapping was not resident to begin with (\(before) KiB): the test shows nothing")

        // A mapping not seen by the scan before is left alone (it could be a library the loader
        // is still mapping); seen twice, its pages go.
        ProcessMemory.noteReadOnlyFileMappings()
        let late = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0))
        try #require(late != MAP_FAILED)
        defer { munmap(late, size) }
        for page in stride(from: 0, to: size, by: 4096) { sum &+= Int(late.load(fromByteOffset: page, as: UInt8.self)) }
        let dropped = try #require(ProcessMemory.releaseReadOnlyFilePages(), "/proc/self/smaps unreadable")
        #expect(dropped >= size)
        let lateAfter = try #require(Self.mappingRssKiB(late))
        #expect(lateAfter >= 4000, "a mapping made after the last scan lost its pages (\(lateAfter) KiB resident)")
        let after = try #require(Self.mappingRssKiB(readOnly))
        #expect(after < 512, "read-only file mapping: \(before) KiB resident before, \(after) KiB after")
        let writtenAfter = try #require(Self.mappingRssKiB(writable))
        #expect(writtenAfter == writtenBefore, "the written private mapping lost pages: \(writtenBefore) → \(writtenAfter) KiB")
        #expect(memcmp(readOnly, content, size) == 0, "the read-only mapping reads other bytes after its pages were dropped")
        ProcessMemory.releaseReadOnlyFilePages()
        let lateLater = try #require(Self.mappingRssKiB(late))
        #expect(lateLater < 512, "seen by two scans, the late mapping kept \(lateLater) KiB resident")
        for page in stride(from: 0, to: size, by: 4096) {
            #expect(writable.load(fromByteOffset: page, as: UInt8.self) == 0xA5)
        }
    }
}
