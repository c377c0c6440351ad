/// Which WebSocket upgrade requests the simulator accepts: the path of Smartico's API URL
/// (`/websocket/services`), any query (the real server ignores `domain`; `master` and `version`
/// are not checked either). The glue answers anything else with 404 and the reason.
public enum SimUpgrade {
    public static let path = "/websocket/services"

    /// nil when `target` (the request target of the upgrade, e.g.
    /// `/websocket/services?master&domain=app&version=1.0.0`) is accepted, else why not.
    public static func refusal(target: String) -> String? {
        var p = Substring(target)
        if let q = p.firstIndex(where: { $0 == "?" || $0 == "#" }) { p = p[..<q] }
        if p == path || p == path + "/" { return nil }
        return "no WebSocket endpoint at \(String(p).truncatedUTF8(200)); Smartico's is \(path)?master&domain=<app>&version=<x.y.z>"
    }
}
