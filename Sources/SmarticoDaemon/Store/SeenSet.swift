// One user's seen-set in memory, beside its chunks in the database (docs/store.md, "seen-set").

/// An index of one user's uids in the `seen_chunk` table, kept in memory. Schema 5 keeps no index
/// on them: the lookup of a uid is answered here and new uids are an append, so an engagement's
/// commit no longer dirties a random page of a (user, uid) index.
///
/// It holds no strings: a uid is known by a 64-bit hash keyed per process (`Hasher`, SipHash
/// with a random seed, so a server cannot choose colliding uids; the store's `seenKey`, computed
/// once per uid into its ``SeenKey``) mapped to where the uid is stored (a ``SeenChunk/Locator``).
/// A hit is only a candidate: the store reads those bytes to confirm it, and searches the user's
/// chunks when they hold another uid, so the answer is exact. Three allocations in all (the set, a
/// dictionary and an array), none per uid: a burst leaves no small blocks scattered over the heap
/// for `malloc_trim` to step around. The store keeps it current with the table
/// (`SmarticoStore.insertSeen`, `foldIntoTable`).
///
/// A class, owned by the store alone: as a struct in the store's optional property, asking whose
/// set it is (`seenSet?.user`, for every engagement journaled) copied it, retaining and releasing
/// its dictionary, its array and its user — ~8 reference-count operations an engagement on the
/// store's thread, where the objects they touch are shared with the event loop's.
final class SeenSet {
    let user: String
    /// Hash of a uid → locator of the newest entry whose uid has that hash.
    // Not checked for exclusive access at run time: only this class's own methods touch them.
    @exclusivity(unchecked) private var entries: [Int: Int64] = [:]
    /// (locator, hash) in the order the uids were seen; entries before `head` are forgotten.
    @exclusivity(unchecked) private var order: [(locator: Int64, key: Int)] = []
    @exclusivity(unchecked) private var head = 0

    init(user: String) {
        self.user = user
    }

    /// How many uids the index covers.
    var count: Int { order.count - head }

    /// Where the uid whose hash is `key` (``SeenKey/key``) may be stored, nil when no uid of the set
    /// has that hash.
    func candidate(forKey key: Int) -> Int64? { entries[key] }

    /// Adds the uid whose hash is `key`, stored at `locator` (after every uid added before).
    func append(locator: Int64, key: Int) {
        entries[key] = locator
        order.append((locator, key))
    }

    /// Forgets the oldest uids down to `keep` (at least 1) once the set holds `keep + slack` or
    /// more; returns the locator of the oldest uid kept (the caller deletes the chunks before it and
    /// records where the user's uids now start), nil when it forgot nothing.
    func dropOldest(keeping keep: Int, slack: Int) -> Int64? {
        let excess = count - max(1, keep)
        guard excess > 0, excess > slack else { return nil }
        for index in head ..< head + excess {
            let (locator, hash) = order[index]
            // One hash lookup a uid; a newer uid with the same hash took the entry over: it goes back.
            if let newer = entries.removeValue(forKey: hash), newer != locator { entries[hash] = newer }
        }
        head += excess
        let oldestKept = order[head].locator
        // Compact once half the array is forgotten entries: amortised O(1) per uid.
        if head > order.count / 2 {
            order.removeFirst(head)
            head = 0
        }
        return oldestKept
    }

    /// SipHash keyed with this process's random seed.
    @Sendable static func processKey(_ uid: String) -> Int {
        var hasher = Hasher()
        hasher.combine(uid)
        return hasher.finalize()
    }
}

/// The bytes of one row of `seen_chunk` (schema 8): the uids a fold (or one `markSeen`) added for
/// one user, in the order they were seen, each as its UTF-8 length (LEB128, 1 byte under 128) and
/// its UTF-8 bytes. A uid is found again by its locator: the chunk's id and the entry's offset.
enum SeenChunk {
    /// A chunk's id (the row's rowid) in the high 32 bits, an entry's byte offset in the low 32.
    typealias Locator = Int64

    /// A fold starts a new chunk once the one it writes holds this many bytes (a locator's offset
    /// stays far below 2^32; a row stays well under SQLite's limit).
    static let maxBytes = 1 << 22

    static func locator(chunk: Int64, offset: Int) -> Locator { chunk << 32 | Int64(offset) }
    static func chunk(of locator: Locator) -> Int64 { locator >> 32 }
    static func offset(of locator: Locator) -> Int { Int(locator & 0xFFFF_FFFF) }

    /// Appends `uid`'s entry to `chunk`.
    static func append(_ uid: String, to chunk: inout [UInt8]) {
        var uid = uid
        uid.withUTF8 { bytes in
            var length = bytes.count
            while length >= 0x80 {
                chunk.append(UInt8(truncatingIfNeeded: length) | 0x80)
                length >>= 7
            }
            chunk.append(UInt8(truncatingIfNeeded: length))
            chunk.append(contentsOf: bytes)
        }
    }

    /// `uid`'s entry alone (what a locator's bytes are compared with).
    static func entry(_ uid: String) -> [UInt8] {
        var bytes: [UInt8] = []
        append(uid, to: &bytes)
        return bytes
    }

    /// Where an entry stops making sense: its byte offset in the chunk.
    struct Damage: Error {
        let offset: Int
    }

    /// Calls `body` with the offset and the UTF-8 bytes of each entry of `chunk` from byte `start`
    /// on (an entry's start, or the chunk's end), in order. Throws at an entry whose length is not
    /// a valid LEB128 number or runs past the chunk's end, before calling `body` for it.
    static func forEach(_ chunk: UnsafeRawBufferPointer, from start: Int,
                        _ body: (Int, UnsafeRawBufferPointer) throws -> Void) throws {
        guard start >= 0, start <= chunk.count else { throw Damage(offset: start) }
        var at = start
        while at < chunk.count {
            let entryStart = at
            var length = 0
            var shift = 0
            while true {
                guard at < chunk.count, shift <= 28 else { throw Damage(offset: entryStart) }
                let byte = chunk[at]
                at += 1
                length |= Int(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            guard length <= chunk.count - at else { throw Damage(offset: entryStart) }
            try body(entryStart, UnsafeRawBufferPointer(rebasing: chunk[at ..< at + length]))
            at += length
        }
    }
}
