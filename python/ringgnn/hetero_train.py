"""Node classification on a heterogeneous dataset: the loop of ``ringgnn train DS --target TYPE``.

Batches are seeds of the target type with their sampled typed neighborhood
(:class:`ringgnn.HeteroLoader`: each relation read from its own file, each type's features from
its own); the model is :class:`ringgnn.hetero_models.HeteroModel` (``sage``: PyG's
``to_hetero`` GraphSAGE with mean aggregation across relations; ``rgcn``: R-GCN), types without
features getting learned embeddings (``embed_dim``), which are saved with the checkpoint.
Evaluation samples the val and test seeds with the training fanouts, in a fixed order with a fixed
sample, so epochs compare the same neighborhoods.

The run directory is the homogeneous one's: ``last.pt`` (what ``--resume`` continues from),
``best.pt`` (best validation accuracy) and ``metrics.json``. A checkpoint's ``args`` holds
``hetero`` (the model's config: node and edge types, feature widths, counts, target), from which
:meth:`HeteroModel.from_config` rebuilds the model.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

from . import _options, distributed, progress
from ._core import InputError
from ._files import os_errors
from .checkpoints import LAST, config_mismatch, open_run, restore, run_directory, save, write_json
from .hetero import HeteroLoader, HeteroNeighborSampler, open_hetero, relation_fanouts
from .hetero_models import HETERO_MODELS, HeteroModel, hetero_batch_to_dicts
from .hetero_plan import plan_hetero, probe_batch_bytes, training_reserve
from .hetero_tables import FileTable, load_tables, prune_tables, save_tables

#: Where the embedding tables of featureless types live: as the memory plan decides, held in
#: memory (an ``Embedding`` with Adam), or in files (``ringgnn.hetero_tables``, SparseAdam).
EMBED_TABLES = ("auto", "memory", "file")


def train_hetero(
    dataset: Any,
    *,
    target: Optional[str],
    model: str = "sage",
    fanouts: Any = (10, 5),
    batch_size: int = 512,
    epochs: int = 5,
    hidden: int = 64,
    layers: int = 2,
    lr: float = 0.005,
    dropout: float = 0.3,
    embed_dim: Optional[int] = None,
    memory: Any = None,
    cache: Any = None,
    hyperbatch: Any = "auto",
    embed_tables: str = "auto",
    backend: str = "auto",
    direct: bool = False,
    threads: Optional[int] = None,
    seed: int = 0,
    out: Optional[str] = None,
    resume: bool = False,
    overwrite: bool = False,
    quiet: bool = False,
    log: Callable[[str], None] = print,
    device: str = "cpu",
    exact: bool = True,
    dist_timeout: float = distributed.DEFAULT_TIMEOUT,
) -> Dict[str, Any]:
    """Train a heterogeneous GNN to classify the nodes of type ``target``; returns what
    ``RUN_DIR/metrics.json`` holds (``best_val_acc``, ``test_acc`` at the best epoch, per-epoch
    rows; with ``exact``, ``layerwise``: the best checkpoint's val and test accuracy from exact
    layer-wise inference, ``ringgnn.hetero_infer``). Under ``torchrun`` each rank trains on its
    share of every epoch's batches with DDP and evaluates its share (counts summed over the
    ranks); rank 0 writes the run directory, as ``ringgnn.train`` does."""
    import torch

    ds = open_hetero(dataset, "train_hetero")
    if target is None:
        labeled = [t for t in ds.node_types if ds.manifest["node_types"][t].get("labels")]
        raise InputError(f"{ds.path} is heterogeneous: give --target TYPE, the node type to classify "
                         f"(types with labels: {', '.join(labeled) or 'none'})")
    target = ds.check_type(target)
    info = ds.manifest["node_types"][target]
    if info.get("labels") is None:
        raise InputError(f"--target {target}: node type '{target}' has no labels; choose a labeled type")
    for split in ("train", "val"):
        if split not in info.get("splits", {}):
            raise InputError(f"--target {target}: node type '{target}' has no '{split}' split (it has: "
                             f"{', '.join(info.get('splits', {})) or 'none'})")
    model = _options.choice(model, HETERO_MODELS, "--model")
    fan = relation_fanouts(ds, fanouts)
    epochs, hidden, layers = (_options.count(v, k, 1) for k, v in (("epochs", epochs), ("hidden", hidden),
                                                                   ("layers", layers)))
    hops = len(next(iter(fan.values())))
    if hops != layers:
        raise InputError(f"--fanouts has {hops} hops but --layers is {layers}; give one fanout per layer")
    lr, dropout = _options.learning_rate(lr), _options.dropout(dropout)
    if embed_dim is not None:
        embed_dim = _options.count(embed_dim, "--embed-dim", 1)
    cache = _options.size(cache, "--cache")
    hyperbatch = _options.hyperbatch_size(hyperbatch)
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: PyTorch sees no CUDA device here; use --device cpu")
    out = out or os.path.join("runs", os.path.basename(os.path.normpath(ds.path)))
    embed_tables = _options.choice(embed_tables, EMBED_TABLES, "--embed-tables")
    # The model without its embedding tables (all outside): what the plan probes; the run's model
    # is built once the plan has placed them.
    featureless = [t for t, d in ds.feature_dims().items() if d is None]
    net = HeteroModel(ds.node_types, ds.edge_types, ds.feature_dims(), ds.num_nodes_dict, target, hidden,
                      int(info["labels"]["num_classes"]), layers, model=model, embed_dim=embed_dim, dropout=dropout,
                      external=featureless)
    ranks = distributed.join(device, float(dist_timeout))
    try:
        with run_directory(out, ranks.leader):  # a run that fails before its first checkpoint leaves none
            metrics = _train(ds, ranks, net, target, info, fan, model=model, batch_size=batch_size, epochs=epochs,
                             hidden=hidden, layers=layers, lr=lr, dropout=dropout, embed_dim=embed_dim, memory=memory,
                             cache=cache, hyperbatch=hyperbatch, backend=backend, direct=direct, threads=threads,
                             seed=seed, out=out, resume=resume, overwrite=overwrite, embed_tables=embed_tables,
                             quiet=quiet, log=log, device=device)
    finally:
        distributed.leave(ranks)
    best = metrics["best_epoch"]
    if best is not None and exact and ranks.leader:
        # Exact scores of the best checkpoint: full neighborhoods, layer by layer, out of core.
        from .hetero_infer import infer_hetero

        t0 = time.perf_counter()
        r = infer_hetero(out, ds, output="predictions", memory=memory, backend=backend, direct=direct, quiet=quiet)
        metrics["layerwise"] = dict(epoch=best, val_acc=r.get("val_acc"), test_acc=r.get("test_acc"),
                                    seconds=time.perf_counter() - t0)
        write_json(metrics, os.path.join(out, "metrics.json"))
        scores = ", ".join(f"{s} accuracy {r[f'{s}_acc']:.4f}" for s in ("val", "test") if r.get(f"{s}_acc") is not None)
        log(f"layer-wise (exact) evaluation of epoch {best}: {scores or 'no val or test split'} "
            f"({metrics['layerwise']['seconds']:.1f} s)")
    if best is not None and ranks.leader:
        log(f"best epoch {best}: val accuracy {metrics['best_val_acc']:.4f}"
            + (f", test accuracy {metrics['test_acc']:.4f}" if metrics.get("test_acc") is not None else "")
            + f"; {os.path.join(out, 'metrics.json')}")
    return metrics


def _train(ds: Any, ranks: distributed.Ranks, net: HeteroModel, target: str, info: Dict[str, Any],
           fan: Dict[str, List[int]], *, model: str, batch_size: int, epochs: int, hidden: int, layers: int,
           lr: float, dropout: float, embed_dim: Optional[int], memory: Any, cache: Optional[int],
           hyperbatch: Optional[int], backend: str, direct: bool,
           threads: Optional[int], seed: int, out: str, resume: bool, overwrite: bool, quiet: bool,
           log: Callable[[str], None], device: str, embed_tables: str = "auto") -> Dict[str, Any]:
    import torch

    def model_of(cfg: Dict[str, Any]) -> Dict[str, Any]:
        """A model's config less where its tables are (a placement, not the model)."""
        return {k: v for k, v in cfg.items() if k != "external"}

    featureless = [t for t in net.computed[0] if net.in_dims[t] is None]
    width = net.embed_dim or net.hidden
    run_args = dict(task="node", model=model, decoder=None, fanouts=fan, batch_size=batch_size, epochs=epochs,
                    hidden=hidden, layers=layers, lr=lr, dropout=dropout, neg_ratio=None, neg_weight=None,
                    memory=memory, cache=cache, device=device, seed=seed, world_size=ranks.world_size, target=target,
                    embed_dim=embed_dim, hetero=model_of(net.config()))
    if not ranks.leader:
        log, quiet = (lambda s: None), True
    if resume and overwrite:
        raise InputError("--resume continues the run in RUN_DIR and --overwrite starts it over: give one of them")

    def check_run() -> Any:
        resumed = open_run(out, run_args, resume, overwrite)
        was = model_of(resumed["args"].get("hetero") or {}) if resumed is not None else None
        if was is not None and was != run_args["hetero"]:
            raise InputError(f"--resume: {os.path.join(out, LAST)} holds a run of another model or dataset "
                             f"({config_mismatch(was, run_args['hetero'])}); resume on the dataset it was trained on "
                             "with its options, or use another --out")
        return resumed

    resumed = distributed.from_leader(ranks, check_run)
    dev = distributed.device_of(ranks, device)
    net = net.to(dev)
    # One plan for the run (neighbor files, feature files, cache), made with the model built and
    # a probe batch's peak measured (read from disk, nothing held; the RNG left as it was).
    probe = HeteroLoader(ds, fan, target, seeds="train", shuffle=True, batch_size=batch_size, seed=seed, threads=1,
                         backend="pread", feature_backend="pread", cache=0, direct=direct)
    threads_n = probe.threads if threads is None else threads

    def probe_step(batch: Any) -> None:
        rng = torch.get_rng_state()
        bs = batch[target].batch_size
        x, edges, n_id = hetero_batch_to_dicts(batch, dev)
        for t in featureless:  # rows as the tables would give them, with their gradient
            if t in n_id:
                x[t] = torch.zeros(len(n_id[t]), width, device=dev, requires_grad=True)
        net(x, edges, n_id)[:bs].float().logsumexp(-1).sum().backward()
        net.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)

    # Before the probe: what it frees stays held, for the batches to reuse (anonymous memory and
    # the library code training keeps touching, as every plan counts them).
    held = _options.held_memory() + _options.code_bytes(training=True)
    batch_bytes = probe_batch_bytes(probe, probe_step, threads_n + 2)
    del probe
    plan = plan_hetero(ds, fan, target=target, batch_size=batch_size, seeds=len(ds.node_type(target).split("train")),
                       memory=_options.size(memory, "--memory"), backend=backend, feature_backend="auto", cache=cache,
                       reserve=training_reserve(net), batch_bytes=batch_bytes, process=held,
                       tables=dict.fromkeys(featureless, width), fixed_tables=_table_placement(
                           featureless, embed_tables, None if resumed is None else resumed["args"]["hetero"]))
    cfg = dict(run_args["hetero"])
    if plan.file_tables:
        if ranks.active:
            raise InputError(f"embedding tables in files ({', '.join(plan.file_tables)}) are not supported under "
                             "torchrun yet: every rank would update the same files; give a larger --memory or "
                             "--embed-tables memory")
        cfg["external"] = plan.file_tables
    run_args["hetero"] = cfg
    torch.manual_seed(seed)
    net = HeteroModel.from_config(cfg).to(dev)
    if ranks.leader:
        with os_errors("creating the run directory", out):
            os.makedirs(out, exist_ok=True)
    # Live tables in RUN/tables (the working copy: each checkpoint copies them beside itself).
    tables = {t: FileTable(os.path.join(out, "tables"), t, net.num_nodes[t], width, create=True, lr=lr)
              for t in plan.file_tables}
    net.tables = {t: table.reader() for t, table in tables.items()}
    sampler = HeteroNeighborSampler(ds, fan, backend=backend, direct=direct, seed=seed, memory=memory, plan=plan)
    common = dict(batch_size=batch_size, seed=seed, threads=threads, direct=direct, sampler=sampler,
                  hyperbatch=hyperbatch)
    train_loader = HeteroLoader(ds, fan, target, seeds="train", shuffle=True, **common)
    # The evaluation loaders read through the training loader's readers: one cache.
    evals = {s: HeteroLoader(ds, fan, target, seeds=s, shuffle=False, features=train_loader.features, **common)
             for s in ("val", "test") if s in info["splits"]}
    if ranks.active:
        # Each rank its share of every epoch's batches (ringgnn.distributed): training padded so
        # that every rank steps as often, evaluation not (its counts are summed).
        train_loader.batches = distributed.shard(train_loader.epoch_batches(), ranks.rank, ranks.world_size)
        for loader in evals.values():
            loader.batches = distributed.shard(loader.epoch_batches(), ranks.rank, ranks.world_size, pad=False)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    start, history = restore(net, opt, resumed, out)
    if resumed is not None and tables:
        load_tables(tables, os.path.join(out, "last.pt"), resumed.get("tables") or {})
    step_net = distributed.data_parallel(net, ranks, device)
    world = f", {ranks.world_size} ranks (batch {batch_size} per rank)" if ranks.active else ""
    log(f"training {model} on {ds.path} (heterogeneous: {len(ds.node_types)} node types, {len(ds.relations)} "
        f"relations), target {target}: {len(train_loader.seeds):,} training seeds, {len(train_loader)} batches of "
        f"{batch_size} per epoch{' per rank' if ranks.active else ''}{world}, sampling with "
        f"{sampler.resolved_backend()}, device {device} -> {out}")
    log(plan.text())
    log(f"  hyperbatch: {train_loader.hyperbatch_size()[1]}")
    metrics = _metrics(ds, run_args, history)
    for epoch in range(start, epochs):
        t0 = time.perf_counter()
        loss_sum, count, wait, step = distributed.guarded(
            ranks, f"training epoch {epoch}",
            lambda: _train_epoch(step_net, opt, train_loader, target, epoch, dev, quiet, always=ranks.active,
                                 tables=tables))
        t1 = time.perf_counter()
        counts: List[float] = [loss_sum, count]
        for loader in evals.values():
            counts += list(_accuracy_counts(net, loader, target, dev))
        counts = distributed.sums(ranks, counts, "cpu" if device == "cpu" else dev)
        scores = {f"{s}_acc": counts[2 + 2 * i] / counts[3 + 2 * i] if counts[3 + 2 * i] else 0.0
                  for i, s in enumerate(evals)}
        seconds = time.perf_counter() - t0
        row = dict(epoch=epoch, loss=counts[0] / max(counts[1], 1), **scores, seconds=seconds,
                   train_epoch_seconds=t1 - t0, train_seconds=step, wait_seconds=wait,
                   eval_seconds=seconds - (t1 - t0))
        history.append(row)
        log(f"epoch {epoch}: loss {row['loss']:.4f}, " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
            + f", {seconds:.2f} s (training pass {t1 - t0:.2f} s: train {step:.2f} s, waiting for batches "
            f"{wait:.2f} s)")
        metrics = _metrics(ds, run_args, history)
        if ranks.leader:
            state = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=epoch, args=run_args,
                         metrics=metrics, rng=torch.get_rng_state())
            names = ["best.pt", "last.pt"] if metrics["best_epoch"] == epoch else ["last.pt"]
            for name in names:
                path = os.path.join(out, name)
                # The tables' copies first, under names of this epoch; the checkpoint naming them
                # next; then the copies no checkpoint names.
                state["tables"] = save_tables(tables, path, f"e{epoch}")
                save(state, path)
                prune_tables(path, state["tables"])
            write_json(metrics, os.path.join(out, "metrics.json"))
    if start >= epochs and ranks.leader:
        write_json(metrics, os.path.join(out, "metrics.json"))
    # Rank 0's files are complete before any rank returns.
    distributed.barrier(ranks)
    return metrics


