import Foundation

let options = Options.parse(CommandLine.arguments)
let report = Report(options: options)
print("smartico-bench\(options.quick ? " --quick (a smoke run: shorter windows, fewer events)" : ""): what users feel, each row against its goal")
let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
print("daemon: \(smarticodBinaryPath()); load average at the start: \(load) (the machine is shared: compare figures of one run)")
await daemonBenchmarks(report)
report.printTable()
print(report.failures == 0 ? "\nevery goal met" : "\n\(report.failures) goal(s) missed")
exit(report.failures == 0 ? 0 : 1)
