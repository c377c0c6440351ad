/// Smartico hosts derived from a label key (notes: "Environment routing from the label key").
///
/// A 38-character key ends in `-<digit>`: the digit is the environment and INIT sends the
/// first 36 characters. Environments 1 and 2 (and keys without a suffix) use `api.smartico.ai`,
/// `papi.smartico.ai` and `img.smr.vc`; environment N otherwise uses `apiN.smartico.ai`,
/// `papiN.smartico.ai` and `imgN.smr.vc`.
public struct SmarticoEnvironment: Sendable, Equatable {
    /// The environment digit, or `nil` when the key has no `-<digit>` suffix.
    public let environment: Int?
    /// The label key as INIT_SESSION_REQUEST sends it (without the environment suffix).
    public let labelKeyForInit: String

    public init(labelKey: String) {
        let u = Array(labelKey.utf8)
        if u.count == 38, u[36] == UInt8(ascii: "-"), u[37] >= 0x30, u[37] <= 0x39 {
            environment = Int(u[37] - 0x30)
            labelKeyForInit = String(decoding: u[..<36], as: UTF8.self)
        } else {
            environment = nil
            labelKeyForInit = labelKey
        }
    }

    /// The hosts of `environment` (nil: a key without suffix), for a key split elsewhere (the
    /// daemon accepts suffixes up to `-999`); ``labelKeyForInit`` is then empty.
    public init(environment: Int?) {
        self.environment = environment
        labelKeyForInit = ""
    }

    private var suffix: String {
        guard let e = environment, e != 1, e != 2 else { return "" }
        return String(e)
    }

    /// `api[N].smartico.ai`
    public var apiHost: String { "api\(suffix).smartico.ai" }
    /// `papi[N].smartico.ai`
    public var publicAPIHost: String { "papi\(suffix).smartico.ai" }
    /// `img[N].smr.vc`
    public var imageHost: String { "img\(suffix).smr.vc" }

    /// `wss://api[N].smartico.ai/websocket/services?master&domain=<domain>&version=<version>`
    /// (the server ignores `domain`; both are percent-encoded).
    public func webSocketURL(domain: String, version: String) -> String {
        "wss://\(apiHost)/websocket/services?master&domain=\(WrapperURL.percentEncode(domain))&version=\(WrapperURL.percentEncode(version))"
    }

    /// `https://papi[N].smartico.ai/services/public`
    public var publicAPIEndpoint: String { "https://\(publicAPIHost)\(PublicAPI.path)" }

    /// `https://img[N].smr.vc/avatar/<id>`, the avatar URL of an IDENTIFY_USER_RESPONSE's
    /// `avatar_id` when INIT's `DYNAMIC_IMAGE_DOMAIN` is not known.
    public func avatarURL(avatarID: String) -> String? { WrapperURL.pathSegment(avatarID).map { "https://\(imageHost)/avatar/\($0)" } }
}
