import SmarticoClient
import SmarticoProtocol

/// Human-readable renderings of the daemon's answers and events (socket-api.md). Every field is
/// read defensively: a missing or differently typed field shows as `—`, never a crash, and fields
/// added by a newer daemon are shown too.
enum Format {
    // MARK: status

    /// The status object as aligned `name: value` lines.
    static func status(_ s: JSONValue, now: Int64) -> [String] {
        var rows: [(String, String)] = []
        let known: Set<String> = ["state", "since_ms", "server", "session", "user", "counters", "last_ping_ms", "outbox", "journal", "subscribers", "backoff", "last_error", "http_queue"]

        var state = describe(s["state"])
        if let since = s["since_ms"]?.int64Value, since > 0 {
            state += " for \(formatDuration(ms: now - since)) (since \(localTime(ms: since)))"
        }
        rows.append(("state", state))

        var server = describe(s["server"]?["url"])
        if let at = s["server"]?["connected_at_ms"]?.int64Value {
            server += ", connected at \(localTime(ms: at))"
        } else {
            server += ", not connected"
        }
        rows.append(("server", server))

        if let id = s["session"]?["session_id"], !id.isNull {
            var session = "id \(describe(id))"
            if let products = s["session"]?["products"]?.arrayValue {
                session += ", products " + products.map { describe($0) }.joined(separator: " ")
            }
            rows.append(("session", session))
        } else {
            rows.append(("session", "none"))
        }

        if let user = s["user"]?["ext_user_id"], !user.isNull {
            var text = describe(user)
            if let name = s["user"]?["public_username"], !name.isNull { text += " (\(describe(name)))" }
            text += s["user"]?["identified"]?.boolValue == true ? ", identified" : ", not identified on this session"
            rows.append(("user", text))
        } else {
            rows.append(("user", "anonymous"))
        }
        if let r = s["user"]?["rejected"]?.objectValue {
            var text = "\(describe(r["ext_user_id"])): errCode \(describe(r["errCode"]))"
            if let m = r["errMsg"], !m.isNull { text += " (\(describe(m)))" }
            rows.append(("rejected", text))
        }
        if let props = s["user"]?["props"]?.objectValue, !props.isEmpty {
            rows.append(("props", describe(.object(props), limit: 200)))
        }

        let c = s["counters"]
        rows.append(("messages", "in \(describe(c?["messages_in"])), out \(describe(c?["messages_out"]))"))
        rows.append(("keepalive", "pings \(describe(c?["pings"])), pongs \(describe(c?["pongs"]))"
            + (s["last_ping_ms"]?.int64Value.map { ", last \(formatDuration(ms: now - $0)) ago (\(localTime(ms: $0)))" } ?? ", none yet")))
        rows.append(("reconnects", describe(c?["reconnects"])))
        if let counters = c?.objectValue {
            for (key, value) in counters where !["messages_in", "messages_out", "pings", "pongs", "reconnects"].contains(key) {
                rows.append((key, describe(value)))
            }
        }

        let depth = s["outbox"]?["depth"]?.int64Value
        var outbox = depth.map { $0 == 0 ? "empty" : "\($0) waiting" } ?? describe(s["outbox"]?["depth"])
        if let oldest = s["outbox"]?["oldest_ms"]?.int64Value, depth != 0 {
            outbox += ", oldest \(formatDuration(ms: now - oldest)) old (\(localTime(ms: oldest)))"
        }
        rows.append(("outbox", outbox))
        if let h = s["http_queue"], !h.isNull { rows.append(("http queue", Self.httpQueue(h, now: now))) }

        let first = s["journal"]?["first_seq"]?.int64Value ?? 0
        let last = s["journal"]?["last_seq"]?.int64Value
        if let last {
            rows.append(("journal", first == 0 && last == 0 ? "empty" : "seq \(first)…\(last)"))
        } else {
            rows.append(("journal", describe(s["journal"])))
        }
        rows.append(("subscribers", describe(s["subscribers"])))
        if let backoff = Self.backoff(s["backoff"]) { rows.append(("backoff", backoff)) }
        if let lastError = Self.lastError(s["last_error"], now: now) { rows.append(("last error", lastError)) }

        if let object = s.objectValue {
            for (key, value) in object where !known.contains(key) {
                rows.append((key, describe(value, limit: 200)))
            }
        }
        return aligned(rows)
    }

