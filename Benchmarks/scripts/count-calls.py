#!/usr/bin/env python3
"""Counts the daemon's reference-count operations and heap allocations per event, by thread.

Timing a change of a few per cent is beyond this machine (the CPU row moves by ±10 % from one run
to the next), but how often the daemon calls swift_retain, swift_release, malloc and free while it
drains the "maximum rate" row's backlogs does not depend on the machine's mood: it is the work
itself, and two binaries compare exactly. Uses uprobes (perf probe), so it needs root and perf;
the probes slow the daemon ~15× while they count, so the row's timings printed meanwhile mean
nothing.

    cd Benchmarks && swift build -c release
    sudo scripts/count-calls.py ../.build/release/smarticod [OTHER/smarticod ...]

Prints, for each binary, the calls per event on the event loop's thread and the store's (the
row's events: 3,000 at the simulator's pace and three backlogs of 60,000; the handshake's few
messages are counted too and not subtracted).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

EVENTS = 3_000 + 3 * 60_000
PROBES = [("swift_retain", "libswiftCore.so"), ("swift_release", "libswiftCore.so"),
          ("malloc", "libc.so.6"), ("free", "libc.so.6")]


def resolve(binary, name):
    """The path of the shared library `name` that `binary` loads (from ldd)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and m.group(1).startswith(name.split(".so")[0] + ".so"):
            return os.path.realpath(m.group(2))
    sys.exit(f"count-calls: {binary} does not load {name} (a static build cannot be probed this way)")


def ensure_probes(binary):
    events = []
    existing = subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout
    for symbol, lib in PROBES:
        path = resolve(binary, lib)
        group = "probe_" + re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path).split(".so")[0])
        if f"{group}:{symbol} " not in existing:
            r = subprocess.run(["perf", "probe", "-x", path, symbol], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"count-calls: perf probe -x {path} {symbol} failed: {r.stderr.strip()}")
        events.append(f"{group}:{symbol}")
    return events


def count(bench, binary, events, timeout):
    env = dict(os.environ, SMARTICOD_BIN=binary)
    with tempfile.TemporaryDirectory() as tmp:
        out_path, stat_path = os.path.join(tmp, "bench.out"), os.path.join(tmp, "stat.out")
        with open(out_path, "w") as out:
            bench_proc = subprocess.Popen(["stdbuf", "-oL", bench, "--filter", "maximum rate"], env=env,
                                          stdout=out, stderr=subprocess.STDOUT)
        pid = None
        deadline = time.monotonic() + 60
        while pid is None and time.monotonic() < deadline and bench_proc.poll() is None:
            m = re.search(r"daemon up \(pid (\d+)", open(out_path).read())
            pid = m.group(1) if m else None
            time.sleep(0.05)
        if pid is None:
            bench_proc.kill()
            sys.exit(f"count-calls: the row did not start the daemon:\n{open(out_path).read()}")
        cmd = ["perf", "stat", "--per-thread", "-p", pid, "-o", stat_path]
        for e in events:
            cmd += ["-e", e]
        stat = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            bench_proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            bench_proc.kill()
            stat.kill()
            sys.exit(f"count-calls: the row did not end within {timeout} s")
        stat.send_signal(2)
        stat.wait(timeout=30)
        drained = len(re.findall(r"a backlog drained, 60000 events", open(out_path).read()))
        if drained != 3:
            sys.exit(f"count-calls: {drained} of 3 backlogs drained:\n{open(out_path).read()}")
        counts = {}
        for line in open(stat_path):
            m = re.match(r"\s*(\S+)-(\d+)\s+([\d,]+)\s+(\S+)", line)
            if m:
                # Threads of one name (the main thread and the event loop's are both `smarticod`) add up.
                key = (m.group(1), m.group(4).split(":")[1])
                counts[key] = counts.get(key, 0) + int(m.group(3).replace(",", ""))
        return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "smartico-bench"))
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    events = ensure_probes(args.binaries[0])
    print(f"calls per event ({EVENTS:,} events), by thread: retain / release / malloc / free")
    for binary in args.binaries:
        counts = count(args.bench, binary, events, args.timeout)
        total = 0.0
        for thread in ("smarticod", "smarticod-store"):
            row = [counts.get((thread, s), 0) / EVENTS for s, _ in PROBES]
            total += row[0] + row[1]
            print(f"{binary}  {thread:16} " + " / ".join(f"{v:6.1f}" for v in row))
        print(f"{binary}  reference-count operations on both threads: {total:.1f} an event")


if __name__ == "__main__":
    main()
