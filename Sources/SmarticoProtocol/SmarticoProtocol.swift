/// SmarticoProtocol: the cid-tagged messages of Smartico's client protocol, the Native Bridge,
/// deep links and the public HTTP API bodies. No I/O; see docs/protocol.md.
public enum SmarticoProtocolInfo {
    public static let name = "SmarticoProtocol"
}