    /// The `http_queue` member: depth, oldest call, deliveries and drops, the last error.
    static func httpQueue(_ h: JSONValue, now: Int64) -> String {
        let depth = h["depth"]?.int64Value
        var text = depth.map { $0 == 0 ? "empty" : "\($0) waiting" } ?? describe(h["depth"])
        if let oldest = h["oldest_ms"]?.int64Value, depth != 0 {
            text += ", oldest \(formatDuration(ms: now - oldest)) old (\(localTime(ms: oldest)))"
        }
        text += "; \(describe(h["delivered"])) delivered, \(describe(h["dropped"])) dropped, \(describe(h["failed_attempts"])) failed attempts"
        if let message = h["last_error"]?["message"]?.stringValue {
            let at = h["last_error"]?["at_ms"]?.int64Value.map { " (\(formatDuration(ms: now - $0)) ago)" } ?? ""
            text += "; last error\(at): \(String(message.prefix(300)))"
        }
        return text
    }

    /// The `backoff` member: the pending retry while backing off; otherwise the failed attempts
    /// counted since the last healthy minute (they set the next delay), or nothing when there are none.
    static func backoff(_ b: JSONValue?) -> String? {
        guard let b, !b.isNull else { return nil }
        guard let attempt = b["attempt"]?.int64Value else { return describe(b, limit: 200) }
        if let retryAt = b["retry_at_ms"]?.int64Value {
            return "attempt \(attempt), next try at \(localTime(ms: retryAt))"
        }
        if attempt == 0 { return nil }
        return "none pending (\(attempt) failed attempt\(attempt == 1 ? "" : "s") in a row; the count resets after a healthy minute)"
    }

    /// The `last_error` member: `code: message`, how long ago and when; nothing while it is null.
    static func lastError(_ e: JSONValue?, now: Int64) -> String? {
        guard let e, !e.isNull else { return nil }
        guard let code = e["code"]?.stringValue else { return describe(e, limit: 300) }
        var text = "\(oneLine(code, limit: 60)): \(describe(e["message"], limit: 300))"
        if let at = e["at_ms"]?.int64Value { text += ", \(formatDuration(ms: now - at)) ago (\(localTime(ms: at)))" }
        return text
    }

    // MARK: results

    /// The result of an op in one or a few lines.
    static func result(op: String, _ r: JSONValue) -> [String] {
        switch op {
        case "hello":
            return ["smarticod \(describe(r["version"])), socket API \(describe(r["api"])), session \(describe(r["state"]))"]
        case "identify":
            var rows: [(String, String)] = [("identified", describe(r["ext_user_id"]))]
            for key in ["public_username", "avatar_id", "avatar_url", "gf_url", "popup_url"] {
                if let v = r[key], !v.isNull { rows.append((key, describe(v))) }
            }
            if let props = r["props"]?.objectValue, !props.isEmpty { rows.append(("props", describe(.object(props), limit: 200))) }
            return aligned(rows)
        case "logout":
            return ["logged out; a new anonymous session opens"]
        case "forget":
            return ["forgotten"]
        case "log_level":
            return ["log level \(describe(r["level"])) (was \(describe(r["previous"]))) until the next restart or reload"]
        case "login":
            if r["sent"]?.boolValue == true { return ["LOGIN sent"] }
            if r["after_identify"]?.boolValue == true { return ["LOGIN will be sent after the next IDENTIFY"] }
            return [describe(r)]
        case "push_report":
            return [r["queued"]?.boolValue == true ? "push report queued" : describe(r)]
        case "request":
            // Compact JSON as the daemon sent it (one line: JSON escapes newlines), for jq.
            return [(r["message"] ?? .null).serializedString()]
        default:
            if r["with_identify"]?.boolValue == true {
                return ["not identified yet: remembered, sent inside the next IDENTIFY"]
            }
            if let uuid = r["uuid"]?.stringValue {
                return r["queued"]?.boolValue == true
                    ? ["queued (uuid \(uuid)): stored, sent once the session is ready"]
                    : ["sent (uuid \(uuid))"]
            }
            if let object = r.objectValue, object.isEmpty { return ["ok"] }
            return [describe(r, limit: Int.max)]
        }
    }

    // MARK: events

    /// The names of socket-api.md's events (what `tail --types` accepts).
    static let eventNames = ["engagement", "minigame", "deeplink", "message", "session", "identified", "props",
                             "game_opening", "bridge", "error", "gap"]

