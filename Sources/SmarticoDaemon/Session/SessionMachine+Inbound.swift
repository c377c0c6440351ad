import SmarticoProtocol

// Rule 6 (keepalive) and rule 7 (inbound messages → events, request matching).
extension SessionMachine {
    /// Whom what the server pushes on this connection is for: the daemon's user ("" when
    /// anonymous) — also before the IDENTIFY answer, so an engagement sent then and re-sent after
    /// it is seen once — or nil when the connection speaks (or is about to) for another user
    /// (an earlier user's queued messages, or after a switch or logout): nothing of that goes to
    /// the apps, which show the current user's.
    var pushesFor: String? {
        guard let c = connection else { return nil }
        if let b = c.boundUser, b != user?.extUserID { return nil }
        return user?.extUserID ?? ""
    }

    /// How late the server's PING may be, after the gap between its last two, before we PING.
    static let serverPingGraceMs: Int64 = 3_000
    /// The least time a deferred PING of ours is given to be answered before the dead deadline.
    static let deferredPingAnswerMs: Int64 = 5_000

    /// Rule 6's silence timer, from a message that restarts it (or the connection's start).
    ///
    /// Our PING goes out after `session.keepalive_s` of silence — unless the server has shown a
    /// PING cadence of its own on this connection and its next PING is due just after ours would
    /// go: then ours waits for it (its expected time plus ``serverPingGraceMs``) as long as it
    /// would still leave ``deferredPingAnswerMs`` before the dead deadline, which stays
    /// `keepalive_s + dead_after_s` of silence either way. With the defaults against a server that
    /// PINGs every 30 s, Smartico's own clients PING at 29 s and exchange four messages each
    /// 30 s where two do (one wake-up instead of three); a server that misses its PING gets ours
    /// 3 s later, and a dead connection is found as soon as before (docs/session.md, "Keepalive").
    mutating func restartSilenceTimer(now: Int64) {
        let keepaliveMs = Int64(sessionConfig.keepaliveS) * 1000
        var at = now + keepaliveMs
        if let c = connection, let last = c.serverPingAtMs, let every = c.serverPingEveryMs {
            let waitUntil = last + every + Self.serverPingGraceMs
            let latest = now + keepaliveMs + Int64(sessionConfig.deadAfterS) * 1000 - Self.deferredPingAnswerMs
            if waitUntil > at, waitUntil <= latest { at = waitUntil }
        }
        schedule(.keepalive, at: at)
    }

    /// When the connection is dead if nothing arrives after our PING sent at `pingAt`:
    /// `dead_after_s` after it, or `keepalive_s + dead_after_s` of silence when that is sooner
    /// (a deferred PING, see ``restartSilenceTimer(now:)``).
    func deadDeadline(pingAt: Int64) -> Int64 {
        let deadAfterMs = Int64(sessionConfig.deadAfterS) * 1000
        guard let heard = connection?.heardAtMs else { return pingAt + deadAfterMs }
        return min(pingAt + deadAfterMs, heard + Int64(sessionConfig.keepaliveS) * 1000 + deadAfterMs)
    }

