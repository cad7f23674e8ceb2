#!/usr/bin/env python3
"""Issue 21's throughput benchmarks of link prediction: link batches sampled from disk under a
memory cap against in memory, and an end-to-end link-training epoch under a 25% cap against in
memory, each a same-run comparison (the configurations alternate, each run a fresh process).

  sample  R-MAT 23 (`ringgnn generate rmat --scale 23 --edge-factor 16 --self-loops drop --dedup`,
          its edges converted again with `--link-split val=0.1,test=0.001 --link-negatives 1`):
          the seeds are the `val` split, 10% of the edges (13.1M pairs). Link batches of 1024
          positives plus 1024 binary uniform negatives (`LinkSampler.epoch`, the Rust sampler's
          threads: 4096 seed nodes at most), fanouts 10,5. `--batches N` (default 1000) takes the
          epoch's first N batches (a whole epoch is 12,809 batches). Configurations: `memory`
          (the neighbor file in RAM, no cap), `uring` with O_DIRECT and `hyperbatch auto`, and with
          `hyperbatch 1`, each under `memcap --drop-caches CAP` with `--memory CAP` (default 480M:
          the neighbor file is 450 MiB, its offsets 64 MiB).
  train   a link dataset with features (an SBM of `--nodes` nodes, default 1M, average degree 5,
          256 float32 features: `ringgnn generate sbm`, its edges converted with `--features` and
          given lists `--link-split train=,val=,test= --link-negatives 20`: 100k random edges to
          train on, 5k each held out, so that an epoch is 391 batches while the graph and the
          feature file are whole): one epoch of `ringgnn train --task link --fanouts 5,5
          --batch-size 256 --eval sampled`, in memory (`--backend memory`) against under `memcap`
          of what the process needs besides the data (the in-memory run's plan reserve: Python,
          PyTorch, PyG, the model and a step's activations) plus 25% of the dataset's files, with
          `--memory` the same. Compared: the
          training pass (`train_epoch_seconds`), sampling and gathering, and the bytes read.

Usage (root, for memcap): python benchmarks/link_sample_bench.py sample|train [--work DIR]
    [--repeat 2] [--batches 1000] [--cap 480M] [--configs memory,auto,1] [--nodes 1000000]
Prints Markdown tables for docs/benchmarks.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _sizes import MEMCAP

SAMPLE = r'''
import json, sys, time
import ringgnn
from ringgnn.sampling.links import LinkPairs, LinkSampler, NegativeSampling
from ringgnn.sampling.sampler import NeighborSampler
path, backend, hyper, memory, batches = sys.argv[1:6]
ds = ringgnn.Dataset.open(path)
ns = NegativeSampling("binary", 1)
kw = dict(backend=backend, batch_size=LinkPairs(ds, 0, ns).most_seeds(1024))
if backend != "memory":
    kw.update(direct=True, hyperbatch=int(hyper) if hyper.isdigit() else hyper, memory=memory)
s = NeighborSampler(ds, [10, 5], **kw)
ls = LinkSampler(s, ns)
t0 = time.perf_counter()
edges = n = 0
for _, lb in ls.epoch("val", 1024, batches=range(int(batches))):
    edges += len(lb.sample.row)
    n += 1
dt = time.perf_counter() - t0
print(json.dumps(dict(backend=s.backend, batches=n, seconds=dt, edges=edges, io=s.io_stats())))
'''


def sh(cmd, **kw):
    print("$", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], **kw)


def ringgnn(*args):
    return [sys.executable, "-m", "ringgnn", *args]


def ensure_rmat(work: Path) -> Path:
    out = work / "rmat23-link"
    if (out / "manifest.json").exists():
        return out
    g = work / "rmat23"
    if not (g / "manifest.json").exists():
        sh(ringgnn("generate", "rmat", g, "--scale", "23", "--edge-factor", "16", "--self-loops", "drop", "--dedup",
                   "--quiet", "--overwrite"), check=True)
    edges = work / "rmat23-edges.npy"
    if not edges.exists():
        import numpy as np

        import ringgnn as rg

        ds = rg.Dataset.open(g)
        ip = ds.indptr()
        idx = np.fromfile(g / "indices.bin", dtype="<u4", count=int(ip[-1]))
        arr = np.lib.format.open_memmap(edges, mode="w+", dtype=np.uint32, shape=(2, len(idx)))
        arr[0] = idx
        arr[1] = np.repeat(np.arange(ds.num_nodes, dtype=np.uint32), np.diff(ip))
        arr.flush()
    sh(ringgnn("convert", edges, out, "--link-split", "val=0.1,test=0.001", "--link-negatives", "1", "--seed", "0",
               "--memory", "4G", "--quiet", "--overwrite"), check=True)
    return out


def memcap_line(err: str) -> str:
    return next((ln for ln in err.splitlines() if ln.startswith("memcap:")), "")


def sample(args):
    data = ensure_rmat(Path(args.work))
    every = {"memory": ("memory", "-", None), "auto": ("uring", "auto", args.cap), "1": ("uring", "1", args.cap)}
    configs = [every[c] for c in args.configs.split(",")]
    runs = {c: [] for c in configs}
    for rep in range(args.repeat):
        for c in (configs if rep % 2 == 0 else configs[::-1]):
            backend, hyper, cap = c
            cmd = [sys.executable, "-c", SAMPLE, data, backend, hyper, cap or "-", args.batches]
            if cap:
                cmd = [MEMCAP, "--drop-caches", cap, "--"] + cmd
            r = sh(cmd, capture_output=True, text=True, env=dict(os.environ))
            if r.returncode != 0:
                sys.exit(f"failed: {r.stderr[-2000:]}")
            out = json.loads(r.stdout.strip().splitlines()[-1])
            out["memcap"] = memcap_line(r.stderr)
            runs[c].append(out)
            print(json.dumps({"config": c, **out}), file=sys.stderr)
    base = statistics.median(o["seconds"] for o in runs[configs[0]])
    print(f"\nR-MAT 23 link batches: {args.batches} batches of 1024 positives + 1024 negatives from `val` (10% of "
          f"the edges), fanouts 10,5; median of {args.repeat}\n")
    print("| configuration | seconds | vs memory | sampled edges/s | read | sequential | hyperbatches | memcap |")
    print("|---|---|---|---|---|---|---|---|")
    for c, rs in runs.items():
        sec = statistics.median(o["seconds"] for o in rs)
        o = rs[0]
        io = o["io"]
        name = "memory (no cap)" if c[0] == "memory" else f"{o['backend']}, hyperbatch {c[1]}, memcap {c[2]}"
        hb = f"{io['hyperbatches']} of {io['hyperbatch_batches'] / max(1, io['hyperbatches']):.0f}" \
            if io["hyperbatches"] else "-"
        peak = o["memcap"].split("peak=")[1].split()[0] if "peak=" in o["memcap"] else "-"
        fail = o["memcap"].split("failcnt=")[1].split()[0] if "failcnt=" in o["memcap"] else "-"
        print(f"| {name} | {sec:.2f} | {sec / base:.2f}x | {o['edges'] / sec / 1e6:.1f} M | "
              f"{io['bytes'] / 2**30:.2f} GiB | {io['sequential_bytes'] / 2**30:.2f} GiB | {hb} | "
              f"{'-' if peak == '-' else f'peak {int(peak) / 2**20:.0f} MiB, failcnt {fail}'} |")


def ensure_sbm(work: Path, nodes: int) -> Path:
    out = work / f"sbm{nodes // 1000}k-link"
    if (out / "manifest.json").exists():
        return out
    import numpy as np

    import ringgnn as rg

    g = work / f"sbm{nodes // 1000}k"
    if not (g / "manifest.json").exists():
        sh(ringgnn("generate", "sbm", g, "--nodes", nodes, "--classes", "16", "--avg-degree", "5", "--feature-dim",
                   "256", "--quiet", "--overwrite"), check=True)
    ds = rg.Dataset.open(g)
    ip = ds.indptr()
    idx = np.fromfile(g / "indices.bin", dtype="<u4", count=int(ip[-1]))
    edges = np.stack([idx, np.repeat(np.arange(ds.num_nodes, dtype=np.uint32), np.diff(ip))])
    np.save(work / "sbm-edges.npy", edges)
    # Supervision and held-out pairs: random distinct non-loop edges, 100k to train on (the
    # message-passing graph keeps every edge but the held-out ones), 5k each held out.
    keys = np.unique(edges[0].astype(np.int64) * nodes + edges[1])
    keys = keys[keys // nodes != keys % nodes]
    pick = np.random.default_rng(0).choice(len(keys), 110_000, replace=False)
    for name, part in (("train", pick[:100_000]), ("val", pick[100_000:105_000]), ("test", pick[105_000:])):
        np.save(work / f"sbm-{name}.npy", np.stack([keys[part] // nodes, keys[part] % nodes]))
    from ringgnn.pyg import RingFeatureStore

    x = RingFeatureStore(ds).reader().gather(np.arange(ds.num_nodes, dtype=np.int64))
    np.save(work / "sbm-x.npy", x)
    del x
    spec = ",".join(f"{k}={work / f'sbm-{k}.npy'}" for k in ("train", "val", "test"))
    sh(ringgnn("convert", work / "sbm-edges.npy", out, "--features", work / "sbm-x.npy", "--link-split", spec,
               "--link-negatives", "20", "--seed", "0", "--quiet", "--overwrite"), check=True)
    return out


def train(args):
    work = Path(args.work)
    data = ensure_sbm(work, args.nodes)
    size = sum(f.stat().st_size for f in data.iterdir())
    base = cap = None
    runs = {"memory": [], "capped": []}
    for rep in range(args.repeat):
        # The in-memory run comes first once: its plan's reserve (what the process holds before
        # the loader: Python, PyTorch, PyG, the model, and the activations of a step) sets the cap.
        for name in (["memory", "capped"] if rep % 2 == 0 else ["capped", "memory"]):
            out = work / f"run-{name}-{rep}"
            cmd = ringgnn("train", data, "--task", "link", "--fanouts", "5,5", "--batch-size", "256", "--epochs", "1",
                          "--eval", "sampled", "--out", out, "--overwrite", "--quiet")
            if name == "capped":
                cmd = [MEMCAP, "--drop-caches", cap, "--"] + cmd + ["--memory", cap]
            else:
                cmd = cmd + ["--backend", "memory"]
            t0 = time.perf_counter()
            r = sh(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"failed: {r.stderr[-2000:]}")
            m = json.loads((out / "metrics.json").read_text())
            if base is None:
                base = m["memory_plan"]["reserve"]
                cap = f"{(base + size // 4) // 2**20}M"
            e = m["epochs"][0]
            runs[name].append(dict(wall=time.perf_counter() - t0, epoch=e, plan=m["memory_plan"]["text"],
                                   memcap=memcap_line(r.stderr), loader=m["loader"]))
            print(json.dumps({"config": name, "wall": runs[name][-1]["wall"], **e}), file=sys.stderr)
    med = {k: statistics.median(x["epoch"]["train_epoch_seconds"] for x in v) for k, v in runs.items()}
    print(f"\nLink training epoch, SBM {args.nodes:,} nodes, 256 f32 features, dataset {size / 2**20:.0f} MiB, "
          f"cap {cap} (the in-memory run's reserve, {base / 2**20:.0f} MiB, plus 25% of the dataset); median of "
          f"{args.repeat}\n")
    print("| configuration | training pass s | vs memory | sample s | gather s | train s | wait s | features read |"
          " val AUC | memcap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, v in runs.items():
        e = v[0]["epoch"]
        print(f"| {k} | {med[k]:.1f} | {med[k] / med['memory']:.2f}x | {e['sample_seconds']:.1f} | "
              f"{e['gather_seconds']:.1f} | {e['train_seconds']:.1f} | {e['wait_seconds']:.1f} | "
              f"{e['feature_bytes_read'] / 2**20:.0f} MiB | {e['val_auc']:.3f} | {v[0]['memcap'] or '-'} |")
    for k, v in runs.items():
        print(f"\n{k} plan: {v[0]['plan']}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["sample", "train"])
    p.add_argument("--work", default="/work/data")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--batches", default="1000")
    p.add_argument("--cap", default="480M")
    p.add_argument("--configs", default="memory,auto,1",
                   help="sample: memory (no cap), auto (hyperbatch auto, capped), 1 (hyperbatch 1, capped)")
    p.add_argument("--nodes", type=int, default=1000000)
    args = p.parse_args()
    {"sample": sample, "train": train}[args.what](args)


if __name__ == "__main__":
    main()
