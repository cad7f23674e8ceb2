#!/usr/bin/env python3
"""The Rust fold of layer-wise inference with software prefetch against without, in one run.

Each measurement is one ``FeatureReader.aggregate`` call (crates/ringgnn-features/src/aggregate.rs)
over destinations ``0..--nodes`` of DATASET as one block, its sources read ``--piece-rows`` rows
at a time (32768 is the issue-12 plan's piece: 16 MB of 128-wide f32 rows, each destination
having an edge in few pieces, so every edge's source row and accumulator row are cache misses),
the arms of this build alternating in one child process (their order rotated each repeat), a
compared build's in another. The arms differ only in the fold's ``prefetch`` distance (edges
folded ahead whose rows are prefetched; ``default`` is the core's constant, 0 is off) and, with
``--compare PYTHONPATH``, a build of ringgnn importable from PYTHONPATH (e.g. main's, before the
prefetch) called without that argument. The folds:

- ``sum``: GraphSAGE's sums of the 128-wide rows;
- ``gcn``: GCN's weighted sums (``dinv = 1 / sqrt(deg + 1)``);
- ``gat``: GAT's online softmax, 4 heads, the rows taken as 31 x 4 messages and 4 source logits;
- ``sum16``: sums of 16-wide rows (a transform keeps each piece's first 16 columns: the narrow
  last layer).

Printed (and written with ``--json``): per fold and arm, the median and the least seconds of the
``fold`` phase (the least is the run the other processes disturbed least) and the median of the
whole call and of its CPU time (user and system, all threads: on a loaded machine the least
disturbed measure, as a piece's threads wait for each other), the ratios of each arm's to the
first arm's, and whether every arm's
accumulators are bit-identical (they must be: the edges of a destination are folded in the same
order whatever the prefetch). The load average is printed before and after (the machine is
shared: compare ratios within a run).

Usage:
    ringgnn generate sbm --nodes 1000000 --classes 16 --avg-degree 10 --feature-dim 128 --seed 0 \\
        --memory 1G /var/tmp/ringgnn-bench/foldpf/sbm1m
    python benchmarks/fold_bench.py /var/tmp/ringgnn-bench/foldpf/sbm1m --prefetch 0,default \\
        [--compare PYTHONPATH] [--folds sum,gcn,gat,sum16] [--repeat 3] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import hashlib, json, resource, sys
import numpy as np
import ringgnn
from ringgnn import _core
from ringgnn.inference.graph import NeighborFile
path, fold, nodes, piece_rows, threads, arms = sys.argv[1:7]
nodes, piece_rows, threads = int(nodes), int(piece_rows), int(threads)
ds = ringgnn.Dataset.open(path)
g = NeighborFile(ds)
reader = _core.FeatureReader(path)
n, dim = min(nodes, ds.num_nodes), reader.dim
ip = g.indptr[:n + 1]
kw = dict(piece_rows=piece_rows, threads=threads)
heads = 4
if fold == "sum":
    acc, start = np.zeros((n, dim), np.float32), np.zeros(dim, np.float32)
    kw["fold"] = "sum"
elif fold == "sum16":
    acc, start = np.zeros((n, 16), np.float32), np.zeros(16, np.float32)
    kw.update(fold="sum", width=16, transform=lambda rows: np.ascontiguousarray(rows[:, :16]))
elif fold == "gcn":
    deg = np.diff(g.indptr).astype(np.float32)
    kw.update(fold="gcn", dinv=(1.0 / np.sqrt(deg + 1.0)).astype(np.float32))
    acc, start = np.zeros((n, dim), np.float32), np.zeros(dim, np.float32)
elif fold == "gat":
    acc, start = np.zeros((n, dim + heads), np.float32), np.zeros(dim + heads, np.float32)
    start[dim - heads:dim] = -np.inf  # the running maxima; messages and sums start at 0
    a_dst = np.random.default_rng(0).standard_normal((n, heads)).astype(np.float32)
    kw.update(fold="softmax", a_dst=a_dst, negative_slope=0.2)
else:
    sys.exit(f"unknown fold {fold}")
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
for arm in arms.split(","):
    acc[:] = start  # also touches the pages before the first call's fold (no page faults in it)
    if arm != "-":
        kw["prefetch"] = None if arm == "default" else int(arm)
    c0 = cpu()
    got = reader.aggregate(acc, 0, ip, 0, int(ip[-1]), g.path, np.dtype(g.dtype).itemsize, **kw)
    c1 = cpu()
    total = sum(got[p] for p in ("sources", "positions", "read_wait", "transform", "fold"))
    print(json.dumps(dict(arm=arm, fold=got["fold"], total=total, cpu=c1 - c0, edges=int(ip[-1]),
                          rows=got["rows"], sha=hashlib.sha256(acc.tobytes()).hexdigest()[:16])), flush=True)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--prefetch", default="0,default",
                    help="comma-separated arms: distances (0 = off) or 'default' (the core's constant)")
    ap.add_argument("--compare", default=None, metavar="PYTHONPATH",
                    help="one more arm: the ringgnn importable from PYTHONPATH, without the prefetch argument")
    ap.add_argument("--folds", default="sum,gcn,gat,sum16")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--piece-rows", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    arms = [(f"prefetch={p}", None, p) for p in args.prefetch.split(",")]
    if args.compare:
        arms.append(("compare", args.compare, "-"))
    folds = args.folds.split(",")
    load = [os.getloadavg()]
    print(f"load average {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}", flush=True)
    got = {(f, a[0]): [] for f in folds for a in arms}
    for rep in range(args.repeat):
        for fold in folds:
            # This build's arms in one process (rotated each repeat), the compared build's in another.
            ours = [a for a in arms if a[1] is None]
            ours = ours[rep % len(ours):] + ours[:rep % len(ours)]
            runs = [(None, ",".join(a[2] for a in ours))]
            if args.compare:
                runs.insert(rep % 2, (args.compare, "-"))
            for path, which in runs:
                env = dict(os.environ)
                if path:
                    env["PYTHONPATH"] = path
                cmd = [sys.executable, "-c", CHILD, args.dataset, fold, str(args.nodes), str(args.piece_rows),
                       str(args.threads), which]
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    sys.exit(f"{fold} {which} failed:\n{p.stderr[-3000:]}")
                for line in p.stdout.strip().splitlines():
                    r = json.loads(line)
                    label = "compare" if path else f"prefetch={r['arm']}"
                    got[(fold, label)].append(r)
                    print(f"rep {rep} {fold:5s} {label:18s} fold {r['fold']:7.3f} s  call {r['total']:7.3f} s  "
                          f"call CPU {r['cpu']:7.3f} s  acc {r['sha']}", flush=True)
    load.append(os.getloadavg())
    print(f"load average {load[1][0]:.2f} {load[1][1]:.2f} {load[1][2]:.2f}")
    rows = []
    for fold in folds:
        base = statistics.median(r["fold"] for r in got[(fold, arms[0][0])])
        base_min = min(r["fold"] for r in got[(fold, arms[0][0])])
        base_cpu = statistics.median(r["cpu"] for r in got[(fold, arms[0][0])])
        shas = {r["sha"] for a in arms for r in got[(fold, a[0])]}
        for label, _, _ in arms:
            rs = got[(fold, label)]
            med = statistics.median(r["fold"] for r in rs)
            low = min(r["fold"] for r in rs)
            cpu = statistics.median(r["cpu"] for r in rs)
            row = dict(fold=fold, arm=label, fold_s=med, fold_min_s=low,
                       call_s=statistics.median(r["total"] for r in rs), fold_runs=[r["fold"] for r in rs],
                       edges=rs[0]["edges"], ratio=med / base, ratio_min=low / base_min,
                       cpu_s=cpu, ratio_cpu=cpu / base_cpu, identical=len(shas) == 1)
            rows.append(row)
            print(f"{fold:5s} {label:18s} fold median {med:7.3f} s (x{row['ratio']:.2f} of {arms[0][0]}), "
                  f"min {low:7.3f} s (x{row['ratio_min']:.2f})  call {row['call_s']:7.3f} s, "
                  f"CPU {cpu:7.3f} s (x{row['ratio_cpu']:.2f})  "
                  f"{row['edges'] / low / 1e6:6.1f} M edges/s at the min  identical across arms: {row['identical']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), load=load, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
