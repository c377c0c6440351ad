import Testing
@testable import Transport

/// The shape the WebSocket client and the daemon will use: an actor running on the loop owns its
/// connections, sets handlers from isolated code and handles events synchronously on the loop thread.
actor EchoClientActor {
    let loop: EventLoop
    private var connection: StreamConnection?
    private var received: [UInt8] = []
    private var keepalive: LoopTimer?
    private(set) var keepaliveFired = 0
    private(set) var closeReason: String?

    init(loop: EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func connect(port: Int) async throws {
        let connection = try await StreamConnection.connect(host: "127.0.0.1", port: port, on: loop)
        // Handlers run on the loop thread, which is this actor's executor.
        connection.onRead = { [weak self] bytes in
            guard let self else { return }
            let copy = Array(bytes)
            self.assumeIsolated { $0.didRead(copy) }
        }
        connection.onClose = { [weak self] reason in
            self?.assumeIsolated { $0.closeReason = "\(reason)" }
        }
        self.connection = connection
        keepalive = LoopTimer(loop: loop) { [weak self] in
            self?.assumeIsolated { $0.keepaliveFired += 1 }
        }
        keepalive?.schedule(after: .seconds(30))
        connection.start()
    }

    private func didRead(_ bytes: [UInt8]) {
        received += bytes
        keepalive?.schedule(after: .seconds(30))  // reset on every message: moves, never allocates
    }

    func send(_ text: String) {
        precondition(loop.inEventLoop)
        connection?.write(Array(text.utf8))
    }

    var receivedText: String { String(decoding: received, as: UTF8.self) }

    func close() {
        keepalive?.invalidate()
        connection?.close()
    }
}

@Suite struct IOActorUsageTests {
    @Test func actorOnTheLoopOwnsAConnection() async throws {
        try await withLoop { loop in
            let listener = try await startEchoServer(on: loop)
            let client = EchoClientActor(loop: loop)
            try await client.connect(port: listener.port!)
            await client.send("one ")
            await client.send("two")
            let deadline = ContinuousClock.now + .seconds(10)
            while await client.receivedText != "one two" && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(await client.receivedText == "one two")
            #expect(await client.keepaliveFired == 0)
            #expect(try await loop.submit { loop.scheduledTimerCount } == 1)
            await client.close()
            #expect(await client.closeReason == "closed locally")
            try await loop.submit { listener.close() }
        }
    }
}
