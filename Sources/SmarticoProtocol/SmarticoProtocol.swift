/// SmarticoProtocol: the cid-tagged messages of Smartico's client protocol.
public enum SmarticoProtocolInfo {
    public static let name = "SmarticoProtocol"
}
