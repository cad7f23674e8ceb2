#!/usr/bin/env python3
"""Every training task once with --device cuda, and inference on cuda against the CPU: the part
of the GPU checks that no CUDA-marked test covers (scripts/gpu_check.sh runs it). Exits non-zero
at the first failure."""
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import ringgnn  # noqa: E402
from ringgnn.cli import main  # noqa: E402
from _sampling import make_link_dataset  # noqa: E402

WRITES = "author:writes:paper"


def run(*args) -> dict:
    t = time.perf_counter()
    rc = main([str(a) for a in args] + ["--quiet"])
    print(f"ringgnn {' '.join(map(str, args))}: exit {rc} in {time.perf_counter() - t:.1f} s", flush=True)
    if rc not in (0, None):
        raise SystemExit(f"FAILED: {args}")
    return {}


def metrics(run_dir: Path) -> dict:
    m = json.loads((run_dir / "metrics.json").read_text())
    return {k: v for k, v in m.items() if k.startswith(("best", "test")) and not isinstance(v, (dict, list))}


def main_() -> None:
    # DEV=cpu: a dry run of the same steps on the host (no --gpu-cache there).
    dev = os.environ.get("DEV", "cuda")
    assert dev == "cpu" or torch.cuda.is_available(), "no CUDA device"
    tmp = Path(tempfile.mkdtemp())
    # Homogeneous link prediction on the GPU; embeddings on cuda equal the CPU's.
    (tmp / "link").mkdir()
    ds = make_link_dataset(tmp / "link", nodes=3000, feature_dim=16)
    r = tmp / "r-link"
    run("train", ds.path, "--task", "link", "--device", dev, "--epochs", 2, "--fanouts", "5,5", "--hidden", 32,
        "--out", r)
    print("link:", metrics(r), flush=True)
    for d in ("cpu", dev):
        run("embed", r, "--device", d, "--hidden-dtype", "f32", "--out", tmp / f"emb-{d}.npy")
    a, b = np.load(tmp / "emb-cpu.npy"), np.load(tmp / f"emb-{dev}.npy")
    print(f"link embed cpu vs cuda: max |diff| {np.abs(a - b).max():.2e}", flush=True)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # Heterogeneous: node classification and link prediction on the GPU.
    het = tmp / "het"
    run("generate", "hetero", het, "--papers", 4000, "--authors", 2000, "--institutions", 50, "--link-split",
        "val=0.1,test=0.1", "--link-relation", WRITES, "--link-negatives", 7)
    for task in ("node", "link"):
        r = tmp / f"r-het-{task}"
        extra = ["--relation", WRITES] if task == "link" else ["--target", "paper"]
        run("train", het, "--task", task, *extra, "--device", dev, "--epochs", 2, "--fanouts", "5,5", "--out", r)
        print(f"hetero {task}:", metrics(r), flush=True)
    # Node classification with the GPU tier and pinned buffers, then predict on cuda vs cpu.
    sbm = tmp / "sbm"
    ringgnn.generate_sbm(sbm, nodes=20000, classes=8, avg_degree=10, feature_dim=32, seed=3)
    r = tmp / "r-node"
    run("train", sbm, "--device", dev, *(["--gpu-cache", "1M"] if dev == "cuda" else []), "--epochs", 2, "--out", r)
    print("node:", metrics(r), flush=True)
    for d in ("cpu", dev):
        run("predict", r, "--device", d, "--nodes", "test", "--out", tmp / f"p-{d}.npy")
    same = (np.load(tmp / "p-cpu.npy") == np.load(tmp / f"p-{dev}.npy")).mean()
    print(f"node predictions cpu vs cuda: {same:.4%} equal", flush=True)
    assert same == 1.0
    print("GPU SMOKE OK")


if __name__ == "__main__":
    main_()
