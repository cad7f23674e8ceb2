#!/usr/bin/env python3
"""Layer-wise inference, two A/B comparisons run alternately in one run:

- ``--what overlap`` (default): reading the next piece ahead (``overlap=True``, the default)
  against reading and folding in turn. Each run computes the first ``--blocks`` destination
  blocks of layer 1 of RUN_DIR's model (the blocks are the same in both: the pieces' share of
  the budget is split in two when reading ahead, the blocks' share is not).
- ``--what narrow``: the last layer (hidden -> classes) aggregating ``W x`` (its narrower
  output, the default) against aggregating ``x``. Each run computes the first ``--nodes``
  destination nodes of the last layer, fed the dataset's features as its input (they are as
  wide as the hidden layer in the issue-4 model; the outputs are not meaningful, the costs are).

Every run is under ``memcap --drop-caches CAP`` with ``memory=CAP`` and ``O_DIRECT``.

Usage:
    python benchmarks/infer_overlap_ab.py RUN_DIR [--what overlap|narrow] [--cap 4.77G] [--blocks 2]
        [--nodes 8000000] [--repeat 2]
"""
import argparse
import json
import statistics
import subprocess
import sys

from _sizes import MEMCAP, parse_size


CHILD = r'''
import json, sys, time
import ringgnn, ringgnn.inference.run as I
from ringgnn.models.checkpoints import load_checkpoint
run, cap, what, size, on = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
import torch
state = torch.load(run + "/best.pt", map_location="cpu", weights_only=True)
ds = ringgnn.Dataset.open(state["metrics"]["dataset"])
li = I.LayerwiseInference(ds, load_checkpoint(run, ds), memory=cap, direct=True,
                          overlap=on if what == "overlap" else True)
k = 0 if what == "overlap" else len(li.net.convs) - 1
assert li.widths[k] == ds.feature_dim, "the features stand in for the last layer's input"
if what == "narrow" and not on:
    li._narrow = lambda k: False
ends = [b for _, b in li._blocks(k, None)][:size] if what == "overlap" else [size]
reader = ringgnn._core.FeatureReader(ds.path, direct=True)
class Done(Exception):
    pass
t0 = time.perf_counter()
def writer(a, rows):
    if a + len(rows) >= ends[-1]:
        raise Done
try:
    with torch.no_grad():
        li.grid_layer(k, reader, writer)
except Done:
    pass
print(json.dumps(dict(on=on, seconds=time.perf_counter() - t0, nodes=ends[-1],
                      rows_bytes=reader.stats()["bytes_read"], plan=li.plan)))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--cap", default="4.77G")
    ap.add_argument("--what", choices=["overlap", "narrow"], default="overlap")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=8_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cap = parse_size(args.cap)
    results = []
    for rep in range(args.repeat):
        for on in (True, False):
            size = args.blocks if args.what == "overlap" else args.nodes
            cmd = [MEMCAP, "--drop-caches", str(cap), "--", sys.executable, "-c", CHILD, args.run_dir, str(cap),
                   args.what, str(size), "1" if on else "0"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"run failed:\n{p.stderr[-3000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["memcap"] = next((l for l in p.stderr.splitlines() if l.startswith("memcap:")), None)
            results.append(r)
            print(f"rep {rep}, {args.what} {on}: {r['seconds']:.1f} s for {r['nodes']:,} nodes, "
                  f"{r['rows_bytes'] / 1e9:.1f} GB of rows; {r['memcap']}", flush=True)
    on = statistics.median(r["seconds"] for r in results if r["on"])
    off = statistics.median(r["seconds"] for r in results if not r["on"])
    print(f"\nmedian: {args.what} on {on:.1f} s, off {off:.1f} s; ratio {on / off:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), runs=results, ratio=on / off), f, indent=2)


if __name__ == "__main__":
    main()
