import Foundation
import Testing
@testable import SmarticoDaemon

/// The small replacements for Foundation in the daemon (URL parts, base64, blanks, %-decoding),
/// each compared with what Foundation does where the daemon used Foundation before.
@Suite("Config: URL, base64 and text helpers without Foundation")
struct ConfigTextTests {
    /// URLs Foundation's `URLComponents(string:)` and ``AbsoluteURL`` must read the same way
    /// (the parts the configuration checks use).
    static let sameAsFoundation = [
        "wss://api.smartico.ai/websocket/services?master&domain=&version=0.1.0",
        "ws://127.0.0.1:8080/websocket/services?master&domain=x&version=1.0.0",
        "WSS://API2.Smartico.AI:8443/ws", "ws://[::1]:80/p?q#", "ws://[::1]/", "ws://h/p?q#f",
        "ws://h?x", "ws://h#x?y", "ws://h/?a?b", "ws://h:/x", "ws://h:99999/x", "ws://h:0/", "ws://h:080/",
        "ws://@h/x", "ws://u@h/x", "wss://user:pw@example.com/", "ws:///x", "ws:/x", "ws:x",
        "ws://h/a b", "ws://h/%zz", "ws://h/%41", "ws://h/{x}", "ws://h/p\"", "https://h/|^`\\<\u{7f}\t[x]",
        "https://h/@:!$&'()*+,;=~-._", "https://[v1.x]/", "https://h/#a#b", "ws://H.Ex/", "ws://h%41/",
        "https://papi.smartico.ai/services/public", "http://127.0.0.1:8081/services/public",
        "https://papi.example.com/services/public?x=1", "ftp://papi.example.com/services/public",
        "https:", "https:/", "mailto:x", "x:", "a+b-c.d://h", "https://demo.example.com/",
        "https://h/ä?ü=1",
    ]

    /// Refused by both (nil from `URLComponents(string:)`, nil from ``AbsoluteURL/parse(_:)``).
    static let invalidForBoth = [
        "https://exa mple.com", "ws://h:abc/x", "1ws://h/", "ws://[::1/x", "ws://h]/x", "ws://h:+80/",
        "ws://a:b:c/", "https://[::1]x/", "https://h%zz/",
    ]

    @Test func absoluteURLReadsWhatURLComponentsReads() throws {
        for text in Self.sameAsFoundation {
            let c = try #require(URLComponents(string: text), "Foundation refuses \(text)")
            guard let scheme = c.scheme else {
                #expect(AbsoluteURL.parse(text) == nil, "\(text)")
                continue
            }
            let u = try #require(AbsoluteURL.parse(text), "\(text)")
            #expect(u.scheme == scheme.lowercased(), "\(text)")
            #expect(u.hasUserinfo == (c.user != nil || c.password != nil), "\(text)")
            #expect(u.host == c.host, "\(text)")
            #expect(u.port == c.port, "\(text)")
            #expect(u.percentEncodedPath == c.percentEncodedPath, "\(text)")
            #expect(u.percentEncodedQuery == c.percentEncodedQuery, "\(text)")
            #expect(u.hasFragment == (c.fragment != nil), "\(text)")
        }
        for text in Self.invalidForBoth {
            #expect(URLComponents(string: text) == nil, "Foundation accepts \(text)")
            #expect(AbsoluteURL.parse(text) == nil, "\(text)")
        }
        // Without a scheme: a relative reference, refused.
        #expect(AbsoluteURL.parse(":x") == nil)
        #expect(AbsoluteURL.parse("/path") == nil)
        #expect(AbsoluteURL.parse("") == nil)
        // Where it is stricter than Foundation: a port that overflows Int is invalid, not absent.
        #expect(AbsoluteURL.parse("ws://h:99999999999999999999/") == nil)
    }

