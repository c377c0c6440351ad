import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy for fault tests: listens on 127.0.0.1 (port 0), connects each accepted client to
/// 127.0.0.1:`upstreamPort`, and forwards bytes as `mode` says. Plain blocking-free sockets on
/// threads of its own (one accept thread, one per connection, each polling with a 5 ms timeout),
/// never on the cooperative pool. The mode applies to every connection, open or new.
public final class FaultProxy: Sendable {
    public enum Direction: Sendable { case toServer, toClient }

    public enum Mode: Sendable, Equatable {
        /// Forward everything as it comes.
        case pass
        /// Forward one byte per write in each direction, `gapMicros` apart (TCP_NODELAY).
        case oneByteAtATime(gapMicros: Int)
        /// Forward `bytes` more bytes in `direction`, then close both sockets of that connection
        /// (mid-frame when the budget ends inside one); then back to `pass`.
        case cutAfter(bytes: Int, Direction)
        /// Forward `bytes` more bytes in `direction`, then `freeze`.
        case freezeAfter(bytes: Int, Direction)
        /// Forward a connection's client bytes up to the start of its `frame`-th WebSocket frame
        /// after the HTTP head (1 is the first), then `freeze`. ws:// only (it reads the frames).
        case freezeAtClientFrame(Int)
        /// Forward nothing; keep both sockets open (a client's close is recorded, not acted on).
        case freeze
        /// Close the server side silently; the client side stays open, its bytes are read and
        /// dropped, nothing is sent to it. New connections never reach the server. A connection
        /// half-opened stays so after the mode changes, until its client closes.
        case halfOpen
        /// A slow, lossy link as TCP shows it to the programs at its ends (this kernel has no
        /// `netem`): every chunk read is forwarded `delayMs` later, each way; a chunk "lost" (one in
        /// `lossPercent` out of 100, from a generator seeded with `seed`) comes a retransmission
        /// timeout later (200 ms, doubling for consecutive losses up to 1.6 s), and holds back
        /// everything behind it, as TCP's in-order delivery does. Nothing is dropped or reordered:
        /// TCP never shows either to the application.
        case lossy(delayMs: Int, lossPercent: Int, seed: UInt64)
    }

    private struct State {
        var mode: Mode = .pass
        var budget = 0
        var dropGeneration = 0
        var stopped = false
        var accepted = 0
        var cuts = 0
        var frozeAt: Date?
        var cutAt: Date?
        var clientCloses: [Date] = []
        var lostChunks = 0
        var delayedChunks = 0
    }

    public let port: Int
    public let upstreamPort: Int
    private let listenFD: Int32
    private let state = Mutex(State())

