// One user's seen-set in memory, beside its rows (docs/store.md, "seen-set").

/// The engagement uids of one user's seen-set, oldest first, mirroring that user's rows of the
/// `seen` table. Schema 5 keeps no index on those rows: every lookup is answered here and a new
/// uid's row is an append, so an engagement's commit no longer dirties a random page of a
/// (user, uid) index. The store owns it and keeps it current with the table (see
/// `SmarticoStore.insertSeen`).
struct SeenSet {
    let user: String
    private var uids: Set<String> = []
    /// (rowid, uid) in rowid order; entries before `head` are forgotten.
    private var order: [(id: Int64, uid: String)] = []
    private var head = 0

    init(user: String) {
        self.user = user
    }

    /// How many uids the set holds.
    var count: Int { order.count - head }

    func contains(_ uid: String) -> Bool { uids.contains(uid) }

    /// Adds the uid whose row got `id` (larger than every id added before). A uid already in the
    /// set (a repeat row in an old file, or one written by another process) is not added twice.
    mutating func append(id: Int64, uid: String) {
        guard uids.insert(uid).inserted else { return }
        order.append((id, uid))
    }

    /// Forgets the oldest uids down to `keep` once the set holds `keep + slack` or more; returns the
    /// rowid of the newest one forgotten (the caller deletes the user's rows up to it), nil when it
    /// forgot nothing.
    mutating func dropOldest(keeping keep: Int, slack: Int) -> Int64? {
        let excess = count - keep
        guard excess > 0, excess > slack else { return nil }
        let last = order[head + excess - 1].id
        for index in head ..< head + excess { uids.remove(order[index].uid) }
        head += excess
        // Compact once half the array is forgotten entries: amortised O(1) per uid.
        if head > order.count / 2 {
            order.removeFirst(head)
            head = 0
        }
        return last
    }
}
