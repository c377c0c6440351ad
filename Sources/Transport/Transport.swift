/// Transport: RFC 6455 WebSocket (with RFC 7692 permessage-deflate) over raw
/// sockets, TLS through OpenSSL. It knows nothing about Smartico.
public enum TransportInfo {
    public static let name = "Transport"
}
