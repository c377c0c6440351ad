/// What an `ext_user_id` may be, wherever the daemon takes one (the socket's `identify` op, the
/// configuration's `user.ext_user_id`): 1 to ``maxBytes`` bytes of UTF-8 and no control character
/// (C0, DEL, C1 including NEL U+0085, and the separators U+2028, U+2029: see
/// ``LogEscaping/isControl(_:)``). It is sent to the server, shown by `status`, passed to
/// `hash_command` in its environment and written to logs; none of those wants a line break in it.
public enum ExtUserID {
    /// Longest `ext_user_id`, in UTF-8 bytes.
    public static let maxBytes = 256

    /// What is wrong with `id`, phrased to follow the field's name ("is empty", "is 300 bytes
    /// long; at most 256", "contains a control character (U+000A at byte offset 5)"), or nil
    /// when it is valid.
    public static func problem(_ id: String) -> String? {
        let bytes = id.utf8.count
        if bytes == 0 { return "is empty; give the user's id (1 to \(maxBytes) bytes)" }
        if bytes > maxBytes { return "is \(bytes) bytes long; at most \(maxBytes) bytes (UTF-8) are allowed" }
        var offset = 0
        for scalar in id.unicodeScalars {
            if LogEscaping.isControl(scalar) {
                return "contains a control character (\(codePoint(scalar)) at byte offset \(offset)); line breaks, tabs, NUL and other control characters are not allowed"
            }
            offset += UTF8.width(scalar)
        }
        return nil
    }

    /// `U+000A`: the scalar's code point, at least four hex digits.
    static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
