#!/usr/bin/env python3
"""Layer-wise inference: reading the next piece ahead (``overlap=True``, the default) against
reading and folding in turn (``overlap=False``), alternately in one run.

Each run computes the first ``--blocks`` destination blocks of layer 1 of RUN_DIR's model
under ``memcap --drop-caches CAP`` with ``memory=CAP`` and ``O_DIRECT``, and reports the seconds
and the rows read. The blocks are the same in both (the pieces' share of the budget is split in
two when reading ahead, the blocks' share is not).

Usage:
    python benchmarks/infer_overlap_ab.py RUN_DIR [--cap 4.77G] [--blocks 2] [--repeat 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from _sizes import MEMCAP, parse_size


CHILD = r'''
import json, sys, time
import ringgnn, ringgnn.inference as I
run, cap, blocks, overlap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
import torch
state = torch.load(run + "/best.pt", map_location="cpu", weights_only=True)
ds = ringgnn.Dataset.open(state["metrics"]["dataset"])
li = I.LayerwiseInference(ds, I.load_checkpoint(run, ds), memory=cap, direct=True, overlap=overlap)
ends = [b for _, b in li._grid_blocks(0, None)][:blocks]
reader = ringgnn._core.FeatureReader(ds.path, direct=True)
class Done(Exception):
    pass
t0 = time.perf_counter()
def writer(a, rows):
    if a + len(rows) >= ends[-1]:
        raise Done
try:
    with torch.no_grad():
        li.grid_layer(0, reader, writer)
except Done:
    pass
print(json.dumps(dict(overlap=overlap, seconds=time.perf_counter() - t0, nodes=ends[-1],
                      rows_bytes=reader.stats()["bytes_read"], plan=li.plan)))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--cap", default="4.77G")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cap = parse_size(args.cap)
    results = []
    for rep in range(args.repeat):
        for overlap in (True, False):
            cmd = [MEMCAP, "--drop-caches", str(cap), "--", sys.executable, "-c", CHILD, args.run_dir, str(cap),
                   str(args.blocks), "1" if overlap else "0"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"run failed:\n{p.stderr[-3000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["memcap"] = next((l for l in p.stderr.splitlines() if l.startswith("memcap:")), None)
            results.append(r)
            print(f"rep {rep}, overlap {overlap}: {r['seconds']:.1f} s for {r['nodes']:,} nodes, "
                  f"{r['rows_bytes'] / 1e9:.1f} GB of rows; {r['memcap']}", flush=True)
    on = statistics.median(r["seconds"] for r in results if r["overlap"])
    off = statistics.median(r["seconds"] for r in results if not r["overlap"])
    print(f"\nmedian: overlap {on:.1f} s, in turn {off:.1f} s; ratio {on / off:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), runs=results, ratio=on / off), f, indent=2)


if __name__ == "__main__":
    main()
