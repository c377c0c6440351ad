import SmarticoProtocol
import SmarticoWrapperCore
import Testing

/// Helpers shared by the wrapper-core tests.

/// A JSON value parsed from text; a test fails (throws) on bad JSON.
func json(_ text: String) throws -> JSONValue {
    try JSONValue(parsing: text)
}

func object(_ text: String) throws -> JSONObject {
    try #require(try json(text).objectValue, "not a JSON object: \(text)")
}

/// A page message built from an object literal.
func message(_ text: String) throws -> PageMessage {
    try PageMessage(json: try object(text))
}

/// Decodes a double-quoted JavaScript string literal (ECMAScript 262 §12.9.4) the way a JS engine
/// would, and refuses what would not be one literal: an unescaped `"` before the end, a raw line
/// terminator (LF, CR; U+2028/U+2029 too, which engines before ES2019 refuse and which the
/// wrapper must never rely on), a bad escape.
enum JSStringLiteral {
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    static func decode(_ literal: String) throws -> String {
        let scalars = Array(literal.unicodeScalars)
        guard scalars.count >= 2, scalars.first == "\"", scalars.last == "\"" else {
            throw Invalid(description: "not a double-quoted literal")
        }
        var units: [UInt16] = []
        var i = 1
        let end = scalars.count - 1
        func hex(_ count: Int) throws -> UInt32 {
            guard i + count <= end else { throw Invalid(description: "short hex escape at \(i)") }
            var v: UInt32 = 0
            for k in 0..<count {
                guard let d = Int(String(scalars[i + k]), radix: 16) else { throw Invalid(description: "bad hex digit at \(i + k)") }
                v = v * 16 + UInt32(d)
            }
            i += count
            return v
        }
        func append(_ scalar: UInt32) {
            if scalar >= 0x10000 {
                let v = scalar - 0x10000
                units.append(UInt16(0xD800 + (v >> 10)))
                units.append(UInt16(0xDC00 + (v & 0x3FF)))
            } else {
                units.append(UInt16(scalar))
            }
        }
        while i < end {
            let c = scalars[i]
            switch c {
            case "\"":
                throw Invalid(description: "an unescaped quote at \(i) ends the literal early")
            case "\n", "\r", "\u{2028}", "\u{2029}":
                throw Invalid(description: "a raw line terminator U+\(String(c.value, radix: 16)) at \(i)")
            case "\\":
                i += 1
                guard i < end else { throw Invalid(description: "a backslash escapes the closing quote") }
                let e = scalars[i]
                i += 1
                switch e {
                case "b": units.append(0x08)
                case "f": units.append(0x0C)
                case "n": units.append(0x0A)
                case "r": units.append(0x0D)
                case "t": units.append(0x09)
                case "v": units.append(0x0B)
                case "0":
                    guard i >= end || !("0"..."9").contains(scalars[i]) else { throw Invalid(description: "a legacy octal escape") }
                    units.append(0)
                case "x": append(try hex(2))
                case "u":
                    if i < end, scalars[i] == "{" {
                        i += 1
                        var v: UInt32 = 0
                        while i < end, scalars[i] != "}" {
                            guard let d = Int(String(scalars[i]), radix: 16) else { throw Invalid(description: "bad \\u{} escape") }
                            v = v * 16 + UInt32(d)
                            i += 1
                        }
                        guard i < end else { throw Invalid(description: "unterminated \\u{}") }
                        i += 1
                        append(v)
                    } else {
                        units.append(UInt16(try hex(4)))
                    }
                case "\n", "\u{2028}", "\u{2029}": break  // line continuation
                case "\r":
                    if i < end, scalars[i] == "\n" { i += 1 }
                case "1"..."9": throw Invalid(description: "a legacy octal escape")
                default: append(e.value)  // \" \\ \' \/ and any other character stand for themselves
                }
            default:
                append(c.value)
                i += 1
            }
        }
        return String(decoding: units, as: UTF16.self)
    }
}

extension Array where Element == WrapperCommand {
    /// The `ack` seqs sent, in order.
    var acks: [Int64] {
        compactMap {
            if case .daemon("ack", let args) = $0 { args["seq"]?.int64Value } else { nil }
        }
    }

    /// The daemon requests other than `ack`, in order.
    var requests: [(op: String, arguments: JSONObject)] {
        compactMap {
            if case .daemon(let op, let args) = $0, op != "ack" { (op, args) } else { nil }
        }
    }

    func requests(_ op: String) -> [JSONObject] {
        requests.filter { $0.op == op }.map(\.arguments)
    }

    var popup: [ViewCommand] {
        compactMap { if case .popup(let c) = $0 { c } else { nil } }
    }

    var widget: [ViewCommand] {
        compactMap { if case .widget(let c) = $0 { c } else { nil } }
    }

    var popupLoads: [String] {
        popup.compactMap { if case .load(let url) = $0 { url } else { nil } }
    }

    var widgetLoads: [String] {
        widget.compactMap { if case .load(let url) = $0 { url } else { nil } }
    }

    var runs: [[String]] {
        compactMap { if case .run(let argv) = $0 { argv } else { nil } }
    }

    var externals: [String] {
        compactMap { if case .openExternal(let url) = $0 { url } else { nil } }
    }

    func logs(_ level: LogLevel) -> [String] {
        compactMap { if case .log(let l, let text) = $0, l == level { text } else { nil } }
    }

    /// Everything but log lines.
    var actions: [WrapperCommand] {
        filter { if case .log = $0 { false } else { true } }
    }
}
