import SmarticoProtocol
import SmarticoWrapperCore
import Testing

/// The daemon's URLs, as the simulator and Smartico hand them out.
let popupPage = "https://libs.smartico.ai/wrapper-popup.html?label_key=k&user_ext_id=alice"
let gfPage = "https://libs.smartico.ai/wrapper-gf.html?label_key=k&user_ext_id=alice"

func identifiedData(popup: String? = popupPage, gf: String? = gfPage, user: String = "alice") -> JSONValue {
    .object([
        "ext_user_id": .string(user),
        "gf_url": gf.map(JSONValue.string) ?? .null,
        "popup_url": popup.map(JSONValue.string) ?? .null,
        "props": .object(["native_app_gf_url": gf.map(JSONValue.string) ?? .null]),
    ])
}

/// An `engagement` event's data: `{"message":…,"popup_url":…[,"bridge":…]}`.
func engagementData(_ uid: String, popupURL: String? = nil, activityType: Int64? = 30, bridge: JSONObject? = nil) -> JSONValue {
    var message = JSONObject()
    message.append(key: "cid", value: .number(50))
    if !uid.isEmpty { message.append(key: "engagement_uid", value: .string(uid)) }
    if let activityType { message.append(key: "activityType", value: .number(activityType)) }
    message.append(key: "body", value: .string("<p>Hello \"\(uid)\"</p>"))
    var data = JSONObject()
    data.append(key: "message", value: .object(message))
    data.append(key: "popup_url", value: popupURL.map(JSONValue.string) ?? .null)
    if let bridge { data.append(key: "bridge", value: .object(bridge)) }
    return .object(data)
}

func minigameData(template: Int64?, inMessage: Bool = false, pending: JSONValue? = .number(9_000_001), url: String? = nil) -> JSONValue {
    var message = JSONObject()
    message.append(key: "cid", value: .number(707))
    if inMessage, let template { message.append(key: "saw_template_id", value: .number(template)) }
    if let pending { message.append(key: "pending_message_id", value: pending) }
    return .object([
        "message": .object(message),
        "saw_template_id": inMessage ? .null : template.map { JSONValue.number($0) } ?? .null,
        "url": url.map(JSONValue.string) ?? .null,
        "problem": .null,
    ])
}

func deepLinkData(_ dp: String, url: String? = nil) -> JSONValue {
    .object([
        "source": "server", "engagement_uid": .null, "dp": .string(dp),
        "kind": .string(DeepLink(dp).kind.rawValue), "url": url.map(JSONValue.string) ?? .null, "client_action": .null,
    ])
}

/// The bridge object a popup's SHOW_ENGAGEMENT script hands the page.
func injectedBridge(_ commands: [WrapperCommand]) throws -> JSONObject {
    let script = try #require(commands.popup.compactMap { if case .inject(let s) = $0 { s } else { nil } }.first,
                              "no inject in \(commands)")
    let lit = String(script.dropFirst(BridgeScriptTests.prefix.count).dropLast(BridgeScriptTests.suffix.count))
    return try #require(try JSONValue(parsing: try JSStringLiteral.decode(lit)).objectValue)
}

/// A model and a clock.
struct Harness {
    var model: WrapperModel
    var now: Int64 = 1_000

    init(_ configure: (inout WrapperConfig) -> Void = { _ in }) {
        var config = WrapperConfig()
        configure(&config)
        model = WrapperModel(config: config)
    }

    mutating func event(_ name: String, seq: Int64?, _ data: JSONValue) -> [WrapperCommand] {
        model.receive(event: name, seq: seq, data: data, now: now)
    }

    @discardableResult
    mutating func identify(popup: String? = popupPage, gf: String? = gfPage) -> [WrapperCommand] {
        event("identified", seq: nil, identifiedData(popup: popup, gf: gf))
    }

    /// A message from the popup page's top frame, by default at the URL it was loaded from.
    mutating func page(_ text: String, frame: String? = nil) -> [WrapperCommand] {
        model.popupMessage(text, frameURL: frame ?? model.popup?.request.url, now: now)
    }

    mutating func widgetPage(_ text: String, frame: String? = nil) -> [WrapperCommand] {
        model.widgetMessage(text, frameURL: frame ?? model.widget.url)
    }

