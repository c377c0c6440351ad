#!/usr/bin/env python3
"""Reliability soak of smarticod (issue 30): hours against smartico-sim with faults. Not run by CI.

What it runs (everything in a temporary directory, logs kept there):
- smartico-sim (control socket, --record FILE appended across its restarts, 512-byte templates);
- a TCP fault proxy written here (Python standard library, one selector thread) between the
  daemon and the sim: it can cut every connection, freeze them (stop forwarding, keep them
  open: half-open for both ends), delay every chunk, or refuse new connections;
- smarticod with a generated config: the user "soak-user", state dir in the temp dir, log level
  warning, session.keepalive_s 3 + dead_after_s 3 (a frozen connection is noticed within 6 s),
  reconnect backoff 500 ms … 5 s;
- a durable subscriber ("soak") in a thread, with the real Python client (clients/python:
  run this with a python that has it installed, or it is taken from clients/python/src):
  subscribe(types=["engagement"], durable="soak", follow=True, auto_ack=True); for each
  engagement it reports an impression (client.report, retried while the daemon is away).
- a generator thread asking the sim (control op emit, kind engagement, to the user) for one
  engagement every 1-2 s, and a burst of --burst (default 50) every --burst-every s (default 120).

Faults, one every --fault-every seconds (default 180), in turn (--faults selects them):
  proxy_cut      every proxied connection closed at once (both sides)
  proxy_freeze   every open connection frozen for keepalive+dead_after+4 s (10 s), then closed
                 (new connections pass): the daemon must notice the silence and reconnect
  proxy_delay    every chunk held 1000 ms, both ways, for 30 s
  proxy_refuse   every connection cut, new ones refused (accepted and closed) for 15 s
  sim_kill       smartico-sim SIGKILL, restarted on the same port 2 s later
  daemon_term    smarticod SIGTERM, waited for, restarted
  daemon_kill    smarticod SIGKILL, restarted
  sub_reconnect  the subscriber's socket shut down under it (the client's follow path), or, every
                 other time, the app closes its subscription cleanly and subscribes again with a
                 new Client (an app restart)

Sent, delivered, and the rule for a sim kill:
- Sent = every engagement_uid the sim reports in its emit answer (delivered to a connection, or
  queued pending for the user). The sim keeps undelivered engagements only in memory, so a
  SIGKILL of the sim loses what it holds; that loss is the server's, not the daemon's. The rule
  here: the generator is paused and the sim is killed only once every sent uid has been handed
  to the app; if that does not happen within 120 s the kill is skipped (counted as
  sim_kill_skipped) and the run goes on. So every sent uid must be delivered.
- The generator emits only while the sim holds at most one connection for the user: an emit to
  a stale connection (one frozen at the proxy and not yet dropped by the sim) stays pending until
  the user's next IDENTIFY, which is the server's delivery model, not a daemon loss. Skipped
  ticks are counted (emits_deferred).
- Delivered = engagements handed out by the client's subscription (counted per uid). The client
  drops journal seqs it already handed out (replays after a reconnect); the raw lines it read
  from the daemon are counted separately (raw_dups is informational: replays from the durable
  cursor are expected there).
- At the end the generator stops and the run drains (up to --drain s, default 120) until every
  sent uid is delivered and every delivered uid's impression (cid 103) is in the sim's record.
  If uids are still undelivered and the sim lists them as pending for the user (sent to a
  connection that died), the proxy cuts once more (one more IDENTIFY) and drains again; the
  summary says when that happened (final_reconnect).

Checks (exit status 1 when any fails): sent == delivered as sets, no uid handed out twice, no
unknown uid, every delivered uid's 103 recorded by the sim, nothing left pending at the sim,
smarticod never exited unasked, and no leak within one daemon lifetime (fds growing by 20 or
more, or RSS by 64 MiB or more, from its first sample to its last, over lifetimes of >= 10
samples). Output: one sample line a minute (RSS, fds, threads, CPU seconds summed over every
daemon process, counts, faults) and a summary.

Segments (--work DIR, --stop-at HH:MM): on a machine that does not keep processes for the whole
soak (a sandbox that ends every session), run it in segments. Each segment ends at --stop-at
with the same drain and checks as the end of a run, and appends a line to DIR/segments.ndjson;
every uid sent and handed out is appended to DIR/ledger.ndjson as it happens. Running again with
the same --work goes on from there: the same state directory (journal, durable cursor), the
same sim record, elapsed time and fault rotation continuing, sent = delivered and "none twice"
checked over all segments, and a summary across them. --duration is then the total over the
segments. A run that was killed before its drain cannot be continued (it says so): its sim
lost what it held. The boundary between segments is a clean stop of the daemon, the sim and
the app, with nothing outstanding, like a daemon_term fault with the sim restarted.

Usage (from the repository root, after the release build of smarticod and smartico-sim):
    swift build -c release --static-swift-stdlib --disable-local-rpath --build-path .build-release
    source scripts/deps.sh; setup_python_venv
    $SMARTICO_TEST_PYTHON -m pip install ./clients/python
    nice -n 10 $SMARTICO_TEST_PYTHON scripts/soak.py                        # six hours
    nice -n 10 $SMARTICO_TEST_PYTHON scripts/soak.py --duration 300 --fault-every 30
    $SMARTICO_TEST_PYTHON scripts/soak.py --duration 3600 --faults none --every 0.1 --burst 0 \
        --template-bytes 2048                    # the memory soak: ten 2 KB engagements a second
    nice -n 10 $SMARTICO_TEST_PYTHON scripts/soak.py --work /var/tmp/soak --stop-at 10:55  # a segment
    nice -n 10 $SMARTICO_TEST_PYTHON scripts/soak.py --work /var/tmp/soak                  # the next one
--bin defaults to .build-release/release (scripts/package.sh's build), else .build/release.
Python 3 standard library plus the client library in clients/python.
"""
import argparse
import calendar
import collections
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
try:
    import smarticod  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))
