import SmarticoProtocol

/// Quirks mode: the shapes the real server may send that 002's examples do not show, so a client
/// cannot rely on them by accident. Applied to every answer and push of a client in quirks mode
/// (`--quirks`, fault `quirks`); answers also get fresh uuids and client PINGs no PONG.
///
/// | cid | quirks |
/// |---|---|
/// | every one | an unknown field `server_node` |
/// | 4 | `settings.FCM_SENDER_ID` a number; no `payload.city` |
/// | 6 (success) | `avatar_id` a number; an extra numeric `user_id`; `props.ach_points_balance` a string; no `native_app_popup_url` |
/// | other answers (success) | no `errMsg`; `errCode` a string (`"0"`) |
/// | 110 | `cid` a string (`"110"`); `activity_type` instead of `activityType`; `engagement_id` a string; no `root_audience_id` |
/// | 105 | an unknown `payload.target` |
/// | 108 | numeric props as strings |
/// | 706 | `saw_template_id` and `spin_count` strings |
/// | 707 | no `saw_template_id`; `pending_message_id` a string |
/// | 708 | `pending_message_id` a string |
/// | 808 | `jp_template_id` and `winning_amount` strings |
public enum SimQuirks {
    /// `o` as quirks mode sends it (without `ts`/`uuid`, added later).
    public static func apply(_ o: JSONObject) -> JSONObject {
        var m = o
        let cid = o["cid"]?.int64Value ?? 0
        let success = (o["errCode"]?.int64Value ?? 0) == 0
        m["server_node"] = "sim-quirks-01"
        switch cid {
        case 4 where success:
            if var settings = m["settings"]?.objectValue {
                settings["FCM_SENDER_ID"] = number(settings["FCM_SENDER_ID"])
                m["settings"] = .object(settings)
            }
            if var payload = m["payload"]?.objectValue {
                payload["city"] = nil
                m["payload"] = .object(payload)
            }
        case 6 where success:
            m["avatar_id"] = number(m["avatar_id"])
            m["user_id"] = 4_242_424
            if var props = m["props"]?.objectValue {
                props["ach_points_balance"] = string(props["ach_points_balance"])
                m["props"] = .object(props)
            }
            m["native_app_popup_url"] = nil
        case 110:
            m["cid"] = string(m["cid"])
            if let t = m["activityType"] {
                m["activityType"] = nil
                m["activity_type"] = t
            }
            m["engagement_id"] = string(m["engagement_id"])
            m["root_audience_id"] = nil
        case 105:
            if var payload = m["payload"]?.objectValue {
                payload["target"] = "_self"
                m["payload"] = .object(payload)
            }
        case 108:
            if var props = m["props"]?.objectValue {
                for (k, v) in props where v.numberValue != nil { props[k] = string(v) }
                m["props"] = .object(props)
            }
        case 706:
            m["saw_template_id"] = string(m["saw_template_id"])
            m["spin_count"] = string(m["spin_count"])
        case 707:
            m["saw_template_id"] = nil
            m["pending_message_id"] = string(m["pending_message_id"])
        case 708:
            m["pending_message_id"] = string(m["pending_message_id"])
        case 808:
            m["jp_template_id"] = string(m["jp_template_id"])
            m["winning_amount"] = string(m["winning_amount"])
        default:
            if success, m["errCode"] != nil {
                m["errMsg"] = nil
                m["errCode"] = string(m["errCode"])
            }
        }
        return m
    }

    /// A number as its digits in a string (absent stays absent).
    static func string(_ v: JSONValue?) -> JSONValue? {
        guard let v else { return nil }
        if let n = v.numberValue { return .string(n.description) }
        return v
    }

    /// A string of digits as a number (absent stays absent).
    static func number(_ v: JSONValue?) -> JSONValue? {
        guard let v else { return nil }
        if let s = v.stringValue, let n = UInt64(s) { return .number(JSONNumber(n)) }
        return v
    }
}
