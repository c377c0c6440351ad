// swift-tools-version:6.0
// Benchmarks for smarticod, in their own package so that nothing they need reaches the
// product's users. They measure what users feel (idle wake-ups and memory, memory under a burst
// and a replay, end-to-end latency, CPU per event, start to ready), each row with its goal.
//
//     swift build -c release && cd Benchmarks && swift build -c release && .build/release/smartico-bench [--quick] [--filter NAME]
import PackageDescription

let package = Package(
    name: "smarticod-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "smarticod", path: ".."),
    ],
    targets: [
        // Plain C references and helpers: the C relay, the CPU floor (zlib called directly),
        // per-subscriber reader threads, an RSS sampler, process helpers.
        .target(name: "CBench", linkerSettings: [.linkedLibrary("z")]),
        .executableTarget(
            name: "smartico-bench",
            dependencies: [
                "CBench",
                .product(name: "Transport", package: "smarticod"),
                .product(name: "SmarticoProtocol", package: "smarticod"),
                .product(name: "SmarticoSim", package: "smarticod"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
