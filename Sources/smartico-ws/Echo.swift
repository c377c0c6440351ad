import ArgumentParser
import Transport

struct Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Connect and echo every text and binary message back unchanged until the server closes; print a summary.")

    @OptionGroup var client: ClientArguments

    func run() async throws {
        let loop = try EventLoop(name: "smartico-ws")
        let connection = try await connectPrinting(client, on: loop)
        var texts = 0, textBytes = 0, binaries = 0, binaryBytes = 0, pings = 0
        var info: WebSocketCloseInfo? = nil
        for await event in connection.events {
            switch event {
            case .text(let t):
                texts += 1
                textBytes += t.utf8.count
                try? await connection.sendAsync(text: t)
            case .binary(let b):
                binaries += 1
                binaryBytes += b.count
                try? await connection.sendAsync(binary: b)
            case .ping:
                pings += 1
            case .pong, .closing:
                break
            case .textBytes:
                break  // only with `textAsBytes`, which this connection does not set
            case .closed(let i):
                info = i
            }
        }
        await loop.shutdown()
        print("echoed \(texts) text messages (\(textBytes) bytes) and \(binaries) binary messages (\(binaryBytes) bytes); answered \(pings) pings")
        print(info?.description ?? "ended without a close event")
        if let info, info.error == nil, info.code == .normalClosure || info.code == .goingAway { return }
        throw ExitCode(1)
    }
}
