// Giving the heap's free pages back to the kernel after a burst.
import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// The process's heap, as far as a long-running daemon must care about it.
public enum ProcessMemory {
    /// Returns the free pages of glibc's heap to the kernel (`malloc_trim(0)`: the top of the heap
    /// and every whole free page inside it). glibc keeps what a burst freed — and after freeing a
    /// large block it raises its mmap threshold, so later large buffers come from the heap too —
    /// so without this a daemon that once served 100 busy subscribers stays at that size. Costs a
    /// walk of the heap's free lists (milliseconds at most); call it when a burst is over, not per
    /// event. Returns true when some memory was released.
    @discardableResult
    public static func returnFreePagesToSystem() -> Bool {
        #if canImport(Glibc)
        return malloc_trim(0) == 1
        #else
        return false
        #endif
    }

    /// Asks the kernel to reclaim the resident pages of the program's read-only file mappings —
    /// the code and constant data of the executable and its libraries (`madvise(MADV_PAGEOUT)`,
    /// Linux 5.4 and later). A daemon keeps every page it ever ran resident: start-up,
    /// configuration, the TLS handshake, SQLite's schema code, the burst path — ~15 MB of
    /// file-backed pages for smarticod, most untouched once it is idle. Paged out, they leave the
    /// process (and, where no other process maps them, the page cache); the few the idle loop
    /// uses come back on their first use, with one page-cache read each. Android compacts its
    /// cached apps the same way (`process_madvise`). Only mappings that cannot hold modified
    /// data are advised: not writable, and without anonymous (copy-on-write) pages, such as the
    /// relocated read-only data after RELRO; pages another process also maps are left alone by
    /// the kernel. Costs a read of `/proc/self/smaps` and the reclaim (a few milliseconds):
    /// call it when the daemon has gone quiet, off the event loop. Returns the bytes of the
    /// ranges advised, or nil when the kernel does not support it.
    @discardableResult
    public static func releaseReadOnlyFilePages() -> Int? {
        #if canImport(Glibc)
        guard let smaps = readWholeFile("/proc/self/smaps") else { return nil }
        var ranges: [(start: UInt, end: UInt)] = []
        var current: (start: UInt, end: UInt)?
        var eligible = false
        func close() {
            if eligible, let c = current { ranges.append(c) }
            current = nil
            eligible = false
        }
        for line in smaps.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if let header = mappingHeader(line) {
                close()
                current = (header.start, header.end)
                eligible = header.readOnlyFile
            } else if eligible, line.starts(with: "Anonymous:".utf8) {
                // "Anonymous:  N kB": any copy-on-write page makes the mapping ineligible.
                eligible = !line.dropFirst("Anonymous:".count).contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") })
            }
        }
        close()
        var advised = 0
        for r in ranges {
            guard let address = UnsafeMutableRawPointer(bitPattern: r.start) else { continue }
            if madvise(address, Int(r.end - r.start), pageOut) == 0 {
                advised += Int(r.end - r.start)
            } else if errno == EINVAL {
                return advised == 0 ? nil : advised  // a kernel without MADV_PAGEOUT
            }
        }
        return advised
        #else
        return nil
        #endif
    }

    #if canImport(Glibc)
    /// `MADV_PAGEOUT` (include/uapi/asm-generic/mman-common.h).
    private static let pageOut: Int32 = 21

    /// "start-end perms offset dev inode path" → the range, and whether it is a read-only
    /// mapping of a file (a path, not `[vdso]` or an anonymous one); nil for a field line.
    private static func mappingHeader(_ line: ArraySlice<UInt8>) -> (start: UInt, end: UInt, readOnlyFile: Bool)? {
        var fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)[...]
        guard fields.count >= 5, let range = fields.popFirst(), let perms = fields.popFirst() else { return nil }
        let bounds = range.split(separator: UInt8(ascii: "-"))
        guard bounds.count == 2, let start = hex(bounds[0]), let end = hex(bounds[1]), end > start else { return nil }
        let path = fields.count == 4 ? fields.last!.drop(while: { $0 == UInt8(ascii: " ") }) : []
        let readOnlyFile = perms.first == UInt8(ascii: "r") && !perms.contains(UInt8(ascii: "w"))
            && path.first == UInt8(ascii: "/")
        return (start, end, readOnlyFile)
    }

    private static func hex(_ digits: ArraySlice<UInt8>) -> UInt? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt = 0
        for d in digits {
            let v: UInt8
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = d - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = d - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt(v)
        }
        return value
    }

    /// A /proc file, read to its end (its size shows as 0).
    private static func readWholeFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
        }
    }
    #endif

    /// Makes every thread allocate from glibc's main arena. `malloc_trim` gives back the free
    /// top of the main arena but not of a thread's own arena (glibc's `mtrim` only releases whole
    /// free pages inside a thread arena's bins), so memory a burst left at the top of, say, the
    /// store thread's arena would stay resident for good. With one arena the post-burst trim
    /// reaches all of it. Call before starting threads. Returns false if glibc refused.
    @discardableResult
    public static func useOneArena() -> Bool {
        #if canImport(Glibc)
        return mallopt(M_ARENA_MAX, 1) == 1
        #else
        return false
        #endif
    }
}
