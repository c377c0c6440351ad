import SmarticoProtocol
import Transport

/// The session driver as the data API calls see it: their session requests go through the driver's
/// FIFO like a peer's, answered through a reply of their own.
struct DriverDataAPIHost: DataAPIHost {
    let driver: SessionDriver
    let inbox: DriverInbox
    let loop: EventLoop
    let cache: DataAPICache
    /// The user the call was made for: every request of it is for them.
    let user: String?
    /// Who made the call: its requests count in that peer's share (RequestShares).
    let owner: RequestOwner

    func session(_ request: SessionRequest, peer: UInt64) async -> Result<JSONValue, SocketAPIError> {
        await withCheckedContinuation { continuation in
            let reply = SocketAPIReply { continuation.resume(returning: $0) }
            if !inbox.yield(.apiSession(request, user: user, reply, peer: peer, owner: owner)) {
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            }
        }
    }

    func labelSettings() async -> JSONObject? { await driver.labelSettings() }

    func publicProps() async -> JSONObject? { await driver.publicProps() }

    func httpGet(_ url: String) async throws(ConnectError) -> HTTPClientResponse {
        let options = await driver.dataAPIHTTPOptions()
        return try await HTTPClient.send(HTTPClientRequest(url: url), options: options, on: loop)
    }

    func httpPost(_ url: String, body: [UInt8], headers: HTTPHeaders) async throws(ConnectError) -> HTTPClientResponse {
        let options = await driver.dataAPIHTTPOptions()
        var headers = headers
        if headers["User-Agent"] == nil { headers.add(name: "User-Agent", value: "smarticod/\(SmarticoVersion.string)") }
        return try await HTTPClient.send(HTTPClientRequest(method: "POST", url: url, headers: headers, body: body), options: options, on: loop)
    }

    func labelKeys() async -> (key: String, brandKey: String?) { await driver.dataAPILabelKeys() }

    func labelImageDomain() async -> String { await driver.dataAPIImageDomain() }

    var userExtID: String? { user }

    func nowMs() -> Int64 { SessionDriver.wallClockMs() }
}
