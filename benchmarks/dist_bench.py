#!/usr/bin/env python3
"""Data-parallel training (issue 11): one process against N ranks under torchrun, in one run.

Both train the same model on the same dataset with the same global batch: the single process
with ``--batch-size B``, each of the N ranks with ``B / N`` (DDP's batch size is per rank), so an
epoch has the same number of optimizer steps of the same number of seeds. The two are run
alternately ``--repeat`` times; for each run the script reads ``metrics.json``: the training
pass of each epoch (``train_epoch_seconds``; evaluation is left out, it is the same work in both),
and per rank its stage seconds (sample, gather, train, waiting for batches). Epoch 0 is reported
apart (it warms the page cache and the hot-row cache's look-ahead comes before it).

With ``--cap SIZE`` every run is under ``memcap --drop-caches SIZE`` (the whole job: with N ranks
they share the cap) and each process gets ``--memory SIZE / processes``.

Usage:
    python benchmarks/dist_bench.py DATASET [--ranks 2] [--batch-size 1024] [--epochs 2] \\
        [--repeat 2] [--cap 4.77G] [--json out.json] [-- extra ringgnn train options]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _sizes import MEMCAP, parse_size


def run(args, ranks, out):
    batch = args.batch_size // ranks
    train = ["-m", "ringgnn", "train", args.dataset, "--batch-size", str(batch), "--epochs", str(args.epochs),
             "--out", out, "--overwrite", "--quiet", "--fanouts", args.fanouts, "--hidden", str(args.hidden),
             "--layers", str(len(args.fanouts.split(","))), *args.extra]
    if args.cap:
        train += ["--memory", str(parse_size(args.cap) // ranks)]
    if ranks == 1:
        cmd = [sys.executable, *train]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), *train]
    if args.cap:
        cmd = [MEMCAP, "--drop-caches", str(parse_size(args.cap)), "--", *cmd]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-4000:]}")
    with open(os.path.join(out, "metrics.json")) as f:
        m = json.load(f)
    epochs = []
    for e in m["epochs"]:
        per_rank = e.get("ranks") or [{k: e[k] for k in ("train_epoch_seconds", "sample_seconds", "gather_seconds",
                                                         "train_seconds", "wait_seconds", "eval_seconds")}]
        epochs.append(dict(epoch=e["epoch"], train_pass=e["train_epoch_seconds"], eval=e["eval_seconds"],
                           test_acc=e["test_acc"], ranks=per_rank))
    cap_line = next((l for l in p.stderr.splitlines() if l.startswith("memcap:") or "peak=" in l), None)
    return dict(ranks=ranks, batch_per_rank=batch, wall=wall, epochs=epochs, test_acc=m["test_acc"],
                memcap=cap_line, plan=m["memory_plan"]["text"], command=" ".join(cmd))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=1024, help="global batch (default 1024)")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cap", default=None, help="memcap of each run (the whole job), e.g. 4.77G")
    ap.add_argument("--json", default=None)
    ap.add_argument("extra", nargs="*", help="more `ringgnn train` options (after --)")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="dist_bench_")
    runs = []
    try:
        for rep in range(args.repeat):
            for ranks in (1, args.ranks):
                r = run(args, ranks, os.path.join(tmp, f"r{ranks}_{rep}"))
                runs.append(r)
                later = [e["train_pass"] for e in r["epochs"][1:]] or [r["epochs"][0]["train_pass"]]
                print(f"rep {rep}, {ranks} rank(s): epoch 0 {r['epochs'][0]['train_pass']:.1f} s, later epochs "
                      f"{', '.join(f'{t:.1f}' for t in later)} s, test acc {r['test_acc']:.4f}, wall {r['wall']:.0f} s",
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def median_pass(ranks, first):
        ts = [e["train_pass"] for r in runs if r["ranks"] == ranks for e in r["epochs"] if (e["epoch"] == 0) == first]
        return statistics.median(ts) if ts else float("nan")

    print("\n| ranks | batch per rank | epoch 0 training pass s | later epochs s (median) | test acc |")
    print("|---:|---:|---:|---:|---:|")
    for ranks in (1, args.ranks):
        accs = [r["test_acc"] for r in runs if r["ranks"] == ranks]
        print(f"| {ranks} | {args.batch_size // ranks} | {median_pass(ranks, True):.1f} | {median_pass(ranks, False):.1f} "
              f"| {statistics.mean(accs):.4f} |")
    for first in (True, False):
        one, many = median_pass(1, first), median_pass(args.ranks, first)
        print(f"ratio {args.ranks} ranks / 1 ({'epoch 0' if first else 'later epochs'}): {many / one:.2f}")
    print("\nstage seconds of the last epoch of the last repetition, per rank:")
    print("| ranks | rank | training pass | sample | gather | train | waiting |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for ranks in (1, args.ranks):
        r = [x for x in runs if x["ranks"] == ranks][-1]
        for i, st in enumerate(r["epochs"][-1]["ranks"]):
            print(f"| {ranks} | {i} | {st['train_epoch_seconds']:.1f} | {st['sample_seconds']:.1f} | "
                  f"{st['gather_seconds']:.1f} | {st['train_seconds']:.1f} | {st['wait_seconds']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), runs=runs), f, indent=2)


if __name__ == "__main__":
    main()