    /// The popup on screen goes through 1, 5, 2.
    mutating func showAndClose() -> [WrapperCommand] {
        page(#"{"bcid":1}"#) + page(#"{"bcid":5}"#) + page(#"{"bcid":2}"#)
    }
}

@Suite("WrapperModel: popups, one at a time, acknowledged when handled")
struct WrapperModelPopupTests {
    @Test("50 engagements load one after the other, in journal order, each acked as it finishes")
    func oneAtATime() throws {
        var h = Harness()
        h.identify(popup: nil)  // no fresher popup URL: each event's own is used, so the loads tell them apart
        for seq in Int64(1)...50 {
            let out = h.event("engagement", seq: seq, engagementData("e-\(seq)", popupURL: popupPage + "&n=\(seq)"))
            #expect(out.acks == [], "seq \(seq) is not handled yet, nor is any before it")
            #expect(out.popupLoads == (seq == 1 ? [popupPage + "&n=1&force_mobile=true"] : []))
            #expect(h.model.popupsHeld == Int(seq))
        }
        #expect(h.model.queue.count == 49)
        #expect(h.model.isBusy)
        for seq in Int64(1)...50 {
            let current = try #require(h.model.popup)
            #expect(current.request.seq == seq)
            #expect(current.request.engagementUID == "e-\(seq)")
            #expect(current.request.url == popupPage + "&n=\(seq)&force_mobile=true")
            let out = h.showAndClose()
            #expect(out.popup.filter { $0 == .show }.count == 1)
            #expect(out.acks == [seq])
            #expect(out.requests("report") == [], "the page reports its own impression")
            let closeAt = try #require(out.firstIndex(of: .popup(.close)))
            if seq < 50 {
                #expect(out.popupLoads == [popupPage + "&n=\(seq + 1)&force_mobile=true"])
                let loadAt = try #require(out.firstIndex(of: .popup(.load(url: popupPage + "&n=\(seq + 1)&force_mobile=true"))))
                #expect(closeAt < loadAt, "the old popup is closed before the next one loads")
            } else {
                #expect(out.popupLoads == [])
            }
            #expect(h.model.popupsHeld == Int(50 - seq))
        }
        #expect(h.model.popup == nil)
        #expect(!h.model.isBusy)
        #expect(h.model.lastAckSent == 50)
        #expect(h.model.deadline == nil)
    }

