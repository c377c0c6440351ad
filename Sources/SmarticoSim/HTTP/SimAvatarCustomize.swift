import SmarticoProtocol

/// `POST /avatar-customize`: the avatar service the SDK's `avatarsCustomize` posts to (the daemon's
/// `avatars.customize` finds it at `DYNAMIC_IMAGE_DOMAIN` + `avatar-customize`). Stateless:
/// - a body that is not a JSON object, or lacks `label_api_key` (36 characters), `user_ext_id`,
///   `user_id`, `prompt_id`, `avatar_url` or `avatar_real_id`: 400 with `{"errCode":-1,"errMessage"}`;
/// - a prompt the simulator's catalogue (cid 564: prompts 1 and 2) does not have, 0 included:
///   200 with `{"errCode":-1,"errMessage":"unknown prompt_id …"}` (a service error is an answer);
/// - else 200 with `{"cdn_url"}`: an `/avatar/…` image of the simulator (`http://` + Host).
/// Every POST is recorded (client `http`, the body as its message; `http` has its `content_type`,
/// `accept` and `status`).
extension SimHTTPRouter {
    public static let avatarCustomizePath = "/avatar-customize"

    /// The prompts the simulator's cid 564 answer lists.
    static let avatarPromptIDs: Set<Int64> = [1, 2]

    func avatarCustomize(_ request: SimHTTPRequest) -> (response: SimHTTPResponse, record: Record?) {
        guard request.method == "POST" else {
            return (.text(405, "Method Not Allowed", "\(request.method.truncatedUTF8(20)) is not supported; use POST",
                          extraHeaders: [("Allow", "POST")]), nil)
        }
        let http: JSONObject = ["method": .string(request.method), "path": .string(request.path),
                                "content_type": request.header("content-type").map(JSONValue.string) ?? .null,
                                "accept": request.header("accept").map(JSONValue.string) ?? .null]
        func answer(_ status: Int, _ body: JSONObject, message: JSONObject?, error: String? = nil) -> (SimHTTPResponse, Record?) {
            var recorded = http
            recorded["status"] = .number(Int64(status))
            let response = SimHTTPResponse(status: status, reason: status == 200 ? "OK" : "Bad Request",
                                           contentType: "application/json", body: body.serialized())
            let text = message == nil ? String(decoding: request.body, as: UTF8.self).truncatedUTF8(65536) : nil
            return (response, Record(http: recorded, message: message, raw: text, error: error))
        }
        func refuse(_ why: String, message: JSONObject?) -> (SimHTTPResponse, Record?) {
            answer(400, ["errCode": -1, "errMessage": .string(why)], message: message, error: why)
        }
        guard case .object(let body)? = try? JSONValue(parsing: request.body) else {
            return refuse("the body is not a JSON object", message: nil)
        }
        guard let key = body["label_api_key"]?.stringValue, key.count == 36 else {
            return refuse("label_api_key must be the 36-character label key (without its -<env> suffix)", message: body)
        }
        guard body["user_ext_id"]?.stringValue?.isEmpty == false else { return refuse("user_ext_id is required", message: body) }
        guard let user = body["user_id"]?.int64Value else { return refuse("user_id (a number) is required", message: body) }
        guard let prompt = body["prompt_id"]?.int64Value else { return refuse("prompt_id (a number) is required", message: body) }
        guard body["avatar_url"]?.stringValue?.isEmpty == false else { return refuse("avatar_url is required", message: body) }
        guard let avatar = body["avatar_real_id"]?.int64Value else { return refuse("avatar_real_id (a number) is required", message: body) }
        guard Self.avatarPromptIDs.contains(prompt) else {
            return answer(200, ["errCode": -1, "errMessage": .string("unknown prompt_id \(prompt)")], message: body)
        }
        let host = request.header("host") ?? ""
        let path = "/avatar/custom-\(avatar)-p\(prompt)-u\(user)"
        return answer(200, ["cdn_url": .string(host.isEmpty ? path : "http://\(host)\(path)")], message: body)
    }
}
