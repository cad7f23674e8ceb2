#!/usr/bin/env python3
"""Issue 22's benchmark: heterogeneous sampling and an end-to-end training epoch read from disk
under a memory cap, against the same in memory, in the same run (configurations alternate, each
run a fresh process).

Data: `ringgnn generate hetero` with `--papers P` (default 2M), 0.75 P authors, P / 200
institutions, the other parameters at their defaults (64 float32 paper features, about 3 authors
and 8 citations per paper, the rev_ relations added): six relation files.

  sample  `--batches N` batches of `--batch-size` (1024) training papers, fanouts 15,10 for every relation, by
          `HeteroNeighborSampler.sample` on 2 threads (one core sampler each).
  train   the first N batches of an epoch of `HeteroLoader` (`--batch-size`, fanouts 15,10, 2 worker
          threads, per-type features gathered) feeding a 2-layer heterogeneous GraphSAGE (hidden
          64, learned 16-wide embeddings for authors and institutions), Adam.

Configurations: `memory` (every neighbor file and the feature file in RAM, no cap), `disk`
(io_uring with O_DIRECT for both, under `memcap --drop-caches CAP`; only the relations' offset
indexes are held in memory) and `buffered` (io_uring through the page cache, same cap: the
kernel keeps what the cap leaves of the hot pages) and `auto` (the sampler's own placement
with `memory=CAP`: the neighbor files worth most per byte that fit in half the budget held in
memory, the rest read with io_uring and O_DIRECT, under the same cap; features from disk, no
cache), `plan` (train only: `HeteroLoader`'s one memory plan within `memory=CAP`: neighbor files,
feature files and the hot-row cache across types, O_DIRECT, same cap) and `nocache` (the same plan
with `cache=0`).

  hyper   `--batches N` consecutive batches of `--batch-size` training papers, fanouts 15,10,
          every relation read with io_uring and O_DIRECT (only the offset indexes held), on 2
          threads, with `memory=CAP` under `memcap --drop-caches CAP`: `perbatch` (each thread samples one batch at
          a time, `HeteroNeighborSampler.sample`) against `hyper` (each thread takes
          `--hyperbatch H` consecutive batches and samples them together,
          `HeteroNeighborSampler.sample_many`: each relation's file read once per hop for all of
          them). Bytes read are the samplers' own counters (`io_stats`) summed over the threads;
          a digest of every batch's sample shows both configurations sampled the same batches.
          The `hyper` run also reports what `HeteroLoader(hyperbatch="auto", memory=CAP)` would
          choose (it sizes from upper bounds, features included).

  loader  the first `--batches N` batches of epoch 0 of `HeteroLoader(hyperbatch="auto", memory=CAP)`
          (`--batch-size` training papers, fanouts 15,10, 2 threads, every relation and the feature
          file read with io_uring and O_DIRECT, no cache), iterated to the end, under `memcap
          --drop-caches CAP`: `new` (this checkout) against `old` (the package at `--before`, e.g.
          a checkout of the previous commit, put first on PYTHONPATH). Seconds count from the
          first `iter` (the hyperbatch choice, its probe batches included) to the last batch; a
          digest of every batch (ids, edges, features, labels) shows both made the same batches.
          `--configs old,new1,new4`: `newH` forces `hyperbatch=H` (the rest as `new`).
          `--task link`: the link batches of `author:writes:paper` instead
          (`HeteroLinkBatches`, `--batches N` batches of `--batch-size` random (author, paper)
          pairs with as many negatives, its sampler's placement within `memory=CAP`).
          `--loader-args JSON`: more `HeteroLoader` arguments for `new` (hyperbatch, threads,
          prefetch, staging_cap...), e.g. to compare staging on and off with `--before` this
          same checkout.

Usage (root, for memcap): python benchmarks/hetero_bench.py sample|train|hyper [--work DIR]
    [--papers 2000000] [--batches 200] [--batch-size 1024] [--repeat 2] [--cap 1.5G] [--configs memory,disk,auto,buffered]
    [--hyperbatch 8] (hyper: --configs perbatch,hyper; hyperN: hyperbatches of N)
Prints a Markdown table for docs/benchmarks.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _sizes import MEMCAP

CHILD = r'''
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import ringgnn
from ringgnn import HeteroLoader, HeteroNeighborSampler  # both layouts (--before) export them
path, mode, backend, batches, cap, bs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
share = sys.argv[8] if len(sys.argv) > 8 else "-"
ds = ringgnn.Dataset.open(path)
direct = backend in ("disk", "auto", "plan", "nocache", "perbatch") or backend.startswith("hyper")
if mode == "train":
    import torch
    from ringgnn.models.hetero import HeteroModel, hetero_batch_to_dicts
    torch.manual_seed(0)
    info = ds.manifest["node_types"]["paper"]
    net = HeteroModel(ds.node_types, ds.edge_types, ds.feature_dims(), ds.num_nodes_dict, "paper", 64,
                      info["labels"]["num_classes"], 2, model="sage", embed_dim=16)
if mode == "loader":
    import hashlib
    import os
    t0 = time.perf_counter()
    if os.environ.get("HETERO_BENCH_TASK") == "link":
        from ringgnn.sampling.links import HeteroLinkBatches
        rng = np.random.default_rng(0)
        n = batches * bs
        pairs = np.stack([rng.integers(0, ds.num_nodes_dict["author"], n), rng.integers(0, ds.num_nodes_dict["paper"], n)])
        sampler = HeteroNeighborSampler(ds, [15, 10], backend="uring", direct=True, seed=0, memory=cap)
        loader = HeteroLinkBatches(ds, "author:writes:paper", sampler, batch_size=bs, neg_ratio=1.0, seed=0,
                                   threads=2, pairs=pairs)
    else:
        more = json.loads(os.environ.get("HETERO_BENCH_LOADER", "{}"))  # --loader-args
        forced = {"hyperbatch": int(backend[3:])} if backend[3:] else {}  # --configs newH
        loader = HeteroLoader(ds, [15, 10], "paper", seeds="train", batch_size=bs, shuffle=True, seed=0,
                              **{"threads": 2, **forced, **more}, backend="uring", feature_backend="uring",
                              direct=True, memory=cap, cache=0)
    loader.batches = list(range(batches))
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    h, why = loader.hyperbatch_size()
    d = hashlib.sha256()
    n = edges = 0
    for b in loader:
        for t in sorted(b.node_types):
            d.update(b[t].n_id.numpy().tobytes())
            if "x" in b[t]:
                d.update(b[t].x.numpy().tobytes())
        for et in sorted(b.edge_types):
            d.update(b[et].edge_index.numpy().tobytes())
            edges += b[et].edge_index.shape[1]
            if "edge_label_index" in b[et]:
                d.update(b[et].edge_label_index.numpy().tobytes())
        if "y" in b["paper"]:
            d.update(b["paper"].y.numpy().tobytes())
        n += 1
    out = dict(seconds=time.perf_counter() - t0, setup=setup, hyperbatch=h, why=why, batches=n, edges=edges,
               digest=d.hexdigest(), backend=backend,
               staged=getattr(loader, "staged_hyperbatches", dict)())
elif mode == "hyper":
    import hashlib, threading
    h = int(backend[5:] or sys.argv[7]) if backend.startswith("hyper") else 1
    out = dict(hyperbatch=h)
    sampler = HeteroNeighborSampler(ds, [15, 10], backend="uring", direct=True, seed=0, memory=cap)
    part = ds.node_type("paper")
    ids = part.split("train")
    ids = ids[np.random.default_rng([0, 0]).permutation(len(ids))]
    seeds = [ids[i * bs:(i + 1) * bs] for i in range(batches)]
    jobs = [list(range(i, min(i + h, batches))) for i in range(0, batches, h)]
    stats = {}
    def job(js):
        if len(js) == 1:
            got = [sampler.sample(seeds[js[0]], "paper", epoch=0, batch=js[0])]
        else:
            got = sampler.sample_many([{"paper": seeds[b]} for b in js], js, epoch=0)
        stats[threading.get_ident()] = sampler.io_stats()
        res = []
        for s in got:
            d = hashlib.sha256()
            for part_ in (s.node, s.row, s.col):
                for k in sorted(part_):
                    d.update(part_[k].tobytes())
            res.append((d.hexdigest(), sum(len(r) for r in s.row.values())))
        return res
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        res = [r for rs in pool.map(job, jobs) for r in rs]
    out.update(seconds=time.perf_counter() - t0, backend=backend, batches=len(seeds),
               edges=sum(r[1] for r in res), digest=hashlib.sha256("".join(r[0] for r in res).encode()).hexdigest(),
               io_bytes=sum(v["bytes"] for v in stats.values()), io_reads=sum(v["reads"] for v in stats.values()),
               epoch_batches=-(-len(ids) // bs))
elif backend in ("plan", "nocache"):
    # The loader's one memory plan within the cap, the model built (its training state reserved),
    # as `ringgnn train` makes it: neighbor files, feature files and the cache (nocache: cache=0).
    from ringgnn.sampling.plan import plan_hetero, probe_batch_bytes, training_reserve
    from ringgnn.sampling.hetero import relation_fanouts
    from ringgnn import _options
    seeds = len(ds.node_type("paper").split("train"))
    batch_bytes = reserve = held = None
    if mode == "train":  # as `ringgnn train` plans: a probe batch's peak measured, the model's state reserved
        probe = HeteroLoader(ds, [15, 10], "paper", seeds="train", batch_size=bs, threads=1, backend="pread",
                             feature_backend="pread", cache=0)
        def probe_step(b):
            net(*hetero_batch_to_dicts(b))[:b["paper"].batch_size].logsumexp(-1).sum().backward()
            net.zero_grad(set_to_none=True)
        held = _options.process_rss()
        batch_bytes, reserve = probe_batch_bytes(probe, probe_step, 2 + 2), training_reserve(net)
        del probe
        if share != "-":  # a fixed share instead of the probe's (which varies a little run to run)
            batch_bytes = _options.parse_size(share)
    plan = plan_hetero(ds, relation_fanouts(ds, [15, 10]), target="paper", batch_size=bs, seeds=seeds,
                       memory=_options.parse_size(cap), feature_backend="auto",
                       cache=0 if backend == "nocache" else None, reserve=reserve or 0, batch_bytes=batch_bytes,
                       process=held if mode == "train" else None)
    sampler = HeteroNeighborSampler(ds, [15, 10], direct=True, seed=0, memory=cap, plan=plan)
    loader = HeteroLoader(ds, [15, 10], "paper", seeds="train", batch_size=bs, shuffle=True, seed=0, threads=2,
                          direct=True, sampler=sampler)
    sampler = loader.sampler
    out = dict(placement=sampler.resolved_backend(), plan=loader.plan.text(),
               cache_bytes=0 if loader.plan.cache is None else loader.plan.cache.total)
else:
    fb = "memory" if backend == "memory" else "uring"
    kind = {"memory": "memory", "disk": "uring", "buffered": "uring", "auto": "auto"}[backend]
    sampler = HeteroNeighborSampler(ds, [15, 10], backend=kind, direct=direct, seed=0,
                                    memory=None if cap == "-" else cap)
    out = dict(placement=sampler.resolved_backend())
    loader = HeteroLoader(ds, [15, 10], "paper", seeds="train", batch_size=bs, shuffle=True, seed=0, threads=2,
                          feature_backend=fb, direct=direct, sampler=sampler, cache=0)
if mode not in ("hyper", "loader"):
    seeds = loader.batch_seeds(0)[:batches]
    t0 = time.perf_counter()
    out.update(backend=backend, batches=len(seeds))
if mode == "sample":
    def one(i):
        s = sampler.sample(seeds[i], "paper", epoch=0, batch=i)
        return sum(len(r) for r in s.row.values()), sum(len(n) for n in s.node.values())
    with ThreadPoolExecutor(2) as pool:
        res = list(pool.map(one, range(len(seeds))))
    out.update(seconds=time.perf_counter() - t0, edges=sum(r[0] for r in res), nodes=sum(r[1] for r in res))
elif mode == "train":
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    wait = step = 0.0
    it = iter(loader)
    n = 0
    while n < len(seeds):
        a = time.perf_counter()
        b = next(it)
        c = time.perf_counter()
        bs = b["paper"].batch_size
        loss = torch.nn.functional.cross_entropy(net(*hetero_batch_to_dicts(b))[:bs], b["paper"].y[:bs])
        opt.zero_grad(); loss.backward(); opt.step()
        wait += c - a
        step += time.perf_counter() - c
        n += 1
    out.update(seconds=time.perf_counter() - t0, setup=setup, wait=wait, step=step, loss=float(loss.detach()))
    st = loader.feature_stats()
    out.update(feature_bytes_read=sum(v["bytes_read"] for v in st.values()),
               cache_hits=sum(v["cache_hits"] for v in st.values()),
               distinct_rows=sum(v["distinct_rows"] for v in st.values()))
with open("/proc/self/io") as f:
    out["read_bytes"] = int(next(l for l in f if l.startswith("read_bytes")).split()[1])
with open("/proc/self/status") as f:
    out["peak_rss"] = int(next(l for l in f if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps(out))
'''


def sh(cmd, **kw):
    print("$", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], **kw)


def ensure_data(work: Path, papers: int) -> Path:
    out = work / f"hetero{papers // 1000}k"
    if (out / "manifest.json").exists():
        return out
    work.mkdir(parents=True, exist_ok=True)
    sh([sys.executable, "-m", "ringgnn", "generate", "hetero", out, "--papers", papers, "--authors", papers * 3 // 4,
        "--institutions", max(1, papers // 200), "--seed", "0", "--memory", "2G", "--quiet", "--overwrite"],
       check=True)
    return out


def memcap_line(err: str) -> str:
    return next((ln for ln in err.splitlines() if ln.startswith("memcap:")), "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["sample", "train", "hyper", "loader"])
    ap.add_argument("--work", default="/var/tmp/ringgnn-bench")
    ap.add_argument("--papers", type=int, default=2_000_000)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cap", default="1.5G")
    ap.add_argument("--configs", default="memory,disk,auto")
    ap.add_argument("--hyperbatch", type=int, default=8, help="hyper: batches sampled together")
    ap.add_argument("--memory", default=None, help="loader: the loaders' memory budget (default: the cap)")
    ap.add_argument("--before", default=None, help="loader: the Python package directory of the `old` loader")
    ap.add_argument("--loader-args", default="{}", help="loader: more HeteroLoader arguments for the `new` run, as "
                    "JSON (e.g. '{\"hyperbatch\": 2, \"prefetch\": 1, \"staging_cap\": 0}')")
    ap.add_argument("--task", choices=["node", "link"], default="node",
                    help="loader: node batches (HeteroLoader) or link batches (HeteroLinkBatches of author:writes:paper)")
    ap.add_argument("--json", default=None, help="also write the runs here")
    ap.add_argument("--batch-share", default="-", help="plan/nocache: the batches' share of the budget (default: "
                    "measured by a probe batch, as `ringgnn train` does; fixed, the plans of all runs are the same)")
    args = ap.parse_args()
    data = ensure_data(Path(args.work), args.papers)
    size = sum(f.stat().st_size for f in data.iterdir())
    if args.mode == "hyper" and args.configs == "memory,disk,auto":
        args.configs = "perbatch,hyper"
    if args.mode == "loader":
        if not all(c == "old" or c.startswith("new") for c in args.configs.split(",")):
            args.configs = "old,new"
        if not args.before:
            sys.exit("loader: give --before DIR, the Python package directory of the old loader")
    configs = args.configs.split(",")
    runs = {c: [] for c in configs}
    for rep in range(args.repeat):
        for c in (configs if rep % 2 == 0 else configs[::-1]):
            cmd = [sys.executable, "-c", CHILD, data, args.mode, c, args.batches,
                   args.cap if c in ("auto", "plan", "nocache", "perbatch", "old") or c.startswith(("hyper", "new"))
                   else "-",
                   args.batch_size, args.hyperbatch, args.batch_share]
            if args.mode == "loader" and args.memory:
                cmd[7] = args.memory
            if c != "memory":
                cmd = [MEMCAP, "--drop-caches", args.cap, "--"] + cmd
            env = dict(os.environ, HETERO_BENCH_TASK=args.task)
            if c == "old":
                env["PYTHONPATH"] = args.before
            else:
                env["HETERO_BENCH_LOADER"] = args.loader_args
            r = sh(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                sys.exit(f"failed: {r.stderr[-3000:]}")
            out = json.loads(r.stdout.strip().splitlines()[-1])
            out["memcap"] = memcap_line(r.stderr)
            runs[c].append(out)
            print(json.dumps({"config": c, **out}), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), size=size, runs=runs), indent=2))
    if args.mode == "hyper":
        return hyper_table(args, data, size, runs)
    if args.mode == "loader":
        return loader_table(args, data, size, runs)
    base = statistics.median(o["seconds"] for o in runs[configs[0]])
    ds_line = f"{data.name}: {size / 2**30:.2f} GiB of files"
    print(f"\n{ds_line}; {args.mode}, {args.batches} batches of {args.batch_size} papers, fanouts 15,10; median of "
          f"{args.repeat}\n")
    if args.mode == "sample":
        print("| configuration | seconds | vs memory | batches/s | sampled edges/s | bytes read | peak RSS | memcap |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print("| configuration | seconds | vs memory | waiting for batches s | training s | feature bytes read | "
              "cache hits / distinct rows | bytes read | peak RSS | memcap |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for c, rs in runs.items():
        sec = statistics.median(o["seconds"] for o in rs)
        o = rs[0]
        name = {"memory": "memory (no cap)", "disk": f"io_uring + O_DIRECT, memcap --drop-caches {args.cap}",
                "buffered": f"io_uring, page cache, memcap --drop-caches {args.cap}",
                "auto": f"auto placement within --memory {args.cap} ({o['placement']}), O_DIRECT, memcap "
                        f"--drop-caches {args.cap}",
                "plan": f"HeteroLoader's plan within --memory {args.cap} ({o['placement']}, cache "
                        f"{o.get('cache_bytes', 0) / 2**20:.0f} MiB), O_DIRECT, memcap --drop-caches {args.cap}",
                "nocache": f"the same plan with cache=0 ({o['placement']}), O_DIRECT, memcap --drop-caches "
                           f"{args.cap}"}[c]
        fail = o["memcap"].split("failcnt=")[1].split()[0] if "failcnt=" in o["memcap"] else "-"
        tail = (f"{o['read_bytes'] / 2**30:.2f} GiB | {o['peak_rss'] / 2**20:.0f} MiB | "
                f"{'-' if c == 'memory' else 'failcnt ' + fail} |")
        if args.mode == "sample":
            print(f"| {name} | {sec:.2f} | {sec / base:.2f}x | {o['batches'] / sec:.1f} | "
                  f"{statistics.median(x['edges'] / x['seconds'] for x in rs) / 1e6:.2f} M | {tail}")
        else:
            hits = f"{o['cache_hits'] / max(1, o['distinct_rows']):.1%}"
            print(f"| {name} | {sec:.2f} | {sec / base:.2f}x | {statistics.median(x['wait'] for x in rs):.2f} | "
                  f"{statistics.median(x['step'] for x in rs):.2f} | {o['feature_bytes_read'] / 2**30:.2f} GiB | "
                  f"{hits} | {tail}")


def loader_table(args, data, size, runs):
    """The `loader` mode's table: the old loader against the new, same batches."""
    digests = {o["digest"] for rs in runs.values() for o in rs}
    sec0 = statistics.median(o["seconds"] for o in runs.get("old", next(iter(runs.values()))))
    print(f"\n{data.name}: {size / 2**30:.2f} GiB of files; the first {args.batches} batches of {args.batch_size} papers "
          f"of epoch 0, fanouts 15,10, 2 threads, io_uring + O_DIRECT, memory={args.memory or args.cap} under memcap "
          f"--drop-caches "
          f"{args.cap}; median of {args.repeat}; batches identical across runs: {'yes' if len(digests) == 1 else 'NO'}\n")
    print("| loader | hyperbatch | seconds | vs old | setup s | peak RSS | memcap |")
    print("|---|---|---|---|---|---|---|")
    for c, rs in runs.items():
        sec = statistics.median(o["seconds"] for o in rs)
        o = rs[0]
        fail = o["memcap"].split("failcnt=")[1].split()[0] if "failcnt=" in o["memcap"] else "-"
        print(f"| {c} | {o['hyperbatch']} | {sec:.2f} | {sec / sec0:.2f}x | "
              f"{statistics.median(x['setup'] for x in rs):.2f} | {o['peak_rss'] / 2**20:.0f} MiB | failcnt {fail} |")
    for c, rs in runs.items():
        print(f"\n{c}: hyperbatch {rs[0]['why']}; staged hyperbatches {rs[0].get('staged') or 'none'}")


