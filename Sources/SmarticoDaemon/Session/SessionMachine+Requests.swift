import SmarticoProtocol

// The socket API ops that reach the session.
extension SessionMachine {
    mutating func onRequest(_ id: SessionRequestID, _ request: SessionRequest, owner: RequestOwner = .daemon, now: Int64) {
        if stopping { return reply(id, .failure(SocketAPIError(.notReady, "the daemon is stopping"))) }
        if case .idle = current { return reply(id, .failure(SocketAPIError(.notReady, "the session has not started"))) }
        switch request {
        case .identify(let ext, let hash): opIdentify(id, ext: ext, hash: hash, now: now)
        case .logout: opLogout(id, now: now)
        case .login: opLogin(id, now: now)
        case .pushToken(let token, let platform, let status, let app):
            opPushToken(id, token: token, platform: platform, status: status, appPackageID: app, now: now)
        case .language(let code):
            guard !code.isEmpty else { return reply(id, .failure(SocketAPIError(.badRequest, "language must not be empty"))) }
            queueDurable(ClientEvent.languageChanged(code).json, id: id, now: now, envelope: true, latest: "language")
        case .event(let type, let payload):
            guard !type.isEmpty else { return reply(id, .failure(SocketAPIError(.badRequest, "event_type must not be empty"))) }
            queueChecked(ClientEvent(eventType: type, payload: payload ?? [:]).json, id: id, field: "payload", now: now, envelope: true)
        case .report(let kind, let uid, let activityType, let action):
            guard !uid.isEmpty else { return reply(id, .failure(SocketAPIError(.badRequest, "engagement_uid must not be empty"))) }
            queueDurable(EngagementReport(kind: kind, engagementUID: uid, activityType: ActivityType(rawValue: activityType), action: action).json,
                         id: id, now: now)
        case .minigameAck(let template, let pendingID):
            queueDurable(SawAcknowledgeSpinPush(sawTemplateID: template, pendingMessageID: pendingID).json, id: id, now: now)
        case .send(let message):
            if let e = checkForSend(message, field: "message") { return reply(id, .failure(e)) }
            queueDurable(message, id: id, now: now, envelope: true)
        case .request(let message, let expectCid, let timeoutMs):
            opRequest(id, message: message, expectCid: expectCid, timeoutMs: timeoutMs, owner: owner, now: now)
        case .bridge(let object):
            opBridge(id, object, now: now)
        }
    }

    /// The peer of these requests went away: they are forgotten. A message already being stored
    /// stays queued (it was accepted); a `request` not yet sent is not sent any more, and the
    /// answer to one already written is dropped when it comes (nobody waits for it: it must not
    /// reach the subscribers, nor push what the server pushed out of the journal). It no longer
    /// counts in its owner's share: the read role's rate (RequestShares) bounds what a peer that
    /// keeps leaving makes the server do.
    mutating func abandon(_ ids: [SessionRequestID], now: Int64) {
        requests.abandon(Set(ids), now: now)
        rescheduleRequestTimer()
    }

    /// Messages of `user` that could not be sent under that user were removed from the outbox.
    mutating func onOutboxDropped(user: String?, count: Int, now: Int64) {
        // A connection still sorting goes on from the next oldest message.
        defer { if phase == .sorting { startFlush() } }
        guard count > 0 else { return }
        let who = user.map { "user \($0)" } ?? "the anonymous session"
        var d: JSONObject = ["code": .string("outbox_dropped"), "count": .number(Int64(count)),
                             "user": user.map(JSONValue.string) ?? .null]
        let message = "dropped \(count) queued message\(count == 1 ? "" : "s") of \(who): they can only be sent on a session identified as that user, and no valid hash for it is available"
        d["message"] = .string(message)
        shown.lastError = ("outbox_dropped", message, now)
        emit(.error, .object(d), journaled: false)
    }

