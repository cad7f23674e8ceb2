#!/usr/bin/env python3
"""End-to-end training benchmark for issue 4: one epoch of GraphSAGE, three ways, in one run.

  (a) ringgnn   the pipelined loader: io_uring with O_DIRECT for neighbor lists and feature
                rows, hot-row cache of --cache-frac of the features (look-ahead counts), under a
                memcap of --cap-frac of the dataset's size, --memory = that cap; hyperbatches
                auto (issue 9: batches sampled together, feature rows staged when the cost
                model says so);
  (a1) perbatch the same, one batch at a time (`hyperbatch=1`, as before issue 9);
  (b) memory    the same loader with the features in RAM (upper bound, no cap), and the
                neighbor file too with --memory-graph memory (the default, uring, samples from
                disk: the largest dataset's features and neighbor file do not both fit in 24 GiB);
  (c) naive     numpy memmap of the feature file + our sampler (io_uring, O_DIRECT) on the
                calling thread, no pipelining, no cache, under the same memcap.

Every configuration trains the same model (GraphSAGE, PyG layers, trimmed per layer) on the same
batches (same sampler seed): fanouts 15,10,5, batch 1024 by default. For each: epoch time, the
stages (sample, gather, train: worker seconds for (a)/(b), where they overlap), time the
training loop waited for batches, feature bytes read against the bytes of the rows needed
(read amplification), read throughput against the device (about 92k random 4 KiB reads/s, 1.1
GB/s sequential), cache hit rate, peak RSS and the cgroup's peak (RSS + page cache).

Usage (root, for memcap and drop_caches):
    python benchmarks/train_bench.py DATASET [--batches N] [--cap-frac 0.25] [--cache-frac 0.1]
Quick configuration, to compare two builds of ringgnn in one run:
    ringgnn generate sbm /var/tmp/ringgnn-bench/sbm1m --nodes 1000000 --classes 16 --avg-degree 20 \\
        --feature-dim 128 --split train=0.012,val=0.004,test=0.004 --seed 1
    python benchmarks/train_bench.py /var/tmp/ringgnn-bench/sbm1m --configs ringgnn,memory \\
        --compare OTHER_PYTHON --repeat 3
runs each configuration alternately with this build and with OTHER_PYTHON (a virtualenv holding
another build) and adds a table of median epoch times and their ratio.
Generate the dataset of docs/benchmarks.md with
    ringgnn generate sbm /var/tmp/ringgnn-bench/sbm24m --nodes 24000000 --classes 16 \\
        --avg-degree 30 --feature-dim 128 --split train=0.0005,val=0.0002,test=0.0005 --seed 1 --memory 4G
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"
DEVICE_READS = 92_000
DEVICE_SEQ = 1.1e9


def dataset_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


class AnonPeak:
    """Largest anonymous resident memory (RssAnon) seen, sampled every 0.1 s: unlike VmHWM it
    leaves out shared-library pages, which a cgroup limit reclaims under pressure."""

    def __init__(self):
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.1):
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        self.peak = max(self.peak, int(line.split()[1]) * 1024)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def model_and_opt(in_dim, classes, hidden, layers):
    import torch
    from torch_geometric.nn import GraphSAGE

    torch.manual_seed(0)
    net = GraphSAGE(in_dim, hidden, layers, classes, dropout=0.3, act="relu")
    return net, torch.optim.Adam(net.parameters(), lr=0.005)


def step(net, opt, x, edge_index, y, bs, nodes_per_hop, edges_per_hop):
    import torch.nn.functional as F

    net.train()
    opt.zero_grad()
    out = net(x, edge_index, num_sampled_nodes_per_hop=nodes_per_hop, num_sampled_edges_per_hop=edges_per_hop)[:bs]
    y = y[:bs]
    labeled = y >= 0
    loss = F.cross_entropy(out[labeled], y[labeled])
    loss.backward()
    opt.step()
    return float(loss)


def child(args) -> dict:
    import numpy as np
    import torch
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    import ringgnn

    anon = AnonPeak()
    ds = ringgnn.Dataset.open(args.dataset)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    seeds = ds.split("train")[: args.batches * args.batch_size]
    net, opt = model_and_opt(ds.feature_dim, ds.num_classes, args.hidden, len(fanouts))
    res = dict(config=args.child, batches=0, sample=0.0, gather=0.0, train=0.0, wait=0.0, needed_bytes=0,
               feature_bytes_read=0, sampler_bytes_read=0, cache_hits=0, distinct_rows=0)
    row_bytes = ds.manifest["features"]["row_bytes"]
    t_setup = time.perf_counter()
    if args.child in ("ringgnn", "perbatch", "memory"):
        from ringgnn._options import process_rss
        from ringgnn.models.gnn import activation_bytes

        # As `ringgnn train` does: the budget covers the process, so the runtime, the model and
        # the largest batch's activations are reserved before the loader splits the rest.
        reserve = process_rss() + activation_bytes("sage", ds, fanouts, args.batch_size, args.hidden)
        # (b) holds the features in RAM (and the neighbor file too when both fit; on this 24 GiB
        # machine the largest dataset's 15 + 3.3 GiB do not, so it samples with io_uring).
        opts = dict(backend=args.memory_graph, feature_backend="memory", direct=args.memory_graph == "uring",
                    memory=int(mem_available() * 0.95)) if args.child == "memory" else dict(
            backend="uring", direct=True, memory=args.memory, cache=args.cache, presample_batches=args.batches,
            hyperbatch=1 if args.child == "perbatch" else "auto")
        opts["reserve"] = reserve
        opts["hold"] = 1  # the loop below releases each batch before asking for the next
        loader = ringgnn.Loader(ds, fanouts, args.batch_size, split=seeds, shuffle=True, seed=1, **opts)
        res["setup"] = time.perf_counter() - t_setup
        res["plan"] = loader.plan()["text"]
        t0 = time.perf_counter()
        it = iter(loader)
        while True:
            t1 = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            t2 = time.perf_counter()
            step(net, opt, b.x, b.edge_index, b.y, b.batch_size, b.num_sampled_nodes, b.num_sampled_edges)
            del b
            res["wait"] += t2 - t1
            res["train"] += time.perf_counter() - t2
        res["epoch"] = time.perf_counter() - t0
        le, st = loader.last_epoch, loader.stats()
        res["hyperbatch"] = {k: st[k] for k in ("sampler_hyperbatches", "sampler_hyperbatch_batches",
                                                "sampler_sequential_bytes", "sampler_random_bytes",
                                                "staged_hyperbatches", "unstaged_hyperbatches",
                                                "est_per_batch_seconds", "est_staged_seconds",
                                                "staging_pass_bytes", "staging_written_bytes", "staging_seconds",
                                                "staging_load_seconds", "staging_write_seconds",
                                                "staged_gather_seconds", "staged_read_seconds",
                                                "random_gather_seconds", "staging_needed_bytes") if k in st}
        res.update(batches=le["batches"], sample=le["sample"], gather=le["gather"],
                   feature_bytes_read=le["bytes_read"], cache_hits=le["cache_hits"],
                   distinct_rows=le["distinct_rows"], needed_bytes=le["distinct_rows"] * row_bytes,
                   sampler_bytes_read=st["sampler_bytes"], cached_rows=st["cached_rows"],
                   cache_bytes=st["cache_bytes"], presample_seconds=st["presample_seconds"])
    else:
        f = ds.manifest["features"]
        assert f["dtype"] == "f32" and f["rows_per_page"] * row_bytes == 4096, "naive baseline: unpadded f32 rows"
        path = os.path.join(args.dataset, ds.manifest["files"]["features"]["path"])
        feats = np.memmap(path, dtype="<f4", mode="r").reshape(-1, ds.feature_dim)
        labels = ds.labels
        sampler = ringgnn.NeighborSampler(ds, fanouts, backend="uring", direct=True, seed=1, threads=1,
                                          memory=args.memory)
        res["setup"] = time.perf_counter() - t_setup
        # The loader's batches (same shuffle, same samples), each sampled on this thread when
        # its turn comes: no pipelining.
        perm = np.load(args.perm)
        t0 = time.perf_counter()
        for bi in range(0, min(len(perm), args.naive_batches * args.batch_size), args.batch_size):
            t1 = time.perf_counter()
            sub = sampler.sample(perm[bi: bi + args.batch_size], epoch=0, batch=bi // args.batch_size)
            t2 = time.perf_counter()
            r0 = read_bytes()
            x = torch.from_numpy(np.ascontiguousarray(feats[sub.node]))
            res["feature_bytes_read"] += read_bytes() - r0
            y = torch.from_numpy(labels[sub.node])
            t3 = time.perf_counter()
            ei = torch.from_numpy(np.stack([sub.row, sub.col]))
            step(net, opt, x, ei, y, sub.batch_size, sub.num_sampled_nodes, sub.num_sampled_edges)
            del x
            res["sample"] += t2 - t1
            res["gather"] += t3 - t2
            res["train"] += time.perf_counter() - t3
            res["batches"] += 1
            res["distinct_rows"] += len(sub.node)
            res["needed_bytes"] += len(sub.node) * row_bytes
        res["epoch"] = time.perf_counter() - t0
        res["sampler_bytes_read"] = sampler.io_stats()["bytes"]
    res["peak_rss"] = peak_rss()
    res["peak_anon"] = anon.stop()
    return res


def shuffled(dataset, seeds, seed, epoch):
    """The loader's epoch order of `seeds` (its Fisher-Yates shuffle with the stream (seed,
    "shuffle", epoch)), read off an epoch of one-seed batches."""
    import numpy as np
    from ringgnn._core import Sampler

    s = Sampler(dataset, [1], seed=seed, backend="pread", threads=1)
    return np.array([int(t[1][0]) for t in s.epoch(np.asarray(seeds, dtype=np.int64), 1, True, epoch, False)])


def orchestrate(args):
    ds = Path(args.dataset)
    size = dataset_bytes(ds)
    cap = args.cap or int(size * args.cap_frac)
    m = json.loads((ds / "manifest.json").read_text())
    feat = m["files"]["features"]["payload_bytes"]
    cache = int(feat * args.cache_frac) if args.cache_frac >= 0 else None
    common = [sys.executable, __file__, str(ds), "--memory-graph", args.memory_graph, "--batches", str(args.batches),
              "--naive-batches",
              str(args.naive_batches), "--batch-size",
              str(args.batch_size), "--fanouts", args.fanouts, "--hidden", str(args.hidden)]
    cache_text = "chosen by the plan" if cache is None else f"{cache / 2**30:.2f} GiB ({args.cache_frac:.0%} of features)"
    print(f"dataset {ds}: {size / 2**30:.2f} GiB ({feat / 2**30:.2f} GiB features); cap {cap / 2**30:.2f} GiB "
          f"({args.cap_frac:.0%}), cache {cache_text}", flush=True)
    import numpy as np
    import ringgnn

    seeds = ringgnn.Dataset.open(ds).split("train")[: args.batches * args.batch_size]
    perm = Path(f"/tmp/train_bench_perm_{os.getpid()}.npy")
    np.save(perm, shuffled(str(ds), seeds, 1, 0))
    builds = {"this": sys.executable}
    if args.compare:
        builds["other"] = args.compare
    configs = args.configs.split(",")
    # The configurations run with the other build too (default: all).
    compared = set(args.compare_configs.split(",")) if args.compare_configs else set(configs)
    runs = {(b, name): [] for b in builds for name in configs if b == "this" or name in compared}
    for rep in range(args.repeat):
        for name in configs:
            # Alternate which build goes first, so that neither always runs on a warmer machine.
            for b, exe in list(builds.items())[:: -1 if rep % 2 else 1]:
                if (b, name) not in runs:
                    continue
                cmd = [exe] + common[1:] + ["--child", name, "--perm", str(perm)]
                if name in ("ringgnn", "perbatch", "naive"):
                    cmd = [str(MEMCAP), "--drop-caches", str(cap), "--"] + cmd + ["--memory", str(cap)]
                    if cache is not None:
                        cmd += ["--cache", str(cache)]
                # Its budget is 95% of what is available: the features and about 3.7 GiB more.
                need = feat + (5 << 30) if name == "memory" else 0
                runs[(b, name)].append(run_child(cmd, name, args.batches, need))
    # Each configuration's run of median epoch time.
    med = {k: sorted(v, key=lambda r: r["epoch"])[len(v) // 2] for k, v in runs.items()}
    results = {name: r for (b, name), r in med.items() if b == "this"}
    table(results, cap)
    if args.compare:
        print(f"\n| config | this build epoch s | other build epoch s | this / other (median of {args.repeat}) |")
        print("|---|---:|---:|---:|")
        for name in configs:
            if ("other", name) not in med:
                continue
            a, o = med[("this", name)]["epoch"], med[("other", name)]["epoch"]
            print(f"| {name} | {a:.2f} | {o:.2f} | {a / o:.2f} |")
    if "memory" in configs:
        # Each capped configuration against the in-memory epoch of the same run (this build's
        # when the other build did not run it), and its gather stage against its training.
        for (b, name), r in sorted(med.items()):
            if name == "memory":
                continue
            m = med.get((b, "memory"), med[("this", "memory")])
            print(f"- {b} build, {name}: epoch {r['epoch']:.1f} s = {r['epoch'] / m['epoch']:.2f}x the in-memory "
                  f"{m['epoch']:.1f} s; gather / train {r['gather'] / r['train']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


def run_child(cmd, name, batches, need=0) -> dict:
    # On a shared machine: wait (up to 15 min) until the in-memory configuration's features fit,
    # and try again (three times) when others took the memory meanwhile.
    deadline = time.monotonic() + 900
    for attempt in range(3):
        while mem_available() < need and time.monotonic() < deadline:
            time.sleep(10)
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0 or not need or "does not fit" not in r.stderr:
            break
        print(f"{name}: the features did not fit the memory available; waiting", file=sys.stderr, flush=True)
    if r.returncode != 0:
        sys.exit(f"{name} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    out = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    peak = [l for l in r.stderr.splitlines() if l.startswith("memcap:")]
    out["memcap"] = peak[0] if peak else None
    out["wall"] = time.perf_counter() - t
    if out["batches"] < batches:
        # Measured on the first batches only: scale the times and byte counts to the epoch.
        k = batches / out["batches"]
        out["measured_batches"] = out["batches"]
        for key in ("epoch", "sample", "gather", "train", "wait", "needed_bytes", "feature_bytes_read",
                    "sampler_bytes_read", "distinct_rows", "cache_hits"):
            out[key] *= k
    print(json.dumps(out), flush=True)
    return out


def table(results, cap):
    print()
    print("| config | epoch s | sample s | gather s | train s | waiting s | slowest stage s | epoch / slowest | "
          "feature MB read | read / needed | read MB/s | 4 KiB pages/s (% of 92k) | cache hit rate | peak RSS (anon) GiB |")
    print("|---|" + "---:|" * 13)
    for name, r in results.items():
        slowest = max(r["sample"], r["gather"], r["train"])
        mb = r["feature_bytes_read"] / 1e6
        amp = r["feature_bytes_read"] / r["needed_bytes"] if r["needed_bytes"] else 0
        busy = r["gather"] if r["gather"] else 1
        rate = r["feature_bytes_read"] / busy
        iops = rate / 4096
        hit = r["cache_hits"] / r["distinct_rows"] if r["distinct_rows"] else 0
        est = f" (est. from {r['measured_batches']} batches)" if r.get("measured_batches") else ""
        print(f"| {name} | {r['epoch']:.1f}{est} | {r['sample']:.1f} | {r['gather']:.1f} | {r['train']:.1f} | "
              f"{r['wait']:.1f} | {slowest:.1f} | {r['epoch'] / slowest:.2f} | {mb:,.0f} | {amp:.2f} | "
              f"{rate / 1e6:,.0f} | {iops:,.0f} ({iops / DEVICE_READS:.0%}) | {hit:.1%} | {r['peak_rss'] / 2**30:.2f} ({r['peak_anon'] / 2**30:.2f}) |")
    if "ringgnn" in results and "naive" in results:
        print(f"\n(a) ringgnn is {results['naive']['epoch'] / results['ringgnn']['epoch']:.2f}x faster than (c) naive; "
              f"(b) in memory is {results['ringgnn']['epoch'] / results['memory']['epoch']:.2f}x faster than (a)"
              if "memory" in results else "")
    for name, r in results.items():
        extra = f", setup {r['setup']:.1f} s" + (f" (look-ahead {r['presample_seconds']:.1f} s)" if r.get("presample_seconds") else "")
        print(f"- {name}: {r.get('memcap') or 'no cap'}{extra}; sampler read {r['sampler_bytes_read'] / 1e9:.2f} GB"
              + (f"; plan: {r['plan']}" if r.get("plan") else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--batches", type=int, default=12, help="batches in the epoch (default 12)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--cap-frac", type=float, default=0.25, help="memcap as a share of the dataset's bytes")
    p.add_argument("--cap", type=int, default=None, help="memcap in bytes (overrides --cap-frac; for small trial runs)")
    p.add_argument("--cache-frac", type=float, default=0.10,
                   help="hot-row cache as a share of the features; negative: let the memory plan choose")
    p.add_argument("--configs", default="naive,ringgnn,memory")
    p.add_argument("--naive-batches", type=int, default=3,
                   help="batches the naive baseline runs; its times are scaled to the epoch (default 3)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--compare-configs", default="", metavar="CONFIGS",
                   help="with --compare: the configurations run with the other build too (default: all)")
    p.add_argument("--compare", default="", metavar="PYTHON",
                   help="also run every configuration with this interpreter (another build), alternately")
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration and build (the median is kept)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--memory", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--cache", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--perm", default=None, help=argparse.SUPPRESS)
    p.add_argument("--memory-graph", default="uring", choices=["memory", "uring"],
                   help="(b): neighbor file in RAM too, or read with io_uring (default: uring)")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)), flush=True)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
