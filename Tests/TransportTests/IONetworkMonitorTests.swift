// LoopNetworkMonitor: rtnetlink on an event loop. The loop's thread is moved into a network
// namespace the test creates, so the changes it makes there (a burst of address adds) reach
// only this monitor, and nothing the machine does elsewhere disturbs the counts.
import Foundation
import SmarticoTestSupport
import Testing
@testable import Transport

/// The monitor, only touched on the loop thread.
private final class MonitorBox: @unchecked Sendable {  // every access is inside loop.submit (the loop thread)
    var monitor: LoopNetworkMonitor?
}

@Suite("rtnetlink monitor", .serialized,
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"),
                "skipped: needs root and /usr/sbin/ip to make a network namespace"))
struct IONetworkMonitorTests {
    static func ip(_ args: [String]) async throws {
        let r = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/sbin/ip"), args, timeout: .seconds(10))
        guard r.status == 0 else { throw TestFailure("ip \(args.joined(separator: " ")): \(r)") }
    }

    /// setns(2), which Glibc's module leaves out (it needs _GNU_SOURCE); CLONE_NEWNET.
    static let cloneNewNet: Int32 = 0x4000_0000
    static func setns(_ fd: Int32, _ type: Int32) -> Int32 {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setns") else { return -1 }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)(fd, type)
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// A burst of changes is one call (or a few, never one per message); quiet means no call.
    @Test func aBurstIsDebouncedAndQuietCallsNothing() async throws {
        let ns = "smmon" + String(UUID().uuidString.prefix(6)).lowercased()
        try await Self.ip(["netns", "add", ns])
        let loop = try EventLoop(name: "netlink-test")
        let calls = Shared<Int>(0)
        let box = MonitorBox()
        do {
            try await loop.submit {
                let fd = open("/var/run/netns/\(ns)", O_RDONLY | O_CLOEXEC)
                guard fd >= 0, Self.setns(fd, Self.cloneNewNet) == 0 else { throw TestFailure("setns \(ns): errno \(errno)") }
                close(fd)
                box.monitor = try LoopNetworkMonitor(loop: loop, debounce: .milliseconds(5)) { calls.update { $0 += 1 } }
            }
            try await Task.sleep(for: .milliseconds(150))
            #expect(calls.value == 0, "no change, no call")

            // One `ip -batch`: the loopback up and 10 addresses, each a few netlink messages.
            let batch = FileManager.default.temporaryDirectory.appendingPathComponent("\(ns).batch").path
            let lines = ["link set lo up"] + (1...10).map { "addr add 10.77.0.\($0)/32 dev lo" }
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: batch))
            defer { try? FileManager.default.removeItem(atPath: batch) }
            try await Self.ip(["-n", ns, "-batch", batch])
            let deadline = ContinuousClock.now + .seconds(5)
            while calls.value == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(100))
            let messages = try await loop.submit { box.monitor?.messages ?? 0 }
            let afterBurst = calls.value
            print("rtnetlink monitor: \(messages) datagrams in the burst, \(afterBurst) call(s)")
            #expect(afterBurst >= 1, "the burst was seen")
            #expect(messages >= 11 && afterBurst < messages, "\(messages) messages, \(afterBurst) calls")
            // Quiet again: nothing more, the loop does not spin on the socket.
            try await Task.sleep(for: .milliseconds(200))
            #expect(calls.value == afterBurst)
            #expect(try await loop.submit { box.monitor?.messages ?? 0 } == messages)
            // Cancelled: changes are no longer read.
            try await loop.submit { box.monitor?.cancel() }
            try await Self.ip(["-n", ns, "addr", "add", "10.77.1.1/32", "dev", "lo"])
            try await Task.sleep(for: .milliseconds(100))
            #expect(calls.value == afterBurst)
        } catch {
            Issue.record("\(error)")
        }
        await loop.shutdown()
        try? await Self.ip(["netns", "delete", ns])
    }
}
