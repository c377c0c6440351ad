import ArgumentParser

struct Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "echo", abstract: "(not built yet)")

    func run() async throws {
        throw ValidationError("smartico-ws echo is not built yet")
    }
}