    @Test("the conversation through the model: load, inject, show, relay, close")
    func conversation() throws {
        var h = Harness()
        h.identify()
        let start = h.event("engagement", seq: 1, engagementData("e-1", popupURL: popupPage))
        #expect(start.popupLoads == [popupPage + "&force_mobile=true"])
        #expect(h.model.deadline == h.now + 60_000, "60 s to start loading")
        h.model.popupCommitted(now: h.now + 500)
        #expect(h.model.deadline == h.now + 500 + 15_000, "then 15 s from the first byte")

        let ready = h.page(#"{"bcid":1}"#)
        #expect(ready.requests("bridge") == [["message": ["bcid": 1]]])
        let bridge = try injectedBridge(ready)
        #expect(bridge["bcid"] == 3)
        #expect(bridge["engagement_uid"] == "e-1")
        #expect(bridge["activityType"] == 30)
        #expect(bridge["body"] == "<p>Hello \"e-1\"</p>")
        #expect(bridge.keys.first == "bcid")

        #expect(h.page(#"{"bcid":5}"#).popup == [.show])
        #expect(h.model.deadline == nil)
        let six = h.page(#""{\"bcid\":6,\"message\":{\"cid\":103,\"engagement_uid\":\"e-1\"}}""#)
        #expect(six.requests("bridge") == [["message": ["bcid": 6, "message": ["cid": 103, "engagement_uid": "e-1"]]]])
        #expect(six.popup == [])
        let three = h.page(#"{"bcid":3}"#)
        #expect(three.actions == [])
        let close = h.page(#"{"bcid":2}"#)
        #expect(close.popup == [.close])
        #expect(close.acks == [1])
        #expect(h.model.popup == nil)
        // A message after the popup is gone: nothing.
        #expect(h.page(#"{"bcid":5}"#, frame: popupPage).actions == [])
    }

    @Test("a bridge object the daemon sends is handed over as it is")
    func daemonBridge() throws {
        var h = Harness()
        h.identify()
        let given = try object(#"{"bcid":3,"engagement_uid":"e-9","activityType":30,"extra":{"from":"daemon"}}"#)
        _ = h.event("engagement", seq: 1, engagementData("e-9", bridge: given))
        #expect(try injectedBridge(h.page(#"{"bcid":1}"#)) == given)

        // One without bcid 3 is not a bridge object: rebuilt from the message.
        var k = Harness()
        k.identify()
        _ = k.event("engagement", seq: 1, engagementData("e-8", bridge: try object(#"{"bcid":4,"x":1}"#)))
        let rebuilt = try injectedBridge(k.page(#"{"bcid":1}"#))
        #expect(rebuilt["bcid"] == 3)
        #expect(rebuilt["engagement_uid"] == "e-8")
        #expect(rebuilt["x"] == nil)
    }

    @Test("cumulative acks: never past the oldest unhandled popup")
    func cumulativeAcks() throws {
        var h = Harness()
        h.identify()
        #expect(h.event("engagement", seq: 5, engagementData("e-5")).acks == [4], "below the popup on screen")
        #expect(h.event("minigame", seq: 6, minigameData(template: 3)).acks == [], "behind the unfinished popup")
        #expect(h.model.widget.isOpen, "the widget opens at once, beside the popup")
        #expect(h.event("deeplink", seq: 7, deepLinkData("dp:ok")).acks == [])
        #expect(h.event("message", seq: 8, .object(["message": ["cid": 999]])).acks == [])
        #expect(h.event("engagement", seq: 9, engagementData("e-9")).acks == [])
        #expect(h.event("deeplink", seq: 10, deepLinkData("dp:ok")).acks == [])
        #expect(h.model.lastAckSent == 4)

        let first = h.showAndClose()
        #expect(first.acks == [8], "5 to 8 handled; 9 is on screen now")
        #expect(first.popupLoads.count == 1)
        let second = h.showAndClose()
        #expect(second.acks == [10])
        #expect(h.model.lastAckSent == 10)
        #expect(h.event("deeplink", seq: 11, deepLinkData("dp:ok")).acks == [11])
    }

    @Test("events that need no popup are acked as they come")
    func immediateAcks() {
        var h = Harness()
        h.identify()
        #expect(h.event("deeplink", seq: 1, deepLinkData("dp:ok")).acks == [1])
        #expect(h.event("message", seq: 2, .object([:])).acks == [2])
        #expect(h.event("minigame", seq: 3, minigameData(template: 1)).acks == [3])
        #expect(h.event("engagement", seq: 4, engagementData("e-4")).acks == [], "3 is acked already")
        #expect(h.showAndClose().acks == [4])
    }

    @Test("replayed seqs (at or below the last taken) are ignored")
    func replays() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 3, engagementData("e-3"))
        _ = h.event("engagement", seq: 4, engagementData("e-4"))
        #expect(h.model.popupsHeld == 2)
        for seq in [Int64(4), 3, 1, 0, -1] {
            #expect(h.event("engagement", seq: seq, engagementData("again")) == [])
            #expect(h.event("deeplink", seq: seq, deepLinkData("dp:cashier")) == [])
        }
        #expect(h.model.popupsHeld == 2)
        #expect(h.model.lastAccepted == 4)
        #expect(h.model.queue.map(\.engagementUID) == ["e-4"])
    }

    @Test("a journaled event without a seq is logged and ignored")
    func noSeq() {
        var h = Harness()
        h.identify()
        let out = h.event("engagement", seq: nil, engagementData("e-1"))
        #expect(out.actions == [])
        #expect(out.logs(.warning).count == 1)
        #expect(h.model.popupsHeld == 0)
        #expect(h.model.lastAccepted == nil)
    }

    @Test("linkConnected sends the ack point again")
    func linkConnected() {
        var h = Harness()
        #expect(h.model.linkConnected() == [], "nothing taken yet")
        h.identify()
        _ = h.event("deeplink", seq: 3, deepLinkData("dp:ok"))
        #expect(h.model.linkConnected().acks == [3])
        #expect(h.model.linkConnected().acks == [3], "every time the link comes back")
        _ = h.event("engagement", seq: 4, engagementData("e-4"))
        _ = h.event("deeplink", seq: 5, deepLinkData("dp:ok"))
        #expect(h.model.linkConnected().acks == [3], "still below the popup on screen")
        _ = h.showAndClose()
        #expect(h.model.linkConnected().acks == [5])
    }

    @Test("the first event unhandled at seq 1: no ack of 0")
    func noAckZero() {
        var h = Harness()
        h.identify()
        #expect(h.event("engagement", seq: 1, engagementData("e-1")).acks == [])
        #expect(h.model.linkConnected().acks == [])
        #expect(h.showAndClose().acks == [1])
    }

    @Test("no popup URL known: reported failed and acked")
    func noPopupURL() throws {
        var h = Harness()
        let out = h.event("engagement", seq: 1, engagementData("e-1", activityType: 31))
        #expect(out.requests.count == 1)
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 31]])
        #expect(out.acks == [1])
        #expect(out.popup == [])
        #expect(out.logs(.error).count == 1)
        #expect(h.model.popupsHeld == 0)
    }

    @Test("activity_type defaults to 30 in a failure report")
    func defaultActivityType() {
        var h = Harness()
        let out = h.event("engagement", seq: 1, engagementData("e-1", activityType: nil))
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 30]])
    }

    @Test("no engagement_uid: nothing to report against; logged and acked")
    func noUID() {
        var h = Harness()
        h.identify()
        let out = h.event("engagement", seq: 1, engagementData(""))
        #expect(out.requests.isEmpty)
        #expect(out.requests("report") == [])
        #expect(out.acks == [1])
        #expect(out.popup == [])
        #expect(out.logs(.error).count == 1)
    }

    @Test("a popup URL of another scheme is refused and reported failed", arguments: [
        "javascript:alert(1)", "file:///home/alice/x.html", "data:text/html,<b>x</b>", "blob:https://libs.smartico.ai/u",
        "/wrapper-popup.html", "http:/libs.smartico.ai/x",
    ])
    func refusedScheme(_ url: String) {
        var h = Harness()
        h.identify(popup: url)
        #expect(h.model.popupURL == nil, "not learned from identified either")
        let out = h.event("engagement", seq: 1, engagementData("e-1", popupURL: url))
        #expect(out.popup == [])
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 30]])
        #expect(out.acks == [1])
        #expect(out.logs(.error).count == 1)
        #expect(!h.model.allowsNavigation(to: url))
    }

