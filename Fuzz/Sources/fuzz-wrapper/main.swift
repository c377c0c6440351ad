// smartico-wrapper's logic on hostile input (SmarticoWrapperCore): what the daemon's events carry
// (from the server), what pages post through the bridge, the URLs it decides to load or take
// messages from, and its configuration file.
//
// Input: lines. `E <json>` a daemon event line ({"event","seq","data"}); `P <text>` a message the
// popup page's top frame posts (from the popup's own URL); `X <url> <text>` one posted from the
// frame URL given; `W <text>` one the widget posts; `F` the popup page fails to load; `T <ms>` time
// passes; `O <dp>` --open; `U <url>` a URL checked on its own; `C <json>` a configuration file.
// Checks: a parsed origin is http(s), has a host without spaces, slashes or control characters and
// a port in 1…65535, and parses back to itself from its text; every page the model loads is of an
// allowed origin and has force_mobile; one popup at a time, the next started as soon as one ends;
// acks strictly increase and never pass the last seq taken in; a refused configuration names a
// problem.
import FuzzSupport
import SmarticoProtocol
import SmarticoWrapperCore

func checkOrigin(_ url: String) {
    guard let origin = try? WebOrigin(url: url) else { return }
    invariant(origin.scheme == "http" || origin.scheme == "https", "scheme \(origin.scheme) from \(url)")
    invariant(!origin.host.isEmpty, "an empty host from \(url)")
    invariant(!origin.host.unicodeScalars.contains { $0.value <= 0x20 || $0 == "/" || $0 == "\\" || $0 == "@" || $0 == "#" || $0 == "?" },
              "host \(origin.host) from \(url)")
    invariant((1...65535).contains(origin.port), "port \(origin.port) from \(url)")
    invariant((try? WebOrigin(url: origin.description)) == origin, "\(origin) does not parse back to itself (from \(url))")
}

func check(_ commands: [WrapperCommand], _ model: WrapperModel, lastAck: inout Int64) {
    for command in commands {
        switch command {
        case .popup(.load(let url)), .widget(.load(let url)):
            invariant(model.allowsNavigation(to: url), "loaded \(url), not an allowed origin")
            invariant(url.contains("force_mobile="), "loaded \(url) without force_mobile")
            checkOrigin(url)
        case .daemon(let op, let arguments) where op == "ack":
            let seq = arguments["seq"]?.int64Value ?? -1
            invariant(seq > lastAck, "ack \(seq) after \(lastAck)")
            invariant(seq <= (model.lastAccepted ?? -1), "ack \(seq) beyond the last seq taken \(String(describing: model.lastAccepted))")
            lastAck = seq
        default:
            break
        }
    }
    invariant(model.popup != nil || model.queue.isEmpty, "\(model.queue.count) popups wait while none is on screen")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWrapper(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    var config = WrapperConfig()
    config.maxQueuedPopups = 8
    config.deepLinkCommands["cashier"] = ["/usr/bin/true", "{dp}"]
    var model = WrapperModel(config: config)
    var now: Int64 = 1_000
    var lastAck: Int64 = 0
    for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
        guard let tag = line.first else { continue }
        let rest = String(decoding: line.dropFirst(2), as: UTF8.self)
        var out: [WrapperCommand] = []
        switch tag {
        case UInt8(ascii: "E"):
            guard let event = try? JSONValue(parsing: rest), let name = event["event"]?.stringValue else { continue }
            out = model.receive(event: name, seq: event["seq"]?.int64Value, data: event["data"] ?? .null, now: now)
        case UInt8(ascii: "P"):
            out = model.popupMessage(rest, frameURL: model.popup?.request.url, now: now)
        case UInt8(ascii: "X"):
            let parts = rest.split(separator: " ", maxSplits: 1).map(String.init)
            checkOrigin(parts.first ?? "")
            out = model.popupMessage(parts.count > 1 ? parts[1] : "", frameURL: parts.first, now: now)
        case UInt8(ascii: "W"):
            out = model.widgetMessage(rest, frameURL: model.widget.url)
        case UInt8(ascii: "F"):
            out = model.popupLoadFailed("fuzz", now: now)
        case UInt8(ascii: "T"):
            now += Int64(rest.prefix(9)) ?? 1_000
            out = model.tick(now: now)
        case UInt8(ascii: "O"):
            out = model.open(deepLink: rest.isEmpty ? nil : rest)
        case UInt8(ascii: "U"):
            checkOrigin(rest)
            _ = WrapperPageURL.forcingMobile(rest)
        case UInt8(ascii: "C"):
            do {
                _ = try WrapperConfig.parse(Array(line.dropFirst(2)), file: "fuzz.json")
            } catch {
                invariant(!error.lines.isEmpty, "a refused configuration without a problem")
            }
        default:
            continue
        }
        check(out, model, lastAck: &lastAck)
    }
    return 0
}

runFuzzer(fuzzWrapper)