    /// Checks a client message given by a peer (`send`, `request`, bridge 6).
    func checkForSend(_ o: JSONObject, field: String) -> SocketAPIError? {
        guard let cidValue = o["cid"] else { return SocketAPIError(.badRequest, "\(field).cid is missing (an integer class id)") }
        guard let cid = cidValue.int64Value else { return SocketAPIError(.badRequest, "\(field).cid must be an integer") }
        if (1...8).contains(cid) || cid == 11 || cid == 12 {
            return SocketAPIError(.badRequest, "\(field).cid \(ClassID(cid)) belongs to the session lifecycle the daemon runs itself; use the identify, login and logout ops")
        }
        if let u = o["uuid"], !u.isNull {
            guard let s = u.stringValue, !s.isEmpty else { return SocketAPIError(.badRequest, "\(field).uuid must be a non-empty string") }
            if requests.isWaiting(uuid: s) {
                return SocketAPIError(.badRequest, "\(field).uuid \(s) is already waiting to be sent")
            }
        }
        if let t = o["ts"], !t.isNull, t.int64Value == nil { return SocketAPIError(.badRequest, "\(field).ts must be an integer (ms since the epoch)") }
        do { _ = try ClientMessage(json: o) } catch {
            return SocketAPIError(.badRequest, "\(field): \(error)")
        }
        return nil
    }

    mutating func queueChecked(_ json: JSONObject, id: SessionRequestID, field: String, now: Int64, envelope: Bool = false) {
        if let e = checkForSend(json, field: field) { return reply(id, .failure(e)) }
        queueDurable(json, id: id, now: now, envelope: envelope)
    }

    /// Stamps a message made for the daemon's user (or the anonymous session) and asks the driver
    /// to store it with that user; the answer and the sending follow `.outboxStored`. `envelope`:
    /// an event or data request, sent in the SDK's envelope (``stamp(_:now:envelope:)``). `latest`:
    /// the store keeps only the latest message of this slot.
    mutating func queueDurable(_ json: JSONObject, id: SessionRequestID?, now: Int64, envelope: Bool = false, latest slot: String? = nil) {
        let m = stamp(json, now: now, envelope: envelope)
        let entry = OutboxEntry(uuid: m.uuid, cid: Int(m.cid), bytes: m.bytes, createdMs: now, user: user?.extUserID)
        requests.storing[m.uuid] = (id, entry)
        out.append(slot.map { .storeLatest(slot: $0, entry) } ?? .storeOutbox(entry))
    }

    mutating func onOutboxStored(_ uuid: String, _ failure: OutboxStoreFailure?, now: Int64) {
        guard let w = requests.storing.removeValue(forKey: uuid) else { return }
        if let failure {
            let error: SocketAPIError
            switch failure {
            case .queueFull(let max):
                error = SocketAPIError(.queueFull, "the outbox already holds \(max) messages waiting for the session (outbox.max_messages)")
                emitError("outbox_full", error.message, now: now)
            case .storageUnavailable(let why):
                error = SocketAPIError(.storageUnavailable, "the message was not stored, so not accepted: \(why); retry once the state directory has space and is writable again")
            case .failed(let why):
                error = SocketAPIError(.internal, "could not store the message: \(why)")
            }
            if let id = w.id { reply(id, .failure(error)) }
            return
        }
        var queued = true
        if gateOpen, let c = connection, c.speaker == w.entry.user {
            if c.flushing {
                connection?.flushAgain = true
            } else {
                write(OutgoingMessage(bytes: w.entry.bytes, cid: Int64(w.entry.cid), uuid: uuid), now: now, fromOutbox: true)
                queued = false
            }
        }
        if let id = w.id { reply(id, .success(.object(["uuid": .string(uuid), "queued": .bool(queued)]))) }
    }