    @Test("a refused identified URL does not hide a good one in the event")
    func refusedIdentifiedGoodEvent() {
        var h = Harness()
        h.identify(popup: "javascript:alert(1)")
        let out = h.event("engagement", seq: 1, engagementData("e-1", popupURL: popupPage))
        #expect(out.popupLoads == [popupPage + "&force_mobile=true"])
    }

    @Test("the identified event's popup_url is preferred to the one stored with the event")
    func freshPopupURL() {
        var h = Harness()
        let fresh = "https://libs.smartico.ai/wrapper-popup.html?label_key=k&user_ext_id=alice&hash=fresh"
        h.identify(popup: fresh)
        let out = h.event("engagement", seq: 1, engagementData("e-1", popupURL: popupPage + "&hash=stale"))
        #expect(out.popupLoads == [fresh + "&force_mobile=true"])
        #expect(h.model.popupURL == fresh)
    }

    @Test("a popup URL with force_mobile keeps it")
    func keepsForceMobile() {
        var h = Harness()
        h.identify(popup: popupPage + "&force_mobile=false")
        #expect(h.event("engagement", seq: 1, engagementData("e-1")).popupLoads == [popupPage + "&force_mobile=false"])
    }

    @Test("messages from a frame that is not of an allowed origin are ignored")
    func foreignFrame() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        for frame in ["https://evil.example/", "https://libs.smartico.ai@evil.example/", "http://libs.smartico.ai/",
                      "https://libs.smartico.ai:444/", "about:blank", "data:text/html,x"] {
            let out = h.page(#"{"bcid":5}"#, frame: frame)
            #expect(out.actions == [], "from \(frame)")
            #expect(out.logs(.warning).count == 1)
            #expect(h.page(#"{"bcid":2}"#, frame: frame).actions == [])
        }
        let unknown = h.model.popupMessage(#"{"bcid":5}"#, frameURL: nil, now: h.now)
        #expect(unknown.actions == [])
        #expect(h.model.popup?.phase != .shown)
        // Another page of the same origin is the same origin.
        #expect(h.page(#"{"bcid":5}"#, frame: "https://libs.smartico.ai/other.html").popup == [.show])
    }

    @Test("a message that is not a bridge message is logged, nothing else")
    func badMessage() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        for text in ["not json", "[1]", #"{"x":1}"#, String(repeating: " ", count: PageMessage.maxBytes + 1)] {
            let out = h.page(text)
            #expect(out.actions == [])
            #expect(out.logs(.warning).count == 1)
        }
        #expect(h.model.popup != nil)
    }

