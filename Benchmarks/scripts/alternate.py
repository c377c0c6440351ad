#!/usr/bin/env python3
"""Alternates two smarticod binaries on one benchmark row and compares them pair by pair.

On a shared machine one run of the CPU-per-event row moves by ±10 % from the run before it, and by
far more over an afternoon, so two binaries are compared only in alternated runs (A, B, A, B, …),
each run the row's three drains. Prints every run, then the median of all drains on each side,
how many pairs B won, and the ratio.

    cd Benchmarks && swift build -c release
    scripts/alternate.py OLD/smarticod NEW/smarticod --pairs 6

Each binary should sit in a directory of its own but keep the name `smarticod`: the row finds the
daemon's threads by that name. The row is `--filter "maximum rate"` unless --filter says otherwise
(it must print "median of 3 runs: a / b / c µs"). Every run is bounded by --timeout seconds.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

RUNS = re.compile(r"median of 3 runs: ([\d.]+) / ([\d.]+) / ([\d.]+) µs")


def run(bench, binary, row, timeout):
    env = dict(os.environ, SMARTICOD_BIN=binary)
    try:
        out = subprocess.run([bench, "--filter", row], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"{binary}: the row did not finish within {timeout} s")
    match = RUNS.search(out.stdout)
    if out.returncode != 0 or not match:
        sys.exit(f"{binary}: the row failed (exit {out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return [float(x) for x in match.groups()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the reference binary (A)")
    parser.add_argument("b", help="the binary compared with it (B)")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--filter", default="maximum rate")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--bench", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                        "..", ".build", "release", "smartico-bench"))
    args = parser.parse_args()
    for path in (args.a, args.b, args.bench):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path}: not an executable (build it first: swift build -c release)")
    drains = {"A": [], "B": []}
    pairs = []
    for i in range(args.pairs):
        medians = {}
        for side, binary in (("A", args.a), ("B", args.b)):
            values = run(args.bench, binary, args.filter, args.timeout)
            drains[side] += values
            medians[side] = statistics.median(values)
            print(f"pair {i + 1} {side}: {' / '.join(f'{v:.1f}' for v in values)} µs", flush=True)
        pairs.append((medians["A"], medians["B"]))
    a, b = statistics.median(drains["A"]), statistics.median(drains["B"])
    wins = sum(1 for x, y in pairs if y < x)
    ties = sum(1 for x, y in pairs if y == x)
    print(f"median of {len(drains['A'])} drains: A {a:.2f} µs, B {b:.2f} µs (B/A {b / a:.3f}); "
          f"B lower in {wins} of {len(pairs)} pairs" + (f" ({ties} tied)" if ties else ""))


if __name__ == "__main__":
    main()
