#!/usr/bin/env python3
"""The builds' check that each original node id occurs once (``ringgnn.convert(node_ids=...)``):
its memory under a cap and its cost against the same build without it.

One run, on inputs of V nodes with original ids and one edge (the ids are the work):
  * ``convert`` at ``memory=M`` under ``memcap M`` (RSS and page cache capped) for each budget:
    exit 0, the peak RSS, the cap's failcnt;
  * the baseline: the same build by a ringgnn without the check (``--baseline``, default the
    global ``python3``, a frozen build of main), warm, alternated with ours, at 1G;
  * the ids with node V-1 repeating node 3's under the smallest cap: exit 1 with both nodes
    named, and nothing left in the output's directory.

Usage: python benchmarks/build_ids_bench.py [--ints 20000000] [--strings 5000000]
       [--work /var/tmp/ringgnn-bench/NAME] [--budgets 128M,256M] [--baseline python3]
Needs root (memcap). Prints a Markdown table; paste it into docs/benchmarks.md.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _ids import write_ids

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"


def make(work: Path, kind: str, n: int, dup: bool) -> tuple:
    """Id files of n nodes, distinct i64 (or strings); with dup, node n-1 repeats node 3's."""
    tag = f"{kind}{'-dup' if dup else ''}"
    dtype, ids, data = write_ids(work / f"{tag}.ids", work / f"{tag}.bytes", kind, n, dup)
    return (dtype, str(ids), None if data is None else str(data))


def build(py: str, work: Path, n: int, node_ids: tuple, memory: str, cap: bool):
    """(seconds, returncode, peak RSS MiB or None, failcnt or None, stderr) of one convert."""
    out = work / "out" / "ds"
    shutil.rmtree(out, ignore_errors=True)
    code = (f"import ringgnn; ringgnn.convert({str(work / 'e.npy')!r}, {str(out)!r}, num_nodes={n}, "
            f"node_ids={node_ids!r}, memory={memory!r})")
    cmd = [py, "-c", code]
    if cap:
        cmd = [str(MEMCAP), memory, "--", "/usr/bin/time", "-f", "maxrss %M"] + cmd
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    rss = re.search(r"maxrss (\d+)", r.stderr)
    fail = re.search(r"failcnt=(\d+)", r.stderr)
    return dt, r.returncode, rss and int(rss.group(1)) >> 10, fail and fail.group(1), r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ints", type=int, default=20_000_000)
    ap.add_argument("--strings", type=int, default=5_000_000)
    ap.add_argument("--work", default=f"/var/tmp/ringgnn-bench/{os.environ.get('USER', 'bench')}")
    ap.add_argument("--budgets", default="128M,256M")
    ap.add_argument("--baseline", default="python3")
    args = ap.parse_args()
    work = Path(args.work)
    (work / "out").mkdir(parents=True, exist_ok=True)
    np.save(work / "e.npy", np.array([[0, 1]], dtype=np.int64))
    ours, budgets, rows = sys.executable, args.budgets.split(","), []
    for kind, n in (("int", args.ints), ("str", args.strings)):
        ids = make(work, kind, n, dup=False)
        base, mine = [], []
        for _ in range(2):  # alternated, so drift hits both
            dt, rc, *_, err = build(args.baseline, work, n, ids, "1G", cap=False)
            assert rc == 0, err
            base.append(dt)
            dt, rc, *_, err = build(ours, work, n, ids, "1G", cap=False)
            assert rc == 0, err
            mine.append(dt)
        rows.append(f"| {kind} | {n:,} | 1G, no cap | {min(mine):.1f} s | {min(base):.1f} s | "
                    f"{min(mine) / min(base):.2f}x | | | |")
        for b in budgets:
            dt, rc, rss, fail, err = build(ours, work, n, ids, b, cap=True)
            assert rc == 0, err
            rows.append(f"| {kind} | {n:,} | {b} under memcap {b} | {dt:.1f} s | | | exit 0 | {rss} MiB | {fail} |")
        dup = make(work, kind, n, dup=True)
        shutil.rmtree(work / "out" / "ds", ignore_errors=True)
        dt, rc, rss, fail, err = build(ours, work, n, dup, budgets[0], cap=True)
        named = f"nodes 3 and {n - 1} (entries 3 and {n - 1} of the file" in err
        left = os.listdir(work / "out")
        rows.append(f"| {kind}, node {n - 1} repeats node 3 | {n:,} | {budgets[0]} under memcap {budgets[0]} | "
                    f"{dt:.1f} s | | | exit {rc}, named: {named}, left in out/: {len(left)} | {rss} MiB | {fail} |")
        for p in (ids, dup):
            for f in p[1:]:
                if f:
                    os.unlink(f)
    shutil.rmtree(work / "out", ignore_errors=True)
    print("| ids | V | --memory | ours | without the check | ratio | result | peak RSS | failcnt |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