def _table_placement(featureless: List[str], embed_tables: str,
                     resumed: Optional[Dict[str, Any]]) -> Optional[Dict[str, bool]]:
    """Per featureless type, whether its table is held (True) or in files, where already decided:
    by the resumed run (its tables stay where they were), or by ``--embed-tables``."""
    if resumed is not None:
        ext = set(resumed.get("external") or ())
        return {t: t not in ext for t in featureless}
    if embed_tables == "auto":
        return None
    return dict.fromkeys(featureless, embed_tables == "memory")


def _train_epoch(net: Any, opt: Any, loader: HeteroLoader, target: str, epoch: int, device: str, quiet: bool,
                 always: bool = False, tables: Optional[Dict[str, Any]] = None):
    """One pass over the training batches: (sum of the loss over labeled seeds, their number,
    seconds waiting for batches, seconds stepping). With ``always`` (DDP: every rank must join
    every gradient all-reduce) a batch without labeled seeds still steps, with a zero loss."""
    import torch

    loader.set_epoch(epoch)
    net.train()
    loss_sum, count, wait, step = 0.0, 0, 0.0, 0.0
    it = iter(loader)
    with progress.bar(len(loader), f"epoch {epoch}", "batch", disable=quiet, leave=False) as bar:
        while True:
            a = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            b = time.perf_counter()
            bs = batch[target].batch_size
            x, edges, n_id = hetero_batch_to_dicts(batch, device)
            rows = {}
            for t, table in (tables or {}).items():  # tables in files: the batch's rows as leaves
                if t in batch.node_types and "n_id" in batch[t]:
                    ids = batch[t].n_id.numpy()
                    rows[t] = (ids, table.gather(ids))
                    x[t] = rows[t][1].to(device)
            logits = net(x, edges, n_id)[:bs]
            y = batch[target].y[:bs].to(device)
            mask = y >= 0
            n = int(mask.sum())
            if n or always:
                loss = torch.nn.functional.cross_entropy(logits[mask], y[mask]) if n else logits.sum() * 0.0
                opt.zero_grad()
                loss.backward()
                opt.step()
                for t, (ids, leaf) in rows.items():
                    tables[t].step(ids, leaf.grad)
                loss_sum += float(loss.detach()) * n
                count += n
            wait += b - a
            step += time.perf_counter() - b
            bar.update(1)
    return loss_sum, count, wait, step


