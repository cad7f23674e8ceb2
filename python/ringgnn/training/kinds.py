"""A dataset's kind: what the loop and a task ask of a dataset besides the task (batches, model
family, loader reports, exact scores). :class:`Homogeneous` here; ``training.hetero.Typed``
answers the same methods."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence, Tuple

from .. import _options
from .._core import InputError
from ..inference.run import run_inference
from ..inference.scoring import embed_endpoints
from ..models.checkpoints import Checkpoint, load_checkpoint, save
from ..models.gnn import MODELS, activation_bytes, build_link_model, build_model, forward
from ..sampling import cuda
from ..sampling.links import LinkLoader
from ..sampling.loader import Loader
from ..sampling.pairs import LinkPairs


class Homogeneous:
    """A homogeneous dataset's kind: one node type, one relation, ``ringgnn.Loader``'s engine."""

    typed = False
    temporal = False  # a run at times is the typed kind's

    def fanouts(self, ds: Any, fanouts: Any) -> Any:
        """``--fanouts`` parsed: a list, one per hop."""
        return _options.fanouts(fanouts)

    def check_model(self, model: str, ds: Any) -> None:
        """Refuse a model this kind of dataset has not, or a dataset it cannot read."""
        if model not in MODELS:
            raise InputError(f"unknown model '{model}'; use one of {', '.join(MODELS)}")
        if ds.feature_dim is None:
            raise InputError(f"{ds.path}: the dataset has no node features; rebuild it with --features")

    def check_options(self, opts: Dict[str, Any]) -> None:
        """Refuse the loop's options this kind of dataset does not take."""

    def run_args(self, task: Any, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        """The run's options as checkpoints hold them."""
        return dict(task=task.name, **args, **task.task_args())

    def public_args(self, run_args: Dict[str, Any]) -> Dict[str, Any]:
        """``run_args`` as ``metrics.json`` shows them."""
        return dict(run_args)

    def identity(self, task: Any) -> Dict[str, Any]:
        """What ``metrics.json`` says of the run besides its scores."""
        return {}

    def scope(self, task: Any, ds: Any, train_loader: Any) -> str:
        """The size of what is trained on, for the run's first log line."""
        return f"{ds.num_nodes:,} nodes"

    def open_run(self, out: str, run_args: Dict[str, Any], resumed: Any) -> Any:
        """The resumed checkpoint, refused where it is of another model."""
        return resumed

    def restored(self, resumed: Any, out: str) -> None:
        """After ``checkpoints.restore``: restore what the run keeps beside the model."""

    def stepped(self) -> None:
        """After each optimizer step: what the run updates beside the model."""

    def save(self, state: Dict[str, Any], path: str, epoch: int) -> None:
        """Write checkpoint ``state`` at ``path``."""
        save(state, path)

    def prepare(self, task: Any, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """(the model on ``dev``, the loaders of the training split and the evaluated ones)."""
        model, fanouts, batch_size, hidden = opts["model"], opts["fanouts"], opts["batch_size"], opts["hidden"]
        net = self.build(task, model, ds, hidden, opts["layers"], opts["dropout"]).to(dev)
        # The budget covers the process: what it holds now and the largest batch's activations.
        reserve = _options.process_rss() + activation_bytes(model, ds, fanouts,
                                                            self.batch_seeds(task, batch_size, ds), hidden)
        # The other splits' loaders share this one's engine (index, cache, budget).
        train_loader = self.loader(task, ds, task.train_split, fanouts, batch_size, shuffle=True,
                                   cache=opts["cache"], cache_policy=opts["cache_policy"], memory=opts["memory"],
                                   reserve=reserve, prefetch=opts["prefetch"],
                                   hold=2 if opts["device"] == "cuda" else 1, backend=opts["backend"],
                                   direct=opts["direct"], threads=opts["threads"], seed=opts["seed"],
                                   hyperbatch=opts["hyperbatch"], staging_dir=opts["staging_dir"],
                                   staging_cap=opts["staging_cap"], processes=ranks.local_world_size)
        loaders = {task.train_split: train_loader}
        for split in task.eval_splits:
            loaders[split] = self.loader(task, ds, split, fanouts, batch_size, shuffle=False, share=train_loader)
        return net, loaders

    def build(self, task: Any, kind: str, ds: Any, hidden: int, layers: int, dropout: float) -> Any:
        """The model to train: encoder ``kind`` (a link task's with its decoder on top)."""
        if task.name == "link":
            return build_link_model(kind, ds.feature_dim, hidden, layers, dropout, task.decoder)
        return build_model(kind, ds.feature_dim, hidden, ds.num_classes, layers, dropout)

    def batch_seeds(self, task: Any, batch_size: int, ds: Any) -> int:
        """The most seed nodes of a training batch of ``batch_size``."""
        return LinkPairs(ds, 0, task.neg).most_seeds(batch_size) if task.name == "link" else batch_size

    def loader(self, task: Any, ds: Any, split: str, fanouts: Sequence[int], batch_size: int, **opts: Any) -> Any:
        """A loader of the batches of ``split``'s seeds (``opts``: ``ringgnn.Loader``'s)."""
        if task.name == "node":
            return Loader(ds, fanouts, batch_size, split=split, ignore_time=True, **opts)
        if split == task.train_split:
            return LinkLoader(ds, fanouts, batch_size, edges=split, neg_sampling=task.neg, ignore_time=True, **opts)
        # A held-out split: node batches of the nodes its pairs name, each sampled once (not once
        # per pair it is in), as large as a training batch's seeds (what the plan was made for).
        h = task.hold(ds, split)
        share = opts.pop("share", None)
        base = share._loader if isinstance(share, LinkLoader) else share
        return Loader(ds, fanouts, self.batch_seeds(task, batch_size, ds), split=h.ends["src"], share=base,
                      ignore_time=True, **opts)

    def feeds(self, loaders: Dict[str, Any], opts: Dict[str, Any], dev: Any, train_split: str = "train"
              ) -> Tuple[Dict[str, Any], str]:
        """(what the epochs iterate, a note for the loader's log line); on CUDA, copied ahead."""
        if opts["device"] != "cuda":
            return dict(loaders), ""

        train_loader = loaders[train_split]
        gpu_cache = opts["gpu_cache"]
        pinned = cuda.pin(train_loader)
        row_cache = cuda.DeviceRowCache.for_loader(train_loader, gpu_cache, dev, opts["seed"]) if gpu_cache else None
        feeds = {k: cuda.DeviceLoader(v, dev, row_cache) for k, v in loaders.items()}
        return feeds, (f"; CUDA: batch buffers {'pinned' if pinned else 'pageable'}, copies on a side stream"
                       + (f", GPU tier {len(row_cache):,} rows ({_mib(row_cache.nbytes)})" if row_cache else ""))

    def rows(self, net: Any, batch: Any, device: Any, kind: str, node_type: Any = None, prefix: str = "") -> Any:
        """The rows of ``batch``'s seeds (of ``node_type``) by encoder ``net`` (``prefix``: a typed
        tower's tables)."""
        return forward(net, batch, device, kind)

    def labels(self, batch: Any, node_type: Any = None) -> Any:
        """The labels of ``batch``'s seeds (-1: unlabeled)."""
        return batch.y[: batch.batch_size]

    def pairs(self, task: Any, net: Any, batch: Any, device: Any, kind: str) -> Tuple[Any, Any, int]:
        """(a link batch's pair scores by the whole model in one call, their labels, pairs)."""
        eli = batch.edge_label_index.to(device)
        return forward(net, batch, device, kind, eli[0], eli[1]), batch.edge_label, int(eli.shape[1])

    def loader_lines(self, train_loader: Any, ranks: Any, device_note: str) -> List[str]:
        """The log lines that say how the loader reads and what it holds."""
        st = train_loader.stats()
        return [f"{ranks.tag()}loader: sampling with {st['backend']}, features with {st['feature_backend']}, "
                f"{st['cached_rows']:,} hot rows cached ({_mib(st['cache_bytes'])})"
                + (f" by look-ahead over {st['presample_batches']} batches in {st['presample_seconds']:.1f} s"
                   if st["presample_batches"] else "")
                + f"; memory {train_loader.plan()['text']}{device_note}"]

    def counters(self, train_loader: Any) -> Any:
        """The loader's counters before an epoch."""
        return train_loader.stats()

    def epoch_report(self, train_loader: Any, before: Any, timing: Dict[str, float],
                     ranks: Any) -> Tuple[Dict[str, Any], List[str]]:
        """(an epoch's stage columns for ``metrics.json``, its log lines after the scores)."""
        le = dict(train_loader.last_epoch)
        hit = le["cache_hits"] / le["distinct_rows"] if le["distinct_rows"] else 0.0
        t = timing
        cols = dict(train_epoch_seconds=t["train_epoch_seconds"], sample_seconds=le["sample"],
                    gather_seconds=le["gather"], train_seconds=t["train_seconds"], wait_seconds=t["wait_seconds"],
                    eval_seconds=t["eval_seconds"], feature_bytes_read=le["bytes_read"], cache_hit_rate=hit)
        return cols, [
            f"  {'rank 0: ' if ranks.active else ''}training pass {t['train_epoch_seconds']:.2f} s: sample "
            f"{le['sample']:.2f} s and gather {le['gather']:.2f} s (worker threads, overlapped), train "
            f"{t['train_seconds']:.2f} s, waiting for batches {t['wait_seconds']:.2f} s; features read "
            f"{_mib(le['bytes_read'])}, cache hit rate {hit:.1%}; evaluation {t['eval_seconds']:.2f} s",
            _hyperbatch_line(before, train_loader.stats())]

    def loader_metrics(self, train_loader: Any) -> Dict[str, Any]:
        """What ``metrics.json`` says of the loader (training and evaluation)."""
        return {"loader": train_loader.stats(), "memory_plan": train_loader.plan()}

    def exact(self, task: Any, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        """Exact (layer-wise) scores of the live ``net`` or, when None, of the best checkpoint."""
        link = task.name == "link"
        if net is None:
            ckpt = load_checkpoint(out, ds, "--out")
        else:  # a link model's encoder, with its decoder beside it
            ckpt = Checkpoint(net.encoder if link else net, opts["model"], opts["fanouts"], opts["hidden"],
                              opts["layers"], os.path.join(out, "last.pt"),
                              dict(task="link", decoder=task.decoder) if link else {},
                              decoder=net.decoder if link else None)
        # f32 hidden layers: 2-byte ones move link metrics in the 4th digit.
        if link:
            ids, z = embed_endpoints(ds, ckpt, [h.ends["src"] for h in task.held.values()], hidden_dtype="f32",
                                     **exact)
            return task.exact_scores(ckpt.decoder, {"src": (z, ids)})
        return task.accuracy(lambda union: run_inference(ds, ckpt, union, output="predictions", hidden_dtype="f32",
                                                         **exact), ds)


def _hyperbatch_line(before: Dict[str, Any], after: Dict[str, Any]) -> str:
    """What hyperbatches did since ``before``."""
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
