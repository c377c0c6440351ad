import Foundation

/// Reading `/proc/PID/smaps` in tests that check what is resident.
public enum ProcSmaps {
    /// Resident KiB summed over the mappings of `pid` ("self" for this process) whose header line
    /// ("start-end perms offset dev inode path") satisfies `matches`; nil when the file cannot be
    /// read or no mapping matched.
    public static func residentKiB(pid: String = "self", mapping matches: (Substring) -> Bool) -> Int? {
        // read(2) to the end: a /proc file reports size 0, and Foundation's file reading stops short.
        let fd = open("/proc/\(pid)/smaps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        var inside = false
        var total: Int?
        for line in text.split(separator: "\n") {
            let first = line.prefix(while: { $0 != " " })
            if first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {  // a mapping's header
                inside = matches(line)
            } else if inside, line.hasPrefix("Rss:") {
                total = (total ?? 0) + (Int(line.dropFirst(4).split(separator: " ").first ?? "") ?? 0)
            }
        }
        return total
    }
}
