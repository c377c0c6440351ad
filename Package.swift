// swift-tools-version:6.0
// smarticod: a Linux daemon that keeps a device's session with Smartico's
// engagement platform alive and hands what arrives to local processes.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "smarticod",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "smarticod", targets: ["smarticod"]),
        .executable(name: "smarticoctl", targets: ["smarticoctl"]),
        .executable(name: "smartico-sim", targets: ["smartico-sim"]),
        .executable(name: "smartico-ws", targets: ["smartico-ws"]),
        .library(name: "Transport", targets: ["Transport"]),
        .library(name: "SmarticoProtocol", targets: ["SmarticoProtocol"]),
        // The Swift client of the local socket, for smarticoctl, smartico-wrapper and other apps.
        .library(name: "SmarticoClient", targets: ["SmarticoClient"]),
        // The simulator in-process, for the Benchmarks package (its push rate); users run the executable.
        .library(name: "SmarticoSim", targets: ["SmarticoSim"]),
        // The daemon's sans-I/O parts (socket request parser, configuration decoder) for the Fuzz
        // package's libFuzzer targets; users run the executable.
        .library(name: "SmarticoDaemon", targets: ["SmarticoDaemon"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // 1.16.2: `LogHandler.log(event:)` (DaemonLogHandler).
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // The few OpenSSL and zlib calls Swift needs; system libraries found with pkg-config.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev", "zlib1g-dev"])]
        ),
        // SQLite's C API for the daemon's durable store.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // RFC 6455 + RFC 7692 over raw sockets, TLS through COpenSSL. Knows nothing of Smartico.
        .target(name: "Transport", dependencies: ["COpenSSL"], swiftSettings: strict),
        // The cid-tagged messages, bridge messages, deep links, HTTP API bodies. Knows nothing of sockets.
        .target(name: "SmarticoProtocol", swiftSettings: strict),
        // What smarticoctl shares with the daemon (version, socket path): no SQLite, no OpenSSL.
        .target(name: "SmarticoSocketAPI", swiftSettings: strict),
        // The client of the local socket (blocking SmarticoClient, reconnecting DaemonLink): Glibc
        // only, no Foundation, no SQLite, no OpenSSL.
        .target(name: "SmarticoClient", dependencies: ["SmarticoProtocol", "SmarticoSocketAPI"], swiftSettings: strict),
        // Session engine, store, local socket server, configuration.
        .target(
            name: "SmarticoDaemon",
            dependencies: [
                "Transport", "SmarticoProtocol", "SmarticoSocketAPI", "CSQLite", "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // No ArgumentParser: it imports FoundationEssentials, and the daemon links no Foundation.
        .executableTarget(name: "smarticod", dependencies: ["SmarticoDaemon"], swiftSettings: strict),
        .executableTarget(
            name: "smarticoctl",
            dependencies: [
                "SmarticoClient", "SmarticoSocketAPI", "SmarticoProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // The simulator's logic (sans-I/O sessions, control protocol, HTTP pages) and its I/O wiring,
        // a library so it can be tested; the executable only calls it.
        .target(
            name: "SmarticoSim",
            dependencies: [
                "Transport", "SmarticoProtocol", "SmarticoSocketAPI", "COpenSSL",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "smartico-sim",
            dependencies: [
                "SmarticoSim", "Transport", "SmarticoProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "smartico-ws",
            dependencies: [
                "Transport", "SmarticoSocketAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // Helpers shared by the test targets (they all link into one test process).
        .target(
            name: "SmarticoTestSupport", dependencies: ["SmarticoProtocol"], path: "Tests/SmarticoTestSupport", swiftSettings: strict
        ),
        .testTarget(
            name: "TransportTests",
            // COpenSSL: the TCP option constants (netinet/tcp.h) the socket tests read back.
            dependencies: ["Transport", "SmarticoTestSupport", "COpenSSL"],
            exclude: ["peers"],  // Python test peers, run as subprocesses
            swiftSettings: strict
        ),
        .testTarget(
            name: "SmarticoProtocolTests",
            dependencies: ["SmarticoProtocol", "SmarticoTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: strict
        ),
        // The client library through the real daemon and simulator (run as subprocesses).
        .testTarget(
            name: "SmarticoClientTests",
            dependencies: ["SmarticoClient", "SmarticoProtocol", "SmarticoSocketAPI", "SmarticoTestSupport"],
            swiftSettings: strict
        ),
        // SmarticoSim: the engine tests that need no process boundary run the simulator in the test
        // process (InProcessEngine.swift), as they do the daemon.
        .testTarget(name: "SmarticoDaemonTests", dependencies: ["SmarticoDaemon", "SmarticoSim", "SmarticoTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "SmarticoSimTests",
            dependencies: ["SmarticoSim", "SmarticoProtocol", "Transport", "SmarticoTestSupport"],
            exclude: ["peers"],  // the independent Python client, run as a subprocess (found with #filePath)
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
