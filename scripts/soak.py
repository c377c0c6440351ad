#!/usr/bin/env python3
"""Soak test of smarticod's memory (issue 5): not run by CI.

Starts smartico-sim pushing engagements (110) every --every seconds (default 0.1: ten
per second), starts smarticod against it with a generated config in a temporary
directory, identifies a user, subscribes on the local socket and reads every event,
and samples the daemon's resident memory (VmRSS) every --sample seconds for
--duration seconds (default one hour). Prints one line per sample (RSS, the daemon's
CPU seconds, events so far) and a summary: start, end and maximum RSS, events received.

Usage (from the repository root, after `swift build -c release`):
    python3 scripts/soak.py                    # one hour, ten engagements per second
    python3 scripts/soak.py --duration 300     # five minutes
Exit status: 0 when the run completed with the daemon alive and events flowing;
1 otherwise. Python 3 standard library only.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds (default 3600)")
    ap.add_argument("--every", type=float, default=0.1, help="seconds between engagements (default 0.1)")
    ap.add_argument("--sample", type=float, default=60.0, help="seconds between RSS samples (default 60)")
    ap.add_argument("--bin", default=".build/release", help="directory holding smarticod and smartico-sim")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="smarticod-soak-")
    sim = subprocess.Popen(
        [os.path.join(args.bin, "smartico-sim"), "--port", "0", "--emit-every", f"{int(args.every * 1000)}ms",
         "--emit-kinds", "engagement", "--control", os.path.join(work, "sim.sock")],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "sim.log"), "wb"), text=True)
    port = sim.stdout.readline().strip()
    ws_url = sim.stdout.readline().strip()
    if not port.isdigit():
        print(f"smartico-sim did not print its port (got {port!r}); see {work}/sim.log", file=sys.stderr)
        return 1
    sock_path = os.path.join(work, "smarticod.sock")
    config = {
        "server": {"url": ws_url, "label_key": "00000000-0000-0000-0000-000000000000-2"},
        "socket": {"path": sock_path},
        "state_dir": os.path.join(work, "state"),
        "log": {"level": "warning"},
    }
    os.makedirs(config["state_dir"], exist_ok=True)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    daemon = subprocess.Popen([os.path.join(args.bin, "smarticod"), "--config", os.path.join(work, "config.json")],
                              stderr=open(os.path.join(work, "smarticod.log"), "wb"))
    try:
        for _ in range(200):
            if os.path.exists(sock_path):
                break
            time.sleep(0.05)
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect(sock_path)
        reader = peer.makefile("rb")

        def call(request):
            peer.sendall((json.dumps(request) + "\n").encode())
            while True:
                line = json.loads(reader.readline())
                if "event" not in line:
                    return line

        answer = call({"id": 1, "op": "identify", "ext_user_id": "soak-user", "hash": "soak"})
        if not answer.get("ok"):
            print(f"identify failed: {answer}", file=sys.stderr)
            return 1
        call({"id": 2, "op": "subscribe", "types": ["engagement"]})
        peer.setblocking(False)

        events = 0
        pending = b""
        start = time.monotonic()
        next_sample = start
        samples = []
        print(f"{'elapsed_s':>9} {'rss_kib':>8} {'cpu_s':>7} {'events':>8}")
        while True:
            now = time.monotonic()
            if now >= next_sample:
                rss = rss_kib(daemon.pid)
                samples.append(rss)
                print(f"{now - start:9.0f} {rss:8d} {cpu_seconds(daemon.pid):7.1f} {events:8d}", flush=True)
                next_sample += args.sample
                if now - start >= args.duration:
                    break
            if daemon.poll() is not None:
                print(f"smarticod exited with {daemon.returncode}; see {work}/smarticod.log", file=sys.stderr)
                return 1
            try:
                chunk = peer.recv(1 << 16)
                if not chunk:
                    print("the daemon closed the socket", file=sys.stderr)
                    return 1
                pending += chunk
                lines = pending.split(b"\n")
                pending = lines.pop()
                events += sum(1 for line in lines if line and json.loads(line).get("event") == "engagement")
            except BlockingIOError:
                time.sleep(0.05)
        print(f"start RSS {samples[0]} KiB, end RSS {samples[-1]} KiB, max {max(samples)} KiB, "
              f"{events} engagements in {args.duration:.0f} s")
        return 0 if events > 0 else 1
    finally:
        for p in (daemon, sim):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        print(f"(logs and state in {work})")


if __name__ == "__main__":
    sys.exit(main())
