"""Mini-batch GNN training with graph and features read from disk: the loop of ``ringgnn train``.

The loop is the same for every task (``ringgnn.tasks``; node classification is the one so far):
it follows PyG's ``NeighborLoader`` recipe, each batch the sampled neighborhood of its seeds, the
task's loss taken on the seeds (they come first). Evaluation is out of core too: the seeds of the
evaluated splits are sampled with the same fanouts as training (not layer-wise full-neighborhood
inference), in a fixed order and with a fixed sample, so the scores of different epochs compare
the same neighborhoods. The models are in ``ringgnn.models``; the command line is ``ringgnn.cli.train``.

A run directory holds ``last.pt`` (written after each epoch, what ``--resume`` continues from),
``best.pt`` (the epoch of best validation score; both ``ringgnn.checkpoints``) and
``metrics.json`` (written atomically). A run is reproducible on CPU: ``--seed`` seeds both
PyTorch (weights, dropout) and the sampler.

Launched by ``torchrun`` (``WORLD_SIZE`` > 1), training is data parallel with DDP: each rank
trains on its share of each epoch's batches (``ringgnn.distributed``), evaluation sums the
task's counts over the ranks, and rank 0 alone writes the run directory. ``--batch-size`` is per
rank, as in DDP: an epoch has ``world_size`` times fewer steps of ``world_size`` times more seeds.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _options, distributed, progress
from ._core import InputError
from ._files import os_errors
from .checkpoints import load_checkpoint, open_run, restore, run_directory, save, write_json
from .curves import Plots
from .dataset import Dataset, open_homogeneous
from .links import WEIGHTS as NEG_WEIGHTS
from .models import DECODERS, MODELS, activation_bytes
from .tasks import LinkPrediction, NodeClassification, Task

#: How val/test scores are measured (``--eval``).
EVAL_MODES = ("auto", "sampled", "layerwise")
#: What ``--task`` trains for.
TASKS = ("node", "link")


def _check(ds: Dataset, task: Task, model: str, fanouts: List[int], layers: int, device: str) -> None:
    import torch

    if model not in MODELS:
        raise InputError(f"unknown model '{model}'; use one of {', '.join(MODELS)}")
    if len(fanouts) != layers:
        raise InputError(
            f"--fanouts {','.join(map(str, fanouts))} has {len(fanouts)} hops but --layers is {layers}; "
            "give one fanout per layer"
        )
    if ds.feature_dim is None:
        raise InputError(f"{ds.path}: the dataset has no node features; rebuild it with --features")
    task.check(ds)
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
    task: str = "node",
    decoder: Optional[str] = None,
    neg_ratio: Optional[float] = None,
    neg_weight: Optional[str] = None,
) -> Dict[str, Any]:
    """Train, checkpoint and evaluate; returns what ``RUN_DIR/metrics.json`` holds. Under
    ``torchrun`` (or in a process group the caller started) every rank calls this; rank 0
    writes the run directory, and every rank returns the same metrics (rank 0's also hold the
    final layer-wise evaluation).

    ``task``: ``node`` (classification, the default) or ``link`` (link prediction on the
    dataset's edge splits, with ``decoder`` ``dot`` (default) or ``mlp``, ``neg_ratio`` random
    negatives per positive (default 1) drawn by ``neg_weight`` ``uniform`` (default) or
    ``degree``)."""
    ds = open_homogeneous(dataset, "this training path")
    task_name = _options.choice(task, TASKS, "--task")
    if task_name == "link":
        decoder = _options.choice("dot" if decoder is None else decoder, DECODERS, "--decoder")
        neg_ratio = 1.0 if neg_ratio is None else _options.negative_ratio(neg_ratio)
        neg_weight = "uniform" if neg_weight is None else neg_weight
        task_obj: Task = LinkPrediction(decoder, neg_ratio, _options.choice(neg_weight, NEG_WEIGHTS, "--neg-weight"))
    else:
        given = [f"--{k.replace('_', '-')}" for k, v in (("decoder", decoder), ("neg_ratio", neg_ratio),
                                                          ("neg_weight", neg_weight)) if v is not None]
        if given:
            raise InputError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --task link "
                             "(node classification has no decoder nor negatives)")
        task_obj = NodeClassification()
    task = task_obj
    fanouts = _options.fanouts(fanouts)
    epochs, hidden, layers = (_options.count(v, k, 1) for k, v in (("epochs", epochs), ("hidden", hidden),
                                                                   ("layers", layers)))
    lr, dropout = _options.learning_rate(lr), _options.dropout(dropout)
    _check(ds, task, model, fanouts, layers, device)
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
        # writes name themselves, see checkpoints.save). A run that fails before its first
        # checkpoint leaves no run directory behind.
        with run_directory(out, ranks.leader), os_errors("training on", ds.path):
            metrics = _train(
                ds, ranks, task, model=model, fanouts=fanouts, batch_size=batch_size, epochs=epochs, hidden=hidden,
                layers=layers, lr=lr, dropout=dropout, cache=cache, cache_policy=cache_policy, memory=memory,
                prefetch=prefetch, backend=backend, direct=direct, hyperbatch=hyperbatch, staging_dir=staging_dir,
                staging_cap=staging_cap, device=device, seed=seed, threads=threads, out=out, resume=resume,
                overwrite=overwrite, quiet=quiet, log=log, gpu_cache=gpu_cache, eval_mode=eval_mode,
                tensorboard=tensorboard)
    finally:
        distributed.leave(ranks)
    if eval_mode == "auto" and ranks.leader and metrics["best_epoch"] is not None:
        # Exact scores of the best checkpoint: full neighborhoods, layer by layer (the loaders
        # of the epochs are gone, so their memory is free for it).
        ckpt = load_checkpoint(out, ds, "--out")
        t0 = time.perf_counter()
        # f32 hidden layers: the exact numbers (2-byte ones move link metrics in the 4th digit).
        scores = task.layerwise(ds, ckpt, memory=memory, backend=backend, direct=direct, quiet=quiet,
                                hidden_dtype="f32")
        metrics["layerwise"] = dict(epoch=metrics["best_epoch"], **scores, seconds=time.perf_counter() - t0)
        write_json(metrics, os.path.join(out, "metrics.json"))
        log(f"layer-wise (exact) evaluation of epoch {metrics['best_epoch']}: {task.describe(scores)} "
            f"({metrics['layerwise']['seconds']:.1f} s)")
    if ranks.leader:
        log(f"{task.describe_best(metrics)}; {os.path.join(out, 'metrics.json')}")
    return metrics


def _train(ds: Dataset, ranks: distributed.Ranks, task: Task, *, model: str, fanouts: List[int], batch_size: int,
           epochs: int, hidden: int, layers: int, lr: float, dropout: float, cache, cache_policy: str, memory, prefetch,
           backend: str, direct: bool, hyperbatch, staging_dir, staging_cap, device: str, seed: int,
           threads: Optional[int], out: Optional[str], resume: bool, overwrite: bool, quiet: bool,
           log: Callable[[str], None], gpu_cache: Optional[int], eval_mode: str,
           tensorboard: bool) -> Dict[str, Any]:
    import torch

    link = isinstance(task, LinkPrediction)
    run_args = dict(task="link" if link else "node", model=model, decoder=task.decoder if link else None,
                    fanouts=fanouts, batch_size=batch_size, epochs=epochs, hidden=hidden, layers=layers, lr=lr,
                    dropout=dropout, neg_ratio=task.neg.amount if link else None,
                    neg_weight=task.neg.weight if link else None, cache=cache, memory=memory, device=device,
                    seed=seed, world_size=ranks.world_size)
    rank_log = log  # lines every rank prints (tagged with its rank)
    if not ranks.leader:
        log, quiet = (lambda s: None), True
    dev = distributed.device_of(ranks, device)

    if resume and overwrite:
        raise InputError("--resume continues the run in RUN_DIR and --overwrite starts it over: give one of them")
    # Rank 0 owns the run directory: it checks it, and on resume reads the checkpoint every
    # rank continues from.
    resumed = distributed.from_leader(ranks, lambda: open_run(out, run_args, resume, overwrite))
    torch.manual_seed(seed)
    net = task.build(model, ds, hidden, layers, dropout).to(dev)
    # The budget covers the whole process: what it holds now (Python, PyTorch, the model) and
    # the activations of the largest batch are reserved before the loader splits the rest.
    reserve = _options.process_rss() + activation_bytes(model, ds, fanouts, task.batch_seeds(batch_size, ds), hidden)
    # One engine for the loaders of all splits: the offset index, the neighbor file (memory
    # backend), the hot-row cache, the labels and the budget are held once.
    tr = task.train_split
    train_loader = task.loader(ds, tr, fanouts, batch_size, shuffle=True, cache=cache,
                               cache_policy=cache_policy, memory=memory, reserve=reserve, prefetch=prefetch,
                               # On CUDA one more host batch is held: the one whose copy runs ahead.
                               hold=2 if device == "cuda" else 1,
                               backend=backend, direct=direct, threads=threads, seed=seed, hyperbatch=hyperbatch,
                               staging_dir=staging_dir, staging_cap=staging_cap, processes=ranks.local_world_size)
    loaders = {tr: train_loader}
    for split in task.eval_splits:
        loaders[split] = task.loader(ds, split, fanouts, batch_size, shuffle=False, share=train_loader)
    if ranks.active:
        task.distribute(loaders, ranks)
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
    start, history = restore(net, opt, resumed, out)
    step_net = distributed.data_parallel(net, ranks, device)
    if ranks.leader:
        with os_errors("creating the run directory", out):
            os.makedirs(out, exist_ok=True)
    world = f", {ranks.world_size} ranks (batch {batch_size} per rank)" if ranks.active else ""
    log(f"training {model} on {ds.path}: {ds.num_nodes:,} nodes, fanouts {','.join(map(str, fanouts))}, "
        f"batch {batch_size}, {len(train_loader)} batches per epoch{' per rank' if ranks.active else ''}{world}, "
        f"device {device} -> {out}")
    st = train_loader.stats()
    rank_log(f"{ranks.tag()}loader: sampling with {st['backend']}, features with {st['feature_backend']}, "
             f"{st['cached_rows']:,} hot rows cached ({_mib(st['cache_bytes'])})"
             + (f" by look-ahead over {st['presample_batches']} batches in {st['presample_seconds']:.1f} s"
                if st["presample_batches"] else "")
             + f"; memory {train_loader.plan()['text']}{device_note}")

    metrics = _metrics(ds, task, run_args, history, train_loader)
    plots = Plots(out if ranks.leader else None, tensorboard, start)
    for epoch in range(start, epochs):
        before = train_loader.stats()
        t0 = time.perf_counter()
        loss_sum, count, wait, step = distributed.guarded(
            ranks, f"training epoch {epoch}",
            lambda: _train_epoch(step_net, opt, task, feeds[tr], epoch, dev, quiet, model, always_step=ranks.active))
        t1 = time.perf_counter()
        le = dict(train_loader.last_epoch)
        if eval_mode == "layerwise":
            net.eval()
            scores = task.layerwise(ds, task.checkpoint(net.cpu() if device != "cpu" else net, model, fanouts, hidden,
                                                         layers, os.path.join(out, "last.pt")),
                                    memory=memory, backend=backend, direct=direct, quiet=quiet, hidden_dtype="f32")
            net.to(dev)
            loss = loss_sum / max(count, 1)
        else:
            loss_sum, count, *sums = distributed.sums(
                ranks, [loss_sum, count, *task.evaluate(net, feeds, dev, model)], "cpu" if device == "cpu" else dev)
            loss = loss_sum / max(count, 1)
            scores = task.scores(sums)
        seconds = time.perf_counter() - t0
        hit = le["cache_hits"] / le["distinct_rows"] if le["distinct_rows"] else 0.0
        row = dict(epoch=epoch, loss=loss, **scores, seconds=seconds,
                   train_epoch_seconds=t1 - t0, sample_seconds=le["sample"], gather_seconds=le["gather"],
                   train_seconds=step, wait_seconds=wait, eval_seconds=seconds - (t1 - t0),
                   feature_bytes_read=le["bytes_read"], cache_hit_rate=hit)
        if ranks.active:
            # The stage columns above are rank 0's; every rank's are here.
            row["ranks"] = distributed.gather(ranks, {k: row[k] for k in (
                "train_epoch_seconds", "sample_seconds", "gather_seconds", "train_seconds", "wait_seconds",
                "eval_seconds", "feature_bytes_read", "cache_hit_rate")})
        history.append(row)
        log(f"epoch {epoch}: loss {loss:.4f}, {task.describe(scores)}, {seconds:.2f} s")
        log(f"  {'rank 0: ' if ranks.active else ''}training pass {t1 - t0:.2f} s: sample {le['sample']:.2f} s "
            f"and gather {le['gather']:.2f} s (worker threads, overlapped), train {step:.2f} s, waiting for batches "
            f"{wait:.2f} s; features read {_mib(le['bytes_read'])}, cache hit rate {hit:.1%}; evaluation "
            f"{seconds - (t1 - t0):.2f} s")
        log(_hyperbatch_line(before, train_loader.stats()))
        metrics = _metrics(ds, task, run_args, history, train_loader)
        if ranks.leader:
            state = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=epoch, args=run_args,
                         metrics=metrics, rng=torch.get_rng_state())
            if metrics["best_epoch"] == epoch:
                save(state, os.path.join(out, "best.pt"))
            save(state, os.path.join(out, "last.pt"))
            write_json(metrics, os.path.join(out, "metrics.json"))
            plots.epoch(history)
    if start >= epochs and ranks.leader:  # nothing left to run: refresh metrics.json with this process's counters
        write_json(metrics, os.path.join(out, "metrics.json"))
    plots.close()
    # Rank 0's files are complete before any rank returns.
    distributed.barrier(ranks)
    return metrics


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


def _train_epoch(net, opt, task: Task, loader: Any, epoch: int, device: str, quiet: bool, model: str = "sage",
                 always_step: bool = False):
    """One pass over the training split: (sum of the loss over the task's examples, examples,
    seconds waiting for batches, seconds in forward/backward/step). With ``always_step`` (DDP,
    where every rank must join every gradient all-reduce) a batch without examples still takes a
    step, of zero gradient."""
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
            loss, n = task.loss(net, batch, device, model, always=always_step)
            if loss is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
                total_loss += loss.item() * n
                count += n
                del loss
            del batch  # release the feature buffer before waiting for the next batch
            wait += t1 - t0
            step += time.perf_counter() - t1
            bar.update(1)
    return total_loss, count, wait, step


def _metrics(ds: Dataset, task: Task, run_args: Dict[str, Any], history: List[Dict[str, Any]],
             train_loader: Any) -> Dict[str, Any]:
    return {
        "dataset": os.path.abspath(ds.path),
        **task.summary(history),
        "world_size": run_args["world_size"],
        "epochs": list(history),
        "args": dict(run_args),
        # The loaders share one engine: its counters cover training and evaluation.
        "loader": train_loader.stats(),
        "memory_plan": train_loader.plan(),
    }
