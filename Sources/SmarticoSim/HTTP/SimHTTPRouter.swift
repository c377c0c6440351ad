import SmarticoProtocol

/// The simulator's HTTP pages, sans I/O: a request in, response bytes out.
///
/// | path | what |
/// |---|---|
/// | `/` | an index of the pages |
/// | `/wrapper-gf.html` | the gamification wrapper (`native_app_gf_url`): user, label, brand, the `dp` deep link |
/// | `/wrapper-popup.html` | the popup wrapper (`native_app_popup_url`): the engagement arrives via the bridge |
/// | `/avatar/<id>` | an SVG avatar (`DYNAMIC_IMAGE_DOMAIN` + `avatar/<avatar_id>`) |
/// | `/inbox/<guid>.json` | an inbox message body (`INBOX_PUBLIC_CDN` + guid + `.json`), 404 for unknown guids; recorded |
/// | `/avatar-customize` | the avatar service (POST, `avatars.customize`): `{"cdn_url"}`, or `{"errCode","errMessage"}` for an unknown prompt (200) or a bad body (400); recorded |
/// | `/health` | `ok` |
/// | `/services/public` | the public API (002 §4, §5): push token registrations (GET `event=` or POST body) and push engagement reports, recorded |
public struct SimHTTPRouter: Sendable {
    public init() {}

    /// A public API call to record: the request's HTTP facts and its event/body.
    public struct Record: Sendable, Equatable {
        /// `{"method","path","api_key"?,"brand_key"?,"version"?}`
        public var http: JSONObject
        /// The `event` (GET) or body (POST) object, when it is one.
        public var message: JSONObject?
        /// The body or query text when it is not a JSON object.
        public var raw: String?
        /// Why the call was refused, if it was.
        public var error: String?
    }

    /// The response, and what to record (public API calls only).
    public func handle(_ request: SimHTTPRequest) -> (response: SimHTTPResponse, record: Record?) {
        if request.path == PublicAPI.path { return publicAPI(request) }
        if request.path == Self.avatarCustomizePath { return avatarCustomize(request) }
        if request.path.hasPrefix(Self.inboxPrefix) {
            // Inbox body fetches are recorded too (a test counts them: the daemon caches bodies).
            let response = respond(to: request)
            // `target` as sent (not decoded): a test checks how the daemon encoded the guid.
            var http: JSONObject = ["method": .string(request.method), "path": .string(request.path), "target": .string(request.target),
                                    "status": .number(Int64(response.status))]
            if response.status != 200 { http["error"] = .string("no inbox body") }
            return (response, Record(http: http, message: nil, raw: "", error: nil))
        }
        return (respond(to: request), nil)
    }

