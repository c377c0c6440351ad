/// Why an opening handshake failed. Each case says what was wrong and with which value.
public enum WebSocketHandshakeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The HTTP head was malformed or too large.
    case http(HTTPParseError)
    /// Client: the server answered something other than `101`. Carries the status line, the
    /// headers and the start of the body (at most `maxErrorBodySize` bytes).
    case unexpectedStatus(statusLine: String, headers: HTTPHeaders, bodyPrefix: [UInt8])
    /// `Upgrade` does not contain `websocket`.
    case missingUpgradeHeader(found: String?)
    /// `Connection` does not contain `Upgrade`.
    case missingConnectionUpgrade(found: String?)
    /// Client: `Sec-WebSocket-Accept` is not base64(SHA-1(key + GUID)).
    case wrongAcceptKey(expected: String, received: String?)
    /// Client: the server chose a subprotocol we did not offer (or several).
    case subprotocolNotOffered(String, offered: [String])
    /// A malformed `Sec-WebSocket-Extensions` header.
    case malformedExtensions(WebSocketExtensionParseError)
    /// Client: the server's extension response is not acceptable.
    case extensionRejected(PerMessageDeflateError)
    /// Client: the server accepted an extension although we offered none.
    case extensionNotOffered(String)
    /// The connection closed before the handshake completed.
    case connectionClosed(bytesReceived: Int)
    /// Server: the request method is not GET.
    case methodNotAllowed(String)
    /// Server: the request is not HTTP/1.1 or later.
    case httpVersionTooOld(HTTPVersion)
    /// Server: `Sec-WebSocket-Version` is not 13 (answered with 426 and `Sec-WebSocket-Version: 13`).
    case unsupportedVersion(String?)
    /// Server: `Sec-WebSocket-Key` is missing or not the base64 form of 16 bytes.
    case invalidKey(String?)
    /// Server: no `Host` header.
    case missingHost

    public var description: String {
        switch self {
        case let .http(e): return "WebSocket handshake: \(e)"
        case let .unexpectedStatus(line, _, body):
            var s = "WebSocket handshake: server answered \"\(line)\" instead of 101 Switching Protocols"
            if !body.isEmpty { s += "; body starts with: \(String(decoding: body, as: UTF8.self))" }
            return s
        case let .missingUpgradeHeader(v): return "WebSocket handshake: Upgrade header is \(v.map { "\"\($0)\"" } ?? "missing"), expected \"websocket\""
        case let .missingConnectionUpgrade(v): return "WebSocket handshake: Connection header is \(v.map { "\"\($0)\"" } ?? "missing"), expected it to contain \"Upgrade\""
        case let .wrongAcceptKey(e, r): return "WebSocket handshake: Sec-WebSocket-Accept is \(r.map { "\"\($0)\"" } ?? "missing"), expected \"\(e)\" (a proxy or a non-WebSocket server answered?)"
        case let .subprotocolNotOffered(p, o): return "WebSocket handshake: server chose subprotocol \"\(p)\", not one of the offered \(o)"
        case let .malformedExtensions(e): return "WebSocket handshake: \(e)"
        case let .extensionRejected(e): return "WebSocket handshake: \(e)"
        case let .extensionNotOffered(n): return "WebSocket handshake: server enabled extension \"\(n)\", which was not offered"
        case let .connectionClosed(n): return "WebSocket handshake: connection closed after \(n) bytes, before the handshake completed"
        case let .methodNotAllowed(m): return "WebSocket handshake: method \(m) instead of GET"
        case let .httpVersionTooOld(v): return "WebSocket handshake: \(v) request; HTTP/1.1 is required"
        case let .unsupportedVersion(v): return "WebSocket handshake: Sec-WebSocket-Version is \(v.map { "\"\($0)\"" } ?? "missing"); only 13 is supported"
        case let .invalidKey(k): return "WebSocket handshake: Sec-WebSocket-Key is \(k.map { "\"\($0)\"" } ?? "missing"); it must be 16 random bytes in base64"
        case .missingHost: return "WebSocket handshake: the request has no Host header"
        }
    }
}

/// Helpers of the opening handshake.
public enum WebSocketHandshake {
    /// RFC 6455 §1.3.
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
    public static func acceptValue(forKey key: String) -> String {
        Base64.encode(Digest.sha1((key + guid).utf8))
    }

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64.
    public static func makeKey(using random: inout some RandomNumberGenerator) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for _ in 0 ..< 2 {
            let v = random.next()
            for s in 0 ..< 8 { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(s * 8))) }
        }
        return Base64.encode(bytes)
    }
}

