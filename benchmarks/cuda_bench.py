#!/usr/bin/env python3
"""The CUDA data path (issue 11, rerun by issues 20 and 24): pinned against pageable batch
buffers, the GPU tier of the hot-row cache on and off, and layer-wise inference with the dense
parts on the GPU against the CPU. Needs a machine with a GPU (``--device cpu`` runs the same
code on the host, as a dry run of the script).

For each configuration, in one process, alternating (ABCD ABCD with ``--repeat 2``):

- ``pageable`` / ``pinned``: the loader's reused batch buffers left pageable, or registered
  with ``cudaHostRegister`` (:func:`ringgnn.sampling.cuda.pin`);
- ``+gpu``: a GPU tier of ``--gpu-cache-frac`` of the feature file (the rows the first batches
  touch most), so only the other rows cross the bus.

Two measures per configuration:

- **copy**: each batch's host-to-device copy on its own, timed to completion (synchronous):
  the bus bandwidth each buffer kind gets, and the bytes that cross it per batch;
- **train**: an epoch of GraphSAGE through :class:`ringgnn.sampling.cuda.DeviceLoader` (copies on a
  side stream, ahead of the step), with the time the training loop waited for batches.

The loader runs from memory (``backend="memory"``, features in RAM) so that the host side is
as fast as it gets and the copy path is what differs.

Then (``--infer``): a model trained for one epoch on the GPU, ``infer()`` of all nodes with
``device="cpu"`` and ``device="cuda"``, timed, with the largest difference of the logits and
whether the predictions agree.

Usage:
    python benchmarks/cuda_bench.py --generate /tmp/cuda-sbm --nodes 1000000 --feature-dim 256 \\
        --batches 40 --repeat 2 --infer --json cuda.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import ringgnn
from ringgnn.sampling import cuda
from ringgnn.models.gnn import build_model, forward


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def make_loader(ds, args, batches=None):
    ld = ringgnn.Loader(ds, args.fanouts, args.batch_size, seed=1, backend="memory", feature_backend="memory",
                        threads=args.threads, prefetch=4, hold=2, batches=batches)
    if batches is None and len(ld) > args.batches:
        return make_loader(ds, args, list(range(args.batches)))
    return ld


def setup(ds, args, dev, pinned: bool, gpu: bool):
    ld = make_loader(ds, args)
    did_pin = cuda.pin(ld) if (pinned and dev.type == "cuda") else False
    cache = None
    if gpu:
        nbytes = int(args.gpu_cache_frac * ds.num_nodes * ds.feature_dim * 4)
        cache = cuda.DeviceRowCache.for_loader(ld, nbytes, dev, seed=1, presample_batches=args.batches)
    return ld, did_pin, cache


def copy_pass(ds, args, dev, pinned: bool, gpu: bool) -> dict:
    """Each batch's copy to the device, alone and to completion."""
    ld, did_pin, cache = setup(ds, args, dev, pinned, gpu)
    copy_s, nbytes, rows, total_rows = 0.0, 0, 0, 0
    for host in ld:
        sync(dev)
        t = time.perf_counter()
        x = host.x.to(dev, non_blocking=True)
        sync(dev)
        copy_s += time.perf_counter() - t
        nbytes += host.x.numel() * 4
        rows += host.x.shape[0]
        total_rows += host.n_id.shape[0]
        del x, host
    n = len(ld)
    del ld, cache
    return dict(copy_s=copy_s, copy_gbps=nbytes / copy_s / 1e9 if copy_s else 0.0, mb_per_batch=nbytes / n / 1e6,
                rows_sent_share=rows / max(1, total_rows), pinned=bool(did_pin))


def train_pass(ds, args, dev, pinned: bool, gpu: bool) -> dict:
    ld, did_pin, cache = setup(ds, args, dev, pinned, gpu)
    torch.manual_seed(0)
    net = build_model("sage", ds.feature_dim, args.hidden, ds.num_classes, len(args.fanouts), 0.0).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=0.003)
    feed = cuda.DeviceLoader(ld, dev, cache)
    sync(dev)
    t0 = time.perf_counter()
    wait = 0.0
    it = iter(feed)
    losses = []
    while True:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - t
        opt.zero_grad()
        out = forward(net, batch, dev, "sage")
        y = batch.y[: batch.batch_size].to(dev, non_blocking=True).long()
        loss = torch.nn.functional.cross_entropy(out, y.clamp(min=0))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    sync(dev)
    epoch = time.perf_counter() - t0
    final = float(torch.stack(losses).mean()) if losses else float("nan")
    del feed, ld, cache
    return dict(epoch_s=epoch, wait_s=wait, mean_loss=final)


