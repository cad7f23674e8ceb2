#!/usr/bin/env python3
"""The first N batches of a heterogeneous epoch read from disk, with the hyperbatch size a
``HeteroLoader`` chooses: issue 35's heterogeneous target (the 6M-paper dataset under
``memcap --drop-caches 500M`` with ``memory=500M``: ``auto`` should pick hyperbatches of more
than one batch, and take at most half the time of today's per batch, ``--hyperbatch 1``).

The loader is ``ringgnn.HeteroLoader(dataset, fanouts, target, memory=..., hyperbatch=...,
backend="uring", feature_backend="uring", direct=True)`` with its own plan; H is its
``hyperbatch_size()``. Two modes:

  sample  (default) the loader's sampler draws the batches, H consecutive ones together
          (``sample_many``; one at a time when H = 1, ``sample``), on ``--threads`` threads, as
          ``hetero_bench.py hyper`` does: no feature rows, no torch. Importing torch and PyG
          alone holds about 430 MiB of anonymous memory, so only this mode fits a 500M cap.
  loader  the loader's own epoch (``HeteroData`` batches with every type's feature rows); give
          the cap room for torch (for example memcap 1G with --memory 500M).

Prints one JSON line: the seconds to the N-th batch (after the loader is built and H chosen),
seconds per batch, the setup seconds, H and the loader's reason, the sampled edges and (sample
mode) a digest of every batch's sample and the sampler's bytes and reads; the process's bytes
read and peak RSS. Only public API is used, so the script runs against any build
(``benchmarks/ab.py`` runs it against two).

Usage (root, for memcap):
    ../shared/tools/memcap --drop-caches 500M -- python benchmarks/hetero_epoch.py \\
        /var/tmp/ringgnn-hyper/hetero6000k --batches 64 --memory 500M [--hyperbatch auto]
"""
import argparse
import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ringgnn


def sample_epoch(loader, seeds, h: int, threads: int):
    """Batches ``seeds`` drawn by the loader's sampler, ``h`` at a time per thread: (edges, digest,
    the sampler's I/O counters summed over the threads)."""
    sampler, target = loader.sampler, loader.target
    stats = {}

    def job(js):
        if len(js) == 1:
            got = [sampler.sample(seeds[js[0]], target, epoch=0, batch=js[0])]
        else:
            got = sampler.sample_many([{target: seeds[b]} for b in js], js, epoch=0)
        res = []
        for s in got:
            d = hashlib.sha256()
            for part in (s.node, s.row, s.col):
                for k in sorted(part):
                    d.update(part[k].tobytes())
            res.append((d.hexdigest(), sum(len(r) for r in s.row.values())))
        stats[threading.get_ident()] = sampler.io_stats()  # each thread's own core sampler
        return res

    jobs = [list(range(i, min(i + h, len(seeds)))) for i in range(0, len(seeds), h)]
    with ThreadPoolExecutor(threads) as pool:
        res = [r for rs in pool.map(job, jobs) for r in rs]
    io = {k: sum(int(v.get(k, 0)) for v in stats.values()) for k in ("bytes", "reads")}
    return sum(r[1] for r in res), hashlib.sha256("".join(r[0] for r in res).encode()).hexdigest(), io


def loader_epoch(loader, want: int) -> int:
    """The loader's first ``want`` batches: their edges."""
    edges = n = 0
    for batch in loader:
        edges += sum(int(batch[et].edge_index.shape[1]) for et in batch.edge_types)
        n += 1
        if n == want:
            break
    return edges


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--mode", choices=["sample", "loader"], default="sample")
    ap.add_argument("--target", default="paper")
    ap.add_argument("--batches", type=int, default=64, help="batches of epoch 0 to take (0: all)")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--fanouts", default="15,10", help="the same for every relation")
    ap.add_argument("--memory", default="500M")
    ap.add_argument("--hyperbatch", default="auto", help="auto or a number (1: per batch)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=None, help="the hot-row cache (default: the loader's plan decides)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    loader = ringgnn.HeteroLoader(a.dataset, [int(f) for f in a.fanouts.split(",")], a.target,
                                  batch_size=a.batch_size, shuffle=True, seed=0, threads=a.threads, backend="uring",
                                  feature_backend="uring", direct=True, memory=a.memory,
                                  hyperbatch=a.hyperbatch if a.hyperbatch == "auto" else int(a.hyperbatch),
                                  cache=a.cache)
    h, why = loader.hyperbatch_size()
    seeds = loader.batch_seeds(0)
    want = min(a.batches or len(seeds), len(seeds))
    setup = time.perf_counter() - t0
    out = dict(mode=a.mode, batches=want, epoch_batches=len(seeds), hyperbatch=h, hyperbatch_why=why,
               requested_hyperbatch=a.hyperbatch, memory=a.memory)
    t0 = time.perf_counter()
    if a.mode == "sample":
        edges, digest, io = sample_epoch(loader, seeds[:want], h, a.threads)
        out.update(digest=digest, sampler_bytes=io["bytes"], sampler_reads=io["reads"])
    else:
        edges = loader_epoch(loader, want)
    seconds = time.perf_counter() - t0
    out.update(seconds=seconds, per_batch_s=seconds / max(want, 1), setup_s=setup, edges=edges)
    with open("/proc/self/io") as f:
        out["read_bytes"] = int(next(ln for ln in f if ln.startswith("read_bytes")).split()[1])
    with open("/proc/self/status") as f:
        out["peak_rss"] = int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) * 1024
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
