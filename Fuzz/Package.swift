// swift-tools-version:6.0
// libFuzzer targets for smarticod's parsers, in their own package so that nothing they need reaches
// the product's users (docs/reliability.md, "Fuzzing"). Each executable is one target: it defines
// LLVMFuzzerTestOneInput, and its main.swift hands it to libFuzzer's driver (LLVMFuzzerRunDriver:
// SwiftPM renames an executable's entry point, so libFuzzer's own main is not used). Every module
// is instrumented with -sanitize=fuzzer,address. scripts/fuzz.sh builds and runs them:
//
//     swift build -c release --scratch-path .build -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
//
// (-enable-testing: fuzz-http-response drives the HTTP client's internal ResponseExchange with
// @testable import, the code the daemon's HTTP client runs; fuzz-frames and fuzz-handshake build
// their settings with internal memberwise initializers.)
import PackageDescription

let package = Package(
    name: "smarticod-fuzz",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "smarticod", path: ".."),
        .package(name: "smartico-wrapper", path: "../Wrapper"),
    ],
    targets: [
        // libFuzzer's driver, declared for Swift.
        .target(name: "CFuzzDriver"),
        // Input splitting, a seeded generator, invariant checks, the main that starts libFuzzer.
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"]),
        // WebSocketProtocol (frame parser, reassembly, UTF-8, close handshake, permessage-deflate).
        .executableTarget(name: "fuzz-frames", dependencies: ["FuzzSupport", .product(name: "Transport", package: "smarticod")]),
        // WebSocketClientHandshake (the 101 response) and the protocol on its remainder.
        .executableTarget(name: "fuzz-handshake", dependencies: ["FuzzSupport", .product(name: "Transport", package: "smarticod")]),
        // The HTTP client's response exchange and the proxy's CONNECT response.
        .executableTarget(name: "fuzz-http-response", dependencies: ["FuzzSupport", .product(name: "Transport", package: "smarticod")]),
        // JSONValue, RawJSONObject, the serializer, ServerMessage.decode.
        .executableTarget(name: "fuzz-json-protocol", dependencies: ["FuzzSupport", .product(name: "SmarticoProtocol", package: "smarticod")]),
        // LineFramer + SocketRequestParser, as the socket server runs them.
        .executableTarget(name: "fuzz-socket-request", dependencies: [
            "FuzzSupport", .product(name: "SmarticoDaemon", package: "smarticod"),
            .product(name: "SmarticoProtocol", package: "smarticod"),
        ]),
        // smartico-wrapper's logic: daemon events, bridge messages, origins, its configuration.
        .executableTarget(name: "fuzz-wrapper", dependencies: [
            "FuzzSupport", .product(name: "SmarticoWrapperCore", package: "smartico-wrapper"),
            .product(name: "SmarticoProtocol", package: "smarticod"),
        ]),
        // ConfigLoader.decode/resolve: config.json's decoding and validation.
        .executableTarget(name: "fuzz-config", dependencies: [
            "FuzzSupport", .product(name: "SmarticoDaemon", package: "smarticod"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
