// What smarticoctl shares with the daemon, in a module that links neither SQLite nor OpenSSL.

/// The daemon's version, sent as `tracker_version` when the configuration does not set one,
/// and printed by `smarticod --version` and `smarticoctl --version`.
public enum SmarticoVersion {
    public static let string = "0.1.0"
}

/// Defaults of the local socket API (socket-api.md).
public enum SocketAPIDefaults {
    /// `socket.path`'s default, and where smarticoctl connects without `--socket` or `SMARTICOD_SOCKET`.
    public static let socketPath = "/run/smarticod/smarticod.sock"
}
