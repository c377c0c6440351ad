import SmarticoProtocol

/// A Smartico label key as configured: a 36-character key, optionally followed by `-<N>`, the
/// number of the Smartico environment that serves the label (`6816f0c2-…-2` → key `6816f0c2-…`,
/// sent in INIT, environment 2). Both the full key and the key are ``Secret``s.
public struct LabelKey: Sendable, Hashable, CustomStringConvertible {
    public let full: Secret
    public let key: Secret
    public let environment: Int?

    /// The 36 characters must be ASCII letters, digits or `-`; a suffix is `-` and a number
    /// 1…999 without leading zeros.
    public init(parsing full: Secret) throws(LabelKeyError) {
        let scalars = Array(full.exposedValue.unicodeScalars), length = 36
        guard scalars.count >= length else { throw .tooShort(length: scalars.count) }
        guard scalars[..<length].allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-") })
        else { throw .invalidCharacters }
        let suffix = scalars[length...], digits = suffix.dropFirst()
        if !suffix.isEmpty {
            guard suffix.first == "-", (1...3).contains(digits.count), digits.first != "0",
                  digits.allSatisfy({ ("0"..."9").contains($0) }) else { throw .badSuffix(length: scalars.count) }
        }
        self.full = full
        self.key = Secret(String(String.UnicodeScalarView(scalars[..<length])))
        self.environment = suffix.isEmpty ? nil : Int(String(String.UnicodeScalarView(digits)))
    }

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
        case .badSuffix(let n): return "\(form); got \(n) characters whose part after the 36th is not \"-\" followed by a number 1…999"
        }
    }
}
