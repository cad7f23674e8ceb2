"""Link batches: seeds are edges (src, dst). :class:`LinkSampler` adds negatives to a batch of
positive pairs and samples the neighborhoods of every endpoint with a :class:`NeighborSampler`,
with the semantics of PyG's ``LinkNeighborLoader`` (homogeneous graph, ``disjoint=False``):

- ``binary``: ``ceil(amount * n)`` negative pairs whose source *and* destination are random
  nodes, labelled 0 after the ``n`` positives (label 1, or the labels given);
- ``triplet``: ``amount`` (an integer) random destinations per positive, ``dst_neg``;
- no negative sampling: the positives only.

The seed nodes are the sorted unique endpoints (``torch.unique`` of ``cat([src, dst])``, as PyG
does); the sample is the node sample of those seeds, so ``node[:len(seeds)]`` are the seeds, and
``edge_label_index`` (or ``src_index``/``dst_pos_index``/``dst_neg_index``) are positions in
``node``. Negatives are drawn uniformly, or by ``degree ** 0.75`` (in-degree in the training
graph, the word2vec/PinSage practice), with replacement, from a numpy PCG64 stream keyed by
(seed, epoch, batch): a batch's negatives, like its sample, depend on nothing else.

This is the sampling; PyG's ``LinkLoader`` drives it through
:meth:`ringgnn.pyg.RingNeighborSampler.sample_from_edges`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ._core import InputError
from .sampler import NeighborSampler, SampledSubgraph

#: The numpy ``SeedSequence`` purpose word of negative sampling ("lneg" in ASCII).
NEG_PURPOSE = 0x6C6E6567
MODES = ("binary", "triplet")
WEIGHTS = ("uniform", "degree")


@dataclass(frozen=True)
class NegativeSampling:
    """How to add negatives to a link batch: ``mode`` 'binary' or 'triplet', ``amount`` negatives
    per positive (a ratio for binary, a positive integer for triplet), ``weight`` 'uniform' or
    'degree' (probability proportional to in-degree ** 0.75)."""

    mode: str = "binary"
    amount: float = 1.0
    weight: str = "uniform"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"negative sampling mode '{self.mode}' is not one of {', '.join(MODES)}")
        if self.weight not in WEIGHTS:
            raise InputError(f"negative sampling weight '{self.weight}' is not one of {', '.join(WEIGHTS)}")
        amount = float(self.amount)
        if not amount > 0 or not math.isfinite(amount):
            raise InputError(f"negative sampling amount must be positive (got {self.amount})")
        if self.mode == "triplet" and amount != math.ceil(amount):
            raise InputError(f"triplet negative sampling needs a whole number of negatives per positive (got {self.amount})")


@dataclass
class LinkBatch:
    """A sampled link batch: the node sample of its endpoints plus the pairs to score."""

    sample: SampledSubgraph
    num_pos: int
    edge_label_index: Optional[np.ndarray] = None
    """(2, m) positions in ``sample.node`` of the pairs to score (binary or no negatives)."""
    edge_label: Optional[np.ndarray] = None
    """(m,) float32: 1 for positives (or the labels given), 0 for negatives; binary only."""
    src_index: Optional[np.ndarray] = None
    dst_pos_index: Optional[np.ndarray] = None
    dst_neg_index: Optional[np.ndarray] = None
    """triplet: (n,) positions of the sources and positive destinations, (n, amount) of the
    negative destinations (``(n,)`` when amount is 1, as PyG squeezes it)."""


class LinkSampler:
    """Link batches over a :class:`NeighborSampler` (its dataset, fanouts, backend and seed)."""

    def __init__(self, sampler: NeighborSampler, neg_sampling: Optional[NegativeSampling] = None):
        self.sampler = sampler
        self.neg_sampling = neg_sampling
        self._cdf: Optional[np.ndarray] = None

    def _weights_cdf(self) -> np.ndarray:
        if self._cdf is None:
            w = self.sampler.dataset.degrees().astype(np.float64) ** 0.75
            cdf = np.cumsum(w)
            if cdf.size == 0 or cdf[-1] <= 0:
                raise InputError("negative sampling by degree needs a graph with edges; use weight='uniform'")
            self._cdf = cdf
        return self._cdf

    def negatives(self, count: int, rng: np.random.Generator, weight: Optional[np.ndarray] = None) -> np.ndarray:
        """``count`` random node ids by the configured weighting (or by ``weight``, one
        non-negative value per node, as PyG's ``src_weight``/``dst_weight``)."""
        n = self.sampler.dataset.num_nodes
        if weight is not None:
            cdf = np.cumsum(np.asarray(weight, dtype=np.float64))
            if cdf.size != n or not cdf[-1] > 0:
                raise InputError(f"a negative-sampling weight needs one non-negative value per node ({n}) and a positive sum")
        elif self.neg_sampling is not None and self.neg_sampling.weight == "degree":
            cdf = self._weights_cdf()
        else:
            return rng.integers(0, n, size=count, dtype=np.int64)
        u = rng.random(count) * cdf[-1]
        return np.minimum(np.searchsorted(cdf, u, side="right"), n - 1).astype(np.int64)

    def rng(self, epoch: int, batch: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.sampler.seed, NEG_PURPOSE, epoch, batch])))

    def sample(self, src: Any, dst: Any, *, epoch: int = 0, batch: int = 0, edge_label: Any = None,
               src_weight: Optional[np.ndarray] = None, dst_weight: Optional[np.ndarray] = None) -> LinkBatch:
        """Sample link batch ``batch`` of epoch ``epoch`` for the positive pairs ``(src[i], dst[i])``."""
        src = np.ascontiguousarray(src, dtype=np.int64).reshape(-1)
        dst = np.ascontiguousarray(dst, dtype=np.int64).reshape(-1)
        if src.shape != dst.shape:
            raise InputError(f"a link batch needs as many sources as destinations (got {src.size} and {dst.size})")
        n = self.sampler.dataset.num_nodes
        for name, a in (("source", src), ("destination", dst)):
            if a.size and (a.min() < 0 or a.max() >= n):
                bad = a[(a < 0) | (a >= n)][0]
                raise InputError(f"link batch {name} {bad} is not a node: the dataset has {n:,} nodes")
        num_pos = src.size
        ns = self.neg_sampling
        label = None
        if ns is not None and ns.mode == "binary":
            num_neg = math.ceil(num_pos * ns.amount)
            rng = self.rng(epoch, batch)
            src_neg = self.negatives(num_neg, rng, src_weight)
            dst_neg = self.negatives(num_neg, rng, dst_weight)
            src = np.concatenate([src, src_neg])
            dst = np.concatenate([dst, dst_neg])
            pos_label = np.ones(num_pos, np.float32) if edge_label is None else np.asarray(edge_label, np.float32).reshape(num_pos)
            label = np.concatenate([pos_label, np.zeros(num_neg, np.float32)])
        elif ns is not None:
            amount = int(ns.amount)
            dst_neg = self.negatives(num_pos * amount, self.rng(epoch, batch), dst_weight)
            dst = np.concatenate([dst, dst_neg])
            if edge_label is not None:
                raise InputError("triplet negative sampling takes no edge labels")
        elif edge_label is not None:
            label = np.asarray(edge_label, np.float32).reshape(num_pos)
        seeds, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        inverse = inverse.reshape(-1)
        sample = self.sampler.sample(seeds, epoch=epoch, batch=batch)
        if ns is None or ns.mode == "binary":
            return LinkBatch(sample, num_pos, edge_label_index=inverse.reshape(2, -1), edge_label=label)
        neg = inverse[2 * num_pos:].reshape(num_pos, -1)
        return LinkBatch(sample, num_pos, src_index=inverse[:num_pos], dst_pos_index=inverse[num_pos:2 * num_pos],
                         dst_neg_index=neg[:, 0] if neg.shape[1] == 1 else neg)
