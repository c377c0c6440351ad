// Small string helpers that stand in for Foundation's (the daemon does not link Foundation).

extension StringProtocol {
    /// Without leading and trailing blanks: tabs and Unicode space separators (category Zs,
    /// which includes U+0020 and U+00A0), as Foundation's `.whitespaces` set. Line breaks stay.
    func trimmingBlanks() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isBlank($0) })!
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}

/// A tab or a Unicode space separator (Zs).
func isBlank(_ s: Unicode.Scalar) -> Bool {
    s == "\t" || s.properties.generalCategory == .spaceSeparator
}

/// `text` with its `%XX` escapes decoded; nil when an escape is malformed (`%4`, `%zz`) or
/// the result is not valid UTF-8 (as Foundation's `removingPercentEncoding`).
func percentDecoded<S: StringProtocol>(_ text: S) -> String? {
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = 0
    while i < bytes.count {
        if bytes[i] == UInt8(ascii: "%") {
            guard i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else { return nil }
            out.append(hi << 4 | lo)
            i += 3
        } else {
            out.append(bytes[i])
            i += 1
        }
    }
    return String(validating: out, as: UTF8.self)
}

/// The value of an ASCII hex digit.
func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

extension StringProtocol {
    /// The range of the first occurrence of `needle`, compared byte for byte in UTF-8. Stands in
    /// for `firstRange(of:)`/`contains(_:)` with a string argument, which live in
    /// `_StringProcessing` (and pull its regex engine into a static build).
    func firstRange(ofBytes needle: String) -> Range<Index>? {
        let pattern = Array(needle.utf8)
        guard let first = pattern.first else { return startIndex..<startIndex }
        let bytes = utf8
        var i = bytes.startIndex
        while i != bytes.endIndex {
            if bytes[i] == first {
                var j = i
                var k = 0
                while k < pattern.count, j != bytes.endIndex, bytes[j] == pattern[k] {
                    bytes.formIndex(after: &j)
                    k += 1
                }
                if k == pattern.count { return i..<j }
            }
            bytes.formIndex(after: &i)
        }
        return nil
    }

    /// Whether `needle` occurs in the text (byte for byte in UTF-8); see ``firstRange(ofBytes:)``.
    func contains(bytes needle: String) -> Bool { firstRange(ofBytes: needle) != nil }
}
