"""``ringgnn train``: mini-batch GNN training with graph and features read from disk.

Models are GraphSAGE (default), GCN and GAT built from PyG layers. Training follows PyG's
``NeighborLoader`` recipe: each batch is the sampled neighborhood of its seeds, the loss is taken
on the seeds only (they come first). Evaluation is out of core too: the val and test seeds are
sampled with the same fanouts as training (not layer-wise full-neighborhood inference), in a fixed
order and with a fixed sample, so accuracies of different epochs compare the same neighborhoods.

A run directory holds ``last.pt`` (written after each epoch, what ``--resume`` continues from),
``best.pt`` (the epoch of best validation accuracy) and ``metrics.json`` (written atomically).
A run is reproducible on CPU: ``--seed`` seeds both PyTorch (weights, dropout) and the sampler.

Launched by ``torchrun`` (``WORLD_SIZE`` > 1), training is data parallel with DDP: each rank
trains on its share of each epoch's batches (``ringgnn.distributed``), evaluation sums correct
answers over the ranks, and rank 0 alone writes the run directory. ``--batch-size`` is per
rank, as in DDP: an epoch has ``world_size`` times fewer steps of ``world_size`` times more seeds.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _options, distributed, progress
from ._files import os_errors, replacing
from ._core import InputError
from ._options import BACKENDS, CACHE_POLICIES, count_arg, positive_arg, size_arg
from .dataset import Dataset
from .loader import Loader

MODELS = ("sage", "gcn", "gat")
#: How val/test accuracy is measured (``--eval``).
EVAL_MODES = ("auto", "sampled", "layerwise")

#: Options that define the run: ``--resume`` refuses to continue when one of them differs. The
#: number of epochs may grow, and how the run is executed (device, threads, output) may change.
RUN_DEFINING = ("model", "fanouts", "batch_size", "hidden", "layers", "lr", "dropout", "seed", "world_size")
#: What a checkpoint written before an option existed was trained with.
RUN_DEFAULTS = {"world_size": 1}


def build_model(kind: str, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float) -> Any:
    """PyG's ``GraphSAGE``, ``GCN`` or ``GAT`` (``SAGEConv``/``GCNConv``/``GATConv`` layers, one
    attention head): ``layers`` convolutions with ReLU and dropout between them."""
    from torch_geometric.nn import GAT, GCN, GraphSAGE

    cls = {"sage": GraphSAGE, "gcn": GCN, "gat": GAT}[kind]
    return cls(in_dim, hidden, layers, out_dim, dropout=dropout, act="relu")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a GNN (GraphSAGE, GCN, GAT) out of core",
        description="Train a GNN with neighbor sampling, graph and features read from disk. Each epoch "
        "prints the train loss, validation and test accuracy and where the time went. Evaluation is "
        "out of core too: val and test seeds are sampled with the same fanouts as training.",
    )
    p.add_argument("dataset", metavar="DATASET", help="a dataset with features, labels and train/val/test splits")
    p.add_argument("--model", default="sage", help="sage (GraphSAGE, default), gcn or gat")
    p.add_argument("--fanouts", default="10,5", metavar="F1,F2,...", help="neighbors per layer (default 10,5)")
    p.add_argument("--batch-size", type=positive_arg, default=512, metavar="B", help="seeds per batch (default 512)")
    p.add_argument("--epochs", type=positive_arg, default=5, metavar="N", help="epochs in total (default 5)")
    p.add_argument("--hidden", type=positive_arg, default=64, help="hidden width (default 64)")
    p.add_argument("--layers", type=positive_arg, default=2, help="GNN layers = number of fanouts (default 2)")
    p.add_argument("--lr", type=float, default=0.005, help="Adam learning rate (default 0.005)")
    p.add_argument("--dropout", type=float, default=0.3, help="dropout between layers (default 0.3)")
    p.add_argument("--cache", type=size_arg, default=None, metavar="SIZE",
                   help="hot feature rows kept in memory (default: what --memory leaves; 0: none)")
    p.add_argument("--cache-policy", choices=CACHE_POLICIES, default="presample",
                   help="rows to cache: most accessed in look-ahead sampling (default) or highest in-degree")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE",
                   help="budget of the whole process (of each rank under torchrun): runtime, model, sampler, "
                        "cache, buffers (default: what the process holds plus half the available memory, "
                        "divided among the ranks of this machine)")
    p.add_argument("--prefetch", type=positive_arg, default=None, metavar="N",
                   help="gathered batches held ahead of training (default: one per thread, 1 if memory is tight)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="how neighbor lists and feature rows are read (default auto)")
    p.add_argument("--direct", action="store_true", help="io_uring with O_DIRECT: bypass the page cache")
    p.add_argument("--hyperbatch", default="auto", metavar="N|auto",
                   help="batches sampled together when the graph is read from disk (default auto)")
    p.add_argument("--staging-dir", default=None, metavar="DIR",
                   help="where hyperbatches stage feature rows (default: beside the dataset)")
    p.add_argument("--staging-cap", type=size_arg, default=None, metavar="SIZE",
                   help="largest staging file (default: the feature file's size; 0: never stage)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model runs (default cpu; cuda: pinned batch buffers, copies on a side stream; "
                        "under torchrun each rank takes its local rank's GPU)")
    p.add_argument("--gpu-cache", type=size_arg, default=None, metavar="SIZE",
                   help="with --device cuda: GPU memory for the feature rows the batches touch most, which then "
                        "never cross the bus (default: none)")
    p.add_argument("--seed", type=count_arg, default=0, help="seeds PyTorch and the sampler (default 0)")
    p.add_argument("--threads", type=positive_arg, default=None,
                   help="sampling threads (default: all cores, divided among the ranks of this machine)")
    p.add_argument("--dist-timeout", type=positive_arg, default=int(distributed.DEFAULT_TIMEOUT), metavar="SECONDS",
                   help="under torchrun: how long a rank waits for the others at a collective before it fails "
                        f"(default {int(distributed.DEFAULT_TIMEOUT)})")
    p.add_argument("--out", metavar="RUN_DIR", default=None, help="run directory (default runs/<dataset name>)")
    p.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt with the next epoch")
    p.add_argument("--overwrite", action="store_true", help="start over in a RUN_DIR that already holds a run")
    p.add_argument("--eval", choices=EVAL_MODES, default="auto", dest="eval_mode",
                   help="auto (default): sampled neighborhoods after each epoch, then exact layer-wise inference "
                        "for the best checkpoint's val/test accuracy; sampled: only the former; layerwise: exact "
                        "after every epoch too (one pass over the graph per layer each time)")
    p.add_argument("--tensorboard", action="store_true",
                   help="log each epoch to RUN_DIR/tensorboard (needs the tensorboard package)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print metrics.json on stdout instead of text")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    # torch_geometric calls torch.jit.script at import, which torch >= 2.10 deprecates: noise for
    # a command-line user, who can do nothing about it.
    warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated", category=FutureWarning)
    opts = {k: getattr(args, k) for k in ("model", "batch_size", "epochs", "hidden", "layers", "lr", "dropout",
                                          "cache", "cache_policy", "memory", "prefetch", "backend", "direct", "hyperbatch",
                                          "staging_dir", "staging_cap",
                                          "device", "gpu_cache", "seed", "threads", "out", "resume", "overwrite",
                                          "dist_timeout", "eval_mode", "tensorboard")}
    log = (lambda s: None) if args.json else _print_line
    m = train(args.dataset, fanouts=_options.fanouts(args.fanouts), quiet=args.quiet or args.json, log=log, **opts)
    if args.json and distributed.leader_by_env():
        print(json.dumps(m, indent=2))
    return 0


def _print_line(s: str) -> None:
    """One write per line, so that the lines of ranks sharing a terminal do not interleave."""
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


def _check(ds: Dataset, model: str, fanouts: List[int], layers: int, device: str, dropout: float) -> None:
    import torch

    if model not in MODELS:
        raise InputError(f"unknown model '{model}'; use one of {', '.join(MODELS)}")
    if len(fanouts) != layers:
        raise InputError(
            f"--fanouts {','.join(map(str, fanouts))} has {len(fanouts)} hops but --layers is {layers}; "
            "give one fanout per layer"
        )
    if not 0 <= dropout < 1:
        raise InputError(f"--dropout {dropout}: must be in [0, 1)")
    if ds.feature_dim is None:
        raise InputError(f"{ds.path}: the dataset has no node features; rebuild it with --features")
    if ds.num_classes is None:
        raise InputError(f"{ds.path}: the dataset has no labels; rebuild it with --labels")
    missing = [s for s in ("train", "val", "test") if s not in ds.split_names]
    if missing:
        raise InputError(
            f"{ds.path}: the dataset has no {'/'.join(missing)} split; rebuild it with "
            "--split train=0.6,val=0.2,test=0.2"
        )
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: PyTorch sees no CUDA device here; use --device cpu")


def train(
    dataset: Any,
    *,
    model: str = "sage",
    fanouts: Sequence[int] = (10, 5),
    batch_size: int = 512,
    epochs: int = 5,
    hidden: int = 64,
    layers: int = 2,
    lr: float = 0.005,
    dropout: float = 0.3,
    cache: Optional[int] = None,
    cache_policy: str = "presample",
    memory: Optional[int] = None,
    prefetch: Optional[int] = None,
    backend: str = "auto",
    direct: bool = False,
    hyperbatch: Any = "auto",
    staging_dir: Optional[str] = None,
    staging_cap: Optional[int] = None,
    device: str = "cpu",
    seed: int = 0,
    threads: Optional[int] = None,
    out: Optional[str] = None,
    resume: bool = False,
    overwrite: bool = False,
    quiet: bool = False,
    log: Callable[[str], None] = print,
    dist_timeout: float = distributed.DEFAULT_TIMEOUT,
    gpu_cache: Optional[int] = None,
    eval_mode: str = "auto",
    tensorboard: bool = False,
) -> Dict[str, Any]:
    """Train, checkpoint and evaluate; returns what ``RUN_DIR/metrics.json`` holds. Under
    ``torchrun`` (or in a process group the caller started) every rank calls this; rank 0
    writes the run directory, and every rank returns the same metrics (rank 0's also hold the
    final layer-wise evaluation)."""
    ds = dataset if isinstance(dataset, Dataset) else Dataset.open(dataset)
    fanouts = _options.fanouts(fanouts)
    epochs, hidden, layers = (_options.count(v, k, 1) for k, v in (("epochs", epochs), ("hidden", hidden),
                                                                   ("layers", layers)))
    _check(ds, model, fanouts, layers, device, dropout)
    gpu_cache = _options.size(gpu_cache, "gpu_cache") or None
    if gpu_cache and device != "cuda":
        raise InputError("--gpu-cache holds feature rows on a GPU: it needs --device cuda")
    eval_mode = _options.choice(eval_mode, EVAL_MODES, "eval")
    if tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as e:
            raise InputError(f"--tensorboard: {e}; install it with pip install tensorboard") from None
    out = out or os.path.join("runs", os.path.basename(os.path.normpath(ds.path)))
    ranks = distributed.join(device, float(dist_timeout))
    if eval_mode == "layerwise" and ranks.active:
        distributed.leave(ranks)
        raise InputError("--eval layerwise after every epoch runs on one process; under torchrun use --eval auto "
                         "(sampled after each epoch, layer-wise once at the end, on rank 0)")
    try:
        # The loader reads the dataset and writes its staging file (in --staging-dir): an OS error
        # there names the file and says it happened while training (the run directory's own
        # writes name themselves, see _save).
        with os_errors("training on", ds.path):
            metrics = _train(
                ds, ranks, model=model, fanouts=fanouts, batch_size=batch_size, epochs=epochs, hidden=hidden,
                layers=layers, lr=lr, dropout=dropout, cache=cache, cache_policy=cache_policy, memory=memory,
                prefetch=prefetch, backend=backend, direct=direct, hyperbatch=hyperbatch, staging_dir=staging_dir,
                staging_cap=staging_cap, device=device, seed=seed, threads=threads, out=out, resume=resume,
                overwrite=overwrite, quiet=quiet, log=log, gpu_cache=gpu_cache, eval_mode=eval_mode,
                tensorboard=tensorboard)
    finally:
        distributed.leave(ranks)
    if eval_mode == "auto" and ranks.leader and metrics["best_epoch"] is not None:
        # Exact accuracy of the best checkpoint: full neighborhoods, layer by layer (the loaders
        # of the epochs are gone, so their memory is free for it).
        from .inference import layerwise_accuracy, load_checkpoint

        ckpt = load_checkpoint(out, ds, "--out")
        t0 = time.perf_counter()
        acc = layerwise_accuracy(ds, ckpt, memory=memory, backend=backend, direct=direct, quiet=quiet)
        metrics["layerwise"] = dict(epoch=metrics["best_epoch"], val_acc=acc["val"], test_acc=acc["test"],
                                    seconds=time.perf_counter() - t0)
        _write_json(metrics, os.path.join(out, "metrics.json"))
        log(f"layer-wise (exact) evaluation of epoch {metrics['best_epoch']}: val acc {acc['val']:.4f}, test acc "
            f"{acc['test']:.4f} ({metrics['layerwise']['seconds']:.1f} s)")
    if ranks.leader:
        log(f"best val acc {metrics['best_val_acc']:.4f} at epoch {metrics['best_epoch']}, "
            f"test acc {metrics['test_acc']:.4f}; {os.path.join(out, 'metrics.json')}")
    return metrics


def _train(ds: Dataset, ranks: distributed.Ranks, *, model: str, fanouts: List[int], batch_size: int, epochs: int,
           hidden: int, layers: int, lr: float, dropout: float, cache, cache_policy: str, memory, prefetch,
           backend: str, direct: bool, hyperbatch, staging_dir, staging_cap, device: str, seed: int,
           threads: Optional[int], out: Optional[str], resume: bool, overwrite: bool, quiet: bool,
           log: Callable[[str], None], gpu_cache: Optional[int], eval_mode: str,
           tensorboard: bool) -> Dict[str, Any]:
    import torch

    run_args = dict(model=model, fanouts=fanouts, batch_size=batch_size, epochs=epochs, hidden=hidden,
                    layers=layers, lr=lr, dropout=dropout, cache=cache, memory=memory, device=device, seed=seed,
                    world_size=ranks.world_size)
    rank_log = log  # lines every rank prints (tagged with its rank)
    if not ranks.leader:
        log, quiet = (lambda s: None), True
    dev = distributed.device_of(ranks, device)

    if resume and overwrite:
        raise InputError("--resume continues the run in RUN_DIR and --overwrite starts it over: give one of them")
    # Rank 0 owns the run directory: it checks it, and on resume reads the checkpoint every
    # rank continues from.
    resumed = distributed.from_leader(ranks, lambda: _open_run(out, run_args, resume, overwrite))
    torch.manual_seed(seed)
    net = build_model(model, ds.feature_dim, hidden, ds.num_classes, layers, dropout).to(dev)
    # The budget covers the whole process: what it holds now (Python, PyTorch, the model) and
    # the activations of the largest batch are reserved before the loader splits the rest.
    reserve = _options.process_rss() + activation_bytes(model, ds, fanouts, batch_size, hidden)
    # One engine for the three loaders: the offset index, the neighbor file (memory backend),
    # the hot-row cache, the labels and the budget are held once.
    train_loader = Loader(ds, fanouts, batch_size, split="train", shuffle=True, cache=cache,
                          cache_policy=cache_policy, memory=memory, reserve=reserve, prefetch=prefetch,
                          # On CUDA one more host batch is held: the one whose copy runs ahead.
                          hold=2 if device == "cuda" else 1,
                          backend=backend, direct=direct, threads=threads, seed=seed, hyperbatch=hyperbatch,
                          staging_dir=staging_dir, staging_cap=staging_cap, processes=ranks.local_world_size)
    loaders = {"train": train_loader}
    for split in ("val", "test"):
        loaders[split] = Loader(ds, fanouts, batch_size, split=split, shuffle=False, share=train_loader)
    if ranks.active:
        # Each rank takes its share of every epoch's batches (see ringgnn.distributed).
        for split, loader in loaders.items():
            n = len(loader)
            loader.batches = distributed.shard(n, ranks.rank, ranks.world_size, pad=split == "train")
    feeds: Dict[str, Any] = dict(loaders)  # what the epochs iterate
    device_note = ""
    if device == "cuda":
        from . import cuda

        pinned = cuda.pin(train_loader)
        row_cache = cuda.DeviceRowCache.for_loader(train_loader, gpu_cache, dev, seed) if gpu_cache else None
        feeds = {k: cuda.DeviceLoader(v, dev, row_cache) for k, v in loaders.items()}
        device_note = (f"; CUDA: batch buffers {'pinned' if pinned else 'pageable'}, copies on a side stream"
                       + (f", GPU tier {len(row_cache):,} rows ({_mib(row_cache.nbytes)})" if row_cache else ""))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    history: List[Dict[str, Any]] = []
    start = 0
    if resumed is not None:
        net.load_state_dict(resumed["model"])
        opt.load_state_dict(resumed["optimizer"])
        torch.set_rng_state(resumed["rng"])
        start, history = resumed["epoch"] + 1, list(resumed["metrics"]["epochs"])
    step_net = net
    if ranks.active:
        from torch.nn.parallel import DistributedDataParallel

        step_net = DistributedDataParallel(net, device_ids=[ranks.local_rank] if device == "cuda" else None)
    if ranks.leader:
        with os_errors("creating the run directory", out):
            os.makedirs(out, exist_ok=True)
    world = f", {ranks.world_size} ranks (batch {batch_size} per rank)" if ranks.active else ""
    log(f"training {model} on {ds.path}: {ds.num_nodes:,} nodes, fanouts {','.join(map(str, fanouts))}, "
        f"batch {batch_size}, {len(loaders['train'])} batches per epoch{' per rank' if ranks.active else ''}{world}, "
        f"device {device} -> {out}")
    st = train_loader.stats()
    rank_log(f"{ranks.tag()}loader: sampling with {st['backend']}, features with {st['feature_backend']}, "
             f"{st['cached_rows']:,} hot rows cached ({_mib(st['cache_bytes'])})"
             + (f" by look-ahead over {st['presample_batches']} batches in {st['presample_seconds']:.1f} s"
                if st["presample_batches"] else "")
             + f"; memory {train_loader.plan()['text']}{device_note}")

    metrics = _metrics(ds, run_args, history, loaders)
    plots = _Plots(out if ranks.leader else None, tensorboard, start)
    for epoch in range(start, epochs):
        before = loaders["train"].stats()
        t0 = time.perf_counter()
        loss_sum, count, wait, step = distributed.guarded(
            ranks, f"training epoch {epoch}",
            lambda: _train_epoch(step_net, opt, feeds["train"], epoch, dev, quiet, model, always_step=ranks.active))
        t1 = time.perf_counter()
        le = dict(loaders["train"].last_epoch)
        if eval_mode == "layerwise":
            from .inference import Checkpoint, layerwise_accuracy

            net.eval()
            acc = layerwise_accuracy(ds, Checkpoint(net.cpu() if device != "cpu" else net, model, fanouts, hidden,
                                                    layers, os.path.join(out, "last.pt")),
                                     memory=memory, backend=backend, direct=direct, quiet=quiet)
            net.to(dev)
            val_acc, test_acc = acc["val"], acc["test"]
            loss = loss_sum / max(count, 1)
        else:
            counts = [*_count_correct(net, feeds["val"], dev, model), *_count_correct(net, feeds["test"], dev, model)]
            loss_sum, count, val_ok, val_n, test_ok, test_n = distributed.sums(
                ranks, [loss_sum, count, *counts], "cpu" if device == "cpu" else dev)
            loss = loss_sum / max(count, 1)
            val_acc, test_acc = _ratio(val_ok, val_n), _ratio(test_ok, test_n)
        seconds = time.perf_counter() - t0
        hit = le["cache_hits"] / le["distinct_rows"] if le["distinct_rows"] else 0.0
        row = dict(epoch=epoch, loss=loss, val_acc=val_acc, test_acc=test_acc, seconds=seconds,
                   train_epoch_seconds=t1 - t0, sample_seconds=le["sample"], gather_seconds=le["gather"],
                   train_seconds=step, wait_seconds=wait, eval_seconds=seconds - (t1 - t0),
                   feature_bytes_read=le["bytes_read"], cache_hit_rate=hit)
        if ranks.active:
            # The stage columns above are rank 0's; every rank's are here.
            row["ranks"] = distributed.gather(ranks, {k: row[k] for k in (
                "train_epoch_seconds", "sample_seconds", "gather_seconds", "train_seconds", "wait_seconds",
                "eval_seconds", "feature_bytes_read", "cache_hit_rate")})
        history.append(row)
        log(f"epoch {epoch}: loss {loss:.4f}, val acc {val_acc:.4f}, test acc {test_acc:.4f}, {seconds:.2f} s")
        log(f"  {'rank 0: ' if ranks.active else ''}training pass {t1 - t0:.2f} s: sample {le['sample']:.2f} s "
            f"and gather {le['gather']:.2f} s (worker threads, overlapped), train {step:.2f} s, waiting for batches "
            f"{wait:.2f} s; features read {_mib(le['bytes_read'])}, cache hit rate {hit:.1%}; evaluation "
            f"{seconds - (t1 - t0):.2f} s")
        log(_hyperbatch_line(before, loaders["train"].stats()))
        metrics = _metrics(ds, run_args, history, loaders)
        if ranks.leader:
            state = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=epoch, args=run_args,
                         metrics=metrics, rng=torch.get_rng_state())
            if metrics["best_epoch"] == epoch:
                _save(state, os.path.join(out, "best.pt"))
            _save(state, os.path.join(out, "last.pt"))
            _write_json(metrics, os.path.join(out, "metrics.json"))
            plots.epoch(history)
    if start >= epochs and ranks.leader:  # nothing left to run: refresh metrics.json with this process's counters
        _write_json(metrics, os.path.join(out, "metrics.json"))
    plots.close()
    # Rank 0's files are complete before any rank returns.
    distributed.barrier(ranks)
    return metrics


class _Plots:
    """What people look at besides the log: ``RUN_DIR/curves.png`` (loss, accuracies and stage
    times per epoch; when matplotlib is installed) and TensorBoard scalars (``--tensorboard``),
    both written by rank 0 after each epoch."""

    def __init__(self, run_dir: Optional[str], tensorboard: bool, start: int):
        self.run_dir, self.writer = run_dir, None
        if run_dir is not None and tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            with os_errors("writing TensorBoard logs to", os.path.join(run_dir, "tensorboard")):
                self.writer = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=start)

    def epoch(self, history: List[Dict[str, Any]]) -> None:
        if self.run_dir is None:
            return
        e = history[-1]
        if self.writer is not None:
            for key in ("loss", "val_acc", "test_acc", "seconds", "sample_seconds", "gather_seconds",
                        "train_seconds", "wait_seconds", "eval_seconds", "cache_hit_rate"):
                group = "loss" if key == "loss" else "accuracy" if key.endswith("_acc") else "time" \
                    if key.endswith("seconds") else "loader"
                self.writer.add_scalar(f"{group}/{key}", e[key], e["epoch"])
            with os_errors("writing TensorBoard logs to", os.path.join(self.run_dir, "tensorboard")):
                self.writer.flush()
        write_curves(history, os.path.join(self.run_dir, "curves.png"))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def write_curves(history: List[Dict[str, Any]], path: str) -> bool:
    """Training curves as a PNG (written whole, then renamed); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ep = [e["epoch"] for e in history]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(ep, [e["loss"] for e in history], marker="o")
    axes[0].set(title="train loss", xlabel="epoch")
    axes[1].plot(ep, [e["val_acc"] for e in history], marker="o", label="val")
    axes[1].plot(ep, [e["test_acc"] for e in history], marker="o", label="test")
    axes[1].set(title="accuracy", xlabel="epoch")
    axes[1].legend()
    bottom = [0.0] * len(ep)
    for key, label in (("train_seconds", "train"), ("wait_seconds", "waiting for batches"),
                       ("eval_seconds", "evaluation")):
        vals = [e[key] for e in history]
        axes[2].bar(ep, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    axes[2].set(title="seconds per epoch", xlabel="epoch")
    axes[2].legend(fontsize="small")
    fig.tight_layout()
    try:
        with replacing(path, "writing the training curves") as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return True


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def _hyperbatch_line(before: Dict[str, Any], after: Dict[str, Any]) -> str:
    """What hyperbatches did since ``before`` (training and evaluation share the engine)."""
    d = {k: after[k] - before[k] for k in after if isinstance(after[k], (int, float)) and k in before}
    n = d["sampler_hyperbatches"]
    if not n:
        return "  hyperbatches: none (one batch at a time)"
    line = (f"  hyperbatches: {n} of {d['sampler_hyperbatch_batches'] / n:.1f} batches, neighbor lists read "
            f"{_mib(d['sampler_sequential_bytes'])} sequentially and {_mib(d['sampler_random_bytes'])} by page")
    staged, unstaged = d["staged_hyperbatches"], d["unstaged_hyperbatches"]
    if staged or unstaged:
        line += (f"; feature rows staged in {staged} of {staged + unstaged} (cost model: "
                 f"{d['est_staged_seconds']:.1f} s staged vs {d['est_per_batch_seconds']:.1f} s batch by batch), "
                 f"pass {_mib(d['staging_pass_bytes'])}, staged {_mib(d['staging_written_bytes'])}")
    return line


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def activation_bytes(model: str, ds: Dataset, fanouts: Sequence[int], batch_size: int, hidden: int) -> int:
    """Upper bound on the memory of one training step's activations (forward and backward):
    per layer, the gathered source rows of its edges (PyG's message passing materialises
    ``x[edge_index[0]]``), and its outputs, their gradients and dropout masks. GraphSAGE is
    trimmed layer by layer (PyG's ``num_sampled_nodes_per_hop``): layer ``l`` only computes the
    nodes that later layers need."""
    dim = ds.feature_dim or 0
    hops_nodes, hops_edges, frontier = [batch_size], [0], batch_size
    for f in fanouts:
        frontier *= ds.num_nodes if f < 0 else f
        hops_nodes.append(frontier)
        hops_edges.append(frontier)
    n_all = min(ds.num_nodes, sum(hops_nodes))
    total, L = 0, len(fanouts)
    for layer in range(1, L + 1):
        d_in = dim if layer == 1 else hidden
        keep = L - layer + 1 if model == "sage" else L  # hops whose edges this layer uses
        edges = min(ds.num_edges, sum(hops_edges[: keep + 1]))
        nodes = min(n_all, sum(hops_nodes[:keep])) if model == "sage" else n_all
        total += edges * d_in * 4 + nodes * max(hidden, d_in) * 4 * 3
    return int(total)


def _forward(net, batch, device: str, model: str):
    x, edge_index = batch.x.to(device), batch.edge_index.to(device)
    if model == "sage":
        # Trim layer by layer (exact for GraphSAGE: the seeds' outputs do not change).
        return net(x, edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                   num_sampled_edges_per_hop=batch.num_sampled_edges)[: batch.batch_size]
    return net(x, edge_index)[: batch.batch_size]


def _train_epoch(net, opt, loader: Loader, epoch: int, device: str, quiet: bool, model: str = "sage",
                 always_step: bool = False):
    """One pass over the training split: (sum of the loss over labeled seeds, labeled seeds,
    seconds waiting for batches, seconds in forward/backward/step). With ``always_step`` (DDP,
    where every rank must join every gradient all-reduce) a batch without labeled seeds still
    takes a step, of zero gradient."""
    import torch.nn.functional as F

    net.train()
    loader.set_epoch(epoch)
    total_loss, count, wait, step = 0.0, 0, 0.0, 0.0
    it = iter(loader)
    with progress.bar(len(loader), f"epoch {epoch}", "batch", disable=quiet, leave=False) as bar:
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)  # sampling and feature gathering happen behind this call
            except StopIteration:
                break
            t1 = time.perf_counter()
            y = batch.y[: batch.batch_size].to(device)
            labeled = y >= 0
            n = int(labeled.sum())
            if n or always_step:
                opt.zero_grad()
                out = _forward(net, batch, device, model)
                loss = F.cross_entropy(out[labeled], y[labeled]) if n else out.sum() * 0.0
                loss.backward()
                opt.step()
                total_loss += loss.item() * n
                count += n
                del out, loss
            del batch  # release the feature buffer before waiting for the next batch
            wait += t1 - t0
            step += time.perf_counter() - t1
            bar.update(1)
    return total_loss, count, wait, step


