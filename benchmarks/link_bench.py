#!/usr/bin/env python3
"""Link-prediction benchmark for issue 21: ringgnn's link model against the classic neighborhood
heuristics, on the same held-out edges and the same stored negatives, in one table.

The dataset is one built with ``ringgnn convert EDGES OUT --link-split val=0.05,test=0.1
--link-negatives 100 --seed 0``: its CSC is the training graph (held-out pairs are not in it),
and each held-out pair (src, dst) of a split comes with K stored negative destinations. Every
method scores (src, dst) against (src, neg) for the K negatives of its row, and
``ringgnn.inference.metrics`` turns the scores into AUC (pooled), MRR and Hits@10/50/100 (OGB's rank
with ties counted half; see that module).

Parts (``--parts``, default both):

  heuristics  common neighbors (CN) and Adamic-Adar (AA) on the training graph only. Neighbors
              are those of the *symmetrized* training graph: N(v) = in- and out-neighbors of v,
              self loops and parallel edges dropped (the usual choice for a directed web graph,
              where a link is as likely to follow a shared out-link as a shared in-link).
              CN(u, v) = |N(u) & N(v)|, AA(u, v) = sum over w in N(u) & N(v) of 1 / log |N(w)|
              (|N(w)| >= 2 for any common neighbor of two different nodes). A negative may equal
              its row's source (convert draws negatives among all nodes but dst); such a pair
              (u, u) scores CN = |N(u)|, as the definition gives; their count is printed.
              Computation: the CSC is read whole (indptr + indices.bin as documented in
              docs/FORMAT.md), symmetrized into one sorted array of keys u * V + w, and each pair
              expands the neighbor list of its lower-degree end and looks the other end's
              (end, w) keys up by binary search, in chunks of --chunk lookups (memory stays
              about 60 bytes per lookup of a chunk per thread, plus the graph and the scores).
              Pairs are visited in source order, so the lookups of one row stay within one
              neighbor list (7x faster than random order on cnr-2000). A sample of pairs is
              checked against Python sets before anything is printed.
  train       ``ringgnn train DATASET --task link ...`` as a child process (extra options in
              --train-args); reads RUN_DIR/metrics.json: ``{split}_auc``, ``{split}_mrr``,
              ``{split}_hits`` (by K, as strings in JSON) for the sampled evaluation, and the
              same under ``layerwise`` for the exact one.

Usage:
    python benchmarks/link_bench.py DATASET [--convert] [--parts heuristics,train] [--split test]
        [--train-args "--epochs 5 --fanouts 10,5"] [--run-dir DIR] [--threads N] [--json out.json]
With --convert (or when DATASET does not exist) the dataset is first built from --edges
(default ../shared/data/cnr-2000.tsv.gz) with --link-split val=0.05,test=0.1 --link-negatives
100 --seed 0 and features: the web graph has none, and convert has no option to make them, so
the script writes FEATURES.npy itself: 32 standard gaussian dimensions (numpy PCG64, --seed) plus
log(1 + in-degree) and log(1 + out-degree) in the *training* graph (a first build without
features gives those degrees, so held-out edges leak nothing), 34 float32 columns.
cnr-2000:
    python benchmarks/link_bench.py /var/tmp/ringgnn-bench/cnr-link --convert --parts heuristics
"""
import argparse
import json
import math
import os
import resource
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ringgnn import Dataset
from ringgnn.inference.metrics import KS, link_scores

ROOT = Path(__file__).resolve().parent.parent
CNR = ROOT.parent / "shared" / "data" / "cnr-2000.tsv.gz"
LINK_SPLIT = "val=0.05,test=0.1"
NEGATIVES = 100
RANDOM_DIMS = 32


