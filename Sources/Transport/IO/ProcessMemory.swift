// Giving the heap's free pages back to the kernel after a burst.
import COpenSSL
import Synchronization

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

    /// Drops from the process's resident set the pages of its read-only file mappings — the code
    /// and constant data of the executable and its libraries — that have been mapped unchanged
    /// since the previous call (`madvise(MADV_DONTNEED)`). A daemon keeps mapped every page it ever
    /// ran: start-up, configuration, the TLS handshake, SQLite's schema code, the last burst —
    /// ~15 MB of file-backed pages for smarticod, most of them untouched while it idles. Unmapped,
    /// they stay in the page cache as clean, unmapped pages (the first the kernel reclaims when
    /// memory is short, where mapped code is protected), and the ones the idle loop uses come
    /// back on first use with a minor fault. The calling process needs no privilege (the kernel's
    /// `MADV_PAGEOUT` reclaims file pages only for their owner or root; this daemon runs as its
    /// own user).
    ///
    /// Nothing can be lost: a mapping is dropped only if it is not writable, maps a file, holds
    /// no anonymous (copy-on-write) page — relocated read-only data, a debugger's breakpoint or a
    /// uprobe would show as one — and was mapped identically (range, permissions, offset, inode)
    /// at the previous call, so a library that the dynamic loader is mapping right now (its first
    /// mapping spans segments it will make writable) is never among them. The first call only
    /// notes the mappings. Costs a read of `/proc/self/smaps` (about a millisecond): call it when
    /// the daemon has gone quiet, off the event loop. Returns the bytes of the ranges dropped, or
    /// nil when `/proc/self/smaps` cannot be read.
    @discardableResult
    public static func releaseReadOnlyFilePages() -> Int? {
        scanReadOnlyFileMappings(drop: true)
    }

    /// Notes the read-only file mappings for the next ``releaseReadOnlyFilePages()`` without
    /// dropping any page (call when the daemon becomes ready, so the first release after it has
    /// something to compare with). Off the event loop, like the release.
    public static func noteReadOnlyFileMappings() {
        _ = scanReadOnlyFileMappings(drop: false)
    }

    private static func scanReadOnlyFileMappings(drop: Bool) -> Int? {
        #if canImport(Glibc)
        guard let smaps = readWholeFile("/proc/self/smaps") else { return nil }
        var eligible: [ReadOnlyMapping] = []
        var current: ReadOnlyMapping?
        for line in smaps.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if let header = mappingHeader(line) {
                if let c = current { eligible.append(c) }
                current = header.readOnlyFile ? ReadOnlyMapping(start: header.start, end: header.end, header: Array(line)) : nil
            } else if current != nil, line.starts(with: "Anonymous:".utf8) {
                // "Anonymous:  N kB": a copy-on-write page makes the mapping ineligible.
                if line.dropFirst("Anonymous:".count).contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }) {
                    current = nil
                }
            }
        }
        if let c = current { eligible.append(c) }
        let stable = lastReadOnlyMappings.withLock { previous in
            defer { previous = Set(eligible) }
            return eligible.filter { previous.contains($0) }
        }
        var dropped = 0
        for m in stable where drop {
            guard let address = UnsafeMutableRawPointer(bitPattern: m.start) else { continue }
            if madvise(address, Int(m.end - m.start), MADV_DONTNEED) == 0 { dropped += Int(m.end - m.start) }
        }
        return dropped
        #else
        return nil
        #endif
    }

    #if canImport(Glibc)
    /// A read-only file mapping as /proc/self/smaps shows it; equal when its header line is.
    struct ReadOnlyMapping: Hashable, Sendable {
        var start: UInt
        var end: UInt
        /// "start-end perms offset dev inode path".
        var header: [UInt8]
        static func == (a: Self, b: Self) -> Bool { a.header == b.header }
        func hash(into hasher: inout Hasher) { hasher.combine(header) }
    }

    /// The eligible mappings the previous scan saw.
    private static let lastReadOnlyMappings = Mutex<Set<ReadOnlyMapping>>([])

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