    @Test("a bridge message with no popup open is ignored")
    func noPopup() {
        var h = Harness()
        h.identify()
        let out = h.model.popupMessage(#"{"bcid":5}"#, frameURL: popupPage, now: h.now)
        #expect(out.actions == [])
        #expect(out.logs(.debug).count == 1)
        #expect(h.model.popupLoadFailed("x", now: h.now) == [])
        #expect(h.model.popupDismissed("x", now: h.now) == [])
        #expect(h.model.tick(now: 1_000_000) == [])
    }

    @Test("the ready deadline: failed, reported, acked, and the next one loads")
    func deadline() {
        var h = Harness { $0.readyTimeoutSeconds = 5 }
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        _ = h.event("engagement", seq: 2, engagementData("e-2", activityType: 40))
        h.model.popupCommitted(now: 1_000)
        #expect(h.model.deadline == 6_000)
        #expect(h.model.tick(now: 5_999) == [])
        _ = h.page(#"{"bcid":1}"#)
        let out = h.model.tick(now: 6_000)
        #expect(out.popup.first == .close)
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 30]])
        #expect(out.acks == [1])
        #expect(out.popupLoads == [popupPage + "&force_mobile=true"])
        #expect(h.model.popup?.request.engagementUID == "e-2")
        #expect(h.model.deadline == 66_000, "the next popup's time starts when it loads")
        h.model.popupCommitted(now: 6_000)
        #expect(h.model.deadline == 11_000)
        // The second one is shown in time: no deadline any more.
        _ = h.model.popupMessage(#"{"bcid":5}"#, frameURL: popupPage, now: 7_000)
        #expect(h.model.tick(now: 20_000) == [])
        let close = h.model.popupMessage(#"{"bcid":2}"#, frameURL: popupPage, now: 21_000)
        #expect(close.acks == [2])
        #expect(close.requests("report") == [])
    }

    @Test("a load that never commits fails at load_timeout_s, however long the ready timeout")
    func loadTimeout() {
        var h = Harness { $0.loadTimeoutSeconds = 30; $0.readyTimeoutSeconds = 300 }
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        #expect(h.model.deadline == 31_000)
        #expect(h.model.tick(now: 30_999) == [])
        let out = h.model.tick(now: 31_000)
        #expect(out.popup.first == .close)
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 30]])
        #expect(out.acks == [1])
        #expect(out.logs(.warning).contains { $0.contains("did not start loading within 30 s") })
    }

    @Test("a load failure before the popup is shown: reported failed")
    func loadFailedBefore() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        let out = h.model.popupLoadFailed("HTTP 502", now: h.now)
        #expect(out.popup == [.close])
        #expect(out.requests("report") == [["kind": "failed", "engagement_uid": "e-1", "activity_type": 30]])
        #expect(out.acks == [1])
        #expect(h.model.popup == nil)
    }

    @Test("a load failure once shown: dismissed, not reported")
    func loadFailedAfter() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        _ = h.page(#"{"bcid":5}"#)
        let out = h.model.popupLoadFailed("the web process ended", now: h.now)
        #expect(out.popup == [.close])
        #expect(out.requests("report") == [])
        #expect(out.acks == [1])
        #expect(out.logs(.warning).count == 1)
    }

    @Test("dismissed by the window manager: failed before shown, dismissed after")
    func dismissed() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        _ = h.event("engagement", seq: 2, engagementData("e-2"))
        let before = h.model.popupDismissed("closed", now: h.now)
        #expect(before.requests("report").count == 1)
        #expect(before.acks == [1])
        _ = h.page(#"{"bcid":5}"#)
        let after = h.model.popupDismissed("closed", now: h.now)
        #expect(after.requests("report") == [])
        #expect(after.acks == [2])
    }

    @Test("a deep link from the popup closes it and is relayed (the daemon routes it back)")
    func popupDeepLink() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        _ = h.page(#"{"bcid":5}"#)
        let out = h.page(#"{"bcid":4,"dp":"dp:gf_missions"}"#)
        #expect(out.requests("bridge") == [["message": ["bcid": 4, "dp": "dp:gf_missions"]]])
        #expect(out.popup == [.close])
        #expect(out.widget == [], "the widget opens when the deeplink event comes back")
        #expect(out.acks == [1])
    }

    @Test("popupsHeld counts the popup on screen and the queue")
    func popupsHeld() {
        var h = Harness()
        h.identify()
        #expect(h.model.popupsHeld == 0)
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        #expect(h.model.popupsHeld == 1)
        _ = h.event("engagement", seq: 2, engagementData("e-2"))
        _ = h.event("engagement", seq: 3, engagementData("e-3"))
        #expect(h.model.popupsHeld == 3)
        _ = h.event("engagement", seq: 4, engagementData("e-4", popupURL: "javascript:x"))  // a fourth, with no popup URL…
        #expect(h.model.popupsHeld == 4, "…but identified's is used")
        _ = h.showAndClose()
        #expect(h.model.popupsHeld == 3)
        var k = Harness()
        _ = k.event("engagement", seq: 1, engagementData("e-1"))
        #expect(k.model.popupsHeld == 0, "a refused one is not held")
    }
}

@Suite("WrapperModel: mini-games, deep links and the widget")
struct WrapperModelWidgetTests {
    static let gfFresh = "https://libs.smartico.ai/wrapper-gf.html?label_key=k&user_ext_id=alice&hash=2"

    @Test("a mini-game opens the latest gf URL at dp:gf_saw&id=N&standalone=true, forced mobile, and is acknowledged")
    func minigame() throws {
        var h = Harness()
        h.identify()
        #expect(h.event("props", seq: nil, .object(["native_app_gf_url": .string(Self.gfFresh)])) == [])
        #expect(h.model.gamificationURL == Self.gfFresh)
        let out = h.event("minigame", seq: 1, minigameData(template: 5, url: gfPage + "&dp=stale"))
        let expected = WrapperPageURL.forcingMobile(WrapperURL.withDeepLink(Self.gfFresh, deepLink: "dp:gf_saw&id=5&standalone=true"))
        #expect(expected == Self.gfFresh + "&dp=dp%3Agf_saw%26id%3D5%26standalone%3Dtrue&force_mobile=true")
        #expect(out.widgetLoads == [expected])
        #expect(out.requests("minigame_ack") == [["saw_template_id": 5, "pending_message_id": 9_000_001]])
        #expect(out.acks == [1])
        #expect(h.model.widget.isOpen)
        #expect(h.model.widget.url == expected)
    }

