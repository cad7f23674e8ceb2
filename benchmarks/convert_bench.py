#!/usr/bin/env python3
"""Convert throughput and the memory-budget check for `ringgnn convert` (issue 2).

One run measures, on the same files:
  * the sequential-read floor: `cat INPUT > /dev/null`, cold (page cache dropped) and warm;
  * `ringgnn convert` of a >= 400M-edge bin32 edge list, cold and warm, in edges/s and as a
    ratio to the floor;
  * the same conversion with `--memory 512M` under `memcap 768M` (RSS + page cache capped):
    it must succeed and produce byte-identical files (same checksums) as the large-budget run;
  * text input: a TSV slice of the same edges, convert vs cat.

Usage: python benchmarks/convert_bench.py [--edges 400000000] [--nodes 16777216] [--work DIR]
Needs root (memcap, drop_caches). Prints a Markdown table; paste it into docs/benchmarks.md.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"


def sh(cmd, **kw):
    t = time.perf_counter()
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stdout}\n{r.stderr}")
    return dt, r


def drop_caches():
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)


def make_edges(path: Path, edges: int, nodes: int, seed: int = 1):
    """Skewed random edges (destinations follow a power law, ids scattered), bin32."""
    if path.exists() and path.stat().st_size == edges * 8:
        return
    rng = np.random.default_rng(seed)
    perm_a = np.uint64(0x9E3779B97F4A7C15 % nodes | 1)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as f:
        left = edges
        while left:
            n = min(left, 20_000_000)
            src = rng.integers(0, nodes, n, dtype=np.uint64)
            dst = (rng.random(n) ** 3 * nodes).astype(np.uint64)
            dst = (dst * perm_a) % np.uint64(nodes)  # scatter the hubs
            pairs = np.empty((n, 2), dtype=np.uint32)
            pairs[:, 0] = src
            pairs[:, 1] = dst
            f.write(pairs.tobytes())
            left -= n
    tmp.rename(path)


def make_text(src: Path, path: Path, edges: int):
    if path.exists():
        return
    tmp = path.with_suffix(".part")
    pairs = np.fromfile(src, dtype=np.uint32, count=edges * 2).reshape(-1, 2)
    with open(tmp, "w") as f:
        for i in range(0, len(pairs), 2_000_000):
            f.write("".join(f"{a}\t{b}\n" for a, b in pairs[i:i + 2_000_000].tolist()))
    tmp.rename(path)


def checksums(d: Path):
    m = json.loads((d / "manifest.json").read_text())
    return {k: v["crc32c"] for k, v in m["files"].items()}, m


# Runs a command and reports its peak RSS (ru_maxrss of the child) on stderr as "maxrss: KiB".
RSS = (f"{sys.executable} -c \"import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
       f"print('maxrss:', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)\"")


def convert(inp, out, extra="", cap=None, cold=False):
    cmd = f"{RSS} ringgnn convert {inp} {out} --overwrite --quiet {extra}"
    if cap:
        cmd = f"{MEMCAP} {'--drop-caches ' if cold else ''}{cap} -- {cmd}"
    elif cold:
        drop_caches()
    return sh(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edges", type=int, default=400_000_000)
    ap.add_argument("--nodes", type=int, default=1 << 24)
    ap.add_argument("--text-edges", type=int, default=50_000_000)
    ap.add_argument("--work", default="/var/tmp/ringgnn-bench")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    bin32 = work / f"edges{a.edges // 1_000_000}m.bin32"
    tsv = work / f"edges{a.text_edges // 1_000_000}m.tsv"
    print(f"generating inputs in {work} ...", file=sys.stderr)
    make_edges(bin32, a.edges, a.nodes)
    make_text(bin32, tsv, a.text_edges)
    rows = []

    def row(name, inp, n_edges, extra="", cap=None):
        drop_caches()
        t_cat_cold, _ = sh(f"cat {inp} > /dev/null")
        t_cat_warm, _ = sh(f"cat {inp} > /dev/null")
        t_cold, r = convert(inp, work / "out_cold", extra, cap=cap, cold=True)
        t_warm, _ = convert(inp, work / "out_warm", extra, cap=cap)
        peak = [l for l in r.stderr.splitlines() if l.startswith("memcap:")]
        rss = [int(l.split()[1]) for l in r.stderr.splitlines() if l.startswith("maxrss:")]
        note = f"RSS {rss[0] / 1024:.0f} MiB" if rss else ""
        if peak:
            note += "; " + peak[0].replace("memcap: ", "cgroup (RSS + page cache) ")
        rows.append((name, n_edges, t_cat_cold, t_cold, t_cat_warm, t_warm, note))
        return t_cold

    row(f"bin32, {a.edges / 1e6:.0f}M edges, --memory 8G", bin32, a.edges, "--memory 8G")
    big, _ = checksums(work / "out_warm")
    row(f"bin32, {a.edges / 1e6:.0f}M edges, --memory 512M under memcap 768M", bin32, a.edges,
        "--memory 512M", cap="768M")
    small, manifest = checksums(work / "out_warm")
    same = big == small
    row(f"text (TSV), {a.text_edges / 1e6:.0f}M edges, --memory 8G", tsv, a.text_edges, "--memory 8G")

    print(f"\nCommand: python benchmarks/convert_bench.py --edges {a.edges} --nodes {a.nodes} "
          f"--text-edges {a.text_edges}\n")
    print(f"Graph: {manifest['num_nodes']:,} nodes, {manifest['num_edges']:,} edges. "
          f"512M-budget output identical to 8G-budget output: **{same}**\n")
    print("| input | cat cold (s) | convert cold (s) | ratio | Medges/s cold | cat warm (s) | convert warm (s) | ratio | memory (cold run) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, n, cc, tc, cw, tw, peak in rows:
        print(f"| {name} | {cc:.1f} | {tc:.1f} | {tc / cc:.1f}x | {n / tc / 1e6:.1f} | {cw:.2f} | {tw:.1f} | "
              f"{tw / cw:.1f}x | {peak} |")
    if not same:
        sys.exit("FAIL: outputs differ between memory budgets")


if __name__ == "__main__":
    main()
