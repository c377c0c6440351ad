import SmarticoProtocol

/// State shared by every connection of one simulator: configuration, global faults, pending
/// engagements per user, the push generator and the random source.
public struct SimContext: Sendable {
    public var config: SimConfig
    public var globalFaults = SimFaultModes()
    public var pending: SimPendingEngagements
    public var pushes: SimPushGenerator
    public var random: SimRandom
    /// Fault actions armed for "the next message with this cid from any client" (fire once).
    public var armed: [SimArmedFault] = []
    /// The simulated data API's state of each user (SimData), made on first use.
    public var userData: [String: SimUserData] = [:]
    /// One-shot replacements of the next data API answer, by request cid (`data_fault` control op).
    public var dataFaults: [Int64: SimDataFault] = [:]

    public init(config: SimConfig, random: SimRandom = SimRandom()) {
        self.config = config
        pending = SimPendingEngagements(maxPerUser: config.maxPendingPerUser, maxBytes: config.maxPendingBytes)
        pushes = SimPushGenerator(templateBytes: config.templateBytes)
        self.random = random
    }
}

/// The server side of one client connection, sans I/O: client messages (read by `SimValidator`) and `now` in,
/// `SimAction`s out. Keepalive is driven by `tick(now:context:)`.
///
/// Lifecycle: `awaitingInit` → (INIT accepted) `ready` → `closed` (after any close output).
/// In `ready` the connection may be identified (`user`), and LOGOUT makes it anonymous again.
public struct SimServerSession: Sendable {
    public enum State: String, Sendable, Equatable {
        case awaitingInit = "awaiting_init"
        case ready
        case closed
    }

    /// `c1`, `c2`, …
    public let id: String
    /// The peer's address as text (`127.0.0.1:50312`).
    public let remote: String
    /// The peer's IP (INIT_SESSION_RESPONSE `payload.ip`).
    public let remoteIP: String
    public let connectedAt: Int64
    public private(set) var state: State = .awaitingInit
    /// INIT's `session_id`.
    public private(set) var sessionID: String?
    /// INIT's `label_key` and `brand_key`.
    public private(set) var labelKey: String?
    public private(set) var brandKey: String?
    /// The identified user (`ext_user_id` of the accepted IDENTIFY).
    public private(set) var user: String?
    /// The last push token from IDENTIFY or 1003.
    public private(set) var pushToken: String?
    /// Fault modes of this client (override the global ones).
    public var faults = SimFaultModes()
    /// Fault actions waiting for a message with a given cid.
    public var armed: [SimArmedFault] = []
    /// When the next server PING is due (nil: server pings disabled).
    public private(set) var nextPingAt: Int64?
    /// When the client is dropped unless a PONG arrives (nil: no PING outstanding).
    public private(set) var pongDeadline: Int64?
    /// Server PINGs sent and PONGs received (diagnostics).
    public private(set) var pingsSent = 0
    public private(set) var pongsReceived = 0
    /// Client PINGs received, and those left without a PONG (`withhold_pong`, quirks).
    public private(set) var pingsReceived = 0
    public private(set) var pongsWithheld = 0

    public init(id: String, remote: String, remoteIP: String? = nil, now: Int64, config: SimConfig) {
        self.id = id
        self.remote = remote
        self.remoteIP = remoteIP ?? Self.ip(of: remote)
        connectedAt = now
        nextPingAt = config.pingIntervalMs > 0 ? now + config.pingIntervalMs : nil
    }

    static func ip(of remote: String) -> String {
        if remote.hasPrefix("["), let end = remote.firstIndex(of: "]") {
            return String(remote[remote.index(after: remote.startIndex)..<end])
        }
        if let colon = remote.lastIndex(of: ":"), remote.firstIndex(of: ":") == colon { return String(remote[..<colon]) }
        return remote
    }

