#!/usr/bin/env python3
"""Finishing a block as a pipeline (``ringgnn.inference.finish``, issue 24) against the same build
without it: ``ringgnn embed RUN_DIR`` under ``memcap --drop-caches BUDGET`` with ``--memory
BUDGET --direct``, the variants alternating, each printing the layer's seconds, CPU seconds and
phases, the load average when it started and the cgroup's line.

Variants (the same build; the functions swapped in the child process before the command runs):
  full     as built;
  nosplit  the Rust aggregation's per-piece products on one thread (no ``split_rows``);
  old      that, and every slice pass one slice after the other on the calling thread (the
           finishing loop before ``infer_finish``; the plan's slices are still the pipeline's).

Usage:
    python benchmarks/finish_ab.py RUN_DIR --budget 768M --variants full,nosplit,old --repeat 3
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from _sizes import MEMCAP

CHILD = r'''
import contextlib, sys
import ringgnn.inference.engine as I, ringgnn.inference.partition as P, ringgnn.inference.finish as F
v = sys.argv[1]
if v in ("nosplit", "old"):
    @contextlib.contextmanager
    def one_thread(fn, workers):
        yield fn
    I.split_rows = P.split_rows = one_thread
if v == "old":
    pipelined = F.map_slices
    def one_after_the_other(starts, read, compute, write, workers, overlap=True):
        return pipelined(starts, read, compute, write, workers, overlap=False)
    I.map_slices = P.map_slices = F.map_slices = one_after_the_other
from ringgnn.cli import main
sys.exit(main(sys.argv[2:]))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--budget", default="768M")
    ap.add_argument("--variants", default="full,nosplit,old")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(args.run_dir))) as tmp:
        for _ in range(args.repeat):
            for v in args.variants.split(","):
                load = os.getloadavg()[0]
                p = subprocess.run([MEMCAP, "--drop-caches", args.budget, "--", sys.executable, "-c", CHILD, v,
                                    "embed", args.run_dir, "--memory", args.budget, "--direct",
                                    "--out", os.path.join(tmp, "emb.npy"), "--json", "--quiet"],
                                   capture_output=True, text=True)
                cg = "; ".join(line for line in p.stderr.splitlines() if line.startswith("memcap:"))
                try:
                    layer = json.loads(p.stdout[p.stdout.index("{"):])["layers"][-1]
                except (ValueError, KeyError, IndexError):
                    print(json.dumps(dict(variant=v, exit=p.returncode, stderr=p.stderr[-2000:])), flush=True)
                    continue
                print(json.dumps(dict(variant=v, load=round(load, 1), layer_s=round(layer["seconds"], 2),
                                      cpu_s=round(layer["cpu_seconds"], 2), phases=layer["phases"], memcap=cg)),
                      flush=True)


if __name__ == "__main__":
    main()