from smarticod import Client, DaemonUnavailable, SmarticoError  # noqa: E402

USER = "soak-user"
LABEL_KEY = "00000000-0000-0000-0000-000000000000-2"
KEEPALIVE_S = 3
DEAD_AFTER_S = 3
ALL_FAULTS = ["proxy_cut", "proxy_freeze", "sim_kill", "daemon_term", "proxy_delay",
              "daemon_kill", "sub_reconnect", "proxy_refuse"]


def log(msg):
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} {msg}", flush=True)


# -- /proc ---------------------------------------------------------------------------------

def proc_status(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# -- the fault proxy -----------------------------------------------------------------------

class FaultProxy:
    """127.0.0.1:port → upstream port. Modes: pass, delay (ms per chunk), refuse (new
    connections accepted and closed). freeze() stops forwarding on the connections open now
    (they stay open, nothing is read or written) until unfreeze(), which closes them."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.mode = "pass"
        self.delay_s = 0.0
        self.pairs = []  # dicts: a (client side), b (upstream), qa2b, qb2a (deque of (due, bytes)), frozen
        self.accepted = 0
        self.accept_times = []  # monotonic time of each connection forwarded
        self.refused = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, name="proxy", daemon=True)
        self.thread.start()

    def _close_pair(self, p):
        for s in (p["a"], p["b"]):
            try:
                s.close()
            except OSError:
                pass
        if p in self.pairs:
            self.pairs.remove(p)

    def cut(self):
        with self.lock:
            for p in list(self.pairs):
                self._close_pair(p)

    def freeze(self):
        with self.lock:
            for p in self.pairs:
                p["frozen"] = True
            return len(self.pairs)

    def unfreeze(self):
        with self.lock:
            for p in list(self.pairs):
                if p["frozen"]:
                    self._close_pair(p)

    def set_mode(self, mode, delay_ms=0):
        with self.lock:
            self.mode = mode
            self.delay_s = delay_ms / 1000.0

    def _accept(self):
        try:
            a, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if self.mode == "refuse":
            self.refused += 1
            a.close()
            return
        try:
            b = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=2)
        except OSError:
            a.close()
            return
        for s in (a, b):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.accepted += 1
        self.accept_times.append(time.monotonic())
        self.pairs.append({"a": a, "b": b, "qa2b": collections.deque(), "qb2a": collections.deque(),
                           "frozen": False})

    def run(self):
        while not self.stop:
            with self.lock:
                now = time.monotonic()
                rlist, wlist, owner = [self.listener], [], {}
                for p in self.pairs:
                    if p["frozen"]:
                        continue
                    for src, dst, q in ((p["a"], p["b"], p["qa2b"]), (p["b"], p["a"], p["qb2a"])):
                        owner[src] = p
                        if len(q) < 64:
                            rlist.append(src)
                        if q and q[0][0] <= now:
                            wlist.append(dst)
                            owner[dst] = p
            try:
                r, w, _ = select.select(rlist, wlist, [], 0.02)
            except (OSError, ValueError):
                continue  # a socket closed by cut() under us
            with self.lock:
                if self.listener in r:
                    self._accept()
                now = time.monotonic()
                for s in w:
                    p = owner.get(s)
                    if p is None or p not in self.pairs or p["frozen"]:
                        continue
                    q = p["qb2a"] if s is p["a"] else p["qa2b"]
                    try:
                        while q and q[0][0] <= now:
                            due, data = q[0]
                            n = s.send(data)
                            if n < len(data):
                                q[0] = (due, data[n:])
                                break
                            q.popleft()
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        self._close_pair(p)
                for s in r:
                    if s is self.listener:
                        continue
                    p = owner.get(s)
                    if p is None or p not in self.pairs or p["frozen"]:
                        continue
                    q = p["qa2b"] if s is p["a"] else p["qb2a"]
                    try:
                        data = s.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        self._close_pair(p)  # one end closed: close the other (no half-close)
                        continue
                    q.append((now + self.delay_s, data))


# -- simulator control ----------------------------------------------------------------------

def control(path, request, timeout=10.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise OSError("control socket closed")
            buf += chunk
        return json.loads(buf)
    finally:
        s.close()


# -- the soak -------------------------------------------------------------------------------

class Soak:
    def __init__(self, args):
        self.args = args
        if args.work:
            self.work = os.path.abspath(args.work)
            os.makedirs(self.work, exist_ok=True)
        else:
            self.work = tempfile.mkdtemp(prefix="smarticod-soak-")
        self.sim_sock = os.path.join(self.work, "sim.sock")
        self.record = os.path.join(self.work, "sim-record.ndjson")
        self.sock_path = os.path.join(self.work, "smarticod.sock")
        self.config_path = os.path.join(self.work, "config.json")
        self.lock = threading.Lock()
        self.sent = {}                           # uid → monotonic time sent
        self.handed = collections.Counter()      # uid → times handed out by the client
        self.raw = collections.Counter()         # uid → engagement lines read from the daemon
        self.reports_failed = 0
        self.emit_errors = 0
        self.emits_deferred = 0
        self.emits_multi = 0
        self.bursts = 0
        self.gen_paused = False
        self.gen_lock = threading.Lock()
        self.stop_gen = False
        self.stop_sub = False
        self.sub_restart = False
        self.sub_client = None
        self.sub_reconnects = 0
        self.app_restarts = 0
        self.sub_errors = []
        self.faults = collections.Counter()
        self.recovery = collections.defaultdict(list)  # fault → seconds to the next connection
        self.sim_restarts_before = 0
        self.sim_kill_skipped = 0
        self.daemon_deaths = []                  # unasked exits: (elapsed, returncode)
        self.daemon_restarts = 0
        self.sim_restarts = 0
        self.cpu_by_pid = {}
        self.lifetimes = collections.defaultdict(list)  # pid → [(rss, fds)]
        self.samples = []
        self.sim = None
        self.daemon = None
        self.daemon_expected_exit = False
        self.sim_port = 0
        self.final_reconnect = 0
        # Segments (--work DIR again after a run that ended at --stop-at, or was killed after
        # finishing): the ledger of every uid sent and handed out, appended as it happens, and one
        # line per finished segment. A resumed run loads both, so sent = delivered and "none twice"
        # are checked across all segments, and its elapsed time goes on from theirs.
        self.ledger_path = os.path.join(self.work, "ledger.ndjson")
        self.segments_path = os.path.join(self.work, "segments.ndjson")
        self.segments = []
        self.fault_index = 0
        elapsed_before = 0.0
        if os.path.exists(self.segments_path):
            with open(self.segments_path) as f:
                self.segments = [json.loads(line) for line in f if line.strip()]
        if self.segments:
            last = self.segments[-1]
            elapsed_before = last["elapsed_end_s"]
            self.fault_index = last["fault_index"]
            if os.path.getsize(self.ledger_path) != last["ledger_bytes"]:
                raise SystemExit(f"{self.work}: the ledger goes on past segment {last['segment']}: a later run did not "
                                 "finish (killed before its drain), so sent/delivered cannot be continued; use a new --work")
            with open(self.ledger_path) as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a kill
                    if "sent" in entry:
                        self.sent[entry["sent"]] = 0.0
                    elif "handed" in entry:
                        self.handed[entry["handed"]] += 1
        elif os.path.exists(self.ledger_path) and os.path.getsize(self.ledger_path) > 0:
            raise SystemExit(f"{self.work} holds a ledger but no finished segment: that run did not finish "
                             "(killed before its drain), so its sent/delivered cannot be continued; use a new --work")
        self.resumed = bool(self.segments)
        self.ledger = open(self.ledger_path, "a")
        self.start = time.monotonic() - elapsed_before
        self.segment_start = time.monotonic()

    # processes
    def binary(self, name):
        return os.path.join(self.args.bin, name)

    def start_sim(self):
        try:
            os.unlink(self.sim_sock)
        except FileNotFoundError:
            pass
        for attempt in range(20):
            sim = subprocess.Popen(
                [self.binary("smartico-sim"), "--port", str(self.sim_port), "--control", self.sim_sock,
                 "--record", self.record, "--template-bytes", str(self.args.template_bytes), "--ping-interval", "10s",
                 "--pong-timeout", "5s"],
                stdout=subprocess.PIPE, stderr=open(os.path.join(self.work, "sim.log"), "ab"), text=True)
            port = sim.stdout.readline().strip()
            if port.isdigit():
                sim.stdout.readline()
                sim.stdout.readline()
                self.sim_port = int(port)
                self.sim = sim
                return
            sim.wait(5)
            time.sleep(0.5)
        raise RuntimeError(f"smartico-sim did not start on port {self.sim_port}; see {self.work}/sim.log")

    def write_config(self, proxy_port):
        config = {
            "server": {"url": f"ws://127.0.0.1:{proxy_port}/websocket/services", "label_key": LABEL_KEY},
            "socket": {"path": self.sock_path},
            "state_dir": os.path.join(self.work, "state"),
            "log": {"level": "warning"},
            "user": {"ext_user_id": USER, "hash": "soak"},
            "session": {"keepalive_s": KEEPALIVE_S, "dead_after_s": DEAD_AFTER_S,
                        "reconnect": {"initial_ms": 500, "max_ms": 5000}},
        }
        os.makedirs(config["state_dir"], mode=0o700, exist_ok=True)  # smarticod refuses one others may write
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=1)

    def start_daemon(self):
        self.daemon = subprocess.Popen([self.binary("smarticod"), "--config", self.config_path],
                                       stdout=subprocess.DEVNULL,
                                       stderr=open(os.path.join(self.work, "smarticod.log"), "ab"))
        self.daemon_expected_exit = False
        for _ in range(200):
            if os.path.exists(self.sock_path):
                break
            time.sleep(0.05)

    def note_cpu(self, proc):
        if proc is not None:
            c = cpu_seconds(proc.pid)
            if c is not None:
                self.cpu_by_pid[proc.pid] = c

    def stop_daemon(self, sig):
        self.note_cpu(self.daemon)
        self.daemon_expected_exit = True
        self.daemon.send_signal(sig)
        try:
            self.daemon.wait(20)
        except subprocess.TimeoutExpired:
            log("smarticod did not stop within 20 s of SIGTERM: SIGKILL")
            self.daemon_deaths.append((self.elapsed(), "did not stop within 20 s of SIGTERM"))
            self.daemon.kill()
            self.daemon.wait(5)
        return self.daemon.returncode

    def elapsed(self):
        return time.monotonic() - self.start

    # generator
    def user_connections(self):
        answer = control(self.sim_sock, {"op": "clients"})
        return sum(1 for c in answer.get("clients", []) if c.get("user") == USER and c.get("state") != "closed")

    def emit(self, count):
        if self.user_connections() > 1:
            self.emits_deferred += 1
            return
        answer = control(self.sim_sock, {"op": "emit", "kind": "engagement", "user": USER, "count": count,
                                         "bodies": False})
        if not answer.get("ok"):
            raise OSError(f"emit refused: {answer}")
        uids = [d.get("engagement_uid") for d in answer.get("deliveries", [])]
        uids += [(q.get("message") or q).get("engagement_uid") for q in answer.get("queued_pending", [])]
        uids = [u for u in uids if u]
        if len(answer.get("deliveries", [])) > count:
            self.emits_multi += 1
        now = time.monotonic()
        with self.lock:
            for u in uids:
                self.sent[u] = now
                self.ledger.write(json.dumps({"sent": u}) + "\n")
            self.ledger.flush()

    def generator(self):
        next_burst = time.monotonic() + self.args.burst_every
        while not self.stop_gen:
            time.sleep(self.args.every if self.args.every else random.uniform(1.0, 2.0))
            with self.gen_lock:
                if self.gen_paused or self.stop_gen:
                    continue
                count = 1
                if self.args.burst > 0 and time.monotonic() >= next_burst:
                    count = self.args.burst
                    next_burst = time.monotonic() + self.args.burst_every
                    self.bursts += 1
                try:
                    self.emit(count)
                except (OSError, ValueError) as error:
                    self.emit_errors += 1
                    log(f"emit failed: {error}")

    # subscriber
    def subscriber(self):
        first = not self.resumed  # a resumed run goes on from the durable cursor
        soak = self

        class CountingDeque(collections.deque):
            def append(self, value):
                if value.get("event") == "engagement":
                    message = (value.get("data") or {}).get("message") or {}
                    uid = message.get("engagement_uid")
                    if uid:
                        with soak.lock:
                            soak.raw[str(uid)] += 1
                super().append(value)

        while not self.stop_sub:
            client = Client(self.sock_path, timeout=30, connect=False)
            client._events = CountingDeque()  # counts the lines read, before the client's seq filter
            self.sub_client = client
            try:
                with client.subscribe(types=["engagement"], durable="soak", since=0 if first else None,
                                      follow=True, auto_ack=True, max_retry_delay=1.0) as events:
                    first = False
                    while not self.stop_sub and not self.sub_restart:
                        event = events.get(timeout=0.5)
                        if event is None or event.name != "engagement":
                            continue
                        uid = event.engagement_uid
                        with self.lock:
                            self.handed[uid] += 1
                            self.ledger.write(json.dumps({"handed": uid}) + "\n")
                            self.ledger.flush()
                        while not self.stop_sub:
                            try:
                                client.report("impression", event)
                                break
                            except DaemonUnavailable:
                                time.sleep(0.3)
                            except SmarticoError as error:
                                self.reports_failed += 1
                                log(f"report of {uid} failed: {error!r}; retrying")
                                time.sleep(1.0)
                    self.sub_reconnects += events.reconnects
            except Exception as error:  # noqa: BLE001 — recorded, counted as a failure
                self.sub_errors.append(repr(error))
                log(f"subscriber error: {error!r}")
                time.sleep(1.0)
            finally:
                self.sub_client = None
                client.close()
            if self.sub_restart:
                self.sub_restart = False
                self.app_restarts += 1

    # sim record
    def read_record(self):
        reported = collections.Counter()
        inits = 0
        try:
            with open(self.record, "rb") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a SIGKILL
                    message = entry.get("message") or {}
                    if message.get("cid") == 103 and entry.get("user") == USER:
                        reported[str(message.get("engagement_uid"))] += 1
                    elif message.get("cid") == 3:
                        inits += 1
        except FileNotFoundError:
            pass
        return reported, inits

    def outstanding(self):
        with self.lock:
            return [u for u in self.sent if self.handed[u] == 0]

    def wait_delivered(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.outstanding():
                return True
            time.sleep(0.5)
        return not self.outstanding()

    # faults
    def reconnected_after(self, t0, timeout=60.0):
        """Seconds from t0 to the daemon's first new connection through the proxy (None: none
        within timeout of now)."""
        deadline = time.monotonic() + timeout
        while True:
            times = [t for t in self.proxy.accept_times if t > t0]
            if times:
                return times[0] - t0
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def fault(self, kind):
        log(f"fault {kind}")
        t0 = time.monotonic()
        accepted = self.proxy.accepted
        self.fault_action(kind)
        self.faults[kind] += 1
        if kind == "proxy_delay":
            self.recovery[kind].append(self.proxy.accepted - accepted)
            log(f"  new connections during the delay: {self.proxy.accepted - accepted}")
        elif kind != "sub_reconnect" and not (kind == "sim_kill" and self.sim_restarts == self.sim_restarts_before):
            after = self.reconnected_after(t0)
            self.recovery[kind].append(after)
            log(f"  the daemon connected again {after if after is None else round(after, 2)} s after the fault began")

    def fault_action(self, kind):
        self.sim_restarts_before = self.sim_restarts
        if kind == "proxy_cut":
            self.proxy.cut()
        elif kind == "proxy_freeze":
            n = self.proxy.freeze()
            time.sleep(KEEPALIVE_S + DEAD_AFTER_S + 4)
            self.proxy.unfreeze()
            log(f"  froze {n} connection(s) for {KEEPALIVE_S + DEAD_AFTER_S + 4} s")
        elif kind == "proxy_delay":
            self.proxy.set_mode("delay", 1000)
            time.sleep(30)
            self.proxy.set_mode("pass")
        elif kind == "proxy_refuse":
            self.proxy.set_mode("refuse")
            self.proxy.cut()
            time.sleep(15)
            self.proxy.set_mode("pass")
        elif kind == "sim_kill":
            with self.gen_lock:
                self.gen_paused = True
            try:
                if not self.wait_delivered(120):
                    self.sim_kill_skipped += 1
                    log(f"  sim kill skipped: {len(self.outstanding())} sent uid(s) not delivered after 120 s")
                    return
                self.sim.kill()
                self.sim.wait(5)
                time.sleep(2)
                self.start_sim()
                self.sim_restarts += 1
            finally:
                with self.gen_lock:
                    self.gen_paused = False
        elif kind in ("daemon_term", "daemon_kill"):
            code = self.stop_daemon(signal.SIGTERM if kind == "daemon_term" else signal.SIGKILL)
            if kind == "daemon_term" and code != 0:
                log(f"  smarticod exited {code} after SIGTERM")
                self.daemon_deaths.append((self.elapsed(), f"exit {code} after SIGTERM"))
            time.sleep(1)
            self.start_daemon()
            self.daemon_restarts += 1
        elif kind == "sub_reconnect":
            if self.faults[kind] % 2 == 0:
                client = self.sub_client
                sock = client._sock if client is not None else None
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            else:
                self.sub_restart = True

    # sampling
    def sample(self):
        pid = self.daemon.pid
        rss = proc_status(pid, "VmRSS")
        fds = fd_count(pid)
        threads = proc_status(pid, "Threads")
        self.note_cpu(self.daemon)
        if rss >= 0:
            self.lifetimes[pid].append((rss, fds))
        with self.lock:
            sent, delivered = len(self.sent), sum(1 for u in self.sent if self.handed[u] > 0)
            dups = sum(1 for c in self.handed.values() if c > 1)
            raw_dups = sum(c - 1 for c in self.raw.values() if c > 1)
        cpu = sum(self.cpu_by_pid.values())
        row = {"elapsed": self.elapsed(), "pid": pid, "rss": rss, "fds": fds, "threads": threads, "cpu": cpu,
               "sent": sent, "delivered": delivered, "dups": dups, "raw_dups": raw_dups}
        self.samples.append(row)
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} {row['elapsed']:7.0f} {pid:7d} {rss:8d} {fds:4d} "
              f"{threads:4d} {cpu:7.1f} {sent:7d} {delivered:7d} {sent - delivered:6d} {dups:4d} {raw_dups:5d} "
              f"{sum(self.faults.values()):4d}", flush=True)

    def check_daemon(self):
        if self.daemon.poll() is not None and not self.daemon_expected_exit:
            code = self.daemon.returncode
            log(f"smarticod exited by itself with {code}; restarting it (see {self.work}/smarticod.log)")
            self.daemon_deaths.append((self.elapsed(), f"exit {code}"))
            self.start_daemon()
            self.daemon_restarts += 1
        if self.sim.poll() is not None:
            log(f"smartico-sim exited by itself with {self.sim.returncode}; restarting it")
            self.start_sim()
            self.sim_restarts += 1

    def run(self):
        a = self.args
        if self.resumed:
            log(f"resuming after segment {len(self.segments)} at {self.elapsed():.0f} s: "
                f"{len(self.sent)} sent, {sum(self.handed.values())} handed out so far")
        log(f"soak: {a.duration:.0f} s, a fault every {a.fault_every:.0f} s ({', '.join(a.faults) or 'none'}), "
            f"binaries {a.bin}, work dir {self.work}")
        self.start_sim()
        self.proxy = FaultProxy(self.sim_port)
        self.write_config(self.proxy.port)
        self.start_daemon()
        sub = threading.Thread(target=self.subscriber, name="subscriber", daemon=True)
        sub.start()
        time.sleep(2)  # the durable name exists before the first emit (since=0 covers it anyway)
        gen = threading.Thread(target=self.generator, name="generator", daemon=True)
        gen.start()
        print(f"{'time':8} {'elapsed':>7} {'pid':>7} {'rss_kib':>8} {'fds':>4} {'thr':>4} {'cpu_s':>7} "
              f"{'sent':>7} {'deliv':>7} {'outst':>6} {'dups':>4} {'rawdp':>5} {'flts':>4}", flush=True)
        next_sample = time.monotonic()
        next_fault = time.monotonic() + a.fault_every if a.faults else float("inf")
        index = self.fault_index
        end = self.start + a.duration
        if a.stop_at is not None:
            end = min(end, time.monotonic() + max(0.0, a.stop_at - time.time()))
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                self.sample()
                next_sample += a.sample
            if now >= next_fault:
                self.fault(a.faults[index % len(a.faults)])
                index += 1
                next_fault = time.monotonic() + a.fault_every
            self.check_daemon()
            time.sleep(0.5)
        self.fault_index = index
        return self.finish(gen, sub)

    def drain(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_daemon()
            reported, _ = self.read_record()
            with self.lock:
                missing = [u for u in self.sent if self.handed[u] == 0]
                unreported = [u for u in self.handed if reported[u] == 0]
            if not missing and not unreported:
                return True
            time.sleep(1)
        return False

    def finish(self, gen, sub):
        log("stopping the generator; draining")
        self.stop_gen = True
        gen.join(10)
        self.proxy.set_mode("pass")
        drain_start = time.monotonic()
        drained = self.drain(self.args.drain)
        if not drained:
            pending = control(self.sim_sock, {"op": "pending", "user": USER}).get("engagements", [])
            pending_uids = {p.get("engagement_uid") for p in pending}
            if pending_uids & set(self.outstanding()):
                log(f"{len(pending_uids)} engagement(s) pending at the sim: one more reconnect (proxy cut)")
                self.final_reconnect = 1
                self.proxy.cut()
                drained = self.drain(60)
        time.sleep(5)  # quiet: anything handed out twice late shows up
        drain_s = time.monotonic() - drain_start
        self.sample()
        final_pending = len(control(self.sim_sock, {"op": "pending", "user": USER}).get("engagements", []))
        try:
            status = Client(self.sock_path, timeout=10).status()
        except SmarticoError as error:
            status = {"error": repr(error)}
        self.stop_sub = True
        sub.join(15)
        self.note_cpu(self.daemon)
        reported, inits = self.read_record()

        with self.lock:
            sent = set(self.sent)
            handed = dict(self.handed)
            raw = dict(self.raw)
        lost = sorted(sent - {u for u, c in handed.items() if c > 0})
        dups = {u: c for u, c in handed.items() if c > 1}
        unknown = sorted(set(handed) - sent)
        unreported = sorted(u for u in handed if reported.get(u, 0) == 0)
        raw_dups = sum(c - 1 for c in raw.values() if c > 1)
        report_dups = sum(c - 1 for c in reported.values() if c > 1)
        leaks = []
        for pid, rows in self.lifetimes.items():
            if len(rows) >= 10:
                d_rss = rows[-1][0] - rows[0][0]
                d_fds = rows[-1][1] - rows[0][1]
                if d_fds >= 20 or d_rss >= 65536:
                    leaks.append(f"pid {pid}: fds {rows[0][1]}→{rows[-1][1]}, RSS {rows[0][0]}→{rows[-1][0]} KiB "
                                 f"over {len(rows)} samples")
        reasons = collections.Counter()
        try:
            with open(os.path.join(self.work, "smarticod.log"), errors="replace") as f:
                for line in f:
                    for word in line.split():
                        if word.startswith("reason="):
                            reasons[word[len("reason="):]] += 1
        except OSError:
            pass
        rss = [s["rss"] for s in self.samples if s["rss"] >= 0]
        fds = [s["fds"] for s in self.samples if s["fds"] >= 0]
        summary = {
            "duration_s": round(self.elapsed()), "drain_s": round(drain_s), "drained": drained,
            "final_reconnect": self.final_reconnect,
            "faults": dict(self.faults), "sim_kill_skipped": self.sim_kill_skipped,
            "reconnected_after_s (max per fault; proxy_delay: new connections)": {
                k: (round(max(v), 2) if None not in v else "none within 60 s") for k, v in self.recovery.items()},
            "sent": len(sent), "delivered": len(sent) - len(lost), "lost": len(lost),
            "handed_out": sum(handed.values()), "duplicates": len(dups), "unknown": len(unknown),
            "raw_duplicate_lines": raw_dups, "bursts": self.bursts,
            "impressions_recorded_by_sim": sum(1 for u in handed if reported.get(u, 0) > 0),
            "impressions_missing_at_sim": len(unreported), "impressions_resent_same_uid": report_dups,
            "pending_at_sim_end": final_pending,
            "sessions_at_sim (INIT count)": inits, "daemon_log_reasons": dict(reasons), "daemon_restarts": self.daemon_restarts,
            "sim_restarts": self.sim_restarts, "subscriber_follow_reconnects": self.sub_reconnects,
            "app_restarts": self.app_restarts, "subscriber_errors": self.sub_errors,
            "proxy_connections": self.proxy.accepted, "proxy_refused": self.proxy.refused,
            "emit_errors": self.emit_errors, "emits_deferred": self.emits_deferred,
            "emits_to_more_than_one_connection": self.emits_multi, "report_errors": self.reports_failed,
            "rss_kib": {"start": rss[0] if rss else None, "max": max(rss) if rss else None,
                        "end": rss[-1] if rss else None},
            "fds": {"start": fds[0] if fds else None, "max": max(fds) if fds else None,
                    "end": fds[-1] if fds else None},
            "daemon_cpu_s": round(sum(self.cpu_by_pid.values()), 1),
            "daemon_unasked_exits": self.daemon_deaths, "leaks": leaks,
            "outbox": (status.get("outbox") if isinstance(status, dict) else None),
        }
        print(json.dumps(summary, indent=1), flush=True)
        failures = []
        if lost:
            failures.append(f"{len(lost)} sent engagement(s) never delivered: {lost[:5]}")
        if dups:
            failures.append(f"{len(dups)} engagement(s) handed out more than once: {list(dups.items())[:5]}")
        if unknown:
            failures.append(f"{len(unknown)} delivered engagement(s) never sent: {unknown[:5]}")
        if unreported:
            failures.append(f"{len(unreported)} impression(s) never reached the sim: {unreported[:5]}")
        if final_pending:
            failures.append(f"{final_pending} engagement(s) still pending at the sim")
        if self.daemon_deaths:
            failures.append(f"smarticod exited unasked: {self.daemon_deaths}")
        if leaks:
            failures.append(f"leak: {leaks}")
        if self.sub_errors:
            failures.append(f"subscriber errors: {self.sub_errors[:3]}")
        segment = {
            "segment": len(self.segments) + 1,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (time.monotonic() - self.segment_start))),
            "ended_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "segment_s": round(time.monotonic() - self.segment_start), "elapsed_end_s": round(self.elapsed()),
            "fault_index": self.fault_index, "faults": dict(self.faults),
            "sent_total": len(sent), "delivered_total": len(sent) - len(lost), "duplicates_total": len(dups),
            "rss_kib": summary["rss_kib"], "rss_kib_min": min(rss) if rss else None, "fds_max": summary["fds"]["max"],
            "daemon_processes": len(self.lifetimes), "daemon_cpu_s": summary["daemon_cpu_s"], "pass": not failures,
        }
        with self.lock:
            self.ledger.flush()
            segment["ledger_bytes"] = os.path.getsize(self.ledger_path)
        with open(self.segments_path, "a") as f:
            f.write(json.dumps(segment) + "\n")
        segments = self.segments + [segment]
        if len(segments) > 1:
            faults = collections.Counter()
            for seg in segments:
                faults.update(seg["faults"])
            rss_max = [seg["rss_kib"]["max"] for seg in segments if seg["rss_kib"]["max"] is not None]
            rss_min = [seg["rss_kib_min"] for seg in segments if seg["rss_kib_min"] is not None]
            cumulative = {
                "segments": [(seg["started_utc"], seg["ended_utc"], seg["pass"]) for seg in segments],
                "soak_s (sum of segments)": sum(seg["segment_s"] for seg in segments),
                "faults": dict(faults), "sent": len(sent), "delivered": len(sent) - len(lost),
                "duplicates": len(dups), "rss_kib": {"min": min(rss_min) if rss_min else None,
                                                     "max": max(rss_max) if rss_max else None},
                "fds_max": max((seg["fds_max"] or 0) for seg in segments),
                "daemon_processes": sum(seg["daemon_processes"] for seg in segments),
                "daemon_cpu_s": round(sum(seg["daemon_cpu_s"] for seg in segments), 1),
            }
            print("across all segments: " + json.dumps(cumulative, indent=1), flush=True)
            earlier = [seg["segment"] for seg in self.segments if not seg["pass"]]
            if earlier:
                failures.append(f"earlier segment(s) failed: {earlier}")
        if self.elapsed() < self.args.duration - 60:
            log(f"segment {segment['segment']} ended at --stop-at, {self.elapsed():.0f} of {self.args.duration:.0f} s; "
                f"go on with: --work {self.work}")
        for f in failures:
            log(f"FAIL: {f}")
        log("PASS" if not failures else f"{len(failures)} check(s) failed")
        return 0 if not failures else 1

    def cleanup(self):
        for p in (self.daemon, self.sim):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
        print(f"(logs, state and the sim's record in {self.work})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=6 * 3600.0, help="seconds (default 21600: six hours)")
    ap.add_argument("--fault-every", type=float, default=180.0, help="seconds between faults (default 180)")
    ap.add_argument("--faults", default=",".join(ALL_FAULTS),
                    help=f"the faults, in turn (default all: {','.join(ALL_FAULTS)}); none: no faults")
    ap.add_argument("--every", type=float, default=0.0,
                    help="seconds between single engagements (default: random, 1 to 2 s)")
    ap.add_argument("--template-bytes", type=int, default=512, help="size of each engagement's template_html (default 512)")
    ap.add_argument("--sample", type=float, default=60.0, help="seconds between samples (default 60)")
    ap.add_argument("--burst", type=int, default=50, help="engagements per burst (default 50; 0: none)")
    ap.add_argument("--burst-every", type=float, default=120.0, help="seconds between bursts (default 120)")
    ap.add_argument("--drain", type=float, default=120.0, help="longest wait at the end (default 120 s)")
    default_bin = ".build-release/release"
    if not os.path.exists(os.path.join(default_bin, "smarticod")):
        default_bin = ".build/release"
    ap.add_argument("--bin", default=default_bin,
                    help="directory holding smarticod and smartico-sim (default .build-release/release, "
                         "scripts/package.sh's build, else .build/release)")
    ap.add_argument("--work", default=None,
                    help="work directory (default: a new temporary one). Given again after a run that finished "
                         "(e.g. at --stop-at), the run goes on from there: same state directory and durable "
                         "cursor, and sent/delivered counted over every segment")
    ap.add_argument("--stop-at", default=None,
                    help="UTC time HH:MM: end this segment there (drain, check, record it) even if --duration "
                         "is not reached; for machines that do not keep processes for the whole soak")
    args = ap.parse_args()
    if args.stop_at is not None:
        try:
            hh, mm = (int(x) for x in args.stop_at.split(":"))
            now = time.time()
            if not (0 <= hh < 24 and 0 <= mm < 60):
                raise ValueError
            at = calendar.timegm(time.gmtime(now)[:3] + (hh, mm, 0))
            if at <= now:
                at += 86400
            args.stop_at = at
        except ValueError:
            ap.error(f"--stop-at {args.stop_at!r}: expected HH:MM (UTC)")
    args.faults = [f for f in args.faults.split(",") if f and f != "none"]
    unknown = [f for f in args.faults if f not in ALL_FAULTS]
    if unknown:
        ap.error(f"unknown faults {unknown}; known: {', '.join(ALL_FAULTS)}")
    for name in ("smarticod", "smartico-sim"):
        if not os.access(os.path.join(args.bin, name), os.X_OK):
            ap.error(f"no {name} in {args.bin}: build it first (see --help)")
    soak = Soak(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    try:
        return soak.run()
    finally:
        soak.cleanup()


if __name__ == "__main__":
    sys.exit(main())
