import SmarticoSocketAPI

extension SmarticoClient {
    /// The version of smarticod this library was built with (also smartico-wrapper's).
    public static let version = SmarticoVersion.string
}