    /// The width of the type column of `tail`.
    static let typeWidth = 12

    /// One line for an event: local time, type, the essentials, `[seq N]`.
    /// `previousProps` is the last `props` data seen (to show what changed); updated here.
    static func event(_ e: SmarticoEvent, previousProps: inout JSONObject?) -> String {
        let time = e.ts.map { localTime(ms: $0) } ?? "—"
        let text = essentials(e.name, e.data, previousProps: &previousProps)
        let column = oneLine(e.name, limit: 40)
        let padded = column + String(repeating: " ", count: max(1, typeWidth - column.count + 1))
        let seq = e.seq.map { "  [seq \($0)]" } ?? ""
        return time + "  " + padded + text + seq
    }

    private static func essentials(_ name: String, _ d: JSONValue, previousProps: inout JSONObject?) -> String {
        switch name {
        case "engagement":
            let m = d["message"]
            var text = "uid=\(describe(m?["engagement_uid"])) activity_type=\(activity(m?["activityType"] ?? m?["activity_type"]))"
            if let id = m?["engagement_id"] { text += " engagement_id=\(describe(id))" }
            return text + member(d, "popup_url")
        case "minigame":
            let url = d["url"].flatMap { $0.isNull ? nil : describe($0, limit: 2000) } ?? "(no gamification URL known)"
            return "saw_template_id=\(describe(d["saw_template_id"])) url=\(url)" + member(d, "problem")
        case "deeplink":
            return "\(describe(d["source"])) \(describe(d["kind"])) dp=\(describe(d["dp"]))" + member(d, "engagement_uid")
                + member(d, "url", limit: 2000)
        case "message":
            return "cid=\(describe(d["message"]?["cid"]))" + member(d, "name") + member(d, "problem")
        case "session":
            var text = "state=\(describe(d["state"]))" + member(d, "reason") + member(d, "attempt")
            if let ms = d["retry_in_ms"]?.int64Value { text += " retry_in=\(formatDuration(ms: ms))" }
            if let m = d["message"], !m.isNull { text += " — \(describe(m, limit: 300))" }
            return text
        case "identified":
            return "ext_user_id=\(describe(d["ext_user_id"]))" + member(d, "public_username") + member(d, "gf_url")
        case "props":
            guard let props = d.objectValue else { return describe(d) }
            defer { previousProps = props }
            if let before = previousProps {
                var changed: [String] = []
                for (key, value) in props where before[key] != value {
                    changed.append("\(oneLine(key, limit: 60))=\(describe(value, limit: 80))")
                }
                if changed.isEmpty { return "unchanged (\(props.count) props)" }
                return oneLine("changed " + changed.joined(separator: " "), limit: 400)
            }
            if props.isEmpty { return "none" }
            return oneLine(props.map { "\($0.key)=\(describe($0.value, limit: 80))" }.joined(separator: " "), limit: 400)
        case "game_opening", "bridge":
            return "bcid=\(describe(d["bcid"])) " + describe(d, limit: 200)
        case "error":
            return "\(describe(d["code"])): \(describe(d["message"], limit: 1000))"
        case "gap":
            if d["reason"] == .string("journal_replaced") {
                return "the daemon's journal is not the one seen before (its store was replaced); replaying the new journal from its start"
            }
            if d["reason"] == .string("since_beyond_last_seq") {
                return "seq \(describe(d["since"])) is beyond this journal's last seq \(describe(d["last_seq"])) (a replaced store?); replaying the journal from its start"
            }
            let first = describe(d["first_available_seq"])
            return "\(describe(d["missed"])) event(s) were no longer in the journal (retention); continuing from seq \(first)"
        default:
            return describe(d, limit: 200)
        }
    }

    /// ` key=value` for a member of `d` that is there and not null (the value as ``describe(_:limit:)``
    /// shows it); "" otherwise.
    private static func member(_ d: JSONValue, _ key: String, limit: Int = 300) -> String {
        guard let v = d[key], !v.isNull else { return "" }
        return " \(key)=\(describe(v, limit: limit))"
    }

    private static func activity(_ v: JSONValue?) -> String {
        guard let n = v?.lenientInt64 else { return describe(v) }
        let name: String? = switch n {
        case 20: "banner"
        case 30: "popup"
        case 31: "inbox"
        case 40: "push"
        default: nil
        }
        return name.map { "\(n)(\($0))" } ?? "\(n)"
    }
}
