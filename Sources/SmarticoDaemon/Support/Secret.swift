/// A value that must never reach a log, an error message or a dump by accident:
/// the label key, a push token, a user hash, a proxy password.
///
/// Every way Swift turns a value into text — `description`, string interpolation,
/// `String(reflecting:)`, `dump`, `Mirror`, and `Encodable` — produces the masked form
/// (at most the first 4 characters of a value of 12 characters or more, followed by
/// `…(masked)`; shorter values are masked completely). The raw value is only reachable
/// through ``exposedValue``, so every place that really needs it says so in the source.
public struct Secret: Sendable, Hashable {
    private let raw: String

    /// Wraps `value`. The value is only ever shown masked.
    public init(_ value: String) { raw = value }

    /// The raw value. Use it only where the value leaves the process on purpose
    /// (a protocol message, an HTTP header), never for logging.
    public var exposedValue: String { raw }

    /// The masked form: `6816…(masked)` for values of 12 or more characters,
    /// `(masked)` for shorter ones (a short prefix would reveal too much of them),
    /// `(empty)` for the empty string.
    public var masked: String { Secret.mask(raw) }

    /// Whether the value is the empty string.
    public var isEmpty: Bool { raw.isEmpty }

    /// The number of characters of the value (safe to show: it helps explain a bad value).
    public var count: Int { raw.count }

    /// How many leading characters the masked form may keep.
    public static let visiblePrefix = 4
    /// Values shorter than this are masked completely.
    public static let minimumLengthForPrefix = 12

    /// Masks any string the way a ``Secret`` masks itself.
    public static func mask(_ value: String) -> String {
        if value.isEmpty { return "(empty)" }
        guard value.count >= minimumLengthForPrefix else { return "(masked)" }
        return String(value.prefix(visiblePrefix)) + "…(masked)"
    }
}

extension Secret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { masked }
    public var debugDescription: String { "Secret(\(masked))" }
    /// No children: `dump` and `Mirror` see only the masked debug description.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: nil) }
}

extension Secret: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self.init(value) }
}

extension Secret: Codable {
    /// Decodes a JSON string.
    public init(from decoder: any Decoder) throws {
        raw = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the **masked** form, so that encoding a configuration or a status object
    /// for display can never leak the value. Code that must write the raw value encodes
    /// ``exposedValue`` explicitly.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(masked)
    }
}
