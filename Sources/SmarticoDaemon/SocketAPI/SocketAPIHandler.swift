import Synchronization
import SmarticoProtocol
import Transport

/// What the socket server asks of the rest of the daemon (the session driver): answer `hello`,
/// `status`, the session ops and `push_report`.
///
/// ``handle(_:from:reply:)`` is called **on the server's loop thread, synchronously, in the order the
/// requests arrived** (across all connections), so a driver that feeds them into one FIFO (e.g.
/// `AsyncStream.Continuation.yield`) keeps their order. It must not block: hand the work off and
/// answer later through `reply`, from any thread.
public protocol SocketAPIHandler: AnyObject, Sendable {
    func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply)
    /// A peer that held `bytes` of queued output went away (the heap may be trimmed soon).
    func peerReleased(bytes: Int)
    /// A new connection was refused (`too_many_connections`) with `error`; on the server's loop.
    func connectionRefused(uid: UInt32?, pid: Int32?, _ error: SocketAPIError)
    /// An open connection was closed for what it held (`memory_limit`) or left unfinished
    /// (`line_timeout`), with `error`; on the server's loop.
    func peerRefused(_ peer: SocketPeer, _ error: SocketAPIError)
    /// `peer`'s connection closed, after every request it sent was handed to ``handle(_:from:reply:)``:
    /// what it still waits for may be cancelled (its replies go nowhere). On the server's loop thread;
    /// must not block.
    func peerClosed(_ peer: SocketPeer)
}

/// The answer slot of one request. Answer exactly once with ``succeed(_:)`` or ``fail(_:)``, from any
/// thread; later answers are ignored. A reply released without an answer answers `internal`, so a
/// peer is never left waiting forever by a lost request.
public final class SocketAPIReply: Sendable {
    private let answered = Atomic<Bool>(false)
    private let deliver: @Sendable (Result<JSONValue, SocketAPIError>) -> Void

    init(deliver: @escaping @Sendable (Result<JSONValue, SocketAPIError>) -> Void) {
        self.deliver = deliver
    }

    /// Answers `{"ok": true, "result": result}`.
    public func succeed(_ result: JSONValue) { answer(.success(result)) }

    /// Answers `{"ok": false, "error": …}`.
    public func fail(_ error: SocketAPIError) { answer(.failure(error)) }

    public func answer(_ result: Result<JSONValue, SocketAPIError>) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            return
        }
        deliver(result)
    }

    /// True once answered.
    public var isAnswered: Bool { answered.load(ordering: .acquiring) }

    deinit {
        if !answered.load(ordering: .acquiring) {
            deliver(.failure(SocketAPIError(.internal, "the daemon dropped this request without an answer")))
        }
    }
}

/// A handler made of an async closure (tests, tools). Each call runs in its own `Task`, so calls may
/// start out of arrival order: the session driver should implement ``SocketAPIHandler`` itself.
public final class SocketAPIClosureHandler: SocketAPIHandler {
    private let body: @Sendable (SocketAPICall, SocketPeer) async -> Result<JSONValue, SocketAPIError>
    private let executor: (any TaskExecutor)?

    /// - Parameter executor: where the tasks run (e.g. the server's ``EventLoop``, so that nothing
    ///   reaches Swift's global executor and libdispatch); nil: the global executor.
    public init(executor: (any TaskExecutor)? = nil,
                _ body: @escaping @Sendable (SocketAPICall, SocketPeer) async -> Result<JSONValue, SocketAPIError>) {
        self.body = body
        self.executor = executor
    }

    public func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply) {
        Task(executorPreference: executor) { [body] in reply.answer(await body(call, peer)) }
    }
}

extension SocketAPIHandler {
    public func peerReleased(bytes: Int) {}
    public func connectionRefused(uid: UInt32?, pid: Int32?, _ error: SocketAPIError) {}
    public func peerRefused(_ peer: SocketPeer, _ error: SocketAPIError) {}
    public func peerClosed(_ peer: SocketPeer) {}
}
