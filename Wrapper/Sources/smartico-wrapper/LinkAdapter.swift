#if canImport(Glibc)
import Glibc
#endif
import SmarticoClient
import SmarticoProtocol

/// Bounds the engagements in memory: the link's thread waits in `enter` while the model holds
/// `limit` popups (queued or on screen) plus those on their way to the main loop. The daemon
/// meanwhile keeps the rest in its journal (a subscriber that does not read catches up from it).
final class EngagementGate: @unchecked Sendable {
    // @unchecked: every field is read and written only with `mutex` held.
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var inTransit = 0
    private var held = 0
    private var closed = false
    let limit: Int

    init(limit: Int) {
        self.limit = max(limit, 1)
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    /// On the link's thread, before an engagement goes to the main loop.
    func enter() {
        pthread_mutex_lock(&mutex)
        while !closed && inTransit + held >= limit { pthread_cond_wait(&condition, &mutex) }
        inTransit += 1
        pthread_mutex_unlock(&mutex)
    }

    /// On the main thread, once the model has taken the engagement in (and published `held`).
    func arrived() {
        pthread_mutex_lock(&mutex)
        inTransit -= 1
        pthread_cond_broadcast(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func setHeld(_ count: Int) {
        pthread_mutex_lock(&mutex)
        if count != held {
            held = count
            pthread_cond_broadcast(&condition)
        }
        pthread_mutex_unlock(&mutex)
    }

    /// Lets a waiting link thread go (before the link is stopped and joined).
    func close() {
        pthread_mutex_lock(&mutex)
        closed = true
        pthread_cond_broadcast(&condition)
        pthread_mutex_unlock(&mutex)
    }
}

/// The host's daemon: a `DaemonLink` (its own thread, reconnecting, durable) whose events and
/// answers are handed to the main loop.
final class LinkAdapter: DaemonPort {
    /// The events the wrapper acts on (the others are not sent to it).
    static let types = ["engagement", "minigame", "deeplink", "identified", "props", "gap"]

    private let link: DaemonLink
    private let gate: EngagementGate

    init(path: String, durable: String, maxHeld: Int) throws(ClientError) {
        let gate = EngagementGate(limit: maxHeld)
        self.gate = gate
        link = try DaemonLink(
            .init(path: path, types: LinkAdapter.types, durable: durable),
            onEvent: { event in
                let isEngagement = event.name == "engagement"
                if isEngagement { gate.enter() }
                let (name, seq, data) = (event.name, event.seq, event.data)
                onMain {
                    host.daemonEvent(name: name, seq: seq, data: data)
                    if isEngagement { gate.arrived() }
                }
            },
            onState: { state in
                onMain {
                    switch state {
                    case .connected(let version): host.daemonConnected(version: version)
                    case .disconnected(let reason): host.daemonDisconnected(reason: reason)
                    }
                }
            })
    }

    func request(_ op: String, _ arguments: JSONObject, completion: @escaping @Sendable (Result<JSONValue, any Error>) -> Void) {
        if op == "ack", let seq = arguments["seq"]?.int64Value {
            // Cumulative and re-sent by the link after a reconnect until the daemon confirms it.
            link.ack(seq)
            completion(.success(.null))
            return
        }
        link.send(op: op, arguments: arguments) { result in
            completion(result.mapError { $0 as any Error })
        }
    }

    func popupsHeld(_ count: Int) { gate.setHeld(count) }

    func stop() {
        gate.close()
        link.stop()
    }
}