    /// Listens and starts accepting; throws naming the call that failed.
    public init(upstreamPort: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FaultProxyError("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw FaultProxyError("bind/listen on 127.0.0.1:0: errno \(e)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listenFD = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        self.upstreamPort = upstreamPort
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    // MARK: - Control (from the test)

    public func set(_ mode: Mode) {
        state.withLock { s in
            s.mode = mode
            switch mode {
            case .cutAfter(let n, _), .freezeAfter(let n, _): s.budget = n
            case .freeze: s.frozeAt = Date()
            default: break
            }
        }
    }

    public var mode: Mode { state.withLock { $0.mode } }
    /// When the last freeze began (set or triggered; wall clock, to compare with the daemon's
    /// event `ts`); nil when none since the start.
    public var frozeAt: Date? { state.withLock { $0.frozeAt } }
    /// When the last `cutAfter` cut a connection.
    public var cutAt: Date? { state.withLock { $0.cutAt } }
    /// Connections accepted so far.
    public var accepted: Int { state.withLock { $0.accepted } }
    /// Cuts done so far (`cutAfter`).
    public var cuts: Int { state.withLock { $0.cuts } }
    /// When clients closed their side, oldest first.
    public var clientCloses: [Date] { state.withLock { $0.clientCloses } }
    /// Chunks `lossy` held back a retransmission timeout ("lost"), and all the chunks it delayed.
    public var lossyCounts: (lost: Int, delayed: Int) { state.withLock { ($0.lostChunks, $0.delayedChunks) } }

    /// Closes every open connection (both sides) now; new ones are accepted as before.
    public func dropAll() { state.withLock { $0.dropGeneration += 1 } }

    /// Stops accepting and closes every connection (within a few ms, on the proxy's threads).
    /// Call it at the end of a test: the threads hold the proxy until then.
    public func stop() { state.withLock { $0.stopped = true } }

    // MARK: - Threads

    private static func loopback(port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return a
    }

    private func acceptLoop() {
        defer { Glibc.close(listenFD) }
        while !state.withLock({ $0.stopped }) {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 20) > 0 else { continue }
            let client = accept(listenFD, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            Self.noDelay(client)
            let generation = state.withLock { s in
                s.accepted += 1
                return s.dropGeneration
            }
            Thread.detachNewThread { [self] in pump(client: client, generation: generation) }
        }
    }

    /// The peer shut down its writing side (Linux; Glibc's module hides it without _GNU_SOURCE).
    private static let pollRDHUP: Int32 = 0x2000

    private static func noDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A blocking connect to the upstream (local: immediate), then non-blocking; -1 when refused.
    private func connectUpstream() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var address = Self.loopback(port: UInt16(upstreamPort))
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            return -1
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        Self.noDelay(fd)
        return fd
    }

    /// One connection's loop: forwards per the mode until a side closes, a drop or a stop.
    private func pump(client: Int32, generation: Int) {
        var server: Int32 = -1
        var halfOpened = false
        var clientClosed = false
        var toServer: [UInt8] = []
        var toClient: [UInt8] = []
        var frames = ClientFrameCounter()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        // `lossy`: the tail of each buffer not yet due, as (when due, byte count), oldest first.
        var heldToServer: [(at: ContinuousClock.Instant, count: Int)] = []
        var heldToClient: [(at: ContinuousClock.Instant, count: Int)] = []
        var random = SplitMix64(seed: 0)
        var seeded: UInt64? = nil
        var rto: [Direction: Int] = [.toServer: 0, .toClient: 0]
        defer {
            Glibc.close(client)
            if server >= 0 { Glibc.close(server) }
        }
        func recordClientClose() {
            if !clientClosed {
                clientClosed = true
                state.withLock { $0.clientCloses.append(Date()) }
            }
        }
        /// Reads what is there; nil at EOF or error.
        func readSome(_ fd: Int32) -> ArraySlice<UInt8>? {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return [] }
            return n > 0 ? chunk[..<n] : nil
        }
        /// Writes up to `count` bytes from the start of `buffer`; the number written, nil on error.
        func writeSome(_ fd: Int32, _ buffer: [UInt8], _ count: Int) -> Int? {
            guard count > 0 else { return 0 }
            let n = buffer.withUnsafeBytes { send(fd, $0.baseAddress, count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { return errno == EAGAIN || errno == EINTR ? 0 : nil }
            return n
        }

        while true {
            let (current, stopped, dropped) = state.withLock { ($0.mode, $0.stopped, $0.dropGeneration != generation) }
            if stopped || dropped { return }

            if current == .halfOpen || halfOpened {
                if !halfOpened {
                    halfOpened = true
                    if server >= 0 { Glibc.close(server); server = -1 }
                    toServer = []
                    toClient = []
                }
                var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 5) > 0 else { continue }
                if readSome(client) == nil { recordClientClose(); return }
                continue
            }
            if current == .freeze {
                // Nothing forwarded or read; a client's close is only noticed (POLLRDHUP).
                var pfd = pollfd(fd: client, events: Int16(Self.pollRDHUP), revents: 0)
                if poll(&pfd, 1, 5) > 0, pfd.revents & Int16(Self.pollRDHUP | Int32(POLLHUP | POLLERR)) != 0 {
                    recordClientClose()
                    usleep(5_000)
                }
                continue
            }
            if clientClosed { return }  // closed while frozen: the freeze is over
            if server < 0 {
                server = connectUpstream()
                if server < 0 { return }
            }

            // Wait to write only what is due (`lossy` holds the rest; the 5 ms poll is its timer).
            let clock = ContinuousClock.now
            let dueToServer = toServer.count - heldToServer.reduce(0) { $1.at > clock ? $0 + $1.count : $0 }
            let dueToClient = toClient.count - heldToClient.reduce(0) { $1.at > clock ? $0 + $1.count : $0 }
            var fds = [
                pollfd(fd: client, events: Int16(toServer.count < 65_536 ? POLLIN : 0) | Int16(dueToClient == 0 ? 0 : POLLOUT), revents: 0),
                pollfd(fd: server, events: Int16(toClient.count < 65_536 ? POLLIN : 0) | Int16(dueToServer == 0 ? 0 : POLLOUT), revents: 0),
            ]
            _ = poll(&fds, 2, 5)
            var readToServer = 0, readToClient = 0
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                guard let bytes = readSome(client) else { recordClientClose(); return }
                toServer += bytes
                readToServer = bytes.count
            }
            if fds[1].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                guard let bytes = readSome(server) else {
                    // The server closed: pass on what it sent first (bounded), then close.
                    let end = ContinuousClock.now + .milliseconds(200)
                    while !toClient.isEmpty, ContinuousClock.now < end, let n = writeSome(client, toClient, toClient.count) {
                        toClient.removeFirst(n)
                        if !toClient.isEmpty { usleep(1_000) }
                    }
                    return
                }
                toClient += bytes
                readToClient = bytes.count
            }
            // The mode again, after the read: bytes read were sent after any change the test
            // made before them (a drop, a freeze), so they are forwarded under it.
            let now = state.withLock { ($0.mode, $0.stopped || $0.dropGeneration != generation) }
            if now.1 { return }
            let mode = now.0
            if mode == .freeze || mode == .halfOpen { continue }
            if case .lossy(let delayMs, let lossPercent, let seed) = mode {
                if seeded != seed { random = SplitMix64(seed: seed); seeded = seed }  // the same losses on every connection
                let clock = ContinuousClock.now
                for (direction, count) in [(Direction.toServer, readToServer), (.toClient, readToClient)] where count > 0 {
                    var extra = 0
                    if Int(random.next() % 100) < lossPercent {
                        rto[direction] = min(max((rto[direction] ?? 0) * 2, 200), 1_600)
                        extra = rto[direction] ?? 0
                    } else {
                        rto[direction] = 0
                    }
                    state.withLock { s in
                        s.delayedChunks += 1
                        if extra > 0 { s.lostChunks += 1 }
                    }
                    var at = clock + .milliseconds(delayMs + extra)
                    // In order: nothing overtakes a chunk held back before it.
                    let last = direction == .toServer ? heldToServer.last?.at : heldToClient.last?.at
                    if let last, last > at { at = last }
                    if direction == .toServer { heldToServer.append((at, count)) } else { heldToClient.append((at, count)) }
                }
            } else {
                heldToServer = []
                heldToClient = []
            }

            directions: for direction in [Direction.toServer, .toClient] {
                var buffer = direction == .toServer ? toServer : toClient
                defer { if direction == .toServer { toServer = buffer } else { toClient = buffer } }
                guard !buffer.isEmpty else { continue }
                let fd = direction == .toServer ? server : client
                var allowed = buffer.count
                var held = direction == .toServer ? heldToServer : heldToClient
                defer { if direction == .toServer { heldToServer = held } else { heldToClient = held } }
                if !held.isEmpty {
                    let clock = ContinuousClock.now
                    allowed -= held.reduce(0) { $1.at > clock ? $0 + $1.count : $0 }
                }
                var gap = 0
                var budgeted = false
                switch mode {
                case .oneByteAtATime(let g):
                    allowed = 1
                    gap = g
                case .cutAfter(_, let d) where d == direction, .freezeAfter(_, let d) where d == direction:
                    allowed = min(allowed, state.withLock { $0.budget })
                    budgeted = true
                case .freezeAtClientFrame(let k) where direction == .toServer:
                    allowed = frames.bytesBefore(frame: k, in: buffer)
                    if allowed == 0 {
                        freezeNow(from: mode)
                        break directions
                    }
                default: break
                }
                guard let n = writeSome(fd, buffer, allowed) else { return }
                if direction == .toServer { frames.consume(buffer.prefix(n)) }
                // Written bytes leave the front: first the part that was never held, then held chunks.
                var written = n - (buffer.count - held.reduce(0) { $0 + $1.count })
                while written > 0, !held.isEmpty {
                    let take = min(written, held[0].count)
                    held[0].count -= take
                    written -= take
                    if held[0].count == 0 { held.removeFirst() }
                }
                buffer.removeFirst(n)
                if budgeted {
                    let left = state.withLock { s in
                        s.budget -= n
                        return s.budget
                    }
                    if left <= 0 {
                        if case .cutAfter = mode {
                            state.withLock { s in
                                if s.mode == mode { s.mode = .pass }
                                s.cuts += 1
                                s.cutAt = Date()
                            }
                            return
                        }
                        freezeNow(from: mode)
                        break directions
                    }
                }
                if gap > 0 && n > 0 { usleep(UInt32(gap)) }
            }
        }
    }

    /// The mode becomes `freeze` (unless the test changed it meanwhile).
    private func freezeNow(from mode: Mode) {
        state.withLock { s in
            guard s.mode == mode else { return }
            s.mode = .freeze
            s.frozeAt = Date()
        }
    }
}

