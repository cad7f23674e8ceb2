#!/usr/bin/env python3
"""Importer throughput and peak memory (issue 23): `ringgnn convert` of an OGB papers100M-shaped
directory (raw/data.npz, compressed as OGB ships it), a Parquet edge table with 64-bit hashed
ids, and a MAG240M-shaped processed directory (float16 paper features), each under `memcap`
with a `--memory` budget (peak RSS of the process, and the cgroup's peak, which includes page
cache), against the sequential-read floor: `cat` of the same input files with the page cache
dropped first (cold, like the conversion), and for the compressed data.npz also the time to
decompress its arrays (what any reader of it pays).

Usage: python benchmarks/import_bench.py [--papers-nodes 1000000] [--table-edges 10000000]
           [--mag-papers 200000] [--memory 512M] [--cap 768M] [--work DIR]
Needs root (memcap) and pyarrow. Generates its inputs under --work on the first run and prints a
Markdown table; paste it into docs/benchmarks.md.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def power_law_edges(rng, n_src, n_dst, e):
    src = rng.integers(0, n_src, e, dtype=np.int64)
    dst = ((rng.random(e) ** 3) * n_dst).astype(np.int64)  # skewed in-degrees
    return src, (dst * 2654435761) % n_dst  # hubs scattered


def make_papers(root: Path, nodes: int, degree: int, dim: int):
    """OGB's papers100M layout: raw/data.npz (edge_index, node_feat, num_nodes_list; compressed),
    raw/node-label.npz (float, NaN for unlabeled), split/time/*.csv.gz."""
    if (root / "raw" / "node-label.npz").exists():
        return
    import gzip

    rng = np.random.default_rng(1)
    (root / "raw").mkdir(parents=True, exist_ok=True)
    src, dst = power_law_edges(rng, nodes, nodes, nodes * degree)
    feat = rng.standard_normal((nodes, dim), dtype=np.float32)
    np.savez_compressed(root / "raw" / "data.npz", edge_index=np.stack([src, dst]), node_feat=feat,
                        num_nodes_list=np.array([nodes]), num_edges_list=np.array([src.size]))
    label = np.where(rng.random(nodes) < 0.015, rng.integers(0, 172, nodes), np.nan)
    np.savez_compressed(root / "raw" / "node-label.npz", node_label=label.reshape(-1, 1))
    labeled = np.flatnonzero(~np.isnan(label))
    for name, part in zip(("train", "valid", "test"), np.array_split(labeled, [int(0.8 * labeled.size),
                                                                                  int(0.9 * labeled.size)])):
        (root / "split" / "time").mkdir(parents=True, exist_ok=True)
        with gzip.open(root / "split" / "time" / f"{name}.csv.gz", "wt") as f:
            f.write("".join(f"{i}\n" for i in part))


def make_table(path: Path, edges: int):
    """A Parquet edge table whose ids are 64-bit hashes of 0 .. edges/8 (signed int64)."""
    if path.exists():
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    nodes = max(1, edges // 8)
    with pq.ParquetWriter(path, pa.schema([("user_id", pa.int64()), ("item_id", pa.int64())])) as w:
        left = edges
        while left:
            n = min(left, 1 << 20)
            s, d = power_law_edges(rng, nodes, nodes, n)
            w.write_table(pa.table({"user_id": mix64(s.astype(np.uint64)).view(np.int64),
                                    "item_id": mix64(d.astype(np.uint64) + np.uint64(nodes)).view(np.int64)}))
            left -= n


def make_mag(root: Path, papers: int):
    """MAG240M's processed layout at a small scale: 768-dim float16 paper features, labels with
    NaN, cites/writes/affiliated_with, meta.pt and split_dict.pt."""
    if (root / "split_dict.pt").exists():
        return
    import torch

    rng = np.random.default_rng(3)
    authors, insts = papers, max(1, papers // 4000)
    p = root / "processed"
    (p / "paper").mkdir(parents=True, exist_ok=True)
    feat = np.lib.format.open_memmap(p / "paper" / "node_feat.npy", mode="w+", dtype=np.float16, shape=(papers, 768))
    for i in range(0, papers, 65536):
        feat[i:i + 65536] = rng.standard_normal((min(65536, papers - i), 768)).astype(np.float16)
    feat.flush()
    del feat
    np.save(p / "paper" / "node_label.npy", np.where(rng.random(papers) < 0.1, rng.integers(0, 153, papers), np.nan))
    for name, (ns, nd, e) in {"paper___cites___paper": (papers, papers, papers * 10),
                              "author___writes___paper": (authors, papers, papers * 3),
                              "author___affiliated_with___institution": (authors, insts, authors)}.items():
        (p / name).mkdir(exist_ok=True)
        np.save(p / name / "edge_index.npy", np.stack(power_law_edges(rng, ns, nd, e)))
    torch.save({"paper": papers, "author": authors, "institution": insts, "num_classes": 153}, root / "meta.pt")
    idx = rng.permutation(papers)
    torch.save({"train": idx[:papers // 10], "valid": idx[papers // 10: papers // 8],
                "test-dev": idx[papers // 8: papers // 7]}, root / "split_dict.pt")


def files_of(path: Path):
    return [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file())


def drop_caches():
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)


def floor_seconds(path: Path) -> float:
    files = " ".join(f"'{f}'" for f in files_of(path))
    drop_caches()
    t = time.perf_counter()
    subprocess.run(f"cat {files} > /dev/null", shell=True, check=True)
    return time.perf_counter() - t


def unzip_seconds(path: Path) -> float:
    """Decompressing every array of the .npz files under ``path`` (warm), in 8 MiB reads."""
    import zipfile

    t = time.perf_counter()
    for f in files_of(path):
        if f.suffix == ".npz":
            with zipfile.ZipFile(f) as z:
                for name in z.namelist():
                    with z.open(name) as m:
                        while m.read(8 << 20):
                            pass
    return time.perf_counter() - t


# Runs a command and reports its peak RSS (ru_maxrss of the child) on stderr as "maxrss: KiB".
RSS = ["-c", "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
       "print('maxrss:', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)"]


def convert(src: Path, out: Path, args, extra):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(MEMCAP), args.cap, "--", sys.executable, *RSS, sys.executable, "-m", "ringgnn", "convert", str(src),
           str(out), "--memory", args.memory, "--quiet", *extra]
    drop_caches()
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    m = re.search(r"peak=(\d+) bytes failcnt=(\d+) oom_kills=(\d+) exit=(\d+)", r.stderr)
    rss = re.search(r"maxrss: (\d+)", r.stderr)
    if r.returncode != 0 or m is None or rss is None:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return dt, int(m.group(1)), int(m.group(3)), int(rss.group(1)) * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers-nodes", type=int, default=1_000_000)
    ap.add_argument("--papers-degree", type=int, default=14)
    ap.add_argument("--papers-dim", type=int, default=128)
    ap.add_argument("--table-edges", type=int, default=10_000_000)
    ap.add_argument("--mag-papers", type=int, default=200_000)
    ap.add_argument("--memory", default="512M")
    ap.add_argument("--cap", default="768M")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/ringgnn-import-bench"))
    ap.add_argument("--cases", default="papers,table,mag",
                    help="which inputs to generate and convert, comma-separated (full sizes need ~25 GB of "
                         "disk at once otherwise)")
    args = ap.parse_args()
    wanted = set(args.cases.split(","))
    if not wanted <= {"papers", "table", "mag"}:
        ap.error(f"--cases takes papers, table and mag, not {args.cases}")
    w = args.work
    w.mkdir(parents=True, exist_ok=True)
    cases = []
    if "papers" in wanted:
        make_papers(w / "papers", args.papers_nodes, args.papers_degree, args.papers_dim)
        cases.append((f"papers100M-shaped data.npz: {args.papers_nodes:,} nodes, "
                      f"{args.papers_nodes * args.papers_degree:,} edges, {args.papers_dim} f32 features",
                      w / "papers", [], args.papers_nodes * args.papers_degree))
    if "table" in wanted:
        make_table(w / "edges.parquet", args.table_edges)
        cases.append((f"Parquet, {args.table_edges:,} edges, 64-bit hashed ids", w / "edges.parquet",
                      ["--src", "user_id", "--dst", "item_id"], args.table_edges))
    if "mag" in wanted:
        make_mag(w / "mag240m_kddcup2021", args.mag_papers)
        cases.append((f"MAG240M-shaped: {args.mag_papers:,} papers (768 f16 features), "
                      f"{args.mag_papers * 14:,} edges, --add-reverse", w / "mag240m_kddcup2021", ["--add-reverse"],
                      args.mag_papers * 14))
    print(f"`--memory {args.memory}` under `memcap {args.cap}` (RSS + page cache); page cache dropped before "
          f"each `cat` and each conversion; {os.cpu_count()} cores\n")
    print("| input | input MB | cat cold (s) | decompress (s) | convert cold (s) | ratio to cat | Medges/s "
          "| peak RSS | cgroup peak | OOM kills |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, src, extra, edges in cases:
        size = sum(f.stat().st_size for f in files_of(src)) / 2**20
        floor = floor_seconds(src)
        unzip = unzip_seconds(src) if any(f.suffix == ".npz" for f in files_of(src)) else None
        dt, peak, ooms, rss = convert(src, w / "out", args, extra)
        print(f"| {name} | {size:,.0f} | {floor:.2f} | {'-' if unzip is None else f'{unzip:.1f}'} | {dt:.1f} | "
              f"{dt / floor:.1f}x | {edges / dt / 1e6:.2f} | {rss / 2**20:.0f} MiB | {peak / 2**20:.0f} MiB | "
              f"{ooms} |", flush=True)


if __name__ == "__main__":
    main()
