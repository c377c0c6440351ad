import ArgumentParser

struct Probe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "probe", abstract: "(not built yet)")

    func run() async throws {
        throw ValidationError("smartico-ws probe is not built yet")
    }
}
