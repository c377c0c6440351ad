import Synchronization
import SmarticoProtocol
import SmarticoSocketAPI
import Transport

/// A parsed `api` op (docs/api.md): the call, its checked arguments, and the op's options.
public struct DataAPIRequest: Sendable, Equatable {
    public var call: String
    public var args: DataAPIArgs
    /// Answer with the server's message(s) unchanged instead of the public shape.
    public var raw: Bool
    /// Overrides the call's wait for each server answer.
    public var timeoutMs: Int64?

    public init(call: String, args: DataAPIArgs = DataAPIArgs(), raw: Bool = false, timeoutMs: Int64? = nil) {
        self.call = call
        self.args = args
        self.raw = raw
        self.timeoutMs = timeoutMs
    }

    public var spec: DataAPICallSpec? { DataAPICatalog.call(named: call) }
}

/// The arguments of a call, checked against its ``DataAPICallSpec`` by the request parser: every
/// member is an argument of the call, of its type and range, and every required one is there.
public struct DataAPIArgs: Sendable, Equatable {
    public var object: JSONObject

    public init(_ object: JSONObject = [:]) { self.object = object }

    public func string(_ name: String) -> String? { object[name]?.stringValue }
    public func int(_ name: String) -> Int64? { object[name]?.int64Value }
    public func bool(_ name: String) -> Bool? { object[name]?.boolValue }
    public func double(_ name: String) -> Double? { object[name]?.doubleValue }

    /// Checks `object` against `spec`; errors name the field (`args.from`).
    public static func checked(_ object: JSONObject, for spec: DataAPICallSpec) throws(SocketAPIError) -> DataAPIArgs {
        let known = Dictionary(spec.args.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for (key, value) in object {
            guard let arg = known[key] else {
                let names = spec.args.map(\.name)
                throw .badRequest("field \"args.\(key.prefix(64))\" is not an argument of call \"\(spec.name)\"; "
                    + (names.isEmpty ? "it takes none" : "it takes: \(names.joined(separator: ", "))"))
            }
            if value.isNull { continue }
            let fits: Bool
            switch arg.type {
            case .string: fits = value.stringValue != nil
            case .boolean: fits = value.boolValue != nil
            case .number: fits = value.doubleValue != nil
            case .integer: fits = value.int64Value != nil
            }
            guard fits else { throw wrongType(spec, arg, value) }
            if let range = arg.range, let i = value.int64Value, !range.contains(i) {
                throw .badRequest("field \"args.\(arg.name)\" of call \"\(spec.name)\" must be in \(range.lowerBound)...\(range.upperBound), got \(i)")
            }
        }
        for arg in spec.args where arg.required {
            guard let v = object[arg.name], !v.isNull else {
                throw .badRequest("field \"args.\(arg.name)\" is required by call \"\(spec.name)\" (\(arg.type.rawValue): \(arg.help))")
            }
        }
        return DataAPIArgs(object)
    }

    private static func wrongType(_ spec: DataAPICallSpec, _ arg: DataAPIArg, _ got: JSONValue) -> SocketAPIError {
        let shown = got.numberValue.map { "the number \($0.literal.prefix(40))" } ?? got.type.description
        return .badRequest("field \"args.\(arg.name)\" of call \"\(spec.name)\" must be \(arg.type.phrase), got \(shown)")
    }
}

/// What a call's implementation may do: send requests on the session (as the `request` op does:
/// they wait for the session while offline, time out, and an answer with `errCode` ≠ 0 fails with
/// `server_error`), read INIT's label settings, fetch over HTTP, queue a client event, and keep
/// results in the daemon's small cache. One per call; any context.
public final class DataAPIContext: Sendable {
    public let spec: DataAPICallSpec
    public let args: DataAPIArgs
    public let raw: Bool
    /// The wait for each server answer.
    public let timeoutMs: Int64
    private let host: any DataAPIHost
    private let peer: UInt64
    private let answers = Mutex<[JSONValue]>([])

    init(request: DataAPIRequest, spec: DataAPICallSpec, host: any DataAPIHost, peer: UInt64) {
        self.spec = spec
        args = request.args
        raw = request.raw
        timeoutMs = request.timeoutMs ?? Int64(spec.timeoutMs)
        self.host = host
        self.peer = peer
    }

    /// Sends `{"cid": cid, …payload}` and returns the server's answer (the message with `expect`,
    /// or the request cid's usual answer when nil). Recorded for `raw`.
    public func request(cid: Int, _ payload: JSONObject = [:], expect: Int? = nil) async throws(SocketAPIError) -> JSONObject {
        var message = payload
        message["cid"] = .number(Int64(cid))
        let result = await host.session(.request(message: message, expectCid: expect.map(Int64.init), timeoutMs: timeoutMs), peer: peer)
        switch result {
        case .failure(let error): throw error
        case .success(let answer):
            guard let m = answer["message"]?.objectValue else {
                throw SocketAPIError(.internal, "the answer to cid \(cid) carried no message")
            }
            answers.withLock { $0.append(.object(m)) }
            return m
        }
    }

