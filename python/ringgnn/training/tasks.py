"""Tasks: what a run learns and how it is scored. :class:`Task` is the loop's interface;
:class:`NodeClassification` and :class:`LinkPrediction` serve every kind of dataset, holding
its kind (``training.kinds``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import progress
from .._core import InputError
from ..data.dataset import Dataset
from ..data.schema import parse_edge_type
from ..inference import metrics
from ..inference.scoring import decode_pairs, split_scores
from ..sampling.pairs import NegativeSampling, distinct_at
from . import distributed
from .kinds import Homogeneous


class Task:
    """The interface between the training loop and what it trains for."""

    name = "node"  # --task
    metric = "score"  # per split; the first of eval_splits selects the best epoch
    train_split = "train"
    eval_splits: Tuple[str, ...] = ("val", "test")

    def __init__(self, kind: Any = None):
        self.kind = Homogeneous() if kind is None else kind

    def fanouts(self, ds: Any, fanouts: Any) -> Any:
        """``--fanouts`` parsed: a list, one per hop, or per relation on a typed dataset."""
        return self.kind.fanouts(ds, fanouts)

    def task_args(self) -> Dict[str, Any]:
        """The task's own options as checkpoints hold them (after the loop's)."""
        return dict(decoder=None, neg_ratio=None, neg_weight=None)

    def run_args(self, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        """The run's options as checkpoints hold them: the loop's ``args``, the task's, the kind's."""
        return self.kind.run_args(self, ds, args)

    def prepare(self, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """(the model on ``dev``, the loaders of the training split and the evaluated ones)."""
        return self.kind.prepare(self, ds, ranks, run_args, resumed, dev, opts)

    def exact(self, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        """Exact (layer-wise) scores of the live ``net`` or, when None, of the run's best checkpoint."""
        return self.kind.exact(self, ds, out, net, opts, **exact)

    def check(self, ds: Dataset) -> None:
        """Raise :class:`InputError` when ``ds`` lacks what the task needs (labels, splits)."""
        missing = [s for s in (self.train_split, *self.eval_splits) if s not in ds.split_names]
        if missing:
            raise InputError(
                f"{ds.path}: the dataset has no {'/'.join(missing)} split; rebuild it with "
                "--split train=0.6,val=0.2,test=0.2"
            )

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Under ``torchrun``: each rank takes its share of every loader's batches, the training
        split's padded so that every rank steps as often."""
        for split, loader in loaders.items():
            loader.batches = distributed.shard(len(loader), ranks.rank, ranks.world_size, pad=split == self.train_split)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        """(loss, examples it averages over) of a training batch; ``(None, 0)`` without examples,
        unless ``always`` (every rank must step): then a zero loss with a gradient graph."""
        raise NotImplementedError

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str, quiet: bool = False) -> List[float]:
        """Sums over ``feeds[split]``'s batches per evaluated split, for :meth:`scores`; a bar per
        split (:func:`eval_bar`) unless ``quiet``."""
        raise NotImplementedError

    def scores(self, sums: Sequence[float]) -> Dict[str, float]:
        """``{<split>_<metric>: value}`` from :meth:`evaluate`'s sums (added over the ranks)."""
        raise NotImplementedError

    def keys(self) -> List[str]:
        """The scores' names, in the order of ``eval_splits``."""
        return [f"{s}_{self.metric}" for s in self.eval_splits]

    def summary(self, history: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The best epoch by the first key (the first epoch wins a tie): ``best_<key>``, the other
        keys, ``best_epoch``."""
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
    """Predict each node's label: cross-entropy on a batch's labeled seeds, accuracy on the
    labeled nodes of ``val`` and ``test``."""

    metric = "acc"

    def __init__(self, kind: Any = None, target: Optional[str] = None, eval_splits: Sequence[str] = ("val", "test")):
        super().__init__(kind)
        self.target = target
        self.eval_splits = tuple(eval_splits)

    def check(self, ds: Dataset) -> None:
        if ds.num_classes is None:
            raise InputError(f"{ds.path}: the dataset has no labels; rebuild it with --labels")
        super().check(ds)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        y = self.kind.labels(batch, self.target).to(device)
        labeled = y >= 0
        n = int(labeled.sum())
        if not n and not always:
            return None, 0
        out = self.kind.rows(net, batch, device, kind, self.target)
        return (F.cross_entropy(out[labeled], y[labeled]) if n else out.sum() * 0.0), n

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str, quiet: bool = False) -> List[float]:
        """(correct, labeled) per evaluated split, on the same sample every epoch (epoch 0)."""
        import torch

        net.eval()
        sums: List[float] = []
        for split in self.eval_splits:
            loader = feeds[split]
            loader.set_epoch(0)
            correct = total = 0
            with torch.no_grad(), eval_bar(split, len(loader), quiet) as bar:
                for batch in loader:
                    y = self.kind.labels(batch, self.target).to(device)
                    pred = self.kind.rows(net, batch, device, kind, self.target).argmax(-1)
                    labeled = y >= 0
                    correct += int((pred[labeled] == y[labeled]).sum())
                    total += int(labeled.sum())
                    bar.update(1)
            sums += [correct, total]
        return sums

    def scores(self, sums: Sequence[float]) -> Dict[str, float]:
        return {k: _ratio(sums[2 * i], sums[2 * i + 1]) for i, k in enumerate(self.keys())}

    def summary(self, history: List[Dict[str, Any]]) -> Dict[str, Any]:
        out = super().summary(history)
        out.setdefault("test_acc", None)  # a typed target without a test split
        return out

    def accuracy(self, predict: Any, part: Any) -> Dict[str, float]:
        """``{<split>_acc}`` of the classes ``predict(union)`` gives the sorted union of the
        evaluated splits' nodes of ``part``; NaN for a split without labels."""
        ids = {s: part.split(s) for s in self.eval_splits}
        union = np.unique(np.concatenate(list(ids.values())))
        pred, acc = predict(union), {}
        for s, i in ids.items():
            y = part.labels[i]
            labeled = y >= 0
            acc[f"{s}_acc"] = float((pred[np.searchsorted(union, i)][labeled] == y[labeled]).mean()) \
                if labeled.any() else float("nan")
        return acc


class LinkPrediction(Task):
    """Predict whether an edge exists: a decoder (``dot`` or ``mlp``) scores pairs of node
    embeddings; binary cross-entropy on the ``train`` pairs and ``neg_ratio`` random negatives
    each; ``val`` and ``test`` rank each pair against its stored negatives (AUC, MRR, Hits@K).
    Held-out pairs are scored from one sampled embedding per node they name; under ``torchrun``
    each rank scores its share of the pairs."""

    name = "link"
    metric = "auc"
    METRICS = ("auc", "mrr", "hits")

    #: A pair's ends by tower, with their node type (two for ``S:R:D`` with ``S != D``).
    sides: Dict[str, Any] = {"src": None}

    def __init__(self, decoder: str = "dot", neg_ratio: float = 1.0, neg_weight: str = "uniform", kind: Any = None,
                 relation: Optional[str] = None):
        super().__init__(kind)
        self.decoder = decoder
        self.neg = NegativeSampling("binary", neg_ratio, neg_weight)
        self.relation = relation
        if relation is not None:
            self.edge_type = parse_edge_type(relation)
            s, _, d = self.edge_type
            self.sides = {"src": s} if s == d else {"src": s, "dst": d}
        self.held: Dict[str, HeldOut] = {}
        self._share = (0, 1)

    def task_args(self) -> Dict[str, Any]:
        return dict(decoder=self.decoder, neg_ratio=self.neg.amount, neg_weight=self.neg.weight)

    def check(self, ds: Dataset) -> None:
        missing = [s for s in (self.train_split, *self.eval_splits) if s not in ds.edge_split_names]
        if missing:
            raise InputError(
                f"{ds.path}: the dataset has no {'/'.join(missing)} edge split, which --task link trains and scores "
                "on; rebuild it with convert --link-split val=0.05,test=0.1")

    def hold(self, part: Any, split: str, at_times: bool = False) -> "HeldOut":
        """Keep the held-out edge ``split`` of ``part`` (a dataset or relation) for evaluation."""
        h = self.held[split] = HeldOut(part, split, two_types=len(self.sides) == 2, at_times=at_times)
        return h

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Each rank trains on its share of the batches; every rank embeds every held-out node
        and scores its share of the pairs."""
        tr = self.train_split
        loaders[tr].batches = distributed.shard(len(loaders[tr]), ranks.rank, ranks.world_size)
        self._share = (ranks.rank, ranks.world_size)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        logits, label, n = self.kind.pairs(self, net, batch, device, kind)
        return F.binary_cross_entropy_with_logits(logits, label.to(device)), n

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str, quiet: bool = False) -> List[float]:
        """Per split: ``[n, AUC * n, sum 1/rank, hits...]`` over this rank's pairs (``i % world ==
        rank``; AUC is the whole split's), so that the ranks' sums give the exact scores."""
        rank, world = self._share
        sums: List[float] = []
        for split in self.eval_splits:
            pos, neg, shared = self.held_out_scores(net, feeds, split, device, kind, quiet)
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

    def held_out_scores(self, net: Any, feeds: Dict[str, Any], split: str, device: Any, kind: str,
                        quiet: bool = False) -> Tuple[np.ndarray, np.ndarray, bool]:
        """(scores of the split's pairs, of their negatives, shared) from one sampled embedding per
        node (``feeds[split]``: the source ends', ``feeds["split.dst"]``: the other's); one bar
        over both ends' batches unless ``quiet``."""
        h = self.held[split]
        ends = {side: feeds[split if side == "src" else f"{split}.{side}"] for side in self.sides}
        rows = {}
        with eval_bar(split, sum(len(feed) for feed in ends.values()), quiet) as bar:
            for side, t in self.sides.items():
                tower = net.tower(side)
                tower.eval()
                z = sampled_embeddings(lambda b: self.kind.rows(tower, b, device, kind, t), ends[side],
                                       len(h.ends[side]), bar)
                rows[side] = (z, h.keys(side))
        return (*h.decode(net.decoder, rows), h.shared)

    def scores(self, sums: Sequence[float]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        width = 2 + len(metrics.KS) + 1
        for i, split in enumerate(self.eval_splits):
            n, auc_sum, *rest = sums[i * width:(i + 1) * width]
            none = (float("nan"), {k: float("nan") for k in metrics.KS})
            mrr, hits = metrics.scores_from_sums([n, *rest]) if n else none
            out.update(link_keys(split, _ratio(auc_sum, n), mrr, hits))
        return out

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


def eval_bar(split: str, batches: int, quiet: bool) -> Any:
    """The bar of a split's sampled evaluation (``eval val``), cleared when done as an epoch's."""
    return progress.bar(batches, f"eval {split}", "batch", disable=quiet, leave=False)


def sampled_embeddings(rows_of: Any, loader: Any, rows: int, bar: Any = None) -> np.ndarray:
    """``rows_of(batch)`` of every batch of ``loader`` (not shuffled), in seed order, epoch 0;
    ``bar`` (a tqdm bar) advances by one a batch."""
    import torch

    loader.set_epoch(0)
    out: List[np.ndarray] = []
    with torch.no_grad():
        for batch in loader:
            out.append(rows_of(batch).cpu().numpy())
            if bar is not None:
                bar.update(1)
    z = np.concatenate(out) if out else np.zeros((0, 1), np.float32)
    if len(z) != rows:
        raise RuntimeError(f"sampled {len(z)} embeddings for {rows} nodes")  # a selection of batches was set
    return z


class HeldOut:
    """A held-out edge split of ``part`` (a dataset or a relation): ``pairs`` (2, n), ``negs``
    ((n, K), or with ``shared`` (2, m) pairs shared by all), and ``ends``, the sorted distinct
    nodes it names per side (``two_types``: ``src`` and ``dst``). ``at_times``: each pair is
    embedded at its time minus one; ``ends`` are then distinct (node, time) ends with ``times``,
    and pairs and negatives positions among them."""

    def __init__(self, part: Dataset, split: str, two_types: bool = False, at_times: bool = False):
        self.pairs = part.edge_split(split, mmap=True)
        shared = part.edge_shared_negatives(split, mmap=True)
        self.shared = shared is not None
        self.negs = part.edge_negatives(split, mmap=True) if shared is None else shared
        self.times: Optional[Dict[str, np.ndarray]] = None
        if at_times:
            self._at_times(part, split, two_types)
            return
        if not two_types:
            self.ends = {"src": np.unique(np.concatenate([np.unique(self.pairs), np.unique(self.negs)]))}
            return
        dst = [self.pairs[1], self.negs[1] if self.shared else self.negs]
        src = [self.pairs[0]] + ([self.negs[0]] if self.shared else [])
        self.ends = {side: np.unique(np.concatenate([np.unique(a) for a in ends]))
                     for side, ends in (("src", src), ("dst", dst))}

    def _at_times(self, part: Dataset, split: str, two_types: bool) -> None:
        if self.shared:
            raise InputError(f"{part.path}: the {split} pairs are ranked against negatives shared by all of them, "
                             "which have no time; a run at times needs negatives per pair (drawn at the pair's time)")
        at = part.edge_split_times(split) - 1
        n, k = self.negs.shape
        neg_at = np.repeat(at, k)
        if two_types:
            ends = {"src": (self.pairs[0], at), "dst": (np.concatenate([self.pairs[1], self.negs.reshape(-1)]),
                                                       np.concatenate([at, neg_at]))}
        else:
            ends = {"src": (np.concatenate([self.pairs[0], self.pairs[1], self.negs.reshape(-1)]),
                            np.concatenate([at, at, neg_at]))}
        self.ends, self.times, where = {}, {}, {}
        for side, (ids, t) in ends.items():
            self.ends[side], self.times[side], where[side] = distinct_at(np.asarray(ids), t)
        dst = where.get("dst", where["src"][n:])
        self.pairs = np.stack([where["src"][:n], dst[:n]])
        self.negs = dst[n:].reshape(n, k)

    def keys(self, side: str) -> np.ndarray:
        """The keys :attr:`pairs` and :attr:`negs` name: ``ends[side]``, or at times positions."""
        return self.ends[side] if self.times is None else np.arange(len(self.ends[side]), dtype=np.int64)

    def decode(self, decoder: Any, rows: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> Tuple[np.ndarray, np.ndarray]:
        """(scores of the pairs, of their negatives) from each end's (rows, sorted ids)."""
        src, dst = rows["src"], rows.get("dst")
        pos, neg = decode_pairs(decoder, *src, self.pairs, None if self.shared else self.negs, dst=dst)
        return pos, (decode_pairs(decoder, *src, self.negs, dst=dst)[0] if self.shared else neg)


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")

