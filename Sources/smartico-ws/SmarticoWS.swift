import ArgumentParser
import SmarticoSocketAPI

/// `smartico-ws`: the diagnostic WebSocket client. The first thing a user runs
/// when the daemon cannot connect.
@main
struct SmarticoWS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smartico-ws",
        abstract: "Diagnose WebSocket connections: probe a server, echo messages, run a conformance suite.",
        version: SmarticoVersion.string,
        subcommands: [Probe.self, Echo.self, Autobahn.self]
    )
}
