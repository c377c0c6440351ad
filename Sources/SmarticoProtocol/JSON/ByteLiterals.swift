// Appending fixed text to byte buffers.

extension Array where Element == UInt8 {
    /// Appends the UTF-8 bytes of a literal as one copy. `append(contentsOf: "…".utf8)` goes through
    /// the generic sequence path of `String.UTF8View` (~1 % of the daemon's CPU per engagement, where
    /// the line and the journal row are assembled).
    @inlinable @inline(__always)
    public mutating func appendLiteral(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }
}