// MARK: - Client

/// What the client asks for. Other modules make it from a URL (`init(url:…)`, WebSocketURL.swift);
/// the module and its tests also use the memberwise initializer.
public struct WebSocketClientOptions: Hashable, Sendable {
    /// Host name or IP address (IPv6 without brackets is fine).
    public var host: String
    /// TCP port; `nil` means the default (80, or 443 when `secure`).
    public var port: Int?
    /// `wss` (affects only the default port in `Host`).
    public var secure = false
    /// Path and query, e.g. `/socket?v=2` (empty means `/`).
    public var target = "/"
    /// Subprotocols to offer, in preference order.
    public var subprotocols: [String] = []
    /// Extra request headers (e.g. `Origin`, `Authorization`, `User-Agent`).
    public var headers = HTTPHeaders()
    /// permessage-deflate offer, or `nil` to offer no extension.
    public var deflate: PerMessageDeflateOptions?
    public var limits = HTTPHeadLimits()
    /// How much of a non-101 response body to keep for the error.
    public var maxErrorBodySize = 512

    /// The `Host` header value: brackets around IPv6 literals, port only when not the default.
    public var hostHeader: String {
        var h = host
        if h.contains(":") && !h.hasPrefix("[") { h = "[\(h)]" }
        if let p = port, p != (secure ? 443 : 80) { h += ":\(p)" }
        return h
    }
}

/// The outcome of a successful client handshake.
public struct WebSocketClientHandshakeResult: Hashable, Sendable {
    public var response: HTTPResponseHead
    /// The subprotocol the server chose, if any.
    public var subprotocol: String?
    /// The negotiated permessage-deflate parameters, if any.
    public var deflate: PerMessageDeflateParameters?
    /// Bytes received after the response head: the first WebSocket frames. Feed them to
    /// `WebSocketProtocol.receive`.
    public var remainder: [UInt8]
}

/// Client side of the opening handshake (RFC 6455 §4.1), sans-I/O: write `request`, feed the
/// response bytes to `receive` until it returns a result (or throws).
public struct WebSocketClientHandshake: Sendable {
    public let options: WebSocketClientOptions
    /// The `Sec-WebSocket-Key` sent.
    public let key: String
    /// The request head.
    public let requestHead: HTTPRequestHead
    /// The request bytes to write.
    public var request: [UInt8] { requestHead.serialized() }

    private var answer: HTTPExpectedResponse

