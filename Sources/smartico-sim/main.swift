import ArgumentParser

struct Main: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "smartico-sim")
    func run() throws { print("smartico-sim: not built yet") }
}
Main.main()
