import ArgumentParser

struct Main: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "smarticod")
    func run() throws { print("smarticod: not built yet") }
}
Main.main()
