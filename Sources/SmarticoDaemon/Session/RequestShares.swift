/// Who made a `request` (or a data API call's request): a local peer's uid and role, or the
/// daemon itself. The read role's requests are rationed (docs/security.md, "Limits").
public struct RequestOwner: Hashable, Sendable, CustomStringConvertible {
    /// The peer's uid; nil for the daemon's own requests and for tests.
    public var uid: UInt32?
    /// The peer has the control role (socket-api.md, "Permissions").
    public var control: Bool

    public init(uid: UInt32?, control: Bool) {
        self.uid = uid
        self.control = control
    }

    /// The daemon itself, or a caller that is not a socket peer: never rationed.
    public static let daemon = RequestOwner(uid: nil, control: true)

    public var description: String {
        (uid.map { "uid \($0)" } ?? "the daemon") + (control ? "" : " (read role)")
    }
}

/// How the pool of requests waiting for the server is shared, and how fast the read role may add
/// to it (a token bucket per uid), sans I/O.
///
/// A read-role peer can make the server work for the player (`api` reads) and, without a ration,
/// could fill the whole pool so that nobody else's `request` or `api` call gets in. So:
/// - the read role together holds at most half of the pool, and one read uid a quarter;
/// - one read uid adds requests at `readPerSecond` on average, with bursts of `readBurst`;
/// - the control role is not rationed (it may act as the player anyway): it always finds at
///   least half of the pool free of read-role requests.
///
/// Requests whose peer went away still count until their answer or timeout comes: a peer that
/// disconnects and reconnects does not get a fresh share.
public struct RequestShares: Sendable, Equatable {
    public var pool: Int
    public var readPerSecond: Int
    public var readBurst: Int
    /// Tokens per read uid (milli-tokens, so a refill of a fraction of a token is kept), and when
    /// they were last refilled.
    private var buckets: [UInt32: Bucket] = [:]

    struct Bucket: Equatable {
        var milliTokens: Int64
        var atMs: Int64
    }

    /// Uids remembered at most; full buckets are forgotten first (they hold no state).
    static let maxBuckets = 4096

    public init(pool: Int, readPerSecond: Int, readBurst: Int) {
        self.pool = pool
        self.readPerSecond = readPerSecond
        self.readBurst = readBurst
    }

    /// The share of one read uid and of the read role together.
    public var readUIDShare: Int { max(1, pool / 4) }
    public var readRoleShare: Int { max(1, pool / 2) }

    /// Why a new request of `owner` is refused now, or nil (then it has taken a token).
    /// - Parameters:
    ///   - waiting: requests waiting for the server now, all owners (those whose peer left too);
    ///   - waitingOfUID: of them, those of `owner.uid` made with the read role;
    ///   - waitingOfReadRole: of them, those made with the read role.
    public mutating func admit(_ owner: RequestOwner, waiting: Int, waitingOfUID: Int, waitingOfReadRole: Int, now: Int64) -> String? {
        guard waiting < pool else { return "\(pool) requests are already waiting for answers" }
        guard !owner.control, let uid = owner.uid else { return nil }
        if waitingOfUID >= readUIDShare {
            return "uid \(uid) already has \(waitingOfUID) requests of the read role waiting for the server, its share (a quarter of the \(pool)); wait for answers before sending more"
        }
        if waitingOfReadRole >= readRoleShare {
            return "peers of the read role already have \(waitingOfReadRole) requests waiting for the server, their share (half of the \(pool)); wait for answers before sending more"
        }
        let capacity = Int64(readBurst) * 1000
        var bucket = buckets[uid] ?? Bucket(milliTokens: capacity, atMs: now)
        let elapsed = max(0, now - bucket.atMs)
        bucket.milliTokens = min(capacity, bucket.milliTokens + elapsed * Int64(readPerSecond))
        bucket.atMs = now
        guard bucket.milliTokens >= 1000 else {
            buckets[uid] = bucket
            return "uid \(uid) (read role) sends requests to the server faster than socket.read_requests_per_s (\(readPerSecond) a second, bursts of socket.read_requests_burst, \(readBurst)); slow down, or raise them"
        }
        bucket.milliTokens -= 1000
        buckets[uid] = bucket
        if buckets.count > Self.maxBuckets { forgetFullBuckets(now: now) }
        return nil
    }

    private mutating func forgetFullBuckets(now: Int64) {
        let capacity = Int64(readBurst) * 1000
        buckets = buckets.filter { $0.value.milliTokens + max(0, now - $0.value.atMs) * Int64(readPerSecond) < capacity }
        // All of them busy (more uids than the bound, each mid-burst): the oldest go.
        if buckets.count > Self.maxBuckets {
            let keep = buckets.sorted { $0.value.atMs > $1.value.atMs }.prefix(Self.maxBuckets / 2)
            buckets = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }

    var bucketCount: Int { buckets.count }
}
