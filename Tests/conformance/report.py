"""Summarises an Autobahn|Testsuite fuzzingserver report (OUTDIR/index.json) for one agent.

usage: python3 report.py OUTDIR AGENT [EXPECTED_CASE_COUNT]

Prints a table of counts by behavior and by behaviorClose, then every case whose behavior
(or behaviorClose) is not OK / NON-STRICT / INFORMATIONAL, with the reason from the case's
own JSON report (its "result" and "resultClose" texts). Exits 1 if there is any such case,
if the agent is missing, or if fewer cases than expected were reported.
"""
import json
import os
import sys

ACCEPTED = ("OK", "NON-STRICT", "INFORMATIONAL")


def case_key(case_id):
    return [int(p) for p in case_id.split(".")]


def main():
    outdir, agent = sys.argv[1], sys.argv[2]
    expected = int(sys.argv[3]) if len(sys.argv) > 3 else None
    with open(os.path.join(outdir, "index.json")) as f:
        index = json.load(f)
    if agent not in index:
        print("error: no results for agent %r in %s (agents: %s)" % (agent, outdir, sorted(index)))
        return 1
    cases = index[agent]
    by_behavior, by_close = {}, {}
    for c in cases.values():
        by_behavior[c["behavior"]] = by_behavior.get(c["behavior"], 0) + 1
        by_close[c["behaviorClose"]] = by_close.get(c["behaviorClose"], 0) + 1
    print("%d cases for agent %s" % (len(cases), agent))
    print("%-16s %8s %14s" % ("result", "behavior", "behaviorClose"))
    for name in sorted(set(by_behavior) | set(by_close)):
        print("%-16s %8d %14d" % (name, by_behavior.get(name, 0), by_close.get(name, 0)))
    total_ms = sum(c.get("duration", 0) for c in cases.values())
    print("sum of case durations: %.1f s" % (total_ms / 1000.0))

    noted, failed = [], []
    for case_id in sorted(cases, key=case_key):
        c = cases[case_id]
        bad = c["behavior"] not in ACCEPTED or c["behaviorClose"] not in ACCEPTED
        if not bad and c["behavior"] == "OK" and c["behaviorClose"] == "OK":
            continue
        detail = {}
        path = os.path.join(outdir, c.get("reportfile", ""))
        if c.get("reportfile") and os.path.exists(path):
            with open(path) as f:
                detail = json.load(f)
        line = "  %-8s behavior=%s behaviorClose=%s remoteCloseCode=%s\n      %s\n      close: %s" % (
            case_id, c["behavior"], c["behaviorClose"], c.get("remoteCloseCode"),
            detail.get("description", "").strip().replace("\n", " ")[:300],
            detail.get("resultClose", ""))
        if detail.get("result"):
            line += "\n      result: %s" % detail["result"]
        (failed if bad else noted).append(line)
    if noted:
        print("\ncases that are NON-STRICT or INFORMATIONAL (accepted):")
        print("\n".join(noted))
    status = 0
    if failed:
        print("\nFAILED cases (%d):" % len(failed))
        print("\n".join(failed))
        status = 1
    if expected is not None and len(cases) < expected:
        print("\nerror: %d cases reported, %d expected" % (len(cases), expected))
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