    /// Sends `{"cid": cid, …payload}` and waits for no answer (the SDK's fire-and-forget reports:
    /// an engagement's impression or click). Nothing is recorded for `raw`.
    public func send(cid: Int, _ payload: JSONObject = [:]) async throws(SocketAPIError) {
        var message = payload
        message["cid"] = .number(Int64(cid))
        if case .failure(let error) = await host.session(.send(message), peer: peer) { throw error }
    }

    /// A label setting from the session's INIT answer (`INBOX_PUBLIC_CDN`), nil when the session has
    /// not had one or it is absent.
    public func labelSetting(_ name: String) async -> JSONValue? {
        await host.labelSettings()?[name]
    }

    /// Where avatar images (and the avatar service) are: ``ImageDomain/resolve(dynamic:label:)`` of
    /// INIT's `DYNAMIC_IMAGE_DOMAIN` and the label environment's image host.
    public func imageDomain() async -> String {
        ImageDomain.resolve(dynamic: await labelSetting("DYNAMIC_IMAGE_DOMAIN")?.stringValue, label: await host.labelImageDomain())
    }

    /// GET `url` through the Transport's HTTP client (the daemon's CA, proxy and timeouts); the
    /// body parsed as JSON. Errors: `timeout`, or `server_error` naming the status or the problem.
    public func httpGetJSON(_ url: String) async throws(SocketAPIError) -> JSONValue {
        try await httpJSON("GET", url) { () async throws(ConnectError) -> HTTPClientResponse in try await host.httpGet(url) }
    }

    /// POST `body` (serialized JSON) to `url` through the Transport's HTTP client, with `headers`
    /// (`Content-Type: application/json` unless given); the answer's body parsed as JSON and recorded
    /// for `raw`. Errors as ``httpGetJSON(_:)``: `timeout`, or `server_error` naming the URL and the
    /// status (with the start of the body) or the problem.
    public func httpPostJSON(_ url: String, body: JSONObject, headers: HTTPHeaders = HTTPHeaders()) async throws(SocketAPIError) -> JSONValue {
        var headers = headers
        if headers["Content-Type"] == nil { headers.add(name: "Content-Type", value: "application/json") }
        let sent = headers
        return try await httpJSON("POST", url) { () async throws(ConnectError) -> HTTPClientResponse in
            try await host.httpPost(url, body: body.serialized(), headers: sent)
        }
    }

    private func httpJSON(_ method: String, _ url: String,
                          _ perform: () async throws(ConnectError) -> HTTPClientResponse) async throws(SocketAPIError) -> JSONValue {
        let response: HTTPClientResponse
        do {
            response = try await perform()
        } catch {
            if case .timeout = error.reason {
                throw SocketAPIError(.timeout, "\(method) \(url): \(error)")
            }
            throw SocketAPIError(.serverError, "\(method) \(url): \(error)")
        }
        guard (200..<300).contains(response.status) else {
            let text = response.text
            let shown = text.isEmpty ? "" : ": " + String(text.prefix(200))
            throw SocketAPIError(.serverError, "\(method) \(url): HTTP \(response.status) \(response.reason)\(method == "GET" ? "" : shown)")
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: response.body)
        } catch {
            throw SocketAPIError(.serverError, "\(method) \(url): the body is not JSON: \(error)")
        }
        answers.withLock { $0.append(value) }
        return value
    }

    /// The label key the daemon connects with (the first 36 characters, as INIT sends it) and its
    /// brand key, for HTTP services that want them in the body (`avatars.customize`).
    public func labelKeys() async -> (key: String, brandKey: String?) { await host.labelKeys() }

    /// The external id of the user the call was made for (nil while anonymous).
    public var userExtID: String? { host.userExtID }

    /// Queues a client event (`{"eventType", "payload"}`, as the `event` op), like the SDK's side
    /// effects (`gf_nickname_changed`, `minigame_attempt`).
    public func event(_ type: String, payload: JSONObject) async throws(SocketAPIError) {
        let result = await host.session(.event(eventType: type, payload: payload), peer: peer)
        if case .failure(let error) = result { throw error }
    }

    /// The identified user's public props as the daemon keeps them (IDENTIFY's, merged with the
    /// 108 pushes), nil while none is identified: what `getUserProfile` reads.
    public func publicProps() async -> JSONObject? { await host.publicProps() }

    /// The daemon's cache of call results (bounded; per key, e.g. an inbox body by guid).
    public var cache: DataAPICache { host.cache }

    /// Wall-clock milliseconds (what derived fields compare with).
    public func nowMs() -> Int64 { host.nowMs() }

    /// What `raw: true` answers: the server's message unchanged when the call made one request,
    /// else all of them (and the HTTP bodies fetched) in order.
    public var rawAnswer: JSONValue {
        let all = answers.withLock { $0 }
        return all.count == 1 ? all[0] : .array(all)
    }
}