    /// Why `identify` of `ext` would be refused now; nil when it would be taken.
    func identifyRefusal(ext: String, hash: String?) -> SocketAPIError? {
        guard !ext.isEmpty else { return SocketAPIError(.badRequest, "ext_user_id must not be empty") }
        if let h = hash, h.isEmpty { return SocketAPIError(.badRequest, "hash must not be empty") }
        guard requests.identifyWaiters.count < env.maxPendingRequests else {
            return SocketAPIError(.queueFull, "\(env.maxPendingRequests) identify requests are already waiting for the server")
        }
        let hasCommand = !(config.config.user.hashCommand ?? []).isEmpty
        if hash == nil, !hasCommand, user?.extUserID != ext || user?.hash == nil {
            return SocketAPIError(.badRequest, "hash is required: user.hash_command is not configured")
        }
        return nil
    }

    mutating func opIdentify(_ id: SessionRequestID, ext: String, hash: String?, now: Int64) {
        if let refusal = identifyRefusal(ext: ext, hash: hash) { return reply(id, .failure(refusal)) }
        if let u = user, u.extUserID == ext {
            if let h = hash {
                account.user?.hash = h
                account.user?.source = .op
                account.freshHash = h
                memory.knownHashes[ext] = h
                out.append(.persistUser(StoredUser(extUserID: ext, hash: h, publicUsername: account.identity?.publicUsername,
                                                   props: props.serialized(), lastActivityMs: account.lastActivityMs)))
            }
            if identifiedOnConn, let r = account.identity, let cur = user {
                return reply(id, .success(identifiedData(r, user: cur)))
            }
            requests.identifyWaiters.append((id, now + env.identifyReplyTimeoutMs))
            rescheduleRequestTimer()
            if let h = hash, case .hashing(ext)? = phase {
                // A hash command is running for this user: the given hash wins.
                dialing.hashToken &+= 1
                account.freshHash = nil
                sendIdentify(ext, hash: h, now: now)
            }
            return
        }
        supersedeIdentifyWaiters(by: ext)
        requests.identifyWaiters.append((id, now + env.identifyReplyTimeoutMs))
        rescheduleRequestTimer()
        switchUser(to: UserState(extUserID: ext, hash: hash, source: .op), now: now, persist: true)
    }

    /// Identify requests for another user are answered `not_ready`: a newer identify replaced them.
    mutating func supersedeIdentifyWaiters(by ext: String) {
        for id in requests.takeIdentifyWaiters() { reply(id, .failure(SocketAPIError(.notReady, "superseded: identify of \(ext) was requested before the server answered"))) }
    }

    /// Logout: the user's queued messages go first, under the user; then LOGOUT, cid 12, close,
    /// and an anonymous session. What is made after this op is anonymous.
    mutating func opLogout(_ id: SessionRequestID, now: Int64) {
        guard let u = user else {
            if case .loggingOut? = phase { requests.logoutWaiters.append(id) } else { reply(id, .success(.object([:]))) }
            return
        }
        forgetUser()
        let c = connection
        if c?.boundUser != u.extUserID { memory.loggedOutOffline[u.extUserID] = true }
        guard let c else { return reply(id, .success(.object([:]))) }
        switch c.phase {
        case .ready(let s?) where s.user == u.extUserID:
            // Answered once cid 12 came (or its wait ran out).
            requests.logoutWaiters.append(id)
            connection?.markLogoutPending()
            reconsider(now: now)
        case .hashing(u.extUserID):
            dialing.hashToken &+= 1
            reply(id, .success(.object([:])))
            sort(now: now)
        default:
            // IDENTIFY of the user under way: LOGOUT follows its answer and the user's messages.
            if c.boundUser == u.extUserID { connection?.markLogoutPending() }
            reply(id, .success(.object([:])))
            reconsider(now: now)
        }
    }

