import SmarticoProtocol

// Rule 6 (keepalive) and rule 7 (inbound messages → events, request matching).
extension SessionMachine {
    /// Errors that mean the stream is not Smartico JSON at all (reconnect), as opposed to one
    /// message of a known cid with a bad field (dropped with an `error` event).
    static func isStructural(_ e: ProtocolError) -> Bool {
        switch e {
        case .notJSON, .tooDeep, .tooLarge, .notAnObject, .missingClassID, .classIDNotInteger: true
        default: false
        }
    }

    static func classID(of e: ProtocolError) -> Int64? {
        switch e {
        case .missingField(let t, _), .wrongFieldType(let t, _, _, _), .invalidFieldValue(let t, _, _):
            if case .cid(let c) = t { return c }
            return nil
        default: return nil
        }
    }

    /// Whom what the server pushes on this connection is for: the daemon's user ("" when
    /// anonymous) — also before the IDENTIFY answer, so an engagement sent then and re-sent after
    /// it is seen once — or nil when the connection speaks (or is about to) for another user
    /// (an earlier user's queued messages, or after a switch or logout): nothing of that goes to
    /// the apps, which show the current user's.
    var pushesFor: String? {
        guard let c = connection else { return nil }
        let bound = c.speaker ?? c.identifyingAs
        if let b = bound, b != user?.extUserID { return nil }
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
        let msg: ServerMessage
        do {
            msg = try ServerMessage.decode(bytes)
        } catch {
            restartSilenceTimer(now: now)
            if Self.isStructural(error) {
                fail(reason: "bad_server_message", message: "the server sent a message that is not a JSON object with an integer cid: \(error)",
                     now: now, closeCode: 1002)
                return
            }
            let cid = Self.classID(of: error)
            if (cid == 4 && phase == .initializing) || (cid == 6 && phase == .identifying) {
                fail(reason: "bad_server_message", message: "unusable answer from the server: \(error)", now: now, closeCode: 1002)
                return
            }
            emitError("bad_server_message", "dropped a message from the server: \(error)")
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

        switch msg {
        case .ping:
            counters.pings += 1
            counters.pongs += 1
            lastPingMs = now
            send(Pong().json, now: now) // a new uuid, not the PING's
            return
        case .pong:
            counters.pongs += 1
            lastPingMs = now
            pongReceived()
            return
        case .initSessionResponse(let r):
            onInitResponse(r, now: now)
            return
        case .identifyUserResponse(let r):
            onIdentifyResponse(r, now: now)
            return
        case .logoutResponse where phase == .loggingOut:
            finishLogout(now: now)
            return
        default:
            break
        }

        if matchPending(msg, now: now) { return }
        // Pushes for another user than the daemon's are not delivered (the server sends them again
        // when that user is next identified).
        guard let engagementUser = pushesFor else { return }

        switch msg {
        case .engagement(let e):
            // `message` and `bridge` are copied from the 110's bytes, not built as a tree (EngagementJournal).
            let popupURL = EngagementJournal.popupURLJSON(identity?.popupURL)
            let event = DaemonEvent(engagement: EngagementJournal.data(for: e, popupURLJSON: popupURL))
            if let uid = e.engagementUID {
                out.append(.journalOnce(user: engagementUser, uid: uid, event))
            } else {
                out.append(.emit(event))
            }
        case .executeDeepLink(let d):
            let event = deepLinkEvent(source: "server", dp: d.dp, engagementUID: d.engagementUID)
            if let uid = d.engagementUID {
                out.append(.journalOnce(user: engagementUser, uid: uid, event))
            } else {
                out.append(.emit(event))
            }
            if let action = d.deepLink.clientAction, firstReport(user: engagementUser, uid: d.engagementUID) {
                queueClientAction(action, now: now)
            }
        case .publicPropertiesChanged(let p):
            updateProps(p.props)
        case .sawShowSpinPush(let s):
            let url = identity?.gamificationURL.map { WrapperURL.miniGame($0, push: s) }
            emit("minigame", .object([
                "message": .object(s.json),
                "saw_template_id": .number(s.sawTemplateID),
                "url": url.map(JSONValue.string) ?? .null,
            ]), journaled: true)
        case .eventResponse, .loginResponse, .logoutResponse, .registerPushTokenResponse,
             .initSessionResponse, .identifyUserResponse, .ping, .pong:
            break // answers to the daemon's own messages: consumed
        case .other(let cid, let json):
            emit("message", .object([
                "message": .object(json),
                "name": cid.eventName.map(JSONValue.string) ?? .null,
            ]), journaled: true)
        }
    }

    /// `client_action`: for `dp:action&action=<name>`, the name the daemon reported to the server
    /// (the app has nothing to do for it); else null.
    func deepLinkEvent(source: String, dp: String, engagementUID: String?) -> DaemonEvent {
        let link = DeepLink(dp)
        let url = identity?.gamificationURL.flatMap { link.gamificationURL(wrapper: $0) }
        return DaemonEvent(name: "deeplink", data: .object([
            "source": .string(source),
            "engagement_uid": engagementUID.map(JSONValue.string) ?? .null,
            "dp": .string(dp),
            "kind": .string(link.kind.rawValue),
            "url": url.map(JSONValue.string) ?? .null,
            "client_action": link.clientAction.map(JSONValue.string) ?? .null,
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
        if actedDeepLinks.contains(key) { return false }
        actedDeepLinks.append(key)
        if actedDeepLinks.count > Self.maxActedDeepLinks { actedDeepLinks.removeFirst(actedDeepLinks.count - Self.maxActedDeepLinks) }
        return true
    }

    /// Merges public props (server 108, bridge 7), emits `props`, persists them.
    mutating func updateProps(_ changes: JSONObject) {
        props = props.merging(changes)
        emit("props", .object(props), journaled: false)
        if user != nil { out.append(.persistProfile(publicUsername: identity?.publicUsername, props: props.serialized())) }
    }

    /// A response to a pending `request`: by uuid first, else the oldest request sent on this
    /// connection that waits for this cid.
    mutating func matchPending(_ msg: ServerMessage, now: Int64) -> Bool {
        guard let c = connection?.id, !pending.isEmpty else { return false }
        let cid = msg.cid.rawValue
        var index: Int?
        if let u = msg.uuid { index = pending.firstIndex { $0.sentOn == c && $0.message.uuid == u } }
        if index == nil { index = pending.firstIndex { $0.sentOn == c && $0.expectCid == cid } }
        guard let i = index else { return false }
        let p = pending.remove(at: i)
        let errCode = msg.json["errCode"]?.int64Value ?? 0
        let errMsg = msg.json["errMsg"]?.stringValue
        if errCode != 0 || msg.cid == .unsupportedCommand {
            reply(p.id, .failure(SessionReplyError(
                .serverError, "the server answered \(ClassID(p.message.cid)) with \(msg.cid), errCode \(errCode)\(errMsg.map { " (\($0))" } ?? "")",
                errCode: errCode, errMsg: errMsg)))
        } else {
            reply(p.id, .success(.object(["message": .object(msg.json)])))
        }
        rescheduleRequestTimer()
        return true
    }

    mutating func rescheduleRequestTimer() {
        let next = (pending.map(\.deadlineMs) + identifyWaiters.map(\.deadlineMs)).min()
        if let next {
            if deadlines[.requests] != next { schedule(.requests, at: next) }
        } else {
            cancel(.requests)
        }
    }

    mutating func expireRequests(now: Int64) {
        var kept: [PendingRequest] = []
        for p in pending {
            if p.deadlineMs <= now {
                let what = p.sentOn == nil
                    ? "no session to send \(ClassID(p.message.cid)) within the timeout"
                    : "no answer with cid \(p.expectCid) to \(ClassID(p.message.cid)) within the timeout"
                reply(p.id, .failure(SessionReplyError(.timeout, what)))
            } else {
                kept.append(p)
            }
        }
        pending = kept
        var keptWaiters: [(id: SessionRequestID, deadlineMs: Int64)] = []
        for w in identifyWaiters {
            if w.deadlineMs <= now {
                reply(w.id, .failure(SessionReplyError(.notReady, "the server did not answer IDENTIFY in time (state: \(publicState.rawValue)); the user stays configured and is identified when the session is ready")))
            } else {
                keptWaiters.append(w)
            }
        }
        identifyWaiters = keptWaiters
        deadlines[.requests] = nil
        rescheduleRequestTimer()
    }
}
