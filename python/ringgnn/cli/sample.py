"""``ringgnn sample``: run sampling epochs and report time, sampled edges per second (SEPS) and I/O
(the RingSampler experiment as a command)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable, Dict, Optional

import numpy as np

from .. import _options, progress
from .._core import InputError
from .._files import os_errors
from .._options import BACKENDS, count_arg, positive_arg, size_arg
from .._threads import cores
from ..data.dataset import open_homogeneous
from ..sampling.sampler import NeighborSampler
from .._format import human, human_bytes


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sample", help="run neighbor-sampling epochs and report time, SEPS and I/O",
                       description="Run neighbor-sampling epochs over a dataset and print, per epoch, the time, "
                       "sampled edges, sampled edges per second (SEPS) and I/O counters.")
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--fanouts", default="20,15,10", metavar="F1,F2,...",
                   help="neighbors per hop, -1 = all (default 20,15,10)")
    p.add_argument("--batch-size", type=positive_arg, default=1024, metavar="B", help="seeds per batch (default 1024)")
    p.add_argument("--seeds", default=None, metavar="train|all|FILE.npy",
                   help="seed nodes: a split name, 'all', or a .npy file of node ids (default: train if present, "
                   "else all)")
    p.add_argument("--epochs", type=positive_arg, default=1, metavar="N", help="epochs to run (default 1)")
    p.add_argument("--backend", choices=list(BACKENDS), default="auto", help="read backend (default auto)")
    p.add_argument("--direct", action="store_true", help="io_uring with O_DIRECT: bypass the page cache")
    p.add_argument("--threads", type=positive_arg, default=None, help="sampling threads (default: available cores)")
    p.add_argument("--seed", type=count_arg, default=0, help="random seed (default 0)")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE",
                   help="budget of the whole process (default: what it holds plus half the available memory)")
    p.add_argument("--replace", action="store_true", help="draw neighbors with replacement")
    p.add_argument("--hyperbatch", default="auto", metavar="N|auto",
                   help="batches sampled together when reading from disk, each page read once per hop for all "
                   "(default auto: as many as the budget holds; 1: one at a time)")
    p.add_argument("--spill", default="auto", metavar="auto|on|off",
                   help="spill a hyperbatch's finished samples to a file so that more batches share a pass "
                   "(default auto: when that fits more batches)")
    p.add_argument("--spill-dir", default=None, metavar="DIR",
                   help="directory for the spill file (default: beside the dataset)")
    p.add_argument("--json", action="store_true", help="one JSON object per epoch on stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sample)


def _threads(n: Optional[int]) -> int:
    return cores() if n is None else n


def run_epoch(sampler: NeighborSampler, seeds: np.ndarray, args: argparse.Namespace, epoch: int,
              started: Callable[[], None] = lambda: None) -> Dict[str, Any]:
    """One epoch; ``started`` runs once the epoch is set up (its seeds checked by the core)."""
    before = sampler.io_stats()
    edges = nodes = batches = 0
    t0 = time.perf_counter()
    it = sampler.epoch(seeds, args.batch_size, shuffle=True, epoch=epoch)
    started()
    with progress.bar(len(it), f"epoch {epoch}", "batch", disable=args.quiet or args.json) as bar:
        for sub in it:
            edges += sub.num_edges
            nodes += sub.num_nodes
            batches += 1
            bar.update(1)
    seconds = time.perf_counter() - t0
    after = sampler.io_stats()
    delta = {k: after[k] - before[k] for k in after}
    backend = sampler.backend
    hyper = delta["hyperbatches"]
    return {"epoch": epoch, "seconds": seconds, "batches": batches, "seeds": int(len(seeds)), "sampled_edges": edges,
            "sampled_nodes": nodes, "seps": edges / seconds if seconds > 0 else 0.0, "reads": delta["reads"],
            "bytes_read": delta["bytes"], "hyperbatch": delta["hyperbatch_batches"] / hyper if hyper else 1,
            **{k: delta[k] for k in ("sequential_bytes", "random_bytes", "spilled_bytes")}, "backend": backend,
            "fallback_reason": sampler.fallback_reason, "direct": backend == "uring-direct",
            "threads": _threads(args.threads), "fanouts": sampler.fanouts, "batch_size": args.batch_size}


def _cache(r: Dict[str, Any]) -> str:
    if r["backend"] == "memory":
        return "neighbor file in memory"
    return "page cache bypassed (O_DIRECT)" if r["direct"] else "page cache used"


def cmd_sample(args: argparse.Namespace) -> int:
    ds = open_homogeneous(args.dataset, "ringgnn sample")
    spec = args.seeds if args.seeds is not None else ("train" if "train" in ds.split_names else "all")
    seeds = _options.seeds(ds, spec, "--seeds")
    if len(seeds) == 0:
        raise InputError(f"--seeds {spec}: no seed nodes to sample from")
    sampler = NeighborSampler(ds, _options.fanouts(args.fanouts), **{k: getattr(args, k) for k in (
        "replace", "backend", "direct", "threads", "seed", "memory", "batch_size", "hyperbatch", "spill", "spill_dir")})

    def header() -> None:
        if args.json:
            return
        reason = sampler.fallback_reason
        print(f"sampling {ds.path}: {len(seeds):,} seeds, fanouts {','.join(map(str, sampler.fanouts))}, "
              f"batch {args.batch_size}, backend {sampler.backend}" + (f" ({reason})" if reason else "")
              + f", {_threads(args.threads)} threads")

    for epoch in range(args.epochs):
        with os_errors("sampling", ds.path):
            r = run_epoch(sampler, seeds, args, epoch, header if epoch == 0 else lambda: None)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(
                f"epoch {epoch}: {r['seconds']:.3f} s, {r['batches']:,} batches, {r['sampled_edges']:,} sampled edges, "
                f"{human(r['seps'])} SEPS; reads {r['reads']:,}, {human_bytes(r['bytes_read'])} read"
                + (f" ({human_bytes(r['sequential_bytes'])} sequential, hyperbatches of {r['hyperbatch']:.1f}"
                   + (f", {human_bytes(r['spilled_bytes'])} of samples spilled" if r["spilled_bytes"] else "") + ")"
                   if r["hyperbatch"] != 1 else "") + ", "
                f"{_cache(r)} (backend {r['backend']})",
                flush=True,
            )
    return 0
