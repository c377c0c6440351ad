#!/usr/bin/env python3
"""Counts the instructions the daemon executes per event on the CPU row, under callgrind.

The CPU-per-event row moves by ±15 % from one run to the next on this shared machine, so a change
of a few per cent cannot be timed. The instructions the daemon executes while it drains the row's
backlogs are the work itself: callgrind counts them exactly (the same binary gives the same count
within a fraction of a per cent, whatever the neighbours do), so two binaries compare exactly.
Instructions are not time (a cache miss costs more than an add; `rep movsb` counts one per byte),
so a change is confirmed by an alternated timed run (scripts/alternate.py) as well.

    cd Benchmarks && swift build -c release
    scripts/count-instructions.py ../.build/release/smarticod [OTHER/smarticod ...] [--top 25]

Runs `--filter "maximum rate"` (3,000 events at the simulator's pace, then three backlogs of
60,000; ~2 minutes a binary under valgrind) with the daemon under `valgrind --tool=callgrind`, and
prints, per binary, the daemon's instructions per event in all (every thread; the start and the
handshake included, < 0.5 %), per stage (inclusive, the stages below), and its most expensive
functions (self cost).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

EVENTS = 3_000 + 3 * 60_000

# Stages: (label, regex on the mangled or C name). Inclusive costs; stages nest, so they do not add up.
STAGES = [
    ("event loop thread (all)", r"EventLoopC03runC0"),
    ("  socket read → frames → inflate → message", r"StreamConnectionC14readFromSocket"),
    ("    inflate (per-message deflate)", r"MessageInflaterC6finish"),
    ("    UTF-8 validation", r"WebSocketProtocolC12validateText"),
    ("  the driver's inputs (machine + actions)", r"SessionDriverC7process.*InputOnYaF$"),
    ("    the machine (decode + rules)", r"SessionMachineV6handle_3now4into"),
    ("      the 110's JSON scan", r"JSONScannerO4scan_7optionsAA8JSONScanVSW_"),
    ("    journal row and line assembly", r"SessionDriverC10journalRow"),
    ("  lines written to subscribers", r"SocketAPIServerC7publishyySayAA13PreparedEventVGF"),
    ("store thread (all)", r"ExecutorState.*C4loopyyF$"),
    ("  journal commit (seen-set, records, write, sync)", r"0A5StoreC7journalySays5Int64VSgGSayAA12JournalWriteVGAA0C5ErrorOYKF$"),
    ("    event log append (encoded records written and synced)", r"EventLogC5write33_.*BatchV"),
    ("  seen-set fold and retention (upkeep)", r"0A5StoreC6upkeep"),
]


def count(bench, binary, timeout, keep):
    tmp = tempfile.mkdtemp(prefix="count-instr.")
    wrapper = os.path.join(tmp, "smarticod")  # the row finds the daemon's threads by this name
    out_file = os.path.join(tmp, "callgrind.out")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n"
                % (out_file, os.path.abspath(binary)))
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, SMARTICOD_BIN=wrapper)
    try:
        r = subprocess.run([bench, "--filter", "maximum rate"], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"count-instructions: the row did not end within {timeout} s")
    drained = len(re.findall(r"a backlog drained, 60000 events", r.stdout))
    if r.returncode != 0 or drained != 3 or not os.path.exists(out_file):
        sys.exit(f"count-instructions: {drained} of 3 backlogs drained (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-2000:]}")
    annotate = lambda inclusive: subprocess.run(
        ["callgrind_annotate", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", out_file],
        capture_output=True, text=True, check=True).stdout
    rows = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)")

    def parse(text):
        total, funcs = None, []
        for line in text.splitlines():
            m = rows.match(line)
            if not m:
                continue
            n = int(m.group(1).replace(",", ""))
            if "PROGRAM TOTALS" in m.group(2):
                total = n
                continue
            # "file:function [object]": the function is what follows the last ':' before the object.
            name = re.sub(r" \(\d+x\)$", "", m.group(2).split(" [")[0])
            name = name.split(":", 1)[1] if ":" in name else name
            funcs.append((n, name))
        return total, funcs

    total, selfs = parse(annotate(False))
    _, incl = parse(annotate(True))
    if keep:
        print(f"  (callgrind output kept: {out_file})")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return total, selfs, incl


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release", "smartico-bench"))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--keep", action="store_true", help="keep the callgrind output files")
    args = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        sys.exit("count-instructions: valgrind is not installed (apt-get install valgrind)")
    for path in args.binaries + [args.bench]:
        if not os.access(path, os.X_OK):
            sys.exit(f"count-instructions: {path} is not an executable (build it first)")
    results = []
    for binary in args.binaries:
        print(f"{binary}: running the row under callgrind …", flush=True)
        results.append((binary, *count(args.bench, binary, args.timeout, args.keep)))
    for binary, total, selfs, incl in results:
        print(f"\n{binary}: {total / EVENTS:,.0f} instructions per event ({total:,} over {EVENTS:,} events)")
        print("  by stage (inclusive):")
        for label, pattern in STAGES:
            best = max((n for n, name in incl if re.search(pattern, name) and "'2" not in name), default=0)
            print(f"    {best / EVENTS:9,.0f}  {label}")
        print(f"  top {args.top} functions (self; a function's inlined pieces, listed per file, added up):")
        summed = {}
        for n, name in selfs:
            summed[name] = summed.get(name, 0) + n
        for name, n in sorted(summed.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"    {n / EVENTS:9,.0f}  {name[:150]}")
    if len(results) > 1:
        base = results[0][1]
        print()
        for binary, total, _, _ in results[1:]:
            print(f"{binary}: {total / base:.3f}× the instructions of {results[0][0]}")


if __name__ == "__main__":
    main()