def sh(cmd):
    """Run ``cmd`` (a list), printing it; exit with its output on failure."""
    print("$ " + shlex.join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {shlex.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


# --- the dataset ------------------------------------------------------------------------------


def convert(edges: Path, out: Path, seed: int, ringgnn: str) -> Path:
    """Build ``out`` from ``edges`` with the link split and the features described above; returns
    the features file."""
    base = [ringgnn, "convert", str(edges)]
    split = ["--link-split", LINK_SPLIT, "--link-negatives", str(NEGATIVES), "--seed", str(seed), "--quiet",
             "--overwrite"]
    bare = out.with_name(out.name + "-nofeatures")
    sh(base + [str(bare)] + split)
    ds = Dataset.open(bare)
    indptr, indices = read_csc(ds)
    in_deg = np.diff(indptr)
    out_deg = np.bincount(indices, minlength=ds.num_nodes)
    x = np.random.default_rng(seed).standard_normal((ds.num_nodes, RANDOM_DIMS), dtype=np.float32)
    feats = np.hstack([x, np.log1p(in_deg)[:, None], np.log1p(out_deg)[:, None]]).astype(np.float32)
    path = out.with_name(out.name + "-features.npy")
    np.save(path, feats)
    del ds
    shutil.rmtree(bare)
    sh(base + [str(out), "--features", str(path)] + split)
    return path


def read_csc(ds: Dataset):
    """(indptr, indices) of the whole training graph as int64, indices read from indices.bin by
    the documented layout: little-endian u32 or u64 per ``graph.indices_dtype``, no header."""
    m = ds.manifest
    dtype = {"u32": "<u4", "u64": "<u8"}[m["graph"]["indices_dtype"]]
    indices = np.fromfile(os.path.join(ds.path, m["files"]["indices"]["path"]), dtype=dtype, count=ds.num_edges)
    return ds.indptr().astype(np.int64), indices.astype(np.int64)


# --- heuristics -------------------------------------------------------------------------------


class SymGraph:
    """The symmetrized training graph: sorted unique keys ``u * V + w`` for every edge u - w in
    either direction (no self loops), its CSR (``ptr``, ``cols``) and the Adamic-Adar weights."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray):
        v = len(indptr) - 1
        if v * v >= 2**63:
            sys.exit(f"{v:,} nodes: pair keys u * V + w overflow int64; this script handles < 3e9 nodes")
        dst = np.repeat(np.arange(v, dtype=np.int64), np.diff(indptr))
        loop = indices == dst
        a, b = indices[~loop], dst[~loop]
        keys = np.concatenate([a * v + b, b * v + a])
        del a, b, dst
        keys.sort()
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
        rows = keys // v
        self.v = v
        self.deg = np.bincount(rows, minlength=v).astype(np.int64)
        self.ptr = np.zeros(v + 1, dtype=np.int64)
        np.cumsum(self.deg, out=self.ptr[1:])
        self.cols = keys - rows * v
        # A sentinel past every key: a lookup's position is always a valid index.
        self.keys = np.append(keys, np.int64(v) * v)
        with np.errstate(divide="ignore"):
            self.aa = np.where(self.deg >= 2, 1.0 / np.log(np.maximum(self.deg, 2)), 0.0)

    @property
    def num_edges(self) -> int:
        return len(self.keys) - 1

    def score(self, u: np.ndarray, c: np.ndarray):
        """(CN, AA) of the pairs (u[i], c[i]): the lower-degree end's neighbors w are looked up
        as (other end, w) keys."""
        du, dc = self.deg[u], self.deg[c]
        swap = dc <= du  # ties keep u as the lookup side: u repeats along a row, lookups stay local
        x = np.where(swap, c, u)
        y = np.where(swap, u, c)
        n = self.deg[x]
        start = np.cumsum(n) - n
        total = int(n.sum())
        if total == 0:
            return np.zeros(len(u), np.int64), np.zeros(len(u))
        off = np.arange(total, dtype=np.int64)
        off += np.repeat(self.ptr[x] - start, n)
        w = self.cols[off]
        del off
        q = np.repeat(y * self.v, n)
        q += w
        hit = self.keys[np.searchsorted(self.keys, q)] == q
        del q
        # reduceat over segments [start[i], start[i+1]); one zero appended so that the trailing
        # starts (== total for empty last segments) are valid, and empty segments zeroed.
        hit = np.append(hit, False)
        cn = np.add.reduceat(hit, start, dtype=np.int64)
        h = np.flatnonzero(hit)  # a few percent of the lookups: gather their weights only
        contrib = np.zeros(total + 1)
        contrib[h] = self.aa[w[h]]
        aa = np.add.reduceat(contrib, start)
        cn[n == 0] = 0
        aa[n == 0] = 0.0
        return cn, aa

    def score_slow(self, u: int, c: int):
        nu = set(self.cols[self.ptr[u]:self.ptr[u + 1]].tolist())
        nc = set(self.cols[self.ptr[c]:self.ptr[c + 1]].tolist())
        common = nu & nc
        return len(common), math.fsum(self.aa[w] for w in common)


def heuristic_scores(g: SymGraph, src: np.ndarray, cand: np.ndarray, chunk: int, threads: int):
    """CN and AA of (src[i], cand[i, j]) for every row i and column j, as (n, K+1) arrays."""
    n, k1 = cand.shape
    order = np.argsort(src, kind="stable")
    # Rows per chunk from the lookups each row costs: sum over its pairs of the lower degree.
    cost = np.empty(n, dtype=np.int64)
    for a in range(0, n, 65536):
        r = order[a:a + 65536]
        cost[a:a + len(r)] = np.minimum(g.deg[src[r]][:, None], g.deg[cand[r]]).sum(1)
    ends = np.searchsorted(np.cumsum(cost), np.arange(chunk, int(cost.sum()) + chunk, chunk), side="right")
    bounds = sorted(set([0, n] + np.clip(ends, 1, n).tolist()))
    cn = np.empty((n, k1), dtype=np.int64)
    aa = np.empty((n, k1), dtype=np.float64)

    def run(span):
        rows = order[span[0]:span[1]]
        u = np.repeat(src[rows], k1)
        c, a = g.score(u, cand[rows].ravel())
        cn[rows] = c.reshape(-1, k1)
        aa[rows] = a.reshape(-1, k1)

    spans = list(zip(bounds[:-1], bounds[1:]))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(run, spans))
    return cn, aa, len(spans), int(cost.sum())


def check_sample(g: SymGraph, src, cand, cn, aa, samples: int = 2000, seed: int = 0):
    """Exit unless CN and AA of random pairs match Python sets (the positives over-sampled)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(src), samples)
    cols = np.where(rng.random(samples) < 0.5, 0, rng.integers(0, cand.shape[1], samples))
    for i, j in zip(rows.tolist(), cols.tolist()):
        want_cn, want_aa = g.score_slow(int(src[i]), int(cand[i, j]))
        if cn[i, j] != want_cn or not math.isclose(aa[i, j], want_aa, rel_tol=1e-9, abs_tol=1e-12):
            sys.exit(f"self-check failed at row {i}, column {j} ({src[i]}, {cand[i, j]}): CN {cn[i, j]} vs "
                     f"{want_cn}, AA {aa[i, j]} vs {want_aa}")


def heuristics(ds: Dataset, split: str, chunk: int, threads: int) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    indptr, indices = read_csc(ds)
    t_read = time.perf_counter() - t0
    g = SymGraph(indptr, indices)
    del indices
    t_graph = time.perf_counter() - t0 - t_read
    pairs = ds.edge_split(split)
    neg = ds.edge_negatives(split)
    src = pairs[0]
    cand = np.empty((len(src), 1 + neg.shape[1]), dtype=np.int64)
    cand[:, 0] = pairs[1]
    cand[:, 1:] = neg
    del neg, pairs
    t1 = time.perf_counter()
    cn, aa, chunks, lookups = heuristic_scores(g, src, cand, chunk, threads)
    t_score = time.perf_counter() - t1
    check_sample(g, src, cand, cn, aa)
    t2 = time.perf_counter()
    res = {}
    for name, s in (("CN", cn), ("AA", aa)):
        res[name] = link_scores(s[:, 0], s[:, 1:])
    t_metrics = time.perf_counter() - t2
    info = dict(pairs=len(src), negatives=cand.shape[1] - 1, sym_edges=g.num_edges, chunks=chunks, threads=threads,
                self_pairs=int((cand[:, 1:] == src[:, None]).sum()), pos_cn_zero=float(np.mean(cn[:, 0] == 0)),
                read_s=t_read, graph_s=t_graph, score_s=t_score, metrics_s=t_metrics,
                total_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0,
                lookups=lookups, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return dict(results=res, info=info)


# --- ringgnn train --task link ----------------------------------------------------------------


def train(ds_path: Path, run_dir: Path, split: str, extra: str, ringgnn: str) -> dict:
    help_ = subprocess.run([ringgnn, "train", "--help"], capture_output=True, text=True)
    if help_.returncode != 0 or "--task" not in help_.stdout:
        sys.exit(f"`{ringgnn} train` has no --task option in this build (link-prediction training is not there "
                 f"yet): install a ringgnn whose `train --help` lists --task, or run --parts heuristics")
    cmd = [ringgnn, "train", str(ds_path), "--task", "link", "--out", str(run_dir), "--overwrite", "--quiet",
           *shlex.split(extra)]
    t0 = time.perf_counter()
    sh(cmd)
    seconds = time.perf_counter() - t0
    path = run_dir / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: cannot read the run's metrics ({e}); did `ringgnn train --task link` finish?")
    out = {"command": shlex.join(cmd), "seconds": seconds,
           "layerwise_s": (metrics.get("layerwise") or {}).get("seconds")}
    for label, m in (("ringgnn (sampled)", metrics), ("ringgnn (layer-wise)", metrics.get("layerwise"))):
        if m is not None and f"{split}_mrr" in m:
            out[label] = {"auc": m.get(f"{split}_auc"), "mrr": m[f"{split}_mrr"],
                          "hits": {int(k): v for k, v in m.get(f"{split}_hits", {}).items()}}
        else:
            where = "metrics.json" if label.endswith("(sampled)") else "metrics.json's layerwise"
            print(f"note: {where} has no {split}_mrr; the row {label} is left empty", file=sys.stderr)
    return out


# --- the table --------------------------------------------------------------------------------


def cell(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def table(rows: dict, split: str, seconds: dict):
    print(f"\n| method ({split}) | AUC | MRR | " + " | ".join(f"Hits@{k}" for k in KS) + " | seconds |")
    print("|---|" + "---:|" * (3 + len(KS)))
    for name, r in rows.items():
        hits = r.get("hits", {})
        print(f"| {name} | {cell(r.get('auc'))} | {cell(r.get('mrr'))} | "
              + " | ".join(cell(hits.get(k)) for k in KS) + f" | {seconds.get(name, '-')} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path)
    p.add_argument("--parts", default="heuristics,train", help="heuristics, train or both (default both)")
    p.add_argument("--split", default="test", help="held-out edge split to score (default test)")
    p.add_argument("--convert", action="store_true", help="(re)build DATASET from --edges first")
    p.add_argument("--edges", type=Path, default=CNR, help="edge list for --convert (default cnr-2000)")
    p.add_argument("--seed", type=int, default=0, help="convert's --seed and the features' (default 0)")
    p.add_argument("--chunk", type=int, default=2_000_000, help="neighbor lookups per chunk (default 2M)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="chunks scored at once (default: cores)")
    p.add_argument("--train-args", default="", help="extra options of ringgnn train, one string")
    p.add_argument("--run-dir", type=Path, default=None, help="train's --out (default DATASET-linkrun beside it)")
    p.add_argument("--ringgnn", default="ringgnn", help="the ringgnn command (default: ringgnn on PATH)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args()
    parts = [s.strip() for s in a.parts.split(",") if s.strip()]
    if not parts or set(parts) - {"heuristics", "train"}:
        p.error(f"--parts: expected heuristics and/or train, got {a.parts!r}")

    print("Command: python benchmarks/link_bench.py " + shlex.join(sys.argv[1:]), flush=True)
    if a.convert or not (a.dataset / "manifest.json").exists():
        t0 = time.perf_counter()
        feats = convert(a.edges, a.dataset, a.seed, a.ringgnn)
        print(f"built {a.dataset} in {time.perf_counter() - t0:.1f} s (features {feats})", flush=True)
    ds = Dataset.open(a.dataset)
    if a.split not in ds.edge_split_names or a.split == "train":
        sys.exit(f"{a.dataset}: no held-out edge split {a.split!r} (it has {ds.edge_split_names}); build it with "
                 f"ringgnn convert EDGES OUT --link-split {LINK_SPLIT} --link-negatives {NEGATIVES}")
    print(f"dataset {ds}", flush=True)

    rows, seconds, record = {}, {}, {"command": sys.argv, "dataset": str(a.dataset), "split": a.split}
    if "heuristics" in parts:
        h = heuristics(ds, a.split, a.chunk, a.threads)
        i = h["info"]
        print(f"heuristics: {i['pairs']:,} positives x {i['negatives']} negatives on the symmetrized training graph "
              f"({i['sym_edges']:,} directed entries); read {i['read_s']:.1f} s, symmetrize {i['graph_s']:.1f} s, "
              f"score {i['score_s']:.1f} s ({i['lookups'] / 1e6:.0f}M lookups, {i['chunks']} chunks, "
              f"{i['threads']} threads), metrics {i['metrics_s']:.1f} s, total {i['total_s']:.1f} s "
              f"({i['cpu_s']:.1f} s CPU), peak RSS {i['peak_rss'] / 2**20:.0f} MiB; {i['pos_cn_zero']:.1%} of "
              f"positives have no common neighbor; {i['self_pairs']} negatives equal their row's source; "
              f"2000 sampled pairs match Python sets", flush=True)
        rows.update(h["results"])
        seconds.update({"CN": f"{i['total_s']:.1f} (both)", "AA": "(with CN)"})
        record["heuristics"] = h
    if "train" in parts:
        run_dir = a.run_dir or a.dataset.with_name(a.dataset.name + "-linkrun")
        t = train(a.dataset, run_dir, a.split, a.train_args, a.ringgnn)
        for label in ("ringgnn (sampled)", "ringgnn (layer-wise)"):
            rows[label] = t.get(label, {})
        seconds["ringgnn (sampled)"] = f"{t['seconds']:.1f} (whole run)"
        if t.get("layerwise_s") is not None:
            seconds["ringgnn (layer-wise)"] = f"{t['layerwise_s']:.1f} (evaluation)"
        record["train"] = t
    table(rows, a.split, seconds)
    if a.json:
        a.json.write_text(json.dumps(record, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
