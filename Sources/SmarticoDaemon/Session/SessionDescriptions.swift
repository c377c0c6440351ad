import SmarticoProtocol

// Log-safe descriptions: the user hash and the push token never appear, and message bytes are
// summarized (IDENTIFY carries the hash, 1003 the token). A driver may log inputs and actions
// with "\(value)".

extension SessionRequest: CustomStringConvertible {
    public var description: String {
        switch self {
        case .identify(let ext, let hash): "identify(\(ext), hash: \(hash.map { Secret($0).masked } ?? "none"))"
        case .logout: "logout"
        case .login: "login"
        case .pushToken(_, let platform, let status, _):
            "push_token(token: (masked), platform: \(platform.map(String.init) ?? "default"), status: \(status))"
        case .language(let l): "language(\(l))"
        case .event(let t, _): "event(\(t))"
        case .report(let kind, let uid, let a, _): "report(\(kind.rawValue), \(uid), activityType: \(a))"
        case .minigameAck(let t, let p): "minigame_ack(\(t), \(p.map(String.init) ?? "nil"))"
        case .send(let m): "send(cid \(m["cid"].map { "\($0)" } ?? "?"))"
        case .request(let m, let e, let t):
            "request(cid \(m["cid"].map { "\($0)" } ?? "?"), expect: \(e.map(String.init) ?? "default"), timeout_ms: \(t.map(String.init) ?? "default"))"
        case .bridge(let o): "bridge(bcid \(o["bcid"].map { "\($0)" } ?? "?"))"
        }
    }
}

extension SessionInput: CustomStringConvertible {
    public var description: String {
        switch self {
        case .start(let s): "start(device \(s.deviceID), user: \(s.user?.extUserID ?? "none"))"
        case .connected(let c): "connected(\(c))"
        case .connectFailed(let c, let reason, let message): "connectFailed(\(c), \(reason): \(message))"
        case .received(let c, let bytes): "received(\(c), \(bytes.count) bytes)"
        case .closed(let c, let code, let reason, let clean):
            "closed(\(c), code: \(code.map(String.init) ?? "none"), \(reason)\(clean ? ", clean" : ""))"
        case .timerFired(let t): "timerFired(\(t))"
        case .hashResult(let token, let outcome):
            switch outcome {
            case .hash: "hashResult(#\(token), hash: (masked))"
            case .failed(let e): "hashResult(#\(token), failed: \(e))"
            }
        case .outboxStored(let uuid, let failure): "outboxStored(\(uuid)\(failure.map { ", failure: \($0)" } ?? ""))"
        case .outboxLoaded(let entries): "outboxLoaded(\(entries.count) messages)"
        case .outboxDropped(let user, let count): "outboxDropped(\(user ?? "anonymous"), \(count))"
        case .request(let id, let r, let owner): "request(\(id), \(r), \(owner))"
        case .abandon(let ids): "abandon(\(ids.count) requests)"
        case .shutdown: "shutdown"
        case .networkChanged: "networkChanged"
        case .reload: "reload"
        }
    }
}

extension SessionAction: CustomStringConvertible {
    public var description: String {
        switch self {
        case .connect(let c, let url): "connect(\(c), \(redactedURL(url)))"
        case .send(let c, let m): "send(\(c), \(m))"
        case .close(let c, let code, let reason): "close(\(c), \(code), \(reason))"
        case .abort(let c): "abort(\(c))"
        case .schedule(let t, let at): "schedule(\(t), at: \(at))"
        case .cancel(let t): "cancel(\(t))"
        case .runHashCommand(let token, let argv, let user): "runHashCommand(#\(token), \(argv.first ?? ""), user: \(user))"
        case .persistUser(let u): "persistUser(\(u.extUserID), hash: \(u.hash == nil ? "none" : "(masked)"))"
        case .persistProfile(let name, let props): "persistProfile(\(name ?? "nil"), \(props.count) bytes of props)"
        case .recordActivity(let at): "recordActivity(\(at))"
        case .userAccepted(let user): "userAccepted(\(user))"
        case .clearUser: "clearUser"
        case .persistPush(let p): "persistPush(token: (masked), platform: \(p.platform), status: \(p.status))"
        case .persistLanguageSent(let user, let language): "persistLanguageSent(\(user ?? "anonymous"), \(language))"
        case .storeOutbox(let e): "storeOutbox(\(ClassID(Int64(e.cid))) uuid=\(e.uuid))"
        case .storeLatest(let slot, let e): "storeLatest(\(slot), uuid=\(e.uuid))"
        case .loadOutbox(let limit): "loadOutbox(\(limit))"
        case .markSent(let uuids): "markSent(\(uuids.count))"
        case .dropOutbox(let user): "dropOutbox(\(user ?? "anonymous"))"
        case .emit(let e): "emit(\(e.name)\(e.journaled ? ", journaled" : ""))"
        case .journalOnce(let user, let uid, let e): "journalOnce(\(e.name), user: \(user), uid: \(uid))"
        case .reply(let id, let r):
            switch r {
            case .success: "reply(\(id), ok)"
            case .failure(let e): "reply(\(id), \(e))"
            }
        case .statusChanged(let s): "statusChanged(\(s))"
        case .stopped: "stopped"
        }
    }
}