def _count_correct(net, loader: Loader, device: str, model: str):
    """(Correct predictions, labeled seeds) over ``loader``'s batches, sampled as in training.
    The sample is the same at every epoch (epoch 0 of the loader's seed), so accuracies of
    different epochs compare the same neighborhoods."""
    import torch

    net.eval()
    loader.set_epoch(0)
    correct = total = 0
    with torch.no_grad():
        for batch in loader:
            y = batch.y[: batch.batch_size].to(device)
            pred = _forward(net, batch, device, model).argmax(-1)
            labeled = y >= 0
            correct += int((pred[labeled] == y[labeled]).sum())
            total += int(labeled.sum())
    return correct, total


def _metrics(ds: Dataset, run_args: Dict[str, Any], history: List[Dict[str, Any]], loaders) -> Dict[str, Any]:
    best = max(history, key=lambda e: e["val_acc"], default=None)  # the first epoch wins a tie
    return {
        "dataset": os.path.abspath(ds.path),
        "best_val_acc": None if best is None else best["val_acc"],
        "test_acc": None if best is None else best["test_acc"],
        "best_epoch": None if best is None else best["epoch"],
        "world_size": run_args["world_size"],
        "epochs": list(history),
        "args": dict(run_args),
        # The three loaders share one engine: its counters cover training and evaluation.
        "loader": loaders["train"].stats(),
        "memory_plan": loaders["train"].plan(),
    }


