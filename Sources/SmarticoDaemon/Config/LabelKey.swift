import SmarticoProtocol

/// A Smartico label key as configured: a 36-character key, optionally followed by
/// `-<N>`, the number of the Smartico environment that serves the label.
///
/// `6816f0c2-…-2` → key `6816f0c2-…` (sent in INIT), environment 2.
/// Both the full key and the key are ``Secret``s.
public struct LabelKey: Sendable, Hashable, CustomStringConvertible {
    /// The key as configured, with its suffix.
    public let full: Secret
    /// The first 36 characters: what INIT_SESSION's `label_key` carries.
    public let key: Secret
    /// The environment number from the suffix, or nil when the key has none.
    public let environment: Int?

    /// The length of a key without its suffix.
    public static let keyLength = 36

    /// Parses a configured key. The 36 characters must be ASCII letters, digits or `-`;
    /// a suffix is `-` and a number 1…999 without leading zeros.
    public init(parsing full: Secret) throws(LabelKeyError) {
        let text = full.exposedValue
        let scalars = Array(text.unicodeScalars)
        guard scalars.count >= LabelKey.keyLength else { throw .tooShort(length: scalars.count) }
        let isKeyScalar: (Unicode.Scalar) -> Bool = {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-")
        }
        guard scalars[..<LabelKey.keyLength].allSatisfy(isKeyScalar) else { throw .invalidCharacters }
        let suffix = scalars[LabelKey.keyLength...]
        var environment: Int?
        if !suffix.isEmpty {
            let digits = suffix.dropFirst()
            guard suffix.first == "-", !digits.isEmpty, digits.count <= 3,
                  digits.allSatisfy({ ("0"..."9").contains($0) }), digits.first != "0",
                  let n = Int(String(String.UnicodeScalarView(digits))) else {
                throw .badSuffix(length: scalars.count)
            }
            environment = n
        }
        self.full = full
        self.key = Secret(String(String.UnicodeScalarView(scalars[..<LabelKey.keyLength])))
        self.environment = environment
    }

    /// The Smartico hosts for this key's environment.
    public var hosts: SmarticoEnvironment { SmarticoEnvironment(environment: environment) }

    /// `6816…(masked) (environment 2)`
    public var description: String {
        full.masked + (environment.map { " (environment \($0))" } ?? " (no environment suffix)")
    }
}

/// Why a label key was refused. Never contains the key.
public enum LabelKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    case tooShort(length: Int)
    case invalidCharacters
    case badSuffix(length: Int)

    public var description: String {
        let form = "must be a 36-character key, optionally followed by an environment suffix such as \"-2\""
        switch self {
        case .tooShort(let n): return "\(form); got \(n) characters"
        case .invalidCharacters: return "\(form); the first 36 characters may only be letters, digits and '-'"
        case .badSuffix(let n):
            return "\(form); got \(n) characters whose part after the 36th is not \"-\" followed by a number 1…999"
        }
    }
}
