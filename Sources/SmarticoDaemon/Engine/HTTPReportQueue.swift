import Logging
import Synchronization
import SmarticoProtocol
import Transport

/// Smartico's public HTTP API (002 §4, §5): `push_report` and push tokens over HTTP, delivered
/// durably (docs/operations.md, "The HTTP queue").
///
/// A call is stored in the store's `http_queue` table before the op answers, then sent by this
/// actor's own task, oldest first, one at a time: a 2xx removes it (never sent again), a network
/// error or a 5xx keeps it at the head and waits (exponential backoff, jitter, persisted in the
/// row so that a restart keeps the order and the delay), another status drops it with an
/// `error` event (`push_report_dropped`). The WebSocket session never waits for any of this: the
/// actor has its own task, apart from the driver's FIFO; its I/O is the Transport's non-blocking
/// client and its SQLite work runs on the store's own thread. Like the driver, its executor is the
/// daemon's ``EventLoop`` (never the global concurrent executor, which would start libdispatch's
/// threads, docs/transport.md): its waits are loop timers.
actor HTTPReportQueue {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let store: SmarticoStore
    private var config: ResolvedConfig
    private var options: HTTPClientOptions
    private let logger: Logger
    /// Hands an `error` event to the driver (which numbers and publishes it).
    private let emit: @Sendable (DaemonEvent) -> Void
    private let connections = HTTPConnectionCache()
    private var task: Task<Void, Never>?
    private var stopped = false
    /// The run loop's wait, ended early by ``wakeUp()``.
    private var waiter: CheckedContinuation<Void, Never>?
    private var waitToken = 0
    /// A poke that came while the loop was not waiting (it looks at the queue again at once).
    private var poked = false
    /// The last failed attempt or drop.
    private var lastError: (message: String, atMs: Int64)?
    /// Delivered calls the store has not removed yet (a failed DELETE): never sent again.
    private var removalPending: Set<String> = []
    /// The user the daemon acts for, as the driver last said (``setUser(_:)``).
    private var currentUser: String?
    private(set) var delivered = 0
    private(set) var dropped = 0
    private(set) var failedAttempts = 0

    /// How long a call waiting for a user sleeps between looks (``setUser(_:)`` ends it early).
    static let userPollInterval: Duration = .seconds(5)

    init(store: SmarticoStore, config: ResolvedConfig, loop: EventLoop, logger: Logger,
         emit: @escaping @Sendable (DaemonEvent) -> Void) {
        self.store = store
        self.config = config
        self.loop = loop
        self.logger = logger
        self.emit = emit
        options = Self.clientOptions(config)
    }

    static func clientOptions(_ config: ResolvedConfig) -> HTTPClientOptions {
        let tlsConfig = config.config.server.tls
        let http = config.config.http
        var o = HTTPClientOptions(
            // The CA file, not the pins: pins name the WebSocket server's keys, and the API host has its own.
            tls: TLSClientConfiguration(trustRoots: tlsConfig.caFile.map { .caFile($0) } ?? .system),
            proxy: config.publicAPIProxy,
            timeout: .seconds(http.connectTimeoutS + http.responseTimeoutS), maxResponseSize: 1 << 20)
        o.connectTimeout = .seconds(http.connectTimeoutS)
        o.responseTimeout = .seconds(http.responseTimeoutS)
        return o
    }

    // MARK: Control

    func start() {
        guard task == nil else { return }
        task = Task(executorPreference: loop) { await self.run() }
    }

    /// Ends the run loop and closes the kept connection. A call in flight is waited for at most
    /// `stopWait`: a slow endpoint must not hold up SIGTERM. Then it is cancelled (its connection
    /// closed) and the run loop ends: it stays stored (no 2xx was recorded, no failed attempt
    /// either) and is sent again after the restart. Before, the call was abandoned still awaiting
    /// its response, and its task, connection and timer were never freed (LeakSanitizer,
    /// docs/reliability.md "Sanitizers").
    func stop() async {
        stopped = true
        wakeUp()
        if let task {
            if !(await finished(task, within: Self.stopWait)) {
                task.cancel()
                // Cancelling closes the connection and throws at once; bounded all the same.
                _ = await finished(task, within: Self.stopWait)
            }
        }
        task = nil
        await connections.close(on: loop)
    }

    /// Whether `task` ended within `limit` (a loop timer bounds the wait).
    private func finished(_ task: Task<Void, Never>, within limit: Duration) async -> Bool {
        let once = ResumeOnce()
        let ended = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            Task(executorPreference: loop) { await task.value; if once.first() { c.resume(returning: true) } }
            let t = LoopTimer(loop: loop) { if once.first() { c.resume(returning: false) } }
            t.schedule(after: limit)
            stopTimer = t
        }
        stopTimer?.invalidate()
        stopTimer = nil
        return ended
    }

    static let stopWait: Duration = .seconds(1)
    private var stopTimer: LoopTimer?

    func reload(_ newConfig: ResolvedConfig) {
        config = newConfig
        options = Self.clientOptions(newConfig)
        wakeUp()
    }

    /// The user the daemon acts for (nil: anonymous), for the calls made before any user was known;
    /// a new one gets `user.push.token` registered when `register_via` is `"http"`.
    func setUser(_ user: String?) async {
        guard user != currentUser else { return }
        currentUser = user
        guard let user else { return }
        wakeUp()
        await registerConfiguredToken(for: user)
    }

    /// `user.push.token` with `register_via: "http"`: registered once per user and token (remembered
    /// in the store as `http_push_registered`), when that user becomes the daemon's user.
    private func registerConfiguredToken(for user: String) async {
        let push = config.config.user.push
        guard push.registerVia == .http, let token = push.token?.exposedValue else { return }
        let key = Array("\(user)\n\(token)\n\(push.platform)\n\(push.status)\n\(push.appPackageID ?? "")".utf8)
        do {
            if try await store.metaValue("http_push_registered") == key { return }
            _ = try await enqueueToken(token: token, platform: push.platform, status: push.status,
                                       appPackageID: push.appPackageID, user: user, nowMs: Self.wallClockMs())
            try await store.setMetaValue("http_push_registered", key)
        } catch {
            logger.error("user.push.token could not be queued for registration over HTTP: \(error)")
        }
    }

    /// The `push_report` op: queued for `user` (the one named, else the daemon's; none: the next one known).
    func answerReport(_ request: PushReportRequest, user: String?) async -> Result<JSONValue, SocketAPIError> {
        do {
            let uuid = try await enqueueReport(request, user: user, nowMs: Self.wallClockMs())
            return .success(["queued": true, "uuid": .string(uuid), "waiting_for_user": .bool(user == nil)])
        } catch {
            return .failure(Self.refusal(error, what: "push_report"))
        }
    }

    /// `push_token` with `user.push.register_via: "http"`: the POST of 002 §4 through this queue, for
    /// `user` (none yet: the next one known). Nothing goes over the WebSocket.
    func answerToken(token: String, platform: Int?, status: Int, appPackageID: String?, user: String?) async
        -> Result<JSONValue, SocketAPIError>
    {
        guard !token.isEmpty else { return .failure(SocketAPIError(.badRequest, "field \"token\" of op \"push_token\" must not be empty")) }
        do {
            let uuid = try await enqueueToken(
                token: token, platform: platform ?? config.config.user.push.platform, status: status, appPackageID: appPackageID,
                user: user, nowMs: Self.wallClockMs())
            return .success(["queued": true, "via": "http", "uuid": .string(uuid), "waiting_for_user": .bool(user == nil)])
        } catch {
            return .failure(Self.refusal(error, what: "push_token"))
        }
    }

    static func refusal(_ error: StoreError, what: String) -> SocketAPIError {
        if case .queueFull(let max) = error {
            return SocketAPIError(.queueFull, "\(what) refused: \(max) calls wait in the HTTP queue (http.max_queue); see status.http_queue.last_error")
        }
        return SocketAPIError(.internal, "\(what) could not be stored: \(error)")
    }

    // MARK: Enqueue

    /// Stores a `push_report` (002 §5) for `user` (nil: the next user known). On return it is on disk.
    func enqueueReport(_ r: PushReportRequest, user: String?, nowMs: Int64) async throws(StoreError) -> String {
        let uuid = SmarticoStore.makeUUID()
        var payload: JSONObject = ["engagement_uid": .string(r.engagementUID)]
        if let m = r.messageID { payload["message_id"] = .string(m) }
        payload["activity_type"] = 40
        if r.kind == .action, let a = r.action { payload["action"] = .string(a) }
        let event: JSONObject = [
            "uuid": .string(uuid), "ts": .number(nowMs), "event_type": .string("engagement_" + r.kind.rawValue),
            "user_ext_id": user.map(JSONValue.string) ?? .null, "payload": .object(payload),
        ]
        try await store.enqueueHTTP(uuid: uuid, kind: .pushReport, request: event.serialized(), user: user, createdMs: nowMs,
                                    max: config.config.http.maxQueue)
        wakeUp()
        return uuid
    }

    /// Stores a push token registration (002 §4, POST) for `user` (nil: the next user known).
    func enqueueToken(token: String, platform: Int, status: Int, appPackageID: String?, user: String?, nowMs: Int64)
        async throws(StoreError) -> String
    {
        let uuid = SmarticoStore.makeUUID()
        var o: JSONObject = ["token": .string(token), "platform": .number(Int64(platform)), "pushNotificationUserStatus": .number(Int64(status))]
        if let appPackageID { o["app_package_id"] = .string(appPackageID) }
        try await store.enqueueHTTP(uuid: uuid, kind: .pushToken, request: o.serialized(), user: user, createdMs: nowMs,
                                    max: config.config.http.maxQueue)
        wakeUp()
        return uuid
    }

    // MARK: Status

    /// `status`'s `http_queue` object.
    func status() async -> JSONValue {
        let s = try? await store.httpQueueStatus()
        var o: JSONObject = [
            "depth": s.map { .number(Int64($0.depth)) } ?? .null,
            "oldest_ms": s?.oldestMs.map { .number($0) } ?? .null,
            "delivered": .number(Int64(delivered)), "dropped": .number(Int64(dropped)),
            "failed_attempts": .number(Int64(failedAttempts)),
        ]
        if let lastError {
            o["last_error"] = ["message": .string(lastError.message), "at_ms": .number(lastError.atMs)]
        } else {
            o["last_error"] = .null
        }
        o["endpoint"] = .string(config.publicAPI.url)
        return .object(o)
    }

    // MARK: The run loop

    private func run() async {
        while !stopped {
            poked = false
            let call: HTTPCall?
            do {
                call = try await store.firstHTTP()
            } catch {
                note("the HTTP queue cannot be read: \(error)")
                await wait(.seconds(5))
                continue
            }
            guard let call else {
                await wait(nil)
                continue
            }
            if removalPending.contains(call.uuid) {
                // Delivered, but the store failed to remove it: remove it, never send it again.
                await removeDelivered(call)
                continue
            }
            let now = Self.wallClockMs()
            if call.nextMs > now {
                await wait(.milliseconds(call.nextMs - now))
                continue
            }
            guard let user = call.user ?? currentUser else {
                // Made before any user was known: waits for one (``setUser(_:)`` pokes).
                await wait(Self.userPollInterval)
                continue
            }
            await deliver(call, user: user)
        }
    }

    private func deliver(_ call: HTTPCall, user: String) async {
        let request: HTTPClientRequest
        switch build(call, user: user) {
        case .success(let r): request = r
        case .failure(let why):
            await drop(call, status: nil, detail: why.description)
            return
        }
        do {
            let response = try await HTTPClient.send(request, options: options, connections: connections, on: loop)
            let status = response.status
            if (200..<300).contains(status) {
                delivered += 1
                logger.debug("public API call delivered", metadata: ["uuid": "\(call.uuid)", "kind": "\(call.kind.rawValue)", "status": "\(status)"])
                removalPending.insert(call.uuid)
                await removeDelivered(call)
            } else if status >= 500 || status == 408 || status == 429 {
                await retry(call, reason: "HTTP \(status) \(response.reason) from \(redactedURL(config.publicAPI.url))")
            } else {
                await drop(call, status: status, detail: response.body)
            }
        } catch {
            // Cancelled by stop(): not an attempt that failed; the call stays stored as it was.
            if stopped { return }
            await retry(call, reason: "\(error)")
        }
    }

    /// Removes a delivered call; while the store refuses, it stays in `removalPending` (and is not sent).
    private func removeDelivered(_ call: HTTPCall) async {
        do {
            try await store.removeHTTP(uuid: call.uuid)
            removalPending.remove(call.uuid)
        } catch {
            note("\(call.kind.rawValue) \(call.uuid) was delivered but cannot be removed from the queue (retrying in 5 s): \(error)")
            await wait(.seconds(5))
        }
    }

    private func retry(_ call: HTTPCall, reason: String) async {
        failedAttempts += 1
        let delay = Self.backoffMs(attempt: call.attempts, initialMs: config.config.http.retryInitialMs, maxMs: config.config.http.retryMaxMs)
        let nextMs = Self.wallClockMs() + delay
        note("\(call.kind.rawValue) \(call.uuid) not delivered (attempt \(call.attempts + 1)), retrying in \(delay) ms: \(reason)")
        do {
            try await store.failedHTTP(uuid: call.uuid, nextMs: nextMs, error: reason)
        } catch {
            note("the HTTP queue cannot record a failed attempt: \(error)")
            await wait(.milliseconds(delay))
        }
    }

    private func drop(_ call: HTTPCall, status: Int?, detail: [UInt8]) async {
        await drop(call, status: status, detail: String(decoding: detail.prefix(512), as: UTF8.self))
    }

    private func drop(_ call: HTTPCall, status: Int?, detail: String) async {
        do {
            try await store.removeHTTP(uuid: call.uuid)
        } catch {
            note("\(call.kind.rawValue) \(call.uuid) cannot be removed from the queue: \(error)")
            await wait(.seconds(5))
            return
        }
        dropped += 1
        let code = call.kind == .pushReport ? "push_report_dropped" : "push_token_dropped"
        let message = status.map { "Smartico's public API refused \(call.kind.rawValue) \(call.uuid) with HTTP \($0); it is dropped, not retried" }
            ?? "\(call.kind.rawValue) \(call.uuid) cannot be sent and is dropped: \(detail)"
        lastError = (message, Self.wallClockMs())
        logger.warning("\(message)", metadata: ["body": "\(detail.debugDescription)"])
        var data: JSONObject = ["code": .string(code), "message": .string(message), "uuid": .string(call.uuid)]
        data["status"] = status.map { .number(Int64($0)) } ?? .null
        data["body"] = .string(detail)
        if case .object(let r)? = try? JSONValue(parsing: call.request) {
            if call.kind == .pushReport {
                data["event_type"] = r["event_type"] ?? .null
                data["engagement_uid"] = (r["payload"]?.objectValue?["engagement_uid"]) ?? .null
            }
        }
        emit(DaemonEvent(kind: .error, data: .object(data), journaled: false))
    }

    private func note(_ message: String) {
        lastError = (message, Self.wallClockMs())
        logger.warning("\(message)")
    }

    /// The HTTP request of a queued call, for `user`.
    private func build(_ call: HTTPCall, user: String) -> Result<HTTPClientRequest, StringError> {
        guard case .object(var body)? = try? JSONValue(parsing: call.request) else {
            return .failure(StringError("the stored request is not a JSON object"))
        }
        let apiKey = config.labelKey.full.exposedValue
        let brandKey = config.config.server.brandKey
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: "smarticod/\(SmarticoVersion.string)")
        switch call.kind {
        case .pushReport:
            if body["user_ext_id"] == nil || body["user_ext_id"] == JSONValue.null { body["user_ext_id"] = JSONValue.string(user) }
            let url = config.publicAPI.url + "?" + PublicAPI.query(apiKey: apiKey, brandKey: brandKey, event: body)
            return .success(HTTPClientRequest(method: "GET", url: url, headers: headers))
        case .pushToken:
            var post: JSONObject = [:]
            if let id = body["app_package_id"], id != JSONValue.null { post["app_package_id"] = id }
            // 002 §4's POST always has brand_key (the simulator's reading requires it): "" without one.
            post["brand_key"] = .string(brandKey ?? "")
            post["api_key"] = .string(apiKey)
            post["ext_user_id"] = .string(user)
            post["pushNotificationUserStatus"] = body["pushNotificationUserStatus"] ?? 0
            post["platform"] = body["platform"] ?? 5
            post["cid"] = .number(ClassID.registerPushTokenRequest.rawValue)
            post["token"] = body["token"] ?? .null
            headers.add(name: "Content-Type", value: "application/json")
            return .success(HTTPClientRequest(method: "POST", url: config.publicAPI.url, headers: headers, body: post.serialized()))
        }
    }

    struct StringError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// Doubling from `initialMs` up to `maxMs`, the upper half jittered: `d/2 + random(0...d/2)`.
    static func backoffMs(attempt: Int, initialMs: Int, maxMs: Int) -> Int64 {
        let cap = Int64(max(1, maxMs))
        var d = min(Int64(max(1, initialMs)), cap)
        var doublings = 0
        while doublings < attempt, d < cap {
            d = min(cap, d * 2)
            doublings += 1
        }
        return d / 2 + Int64.random(in: 0...(d - d / 2))
    }

    // MARK: Waiting

    /// Waits `timeout` (nil: until poked) or until ``wakeUp()``.
    private func wait(_ timeout: Duration?) async {
        guard !stopped, !poked else { return }
        waitToken += 1
        let token = waitToken
        var timer: LoopTimer?
        if let timeout {
            let t = LoopTimer(loop: loop) { [weak self] in
                // A loop timer fires on the loop thread: this actor's executor.
                self?.assumeIsolated { $0.timeout(token) }
            }
            t.schedule(after: timeout)
            timer = t
        }
        await withCheckedContinuation { c in waiter = c }
        timer?.invalidate()
    }

    private func timeout(_ token: Int) {
        guard token == waitToken else { return }
        wakeUp()
    }

    private func wakeUp() {
        waitToken += 1
        guard let w = waiter else {
            poked = true
            return
        }
        waiter = nil
        w.resume()
    }

    static func wallClockMs() -> Int64 { SessionDriver.wallClockMs() }
}

/// True for the first caller only (two racers resuming one continuation).
private final class ResumeOnce: Sendable {
    private let done = Mutex(false)
    func first() -> Bool { done.withLock { d in defer { d = true }; return !d } }
}