public struct FaultProxyError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = "fault proxy: " + description }
}

/// Finds WebSocket frame starts in a client's byte stream (an HTTP head, then frames).
struct ClientFrameCounter {
    private enum Phase { case head, start, length, extended(left: Int), mask(left: Int), payload(left: UInt64) }
    private var phase = Phase.head
    private var tail: UInt32 = 0
    private var masked = false
    private var length: UInt64 = 0
    /// Frames whose first byte has been consumed.
    private(set) var started = 0

    /// How many bytes of `bytes` come before the first byte of frame `frame` (all of them when it
    /// does not start within).
    func bytesBefore(frame: Int, in bytes: [UInt8]) -> Int {
        var probe = self
        for (i, b) in bytes.enumerated() {
            if case .start = probe.phase, probe.started + 1 == frame { return i }
            probe.feed(b)
        }
        return bytes.count
    }

    mutating func consume(_ bytes: ArraySlice<UInt8>) { for b in bytes { feed(b) } }

    private mutating func feed(_ b: UInt8) {
        switch phase {
        case .head:
            tail = tail << 8 | UInt32(b)
            if tail == 0x0D0A_0D0A { phase = .start }
        case .start:
            started += 1
            phase = .length
        case .length:
            masked = b & 0x80 != 0
            let l = b & 0x7F
            length = 0
            if l == 126 { phase = .extended(left: 2) } else if l == 127 { phase = .extended(left: 8) } else {
                length = UInt64(l)
                afterLength()
            }
        case .extended(let left):
            length = length << 8 | UInt64(b)
            if left == 1 { afterLength() } else { phase = .extended(left: left - 1) }
        case .mask(let left):
            if left == 1 { afterMask() } else { phase = .mask(left: left - 1) }
        case .payload(let left):
            phase = left == 1 ? .start : .payload(left: left - 1)
        }
    }

    private mutating func afterLength() { if masked { phase = .mask(left: 4) } else { afterMask() } }
    private mutating func afterMask() { phase = length == 0 ? .start : .payload(left: length) }
}

