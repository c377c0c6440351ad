// Appending fixed text to byte buffers.

extension Array where Element == UInt8 {
    /// Appends the UTF-8 bytes of a literal.
    public mutating func appendLiteral(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }
}
