"""The one loop of ``ringgnn train`` (:func:`train`) for every task and kind of dataset, data
parallel under ``torchrun`` (docs/ARCHITECTURE.md "Training: one loop, tasks as plug-ins")."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import _options, progress
from .._core import InputError
from .._files import os_errors
from ..data.dataset import Dataset, HeteroDataset
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE
from ..models.checkpoints import open_run, restore, run_directory, write_json
from ..models.gnn import DECODERS
from ..sampling.pairs import WEIGHTS as NEG_WEIGHTS
from . import distributed
from .curves import Plots
from .tasks import LinkPrediction, NodeClassification, Task
from .task_table import check_resumed, read_task_tables
from .temporal import pairs_at_times, seed_times

EVAL_MODES = ("auto", "sampled", "layerwise")
TASKS = ("node", "link")
#: The loop's options a checkpoint's ``args`` holds, in their order (then ``world_size``, the task's).
RUN_ARGS = ("model", "fanouts", "batch_size", "epochs", "hidden", "layers", "lr", "dropout", "cache", "memory",
            "device", "seed")


def train(
    dataset: Any,
    *,
    model: str = "sage",
    fanouts: Any = (10, 5),
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
    target: Optional[str] = None,
    relation: Optional[str] = None,
    embed_dim: Optional[int] = None,
    embed_tables: str = "auto",
    seed_time: Any = None,
    ignore_time: bool = False,
    task_table: Any = None,
    task_node_column: str = "node",
    task_time_column: str = "time",
    task_label_column: str = "label",
) -> Dict[str, Any]:
    """Train, checkpoint and evaluate; returns what ``RUN_DIR/metrics.json`` holds. Under
    ``torchrun`` every rank calls this and returns the same metrics; rank 0 writes the run.
    The options are ``ringgnn train``'s (``--help``): ``task`` node or link (``decoder``,
    ``neg_ratio``, ``neg_weight``); typed datasets ``target``, ``relation``, ``embed_dim``,
    ``embed_tables``; times ``seed_time``, ``ignore_time``; ``task_table`` and its columns."""
    ds = Dataset.opened(dataset)
    columns = dict(node=task_node_column, time=task_time_column, label=task_label_column)
    task_obj = make_task(ds, _options.choice(task, TASKS, "--task"), decoder=decoder, neg_ratio=neg_ratio,
                         neg_weight=neg_weight, target=target, relation=relation, embed_dim=embed_dim,
                         embed_tables=embed_tables, seed_time=seed_time, ignore_time=ignore_time,
                         task_table=task_table, columns=columns)
    task_obj.kind.check_model(model, ds)
    fan = task_obj.fanouts(ds, fanouts)
    epochs, hidden, layers = (_options.count(v, k, 1) for k, v in (("epochs", epochs), ("hidden", hidden),
                                                                   ("layers", layers)))
    lr, dropout = _options.real(lr, "--lr", 0.0, above=True), _options.real(dropout, "--dropout", 0.0, 1.0, below=True)
    hops = len(fan) if isinstance(fan, list) else len(next(iter(fan.values())))
    if hops != layers:
        text = ",".join(map(str, fan)) if isinstance(fan, list) else ""
        raise InputError(f"--fanouts {text + ' ' if text else ''}has {hops} hops but --layers is {layers}; "
                         "give one fanout per layer")
    if not isinstance(ds, HeteroDataset) and task_table is None:
        task_obj.check(ds)
    if device == "cuda":
        _options.require_cuda()
    gpu_cache = _options.size(gpu_cache, "gpu_cache") or None
    if gpu_cache and device != "cuda":
        raise InputError("--gpu-cache holds feature rows on a GPU: it needs --device cuda")
    eval_mode = _options.choice(eval_mode, EVAL_MODES, "eval")
    if task_obj.kind.temporal and eval_mode == "layerwise":
        raise InputError("--eval layerwise: exact layer-wise evaluation gives every node one output on the whole "
                         "graph, so it cannot honour each seed's time (it would score with the future); a run at "
                         "times evaluates by sampling at the seeds' times: use --eval auto or sampled, or "
                         "--ignore-time")
    if task_table is not None and eval_mode == "layerwise":
        raise InputError("--eval layerwise: exact layer-wise evaluation scores the dataset's nodes, not a task table's "
                         "rows; a run on task tables evaluates by sampling each val/test row's node: use --eval auto "
                         "or sampled")
    if tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as e:
            raise InputError(f"--tensorboard: {e}; install it with pip install tensorboard") from None
    if resume and overwrite:
        raise InputError("--resume continues the run in RUN_DIR and --overwrite starts it over: give one of them")
    out = os.fspath(out or os.path.join("runs", os.path.basename(os.path.normpath(ds.path))))
    opts = dict(model=model, fanouts=fan, batch_size=batch_size, epochs=epochs, hidden=hidden, layers=layers, lr=lr,
                dropout=dropout, cache=cache, cache_policy=cache_policy, memory=memory, prefetch=prefetch,
                backend=backend, direct=direct, hyperbatch=hyperbatch, staging_dir=staging_dir,
                staging_cap=staging_cap, device=device, seed=seed, threads=threads, out=out, gpu_cache=gpu_cache)
    task_obj.kind.check_options(opts)
    ranks = distributed.join(device, float(dist_timeout))
    if eval_mode == "layerwise" and ranks.active:
        distributed.leave(ranks)
        raise InputError("--eval layerwise after every epoch runs on one process; under torchrun use --eval auto "
                         "(sampled after each epoch, layer-wise once at the end, on rank 0)")
    if task_obj.kind.temporal and eval_mode == "auto":
        eval_mode = "sampled"
        log("evaluation: sampled at the val/test seeds' times (a run at times records no exact layer-wise score, "
            "which would see each seed's future)")
    elif task_table is not None and eval_mode == "auto":
        eval_mode = "sampled"
        log("evaluation: sampled at the val/test rows of the task tables (no exact layer-wise score)")
    try:
        # A run that fails before its first checkpoint leaves no run directory behind.
        with run_directory(out, ranks.leader), os_errors("training on", ds.path):
            metrics = _train(ds, ranks, task_obj, opts, resume=resume, overwrite=overwrite, quiet=quiet, log=log,
                             eval_mode=eval_mode, tensorboard=tensorboard)
    finally:
        distributed.leave(ranks)
    exact = dict(memory=memory, backend=backend, direct=direct, quiet=quiet)
    if eval_mode == "auto" and ranks.leader and metrics["best_epoch"] is not None:
        # The epochs' loaders are gone: their memory is free for the exact scores.
        t0 = time.perf_counter()
        scores = task_obj.exact(ds, out, None, opts, **exact)
        metrics["layerwise"] = dict(epoch=metrics["best_epoch"], **scores, seconds=time.perf_counter() - t0)
        write_json(metrics, os.path.join(out, "metrics.json"))
        log(f"layer-wise (exact) evaluation of epoch {metrics['best_epoch']}: {task_obj.describe(scores)} "
            f"({metrics['layerwise']['seconds']:.1f} s)")
    if ranks.leader and metrics["best_epoch"] is not None:
        log(f"{task_obj.describe_best(metrics)}; {os.path.join(out, 'metrics.json')}")
    return metrics


def make_task(ds: Any, task: str, *, decoder: Optional[str], neg_ratio: Optional[float], neg_weight: Optional[str],
              target: Optional[str], relation: Optional[str], embed_dim: Optional[int], embed_tables: str,
              seed_time: Any = None, ignore_time: bool = False, task_table: Any = None,
              columns: Optional[Dict[str, str]] = None) -> Task:
    """The plug-in of ``task`` for ``ds``'s kind, the options of another task or kind refused. A
    run at times or on task tables is on the typed kind (a homogeneous dataset: its one-type case)."""
    hetero = isinstance(ds, HeteroDataset)
    if hetero or ds.has_times or task_table is not None:
        # Not at import: the typed kind imports PyTorch, the CLI's parser must not.
        from .hetero import Typed, check_relation, check_target
    if not hetero:
        for flag, value in (("--target", target), ("--embed-dim", embed_dim), ("--relation", relation),
                            ("--embed-tables", None if embed_tables == "auto" else embed_tables)):
            if value is not None:
                raise InputError(f"{flag} is for heterogeneous datasets; {ds.path} is homogeneous")
    if task == "link":
        if task_table is not None:
            raise InputError("--task-table gives node classification's rows; --task link trains on an edge split")
        if target is not None:
            raise InputError("--target is the node type of --task node; --task link takes --relation S:R:D")
        decoder = _options.choice("dot" if decoder is None else decoder, DECODERS, "--decoder")
        neg_ratio = 1.0 if neg_ratio is None else _options.real(neg_ratio, "--neg-ratio", 0.0, above=True)
        neg_weight = _options.choice("uniform" if neg_weight is None else neg_weight, NEG_WEIGHTS, "--neg-weight")
        if hetero:
            relation = check_relation(ds, relation, LinkPrediction.eval_splits)
        elif ds.has_times and not ignore_time:
            LinkPrediction().check(ds)  # the splits, before their times are asked for
        splits = (LinkPrediction.train_split, *LinkPrediction.eval_splits)
        at_times = pairs_at_times(ds, ds.relation(relation) if hetero else ds, splits, seed_time, ignore_time)
        if not hetero and not at_times:
            return LinkPrediction(decoder, neg_ratio, neg_weight)
        kind = Typed(embed_dim, embed_tables, hetero=hetero, pairs_at_times=at_times)
        return LinkPrediction(decoder, neg_ratio, neg_weight, kind, relation or HOMOGENEOUS_RELATION)
    given = [f"--{k.replace('_', '-')}" for k, v in (("decoder", decoder), ("neg_ratio", neg_ratio),
                                                      ("neg_weight", neg_weight)) if v is not None]
    if given:
        raise InputError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --task link "
                         "(node classification has no decoder nor negatives)")
    if relation is not None:
        raise InputError("--relation is for --task link; --task node takes --target TYPE")
    if task_table is not None:
        if seed_time is not None:
            raise InputError("--seed-time gives each node of the target type one time, and --task-table gives each "
                             "row its own: give one of them")
        if hetero and target is None:
            raise InputError(f"{ds.path} is heterogeneous: give --target TYPE, the node type of the task table's rows "
                             f"(types: {', '.join(ds.node_types)})")
        target = ds.check_type(target) if hetero else HOMOGENEOUS_TYPE
        table = read_task_tables(ds, target, task_table, ignore_time=ignore_time, **(columns or {}))
        return NodeClassification(Typed(embed_dim, embed_tables, hetero=hetero, table=table), target,
                                  table.eval_splits)
    if hetero:
        target, eval_splits = check_target(ds, target)
        return NodeClassification(Typed(embed_dim, embed_tables, seed_times(ds, target, task, seed_time, ignore_time)),
                                  target, eval_splits)
    times = seed_times(ds, HOMOGENEOUS_TYPE, task, seed_time, ignore_time)
    if times is not None:
        return NodeClassification(Typed(times=times, hetero=False), HOMOGENEOUS_TYPE)
    return NodeClassification()


def _train(ds: Any, ranks: distributed.Ranks, task: Task, opts: Dict[str, Any], *, resume: bool, overwrite: bool,
           quiet: bool, log: Callable[[str], None], eval_mode: str, tensorboard: bool) -> Dict[str, Any]:
    import torch

    device, out, model, fanouts = opts["device"], opts["out"], opts["model"], opts["fanouts"]
    run_args = task.run_args(ds, dict({k: opts[k] for k in RUN_ARGS}, world_size=ranks.world_size))
    if task.kind.temporal:  # checked by --resume
        run_args["temporal"] = True
    rank_log = log  # lines every rank prints
    if not ranks.leader:
        log, quiet = (lambda s: None), True
    dev = distributed.device_of(ranks, device)
    resumed = distributed.from_leader(ranks, lambda: task.kind.open_run(out, run_args, _opened(
        out, run_args, resume, overwrite)))
    torch.manual_seed(opts["seed"])
    net, loaders = task.prepare(ds, ranks, run_args, resumed, dev, opts)
    tr = task.train_split
    train_loader = loaders[tr]
    if ranks.active:
        task.distribute(loaders, ranks)
    feeds, device_note = task.kind.feeds(loaders, opts, dev, tr)
    opt = torch.optim.Adam(net.parameters(), lr=opts["lr"])
    start, history = restore(net, opt, resumed, out)
    task.kind.restored(resumed, out)
    step_net = distributed.data_parallel(net, ranks, device)
    if ranks.leader:
        with os_errors("creating the run directory", out):
            os.makedirs(out, exist_ok=True)
    batch_size = opts["batch_size"]
    world = f", {ranks.world_size} ranks (batch {batch_size} per rank)" if ranks.active else ""
    one = fanouts if isinstance(fanouts, list) else next(iter(fanouts.values())) if len(fanouts) == 1 else None
    fan_text = ",".join(map(str, one)) if one is not None else "per relation"
    log(f"training {model} on {ds.path}: {task.kind.scope(task, ds, train_loader)}, fanouts {fan_text}, "
        f"batch {batch_size}, {len(train_loader)} batches per epoch{' per rank' if ranks.active else ''}{world}, "
        f"device {device} -> {out}")
    for line in task.kind.loader_lines(train_loader, ranks, device_note):
        rank_log(line)

    metrics = _metrics(ds, task, run_args, history, train_loader)
    plots = Plots(out if ranks.leader else None, tensorboard, start)
    for epoch in range(start, opts["epochs"]):
        before = task.kind.counters(train_loader)
        t0 = time.perf_counter()
        loss_sum, count, wait, step = distributed.guarded(
            ranks, f"training epoch {epoch}",
            lambda: _train_epoch(step_net, opt, task, feeds[tr], epoch, dev, quiet, model, always_step=ranks.active))
        t1 = time.perf_counter()
        if eval_mode == "layerwise":
            net.eval()
            scores = task.exact(ds, out, net.cpu() if device != "cpu" else net, opts, memory=opts["memory"],
                                backend=opts["backend"], direct=opts["direct"], quiet=quiet)
            net.to(dev)
            loss = loss_sum / max(count, 1)
        else:
            sums = task.evaluate(net, feeds, dev, model, quiet)
            on = "cpu" if device == "cpu" else dev
            loss_sum, count, *sums = distributed.sums(ranks, [loss_sum, count, *sums], on)
            loss = loss_sum / max(count, 1)
            scores = task.scores(sums)
        seconds = time.perf_counter() - t0
        timing = dict(train_epoch_seconds=t1 - t0, train_seconds=step, wait_seconds=wait,
                      eval_seconds=seconds - (t1 - t0))
        columns, lines = task.kind.epoch_report(train_loader, before, timing, ranks)
        row = dict(epoch=epoch, loss=loss, **scores, seconds=seconds, **columns)
        if ranks.active:  # the columns above are rank 0's
            row["ranks"] = distributed.gather(ranks, {k: v for k, v in columns.items() if k != "epoch"})
        history.append(row)
        log(f"epoch {epoch}: loss {loss:.4f}, {task.describe(scores)}, {seconds:.2f} s")
        for line in lines:
            log(line)
        metrics = _metrics(ds, task, run_args, history, train_loader)
        if ranks.leader:
            state = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=epoch, args=run_args,
                         metrics=metrics, rng=torch.get_rng_state())
            for name in (["best.pt", "last.pt"] if metrics["best_epoch"] == epoch else ["last.pt"]):
                task.kind.save(state, os.path.join(out, name), epoch)
            write_json(metrics, os.path.join(out, "metrics.json"))
            plots.epoch(history)
    if start >= opts["epochs"] and ranks.leader:  # nothing left to run
        write_json(metrics, os.path.join(out, "metrics.json"))
    plots.close()
    distributed.barrier(ranks)
    return metrics


def _opened(out: str, run_args: Dict[str, Any], resume: bool, overwrite: bool) -> Any:
    """``checkpoints.open_run``'s, refused where its times or task tables differ from this run's."""
    resumed = open_run(out, run_args, resume, overwrite)
    if resumed is not None:
        check_resumed(resumed["args"].get("task_table"), run_args.get("task_table"), os.path.join(out, "last.pt"))
    was = resumed is not None and bool(resumed["args"].get("temporal", False))
    if resumed is not None and was != bool(run_args.get("temporal", False)):
        raise InputError(f"--resume: {os.path.join(out, 'last.pt')} was trained {'at' if was else 'without'} times; "
                         f"resume it {'without' if was else 'with'} --ignore-time, or use another --out")
    return resumed


def _train_epoch(net, opt, task: Task, loader: Any, epoch: int, device: str, quiet: bool, model: str = "sage",
                 always_step: bool = False):
    """One pass over the training split: (loss sum, examples, seconds waiting, seconds stepping).
    ``always_step`` (DDP): a batch without examples still steps, with zero gradient."""
    net.train()
    loader.set_epoch(epoch)
    total_loss, count, wait, step = 0.0, 0, 0.0, 0.0
    it = iter(loader)
    with progress.bar(len(loader), f"epoch {epoch}", "batch", disable=quiet, leave=False) as bar:
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            loss, n = task.loss(net, batch, device, model, always=always_step)
            if loss is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
                task.kind.stepped()
                total_loss += loss.item() * n
                count += n
                del loss
            del batch  # release the feature buffer before waiting for the next batch
            wait += t1 - t0
            step += time.perf_counter() - t1
            bar.update(1)
    return total_loss, count, wait, step


def _metrics(ds: Any, task: Task, run_args: Dict[str, Any], history: List[Dict[str, Any]],
             train_loader: Any) -> Dict[str, Any]:
    return {
        "dataset": os.path.abspath(ds.path),
        "task": run_args["task"],
        **task.kind.identity(task),
        "temporal": task.kind.temporal,
        **task.summary(history),
        "world_size": run_args["world_size"],
        "epochs": list(history),
        "args": task.kind.public_args(run_args),
        **task.kind.loader_metrics(train_loader),
        "layerwise": None,
    }


__all__: Sequence[str] = ("train", "make_task", "EVAL_MODES", "TASKS")