    /// The body Smartico's public API answers with (002 §5).
    public static let publicAPIOK: [UInt8] = Array(#"{"errCode":0,"detailMessage":"","stackTrace":[],"suppressedExceptions":[]}"#.utf8)

    private func publicAPI(_ request: SimHTTPRequest) -> (response: SimHTTPResponse, record: Record?) {
        var http: JSONObject = ["method": .string(request.method), "path": .string(request.path)]
        func refuse(_ why: String, message: JSONObject? = nil, raw: String? = nil) -> (SimHTTPResponse, Record?) {
            let body: JSONObject = ["errCode": 1, "detailMessage": .string(why), "stackTrace": [], "suppressedExceptions": []]
            return (SimHTTPResponse(status: 400, reason: "Bad Request", contentType: "application/json", body: body.serialized()),
                    Record(http: http, message: message, raw: raw, error: why))
        }
        let ok = SimHTTPResponse(status: 200, reason: "OK", contentType: "application/json", body: Self.publicAPIOK)
        switch request.method {
        case "GET", "HEAD":
            do {
                let call = try PublicAPI.Request(query: request.rawQuery)
                http["api_key"] = call.apiKey.map(JSONValue.string) ?? .null
                http["brand_key"] = call.brandKey.map(JSONValue.string) ?? .null
                http["version"] = call.version.map(JSONValue.string) ?? .null
                return (ok, Record(http: http, message: call.event, raw: nil, error: nil))
            } catch {
                return refuse(error.description, raw: request.rawQuery.truncatedUTF8(65536))
            }
        case "POST":
            let text = String(decoding: request.body, as: UTF8.self)
            guard case .object(let body)? = try? JSONValue(parsing: request.body) else {
                return refuse("the body is not a JSON object", raw: text.truncatedUTF8(65536))
            }
            // The simulator's own reading, not the daemon's PushTokenRegistration.
            if let why = SimValidator.readPushTokenPost(body).refusal { return refuse(why, message: body) }
            http["api_key"] = body["api_key"] ?? .null
            http["brand_key"] = body["brand_key"] ?? .null
            return (ok, Record(http: http, message: body, raw: nil, error: nil))
        default:
            return (.text(405, "Method Not Allowed", "\(request.method.truncatedUTF8(20)) is not supported; use GET or POST",
                          extraHeaders: [("Allow", "GET, HEAD, POST")]), nil)
        }
    }

    /// The response to `request` (pages: GET and HEAD only; the public API through `handle`).
    public func respond(to request: SimHTTPRequest) -> SimHTTPResponse {
        if request.path == PublicAPI.path { return publicAPI(request).response }
        if request.path == Self.avatarCustomizePath { return avatarCustomize(request).response }
        guard request.method == "GET" || request.method == "HEAD" else {
            return .text(405, "Method Not Allowed", "\(request.method.truncatedUTF8(20)) is not supported; use GET",
                         extraHeaders: [("Allow", "GET, HEAD")])
        }
        let path = request.path
        switch path {
        case "/", "/index.html": return html(SimPages.index())
        case "/health": return .text(200, "OK", "ok")
        case "/wrapper-gf.html": return html(SimPages.gamificationWrapper(request))
        case "/wrapper-popup.html": return html(SimPages.popupWrapper(request))
        default:
            if path.hasPrefix(Self.inboxPrefix) { return inboxBody(path) }
            if path.hasPrefix("/avatar/") {
                let id = String(path.dropFirst("/avatar/".count))
                guard !id.isEmpty, !id.contains("/") else { return .text(404, "Not Found", "no avatar id in \(path.truncatedUTF8(80))") }
                return SimHTTPResponse(status: 200, reason: "OK", contentType: "image/svg+xml", body: Array(SimPages.avatarSVG(id: id).utf8))
            }
            return .text(404, "Not Found", "no page at \(path.truncatedUTF8(200)); see /")
        }
    }

    /// Where the inbox bodies are (INIT's `INBOX_PUBLIC_CDN` is the base URL + this).
    public static let inboxPrefix = "/inbox/"

    /// `/inbox/<guid>.json`: the wire `InboxMessageBody` of a sample message (SimInboxStoreData), 404 else.
    private func inboxBody(_ path: String) -> SimHTTPResponse {
        let name = path.dropFirst(Self.inboxPrefix.count)
        guard name.hasSuffix(".json"), let body = SimInboxStoreData.inboxBody(guid: String(name.dropLast(5))) else {
            return .text(404, "Not Found", "no inbox message body at \(path.truncatedUTF8(200))")
        }
        return SimHTTPResponse(status: 200, reason: "OK", contentType: "application/json", body: body.serialized())
    }

    /// Response bytes for a request (HEAD: without the body).
    public func responseBytes(for request: SimHTTPRequest) -> [UInt8] {
        respond(to: request).bytes(includeBody: request.method != "HEAD")
    }

    private func html(_ page: String) -> SimHTTPResponse {
        SimHTTPResponse(status: 200, reason: "OK", contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }
}

/// The HTML of the pages (small, self-contained, no external resources).
public enum SimPages {
    /// `&`, `<`, `>`, `"`, `'` escaped for HTML text and attribute values.
    public static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for ch in s.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    static func page(title: String, body: String, script: String = "", style: String = "") -> String {
        """
        <!doctype html>
        <html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>body{font-family:sans-serif;margin:1.5em}dt{font-weight:bold}code{background:#eee;padding:0 .2em}\(style)</style>
        </head><body>
        \(body)
        \(script.isEmpty ? "" : "<script>\n\(script)\n</script>")
        </body></html>

        """
    }

    static func field(_ request: SimHTTPRequest, _ name: String) -> String {
        request.parameter(name).map { "<code>\(escape($0))</code>" } ?? "<em>(none)</em>"
    }

    /// The bridge helper both wrappers use: postMessage to SmarticoBridge or ReactNativeWebView.
    static let bridgeScript = """
        function bridgeSend(m){var s=JSON.stringify(m);
          if(window.SmarticoBridge&&window.SmarticoBridge.postMessage){window.SmarticoBridge.postMessage(s);}
          else if(window.ReactNativeWebView){window.ReactNativeWebView.postMessage(s);}
          else{console.log('bridge (no native side):',s);}}
        """

    public static func index() -> String {
        page(title: "smartico-sim", body: """
            <h1>smartico-sim</h1>
            <p>A local stand-in for Smartico's server. Pages served here:</p>
            <ul>
            <li><code>/wrapper-gf.html?label_key=…&amp;brand_key=…&amp;user_ext_id=…&amp;dp=…</code>: gamification wrapper</li>
            <li><code>/wrapper-popup.html?label_key=…&amp;brand_key=…&amp;user_ext_id=…</code>: popup wrapper</li>
            <li><code>/avatar/&lt;avatar_id&gt;</code>: avatar image</li>
            <li><code>/inbox/&lt;guid&gt;.json</code>: inbox message body</li>
            <li><code>POST /avatar-customize</code>: avatar customization service</li>
            <li><code>/health</code></li>
            </ul>
            """)
    }

    /// The gamification wrapper: who, which label/brand, the deep link, and buttons that send
    /// bridge messages (4 EXECUTE_DEEP_LINK, 2 CLOSE_ME). Sends PAGE_READY (1) on load.
    public static func gamificationWrapper(_ request: SimHTTPRequest) -> String {
        let dp = request.parameter("dp")
        let link = dp.map { DeepLink($0) }
        let section = link.map { "<p>Section: <code>\(escape($0.action))</code> (\($0.kind.rawValue) deep link)</p>" } ?? "<p>Section: home</p>"
        return page(title: "Gamification (simulated)", body: """
            <h1>Gamification widget (simulated)</h1>
            <dl>
            <dt>User</dt><dd id="user">\(field(request, "user_ext_id"))</dd>
            <dt>Label key</dt><dd>\(field(request, "label_key"))</dd>
            <dt>Brand key</dt><dd>\(field(request, "brand_key"))</dd>
            <dt>Deep link (dp)</dt><dd id="dp">\(field(request, "dp"))</dd>
            </dl>
            \(section)
            <p><button onclick="bridgeSend({bcid:4,dp:'dp:gf_levels'})">Levels (bcid 4)</button>
            <button onclick="bridgeSend({bcid:4,dp:'dp:cashier'})">Cashier (bcid 4)</button>
            <button onclick="bridgeSend({bcid:2})">Close (bcid 2)</button></p>
            """, script: bridgeScript + "\nbridgeSend({bcid:1});bridgeSend({bcid:5});")
    }

    /// The popup wrapper: the engagement itself is not in the URL; it arrives through the Native
    /// Bridge as SHOW_ENGAGEMENT (bcid 3) after the page sent PAGE_READY (bcid 1). Like Smartico's
    /// page, it is meant for a transparent full-screen web view: it draws its own backdrop and a
    /// centred card with the engagement's title and template (`template_html`, rendered as HTML),
    /// reports its impression itself (SEND_TO_SOCKET, cid 103), then READY_TO_BE_SHOWN. OK
    /// (focused, so Enter presses it) reports the click (cid 104) and sends EXECUTE_DEEP_LINK.
    public static func popupWrapper(_ request: SimHTTPRequest) -> String {
        page(title: "Popup (simulated)", body: """
            <div id="backdrop"><div id="card">
            <h1 id="title">Popup wrapper (simulated)</h1>
            <p class="who">User \(field(request, "user_ext_id")) · label \(field(request, "label_key"))</p>
            <div id="engagement"><em>waiting for SHOW_ENGAGEMENT (bcid 3)…</em></div>
            <div id="template"></div>
            <p class="buttons"><button id="ok" autofocus>OK</button>
            <button id="close">Close</button></p>
            </div></div>
            """, script: bridgeScript + """

            var current=null;
            document.getElementById('ok').onclick=function(){
              if(current){bridgeSend({bcid:6,cid:104,engagement_uid:current.engagement_uid,activityType:current.activityType,action:'dp:ok'});}
              var dp=(current&&current.params&&current.params.button_dp)||'dp:ok';
              bridgeSend({bcid:4,dp:dp});};
            document.getElementById('close').onclick=function(){bridgeSend({bcid:2});};
            window.addEventListener('message',function(e){var m;try{m=typeof e.data==='string'?JSON.parse(e.data):e.data;}catch(x){return;}
              if(!m||m.bcid!==3)return;current=m;
              var t=(m.params&&m.params.title)||'Engagement';
              document.getElementById('title').textContent=t;
              document.getElementById('engagement').textContent='engagement '+m.engagement_uid+' (engagement_id '+m.engagement_id+')';
              if(typeof m.template_html==='string'){document.getElementById('template').innerHTML=m.template_html;}
              document.getElementById('ok').focus();
              bridgeSend({bcid:6,cid:103,engagement_uid:m.engagement_uid,activityType:m.activityType});
              bridgeSend({bcid:5});});
            bridgeSend({bcid:1});
            """, style: "html,body{background:transparent;margin:0;height:100%}"
                + "#backdrop{position:fixed;inset:0;background:rgba(20,24,40,.72);display:flex;align-items:center;justify-content:center}"
                + "#card{background:#fff;border-radius:14px;padding:1.5em 2em;max-width:30em;box-shadow:0 8px 40px rgba(0,0,0,.5)}"
                + "#card h1{margin:.2em 0 .4em;color:#6b2bd9}.who{color:#555;font-size:.9em}#template{margin:1em 0;max-height:40vh;overflow:auto}"
                + ".buttons{text-align:right}button{font-size:1.1em;padding:.4em 1.2em;margin-left:.5em;border-radius:8px;border:1px solid #6b2bd9}"
                + "#ok{background:#6b2bd9;color:#fff}")
    }

    /// A 96×96 SVG with the first characters of the avatar id.
    public static func avatarSVG(id: String) -> String {
        let hue = Int(UInt64(SimHash.md5Hex(id).prefix(4), radix: 16) ?? 0) % 360
        let label = escape(String(id.prefix(4)))
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" viewBox="0 0 96 96">\
            <rect width="96" height="96" rx="48" fill="hsl(\(hue),55%,55%)"/>\
            <text x="48" y="56" font-family="sans-serif" font-size="24" text-anchor="middle" fill="#fff">\(label)</text></svg>

            """
    }
}