    /// The fault modes in force for this client (its own over the global ones).
    public func effectiveFaults(_ context: SimContext) -> SimFaultModes { faults.over(context.globalFaults) }

    private func isHalfOpen(_ context: SimContext) -> Bool { effectiveFaults(context).halfOpen == true }

    // MARK: - Input

    /// Handles one client message, read by `SimValidator` (`reading`): refused messages get
    /// their answer cid with the refusal's `errCode` (nothing for fire-and-forget cids).
    public mutating func handle(_ request: JSONObject, cid: Int64, reading: SimReading, now: Int64,
                                context: inout SimContext) -> [SimAction] {
        guard state != .closed, !isHalfOpen(context) else { return [] }
        if let fault = takeArmed(cid: cid, context: &context) { return perform(fault, now: now) }
        if let why = reading.refusal { return refuse(request, cid: cid, why: why, code: reading.errCode, now: now, context: &context) }

        switch cid {
        case 1:
            pingsReceived += 1
            if effectiveFaults(context).withholdPong ?? (context.config.withholdPong || quirks(context)) {
                pongsWithheld += 1
                return []
            }
            return [answer(["cid": 2], to: nil, now: now, context: &context)]
        case 2:
            pongsReceived += 1
            pongDeadline = nil
            return []
        case 3:
            return handleInit(request, now: now, context: &context)
        default:
            break
        }
        guard state == .ready else {
            guard let responseCID = Self.answerCID(forRequest: cid) else { return [] }
            return [error(responseCID, SimErrorCode.notInitialized,
                          "session not initialised: send INIT_SESSION_REQUEST (cid 3) first", to: request, now: now, context: &context)]
        }

        switch cid {
        case 5:
            return handleIdentify(request, now: now, context: &context)
        case 7, 9:
            return [answer(Self.success(cid == 7 ? 11 : 10), to: request, now: now, context: &context)]
        case 8:
            user = nil
            return [answer(Self.success(12), to: request, now: now, context: &context)]
        case 1003:
            pushToken = request["token"]?.stringValue
            return [answer(Self.success(2003), to: request, now: now, context: &context)]
        case 103, 104, 106:
            if let user, let uid = request["engagement_uid"]?.stringValue { context.pending.remove(uid: uid, user: user) }
            return []
        case 711, 77777:
            return []
        default:
            return handleOther(cid, request, now: now, context: &context)
        }
    }

    /// `{errCode: 0, errMsg: null, cid}`.
    static func success(_ cid: Int64) -> JSONObject { ["errCode": 0, "errMsg": .null, "cid": .number(cid)] }

    /// The answer to a refused message (the refusal is in the received log too).
    private mutating func refuse(_ json: JSONObject, cid: Int64, why: String, code: Int64, now: Int64,
                                 context: inout SimContext) -> [SimAction] {
        if cid == 3, code == SimErrorCode.emptySessionID {
            // The notes: the real backend rejects the connection (and blocks the IP).
            let answer = self.error(4, code, why, to: json, now: now, context: &context)
            state = .closed
            return [answer, SimAction(client: id, output: .close(code: 1008, reason: "empty session_id"), at: answer.at)]
        }
        guard let responseCID = Self.answerCID(forRequest: cid) else { return [] }
        if state != .ready, cid != 3 {
            return [self.error(responseCID, SimErrorCode.notInitialized,
                               "session not initialised: send INIT_SESSION_REQUEST (cid 3) first", to: json, now: now, context: &context)]
        }
        return [self.error(responseCID, code, why, to: json, now: now, context: &context)]
    }

    /// The cid of the answer to a client message, or nil when nobody answers it (PING/PONG are
    /// handled apart; reports, 711 and 77777 are fire-and-forget). Unknown cids are answered by
    /// 99999 UNSUPPORTED_COMMAND.
    static func answerCID(forRequest cid: Int64) -> Int64? {
        switch cid {
        case 1, 2, 103, 104, 106, 711, 77777: nil
        case 3: 4
        case 5: 6
        case 7: 11
        case 8: 12
        case 9: 10
        case 1003: 2003
        default:
            if let route = SimData.routes[cid] { route.response }
            else { samples[cid] != nil ? cid + 1 : 99999 }
        }
    }