    public init(options: WebSocketClientOptions, random: some RandomNumberGenerator = WebSocketRandomSource()) {
        var random = random
        self.options = options
        key = WebSocketHandshake.makeKey(using: &random)
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: options.hostHeader)
        headers.add(name: "Upgrade", value: "websocket")
        headers.add(name: "Connection", value: "Upgrade")
        headers.add(name: "Sec-WebSocket-Key", value: key)
        headers.add(name: "Sec-WebSocket-Version", value: "13")
        if !options.subprotocols.isEmpty {
            headers.add(name: "Sec-WebSocket-Protocol", value: options.subprotocols.joined(separator: ", "))
        }
        if let d = options.deflate {
            headers.add(name: "Sec-WebSocket-Extensions", value: d.offerHeaderValue)
        }
        for f in options.headers { headers.add(name: f.name, value: f.value) }
        requestHead = HTTPRequestHead(method: "GET", target: options.target.isEmpty ? "/" : options.target, headers: headers)
        answer = HTTPExpectedResponse(expecting: 101..<102, limits: options.limits)
    }

    /// Feeds response bytes. Returns the result once the 101 response is complete and valid.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) throws(WebSocketHandshakeError) -> WebSocketClientHandshakeResult? {
        let outcome: HTTPExpectedResponse.Outcome?
        do {
            outcome = try answer.receive(bytes, maxBodySize: options.maxErrorBodySize)
        } catch {
            throw .http(error)
        }
        switch outcome {
        case nil: return nil
        case .accepted(let head)?: return try validate(head)
        case .refused(let head, let body)?: throw .unexpectedStatus(statusLine: head.statusLine, headers: head.headers, bodyPrefix: body)
        }
    }

    public mutating func receive(_ bytes: [UInt8]) throws(WebSocketHandshakeError) -> WebSocketClientHandshakeResult? {
        try withTypedBytes(bytes) { (raw) throws(WebSocketHandshakeError) in try receive(raw) }
    }

    /// The connection closed during the handshake: throws the most informative error.
    public mutating func transportClosed() throws(WebSocketHandshakeError) {
        if let head = answer.refusal {
            throw .unexpectedStatus(statusLine: head.statusLine, headers: head.headers, bodyPrefix: answer.body)
        }
        throw .connectionClosed(bytesReceived: answer.received)
    }

    private func validate(_ head: HTTPResponseHead) throws(WebSocketHandshakeError) -> WebSocketClientHandshakeResult {
        let h = head.headers
        guard h.containsToken("websocket", in: "Upgrade") else { throw .missingUpgradeHeader(found: h.combinedValue(for: "Upgrade")) }
        guard h.containsToken("upgrade", in: "Connection") else { throw .missingConnectionUpgrade(found: h.combinedValue(for: "Connection")) }
        let expected = WebSocketHandshake.acceptValue(forKey: key)
        let accept = h.values(for: "Sec-WebSocket-Accept")
        guard accept.count == 1, accept[0] == expected else {
            throw .wrongAcceptKey(expected: expected, received: h.combinedValue(for: "Sec-WebSocket-Accept"))
        }
        var subprotocol: String? = nil
        let protocols = h.listElements(for: "Sec-WebSocket-Protocol")
        if !protocols.isEmpty {
            guard protocols.count == 1, options.subprotocols.contains(protocols[0]) else {
                throw .subprotocolNotOffered(protocols.joined(separator: ", "), offered: options.subprotocols)
            }
            subprotocol = protocols[0]
        }
        var deflate: PerMessageDeflateParameters? = nil
        if let value = h.combinedValue(for: "Sec-WebSocket-Extensions") {
            let elements: [WebSocketExtensionElement]
            do { elements = try WebSocketExtensionElement.parseList(value) } catch { throw .malformedExtensions(error) }
            if let offer = options.deflate {
                do { deflate = try PerMessageDeflateParameters.accept(response: elements, offered: offer) } catch {
                    throw .extensionRejected(error)
                }
            } else if let first = elements.first {
                throw .extensionNotOffered(first.name)
            }
        }
        return WebSocketClientHandshakeResult(response: head, subprotocol: subprotocol, deflate: deflate, remainder: answer.remainder)
    }
}

// MARK: - Server

/// What the server supports.
public struct WebSocketServerOptions: Hashable, Sendable {
    /// Supported subprotocols in preference order (the first one the client offered is chosen).
    public var subprotocols: [String]
    /// permessage-deflate settings, or `nil` to decline every extension.
    public var deflate: PerMessageDeflateOptions?
    public var limits: HTTPHeadLimits

    public init(subprotocols: [String] = [], deflate: PerMessageDeflateOptions? = nil, limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.subprotocols = subprotocols
        self.deflate = deflate
        self.limits = limits
    }
}

/// A valid WebSocket upgrade request.
public struct WebSocketUpgradeRequest: Hashable, Sendable {
    public var head: HTTPRequestHead
    public var path: String { head.path }
    public var query: String? { head.query }
    public var headers: HTTPHeaders { head.headers }
    /// `Sec-WebSocket-Key`.
    public var key: String
    /// Offered subprotocols, in the client's order.
    public var subprotocols: [String]
    /// Offered extensions.
    public var extensions: [WebSocketExtensionElement]
    /// Bytes received after the request head (frames sent early); feed them to the protocol.
    public var remainder: [UInt8]
}

/// The server's answer to an upgrade request.
public struct WebSocketServerAcceptance: Hashable, Sendable {
    /// The `101 Switching Protocols` response bytes to write.
    public var response: [UInt8]
    public var subprotocol: String?
    public var deflate: PerMessageDeflateParameters?
}

/// Server side of the opening handshake (RFC 6455 §4.2), sans-I/O.
public struct WebSocketServerHandshake: Sendable {
    public let options: WebSocketServerOptions
    private var parser: HTTPHeadParser

    public init(options: WebSocketServerOptions = WebSocketServerOptions()) {
        self.options = options
        parser = HTTPHeadParser(limits: options.limits)
    }

