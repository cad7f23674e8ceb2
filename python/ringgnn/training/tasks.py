"""Tasks: what a training run learns and how it is scored.

``ringgnn.training.loop`` runs the same loop for every task: it asks the task for the loader of each
split's seeds, for the loss of each training batch, for the evaluation of the other splits after
each epoch (sums, so that data-parallel ranks can add theirs) and for the scores made of them.
:class:`Task` is that interface. :class:`NodeClassification`: cross-entropy on the labeled
seeds, accuracy. :class:`LinkPrediction`: the seeds are an edge split's pairs
(``ringgnn.sampling.links.LinkLoader``), the loss is binary cross-entropy of a decoder's scores
(``ringgnn.models.gnn``) for the positives and sampled negatives, the scores are AUC, MRR and
Hits@K of each held-out positive against its stored negatives (``ringgnn.inference.metrics``).

A homogeneous dataset is the one-type case: :class:`Task`'s defaults are what the loop needs of
it (``ringgnn.Loader``'s engine, its counters and log lines, the CUDA copy path, the encoders of
``ringgnn.models.gnn``). The heterogeneous plug-ins (``ringgnn.training.hetero.TypedRuns`` mixed into
``HeteroNodeClassification`` and ``HeteroLinkPrediction``) override those and the typed batch ->
model inputs step (:meth:`Task.seed_rows`, :meth:`LinkPrediction.tower_rows`), and keep the
task's loss, evaluation, scores and words.

Scores are named ``<split>_<metric>`` (``val_acc``, ``test_acc``; ``val_auc``, ``val_mrr``,
``val_hits``...): the names of the columns of ``metrics.json``'s epochs, and of its
``best_<first eval split>_<first metric>``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from .. import _options
from .._core import InputError
from ..data.dataset import Dataset
from ..inference import metrics
from ..inference.run import run_inference
from ..inference.scoring import decode_pairs, embed_endpoints, split_scores
from ..models.checkpoints import Checkpoint, load_checkpoint, save
from ..models.gnn import MODELS, activation_bytes, build_link_model, build_model, forward
from ..sampling import cuda
from ..sampling.links import LinkLoader
from ..sampling.loader import Loader
from ..sampling.pairs import LinkPairs, NegativeSampling
from . import distributed


class Task:
    """The interface between the training loop and what it trains for."""

    #: The metric the evaluation reports per split; the first of ``eval_splits`` selects the best epoch.
    metric = "score"
    #: The split trained on, and the splits evaluated after each epoch.
    train_split = "train"
    eval_splits: Tuple[str, ...] = ("val", "test")

    # --- what the loop asks of the dataset's kind: the homogeneous case here (``ringgnn.Loader``,
    # one engine for all splits); the heterogeneous plug-ins override these ---------------------

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

    def before_join(self) -> None:
        """Refuse, before the ranks join, what this task cannot do under ``torchrun``."""

    def run_args(self, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        """The run's options as checkpoints hold them (``args``: the loop's, plus the task's)."""
        return dict(task="node", **args, decoder=None, neg_ratio=None, neg_weight=None)

    def public_args(self, run_args: Dict[str, Any]) -> Dict[str, Any]:
        """``run_args`` as ``metrics.json`` shows them."""
        return dict(run_args)

    def identity(self) -> Dict[str, Any]:
        """What ``metrics.json`` says of the run besides its scores (heterogeneous runs: the type)."""
        return {}

    def open_run(self, out: str, run_args: Dict[str, Any], resumed: Any) -> Any:
        """The resumed checkpoint (``checkpoints.open_run``'s), refused where it is of another model."""
        return resumed

    def prepare(self, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """(the model on ``dev``, the loaders of the training split and the evaluated ones)."""
        model, fanouts, batch_size, hidden = opts["model"], opts["fanouts"], opts["batch_size"], opts["hidden"]
        net = self.build(model, ds, hidden, opts["layers"], opts["dropout"]).to(dev)
        # The budget covers the whole process: what it holds now (Python, PyTorch, the model) and
        # the activations of the largest batch are reserved before the loader splits the rest.
        reserve = _options.process_rss() + activation_bytes(model, ds, fanouts, self.batch_seeds(batch_size, ds),
                                                            hidden)
        # One engine for the loaders of all splits: the offset index, the neighbor file (memory
        # backend), the hot-row cache, the labels and the budget are held once.
        train_loader = self.loader(ds, self.train_split, fanouts, batch_size, shuffle=True, cache=opts["cache"],
                                   cache_policy=opts["cache_policy"], memory=opts["memory"], reserve=reserve,
                                   prefetch=opts["prefetch"],
                                   # On CUDA one more host batch is held: the one whose copy runs ahead.
                                   hold=2 if opts["device"] == "cuda" else 1, backend=opts["backend"],
                                   direct=opts["direct"], threads=opts["threads"], seed=opts["seed"],
                                   hyperbatch=opts["hyperbatch"], staging_dir=opts["staging_dir"],
                                   staging_cap=opts["staging_cap"], processes=ranks.local_world_size)
        loaders = {self.train_split: train_loader}
        for split in self.eval_splits:
            loaders[split] = self.loader(ds, split, fanouts, batch_size, shuffle=False, share=train_loader)
        return net, loaders

    def feeds(self, loaders: Dict[str, Any], opts: Dict[str, Any], dev: Any) -> Tuple[Dict[str, Any], str]:
        """(what the epochs iterate, a note for the loader's log line): on CUDA, the batches
        copied ahead on a side stream (``ringgnn.sampling.cuda``)."""
        if opts["device"] != "cuda":
            return dict(loaders), ""

        train_loader = loaders[self.train_split]
        gpu_cache = opts["gpu_cache"]
        pinned = cuda.pin(train_loader)
        row_cache = cuda.DeviceRowCache.for_loader(train_loader, gpu_cache, dev, opts["seed"]) if gpu_cache else None
        feeds = {k: cuda.DeviceLoader(v, dev, row_cache) for k, v in loaders.items()}
        return feeds, (f"; CUDA: batch buffers {'pinned' if pinned else 'pageable'}, copies on a side stream"
                       + (f", GPU tier {len(row_cache):,} rows ({_mib(row_cache.nbytes)})" if row_cache else ""))

    def restored(self, resumed: Any, out: str) -> None:
        """After ``checkpoints.restore``: what the task keeps beside the model (tables in files)."""

    def stepped(self) -> None:
        """After each optimizer step: what the task updates beside the model."""

    def save(self, state: Dict[str, Any], path: str, epoch: int) -> None:
        """Write checkpoint ``state`` at ``path`` (``ringgnn.models.checkpoints.save``)."""
        save(state, path)

    def scope(self, ds: Any, train_loader: Any) -> str:
        """The size of what is trained on, for the run's first log line."""
        return f"{ds.num_nodes:,} nodes"

    def loader_lines(self, train_loader: Any, ranks: Any, device_note: str) -> List[str]:
        """The log lines that say how the loader reads and what it holds."""
        st = train_loader.stats()
        return [f"{ranks.tag()}loader: sampling with {st['backend']}, features with {st['feature_backend']}, "
                f"{st['cached_rows']:,} hot rows cached ({_mib(st['cache_bytes'])})"
                + (f" by look-ahead over {st['presample_batches']} batches in {st['presample_seconds']:.1f} s"
                   if st["presample_batches"] else "")
                + f"; memory {train_loader.plan()['text']}{device_note}"]

    def counters(self, train_loader: Any) -> Any:
        """The loader's counters before an epoch (what :meth:`epoch_report` subtracts)."""
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
        """What ``metrics.json`` says of the loader."""
        # The loaders share one engine: its counters cover training and evaluation.
        return {"loader": train_loader.stats(), "memory_plan": train_loader.plan()}

    def exact(self, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        """Exact (layer-wise) scores of the live ``net`` or, when None, of the run's best checkpoint."""
        if net is None:
            ckpt = load_checkpoint(out, ds, "--out")
        else:
            ckpt = self.checkpoint(net, opts["model"], opts["fanouts"], opts["hidden"], opts["layers"],
                                   os.path.join(out, "last.pt"))
        # f32 hidden layers: the exact numbers (2-byte ones move link metrics in the 4th digit).
        return self.layerwise(ds, ckpt, hidden_dtype="f32", **exact)

    def seed_rows(self, net: Any, batch: Any, device: Any, kind: str) -> Any:
        """The model's output rows of ``batch``'s seeds (a batch of the kind's loader made into
        the model's inputs, on ``device``)."""
        return forward(net, batch, device, kind)

    def seed_labels(self, batch: Any) -> Any:
        """The labels of ``batch``'s seeds (-1: unlabeled)."""
        return batch.y[: batch.batch_size]

    # --- the task ---------------------------------------------------------------------------

    def check(self, ds: Dataset) -> None:
        """Raise :class:`InputError` when ``ds`` lacks what the task needs (labels, splits)."""
        missing = [s for s in (self.train_split, *self.eval_splits) if s not in ds.split_names]
        if missing:
            raise InputError(
                f"{ds.path}: the dataset has no {'/'.join(missing)} split; rebuild it with "
                "--split train=0.6,val=0.2,test=0.2"
            )

    def out_dim(self, ds: Dataset) -> int:
        """Width of the encoder's output."""
        raise NotImplementedError

    def build(self, kind: str, ds: Dataset, hidden: int, layers: int, dropout: float) -> Any:
        """The model to train: encoder ``kind`` (and what the task puts on top of it)."""
        return build_model(kind, ds.feature_dim, hidden, self.out_dim(ds), layers, dropout)

    def checkpoint(self, net: Any, kind: str, fanouts: List[int], hidden: int, layers: int, path: str) -> Checkpoint:
        """``net`` (what :meth:`build` made) as a :class:`Checkpoint` for layer-wise inference."""
        return Checkpoint(net, kind, fanouts, hidden, layers, path)

    def batch_seeds(self, batch_size: int, ds: Dataset) -> int:
        """The most seed nodes of a training batch of ``batch_size`` (what activations are sized for)."""
        return batch_size

    def loader(self, ds: Dataset, split: str, fanouts: Sequence[int], batch_size: int, **opts: Any) -> Any:
        """A loader of the batches of ``split``'s seeds (``opts``: ``ringgnn.Loader``'s)."""
        raise NotImplementedError

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Under ``torchrun``: each rank takes its share of every epoch's batches of every
        loader (see ``ringgnn.training.distributed``), the training split's padded so that every rank
        steps as often."""
        for split, loader in loaders.items():
            loader.batches = distributed.shard(len(loader), ranks.rank, ranks.world_size, pad=split == self.train_split)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        """(loss, examples it averages over) of a training batch; ``(None, 0)`` for a batch
        without examples, unless ``always`` (data parallel: every rank must step), which gives
        a zero loss that still has a gradient graph."""
        raise NotImplementedError

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str) -> List[float]:
        """Sums over the batches of ``feeds[split]`` for each evaluated split (what
        :meth:`scores` turns into scores once every rank's are added up)."""
        raise NotImplementedError

    def scores(self, sums: Sequence[float]) -> Dict[str, float]:
        """``{<split>_<metric>: value}`` from :meth:`evaluate`'s sums (added over the ranks)."""
        raise NotImplementedError

    def layerwise(self, ds: Dataset, ckpt: Checkpoint, **opts: Any) -> Dict[str, float]:
        """The scores of ``ckpt``'s model with exact layer-wise inference (``ringgnn.inference.run``;
        ``opts``: ``memory``, ``backend``, ``direct``, ``quiet``)."""
        raise NotImplementedError

    def keys(self) -> List[str]:
        """The scores' names, in the order of ``eval_splits``."""
        return [f"{s}_{self.metric}" for s in self.eval_splits]

    def summary(self, history: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The best epoch by the first evaluated split's score (the first epoch wins a tie) and
        its scores: ``best_<key>``, the other keys, ``best_epoch``."""
        first, *others = self.keys()
        best = max(history, key=lambda e: e[first], default=None)
        out = {f"best_{first}": None if best is None else best[first]}
        out.update({k: None if best is None else best[k] for k in others})
        out["best_epoch"] = None if best is None else best["epoch"]
        return out

    def describe(self, scores: Dict[str, Any]) -> str:
        """``val acc 0.9123, test acc 0.9045``: scores for a log line."""
        return ", ".join(f"{k.replace('_', ' ')} {scores[k]:.4f}" for k in self.keys())

    def describe_best(self, metrics: Dict[str, Any]) -> str:
        """``best val acc 0.9123 at epoch 3, test acc 0.9045``: :meth:`summary` for a log line."""
        first, *others = self.keys()
        return (f"best {first.replace('_', ' ')} {metrics[f'best_{first}']:.4f} at epoch {metrics['best_epoch']}"
                + "".join(f", {k.replace('_', ' ')} {metrics[k]:.4f}" for k in others))


class NodeClassification(Task):
    """Predict each node's label: cross-entropy on the labeled seeds of a batch (the encoder's
    last layer gives the logits), accuracy on the labeled nodes of ``val`` and ``test``, sampled
    as in training or exact (layer-wise)."""

    metric = "acc"

    def check(self, ds: Dataset) -> None:
        if ds.num_classes is None:
            raise InputError(f"{ds.path}: the dataset has no labels; rebuild it with --labels")
        super().check(ds)

    def out_dim(self, ds: Dataset) -> int:
        return ds.num_classes

    def loader(self, ds: Dataset, split: str, fanouts: Sequence[int], batch_size: int, **opts: Any) -> Loader:
        return Loader(ds, fanouts, batch_size, split=split, **opts)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        y = self.seed_labels(batch).to(device)
        labeled = y >= 0
        n = int(labeled.sum())
        if not n and not always:
            return None, 0
        out = self.seed_rows(net, batch, device, kind)
        return (F.cross_entropy(out[labeled], y[labeled]) if n else out.sum() * 0.0), n

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str) -> List[float]:
        """(correct predictions, labeled seeds) per evaluated split, sampled as in training. The
        sample is the same at every epoch (epoch 0 of the loader's seed), so accuracies of
        different epochs compare the same neighborhoods."""
        import torch

        net.eval()
        sums: List[float] = []
        for split in self.eval_splits:
            loader = feeds[split]
            loader.set_epoch(0)
            correct = total = 0
            with torch.no_grad():
                for batch in loader:
                    y = self.seed_labels(batch).to(device)
                    pred = self.seed_rows(net, batch, device, kind).argmax(-1)
                    labeled = y >= 0
                    correct += int((pred[labeled] == y[labeled]).sum())
                    total += int(labeled.sum())
            sums += [correct, total]
        return sums

    def scores(self, sums: Sequence[float]) -> Dict[str, float]:
        return {k: _ratio(sums[2 * i], sums[2 * i + 1]) for i, k in enumerate(self.keys())}

    def layerwise(self, ds: Dataset, ckpt: Checkpoint, **opts: Any) -> Dict[str, float]:
        return split_accuracy(lambda union: run_inference(ds, ckpt, union, output="predictions", **opts),
                              {s: ds.split(s) for s in self.eval_splits}, ds.labels)


class LinkPrediction(Task):
    """Predict whether an edge exists: the encoder's last layer gives ``hidden``-wide node
    embeddings, a decoder (``dot`` or ``mlp``) scores pairs of them. Training batches are
    ``batch_size`` pairs of the ``train`` edge split plus ``neg_ratio`` random negatives per
    positive (binary, uniform or by degree ** 0.75), binary cross-entropy on their scores.
    ``val`` and ``test`` are scored by ranking each held-out pair against its K stored
    negatives (the same candidates in every run): AUC (pooled over the split's positive and
    negative scores), MRR and Hits@K with OGB's tie rule (``ringgnn.inference.metrics``).

    After each epoch the held-out pairs are scored from one sampled embedding per node they
    name; under ``torchrun`` every rank embeds all of those nodes and scores its share of the
    pairs, so the summed scores are the single process's. The layer-wise scores at the end are
    exact (full neighborhoods) over the whole split."""

    metric = "auc"
    METRICS = ("auc", "mrr", "hits")

    #: The ends of a pair by their tower's name, with their node type: one for a homogeneous
    #: dataset (its encoder embeds both ends); a typed relation ``S:R:D`` with ``S != D`` has two.
    sides: Dict[str, Any] = {"src": None}

    def __init__(self, decoder: str = "dot", neg_ratio: float = 1.0, neg_weight: str = "uniform"):
        self.decoder = decoder
        self.neg = NegativeSampling("binary", neg_ratio, neg_weight)
        #: Each evaluated split's pairs, negatives and the nodes they name (set by loader()).
        self.held: Dict[str, HeldOut] = {}
        #: (rank, world size): which pairs this process scores.
        self._share = (0, 1)

    def run_args(self, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        return dict(task="link", **args, decoder=self.decoder, neg_ratio=self.neg.amount, neg_weight=self.neg.weight)

    def check(self, ds: Dataset) -> None:
        missing = [s for s in (self.train_split, *self.eval_splits) if s not in ds.edge_split_names]
        if missing:
            raise InputError(
                f"{ds.path}: the dataset has no {'/'.join(missing)} edge split, which --task link trains and scores "
                "on; rebuild it with convert --link-split val=0.05,test=0.1")

    def out_dim(self, ds: Dataset) -> int:
        raise InputError("a link model's output width is --hidden")  # build() does not ask

    def build(self, kind: str, ds: Dataset, hidden: int, layers: int, dropout: float) -> Any:
        return build_link_model(kind, ds.feature_dim, hidden, layers, dropout, self.decoder)

    def checkpoint(self, net: Any, kind: str, fanouts: List[int], hidden: int, layers: int, path: str) -> Checkpoint:
        return Checkpoint(net.encoder, kind, fanouts, hidden, layers, path, dict(task="link", decoder=self.decoder),
                          decoder=net.decoder)

    def batch_seeds(self, batch_size: int, ds: Dataset) -> int:
        return LinkPairs(ds, 0, self.neg).most_seeds(batch_size)

    def loader(self, ds: Dataset, split: str, fanouts: Sequence[int], batch_size: int, **opts: Any) -> Any:
        if split == self.train_split:
            return LinkLoader(ds, fanouts, batch_size, edges=split, neg_sampling=self.neg, **opts)
        # A held-out split is scored from one sampled embedding per node it names (its pairs'
        # endpoints and their candidates), node batches as large as a training batch's seeds
        # (what the memory plan was made for): each node's neighborhood is sampled once, not
        # once per pair it is in (K + 2 times fewer seeds than link batches of the same pairs).
        # Negatives shared by the split's positives (OGB's edge_neg) replace its per-pair ones.
        h = self.held[split] = HeldOut(ds, split)
        share = opts.pop("share", None)
        base = share._loader if isinstance(share, LinkLoader) else share
        return Loader(ds, fanouts, self.batch_seeds(batch_size, ds), split=h.ends["src"], share=base, **opts)

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Each rank trains on its share of the link batches; every rank embeds every node of
        the held-out splits (their pairs need all of them) and scores its share of the pairs."""
        tr = self.train_split
        loaders[tr].batches = distributed.shard(len(loaders[tr]), ranks.rank, ranks.world_size)
        self._share = (ranks.rank, ranks.world_size)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        eli = batch.edge_label_index.to(device)
        # One call of the whole model (under DDP, of its wrapper): encoder and decoder.
        logits = forward(net, batch, device, kind, eli[0], eli[1])
        return F.binary_cross_entropy_with_logits(logits, batch.edge_label.to(device)), int(eli.shape[1])

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str) -> List[float]:
        """Per split: ``[n, AUC * n, sum 1/rank, hits...]`` over this rank's share of the pairs
        (pairs ``i`` with ``i % world == rank``), AUC being the whole split's (every rank scores
        every pair: the same value), so that the sums over the ranks give the exact scores."""
        rank, world = self._share
        sums: List[float] = []
        for split in self.eval_splits:
            pos, neg, shared = self.held_out_scores(net, feeds, split, device, kind)
            if not len(pos):
                sums += [0.0] * (3 + len(metrics.KS))
                continue
            mine = slice(rank, None, world)
            n = len(pos[mine])
            if shared:  # every rank scores all the shared negatives: its positives' sums are exact
                sums += [n, metrics.auc(pos, neg) * n, *metrics.shared_ranking_sums(pos[mine], neg)[1:]]
                continue
            sums += [n, metrics.auc(pos, neg) * n, *metrics.ranking_sums(pos[mine], neg[mine])[1:]]
        return sums

    def held_out_scores(self, net: Any, feeds: Dict[str, Any], split: str, device: Any,
                        kind: str) -> Tuple[np.ndarray, np.ndarray, bool]:
        """(scores of the split's pairs, of their negatives ((n, K), or (m,) when shared), shared)
        from one sampled embedding per node the split names, by the tower of its end (the loader
        of ``split``'s source ends is ``feeds[split]``, of the other end's ``feeds["split.dst"]``)."""
        h = self.held[split]
        rows = {}
        for side in self.sides:
            tower = self.tower(net, side)
            tower.eval()
            feed = feeds[split if side == "src" else f"{split}.{side}"]
            z = sampled_embeddings(lambda b: self.tower_rows(tower, b, device, kind, side), feed, len(h.ends[side]))
            rows[side] = (z, h.ends[side])
        return (*h.decode(net.decoder, rows), h.shared)

    def tower(self, net: Any, side: str) -> Any:
        """The encoder of the ``side`` ends of the pairs."""
        return net.encoder

    def tower_rows(self, tower: Any, batch: Any, device: Any, kind: str, side: str) -> Any:
        """``tower``'s rows of ``batch``'s seeds."""
        return forward(tower, batch, device, kind)

    def scores(self, sums: Sequence[float]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        width = 2 + len(metrics.KS) + 1
        for i, split in enumerate(self.eval_splits):
            n, auc_sum, *rest = sums[i * width:(i + 1) * width]
            mrr, hits = metrics.scores_from_sums([n, *rest]) if n else (float("nan"), {k: float("nan") for k in metrics.KS})
            out.update(link_keys(split, _ratio(auc_sum, n), mrr, hits))
        return out

    def layerwise(self, ds: Dataset, ckpt: Checkpoint, **opts: Any) -> Dict[str, Any]:
        """Exact scores: one layer-wise inference of every node the splits name
        (``ringgnn.inference.scoring.embed_endpoints``), then the decoder."""
        ids, z = embed_endpoints(ds, ckpt, [h.ends["src"] for h in self.held.values()], **opts)
        return self.exact_scores(ckpt.decoder, {"src": (z, ids)})

    def exact_scores(self, decoder: Any, rows: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> Dict[str, Any]:
        """The scores of every evaluated split from each end's exact (rows, sorted ids)."""
        out: Dict[str, Any] = {}
        for split, h in self.held.items():
            s = split_scores(*h.decode(decoder, rows), shared=h.shared)
            out.update(link_keys(split, s["auc"], s["mrr"], s["hits"]))
        return out

    def keys(self) -> List[str]:
        return [f"{s}_{m}" for s in self.eval_splits for m in self.METRICS]

    def describe(self, scores: Dict[str, Any]) -> str:
        return ", ".join(f"{s} auc {scores[f'{s}_auc']:.4f} mrr {scores[f'{s}_mrr']:.4f}" for s in self.eval_splits)

    def describe_best(self, metrics: Dict[str, Any]) -> str:
        first, *_ = self.eval_splits
        rest = {k: metrics[k] for k in self.keys() if k != f"{first}_auc"}
        rest[f"{first}_auc"] = metrics[f"best_{first}_auc"]
        hits = metrics.get(f"{self.eval_splits[-1]}_hits") or {}
        return (f"best {first} auc {metrics[f'best_{first}_auc']:.4f} at epoch {metrics['best_epoch']}; "
                + self.describe(rest)
                + "".join(f", {self.eval_splits[-1]} hits@{k} {v:.4f}" for k, v in hits.items()))


def link_keys(split: str, auc: float, mrr: float, hits: Dict[Any, float]) -> Dict[str, Any]:
    """``{split}_auc``, ``{split}_mrr`` and ``{split}_hits`` (a dict by K, as strings: JSON keys)."""
    return {f"{split}_auc": auc, f"{split}_mrr": mrr, f"{split}_hits": {str(k): v for k, v in hits.items()}}


def sampled_embeddings(rows_of: Any, loader: Any, rows: int) -> np.ndarray:
    """An encoder's rows of ``loader``'s seeds (a node loader over sorted ids, not shuffled;
    ``rows_of(batch)``: the encoder's rows of a batch's seeds), in seed order, on sampled
    neighborhoods: the same sample at every epoch (epoch 0)."""
    import torch

    loader.set_epoch(0)
    out: List[np.ndarray] = []
    with torch.no_grad():
        for batch in loader:
            out.append(rows_of(batch).cpu().numpy())
    z = np.concatenate(out) if out else np.zeros((0, 1), np.float32)
    if len(z) != rows:
        raise RuntimeError(f"sampled {len(z)} embeddings for {rows} nodes")  # a selection of batches was set
    return z


class HeldOut:
    """A held-out edge split of ``part`` (a homogeneous dataset or a typed one's relation): its
    pairs ((2, n), mapped), the negatives they are ranked against (``(n, K)`` per pair, or with
    ``shared`` the (2, m) pairs shared by all, OGB's ``edge_neg``; mapped), and ``ends``, the
    sorted distinct nodes it names: ``{"src": all}``, or with ``two_types`` (a relation whose ends
    are of two node types) ``{"src": sources, "dst": destinations and negatives}``."""

    def __init__(self, part: Dataset, split: str, two_types: bool = False):
        self.pairs = part.edge_split(split, mmap=True)
        shared = part.edge_shared_negatives(split, mmap=True)
        self.shared = shared is not None
        self.negs = part.edge_negatives(split, mmap=True) if shared is None else shared
        if not two_types:
            self.ends = {"src": np.unique(np.concatenate([np.unique(self.pairs), np.unique(self.negs)]))}
            return
        dst = [self.pairs[1], self.negs[1] if self.shared else self.negs]
        src = [self.pairs[0]] + ([self.negs[0]] if self.shared else [])
        self.ends = {side: np.unique(np.concatenate([np.unique(a) for a in ends]))
                     for side, ends in (("src", src), ("dst", dst))}

    def decode(self, decoder: Any, rows: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> Tuple[np.ndarray, np.ndarray]:
        """(scores of the pairs, of their negatives) by ``decoder`` from each end's (rows,
        sorted ids) (``rows["dst"]``: absent when one tower embeds both ends)."""
        src, dst = rows["src"], rows.get("dst")
        pos, neg = decode_pairs(decoder, *src, self.pairs, None if self.shared else self.negs, dst=dst)
        return pos, (decode_pairs(decoder, *src, self.negs, dst=dst)[0] if self.shared else neg)


def split_accuracy(predict: Any, ids: Dict[str, np.ndarray], labels: np.ndarray) -> Dict[str, float]:
    """``{<split>_acc}`` of the classes ``predict(union)`` gives the sorted union of the splits'
    nodes ``ids``, on their labeled nodes (``labels``: -1 unlabeled); NaN for a split without."""
    union = np.unique(np.concatenate(list(ids.values())))
    pred = predict(union)
    acc = {}
    for s, i in ids.items():
        y = labels[i]
        labeled = y >= 0
        acc[f"{s}_acc"] = float((pred[np.searchsorted(union, i)][labeled] == y[labeled]).mean()) \
            if labeled.any() else float("nan")
    return acc


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


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")