def hyper_table(args, data, size, runs):
    """The `hyper` mode's table: per-batch against hyperbatch sampling, ratios to per-batch."""
    digests = {o["digest"] for rs in runs.values() for o in rs}
    base = runs["perbatch"]
    sec0 = statistics.median(o["seconds"] for o in base)
    io0 = base[0]["io_bytes"]
    o0 = base[0]
    print(f"\n{data.name}: {size / 2**30:.2f} GiB of files; {args.batches} of the epoch's {o0['epoch_batches']} "
          f"batches of {args.batch_size} papers, fanouts 15,10, 2 threads, io_uring + O_DIRECT, memcap --drop-caches "
          f"{args.cap}; median of {args.repeat}; samples identical across runs: {'yes' if len(digests) == 1 else 'NO'}\n")
    print("| configuration | seconds | vs per batch | bytes read (io_stats) | vs per batch | per epoch (extrapolated) "
          "| reads | peak RSS | memcap |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c, rs in runs.items():
        sec = statistics.median(o["seconds"] for o in rs)
        o = rs[0]
        name = "per batch" if c == "perbatch" else f"hyperbatches of {o['hyperbatch']}"
        fail = o["memcap"].split("failcnt=")[1].split()[0] if "failcnt=" in o["memcap"] else "-"
        epoch = o["io_bytes"] / o["batches"] * o["epoch_batches"]
        print(f"| {name} | {sec:.2f} | {sec / sec0:.2f}x | {o['io_bytes'] / 2**30:.2f} GiB | {o['io_bytes'] / io0:.2f}x | "
              f"{epoch / 2**30:.1f} GiB | {o['io_reads']:,} | {o['peak_rss'] / 2**20:.0f} MiB | failcnt {fail} |")
    # What the loader's "auto" would choose within the cap, in a process of its own under it.
    code = ("import sys, ringgnn; from ringgnn.sampling.hetero import HeteroLoader; "
            "l = HeteroLoader(sys.argv[1], [15, 10], 'paper', batch_size=int(sys.argv[2]), threads=2, backend='uring', "
            "direct=True, memory=sys.argv[3], cache=0); print(l.hyperbatch_size()[1])")
    r = sh([MEMCAP, args.cap, "--", sys.executable, "-c", code, data, args.batch_size, args.cap],
           capture_output=True, text=True)
    print(f"\n`HeteroLoader(hyperbatch=\"auto\", memory={args.cap})` would choose: "
          f"{r.stdout.strip() or r.stderr[-500:]}")


if __name__ == "__main__":
    main()