def _accuracy_counts(net: Any, loader: HeteroLoader, target: str, device: str) -> "tuple[int, int]":
    """(right, labeled) over the seeds of ``loader`` (sampled neighborhoods, fixed order and
    sample: epoch 0 of an unshuffled loader)."""
    import torch

    net.eval()
    right = total = 0
    loader.set_epoch(0)
    with torch.no_grad():
        for batch in loader:
            bs = batch[target].batch_size
            pred = net(*hetero_batch_to_dicts(batch, device))[:bs].argmax(-1).cpu()
            y = batch[target].y[:bs]
            mask = y >= 0
            right += int((pred[mask] == y[mask]).sum())
            total += int(mask.sum())
    return right, total


def _metrics(ds: Any, run_args: Dict[str, Any], history: List[Dict[str, Any]]) -> Dict[str, Any]:
    scored = [h for h in history if "val_acc" in h]
    best = max(scored, key=lambda h: (h["val_acc"], -h["epoch"])) if scored else None
    return {
        "dataset": os.path.abspath(ds.path),
        "heterogeneous": True,
        "target": run_args["target"],
        "best_epoch": None if best is None else best["epoch"],
        "best_val_acc": None if best is None else best["val_acc"],
        "test_acc": None if best is None else best.get("test_acc"),
        "world_size": run_args["world_size"],
        "epochs": list(history),
        "args": {k: v for k, v in run_args.items() if k != "hetero"},
        "layerwise": None,
    }
