// swift-tools-version:6.0
// Benchmarks for smarticod, in their own package so that their dependencies
// (SwiftNIO, as a reference implementation) never reach the product's users.
//
//     cd Benchmarks && swift run -c release smartico-bench [--quick] [--filter NAME]
import PackageDescription

let package = Package(
    name: "smarticod-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "smarticod", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
    ],
    targets: [
        // Plain C references (a TCP ping-pong over loopback).
        .target(name: "CBench"),
        .executableTarget(
            name: "smartico-bench",
            dependencies: [
                "CBench",
                .product(name: "Transport", package: "smarticod"),
                .product(name: "SmarticoProtocol", package: "smarticod"),
                .product(name: "SmarticoSim", package: "smarticod"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],

        ),
    ],
    swiftLanguageModes: [.v6]
)
