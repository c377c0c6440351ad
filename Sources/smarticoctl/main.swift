import ArgumentParser

struct Main: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "smarticoctl")
    func run() throws { print("smarticoctl: not built yet") }
}
Main.main()