    @Test("saw_template_id from the message when the event has none")
    func templateInMessage() {
        var h = Harness()
        h.identify()
        let out = h.event("minigame", seq: 1, minigameData(template: 12, inMessage: true))
        #expect(out.widgetLoads == [gfPage + "&dp=dp%3Agf_saw%26id%3D12%26standalone%3Dtrue&force_mobile=true"])
        #expect(out.requests("minigame_ack") == [["saw_template_id": 12, "pending_message_id": 9_000_001]])
    }

    @Test("a 707 without pending_message_id is still acknowledged, with saw_template_id only")
    func minigameNoPending() {
        var h = Harness()
        h.identify()
        let out = h.event("minigame", seq: 1, minigameData(template: 5, pending: nil))
        #expect(out.widgetLoads.count == 1)
        #expect(out.requests("minigame_ack") == [["saw_template_id": 5]])
        let odd = h.event("minigame", seq: 2, minigameData(template: 6, pending: "not a number"))
        #expect(odd.requests("minigame_ack") == [["saw_template_id": 6]])
    }

    @Test("no gf URL known: the event's url is opened")
    func minigameEventURL() {
        var h = Harness()
        let url = gfPage + "&dp=dp%3Agf_saw%26id%3D5%26standalone%3Dtrue"
        let out = h.event("minigame", seq: 1, minigameData(template: 5, url: url))
        #expect(out.widgetLoads == [url + "&force_mobile=true"])
        #expect(out.acks == [1])
    }

    @Test("nothing to open: logged, not acknowledged to the server, acked in the journal")
    func minigameNothing() {
        var h = Harness()
        h.identify()
        let noTemplate = h.event("minigame", seq: 1, minigameData(template: nil))
        #expect(noTemplate.widget == [])
        #expect(noTemplate.requests("minigame_ack") == [])
        #expect(noTemplate.logs(.error).count == 1)
        #expect(noTemplate.acks == [1])
        var k = Harness()
        let noURL = k.event("minigame", seq: 1, minigameData(template: 5))
        #expect(noURL.widget == [])
        #expect(noURL.logs(.error).first?.contains("native_app_gf_url") == true)
    }

    @Test("a gamification link opens the widget at that section")
    func gamificationLink() {
        var h = Harness()
        h.identify()
        let out = h.event("deeplink", seq: 1, deepLinkData(" dp:gf_missions "))
        #expect(out.widgetLoads == [gfPage + "&dp=dp%3Agf_missions&force_mobile=true"])
        #expect(out.acks == [1])
        // Another one reloads the same widget at the other section.
        let again = h.event("deeplink", seq: 2, deepLinkData("dp:gf_badges"))
        #expect(again.widgetLoads == [gfPage + "&dp=dp%3Agf_badges&force_mobile=true"])
        #expect(h.model.widget.url == gfPage + "&dp=dp%3Agf_badges&force_mobile=true")
    }

    @Test("a gamification link without a gf URL: the event's url, else an error")
    func gamificationNoURL() {
        var h = Harness()
        let url = gfPage + "&dp=dp%3Agf_store"
        #expect(h.event("deeplink", seq: 1, deepLinkData("dp:gf_store", url: url)).widgetLoads == [url + "&force_mobile=true"])
        var k = Harness()
        let out = k.event("deeplink", seq: 1, deepLinkData("dp:gf_store"))
        #expect(out.widget == [])
        #expect(out.logs(.error).count == 1)
        #expect(out.acks == [1])
    }

