"""GraphBolt's temporal sampling on a ringgnn dataset, for `temporal_bench.py` (run with a Python
that has DGL 2.1 and torch 2.2.1: `pip install torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "pandas<2.3"
"numpy<2"`; ringgnn need not be installed there).

    python benchmarks/graphbolt_temporal.py DATASET SEEDS.npz --fanouts 20,15,10 --batch-size 1024

DATASET is a homogeneous ringgnn dataset with edge times (docs/FORMAT.md, "Times"); SEEDS.npz holds
`seeds` (int64 node ids) and `times` (int64, one per seed). The graph goes into one
`FusedCSCSamplingGraph` with the edge times as the attribute `ts`, and each batch is sampled hop by
hop with `temporal_sample_neighbors`, every sampled node carrying its seed's time to the next hop
and a node reached at two seed times kept twice (ringgnn's semantics, and GraphBolt's temporal
datapipe's). GraphBolt keeps an edge only if its time is strictly before the seed's, ringgnn (as
PyG) if it is not after: the seed times are passed to GraphBolt plus one, so both draw from the same
edges. Prints one JSON line: seconds of the epoch, sampled nodes and edges, batches.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import dgl.graphbolt as gb


def load(path: str):
    with open(os.path.join(path, "manifest.json")) as f:
        m = json.load(f)
    files = m["files"]

    def read(key: str, dtype) -> np.ndarray:
        entry = files[key]
        n = entry["payload_bytes"] // np.dtype(dtype).itemsize
        return np.fromfile(os.path.join(path, entry["path"]), dtype=dtype, count=n)

    idx = np.uint32 if m["graph"]["indices_dtype"] == "u32" else np.uint64
    indptr = torch.from_numpy(read("indptr", np.int64))
    indices = torch.from_numpy(read("indices", idx).astype(np.int64 if idx == np.uint64 else np.int32))
    ts = torch.from_numpy(read("edge_times", np.int64))
    return gb.fused_csc_sampling_graph(indptr, indices, edge_attributes={"ts": ts})


def sample_batch(g, seeds: torch.Tensor, times: torch.Tensor, fanouts):
    """One batch, hop by hop; returns its (sampled nodes, sampled edges)."""
    # Group seeds by distinct time: a node reached for two groups is two nodes.
    uniq, group = torch.unique(times, return_inverse=True)
    groups = len(uniq)
    nodes, gid = seeds, group
    visited = torch.unique(nodes * groups + gid)
    edges = 0
    for f in fanouts:
        if len(nodes) == 0:
            break
        sub = g.temporal_sample_neighbors(nodes.to(g.indices.dtype), uniq[gid] + 1, torch.LongTensor([f]),
                                          edge_timestamp_attr_name="ts")
        csc = sub.sampled_csc
        nbr = csc.indices.to(torch.int64)
        edges += len(nbr)
        counts = csc.indptr[1:] - csc.indptr[:-1]
        ngid = torch.repeat_interleave(gid, counts)
        keys = torch.unique(nbr * groups + ngid)
        new = keys[~torch.isin(keys, visited)]
        visited = torch.cat([visited, new])
        nodes, gid = new // groups, new % groups
    return len(visited), edges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("seeds")
    ap.add_argument("--fanouts", default="20,15,10")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    fanouts = [int(x) for x in args.fanouts.split(",")]
    t0 = time.perf_counter()
    g = load(args.dataset)
    load_s = time.perf_counter() - t0
    z = np.load(args.seeds)
    seeds, times = torch.from_numpy(z["seeds"].astype(np.int64)), torch.from_numpy(z["times"].astype(np.int64))
    b = args.batch_size
    t0 = time.perf_counter()
    nodes = edges = batches = 0
    for i in range(0, len(seeds), b):
        n, e = sample_batch(g, seeds[i:i + b], times[i:i + b], fanouts)
        nodes, edges, batches = nodes + n, edges + e, batches + 1
    epoch_s = time.perf_counter() - t0
    print(json.dumps({"sampler": "graphbolt", "load_s": round(load_s, 3), "epoch_s": round(epoch_s, 3),
                      "nodes": nodes, "edges": edges, "batches": batches, "threads": args.threads}))


if __name__ == "__main__":
    main()
