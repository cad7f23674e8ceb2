#!/usr/bin/env python3
"""Layer-wise inference across memory budgets (issue 24, "no cliff"): ``ringgnn embed RUN_DIR``
under ``memcap --drop-caches SIZE`` with ``--memory SIZE`` for each SIZE, against the sequential
``O_DIRECT`` read of the layer's input (the dataset's feature file, ``dd iflag=direct``) measured
in the same run, just before each budget.

Prints one row per budget: the layer's seconds, its ratio to the sequential read and its CPU
seconds (all threads: on a machine shared with other work, the layer is CPU-bound), the bytes
the layer read (rows and neighbor lists), the exit status and the cgroup's line (peak, failcnt,
OOM kills); a refused budget shows its message's minimum.

With ``--compare OTHER_PYTHON`` (a Python that imports another build of ringgnn, e.g. a
wrapper setting ``PYTHONPATH`` to another checkout) each budget runs with both builds, this one
first, then the other (``--repeat N`` times, alternating), after the same sequential read; each
row says its build, and the load average when it started (the machine may be shared).

Usage:
    python benchmarks/infer_budget_bench.py RUN_DIR --budgets 1G,768M,400M,256M [--dtype bf16]
        [--time-limit 600] [--json out.json] [--compare OTHER_PYTHON [--repeat N]]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from _sizes import MEMCAP


def seq_read(path: str) -> float:
    """Seconds of one sequential O_DIRECT read of ``path`` (cold: O_DIRECT skips the cache)."""
    t0 = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=4M", "iflag=direct"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--budgets", default="1G,768M,400M,256M")
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--extra", default="", help="more arguments of ringgnn embed, e.g. '--layer 2'")
    ap.add_argument("--json")
    ap.add_argument("--compare", default="", metavar="PYTHON", help="another build's Python, run after this one")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each build per budget (alternating)")
    args = ap.parse_args()
    builds = [("this", sys.executable)] + ([("other", args.compare)] if args.compare else [])
    metrics = json.load(open(os.path.join(args.run_dir, "metrics.json")))
    ds = metrics["dataset"]
    manifest = json.load(open(os.path.join(ds, "manifest.json")))
    features = os.path.join(ds, manifest["files"]["features"]["path"])
    rows = []
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(args.run_dir))) as tmp:
        for budget, build, python in [(b, name, py) for b in args.budgets.split(",")
                                      for _ in range(args.repeat) for name, py in builds]:
            if build == "this":
                seq = min(seq_read(features) for _ in range(2))
            out = os.path.join(tmp, "emb.npy")
            load = os.getloadavg()[0]
            cmd = [MEMCAP, "--drop-caches", budget, "--", python, "-m", "ringgnn", "embed", args.run_dir,
                   "--memory", budget, "--direct", "--out", out, "--json", "--quiet"] + args.extra.split()
            t0 = time.perf_counter()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time_limit)
                code, stdout, stderr = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as e:
                code, stdout, stderr = "timeout", e.stdout or "", e.stderr or ""
                stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
                stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
            wall = time.perf_counter() - t0
            cg = "; ".join(line for line in stderr.splitlines() if line.startswith("memcap:"))
            row = dict(budget=budget, build=build, load=round(load, 1), seq_s=round(seq, 3), exit=code,
                       wall_s=round(wall, 1), memcap=cg)
            try:
                s = json.loads(stdout[stdout.index("{"):])
                layer = s["layers"][-1]
                row.update(layer_s=round(layer["seconds"], 2), ratio=round(layer["seconds"] / seq, 1),
                           cpu_s=round(layer.get("cpu_seconds", float("nan")), 2),
                           row_gb=round(layer["row_bytes"] / 1e9, 2),
                           neighbor_gb=round(layer["neighbor_bytes"] / 1e9, 3),
                           temp_gb=round((layer.get("temp_written", 0) + layer.get("temp_read", 0)) / 1e9, 2),
                           phases=layer.get("phases", {}),
                           sweeps=[g["sweeps"] for g in s["plan"].get("grid", {}).get("layers", [])],
                           held_mib=s["plan"].get("held", 0) >> 20)
            except (ValueError, KeyError, IndexError):
                m = re.search(r"give at least --memory [\d,]+ \((\d+M)\)", stderr)
                row.update(refused=m.group(1) if m else stderr.strip().splitlines()[-1:] or "")
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(run_dir=args.run_dir, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
