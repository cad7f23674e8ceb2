"""Temporal sampling epochs against plain ones, in one run: R-MAT with uniformly random edge times,
seeds (1% of the nodes) at times uniform over the range, fanouts 20,15,10, batches of 1024.

    python benchmarks/temporal_bench.py --work /var/tmp/ringgnn-temporal --scale 23 \\
        --configs plain,typed,temporal --cap 480M --repeat 2 [--graphbolt /path/to/python]

Configurations (each epoch a fresh process, configurations alternating):
  plain     the homogeneous sampler's epoch (``NeighborSampler.epoch``: hyperbatches, 2 threads);
  typed     the typed engine's epoch without times (``HeteroLoader(..., ignore_time=True)``, the
            one-type case of the engine that samples at times);
  temporal  the same loader at the seeds' times (``input_time``);
  graphbolt DGL GraphBolt's ``temporal_sample_neighbors`` on the same graph, seeds and times, in
            memory (``benchmarks/graphbolt_temporal.py``, run by the Python given to --graphbolt).
Each row gives the epoch's wall-clock seconds and its CPU seconds (every thread of the process:
what a busy machine inflates far less). With ``--cap SIZE`` every ringgnn run is also made under
``memcap --drop-caches SIZE`` with ``memory=SIZE`` and O_DIRECT io_uring (rows "capped"); without,
in memory only. Prints a Markdown table and writes --json.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _sizes import MEMCAP  # noqa: E402

FANOUTS = [20, 15, 10]
BATCH = 1024
TIME_RANGE = (0, 1_000_000)


def prepare(work: str, scale: int) -> str:
    ds = os.path.join(work, f"rmat{scale}t")
    if not os.path.exists(os.path.join(ds, "manifest.json")):
        subprocess.run([sys.executable, "-m", "ringgnn", "generate", "rmat", "--scale", str(scale), "--edge-factor", "16",
                        "--self-loops", "drop", "--dedup", "--edge-time", "uniform", "--time-range",
                        f"{TIME_RANGE[0]},{TIME_RANGE[1]}", "--memory", "2G", ds], check=True)
    seeds = os.path.join(work, f"seeds{scale}.npz")
    if not os.path.exists(seeds):
        n = 1 << scale
        rng = np.random.default_rng(0)
        ids = rng.choice(n, n // 100, replace=False).astype(np.int64)
        np.savez(seeds, seeds=ids, times=rng.integers(TIME_RANGE[0], TIME_RANGE[1] + 1, len(ids)).astype(np.int64))
    return ds


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes"))


def one(args: argparse.Namespace) -> None:
    """One epoch of one configuration in this process; prints a JSON line."""
    import ringgnn

    z = np.load(args.seeds)
    seeds, times = z["seeds"], z["times"]
    capped = args.memory is not None
    t0 = time.perf_counter()
    nodes = edges = batches = 0
    hyperbatch = None
    if args.config == "plain":
        s = ringgnn.NeighborSampler(args.dataset, FANOUTS, backend="uring" if capped else "memory", direct=capped,
                                    threads=2, memory=args.memory)
        s.sample(seeds[:1])  # opens the core sampler: loads what it holds in memory (setup, not the epoch)
        setup = time.perf_counter() - t0
        r0, t1, c1 = read_bytes(), time.perf_counter(), time.process_time()
        for b in s.epoch(seeds, BATCH, shuffle=False):
            nodes += b.num_nodes
            edges += b.num_edges
            batches += 1
        st = s.io_stats()  # the mean hyperbatch (the drivers size each from what they measured)
        hyperbatch = round(st["hyperbatch_batches"] / st["hyperbatches"], 1) if st.get("hyperbatches") else None
    else:
        kw = dict(input_time=times) if args.config == "temporal" else dict(ignore_time=True)
        loader = ringgnn.HeteroLoader(args.dataset, FANOUTS, "node", seeds=seeds, batch_size=BATCH, shuffle=False,
                                      threads=2, backend="uring" if capped else "memory", direct=capped,
                                      memory=args.memory, **kw)
        hyperbatch = loader.sizes().hyperbatch  # the loader made and, from disk, its hyperbatch probed (setup)
        loader.sampler.graph()  # the offset index and, in memory, the neighbor and time files loaded (setup)
        setup = time.perf_counter() - t0
        r0, t1, c1 = read_bytes(), time.perf_counter(), time.process_time()
        # The loader's core batches as numpy (what `for b in loader` turns into HeteroData), so that
        # no run imports PyTorch: it would not fit the cap beside the loader, and plain runs have none.
        ids, ts = loader.batch_seeds(0), loader.batch_times(0)
        jobs = [(b, [("node", ids[b])], None if ts is None else [ts[b]]) for b in loader.epoch_order()]
        for out in loader._run(0, jobs):
            nodes += len(out["node"]["node"])
            edges += len(out["row"]["node:to:node"])
            batches += 1
    epoch, cpu = time.perf_counter() - t1, time.process_time() - c1
    print(json.dumps({"config": args.config, "capped": capped, "setup_s": round(setup, 3), "epoch_s": round(epoch, 3),
                      "cpu_s": round(cpu, 3), "nodes": nodes, "edges": edges, "batches": batches,
                      "hyperbatch": hyperbatch, "read_gb": round((read_bytes() - r0) / 1e9, 3)}))


def run(cmd: list, cap: str = None) -> dict:
    if cap:
        cmd = [MEMCAP, "--drop-caches", cap, "--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode or not lines:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    out = json.loads(lines[-1])
    mc = [l for l in r.stderr.splitlines() if l.startswith("memcap:")]
    out["memcap"] = mc[0].replace("memcap: ", "") if mc else "-"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/var/tmp/ringgnn-temporal")
    ap.add_argument("--scale", type=int, default=23)
    ap.add_argument("--configs", default="plain,typed,temporal")
    ap.add_argument("--cap", default=None, help="also run capped: memcap --drop-caches CAP, memory=CAP, O_DIRECT")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--graphbolt", default=None, help="a Python with DGL 2.1 (GraphBolt) to run its temporal sampler")
    ap.add_argument("--json", default=None)
    # Internal: one epoch in this process.
    ap.add_argument("--one", dest="config", default=None)
    ap.add_argument("--dataset")
    ap.add_argument("--seeds")
    ap.add_argument("--memory", default=None)
    args = ap.parse_args()
    if args.config:
        return one(args)
    os.makedirs(args.work, exist_ok=True)
    ds = prepare(args.work, args.scale)
    seeds = os.path.join(args.work, f"seeds{args.scale}.npz")
    configs = [c for c in args.configs.split(",") if c]
    conds = [None] + ([args.cap] if args.cap else [])
    rows = []
    for rnd in range(args.repeat):
        for cap in conds:
            for c in configs:
                if c == "graphbolt":
                    if cap is None and args.graphbolt:
                        out = run([args.graphbolt, os.path.join(HERE, "graphbolt_temporal.py"), ds, seeds,
                                   "--fanouts", ",".join(map(str, FANOUTS)), "--batch-size", str(BATCH)])
                        out.update(config="graphbolt", capped=False, memcap="-")
                        rows.append(out)
                        print(json.dumps(out), flush=True)
                    continue
                cmd = [sys.executable, os.path.abspath(__file__), "--one", c, "--dataset", ds, "--seeds", seeds]
                if cap:
                    cmd += ["--memory", cap]
                out = run(cmd, cap)
                out["round"] = rnd
                rows.append(out)
                print(json.dumps(out), flush=True)
    print("\n| configuration | condition | epoch (s), median | vs plain | epoch CPU (s) | CPU vs plain | "
          "sampled nodes | sampled edges | GB read | memcap |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for cap in conds:
        cond = f"capped {cap}" if cap else "memory"
        sel = lambda c: [r for r in rows if r["config"] == c and r["capped"] == (cap is not None)]  # noqa: E731
        base = sel("plain")
        median = lambda rs, key: float(np.median([r[key] for r in rs])) if rs and key in rs[0] else None  # noqa: E731
        base_s, base_cpu = median(base, "epoch_s"), median(base, "cpu_s")
        for c in configs:
            got = sel(c)
            if not got:
                continue
            med, cpu = median(got, "epoch_s"), median(got, "cpu_s")
            ratio = f"{med / base_s:.2f}x" if base_s else "-"
            cpu_ratio = f"{cpu / base_cpu:.2f}x" if cpu and base_cpu else "-"
            print(f"| {c} | {cond} | {med:.2f} | {ratio} | {'-' if cpu is None else f'{cpu:.2f}'} | {cpu_ratio} | "
                  f"{got[-1].get('nodes', '-'):,} | {got[-1]['edges']:,} | {got[-1].get('read_gb', 0):.2f} | "
                  f"{got[-1]['memcap']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
