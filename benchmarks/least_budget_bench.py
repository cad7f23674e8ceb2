#!/usr/bin/env python3
"""The least ``--memory`` a ``ringgnn`` command accepts, and that it then stays within it: for
each build (this Python, and ``--compare OTHER_PYTHON``, e.g. the global install as the
baseline), the command runs with ``--memory 1M`` (refused: its message names the least it would
take before loading anything), then under ``memcap N`` with ``--memory N`` for the least named,
again with the next least while the command refuses after loading (its exact minimum for the
graph and the model), until it runs (a run the cap kills without refusing: ``--step`` more).
Each row: the build, the budget tried, the exit status, the seconds, the cgroup's peak and
events, and the refusal's message where refused.

Usage:
    python benchmarks/least_budget_bench.py [--compare PYTHON] [--json out.json] -- \\
        predict RUN_DIR --quiet --out /tmp/p.npy
(``--memory`` is added; the ``--out`` file is removed after each run.)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from _sizes import MEMCAP, parse_size

LEAST = re.compile(r"give at least (?:--memory )?([\d,]+)")


def run(python: str, argv: list, budget: int, capped: bool) -> dict:
    cmd = [python, "-m", "ringgnn", *argv, "--memory", str(budget)]
    if capped:
        cmd = [MEMCAP, str(budget), "--", *cmd]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    row = dict(budget=budget, exit=r.returncode, seconds=round(time.perf_counter() - t0, 2))
    cap = [line for line in r.stderr.splitlines() if line.startswith("memcap:")]
    if cap:
        row["memcap"] = cap[-1][len("memcap: "):]
    m = LEAST.search(r.stderr)
    if r.returncode and m:
        row["least"] = int(m.group(1).replace(",", ""))
        row["refused"] = r.stderr.strip().splitlines()[-2 if cap else -1][:160]
    return row


def least(python: str, argv: list, out: str, step: int) -> list:
    """The runs: refused ones name the next budget; one killed by the cap (no refusal) is tried
    again ``step`` bytes higher, at most 8 times."""
    rows = [run(python, argv, 1 << 20, False)]
    for _ in range(12):
        last = rows[-1]
        if last["exit"] == 0:
            break
        if "least" in last:
            budget = last["least"]
        elif len(rows) > 1 and sum("least" not in r for r in rows[1:]) <= 8:
            budget = last["budget"] + step
        else:
            break
        rows.append(run(python, argv, budget, True))
        if out and os.path.exists(out):
            os.remove(out)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", default="", metavar="PYTHON", help="another build's Python (the baseline)")
    ap.add_argument("--json")
    ap.add_argument("--step", default="16M", help="how much more to give after a run the cap killed")
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    out = argv[argv.index("--out") + 1] if "--out" in argv else ""
    result = {}
    for name, python in [("this", sys.executable)] + ([("other", args.compare)] if args.compare else []):
        rows = least(python, argv, out, parse_size(args.step))
        result[name] = rows
        for r in rows:
            print(f"{name:5} --memory {r['budget']:>13,} exit {r['exit']} {r['seconds']:7.2f} s  "
                  f"{r.get('memcap', '(not capped)')}  {r.get('refused', '')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(argv=argv, builds=result), f, indent=2)


if __name__ == "__main__":
    main()