    @Test("dp:gf_close closes the widget; other no-op links do nothing")
    func dummyLinks() {
        var h = Harness()
        h.identify()
        #expect(h.event("deeplink", seq: 1, deepLinkData("dp:gf_close")).actions == [.daemon(op: "ack", arguments: ["seq": 1])],
                "nothing open: nothing to close")
        _ = h.event("deeplink", seq: 2, deepLinkData("dp:gf"))
        #expect(h.event("deeplink", seq: 3, deepLinkData("dp:ok")).widget == [])
        #expect(h.model.widget.isOpen)
        #expect(h.event("deeplink", seq: 4, deepLinkData("dp:gf_close")).widget == [.close])
        #expect(!h.model.widget.isOpen)
    }

    @Test("a custom link with a configured command runs its argv, {dp} replaced by the link")
    func customCommand() {
        var h = Harness { $0.deepLinkCommands = ["cashier": ["/usr/bin/my-cashier", "--link={dp}", "{dp}{dp}", "plain", "{DP}"]] }
        h.identify()
        let out = h.event("deeplink", seq: 1, deepLinkData("  DP:Cashier&amount=5 "))
        #expect(out.runs == [["/usr/bin/my-cashier", "--link=DP:Cashier&amount=5", "DP:Cashier&amount=5DP:Cashier&amount=5", "plain", "{DP}"]])
        #expect(out.acks == [1])
        #expect(out.widget == [])
        #expect(out.externals == [])
    }

    @Test("a custom link with no command: nothing but a log line")
    func customUnconfigured() {
        var h = Harness { $0.deepLinkCommands = ["cashier": ["/usr/bin/my-cashier"]] }
        h.identify()
        for (seq, dp) in [(Int64(1), "dp:deposit"), (2, "dp:inbox"), (3, "something else"), (4, "dp:cashierx")] {
            let out = h.event("deeplink", seq: seq, deepLinkData(dp))
            #expect(out.actions == [.daemon(op: "ack", arguments: ["seq": .number(seq)])], "\(dp)")
            #expect(out.logs(.debug).count == 1)
        }
    }

    @Test("web links open in the browser unless external links are off", arguments: [
        (false, nil as Bool?, true), (false, true, true), (false, false, false),
        (true, nil, false), (true, true, true), (true, false, false),
    ])
    func webLinks(_ kiosk: Bool, _ openExternal: Bool?, _ opened: Bool) {
        var h = Harness {
            $0.kiosk = kiosk
            $0.openExternalLinks = openExternal
        }
        h.identify()
        let out = h.event("deeplink", seq: 1, deepLinkData(" https://operator.example/promo?x=1 "))
        #expect(out.externals == (opened ? ["https://operator.example/promo?x=1"] : []))
        #expect(out.runs == [])
        #expect(out.widget == [])
        #expect(out.acks == [1])
        #expect(!h.model.allowsNavigation(to: "https://operator.example/promo"), "a web link is not loaded in a view")
    }

    @Test("a deeplink event without dp does nothing but the ack")
    func noDP() {
        var h = Harness()
        #expect(h.event("deeplink", seq: 1, .object(["dp": .null])).actions == [.daemon(op: "ack", arguments: ["seq": 1])])
    }

    @Test("--open before any gf URL: an error; after: the widget, at its home or at a section")
    func open() {
        var h = Harness()
        #expect(!h.model.canOpenWidget)
        let early = h.model.open(deepLink: "dp:gf_missions")
        #expect(early.widget == [])
        #expect(early.logs(.error).count == 1)
        #expect(!h.model.widget.isOpen)

        h.identify()
        #expect(h.model.canOpenWidget)
        #expect(h.model.open(deepLink: nil).widgetLoads == [gfPage + "&force_mobile=true"])
        #expect(h.model.open(deepLink: "").widgetLoads == [gfPage + "&force_mobile=true"])
        #expect(h.model.open(deepLink: "dp:gf_missions").widgetLoads == [gfPage + "&dp=dp%3Agf_missions&force_mobile=true"])
        let wrong = h.model.open(deepLink: "dp:cashier")
        #expect(wrong.widget == [])
        #expect(wrong.logs(.error).count == 1)
        #expect(h.model.open(deepLink: "https://evil.example/").widget == [])
        #expect(h.model.widget.url == gfPage + "&dp=dp%3Agf_missions&force_mobile=true")
    }

    @Test("the widget's messages: shown, relayed, closed; a foreign frame is ignored")
    func widgetMessages() {
        var h = Harness()
        h.identify()
        #expect(h.model.widgetMessage(#"{"bcid":5}"#, frameURL: gfPage) == [], "no widget open")
        _ = h.model.open(deepLink: nil)
        #expect(h.model.widgetLoaded() == [.widget(.show)])
        #expect(h.model.widgetLoaded() == [])
        let six = h.widgetPage(#"{"bcid":6,"message":{"cid":9}}"#)
        #expect(six == [.daemon(op: "bridge", arguments: ["message": ["bcid": 6, "message": ["cid": 9]]])])
        let foreign = h.widgetPage(#"{"bcid":2}"#, frame: "https://evil.example/")
        #expect(foreign.actions == [])
        #expect(h.model.widget.isOpen)
        #expect(h.model.widgetMessage(#"{"bcid":2}"#, frameURL: nil).actions == [])
        let bad = h.widgetPage("nope")
        #expect(bad.actions == [])
        #expect(bad.logs(.warning).count == 1)
        let four = h.widgetPage(#"{"bcid":4,"dp":"dp:gf_missions"}"#)
        #expect(four.widget == [])
        #expect(four.requests("bridge").count == 1)
        let close = h.widgetPage(#"{"bcid":4,"dp":"dp:gf_close"}"#)
        #expect(close.widget == [.close])
        #expect(!h.model.widget.isOpen)
    }

    @Test("the widget closed from outside")
    func widgetClosed() {
        var h = Harness()
        h.identify()
        _ = h.model.open(deepLink: nil)
        let out = h.model.widgetClosed("HTTP 404")
        #expect(out.widget == [.close])
        #expect(out.logs(.warning).count == 1)
        #expect(h.model.widgetClosed(nil) == [])
        _ = h.model.open(deepLink: nil)
        #expect(h.model.widgetClosed(nil) == [.widget(.close)])
    }

    @Test("the widget and a popup are independent")
    func independent() {
        var h = Harness()
        h.identify()
        _ = h.event("engagement", seq: 1, engagementData("e-1"))
        _ = h.model.open(deepLink: nil)
        #expect(h.model.popup != nil)
        #expect(h.model.widget.isOpen)
        #expect(h.showAndClose().widget == [])
        #expect(h.model.widget.isOpen)
        #expect(h.model.isBusy)
        _ = h.model.widgetClosed(nil)
        #expect(!h.model.isBusy)
    }
}

@Suite("WrapperModel: what the daemon says of the user")
struct WrapperModelIdentityTests {
    @Test("identified learns the popup and widget URLs, http(s) only")
    func identified() {
        var h = Harness()
        let out = h.identify()
        #expect(out.actions == [])
        #expect(out.logs(.info).count == 1)
        #expect(h.model.popupURL == popupPage)
        #expect(h.model.gamificationURL == gfPage)
        #expect(h.model.allowsNavigation(to: "https://libs.smartico.ai/anything"))
        #expect(!h.model.allowsNavigation(to: "https://evil.example/"))

        var k = Harness()
        k.identify(popup: "file:///tmp/p.html", gf: "javascript:alert(1)")
        #expect(k.model.popupURL == nil)
        #expect(k.model.gamificationURL == nil)
        #expect(!k.model.canOpenWidget)
    }

    @Test("props: native_app_gf_url replaces the gf URL, unless it is not http(s)")
    func props() {
        var h = Harness()
        h.identify()
        _ = h.event("props", seq: nil, .object(["native_app_gf_url": "javascript:alert(1)"]))
        #expect(h.model.gamificationURL == gfPage)
        _ = h.event("props", seq: nil, .object(["other": 1]))
        #expect(h.model.gamificationURL == gfPage)
        let other = "https://cdn.smartico.example/wrapper-gf.html?k=2"
        _ = h.event("props", seq: nil, .object(["native_app_gf_url": .string(other)]))
        #expect(h.model.gamificationURL == other)
        #expect(h.model.allowsNavigation(to: other))
    }

    @Test("status: the gf URL is learned only for an identified user")
    func status() throws {
        var h = Harness()
        let url = "https://libs.smartico.ai/wrapper-gf.html?from=status"
        #expect(h.model.statusReceived(try json(#"{"user":{"identified":false,"props":{"native_app_gf_url":"\#(url)"}}}"#)) == [])
        #expect(!h.model.canOpenWidget)
        #expect(!h.model.allowsNavigation(to: url))
        _ = h.model.statusReceived(try json(#"{"user":null}"#))
        _ = h.model.statusReceived(try json(#"{}"#))
        _ = h.model.statusReceived(try json(#"{"user":{"identified":"true","props":{"native_app_gf_url":"\#(url)"}}}"#))
        #expect(!h.model.canOpenWidget)
        _ = h.model.statusReceived(try json(#"{"user":{"identified":true,"props":{"native_app_gf_url":"javascript:x"}}}"#))
        #expect(!h.model.canOpenWidget)
        _ = h.model.statusReceived(try json(#"{"user":{"identified":true,"props":{"native_app_gf_url":"\#(url)"}}}"#))
        #expect(h.model.canOpenWidget)
        #expect(h.model.gamificationURL == url)
        #expect(h.model.open(deepLink: nil).widgetLoads == [url + "&force_mobile=true"])
    }

    @Test("gap: a warning naming how many were missed; other live events: nothing")
    func gap() {
        var h = Harness()
        let out = h.event("gap", seq: nil, .object(["missed": 12]))
        #expect(out.actions == [])
        #expect(out.logs(.warning).first?.contains("12") == true)
        #expect(h.event("bridge", seq: nil, .object(["bcid": 6])) == [])
        #expect(h.event("client_action", seq: 3, .object([:])) == [], "not journaled: its seq is not taken")
        #expect(h.model.lastAccepted == nil)
    }

    @Test("configured origins are allowed from the start")
    func configuredOrigins() throws {
        let h = Harness { $0.allowedOrigins = [try! WebOrigin(url: "https://static.operator.example")] }
        #expect(h.model.allowsNavigation(to: "https://static.operator.example/a"))
        #expect(!h.model.allowsNavigation(to: "https://libs.smartico.ai/"))
    }
}

@Suite("Text.quoted: log lines no page can forge")
struct TextQuotedTests {
    @Test("quotes, backslashes, newlines and control characters are escaped; long text is cut")
    func quoted() {
        #expect(Text.quoted("a\"b\\c\nd\u{1}e\u{7F}") == #""a\"b\\c\nd\u{1}e\u{7f}""#)
        #expect(Text.quoted(String(repeating: "x", count: 10), limit: 4) == "\"xxxx…\"")
        #expect(!Text.quoted("line\nforged: error").contains("\n"))
    }
}