def _open_run(out: str, run_args: Dict[str, Any], resume: bool, overwrite: bool) -> Optional[Dict[str, Any]]:
    """Check RUN_DIR for this start; on ``resume``, the checkpoint to continue from."""
    if not resume and not overwrite and os.path.exists(os.path.join(out, "last.pt")):
        raise InputError(f"{out} already holds a run (last.pt): use --resume to continue it, --overwrite to start "
                         "over, or another --out")
    return _resume(out, run_args) if resume else None


def _resume(out: str, run_args: Dict[str, Any]) -> Dict[str, Any]:
    import torch

    path = os.path.join(out, "last.pt")
    if not os.path.exists(path):
        raise InputError(f"--resume: {path} does not exist; run without --resume first")
    with os_errors("reading the checkpoint", path):
        state = torch.load(path, map_location="cpu", weights_only=True)
    was = {k: state["args"].get(k, RUN_DEFAULTS.get(k)) for k in RUN_DEFINING}
    diff = [k for k in RUN_DEFINING if was[k] != run_args[k]]
    if diff:
        text = ", ".join(f"{k}={was[k]} (now {run_args[k]})" for k in diff)
        hint = "use the same options or another --out"
        if "world_size" in diff:
            hint = (f"resume with {was['world_size']} processes ("
                    + ("torchrun --nproc-per-node ... with that many ranks in all"
                       if was["world_size"] > 1 else "without torchrun") + "), or start a new run with another --out")
        raise InputError(f"--resume: {path} was trained with {text}; {hint}")
    return state


def _save(obj: Any, path: str) -> None:
    """A checkpoint, written whole under a locked temporary name and renamed into place."""
    import torch

    # Serialized in memory, then written: torch's own writers report a full disk as a
    # RuntimeError without errno or file (a checkpoint is the model and its optimizer: small).
    buf = io.BytesIO()
    torch.save(obj, buf)
    with replacing(path, "writing the checkpoint") as tmp, open(tmp, "wb") as f:
        f.write(buf.getbuffer())


def _write_json(obj: Any, path: str) -> None:
    with replacing(path, "writing") as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