    @Test func endpointsKeepTheirMessages() {
        guard case .success(let ws) = WebSocketEndpoint.parse("WSS://[2001:DB8::1]:8443/ws?a=1") else {
            Issue.record("IPv6 wss URL refused")
            return
        }
        #expect(ws.secure && ws.host == "2001:db8::1" && ws.port == 8443 && ws.requestTarget == "/ws?a=1")
        guard case .success(let bare) = WebSocketEndpoint.parse("ws://Example.COM") else {
            Issue.record("bare ws URL refused")
            return
        }
        #expect(bare.host == "example.com" && bare.port == 80 && bare.requestTarget == "/")
        func message(_ r: Result<WebSocketEndpoint, URLProblem>) -> String? {
            if case .failure(let p) = r { return p.message }
            return nil
        }
        #expect(message(WebSocketEndpoint.parse("not a url"))?.hasPrefix("must be a ws:// or wss:// URL") == true)
        #expect(message(WebSocketEndpoint.parse("https://h/"))?.hasSuffix("the scheme \"https\" is not ws or wss") == true)
        #expect(message(WebSocketEndpoint.parse("ws:///x"))?.hasSuffix("the URL has no host") == true)
        #expect(message(WebSocketEndpoint.parse("ws://h/#top")) == "must not have a #fragment")
        #expect(message(WebSocketEndpoint.parse("ws://h:70000/")) == "has an invalid port 70000")
        let credentials = message(WebSocketEndpoint.parse("wss://bob:s3cr3t@h/")) ?? ""
        #expect(credentials.hasPrefix("must not contain user:password@") && !credentials.contains("s3cr3t"))
        if case .failure(let p) = HTTPEndpoint.parse("https://h/x#f") {
            #expect(p.message == "must not have a query or fragment (the daemon adds the query)")
        } else {
            Issue.record("a fragment in http.public_url was accepted")
        }
    }

    @Test func blanksAndPercentDecodingMatchFoundation() {
        for text in ["  a b  ", "\t\u{a0}x\u{2003} \t", "", "   ", "x", "\nx\n", " \r\nx"] {
            #expect(text.trimmingBlanks() == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
        }
        for text in ["%41%C3%BC", "%zz", "%FF", "%4", "a+b", "", "100%", "%e2%82%ac", "p%40ss%3Aword"] {
            #expect(percentDecoded(text) == text.removingPercentEncoding, "\(text)")
        }
    }

    @Test func firstRangeOfBytesFindsTheFirstOccurrence() {
        let text = "http://user@h://x"
        let r = text.firstRange(ofBytes: "://")
        #expect(r.map { text[$0] } == "://")
        #expect(r.map { text[..<$0.lowerBound] } == "http")
        #expect(Substring("ab:/ab://").firstRange(ofBytes: "://").map { String("ab:/ab://"[..<$0.lowerBound]) } == "ab:/ab")
        #expect("äö://".firstRange(ofBytes: "://").map { "äö://"[$0.upperBound...] } == "")
        #expect("a:/b".firstRange(ofBytes: "://") == nil)
        #expect("".firstRange(ofBytes: "x") == nil)
        #expect("abc".contains(bytes: "bc") && !"abc".contains(bytes: "cb") && !"ab".contains(bytes: "abc"))
    }

    @Test func machineIDReadsTheFirstNonEmptyTrimmedLine() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let empty = dir.appendingPathComponent("empty").path
        let blank = dir.appendingPathComponent("blank").path
        let good = dir.appendingPathComponent("good").path
        let binary = dir.appendingPathComponent("binary").path
        try Data().write(to: URL(fileURLWithPath: empty))
        try Data("   \nlater\n".utf8).write(to: URL(fileURLWithPath: blank))
        try Data(" \t0123456789abcdef0123456789abcdef \n".utf8).write(to: URL(fileURLWithPath: good))
        try Data([0xFF, 0xFE, 0x0A]).write(to: URL(fileURLWithPath: binary))
        #expect(MachineID.read(paths: [dir.appendingPathComponent("absent").path, empty, binary, blank, good]) == "0123456789abcdef0123456789abcdef")
        #expect(MachineID.read(paths: [dir.path]) == nil)  // a directory cannot be read
        #expect(MachineID.read(paths: [empty]) == nil)
    }
}
