#!/usr/bin/env python3
"""Sampling benchmark for issue 3: ringgnn's backends against the naive memmap baseline, in one run.

Configuration as in the RingSampler paper: fanouts 20,15,10, batch 1024, seeds = 1% of the nodes
(the same seeds for every run). Datasets: R-MAT scale 23 (`ringgnn generate rmat --scale 23
--edge-factor 16 --self-loops drop --dedup`, about 131M edges) and cnr-2000. Conditions:
  warm    second of two epochs, page cache warm;
  cold    first epoch after `memcap --drop-caches`;
  capped  first epoch after dropping caches, under `memcap` with a cap of the process's own
          footprint (peak RSS of a direct-I/O run, which uses no page cache) plus 25% of the
          neighbor file: at most a quarter of the file can ever be cached.
Plus thread scaling (1 vs 2) and hops 1-4 (fanouts 20 / 20,15 / 20,15,10 / 20,15,10,5), warm.

Usage (root, for memcap and drop_caches):
    python benchmarks/sample_bench.py [--work /var/tmp/ringgnn-bench] [--naive-batches 8]
Prints Markdown tables for docs/benchmarks.md.

Issue 9's hyperbatch table (root): per-batch (`--hyperbatch 1`) against hyperbatches (`auto`) on
R-MAT 23, warm, cold and under a memcap (480 MiB by default, `--memory` the same):
    python benchmarks/sample_bench.py --hyperbatch [--work /var/tmp/ringgnn-bench] [--cap 480M]

Quick configuration, to compare two builds of ringgnn in one run (no root needed):
    python benchmarks/sample_bench.py --quick [--compare OTHER_PYTHON] [--repeat 3]
cnr-2000 and R-MAT scale 20, 10% of the nodes as seeds, warm page cache, memory / uring / pread,
2 threads; with
--compare, every configuration runs alternately with this build's `ringgnn` and with
`OTHER_PYTHON -m ringgnn` (a virtualenv holding another build), and the table gives the median
epoch time of each and their ratio.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"
CNR = ROOT.parent / "shared" / "data" / "cnr-2000.tsv.gz"
RSS = (f"{sys.executable} -c \"import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
       f"print('maxrss:', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)\"")
DEVICE_READS = 92_000
DEVICE_SEQ_MBS = 1100


def run(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {cmd}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    rss = [int(l.split()[1]) * 1024 for l in r.stderr.splitlines() if l.startswith("maxrss:")]
    return lines, (rss[0] if rss else None)


def prepare(work: Path):
    work.mkdir(parents=True, exist_ok=True)
    sets = {}
    rmat = work / "rmat23"
    if not (rmat / "manifest.json").exists():
        run(f"ringgnn generate rmat {rmat} --scale 23 --edge-factor 16 --self-loops drop --dedup --quiet --overwrite")
    sets["rmat23"] = rmat
    cnr = work / "cnr"
    if CNR.exists() and not (cnr / "manifest.json").exists():
        run(f"ringgnn convert {CNR} {cnr} --quiet --overwrite")
    if (cnr / "manifest.json").exists():
        sets["cnr-2000"] = cnr
    seeds = {}
    for name, d in sets.items():
        m = json.loads((d / "manifest.json").read_text())
        v = m["num_nodes"]
        p = work / f"seeds_{name}.npy"
        if not p.exists():
            np.save(p, np.random.default_rng(0).choice(v, v // 100, replace=False).astype(np.int64))
        seeds[name] = (p, m)
    return sets, seeds


def ours(d, seeds, backend, *, direct=False, threads=2, fanouts="20,15,10", epochs=2, prefix="", memory=None,
         ringgnn="ringgnn", hyperbatch=None):
    cmd = (f"{prefix}{RSS} {ringgnn} sample {d} --fanouts {fanouts} --batch-size 1024 --seeds {seeds} "
           f"--epochs {epochs} --backend {backend} --threads {threads} --json")
    if hyperbatch is not None:
        cmd += f" --hyperbatch {hyperbatch}"
    if direct:
        cmd += " --direct"
    if memory:
        cmd += f" --memory {memory}"
    lines, rss = run(cmd)
    return lines[-1], rss


def naive(d, seeds, max_batches, *, fanouts="20,15,10", prefix="", twice=False):
    cmd = (f"{prefix}{RSS} {sys.executable} {ROOT / 'benchmarks' / 'naive_sampler.py'} {d} --seeds {seeds} "
           f"--fanouts {fanouts} --max-batches {max_batches}")
    if twice:
        run(cmd)
    lines, rss = run(cmd)
    return lines[-1], rss


def row(label, cond, r, idx_bytes):
    secs = r.get("epoch_seconds_extrapolated", r["seconds"])
    est = " (est.)" if "epoch_seconds_extrapolated" in r else ""
    reads, by = r.get("reads"), r.get("bytes_read")
    io = "" if reads is None else (
        f"{reads:,} | {by / 1e9:.2f} | {by / max(1, r['sampled_edges'] * 4):.1f}x | "
        f"{reads / r['seconds'] / 1e3:.1f}k | {by / r['seconds'] / 1e6:.0f}")
    if not io:
        io = "- | - | - | - | -"
    return f"| {label} | {cond} | {secs:.2f}{est} | {r['seps'] / 1e6:.2f} | {io} |"


def quick(work: Path, other: str, repeat: int):
    """Warm epochs of both builds, alternately, on cnr-2000 and a scale-20 R-MAT."""
    import statistics

    work.mkdir(parents=True, exist_ok=True)
    sets = {}
    rmat = work / "rmat20"
    if not (rmat / "manifest.json").exists():
        run(f"ringgnn generate rmat {rmat} --scale 20 --edge-factor 16 --self-loops drop --dedup --quiet --overwrite")
    sets["rmat20"] = rmat
    cnr = work / "cnr"
    if CNR.exists() and not (cnr / "manifest.json").exists():
        run(f"ringgnn convert {CNR} {cnr} --quiet --overwrite")
    if (cnr / "manifest.json").exists():
        sets["cnr-2000"] = cnr
    builds = {"this build": "ringgnn"}
    if other:
        builds["other build"] = f"{other} -m ringgnn"
    print("| dataset | backend | " + " | ".join(f"{b} epoch s (median of {repeat})" for b in builds)
          + (" | this / other |" if other else " |"))
    print("|---|---|" + "---:|" * (len(builds) + (1 if other else 0)))
    for name, d in sets.items():
        v = json.loads((d / "manifest.json").read_text())["num_nodes"]
        # 10% of the nodes as seeds: epochs of a second or so, long enough to compare.
        sp = work / f"seeds10_{name}.npy"
        if not sp.exists():
            np.save(sp, np.random.default_rng(0).choice(v, max(1, v // 10), replace=False).astype(np.int64))
        for be in ("memory", "uring", "pread"):
            times = {b: [] for b in builds}
            for rep in range(repeat):
                # Alternate which build goes first, so that neither always runs on a warmer machine.
                for b, exe in list(builds.items())[:: -1 if rep % 2 else 1]:
                    r, _ = ours(d, sp, be, ringgnn=exe)
                    times[b].append(r["seconds"])
            med = {b: statistics.median(t) for b, t in times.items()}
            cells = " | ".join(f"{med[b]:.3f}" for b in builds)
            ratio = f" | {med['this build'] / med['other build']:.2f} |" if other else " |"
            print(f"| {name} | {be} | {cells}{ratio}", flush=True)


def hyperbatches(work: Path, cap: str):
    """Issue 9: per-batch against hyperbatch sampling on R-MAT 23, warm, cold and capped."""
    sets, seeds = prepare(work)
    d = sets["rmat23"]
    sp, m = seeds["rmat23"]
    idx = m["files"]["indices"]["bytes"]
    print(f"### R-MAT 23: neighbor file {idx / 1e6:.0f} MB, {len(np.load(sp)):,} seeds (1%), fanouts 20,15,10, "
          f"batch 1024, 2 threads\n")
    print("| sampler | condition | hyperbatch | spill | epoch (s) | SEPS (M) | GB read | read / file | of which sequential GB "
          "| spilled GB | memcap |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    r, _ = ours(d, sp, "memory")
    print(f"| memory | warm | - | - | {r['seconds']:.2f} | {r['seps'] / 1e6:.2f} | 0 | 0 | 0 | 0 | - |", flush=True)
    conds = [("uring buffered", "warm", False, "", None), ("uring direct", "cold", True, f"{MEMCAP} --drop-caches 20G -- ", None),
             ("uring direct", "capped", True, f"{MEMCAP} --drop-caches {cap} -- ", cap),
             ("uring buffered", "capped", False, f"{MEMCAP} --drop-caches {cap} -- ", cap)]
    for label, cond, direct, prefix, memory in conds:
        # Under the cap, hyperbatches with their samples kept (`--spill off`) and spilled when that
        # fits more batches (`auto`, the default).
        runs = [("1", "off"), ("auto", "off"), ("auto", "auto")] if memory else [("1", "off"), ("auto", "auto")]
        for h, spill in runs:
            # Capped hyperbatches run three epochs: the first is sized from the memory plan's
            # probe (with its margin), the later ones from the batches measured.
            epochs = 3 if memory and h == "auto" else 1 if prefix else 2
            full = (f"{prefix}{RSS} ringgnn sample {d} --fanouts 20,15,10 --batch-size 1024 --seeds {sp} "
                    f"--epochs {epochs} --backend uring --threads 2 --json --hyperbatch {h} --spill {spill}"
                    + (" --direct" if direct else "") + (f" --memory {memory}" if memory else ""))
            r = subprocess.run(full, shell=True, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"failed: {full}\n{r.stderr[-2000:]}")
            recs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
            mc = [l for l in r.stderr.splitlines() if l.startswith("memcap:")]
            shown = [(cond, recs[-1])] if epochs < 3 else [(cond, recs[0]), (f"{cond}, 3rd epoch", recs[-1])]
            for c, rec in shown:
                print(f"| {label} | {c} | {rec['hyperbatch']:.1f} | {spill} | {rec['seconds']:.2f} | {rec['seps'] / 1e6:.2f} | "
                      f"{rec['bytes_read'] / 1e9:.2f} | {rec['bytes_read'] / idx:.1f}x | {rec['sequential_bytes'] / 1e9:.2f} | "
                      f"{rec['spilled_bytes'] / 1e9:.2f} | "
                      f"{mc[0].replace('memcap: ', '') if mc else '-'} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyperbatch", action="store_true", help="issue 9's table: per-batch against hyperbatches")
    ap.add_argument("--cap", default="480M", help="with --hyperbatch: the memcap (and --memory) of the capped rows")
    ap.add_argument("--work", default="/var/tmp/ringgnn-bench")
    ap.add_argument("--naive-batches", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="warm epochs on small graphs only (see the docstring)")
    ap.add_argument("--compare", default="", metavar="PYTHON", help="with --quick: another build's interpreter")
    ap.add_argument("--repeat", type=int, default=3, help="with --quick: runs per configuration and build")
    a = ap.parse_args()
    if a.hyperbatch:
        print(f"Command: python benchmarks/sample_bench.py --hyperbatch --work {a.work} --cap {a.cap}\n")
        hyperbatches(Path(a.work), a.cap)
        return
    if a.quick:
        print(f"Command: python benchmarks/sample_bench.py --quick --work {a.work}"
              + (f" --compare {a.compare}" if a.compare else "") + f" --repeat {a.repeat}\n")
        quick(Path(a.work), a.compare, a.repeat)
        return
    sets, seeds = prepare(Path(a.work))
    print(f"Command: python benchmarks/sample_bench.py --work {a.work} --naive-batches {a.naive_batches}\n")
    for name, d in sets.items():
        sp, m = seeds[name]
        idx_bytes = m["files"]["indices"]["bytes"]
        # Footprint: a direct-I/O run keeps nothing in the page cache.
        _, foot = ours(d, sp, "uring", direct=True, epochs=1, memory="256M")
        cap = int(foot + 0.25 * idx_bytes)
        print(f"### {name}: {m['num_nodes']:,} nodes, {m['num_edges']:,} edges, neighbor file "
              f"{idx_bytes / 1e6:.0f} MB, {len(np.load(sp)):,} seeds (1%)\n")
        print(f"Capped = memcap {cap >> 20} MiB (footprint {foot >> 20} MiB + 25% of the neighbor file). "
              f"Device limits: {DEVICE_READS // 1000}k random 4 KiB reads/s (377 MB/s), {DEVICE_SEQ_MBS} MB/s sequential.\n")
        print("| sampler | condition | epoch (s) | SEPS (M) | reads | GB read | read / sampled bytes | reads/s | MB/s |")
        print("|---|---|---|---|---|---|---|---|---|")
        configs = [("memory", "memory", False), ("uring buffered", "uring", False),
                   ("uring direct", "uring", True), ("pread", "pread", False)]
        for label, be, direct in configs:
            r, _ = ours(d, sp, be, direct=direct)
            print(row(label, "warm", r, idx_bytes), flush=True)
            r, _ = ours(d, sp, be, direct=direct, epochs=1, prefix=f"{MEMCAP} --drop-caches 20G -- ")
            print(row(label, "cold", r, idx_bytes), flush=True)
            if be != "memory":
                r, _ = ours(d, sp, be, direct=direct, epochs=1, prefix=f"{MEMCAP} --drop-caches {cap} -- ",
                            memory=str(foot))
                print(row(label, "capped", r, idx_bytes), flush=True)
        nb = a.naive_batches
        r, _ = naive(d, sp, nb, twice=True)
        print(row(f"naive memmap ({r['batches']} batches)", "warm", r, idx_bytes), flush=True)
        r, _ = naive(d, sp, nb, prefix=f"{MEMCAP} --drop-caches 20G -- ")
        print(row(f"naive memmap ({r['batches']} batches)", "cold", r, idx_bytes), flush=True)
        r, _ = naive(d, sp, nb, prefix=f"{MEMCAP} --drop-caches {cap} -- ")
        print(row(f"naive memmap ({r['batches']} batches)", "capped", r, idx_bytes), flush=True)
        print()
        print("| threads / hops (warm) | backend | epoch (s) | SEPS (M) |")
        print("|---|---|---|---|")
        for be in ("memory", "uring"):
            t = {}
            for th in (1, 2):
                r, _ = ours(d, sp, be, threads=th)
                t[th] = r["seconds"]
                print(f"| {th} thread(s), fanouts 20,15,10 | {be} | {r['seconds']:.2f} | {r['seps'] / 1e6:.2f} |", flush=True)
            print(f"| scaling 1 -> 2 | {be} | {t[1] / t[2]:.2f}x | |")
        for fo in ("20", "20,15", "20,15,10", "20,15,10,5"):
            r, _ = ours(d, sp, "auto", fanouts=fo)
            print(f"| {fo.count(',') + 1} hop(s), fanouts {fo} | auto ({r.get('backend', '?')}) | {r['seconds']:.2f} | {r['seps'] / 1e6:.2f} |", flush=True)
        print()


if __name__ == "__main__":
    main()
