"""smartico-wrapper's figures under Xvfb (docs/benchmarks.md, "The wrapper"): emit → READY_TO_BE_SHOWN
latency (cold: the first popup after start; warm: the next ones; the first after a release), PSS
summed over the wrapper and its WebKit processes (before the first popup, with a popup shown, after
release_after_s with nothing on screen), and idle wake-ups per minute. Uses the test rig of Wrapper/tests.
--breakdown N: also where the PSS is with the popup shown, by process and mapped file (the N largest).

    python3 Benchmarks/wrapper/wrapper_bench.py [--warm N] [--cold N] [--idle-seconds S] [--breakdown N]

PSS depends on who runs it: the release's MADV_PAGEOUT drops library pages only for root (the
kernel pages out only files the caller may write), so the line says the uid; run it as another
user with `setpriv --reuid=… --regid=… --clear-groups` (docs/benchmarks.md, "The wrapper").
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Wrapper" / "tests"))
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
from support import Rig, wait_until  # noqa: E402
from test_wrapper import Screen, Wrapper  # noqa: E402


def tree(pid: int) -> list[int]:
    """pid and its descendants (WebKit's web and network processes are the wrapper's children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def pss_mb(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def breakdown(pid: int, top: int) -> list[str]:
    """Each process of the tree: its PSS, and its `top` largest parts by mapped file (anonymous
    memory, the heap and stacks under their own names), from /proc/PID/smaps."""
    lines = []
    for p in tree(pid):
        parts: dict[str, int] = {}
        name = "?"
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
            current = "[anonymous]"
            for line in Path(f"/proc/{p}/smaps").read_text().splitlines():
                fields = line.split()
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    path = " ".join(fields[5:])
                    current = os.path.basename(path) if path.startswith("/") else (path or "[anonymous]")
                elif fields[0] == "Pss:":
                    parts[current] = parts.get(current, 0) + int(fields[1])
        except OSError:
            continue
        largest = sorted(parts.items(), key=lambda kv: -kv[1])[:top]
        lines.append(f"  {name} ({p}) {sum(parts.values()) / 1024:.1f} MB: "
                     + ", ".join(f"{k} {v / 1024:.1f}" for k, v in largest))
    return lines


def switches(pid: int) -> dict[tuple[int, int], int]:
    """Context switches (voluntary + not) of every thread of every process of the tree, by (pid, tid)."""
    n: dict[tuple[int, int], int] = {}
    for p in tree(pid):
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                for line in Path(f"/proc/{p}/task/{tid}/status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        n[(p, int(tid))] = n.get((p, int(tid)), 0) + int(line.split()[1])
        except OSError:
            pass
    return n


def wakeups(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    """Switches between two samples: each thread's growth (a thread born in between counts whole;
    one that ended in between is not seen, so this is a lower bound when the tree changes)."""
    return sum(max(0, v - before.get(k, 0)) for k, v in after.items())


def shown_after(rig: Rig, wrapper: Wrapper, screen: Screen, index: int) -> float:
    """Emits one engagement; seconds until the wrapper logged it on screen (READY_TO_BE_SHOWN)."""
    start = time.monotonic()
    rig.sim.emit_engagement()
    if not wait_until(lambda: len(re.findall(r"popup: on screen", wrapper.log())) >= index, timeout=30, interval=0.005):
        raise RuntimeError("popup not shown: " + wrapper.log()[-2000:])
    elapsed = time.monotonic() - start
    window = wait_until(lambda: screen.visible("^Smartico popup$"), timeout=10)
    close_popup(wrapper, screen, window, index)
    return elapsed


def close_popup(wrapper: Wrapper, screen: Screen, window: str, index: int) -> None:
    """Close (Tab from the focused OK, then Enter), not OK: OK's link would open the widget, which
    would stay on screen and keep WebKit alive. A run where that happened anyway (the keyboard
    focus not yet in the page) is refused rather than reported."""
    screen.xdotool("windowfocus", "--sync", window)
    time.sleep(0.3)
    screen.xdotool("key", "Tab", "Return")
    wait_until(lambda: len(re.findall(r"popup seq \d+ closed", wrapper.log())) >= index, timeout=20)
    if "opening the widget" in wrapper.log():
        raise RuntimeError("a popup's OK was pressed instead of Close: the widget opened; run again")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--idle-seconds", type=int, default=60)
    ap.add_argument("--release-after", type=int, default=60)
    ap.add_argument("--breakdown", type=int, default=0, metavar="N",
                    help="where the PSS is with the popup shown: each process's N largest mapped files")
    a = ap.parse_args()
    where: list[str] = []
    cold, warm = [], []
    for run in range(a.cold):
        rig = Rig(sim_extra=["--http-port", "0"])
        screen = Screen(rig.dir)
        try:
            daemon = rig.start()
            daemon.wait_identified()
            wrapper = Wrapper(screen, daemon.socket_path, {"release_after_s": a.release_after})
            if run == 0:
                time.sleep(3)
                before = pss_mb(wrapper.process.pid)
                s0 = switches(wrapper.process.pid)
                time.sleep(a.idle_seconds)
                idle_rate = wakeups(s0, switches(wrapper.process.pid)) * 60 / a.idle_seconds
            cold.append(shown_after(rig, wrapper, screen, 1))
            if run == 0:
                for i in range(a.warm):
                    warm.append(shown_after(rig, wrapper, screen, i + 2))
                # One more on screen, measured while shown.
                rig.sim.emit_engagement()
                wait_until(lambda: len(re.findall(r"popup: on screen", wrapper.log())) >= a.warm + 2, timeout=30)
                time.sleep(1)
                shown = pss_mb(wrapper.process.pid)
                if a.breakdown:
                    where = breakdown(wrapper.process.pid, a.breakdown)
                close_popup(wrapper, screen, screen.visible("^Smartico popup$"), a.warm + 2)
                time.sleep(a.release_after + 10)
                released = pss_mb(wrapper.process.pid)
                s1 = switches(wrapper.process.pid)
                time.sleep(a.idle_seconds)
                idle_after = wakeups(s1, switches(wrapper.process.pid)) * 60 / a.idle_seconds
                # Still handed back a minute later: nothing faulted the pages in again while idle.
                released_later = pss_mb(wrapper.process.pid)
                # The next popup after the release: WebKit's processes start again and the pages
                # handed back to the kernel are read back.
                after_release = shown_after(rig, wrapper, screen, a.warm + 3)
            wrapper.stop(signal.SIGTERM)
        finally:
            screen.close()
            rig.close()
    print(f"cold emit→shown: median {statistics.median(cold):.3f} s, p95 {pct(cold, 95):.3f} s (n={len(cold)})")
    print(f"warm emit→shown: median {statistics.median(warm):.3f} s, p95 {pct(warm, 95):.3f} s (n={len(warm)})")
    print(f"PSS (run as uid {os.getuid()}) before the first popup {before:.1f} MB; with a popup shown {shown:.1f} MB; "
          f"{a.release_after + 10} s after the last one closed {released:.1f} MB, "
          f"{a.release_after + 10 + a.idle_seconds} s after {released_later:.1f} MB")
    print(f"idle context switches per minute: before any popup {idle_rate:.1f}; after release {idle_after:.1f}")
    print(f"the first popup after the release: emit→shown {after_release:.3f} s")
    if where:
        print(f"with popup {a.warm + 2} shown, PSS by process and mapped file (MB):")
        print("\n".join(where))


if __name__ == "__main__":
    main()
