import ArgumentParser

struct Main: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "smartico-ws")
    func run() throws { print("smartico-ws: not built yet") }
}
Main.main()
