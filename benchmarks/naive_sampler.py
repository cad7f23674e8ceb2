#!/usr/bin/env python3
"""The naive baseline: what users do today without ringgnn.

numpy memmaps the CSC `indices` file (page-faulting mmap, kernel readahead), keeps `indptr` in
memory, and for each node of each hop picks `min(fanout, degree)` random neighbor positions with
`rng.choice(..., replace=False)`; nodes are relabeled with a dict. Same output semantics as
ringgnn's sampler (seeds first, then nodes in discovery order), different random numbers.

Prints one JSON line like `ringgnn sample --json`: seconds, batches, sampled_edges, seps.
With --max-batches it stops early and also reports `epoch_seconds_extrapolated`.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--seeds", required=True, help=".npy of seed node ids")
    ap.add_argument("--fanouts", default="20,15,10")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--max-batches", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    d = Path(a.dataset)
    m = json.loads((d / "manifest.json").read_text())
    v, e = m["num_nodes"], m["num_edges"]
    dtype = "<u4" if m["graph"]["indices_dtype"] == "u32" else "<u8"
    indptr = np.fromfile(d / m["files"]["indptr"]["path"], dtype="<u8", count=v + 1).astype(np.int64)
    indices = np.memmap(d / m["files"]["indices"]["path"], dtype=dtype, mode="r", shape=(e,))
    fanouts = [int(f) for f in a.fanouts.split(",")]
    seeds = np.load(a.seeds).astype(np.int64)
    rng = np.random.default_rng(a.seed)
    n_batches = (len(seeds) + a.batch_size - 1) // a.batch_size
    todo = n_batches if a.max_batches <= 0 else min(n_batches, a.max_batches)
    sampled_edges = 0
    # Bytes the expanded nodes' neighbor lists occupy when read page by page: the yardstick of
    # issue 3's read-amplification target (same seeds and distribution as ringgnn's sampler).
    width = 4 if dtype == "<u4" else 8
    list_page_bytes = 0
    t0 = time.perf_counter()
    for b in range(todo):
        batch = seeds[b * a.batch_size:(b + 1) * a.batch_size]
        local = {}
        for s in batch.tolist():
            local.setdefault(s, len(local))
        frontier = list(local)
        for f in fanouts:
            nxt = []
            for u in frontier:
                lo, hi = indptr[u], indptr[u + 1]
                deg = hi - lo
                if deg == 0:
                    continue
                list_page_bytes += ((hi * width - 1) // 4096 - (lo * width) // 4096 + 1) * 4096
                if deg <= f:
                    nbrs = indices[lo:hi]
                else:
                    nbrs = indices[lo + rng.choice(deg, f, replace=False)]
                sampled_edges += len(nbrs)
                for w in nbrs.tolist():
                    if w not in local:
                        local[w] = len(local)
                        nxt.append(w)
            frontier = nxt
    secs = time.perf_counter() - t0
    out = {"backend": "naive-memmap", "seconds": secs, "batches": todo, "sampled_edges": sampled_edges,
           "seps": sampled_edges / secs if secs else 0.0, "list_page_bytes": int(list_page_bytes)}
    if todo < n_batches:
        out["epoch_seconds_extrapolated"] = secs * n_batches / todo
    print(json.dumps(out))


if __name__ == "__main__":
    main()
