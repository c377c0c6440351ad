import Transport

/// One connection of the socket server: its framing, its output not yet handed to the socket, and
/// what holds its reading back. Loop thread only. Its subscription is in the server's
/// ``SubscriptionBook``, under its connection number.
final class SocketAPIPeerConnection {
    let connection: StreamConnection
    let info: SocketPeer
    var framer: LineFramer
    var isOpen = true
    var dropping = false
    /// Lines built this loop iteration, written by the server's flush.
    var out: [UInt8] = []
    var isDirty = false
    var inFlight = 0
    /// `request` ops handed to the handler and not answered yet.
    var pendingRequests = 0
    var pausedForOutput = false
    var pausedForRequests = false
    var lingerTimer: LoopTimer?
    /// Since when (monotonic ms) its framer holds an unfinished line.
    var partialSinceMs: Int64?
    /// Its write queue's limit was raised for one oversized event line.
    var raisedWriteLimit = false
    /// A look for room for a big line is scheduled.
    var retryScheduled = false
    /// Bytes read after the line at which it was paused for its calls; fed before it is read again.
    var backlog: [UInt8] = []

    var number: UInt64 { info.connectionNumber }

    init(connection: StreamConnection, info: SocketPeer, maxLineBytes: Int) {
        self.connection = connection
        self.info = info
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    /// Bytes queued for the peer and not yet taken by its socket.
    var queuedBytes: Int {
        out.count + (isOpen ? connection.queuedByteCount : 0)
    }

    /// What the peer holds in the daemon: its unfinished line, what it sent while paused, and its
    /// unsent output.
    var heldBytes: Int {
        framer.bufferedByteCount + backlog.count + queuedBytes
    }

    func updateReading() {
        guard isOpen, !dropping else { return }
        if pausedForOutput || pausedForRequests || !backlog.isEmpty {
            connection.pauseReading()
        } else {
            connection.resumeReading()
        }
    }
}
