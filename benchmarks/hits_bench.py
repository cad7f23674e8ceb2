#!/usr/bin/env python3
"""The typed hot-row cache's hit counts (`ringgnn.sampling.features.source_hits`: each node's
out-degree in the relations read), counted by this build's Rust pass (`_core.source_hits`, 256Ki
entries a read into the counts) against numpy's (`np.fromfile` of 4Mi entries at a time,
`np.add.at` into the counts: the Python count before the plan moved to Rust), in one run,
alternating, for every node type with out-edges, over every relation.

Data: `ringgnn generate hetero` with `--papers P` (default 400k), 0.75 P authors, P / 400
institutions, 16 features (made under `--dataset` if missing).

Per round and counter: CPU seconds (user + sys of this process) and wall seconds for all types;
the counts must be equal (checked after the rounds).

Usage: python benchmarks/hits_bench.py [--dataset /var/tmp/hits/ds] [--papers 400000] [--rounds 3]
"""
import argparse
import os
import resource
import time

import numpy as np

import ringgnn
from ringgnn.data.generate import generate_hetero
from ringgnn.data.schema import parse_edge_type
from ringgnn.sampling.features import source_hits

CHUNK = 1 << 22


def numpy_hits(ds, t, relations):
    """The numpy count: chunks of 4Mi entries, `np.add.at` (unbuffered: repeated ids all count)."""
    hits = np.zeros(ds.num_nodes_dict[t], dtype=np.uint32)
    for r in relations:
        part = ds.relation(r)
        if parse_edge_type(r)[0] != t or part.num_edges == 0:
            continue
        dtype = np.uint32 if part.manifest["graph"]["indices_dtype"] == "u32" else np.uint64
        path = os.path.join(ds.path, part.manifest["files"]["indices"]["path"])
        for lo in range(0, part.num_edges, CHUNK):
            k = min(CHUNK, part.num_edges - lo)
            np.add.at(hits, np.fromfile(path, dtype=dtype, count=k, offset=lo * np.dtype(dtype).itemsize), np.uint32(1))
    return hits


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="/var/tmp/hits/ds")
    ap.add_argument("--papers", type=int, default=400_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if not os.path.exists(a.dataset):
        generate_hetero(a.dataset, papers=a.papers, authors=a.papers * 3 // 4, institutions=max(1, a.papers // 400),
                        feature_dim=16)
    ds = ringgnn.Dataset.open(a.dataset)
    rels = list(ds.relations)
    types = sorted({parse_edge_type(r)[0] for r in rels})
    print(f"{a.dataset}: {sum(ds.num_edges_dict.values()):,} entries in {len(rels)} neighbor files, types {types}")
    out = {}
    for rnd in range(a.rounds):
        order = (("numpy", numpy_hits), ("rust", source_hits))
        for name, count in order if rnd % 2 == 0 else order[::-1]:
            c0, w0 = cpu(), time.perf_counter()
            out[name] = {t: count(ds, t, rels) for t in types}
            print(f"round {rnd} {name:5s}: cpu {cpu() - c0:.3f} s, wall {time.perf_counter() - w0:.3f} s")
    assert all(np.array_equal(out["numpy"][t], out["rust"][t]) for t in types), "the counts differ"
    print("counts equal")


if __name__ == "__main__":
    main()
