// One user's seen-set in memory, beside its rows (docs/store.md, "seen-set").

/// An index of one user's rows of the `seen` table, kept in memory. Schema 5 keeps no index on
/// those rows: the lookup of a uid is answered here and a new uid's row is an append, so an
/// engagement's commit no longer dirties a random page of a (user, uid) index.
///
/// It holds no strings: a uid is known by a 64-bit hash keyed per process (`Hasher`, SipHash
/// with a random seed, so a server cannot choose colliding uids; the store's `seenKey`, computed
/// once per uid into its ``SeenKey``) mapped to the rowid of its row.
/// A hit is only a candidate: the store reads that row's uid to confirm it (one rowid lookup),
/// and asks the table when the row holds another uid, so the answer is exact. Two allocations
/// in all (a dictionary and an array), none per uid: a burst leaves no small blocks scattered
/// over the heap for `malloc_trim` to step around. The store keeps it current with the table
/// (`SmarticoStore.insertSeen`).
struct SeenSet {
    let user: String
    /// Hash of a uid → rowid of the newest row whose uid has that hash.
    private var rows: [Int: Int64] = [:]
    /// (rowid, hash) in rowid order; entries before `head` are forgotten.
    private var order: [(id: Int64, key: Int)] = []
    private var head = 0

    init(user: String) {
        self.user = user
    }

    /// How many rows the index covers.
    var count: Int { order.count - head }

    /// The rowid of the row that may hold the uid whose hash is `key` (``SeenKey/key``), nil when
    /// no row does.
    func candidateRow(forKey key: Int) -> Int64? { rows[key] }

    /// Adds the row `id` (larger than every id added before) holding the uid whose hash is `key`.
    mutating func append(id: Int64, key: Int) {
        rows[key] = id
        order.append((id, key))
    }

    /// Forgets the oldest rows down to `keep` once it covers `keep + slack` or more; returns the
    /// rowid of the newest one forgotten (the caller deletes the user's rows up to it), nil when
    /// it forgot nothing.
    mutating func dropOldest(keeping keep: Int, slack: Int) -> Int64? {
        let excess = count - keep
        guard excess > 0, excess > slack else { return nil }
        let last = order[head + excess - 1].id
        for index in head ..< head + excess {
            let (id, hash) = order[index]
            // One hash lookup a row; a newer row with the same hash took the entry over: it goes back.
            if let newer = rows.removeValue(forKey: hash), newer != id { rows[hash] = newer }
        }
        head += excess
        // Compact once half the array is forgotten entries: amortised O(1) per row.
        if head > order.count / 2 {
            order.removeFirst(head)
            head = 0
        }
        return last
    }

    /// SipHash keyed with this process's random seed.
    @Sendable static func processKey(_ uid: String) -> Int {
        var hasher = Hasher()
        hasher.combine(uid)
        return hasher.finalize()
    }
}
