import Foundation

let options = Options.parse(CommandLine.arguments)
let report = Report(options: options)
print("smartico-bench\(options.quick ? " --quick" : ""): each figure beside a reference measured in the same run")
protocolBenchmarks(report)
frameDecodeBenchmarks(report)
deflateBenchmarks(report)
await echoBenchmarks(report)
await simulatorBenchmarks(report)
await daemonBenchmarks(report)
report.printTable()
