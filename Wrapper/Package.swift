// swift-tools-version:6.0
// smartico-wrapper: shows Smartico's popups, mini-games and gamification widget on a Linux screen
// (GTK 4, WebKitGTK 6.0), as a client of smarticod's local socket. Its own package, so the
// daemon's build, dependencies and tests never need GTK or WebKit.
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "smartico-wrapper",
    products: [
        .executable(name: "smartico-wrapper", targets: ["smartico-wrapper"]),
        // The logic without a display, for the Fuzz package's fuzz-wrapper target.
        .library(name: "SmarticoWrapperCore", targets: ["SmarticoWrapperCore"]),
    ],
    dependencies: [
        .package(name: "smarticod", path: ".."),
    ],
    targets: [
        // GTK 4's and WebKitGTK 6.0's C API, found with pkg-config.
        .systemLibrary(
            name: "CWebKitGTK",
            pkgConfig: "webkitgtk-6.0",
            providers: [.apt(["libwebkitgtk-6.0-dev", "libgtk-4-dev"])]
        ),
        // An Xlib I/O error handler, so that the loss of the X server gets a log line.
        .target(name: "CDisplayWatch", dependencies: ["CWebKitGTK"], linkerSettings: [.linkedLibrary("X11"), .linkedLibrary("wayland-client")]),
        // Unmapping the pages of the loaded libraries' code and constants, in the UI process and
        // (through the extension) in the web processes. Plain C: both link it.
        .target(name: "CWorkingSet"),
        // The web process extension (WebExtension/, C): libsmartico-wrapper-web-extension.so,
        // compiled with the toolchain's clang beside the wrapper's build (SwiftPM would link the
        // Swift runtime into a library of its own, and none may reach the web process).
        .plugin(name: "WebExtensionBuild", capability: .buildTool()),
        // The wrapper's logic without a display: the bridge conversations, the popup queue and its
        // acknowledgements, deep-link routing, the origin allow-list, the configuration.
        .target(
            name: "SmarticoWrapperCore",
            dependencies: [.product(name: "SmarticoProtocol", package: "smarticod")],
            swiftSettings: strict
        ),
        // The GObject glue (signals, callbacks, the main loop) and main().
        .executableTarget(
            name: "smartico-wrapper",
            dependencies: [
                "CWebKitGTK", "CDisplayWatch", "CWorkingSet", "SmarticoWrapperCore",
                .product(name: "SmarticoProtocol", package: "smarticod"),
                .product(name: "SmarticoClient", package: "smarticod"),
            ],
            swiftSettings: strict,
            plugins: ["WebExtensionBuild"]
        ),
        .testTarget(name: "SmarticoWrapperCoreTests", dependencies: ["SmarticoWrapperCore", "CWorkingSet"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
