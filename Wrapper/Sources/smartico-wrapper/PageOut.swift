#if canImport(Glibc)
import Glibc
#endif
import SmarticoWrapperCore

/// Hands this process's clean file pages back to the kernel (`MADV_PAGEOUT`, Linux 5.4): called
/// once the web views are released, when the code and data of WebKit, JavaScriptCore, Mesa and
/// LLVM that the views touched are not needed until the next popup, which reads back what it uses.
/// Android compacts its cached apps the same way. The kernel pages out only the pages of files the
/// caller owns or may write (a guard against side channels): root's libraries for root alone; any
/// other user's wrapper unmaps them instead (`smw_unmap_library_pages`, Host.compact). Returns how
/// many mappings were advised; a kernel without `MADV_PAGEOUT` (EINVAL) or an unreadable maps file
/// advises none.
func pageOutFileMappings() -> Int {
    let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while bytes.count < 16 << 20 {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    var advised = 0
    for range in MappedFiles.readOnlyPrivate(maps: String(decoding: bytes, as: UTF8.self)) {
        guard let address = UnsafeMutableRawPointer(bitPattern: range.start) else { continue }
        if madvise(address, Int(range.end - range.start), MADV_PAGEOUT) == 0 {
            advised += 1
        } else if errno == EINVAL, advised == 0 {
            return 0
        }
    }
    return advised
}