/// What the daemon gives the calls (the session driver).
protocol DataAPIHost: Sendable {
    func session(_ request: SessionRequest, peer: UInt64) async -> Result<JSONValue, SocketAPIError>
    func labelSettings() async -> JSONObject?
    func httpGet(_ url: String) async throws(ConnectError) -> HTTPClientResponse
    func httpPost(_ url: String, body: [UInt8], headers: HTTPHeaders) async throws(ConnectError) -> HTTPClientResponse
    func labelKeys() async -> (key: String, brandKey: String?)
    /// The label environment's image host (`img[N].smr.vc`).
    func labelImageDomain() async -> String
    var userExtID: String? { get }
    var cache: DataAPICache { get }
    func nowMs() -> Int64
    func publicProps() async -> JSONObject?
}

extension DataAPIHost {
    func publicProps() async -> JSONObject? { nil }
}

/// The one rule for the host of avatar images, wherever the daemon hands out an avatar URL (the
/// `identified` event, the data API's profiles, leaderboards and clans, the avatar service):
/// INIT's `DYNAMIC_IMAGE_DOMAIN` when the session has one (002 §1.6), else the label environment's
/// image host `img[N].smr.vc`, which is all the SDK uses. `https://` when it names no scheme; no
/// trailing `/`.
public enum ImageDomain {
    public static func resolve(dynamic: String?, label: String) -> String {
        var domain = Substring(dynamic.flatMap { $0.isEmpty ? nil : $0 } ?? label)
        while domain.last == "/" { domain = domain.dropLast() }
        return domain.contains("://") ? String(domain) : "https://" + domain
    }

    /// An `avatar_id` as a URL: kept when it already is one (`http…`), else `<domain>/avatar/<id>`
    /// (the id one encoded path segment; nil for `.` and `..`).
    public static func avatarURL(_ avatarID: String, domain: String) -> String? {
        avatarID.hasPrefix("http") ? avatarID : WrapperURL.pathSegment(avatarID).map { domain + "/avatar/" + $0 }
    }
}

/// A small bounded map of call results: at most `capacity` entries and `maxBytes` of their JSON
/// text together (an inbox body may be up to the HTTP client's 1 MiB, so a count alone would let a
/// CDN fill hundreds of MiB); the oldest entries go first, and a value larger than `maxBytes` is not
/// kept. Any thread.
public final class DataAPICache: Sendable {
    private struct State {
        var values: [String: (value: JSONValue, bytes: Int)] = [:]
        var order: [String] = []
        var bytes = 0
    }
    private let state = Mutex(State())
    public let capacity: Int
    public let maxBytes: Int

    public init(capacity: Int = 512, maxBytes: Int = 4 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
    }

    public subscript(key: String) -> JSONValue? {
        get { state.withLock { $0.values[key]?.value } }
        set {
            let size = newValue.map { $0.serialized().count + key.utf8.count } ?? 0
            state.withLock { s in
                if let old = s.values.removeValue(forKey: key) {
                    s.bytes -= old.bytes
                    s.order.removeAll { $0 == key }
                }
                guard let newValue, size <= maxBytes else { return }
                s.values[key] = (newValue, size)
                s.order.append(key)
                s.bytes += size
                while s.order.count > capacity || s.bytes > maxBytes {
                    let oldest = s.order.removeFirst()
                    s.bytes -= s.values.removeValue(forKey: oldest)?.bytes ?? 0
                }
            }
        }
    }

    /// Entries and their bytes now.
    public var usage: (entries: Int, bytes: Int) { state.withLock { ($0.values.count, $0.bytes) } }

    public func removeAll() { state.withLock { $0 = State() } }
}

/// One call's implementation: the public shape (``DataAPIContext/rawAnswer`` is used instead when
/// the op says `raw`).
typealias DataAPIRun = @Sendable (DataAPIContext) async throws(SocketAPIError) -> JSONValue

/// Every call's implementation, by name (a test checks it matches ``DataAPICatalog``).
enum DataAPIImplementations {
    static let all: [String: DataAPIRun] = {
        var all: [String: DataAPIRun] = [:]
        for area in [AchievementAPI.implementations, InboxStoreAPI.implementations, CompetitionAPI.implementations, GameAPI.implementations] {
            all.merge(area) { a, _ in a }
        }
        return all
    }()

    /// Runs `request` (its spec exists: the parser checked) and answers `reply`.
    static func run(_ request: DataAPIRequest, host: any DataAPIHost, peer: UInt64) async -> Result<JSONValue, SocketAPIError> {
        guard let spec = request.spec, let run = all[request.call] else {
            return .failure(SocketAPIError(.notImplemented, "call \"\(request.call)\" has no implementation in this daemon"))
        }
        let context = DataAPIContext(request: request, spec: spec, host: host, peer: peer)
        do {
            let shaped = try await run(context)
            return .success(request.raw ? context.rawAnswer : shaped)
        } catch {
            return .failure(error)
        }
    }
}
