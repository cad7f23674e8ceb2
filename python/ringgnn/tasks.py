"""Tasks: what a training run learns and how it is scored.

``ringgnn.train`` runs the same loop for every task: it asks the task for the loader of each
split's seeds, for the loss of each training batch, for the evaluation of the other splits after
each epoch (sums, so that data-parallel ranks can add theirs) and for the scores made of them.
:class:`Task` is that interface; :class:`NodeClassification` (cross-entropy on the labeled
seeds, accuracy) is the one task so far. A link-prediction task plugs in the same way: its
seeds are a split's edges, its loss scores them against negatives through a decoder
(``ringgnn.models``), its scores are ranking metrics.

Scores are named ``<split>_<metric>`` (``val_acc``, ``test_acc``): the names of the columns of
``metrics.json``'s epochs, and of its ``best_<first eval split>_<metric>``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ._core import InputError
from .checkpoints import Checkpoint
from .dataset import Dataset
from .inference import run_inference
from .loader import Loader
from .models import forward


class Task:
    """The interface between the training loop and what it trains for."""

    #: The metric the evaluation reports per split; the first of ``eval_splits`` selects the best epoch.
    metric = "score"
    #: The split trained on, and the splits evaluated after each epoch.
    train_split = "train"
    eval_splits: Tuple[str, ...] = ("val", "test")

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

    def loader(self, ds: Dataset, split: str, fanouts: Sequence[int], batch_size: int, **opts: Any) -> Any:
        """A loader of the batches of ``split``'s seeds (``opts``: ``ringgnn.Loader``'s)."""
        raise NotImplementedError

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
        """The scores of ``ckpt``'s model with exact layer-wise inference (``ringgnn.inference``;
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

        y = batch.y[: batch.batch_size].to(device)
        labeled = y >= 0
        n = int(labeled.sum())
        if not n and not always:
            return None, 0
        out = forward(net, batch, device, kind)
        return (F.cross_entropy(out[labeled], y[labeled]) if n else out.sum() * 0.0), n

    def evaluate(self, net: Any, feeds: Dict[str, Any], device: Any, kind: str) -> List[float]:
        sums: List[float] = []
        for split in self.eval_splits:
            sums += count_correct(net, feeds[split], device, kind)
        return sums

    def scores(self, sums: Sequence[float]) -> Dict[str, float]:
        return {k: _ratio(sums[2 * i], sums[2 * i + 1]) for i, k in enumerate(self.keys())}

    def layerwise(self, ds: Dataset, ckpt: Checkpoint, **opts: Any) -> Dict[str, float]:
        acc = layerwise_accuracy(ds, ckpt, self.eval_splits, **opts)
        return {k: acc[s] for k, s in zip(self.keys(), self.eval_splits)}


def count_correct(net: Any, loader: Any, device: Any, kind: str) -> Tuple[int, int]:
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
            pred = forward(net, batch, device, kind).argmax(-1)
            labeled = y >= 0
            correct += int((pred[labeled] == y[labeled]).sum())
            total += int(labeled.sum())
    return correct, total


def layerwise_accuracy(ds: Dataset, ckpt: Checkpoint, splits: Sequence[str] = ("val", "test"),
                       **opts: Any) -> Dict[str, float]:
    """Exact accuracy (full neighborhoods) of ``ckpt``'s model on each split, from one
    layer-wise inference over the union of the splits' nodes."""
    ids = {s: ds.split(s) for s in splits}
    union = np.unique(np.concatenate([ids[s] for s in splits]))
    pred = run_inference(ds, ckpt, union, output="predictions", **opts)
    y = ds.labels
    acc = {}
    for s in splits:
        p = pred[np.searchsorted(union, ids[s])]
        labeled = y[ids[s]] >= 0
        acc[s] = float((p[labeled] == y[ids[s]][labeled]).mean()) if labeled.any() else float("nan")
    return acc


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")