    /// Answer cids the real server sends with a fresh `uuid` instead of the request's (the SDK
    /// matches these by cid: "SAW_GET_SPINS_RESPONSE arrives with a fresh uuid").
    public static let freshUUIDResponses: Set<Int64> = [701]

    /// Quirks mode for this client (fault over `--quirks`).
    func quirks(_ context: SimContext) -> Bool { effectiveFaults(context).quirks ?? context.config.quirks }

    private mutating func handleInit(_ json: JSONObject, now: Int64, context: inout SimContext) -> [SimAction] {
        guard state == .awaitingInit else {
            return [error(4, SimErrorCode.alreadyDone,
                          "session already initialised on this connection (session_id \(sessionID ?? "")); open a new connection",
                          to: json, now: now, context: &context)]
        }
        let key = json["label_key"]?.stringValue ?? ""
        if let configured = context.config.labelKey, key != String(configured.prefix(SimValidator.labelKeyLength)) {
            return [error(4, SimErrorCode.wrongCustomer,
                          "unknown label_key \"\(key.truncatedUTF8(64))\"", to: json, now: now, context: &context)]
        }
        let modes = effectiveFaults(context)
        if let code = modes.rejectInit {
            return [error(4, code, modes.rejectInitMessage ?? "INIT rejected (fault mode)", to: json, now: now, context: &context)]
        }
        state = .ready
        let sid = json["session_id"]?.stringValue ?? ""
        sessionID = sid
        labelKey = context.config.labelKey ?? key
        brandKey = context.config.brandKey ?? json["brand_key"]?.stringValue
        // 002 §1.2's example, field by field.
        let response: JSONObject = [
            "cid": 4, "errCode": 0, "errMsg": .null,
            "products": .array(context.config.products.map { .number($0) }),
            "payload": ["country": "ZZ", "s": "sim01", "city": "Localhost", "ip": .string(remoteIP),
                        "sessionId": .string(String(sid.prefix(4)))],
            "settings": ["FCM_SENDER_ID": .string(context.config.fcmSenderID),
                         "DYNAMIC_IMAGE_DOMAIN": .string(context.config.httpBaseURL + "/"),
                         // The inbox bodies' CDN: the SDK fetches INBOX_PUBLIC_CDN + guid + ".json".
                         "INBOX_PUBLIC_CDN": .string(context.config.httpBaseURL + "/inbox/"),
                         // The leaderboard privacy flags (api leaderboards.settings): a JSON string, as the label stores it.
                         "GAMIFICATION_UI_SETTINGS_V2": #"{"hide_avatars_leaderboards":true,"leaderboard_hide_levels":false}"#],
        ]
        return [answer(response, to: json, now: now, context: &context)]
    }

    private mutating func handleIdentify(_ json: JSONObject, now: Int64, context: inout SimContext) -> [SimAction] {
        let responseCID: Int64 = 6
        if let user {
            return [error(responseCID, SimErrorCode.alreadyDone,
                          "already identified as \"\(user.truncatedUTF8(64))\" on this connection: close it and reconnect to identify again",
                          to: json, now: now, context: &context)]
        }
        let modes = effectiveFaults(context)
        if let code = modes.rejectIdentify {
            return [error(responseCID, code, modes.rejectIdentifyMessage ?? "IDENTIFY rejected (fault mode)", to: json, now: now, context: &context)]
        }
        let extUserID = json["ext_user_id"]?.stringValue ?? ""
        if let salt = context.config.hashSalt,
           case .failure(let why) = SimHash.check(json["hash"]?.stringValue, extUserID: extUserID, salt: salt, now: now) {
            return [error(responseCID, SimErrorCode.invalidHash, why.description, to: json, now: now, context: &context)]
        }
        user = extUserID
        if let token = json["token"]?.stringValue { pushToken = token }
        // 002 §1.6's example, field by field.
        let response: JSONObject = [
            "props": .object(Self.props(for: extUserID)),
            "public_username": .string(extUserID),
            "avatar_id": .string(Self.avatarID(for: extUserID)),
            "native_app_gf_url": .string(wrapperURL("wrapper-gf.html", user: extUserID, context: context)),
            "native_app_popup_url": .string(wrapperURL("wrapper-popup.html", user: extUserID, context: context)),
            "errCode": 0, "errMsg": .null, "cid": .number(responseCID),
        ]
        let first = answer(response, to: json, now: now, context: &context)
        var actions = [first]
        // The real server re-delivers the engagements still pending for this user.
        for engagement in context.pending.pending(for: extUserID) {
            actions.append(SimAction(client: id, output: .text(stamp(engagement, uuid: nil, now: now, context: &context)), at: first.at))
        }
        return actions
    }

    /// `<http base>/<page>?label_key=…&brand_key=…&user_ext_id=…` (002 §1.6).
    func wrapperURL(_ page: String, user: String, context: SimContext) -> String {
        var url = "\(context.config.httpBaseURL)/\(page)?label_key=\(WrapperURL.percentEncode(labelKey ?? ""))"
        if let brandKey { url += "&brand_key=\(WrapperURL.percentEncode(brandKey))" }
        url += "&user_ext_id=\(WrapperURL.percentEncode(user))"
        return url
    }

    /// A stable numeric avatar id per user (like 002's "3902924573654987").
    public static func avatarID(for user: String) -> String {
        String(UInt64(SimHash.md5Hex(user).prefix(13), radix: 16) ?? 0)
    }

    static func props(for user: String) -> JSONObject {
        ["ach_points_ever": 3605, "ach_points_balance": 3570, "ach_level_current": "Level E",
         "core_is_test_account": .bool(user.hasPrefix("test")), "core_public_username": .string(user)]
    }

    // MARK: - Request/response samples

    /// Requests answered with sample data: 13 → 14 translations. (500 levels, 513 inbox and
    /// 700 → 701 mini-game templates are data routes, SimData; 701 still gets a fresh uuid.)
    static let samples: [Int64: (needsUser: Bool, body: JSONObject)] = [
        13: (false, [
            "lang_code": "EN",
            "translations": ["gf_levels": "Levels", "gf_missions": "Missions", "gf_store": "Store", "gf_close": "Close"],
        ]),
    ]

    private mutating func handleOther(_ cid: Int64, _ request: JSONObject, now: Int64, context: inout SimContext) -> [SimAction] {
        if let route = SimData.routes[cid] { return handleData(route, request, now: now, context: &context) }
        guard let responseCID = Self.answerCID(forRequest: cid) else { return [] }
        if let (needsUser, body) = Self.samples[cid] {
            if needsUser, user == nil {
                return [error(responseCID, SimErrorCode.notIdentified,
                              "cid \(cid) needs an identified user: send IDENTIFY_USER_REQUEST (cid 5) first", to: request, now: now, context: &context)]
            }
            var o = body
            o["errCode"] = 0
            o["errMsg"] = .null
            o["cid"] = .number(responseCID)
            return [answer(o, to: request, now: now, context: &context)]
        }
        let name = ClassID(cid).name.map { " (\($0))" } ?? ""
        let o: JSONObject = ["errCode": .number(SimErrorCode.unsupportedCommand),
                             "errMsg": .string("unsupported command: cid \(cid)\(name)"),
                             "request_cid": .number(cid), "cid": 99999]
        return [answer(o, to: request, now: now, context: &context)]
    }

    /// A data API request (SimData): needs an identified user; the route's answer gets `cid`,
    /// `errCode` 0 and `errMsg` null unless it sets them.
    private mutating func handleData(_ route: SimDataRoute, _ request: JSONObject, now: Int64, context: inout SimContext) -> [SimAction] {
        guard let user else {
            guard let responseCID = route.response else { return [] }
            return [error(responseCID, SimErrorCode.notIdentified,
                          "cid \(route.request) needs an identified user: send IDENTIFY_USER_REQUEST (cid 5) first", to: request, now: now, context: &context)]
        }
        var body: JSONObject
        switch context.dataFaults.removeValue(forKey: route.request) {
        case .silent?:
            return []
        case .error(let code, let message)?:
            body = ["errCode": .number(code), "errMsg": message.map(JSONValue.string) ?? .null]
        case .replace(let replacement)?:
            body = replacement
        case nil:
            let env = SimDataEnvironment(user: user, now: now, httpBaseURL: context.config.httpBaseURL)
            var data = context.userData[user] ?? SimUserData()
            body = route.handle(request, &data, env)
            context.userData[user] = data
        }
        guard let responseCID = route.response else { return [] }
        if body["errCode"] == nil { body["errCode"] = 0 }
        if body["errMsg"] == nil { body["errMsg"] = .null }
        body["cid"] = .number(responseCID)
        return [answer(body, to: request, now: now, context: &context)]
    }

    // MARK: - Output helpers

    private mutating func error(_ responseCID: Int64, _ code: Int64, _ message: String, to request: JSONObject,
                                now: Int64, context: inout SimContext) -> SimAction {
        let o: JSONObject = ["errCode": .number(code), "errMsg": .string(message), "cid": .number(responseCID)]
        return answer(o, to: request, now: now, context: &context)
    }

    /// An answer: `ts`, the request's `uuid` (when echoing, see `echoes`) or a fresh one, the
    /// quirks when on, sent after the delay fault.
    private mutating func answer(_ body: JSONObject, to request: JSONObject?, now: Int64, context: inout SimContext) -> SimAction {
        let modes = effectiveFaults(context)
        let cid = body["cid"]?.int64Value ?? 0
        let uuid = echoes(cid, context) ? request?["uuid"]?.stringValue : nil
        var body = body
        if let fields = modes.answerFields?[cid], (body["errCode"]?.int64Value ?? 0) == 0 {
            for (key, value) in fields {
                if case .object(let inner)? = body[key], case .object(let extra) = value {
                    body[key] = .object(inner.merging(extra))
                } else {
                    body[key] = value
                }
            }
        }
        let bytes = stamp(quirks(context) ? SimQuirks.apply(body) : body, uuid: uuid, now: now, context: &context)
        return SimAction(client: id, output: .text(bytes), at: now + max(0, modes.delayMs ?? 0))
    }

    /// Whether an answer with `cid` echoes the request's uuid: the `uuid_echo` fault, else fresh
    /// in quirks mode, else `--echo-uuids`/`--no-echo-uuid`, else as the real server
    /// (`freshUUIDResponses` get a fresh one).
    func echoes(_ cid: Int64, _ context: SimContext) -> Bool {
        if let e = effectiveFaults(context).echoUUID { return e }
        if quirks(context) { return false }
        switch context.config.uuidEcho {
        case .always: return true
        case .never: return false
        case .asServer: return !Self.freshUUIDResponses.contains(cid)
        }
    }

    /// `body` with `ts` = now and `uuid` (given or fresh), serialized.
    private func stamp(_ body: JSONObject, uuid: String?, now: Int64, context: inout SimContext) -> [UInt8] {
        var o = body
        o["ts"] = .number(now)
        o["uuid"] = .string(uuid ?? context.random.uuid())
        return o.serialized()
    }

    /// This client's armed fault for `cid`, else a global one (each fires once).
    private mutating func takeArmed(cid: Int64, context: inout SimContext) -> SimFaultAction? {
        if let i = armed.firstIndex(where: { $0.cid == cid }) { return armed.remove(at: i).action }
        if let i = context.armed.firstIndex(where: { $0.cid == cid }) { return context.armed.remove(at: i).action }
        return nil
    }

    /// Performs a fault action now.
    public mutating func perform(_ action: SimFaultAction, now: Int64) -> [SimAction] {
        guard state != .closed else { return [] }
        if action.closes { state = .closed }
        return [SimAction(client: id, output: action.output, at: now)]
    }

    // MARK: - Pushes and keepalive

    /// Sends a server push (stamped with `ts` and a fresh `uuid` unless it has them). A 110 to an
    /// identified client becomes pending for its user until a 103/104/106 reports it.
    public mutating func push(_ message: JSONObject, now: Int64, context: inout SimContext) -> [SimAction] {
        guard state != .closed, !isHalfOpen(context) else { return [] }
        var o = quirks(context) ? SimQuirks.apply(message) : message
        if o["ts"] == nil { o["ts"] = .number(now) }
        if o["uuid"] == nil { o["uuid"] = .string(context.random.uuid()) }
        let bytes = o.serialized()
        if o["cid"]?.lenientInt64 == 110, let user {
            context.pending.add(o, user: user, serializedSize: bytes.count)
        }
        return [SimAction(client: id, output: .text(bytes), at: now)]
    }

    /// Keepalive: a PING when due; a close (1001) when a PING went unanswered for the pong timeout.
    public mutating func tick(now: Int64, context: inout SimContext) -> [SimAction] {
        guard state != .closed, !isHalfOpen(context) else { return [] }
        if let deadline = pongDeadline, now >= deadline {
            state = .closed
            return [SimAction(client: id, output: .close(code: 1001, reason: "no PONG within \(context.config.pongTimeoutMs) ms"), at: now)]
        }
        guard let due = nextPingAt, now >= due else { return [] }
        let interval = context.config.pingIntervalMs
        nextPingAt = interval > 0 ? now + interval : nil
        if pongDeadline == nil { pongDeadline = now + max(0, context.config.pongTimeoutMs) }
        pingsSent += 1
        return [SimAction(client: id, output: .text(stamp(["cid": 1], uuid: nil, now: now, context: &context)), at: now)]
    }

    /// The earliest time `tick` has something to do (nil: nothing scheduled).
    public func nextDeadline(_ context: SimContext) -> Int64? {
        guard state != .closed, !isHalfOpen(context) else { return nil }
        switch (nextPingAt, pongDeadline) {
        case (let a?, let b?): return min(a, b)
        case (let a?, nil): return a
        case (nil, let b?): return b
        case (nil, nil): return nil
        }
    }

    /// Marks the connection closed (the I/O layer saw it end).
    public mutating func markClosed() { state = .closed }

    /// The entry of the `clients` control op.
    public func summary(_ context: SimContext) -> JSONObject {
        var o: JSONObject = ["id": .string(id), "state": .string(state.rawValue), "remote": .string(remote),
                             "connected_at": .number(connectedAt)]
        o["session_id"] = sessionID.map(JSONValue.string) ?? .null
        o["user"] = user.map(JSONValue.string) ?? .null
        o["label_key"] = labelKey.map(JSONValue.string) ?? .null
        o["brand_key"] = brandKey.map(JSONValue.string) ?? .null
        o["push_token"] = pushToken.map(JSONValue.string) ?? .null
        o["pings_sent"] = .number(pingsSent)
        o["pongs_received"] = .number(pongsReceived)
        o["pings_received"] = .number(pingsReceived)
        o["pongs_withheld"] = .number(pongsWithheld)
        if !faults.isEmpty { o["faults"] = .object(SimControl.faultsJSON(faults)) }
        if !armed.isEmpty { o["armed"] = .array(armed.map { .object(SimControl.armedJSON($0)) }) }
        return o
    }
}
