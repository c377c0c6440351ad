/// The daemon's version, sent as `tracker_version` when the configuration does not set one.
public enum SmarticoVersion {
    public static let string = "0.1.0"
}
