"""Tasks: what a training run learns and how it is scored. :class:`Task` is the loop's interface
(the loaders, each training batch's loss, the evaluated splits' sums and the scores made of them,
named ``<split>_<metric>``); :class:`NodeClassification` and :class:`LinkPrediction` are one class
each for every kind of dataset, holding its kind (``ringgnn.training.kinds``). docs/ARCHITECTURE.md
"Training: one loop, tasks as plug-ins".
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

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

    #: ``node`` or ``link``: what ``--task`` and checkpoints call it.
    name = "node"
    #: The metric the evaluation reports per split; the first of ``eval_splits`` selects the best epoch.
    metric = "score"
    #: The split trained on, and the splits evaluated after each epoch.
    train_split = "train"
    eval_splits: Tuple[str, ...] = ("val", "test")

    def __init__(self, kind: Any = None):
        #: The dataset's kind (``ringgnn.training.kinds``): the model family, the loaders.
        self.kind = Homogeneous() if kind is None else kind

    def fanouts(self, ds: Any, fanouts: Any) -> Any:
        """``--fanouts`` parsed: a list, one per hop, or per relation on a typed dataset."""
        return self.kind.fanouts(ds, fanouts)

    def task_args(self) -> Dict[str, Any]:
        """The task's own options as checkpoints hold them (after the loop's)."""
        return dict(decoder=None, neg_ratio=None, neg_weight=None)

    def run_args(self, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        """The run's options as checkpoints hold them (``args``: the loop's, plus the task's and
        the kind's)."""
        return self.kind.run_args(self, ds, args)

    def prepare(self, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """(the model on ``dev``, the loaders of the training split and the evaluated ones)."""
        return self.kind.prepare(self, ds, ranks, run_args, resumed, dev, opts)

    def exact(self, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        """Exact (layer-wise) scores of the live ``net`` or, when None, of the run's best checkpoint."""
        return self.kind.exact(self, ds, out, net, opts, **exact)

    # --- the task ---------------------------------------------------------------------------

    def check(self, ds: Dataset) -> None:
        """Raise :class:`InputError` when ``ds`` lacks what the task needs (labels, splits; a
        typed dataset's target or relation is checked when the task is made)."""
        missing = [s for s in (self.train_split, *self.eval_splits) if s not in ds.split_names]
        if missing:
            raise InputError(
                f"{ds.path}: the dataset has no {'/'.join(missing)} split; rebuild it with "
                "--split train=0.6,val=0.2,test=0.2"
            )

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

    def __init__(self, kind: Any = None, target: Optional[str] = None, eval_splits: Sequence[str] = ("val", "test")):
        super().__init__(kind)
        #: The node type classified (a typed dataset's ``--target``; None: the one type).
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
                    y = self.kind.labels(batch, self.target).to(device)
                    pred = self.kind.rows(net, batch, device, kind, self.target).argmax(-1)
                    labeled = y >= 0
                    correct += int((pred[labeled] == y[labeled]).sum())
                    total += int(labeled.sum())
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
        evaluated splits' nodes of ``part`` (the dataset, or a typed one's target type), on their
        labeled nodes; NaN for a split without."""
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
    """Predict whether an edge exists: the encoder's last layer gives ``hidden``-wide node
    embeddings, a decoder (``dot`` or ``mlp``) scores pairs of them. Training batches are
    ``batch_size`` pairs of the ``train`` edge split plus ``neg_ratio`` random negatives per
    positive (binary, uniform or by degree ** 0.75), binary cross-entropy on their scores.
    ``val`` and ``test`` are scored by ranking each held-out pair against its K stored
    negatives (the same candidates in every run): AUC (pooled over the split's positive and
    negative scores), MRR and Hits@K with OGB's tie rule (``ringgnn.inference.metrics``).

    After each epoch the held-out pairs are scored from one sampled embedding per node they
    name (at times: per distinct (node, time), each pair embedded at its time minus one, see
    :class:`HeldOut`); under ``torchrun`` every rank embeds all of those nodes and scores its
    share of the pairs, so the summed scores are the single process's. The layer-wise scores at
    the end are exact (full neighborhoods) over the whole split."""

    name = "link"
    metric = "auc"
    METRICS = ("auc", "mrr", "hits")

    #: The ends of a pair by their tower's name, with their node type: one for a homogeneous
    #: dataset (its encoder embeds both ends); a typed relation ``S:R:D`` with ``S != D`` has two.
    sides: Dict[str, Any] = {"src": None}

    def __init__(self, decoder: str = "dot", neg_ratio: float = 1.0, neg_weight: str = "uniform", kind: Any = None,
                 relation: Optional[str] = None):
        super().__init__(kind)
        self.decoder = decoder
        self.neg = NegativeSampling("binary", neg_ratio, neg_weight)
        #: A typed dataset's relation ``S:R:D`` whose links are predicted (None: the one relation).
        self.relation = relation
        if relation is not None:
            self.edge_type = parse_edge_type(relation)
            s, _, d = self.edge_type
            self.sides = {"src": s} if s == d else {"src": s, "dst": d}
        #: Each evaluated split's pairs, negatives and the nodes they name (set by :meth:`hold`).
        self.held: Dict[str, HeldOut] = {}
        #: (rank, world size): which pairs this process scores.
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
        """The held-out edge ``split`` of ``part`` (the dataset, or a typed one's relation), kept
        for the evaluation (``at_times``: its pairs embedded at their times)."""
        h = self.held[split] = HeldOut(part, split, two_types=len(self.sides) == 2, at_times=at_times)
        return h

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Each rank trains on its share of the link batches; every rank embeds every node of
        the held-out splits (their pairs need all of them) and scores its share of the pairs."""
        tr = self.train_split
        loaders[tr].batches = distributed.shard(len(loaders[tr]), ranks.rank, ranks.world_size)
        self._share = (ranks.rank, ranks.world_size)

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        logits, label, n = self.kind.pairs(self, net, batch, device, kind)
        return F.binary_cross_entropy_with_logits(logits, label.to(device)), n

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
        for side, t in self.sides.items():
            tower = net.tower(side)
            tower.eval()
            feed = feeds[split if side == "src" else f"{split}.{side}"]
            z = sampled_embeddings(lambda b: self.kind.rows(tower, b, device, kind, t), feed, len(h.ends[side]))
            rows[side] = (z, h.keys(side))
        return (*h.decode(net.decoder, rows), h.shared)

    def scores(self, sums: Sequence[float]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        width = 2 + len(metrics.KS) + 1
        for i, split in enumerate(self.eval_splits):
            n, auc_sum, *rest = sums[i * width:(i + 1) * width]
            mrr, hits = metrics.scores_from_sums([n, *rest]) if n else (float("nan"), {k: float("nan") for k in metrics.KS})
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
    are of two node types) ``{"src": sources, "dst": destinations and negatives}``.

    ``at_times``: each pair and its negatives are embedded at the pair's time minus one (as
    ``ringgnn.sampling.pairs`` samples a pair at times): ``ends`` are then the distinct (node,
    time) ends, in (time, node) order, with their times in ``times``, and the pairs and negatives
    are positions among them (:meth:`keys`)."""

    def __init__(self, part: Dataset, split: str, two_types: bool = False, at_times: bool = False):
        self.pairs = part.edge_split(split, mmap=True)
        shared = part.edge_shared_negatives(split, mmap=True)
        self.shared = shared is not None
        self.negs = part.edge_negatives(split, mmap=True) if shared is None else shared
        #: At times: the time each end of ``ends`` is sampled at (None: without times).
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
        """The sorted keys of ``ends[side]`` that :attr:`pairs` and :attr:`negs` name: the node ids,
        or at times their positions."""
        return self.ends[side] if self.times is None else np.arange(len(self.ends[side]), dtype=np.int64)

    def decode(self, decoder: Any, rows: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> Tuple[np.ndarray, np.ndarray]:
        """(scores of the pairs, of their negatives) by ``decoder`` from each end's (rows,
        sorted ids) (``rows["dst"]``: absent when one tower embeds both ends)."""
        src, dst = rows["src"], rows.get("dst")
        pos, neg = decode_pairs(decoder, *src, self.pairs, None if self.shared else self.negs, dst=dst)
        return pos, (decode_pairs(decoder, *src, self.negs, dst=dst)[0] if self.shared else neg)


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")