    mutating func onReceived(_ c: ConnectionID, _ bytes: [UInt8], now: Int64) {
        guard connection?.id == c else { return }
        counters.messagesIn += 1
        // Anything from the server shows the connection is alive.
        connection?.heardAtMs = now
        cancel(.dead)
        // Session rule 7: only bytes that are not a JSON object end the connection here; a `cid`
        // given as a string holding an integer is read as that integer (as the SDK reads it), and
        // the fields of a known cid are read loosely (ServerMessage.decode).
        let msg: ServerMessage
        do {
            msg = try ServerMessage.decode(bytes)
        } catch {
            if case .object(let o)? = try? JSONValue(parsing: bytes) {
                // An object whose `cid` cannot be read (absent, text, a fraction): nothing to act
                // on, but the connection is sound; delivered with the problem, never a reconnect
                // (the same message would close the next connection too).
                restartSilenceTimer(now: now)
                if pushesFor != nil {
                    out.append(.emit(DaemonEvent(kind: .message, data: .object([
                        "message": .object(o), "name": .null, "problem": .string(error.description),
                    ]), journaled: true, warning: "a server message without a usable class id delivered as a message event: \(error)")))
                }
                return
            }
            fail(reason: "bad_server_message", message: "the server sent a message that is not a JSON object: \(error)",
                 now: now, closeCode: 1002)
            return
        }
        // Every message except PONG restarts the silence timer (Smartico's own clients do the same).
        if case .pong = msg {} else {
            if case .ping = msg {
                if let last = connection?.serverPingAtMs { connection?.serverPingEveryMs = now - last }
                connection?.serverPingAtMs = now
            }
            restartSilenceTimer(now: now)
        }
        switch msg {
        case .ping, .pong: break
        default: if identifiedOnConn { noteActivity(now: now) }
        }

        switch (msg, phase) {
        case (.ping, _):
            counters.pings += 1
            counters.pongs += 1
            shown.lastPingMs = now
            send(Pong().json, now: now) // a new uuid, not the PING's
            return
        case (.pong, _):
            counters.pongs += 1
            shown.lastPingMs = now
            pongReceived()
            return
        case (.initSessionResponse(let r), .initializing?):
            onInitResponse(r, now: now)
            return
        case (.identifyUserResponse(let r), .identifying?):
            onIdentifyResponse(r, now: now)
            return
        case (.logoutResponse, .loggingOut?):
            finishLogout(now: now)
            return
        default:
            break
        }

        // Props are merged from any server message that carries a `props` object, as the SDK
        // merges them (a 108's below, with its problem check; IDENTIFY's in onIdentifyResponse):
        // e.g. a 504 or a data answer. Not for another user's messages (pushesFor).
        if case .object(let changes)? = msg.member("props"), pushesFor != nil {
            switch msg {
            case .publicPropertiesChanged, .identifyUserResponse: break
            default: updateProps(changes)
            }
        }

        if matchPending(msg, now: now) { return }
        // Pushes for another user than the daemon's are not delivered (the server sends them again
        // when that user is next identified).
        guard let engagementUser = pushesFor else { return }

        switch msg {
        case .engagement(let e) where Self.engagementLineBytes(frame: bytes.count) > config.config.socket.maxPeerMemoryBytes / 4:
            // Refused at the door: its line could not be held for any subscriber within a uid's
            // share of the peers' memory budget, so it would never reach one whole.
            let limit = config.config.socket.maxPeerMemoryBytes / 4
            emitError("engagement_too_large", "an engagement (cid 110) of \(bytes.count) bytes from the server was refused: its event line (the message and its bridge, about \(Self.engagementLineBytes(frame: bytes.count)) bytes) would be more than a quarter of socket.max_peer_memory_bytes (\(limit)); engagement_uid \(e.engagementUID.map { "\"\(String($0.prefix(80)))\"" } ?? "none"); reported to the server as failed", now: now)
            if let uid = e.engagementUID, !uid.isEmpty {
                queueDurable(EngagementReport(kind: .failed, engagementUID: uid, activityType: e.activityType ?? ActivityType(rawValue: 30)).json,
                             id: nil, now: now)
            }
        case .engagement(let e):
            // `message` and `bridge` are copied from the 110's bytes, not built as a tree (EngagementJournal).
            let popupURL = account.popupURLJSON
            if let uid = e.engagementUID {
                let event = DaemonEvent(engagement: EngagementJournal.data(for: e, popupURLJSON: popupURL))
                out.append(.journalOnce(user: engagementUser, uid: uid, event))
            } else {
                // Delivered, but it cannot be de-duplicated: the server's re-delivery after the next
                // IDENTIFY reaches subscribers again.
                out.append(.emit(DaemonEvent(engagement: EngagementJournal.data(for: e, popupURLJSON: popupURL),
                                             warning: "an engagement (cid 110) without a usable \"engagement_uid\" was delivered; it cannot be de-duplicated")))
            }
        case .executeDeepLink(let d):
            if let problem = d.problem {
                deliverUnusable(msg, problem: problem)
                return
            }
            let event = deepLinkEvent(source: "server", dp: d.dp, engagementUID: d.engagementUID)
            if let uid = d.engagementUID, !uid.isEmpty {
                out.append(.journalOnce(user: engagementUser, uid: uid, event))
            } else {
                out.append(.emit(event))
            }
            if let action = d.deepLink.clientAction, firstReport(user: engagementUser, uid: d.engagementUID) {
                queueClientAction(action, now: now)
            }
        case .publicPropertiesChanged(let p):
            if let problem = p.problem {
                deliverUnusable(msg, problem: problem)
                return
            }
            updateProps(p.props)
        case .sawShowSpinPush(let s):
            // Without a template id there is no mini-game to open: still a `minigame` (the apps that
            // show mini-games are the ones to know), with nulls and the problem.
            let url = gamificationURL.flatMap { WrapperURL.miniGame($0, push: s) }
            let problem = s.problem ?? gamificationProblem
            out.append(.emit(DaemonEvent(kind: .minigame, data: .object([
                "message": .object(s.json),
                "saw_template_id": s.sawTemplateID.map { JSONValue.number($0) } ?? .null,
                "url": url.map(JSONValue.string) ?? .null,
                "problem": problem.map(JSONValue.string) ?? .null,
            ]), journaled: true, warning: problem.map { "a mini-game push (cid 707) the daemon cannot open was delivered: \($0)" })))
        case .initSessionResponse:
            deliverUnusable(msg, problem: "an INIT_SESSION_RESPONSE (cid 4) that answers no INIT_SESSION_REQUEST of this connection")
        case .identifyUserResponse:
            deliverUnusable(msg, problem: "an IDENTIFY_USER_RESPONSE (cid 6) that answers no IDENTIFY_USER_REQUEST of this connection")
        case .registerPushTokenResponse(let r), .eventResponse(let r):
            onPushTokenAnswer(r, now: now)
        case .loginResponse, .logoutResponse, .ping, .pong:
            break // answers to the daemon's own messages: consumed
        case .other(let cid, let json):
            emit(.message, .object([
                "message": .object(json),
                "name": cid.eventName.map(JSONValue.string) ?? .null,
                "problem": .null,
            ]), journaled: true)
        }
    }

    /// A server message the daemon cannot act on (session rule 7): delivered as it is, as a
    /// `message` with the `problem`, and logged at warning — never dropped, never a reconnect.
    mutating func deliverUnusable(_ msg: ServerMessage, problem: String) {
        let cid = msg.cid
        out.append(.emit(DaemonEvent(kind: .message, data: .object([
            "message": .object(msg.json),
            "name": cid.eventName.map(JSONValue.string) ?? .null,
            "problem": .string(problem),
        ]), journaled: true, warning: "\(cid) delivered as a message event: \(problem)")))
    }

    /// `client_action`: for `dp:action&action=<name>`, the name the daemon reported to the server
    /// (the app has nothing to do for it); else null.
    func deepLinkEvent(source: String, dp: String, engagementUID: String?) -> DaemonEvent {
        let link = DeepLink(dp)
        let url = gamificationURL.flatMap { link.gamificationURL(wrapper: $0) }
        let problem = link.kind == .gamification ? gamificationProblem : nil
        return DaemonEvent(kind: .deeplink, data: .object([
            "source": .string(source),
            "engagement_uid": engagementUID.map(JSONValue.string) ?? .null,
            "dp": .string(dp),
            "kind": .string(link.kind.rawValue),
            "url": url.map(JSONValue.string) ?? .null,
            "client_action": link.clientAction.map(JSONValue.string) ?? .null,
            "problem": problem.map(JSONValue.string) ?? .null,
        ]), journaled: true)
    }

    /// `dp:action&action=<name>` reaches the server as Smartico's SDK reports it: a cid 9
    /// `client_action` event, durably queued for the current user (or the anonymous session).
    mutating func queueClientAction(_ action: String, now: Int64) {
        queueDurable(ClientEvent.clientAction(action).json, id: nil, now: now, envelope: true)
    }

    /// True the first time in this run a 105 of `user` with `uid` is reported (a 105 without
    /// `engagement_uid` is reported each time). Remembers it.
    mutating func firstReport(user: String, uid: String?) -> Bool {
        guard let uid else { return true }
        let key = user + "\u{0}" + uid
        if memory.actedDeepLinks.contains(key) { return false }
        memory.actedDeepLinks.append(key)
        if memory.actedDeepLinks.count > Self.maxActedDeepLinks { memory.actedDeepLinks.removeFirst(memory.actedDeepLinks.count - Self.maxActedDeepLinks) }
        return true
    }

    /// A 2003, or a 10 while a 1003 written on this connection is unanswered (the daemon cannot
    /// tell a 1003's 10 from an event's otherwise), answers the push token: with `errCode` ≠ 0
    /// the server refused it, which becomes an `error` event `push_token_refused` with the
    /// server's code and message, and `status.last_error` (the SDK drops these answers unread).
    /// Any other 10 (the answer to an event of the outbox) is consumed as before.
    mutating func onPushTokenAnswer(_ r: ResponseMessage, now: Int64) {
        let is2003 = r.cid == .registerPushTokenResponse
        let unanswered = connection?.pushTokensUnanswered ?? 0
        guard is2003 || unanswered > 0 else { return }
        let code = r.errCode ?? 0
        if unanswered > 0, is2003 || code != 0 { connection?.pushTokensUnanswered = unanswered - 1 }
        guard code != 0 else { return }
        emitError("push_token_refused",
                  "the server refused the push token: \(r.cid) with errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")",
                  errCode: code, errMsg: r.errMsg, now: now)
    }

    /// Merges public props (server 108 and any server message with a `props` object, bridge 7),
    /// emits `props`, persists them.
    mutating func updateProps(_ changes: JSONObject) {
        account.props = props.merging(changes)
        emit(.props, .object(props), journaled: false)
        if user != nil { out.append(.persistProfile(publicUsername: account.identity?.publicUsername, props: props.serialized())) }
    }

    /// About the size of an engagement's event line for a 110 of `frame` bytes: the message and
    /// its bridge carry the same fields (the template twice), plus the envelope.
    static func engagementLineBytes(frame: Int) -> Int { 2 * frame + 4096 }

    /// A response to a pending `request`: by uuid first, else the oldest request sent on this
    /// connection that waits for this cid.
    mutating func matchPending(_ msg: ServerMessage, now: Int64) -> Bool {
        guard let c = connection?.id, let p = requests.takeAnswered(by: msg, on: c) else { return false }
        if p.abandoned {
            counters.answersDropped += 1
            rescheduleRequestTimer()
            return true
        }
        let errCode = msg.json.lenientInt64("errCode") ?? 0
        let errMsg = msg.json.lenientString("errMsg")
        if errCode != 0 || msg.cid == .unsupportedCommand {
            reply(p.id, .failure(SocketAPIError(
                .serverError, "the server answered \(ClassID(p.message.cid)) with \(msg.cid), errCode \(errCode)\(errMsg.map { " (\($0))" } ?? "")",
                errCode: errCode, errMsg: errMsg)))
        } else {
            reply(p.id, .success(.object(["message": .object(msg.json)])))
        }
        rescheduleRequestTimer()
        return true
    }

    /// How long the answer to a request that timed out is still recognised (and dropped).
    static let lateAnswerGraceMs: Int64 = 30_000

    mutating func rescheduleRequestTimer() {
        if let next = requests.nextDeadline {
            if deadlines[.requests] != next { schedule(.requests, at: next) }
        } else {
            cancel(.requests)
        }
    }

    mutating func expireRequests(now: Int64) {
        let expired = requests.expire(now: now)
        for p in expired.requests {
            let what = p.sentOn == nil
                ? "no session to send \(ClassID(p.message.cid)) within the timeout"
                : "no answer with cid \(p.expectCid) to \(ClassID(p.message.cid)) within the timeout"
            reply(p.id, .failure(SocketAPIError(.timeout, what)))
        }
        for id in expired.identifies {
            reply(id, .failure(SocketAPIError(.notReady, "the server did not answer IDENTIFY in time (state: \(state.rawValue)); the user stays configured and is identified when the session is ready")))
        }
        deadlines[.requests] = nil
        rescheduleRequestTimer()
    }
}
