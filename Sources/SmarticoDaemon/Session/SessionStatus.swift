import SmarticoProtocol

extension SessionMachine {
    /// The status object of socket-api.md. The machine knows the session part; the driver
    /// passes what the store and the socket server know.
    public func status(outbox: OutboxStatus? = nil, journal: JournalBounds? = nil, subscribers: Int = 0) -> JSONValue {
        func opt(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        func opt(_ n: Int64?) -> JSONValue { n.map { JSONValue.number($0) } ?? .null }
        let c = lastConnection
        let r = c?.initResponse
        return .object([
            "state": .string(state.rawValue),
            "since_ms": .number(shown.sinceMs),
            "server": .object([
                "url": .string(redactedURL(config.server.url)),
                "connected_at_ms": opt(c?.connectedAtMs),
            ]),
            "session": .object([
                "session_id": opt(c?.sessionID),
                "products": r.map { .array($0.products.map { JSONValue.number($0.rawValue) }) } ?? .array([]),
                // 002 §1.2: the widget may be opened only with product 100: this connection's
                // INIT when there is one, else the one that identified the user. False: no
                // gamification URL is handed out.
                "gamification": .bool(r.map(Self.offersGamification) ?? gamificationOffered),
                "settings": .object(r?.settings ?? [:]),
                "payload": .object(r?.payload ?? [:]),
            ]),
            "user": .object([
                "ext_user_id": opt(user?.extUserID),
                // Smartico's own id of the user, from the IDENTIFY answer (kept in the props).
                "user_id": props["user_id"] ?? .null,
                "public_username": opt(account.identity?.publicUsername),
                // The wrapper pages as the `identified` event hands them out (force_mobile=true).
                "gf_url": opt(gamificationURL),
                "popup_url": opt(popupURL),
                "props": .object(props),
                "identified": .bool(identifiedOnConn),
                "rejected": memory.rejected.map { r in .object([
                    "ext_user_id": .string(r.extUserID),
                    "errCode": opt(r.errCode),
                    "errMsg": opt(r.errMsg),
                ]) } ?? .null,
            ]),
            "counters": .object([
                "reconnects": .number(counters.reconnects),
                "messages_in": .number(counters.messagesIn),
                "messages_out": .number(counters.messagesOut),
                "pings": .number(counters.pings),
                "pongs": .number(counters.pongs),
                "answers_dropped": .number(counters.answersDropped),
            ]),
            "last_ping_ms": opt(shown.lastPingMs),
            "outbox": .object([
                "depth": .number(outbox?.depth ?? 0),
                "oldest_ms": opt(outbox?.oldestMs),
            ]),
            "journal": .object([
                "last_seq": .number(journal?.lastSeq ?? 0),
                "first_seq": .number(journal?.firstSeq ?? 0),
            ]),
            "subscribers": .number(subscribers),
            "backoff": .object([
                "attempt": .number(dialing.attempt),
                "retry_at_ms": opt(retryAtMs),
            ]),
            "last_error": shown.lastError.map { e in .object([
                "code": .string(e.code),
                "message": .string(e.message),
                "at_ms": .number(e.atMs),
            ]) } ?? .null,
        ])
    }

    /// When the next connection attempt starts, while backing off.
    var retryAtMs: Int64? {
        if case .backoff(let at) = current { return at }
        return nil
    }
}