    /// Feeds request bytes; returns the validated request when complete. On error, write
    /// `rejectionResponse(for:)` and close the connection.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) throws(WebSocketHandshakeError) -> WebSocketUpgradeRequest? {
        let head: HTTPRequestHead
        do {
            guard let h = try parser.parseRequest(bytes) else { return nil }
            head = h
        } catch {
            throw .http(error)
        }
        let h = head.headers
        guard head.method == "GET" else { throw .methodNotAllowed(head.method) }
        guard head.version.minor >= 1 else { throw .httpVersionTooOld(head.version) }
        guard h["Host"] != nil else { throw .missingHost }
        guard h.containsToken("websocket", in: "Upgrade") else { throw .missingUpgradeHeader(found: h.combinedValue(for: "Upgrade")) }
        guard h.containsToken("upgrade", in: "Connection") else { throw .missingConnectionUpgrade(found: h.combinedValue(for: "Connection")) }
        let versions = h.values(for: "Sec-WebSocket-Version")
        guard versions.count == 1, versions[0] == "13" else { throw .unsupportedVersion(h.combinedValue(for: "Sec-WebSocket-Version")) }
        let keys = h.values(for: "Sec-WebSocket-Key")
        guard keys.count == 1, let decoded = Base64.decode(keys[0]), decoded.count == 16 else {
            throw .invalidKey(h.combinedValue(for: "Sec-WebSocket-Key"))
        }
        var extensions: [WebSocketExtensionElement] = []
        if let value = h.combinedValue(for: "Sec-WebSocket-Extensions") {
            do { extensions = try WebSocketExtensionElement.parseList(value) } catch { throw .malformedExtensions(error) }
        }
        return WebSocketUpgradeRequest(
            head: head, key: keys[0], subprotocols: h.listElements(for: "Sec-WebSocket-Protocol"),
            extensions: extensions, remainder: parser.remainder)
    }

    public mutating func receive(_ bytes: [UInt8]) throws(WebSocketHandshakeError) -> WebSocketUpgradeRequest? {
        try withTypedBytes(bytes) { (raw) throws(WebSocketHandshakeError) in try receive(raw) }
    }

    /// Accepts the request: chooses the subprotocol (the first of `options.subprotocols` that the
    /// client offered, unless `subprotocol` overrides it with one of the offered ones), negotiates
    /// permessage-deflate and builds the 101 response.
    public func accept(_ request: WebSocketUpgradeRequest, subprotocol: String? = nil, headers extra: HTTPHeaders = HTTPHeaders()) -> WebSocketServerAcceptance {
        var headers = HTTPHeaders()
        headers.add(name: "Upgrade", value: "websocket")
        headers.add(name: "Connection", value: "Upgrade")
        headers.add(name: "Sec-WebSocket-Accept", value: WebSocketHandshake.acceptValue(forKey: request.key))
        let chosen = subprotocol.flatMap { request.subprotocols.contains($0) ? $0 : nil }
            ?? options.subprotocols.first { request.subprotocols.contains($0) }
        if let chosen { headers.add(name: "Sec-WebSocket-Protocol", value: chosen) }
        var deflate: PerMessageDeflateParameters? = nil
        if let d = options.deflate, let p = PerMessageDeflateParameters.negotiateResponse(offers: request.extensions, options: d) {
            deflate = p.parameters
            headers.add(name: "Sec-WebSocket-Extensions", value: p.response)
        }
        for f in extra { headers.add(name: f.name, value: f.value) }
        let head = HTTPResponseHead(status: 101, reason: "Switching Protocols", headers: headers)
        return WebSocketServerAcceptance(response: head.serialized(), subprotocol: chosen, deflate: deflate)
    }

    /// The response for a failed handshake: 426 with `Sec-WebSocket-Version: 13` for a version
    /// mismatch, 405 for a method other than GET, 400 otherwise; the body explains the error.
    public static func rejectionResponse(for error: WebSocketHandshakeError) -> [UInt8] {
        var headers = HTTPHeaders()
        let status: Int, reason: String
        switch error {
        case .unsupportedVersion:
            status = 426; reason = "Upgrade Required"
            headers.add(name: "Sec-WebSocket-Version", value: "13")
        case .methodNotAllowed:
            status = 405; reason = "Method Not Allowed"
            headers.add(name: "Allow", value: "GET")
        case .http(.headTooLarge), .http(.tooManyHeaders):
            status = 431; reason = "Request Header Fields Too Large"
        default:
            status = 400; reason = "Bad Request"
        }
        let body = Array((error.description + "\n").utf8)
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Connection", value: "close")
        return HTTPResponseHead(status: status, reason: reason, headers: headers).serialized() + body
    }
}
