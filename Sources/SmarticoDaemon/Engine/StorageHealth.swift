import Logging
import SmarticoProtocol

/// Whether the state directory takes writes (docs/reliability.md, "A full or read-only state
/// directory"). The first write that fails because it is full, read-only or failing
/// (``StoreError/storageProblem``), and the first after a change of cause, is reported: an `error`
/// log line here, and the message returned, which the driver makes `status.last_error` and an
/// `error` event; the following ones only at debug. The session stays up; durable ops answer
/// `storage_unavailable` until a write succeeds again (``writable(logger:)``).
struct StorageHealth {
    /// Why the state directory takes no writes since the first failed write; nil once a write
    /// succeeds again.
    private(set) var problem: String?
    var stateDir: String

    /// A write of `what` failed: the message to report when its storage problem is new; nil when
    /// it was reported already (logged at debug) or `error` is no storage problem.
    mutating func failed(_ what: String, _ error: StoreError, logger: Logger) -> String? {
        guard let cause = error.storageProblem else { return nil }
        guard problem != cause else {
            logger.debug("\(what) failed: \(error)")
            return nil
        }
        problem = cause
        let message = "state_dir \(stateDir) is \(cause): \(what) failed: \(error). "
            + "Durable work is refused (ops that store a message answer storage_unavailable; events that "
            + "cannot be journaled are dropped, each with a journal_write_failed event); the session stays up. "
            + "Free space in, or remount read-write, the state directory: the daemon resumes by itself"
        logger.error("\(message)")
        return message
    }

    /// A write succeeded: a storage problem reported before is over.
    mutating func writable(logger: Logger) {
        guard let cause = problem else { return }
        problem = nil
        logger.notice("state_dir \(stateDir) is writable again (it was \(cause)): durable work is accepted again")
    }

    /// What an op refused for the storage problem `cause` answers (`storage_unavailable`).
    func refusal(_ cause: String, _ error: StoreError) -> String { "state_dir \(stateDir) is \(cause): \(error)" }

    /// An `error` event (not journaled) with `code` and `message`.
    static func errorEvent(_ code: String, _ message: String, tsMs: Int64) -> PreparedEvent {
        var data: [UInt8] = []
        JSONValue.object(["code": .string(code), "message": .string(message)]).serialize(into: &data)
        return PreparedEvent(name: "error", seq: nil, tsMs: tsMs, data: data)
    }
}