    mutating func opLogin(_ id: SessionRequestID, now: Int64) {
        guard user != nil else {
            return reply(id, .failure(SocketAPIError(.notReady, "no user: LOGIN marks a logical session of an identified user; use identify first")))
        }
        if identifiedOnConn, case .ready? = phase {
            account.forceLogin = false
            send(Login(ua: userAgent(now: now)).json, now: now)
            reply(id, .success(.object(["sent": true])))
        } else {
            account.forceLogin = true
            reply(id, .success(.object(["sent": false, "after_identify": true])))
        }
    }

    mutating func opPushToken(_ id: SessionRequestID, token: String, platform: Int?, status: Int, appPackageID: String?, now: Int64) {
        guard !token.isEmpty else { return reply(id, .failure(SocketAPIError(.badRequest, "token must not be empty"))) }
        guard let st = PushNotificationUserStatus(rawValue: Int64(status)) else {
            return reply(id, .failure(SocketAPIError(.badRequest, "status must be an integer 0…4 (PushNotificationUserStatus), got \(status)")))
        }
        let plat = platform ?? config.config.user.push.platform
        guard let pl = PushClientPlatform(rawValue: Int64(plat)) else {
            return reply(id, .failure(SocketAPIError(.badRequest, "platform must be an integer 0…11 (PushClientPlatform), got \(plat)")))
        }
        let p = StoredPush(token: token, platform: plat, status: status, appPackageID: appPackageID ?? config.config.user.push.appPackageID)
        device.push = p
        out.append(.persistPush(p))
        if user != nil, identifiedOnConn {
            queueDurable(RegisterPushTokenRequest(token: token, platform: pl, status: st, appPackageID: p.appPackageID).json, id: id, now: now)
        } else {
            reply(id, .success(.object(["queued": false, "with_identify": true])))
        }
    }

    mutating func opRequest(_ id: SessionRequestID, message: JSONObject, expectCid: Int64?, timeoutMs: Int64?,
                            owner: RequestOwner = .daemon, now: Int64) {
        if let e = checkForSend(message, field: "message") { return reply(id, .failure(e)) }
        let timeout = timeoutMs ?? env.requestTimeoutMs
        guard timeout > 0 else { return reply(id, .failure(SocketAPIError(.badRequest, "timeout_ms must be ≥ 1"))) }
        if let refusal = requests.admit(owner, now: now) {
            return reply(id, .failure(SocketAPIError(.queueFull, refusal)))
        }
        let cid = message["cid"]?.int64Value ?? 0
        let expect = expectCid ?? ClassID(cid).responseClassID?.rawValue ?? (cid &+ 1)
        let m = stamp(message, now: now, envelope: true)
        let sentOn = gateOpen ? connection?.id : nil
        requests.pending.append(PendingRequest(id: id, user: user?.extUserID, message: m, expectCid: expect, deadlineMs: now + timeout,
                                               sentOn: sentOn, owner: owner))
        if sentOn != nil { write(m, now: now) }
        rescheduleRequestTimer()
    }

    mutating func opBridge(_ id: SessionRequestID, _ object: JSONObject, now: Int64) {
        let b: BridgeMessage
        do { b = try BridgeMessage(json: object) } catch {
            return reply(id, .failure(SocketAPIError(.badRequest, "message: \(error)")))
        }
        switch b {
        case .sendToSocket(let message):
            if let e = checkForSend(message, field: "message") { return reply(id, .failure(e)) }
            queueDurable(message, id: id, now: now)
        case .sendPublicProps(let changes):
            updateProps(changes)
            reply(id, .success(.object([:])))
        case .executeDeepLink(let link):
            out.append(.emit(deepLinkEvent(source: "bridge", dp: link.raw, engagementUID: nil)))
            if let action = link.clientAction { queueClientAction(action, now: now) }
            reply(id, .success(.object([:])))
        case .sendGameOpening:
            emit(.gameOpening, .object(b.json), journaled: false)
            reply(id, .success(.object([:])))
        default:
            emit(.bridge, .object(b.json), journaled: false)
            reply(id, .success(.object([:])))
        }
    }
}