def infer_pass(ds_path: Path, args, dev, tmp: Path) -> dict:
    from ringgnn.inference.run import infer

    run = tmp / "run"
    from ringgnn.cli import main as cli_main

    rc = cli_main(["train", str(ds_path), "--fanouts", ",".join(map(str, args.fanouts)), "--hidden",
                           str(args.hidden), "--layers", str(len(args.fanouts)), "--epochs", "1", "--device",
                           dev.type, "--out", str(run), "--overwrite", "--quiet", "--eval", "sampled"])
    if rc not in (0, None):
        raise SystemExit(f"training for --infer failed with {rc}")
    res = {}
    outs = {}
    for device in (["cpu", dev.type] if dev.type == "cuda" else ["cpu"]) * 2:
        t = time.perf_counter()
        outs[device] = infer(str(run), output="logits", hidden_dtype="f32", device=device)
        res.setdefault(f"{device}_s", []).append(time.perf_counter() - t)
    if "cuda" in outs:
        a, b = outs["cpu"], outs["cuda"]
        res["max_abs_diff"] = float(np.abs(a - b).max())
        res["predictions_equal_share"] = float((a.argmax(1) == b.argmax(1)).mean())
        res["cuda_over_cpu"] = min(res["cuda_s"]) / min(res["cpu_s"])
    res["nodes"] = int(ringgnn.Dataset.open(str(ds_path)).num_nodes)
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", nargs="?")
    p.add_argument("--generate", default=None, help="generate an SBM here first (--nodes, --feature-dim)")
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--feature-dim", type=int, default=256)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    p.add_argument("--gpu-cache-frac", type=float, default=0.25)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--infer", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run this on a machine with a GPU (or --device cpu for a dry run)")
    if args.generate:
        t = time.perf_counter()
        ringgnn.generate_sbm(args.generate, nodes=args.nodes, classes=16, avg_degree=10, feature_dim=args.feature_dim,
                             split="train=0.1,val=0.05,test=0.05", seed=1, overwrite=True)
        print(f"generated {args.generate} in {time.perf_counter() - t:.1f} s", flush=True)
        path = Path(args.generate)
    else:
        path = Path(args.dataset)
    ds = ringgnn.Dataset.open(str(path))
    info = dict(device=torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", torch=torch.__version__,
                nodes=ds.num_nodes, feature_dim=ds.feature_dim, fanouts=args.fanouts, batch_size=args.batch_size,
                batches=args.batches, threads=args.threads, gpu_cache_frac=args.gpu_cache_frac)
    print(json.dumps(info), flush=True)
    configs = [("pageable", False, False), ("pinned", True, False), ("pageable+gpu", False, True),
               ("pinned+gpu", True, True)]
    # Warm-up: CUDA context, allocator, kernels.
    train_pass(ds, args, dev, True, False)
    rows = []
    for r in range(args.repeat):
        for name, pinned, gpu in configs:
            c = copy_pass(ds, args, dev, pinned, gpu)
            t = train_pass(ds, args, dev, pinned, gpu)
            row = dict(run=r + 1, config=name, **c, **t)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| config | copy GB/s | MB sent / batch | rows sent | epoch s | waiting s | mean loss |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _, _ in configs:
        mine = [x for x in rows if x["config"] == name]
        med = lambda k: float(np.median([x[k] for x in mine]))  # noqa: E731
        print(f"| {name} | {med('copy_gbps'):.1f} | {med('mb_per_batch'):.1f} | {med('rows_sent_share'):.0%} "
              f"| {med('epoch_s'):.2f} | {med('wait_s'):.2f} | {med('mean_loss'):.4f} |")
    out = dict(info=info, rows=rows)
    if args.infer:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            out["infer"] = infer_pass(path, args, dev, Path(tmp))
        print("infer:", json.dumps(out["infer"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
