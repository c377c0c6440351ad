import Foundation
import Testing
import Synchronization
@testable import Transport

/// An actor that runs on an event loop, next to its sockets.
actor LoopPinned {
    let loop: EventLoop
    var counter = 0
    init(loop: EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func increment() -> (onLoop: Bool, value: Int) {
        counter += 1
        return (loop.inEventLoop, counter)
    }
}

/// Records events of a registered descriptor (loop thread).
final class ShutdownProbe: EventLoopHandler, @unchecked Sendable {  // touched on the loop thread only
    let notified = Shared(false)
    func handleEvents(_ events: IOEvents) {}
    func eventLoopDidShutDown() { notified.update { $0 = true } }
}

@Suite struct IOEventLoopTests {
    @Test func timersFireInDeadlineOrderAndCancelWorks() async throws {
        try await withLoop { loop in
            let fired = Shared<[String]>([])
            try await loop.submit {
                let base = LoopInstant.now
                let a = LoopTimer(loop: loop) { fired.update { $0.append("a") } }
                let b = LoopTimer(loop: loop) { fired.update { $0.append("b") } }
                let c = LoopTimer(loop: loop) { fired.update { $0.append("c") } }
                let d = LoopTimer(loop: loop) { fired.update { $0.append("d") } }
                let cancelled = LoopTimer(loop: loop) { fired.update { $0.append("cancelled") } }
                a.schedule(at: base + .milliseconds(60))
                b.schedule(at: base + .milliseconds(20))
                cancelled.schedule(at: base + .milliseconds(30))
                c.schedule(at: base + .milliseconds(40))
                d.schedule(at: base + .milliseconds(20))  // same deadline as b: fires after b
                cancelled.cancel()
                #expect(!cancelled.isScheduled)
                #expect(loop.scheduledTimerCount == 4)
            }
            try await waitUntil("4 timers") { fired.value.count >= 4 }
            try await Task.sleep(for: .milliseconds(50))
            #expect(fired.value == ["b", "d", "c", "a"])
            #expect(try await loop.submit { loop.scheduledTimerCount } == 0)
        }
    }

    @Test func reschedulingKeepsOneHeapEntryAndFiresOnce() async throws {
        try await withLoop { loop in
            let fired = Shared(0)
            try await loop.submit {
                let keepalive = LoopTimer(loop: loop) { fired.update { $0 += 1 } }
                // A keepalive reset on every message: the same timer moves, nothing accumulates.
                for i in 0..<10_000 { keepalive.schedule(after: .milliseconds(200 - i % 100)) }
                #expect(loop.scheduledTimerCount == 1)
                keepalive.schedule(after: .milliseconds(10))
                #expect(loop.scheduledTimerCount == 1)
            }
            try await waitUntil("keepalive fired") { fired.value == 1 }
            try await Task.sleep(for: .milliseconds(250))
            #expect(fired.value == 1)
        }
    }

    @Test func timerRescheduledFromItsOwnHandlerDoesNotSpin() async throws {
        try await withLoop { loop in
            let fired = Shared(0)
            try await loop.submit {
                let box = Shared<Int>(0)
                _ = box
                var timer: LoopTimer?
                timer = LoopTimer(loop: loop) {
                    fired.update { $0 += 1 }
                    if fired.value < 5 { timer?.schedule(after: .zero) } else { timer?.invalidate(); timer = nil }
                }
                timer?.schedule(after: .zero)
            }
            try await waitUntil("five firings") { fired.value == 5 }
        }
    }

    @Test func executeFromManyThreadsRunsEverythingOnTheLoop() async throws {
        try await withLoop { loop in
            let ran = Shared(0)
            let offLoop = Shared(0)
            let threads = 8
            let perThread = 2_000
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let finished = Shared(0)
                for _ in 0..<threads {
                    Thread.detachNewThread {
                        for _ in 0..<perThread {
                            loop.execute {
                                if !loop.inEventLoop { offLoop.update { $0 += 1 } }
                                ran.update { $0 += 1 }
                            }
                        }
                        if finished.update({ $0 += 1; return $0 }) == threads { done.resume() }
                    }
                }
            }
            try await waitUntil("all tasks") { ran.value == threads * perThread }
            #expect(offLoop.value == 0)
            #expect(!loop.inEventLoop)
        }
    }

    @Test func actorPinnedToTheLoopRunsOnTheLoopThread() async throws {
        try await withLoop { loop in
            let actor = LoopPinned(loop: loop)
            for expected in 1...50 {
                let (onLoop, value) = await actor.increment()
                #expect(onLoop)
                #expect(value == expected)
            }
            // Code called back on the loop thread may enter the actor synchronously.
            let value = try await loop.submit {
                actor.assumeIsolated { $0.counter }
            }
            #expect(value == 50)
        }
    }

    @Test func shutdownJoinsNotifiesHandlersAndRefusesWork() async throws {
        let loop = try EventLoop(name: "shutdown-test")
        let probe = ShutdownProbe()
        let fds = Shared<[Int32]>([])
        try await loop.submit {
            var pair: [Int32] = [0, 0]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
            fds.update { $0 = pair }
            try loop.register(fd: pair[0], interest: .read, handler: probe)
        }
        #expect(loop.isRunning)
        await loop.shutdown()
        #expect(!loop.isRunning)
        #expect(probe.notified.value)
        await #expect(throws: EventLoopError.self) { try await loop.submit { 1 } }
        #expect(!loop.execute {})
        loop.shutdownAndJoin()  // idempotent
        for fd in fds.value { close(fd) }
    }

    @Test func shutdownClosesLiveConnectionsWithAReason() async throws {
        let loop = try EventLoop(name: "shutdown-conns")
        let listener = try await startEchoServer(on: loop)
        let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
        let recorder = StreamRecorder()
        try await loop.submit { recorder.attach(client) }
        await loop.shutdown()
        #expect(recorder.closeCalls.value == 1)
        #expect("\(recorder.closeReason.value!)" == "event loop \"shutdown-conns\" is shut down")
        #expect(!listener.isListening)
    }

    @Test func blockingPoolRunsOffTheLoopAndDeliversBack() async throws {
        let pool = BlockingPool(threadCount: 2, name: "test-pool")
        let loop = try EventLoop(name: "pool-test", blockingPool: pool)
        let value = try await pool.run { () throws(SocketError) -> Bool in !loop.inEventLoop }
        #expect(value)
        await #expect(throws: SocketError.self) {
            try await pool.run { () throws(SocketError) -> Int in throw .invalidArgument("boom") }
        }
        let delivered = Shared<(workOnLoop: Bool, completionOnLoop: Bool)?>(nil)
        pool.run({ loop.inEventLoop }, deliverOn: loop) { workOnLoop in
            delivered.update { $0 = (workOnLoop, loop.inEventLoop) }
        }
        try await waitUntil("delivery on the loop") { delivered.value != nil }
        #expect(delivered.value! == (false, true))
        await loop.shutdown()
        pool.shutdownAndJoin()
    }

    @Test func idleLoopWithAnOpenConnectionDoesNotWakeUp() async throws {
        try await withLoop { loop in
            let listener = try await loop.submit { try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop) }
            let serverSide = Shared<StreamConnection?>(nil)
            try await loop.submit {
                listener.onAccept = { connection in
                    connection.onRead = { _ in }
                    connection.start()
                    serverSide.update { $0 = connection }
                }
            }
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            try await loop.submit {
                client.onRead = { _ in }
                client.start()
            }
            try await waitUntil("accepted") { serverSide.value != nil }
            try await Task.sleep(for: .milliseconds(100))  // let connect/accept settle
            let before = loop.wakeUpCount
            try await Task.sleep(for: .seconds(2))
            let after = loop.wakeUpCount
            #expect(after == before, "idle loop woke up \(after - before) times in 2s")
            try await loop.submit {
                client.close()
                serverSide.value?.close()
                listener.close()
            }
        }
    }
}
