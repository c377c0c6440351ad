#if canImport(Glibc)
import Glibc
#endif

/// Splits a byte stream into `\n`-terminated lines (NDJSON), sans-I/O.
///
/// A line is delivered without its `\n` (and without one trailing `\r`). Lines that lie entirely in
/// the fed buffer are delivered without copying; only an incomplete tail is kept, and never more
/// than `maxLineBytes`: a line longer than that makes ``feed(_:onLine:)`` return
/// ``Outcome/lineTooLong(offset:)`` and the framer stops (the connection is to be closed).
public struct LineFramer: Sendable {
    /// The longest line accepted, in bytes, without its `\n`.
    public let maxLineBytes: Int
    private var partial: [UInt8] = []
    /// Where the line that was too long started, once one was.
    private var failedAt: Int?
    /// Bytes consumed so far (for the offset in errors). While a buffer is being fed it is the
    /// stream offset of the next byte to look at (`start`), so a line starting there starts at
    /// `consumed`, or at `consumed - partial.count` with an incomplete line kept from before.
    public private(set) var consumed: Int = 0

    public enum Outcome: Sendable, Equatable {
        case ok
        /// A line exceeded ``maxLineBytes``; it started at this stream offset.
        case lineTooLong(offset: Int)
    }

    public init(maxLineBytes: Int) {
        precondition(maxLineBytes > 0, "maxLineBytes must be positive")
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes of an incomplete line kept between calls (≤ ``maxLineBytes``).
    public var bufferedByteCount: Int { partial.count }

    /// Feeds bytes; calls `onLine` for each complete line, in order. The line buffer is only valid
    /// during the call. `onLine` returns false to stop (the rest of `bytes` is dropped).
    public mutating func feed(
        _ bytes: UnsafeRawBufferPointer, onLine: (UnsafeRawBufferPointer) -> Bool
    ) -> Outcome {
        if let failedAt { return .lineTooLong(offset: failedAt) }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .ok }
        var start = 0
        let end = bytes.count
        while start < end {
            let found = memchr(base + start, 0x0A, end - start)
            guard let newline = found else {
                // Incomplete tail.
                let tail = end - start
                if partial.count + tail > maxLineBytes {
                    return fail(lineStart: consumed - partial.count)
                }
                partial.append(contentsOf: UnsafeRawBufferPointer(start: base + start, count: tail))
                consumed += end - start
                return .ok
            }
            let lineEnd = UnsafeRawPointer(newline) - base
            let keepGoing: Bool
            if partial.isEmpty {
                var length = lineEnd - start
                if length > maxLineBytes { return fail(lineStart: consumed) }
                if length > 0 && base.load(fromByteOffset: start + length - 1, as: UInt8.self) == 0x0D { length -= 1 }
                keepGoing = onLine(UnsafeRawBufferPointer(start: base + start, count: length))
            } else {
                if partial.count + (lineEnd - start) > maxLineBytes {
                    return fail(lineStart: consumed - partial.count)
                }
                partial.append(contentsOf: UnsafeRawBufferPointer(start: base + start, count: lineEnd - start))
                if partial.last == 0x0D { partial.removeLast() }
                let line = partial
                partial.removeAll(keepingCapacity: partial.capacity <= 65_536)
                keepGoing = line.withUnsafeBytes { onLine($0) }
            }
            consumed += lineEnd + 1 - start
            start = lineEnd + 1
            if !keepGoing { return .ok }
        }
        return .ok
    }

    private mutating func fail(lineStart: Int) -> Outcome {
        failedAt = lineStart
        partial = []
        return .lineTooLong(offset: lineStart)
    }
}
