#!/usr/bin/env python3
"""Where the store's time per engagement goes, outside the daemon: the same SQL the daemon's
store runs for one engagement (SmarticoStore.appendEngagement: insertSeen with its pruning
DELETE … OFFSET seenPerUser, then append: last_seq, INSERT journal, UPDATE meta, retention),
one transaction per event, in WAL mode, on a file in a temporary directory (same file
system as the benchmark's state_dir). Prints CPU (user+system) and wall time per event for
synchronous=FULL and OFF, with and without the seen-pruning statement.

    python3 Benchmarks/scripts/journal-cost.py [events]

Python's own per-statement overhead (a few µs) is included; the figures are for attribution,
not a benchmark of SQLite.
"""
import os, resource, sqlite3, sys, tempfile, time, uuid

EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
SEEN_PER_USER = 10_000
RETENTION = 10_000
DATA = b'{"message":' + b'x' * 4200 + b'}'

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('last_seq', 0);
CREATE TABLE journal(seq INTEGER PRIMARY KEY, name TEXT NOT NULL, ts_ms INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX journal_ts ON journal(ts_ms);
CREATE TABLE seen(id INTEGER PRIMARY KEY, user TEXT NOT NULL, uid TEXT NOT NULL, UNIQUE (user, uid));
CREATE INDEX seen_user_id ON seen(user, id);
"""

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

def run(sync, prune, prefill):
    d = tempfile.mkdtemp(prefix="jcost.")
    db = sqlite3.connect(os.path.join(d, "store.sqlite"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {sync}")
    db.execute("PRAGMA journal_size_limit = 4194304")
    db.executescript(SCHEMA)
    db.execute("BEGIN")
    for i in range(prefill):  # the state a long-running daemon reaches: seen and journal full
        db.execute("INSERT INTO seen(user, uid) VALUES (?, ?)", ("u", str(uuid.uuid4())))
        db.execute("INSERT INTO journal(seq, name, ts_ms, data) VALUES (?, 'engagement', ?, ?)", (i + 1, 1_700_000_000_000 + i, DATA))
    db.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (prefill,))
    db.execute("COMMIT")
    c0, t0 = cpu(), time.monotonic()
    now = 1_700_000_100_000
    for i in range(EVENTS):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO seen(user, uid) VALUES (?, ?) ON CONFLICT(user, uid) DO NOTHING", ("u", str(uuid.uuid4())))
        if prune:
            db.execute("DELETE FROM seen WHERE user = ?1 AND id <= (SELECT id FROM seen WHERE user = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                       ("u", SEEN_PER_USER))
        seq = db.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0] + 1
        db.execute("INSERT INTO journal(seq, name, ts_ms, data) VALUES (?, ?, ?, ?)", (seq, "engagement", now + i, DATA))
        db.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (seq,))
        last = db.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0]
        if last > RETENTION:
            db.execute("DELETE FROM journal WHERE seq <= ?", (last - RETENTION,))
        db.execute("DELETE FROM journal WHERE ts_ms < ?", (now + i - 168 * 3_600_000,))
        db.execute("COMMIT")
    c1, t1 = cpu(), time.monotonic()
    db.close()
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)
    return (c1 - c0) * 1e6 / EVENTS, (t1 - t0) * 1e6 / EVENTS

print(f"{EVENTS} engagements, one transaction each, seen and journal pre-filled to 10,000 rows")
print("synchronous  seen pruning  CPU µs/event  wall µs/event")
for sync in ("FULL", "OFF"):
    for prune in (True, False):
        c, w = run(sync, prune, 10_000)
        print(f"{sync:11}  {'yes' if prune else 'no':12}  {c:12.0f}  {w:13.0f}")
