import ArgumentParser

struct Autobahn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "autobahn", abstract: "(not built yet)")

    func run() async throws {
        throw ValidationError("smartico-ws autobahn is not built yet")
    }
}
