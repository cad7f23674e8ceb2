"""The pairs of link batches before sampling, for both kinds of dataset: negatives (as PyG's
``LinkNeighborLoader``), seeds and positions, an epoch's order, and their times
(docs/ARCHITECTURE.md, "Link prediction")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _options
from .._core import InputError
from ..data.generate import Feistel
from ..data.schema import HOMOGENEOUS_TYPE, parse_edge_type
from .sampler import SampledSubgraph

#: The numpy ``SeedSequence`` purpose word of negative sampling ("lneg" in ASCII).
NEG_PURPOSE = 0x6C6E6567
#: The purpose word of a link epoch's order of its pairs ("lshf").
SHUFFLE_PURPOSE = 0x6C736866
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
            raise InputError("triplet negative sampling needs a whole number of negatives per positive "
                             f"(got {self.amount})")


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
    time: Optional[np.ndarray] = None
    """At times: :attr:`Pairs.time` (each pair's time; of the positives in the triplet layout)."""


class Shuffle(Feistel):
    """A pseudo-random permutation of ``range(n)`` keyed by ``key`` (e.g. seed and epoch), in
    O(1) memory: position ``i`` of the order is ``perm(i)`` (int64 arrays), computed when asked
    for. A 4-round :class:`ringgnn.data.generate.Feistel`: a bijection."""

    ROUNDS = 4

    def __init__(self, n: int, key: Sequence[int]):
        super().__init__(n, max(1, (max(int(n) - 1, 1).bit_length() + 1) // 2),
                         np.random.SeedSequence(list(key)).generate_state(self.ROUNDS, dtype=np.uint64))

    __call__ = Feistel.forward


@dataclass
class Pairs:
    """A link batch's pairs before sampling: its seed nodes (sorted unique endpoints; of two
    types, the sources' then the destinations', ``split`` of them sources) and where each
    endpoint is among them."""

    seeds: Optional[np.ndarray]
    inverse: np.ndarray
    num_pos: int
    triplet: bool
    label: Optional[np.ndarray] = None
    positions: Optional[np.ndarray] = None
    """Where the positives are in the epoch's pairs (``input_id``), when they come from one."""
    split: Optional[int] = None
    seed_time: Optional[np.ndarray] = None
    """At times: the time each seed is sampled at (parallel to ``seeds``); None otherwise."""
    time: Optional[np.ndarray] = None
    """At times: each pair's time (PyG's ``edge_label_time``: of ``edge_label_index``'s pairs, or of
    the positives in the triplet layout)."""

    def typed_seeds(self, types: Tuple[str, str]) -> Dict[str, np.ndarray]:
        """The seeds per node type of a typed relation's ``(source, destination)`` types."""
        return self._typed(self.seeds, types)

    def typed_times(self, types: Tuple[str, str]) -> Optional[List[np.ndarray]]:
        """The seeds' times parallel to :meth:`typed_seeds`' lists, or None without times."""
        return None if self.seed_time is None else list(self._typed(self.seed_time, types).values())

    def _typed(self, a: np.ndarray, types: Tuple[str, str]) -> Dict[str, np.ndarray]:
        if self.split is None:
            return {types[0]: a}
        return {types[0]: a[:self.split], types[1]: a[self.split:]}

    def batch(self, sample: Any) -> LinkBatch:
        """The :class:`LinkBatch` of these pairs over ``sample``, the node sample of :attr:`seeds`."""
        if not self.triplet:
            return LinkBatch(sample, self.num_pos, edge_label_index=self.inverse.reshape(2, -1), edge_label=self.label,
                             time=self.time)
        n = self.num_pos
        neg = self.inverse[2 * n:].reshape(n, -1)
        return LinkBatch(sample, n, src_index=self.inverse[:n], dst_pos_index=self.inverse[n:2 * n],
                         dst_neg_index=neg[:, 0] if neg.shape[1] == 1 else neg, time=self.time)

    def put(self, store: Any) -> None:
        """Set the pairs on ``store`` (a PyG ``Data``, or a ``HeteroData``'s relation) as PyG's
        ``LinkNeighborLoader`` does: ``input_id``, ``edge_label_index`` and ``edge_label``, or
        ``src_index``/``dst_pos_index``/``dst_neg_index``; at times ``edge_label_time``."""
        import torch

        lb = self.batch(None)
        store.input_id = torch.from_numpy(np.ascontiguousarray(self.positions, dtype=np.int64))
        if self.time is not None:
            store.edge_label_time = torch.from_numpy(self.time)
        if lb.edge_label_index is not None:
            store.edge_label_index = torch.from_numpy(np.ascontiguousarray(lb.edge_label_index, dtype=np.int64))
            if lb.edge_label is not None:
                store.edge_label = torch.from_numpy(lb.edge_label)
        else:
            store.src_index = torch.from_numpy(lb.src_index)
            store.dst_pos_index = torch.from_numpy(lb.dst_pos_index)
            store.dst_neg_index = torch.from_numpy(np.ascontiguousarray(lb.dst_neg_index))


class LinkPairs:
    """Turns the positive pairs of a link batch into its seeds, drawing its negatives from the
    (seed, epoch, batch) stream. ``types``: a typed relation's (source, destination) node types,
    each end's ids and negatives in its own type (None: a homogeneous dataset's one type)."""

    def __init__(self, dataset: Any, seed: int, neg_sampling: Optional[NegativeSampling] = None,
                 types: Optional[Tuple[str, str]] = None):
        self.dataset = dataset
        self.seed = seed
        self.neg_sampling = neg_sampling
        self.types = types
        self._ends = types or (HOMOGENEOUS_TYPE, HOMOGENEOUS_TYPE)
        self.counts = (dataset.num_nodes_dict[self._ends[0]], dataset.num_nodes_dict[self._ends[1]])
        self._cdf: Dict[str, np.ndarray] = {}
        self._time_order: Dict[str, Optional[Tuple[np.ndarray, np.ndarray]]] = {}

    def degrees(self, side: int) -> np.ndarray:
        """The in-degree of every node of an end's type, in the relations that enter the type."""
        deg = np.zeros(self.counts[side], np.int64)
        for r in self.dataset.relations:
            if parse_edge_type(r)[2] == self._ends[side]:
                deg += self.dataset.relation(r).degrees()
        return deg

    def _weights_cdf(self, side: int) -> np.ndarray:
        key = self._ends[side]
        if key not in self._cdf:
            w = self.degrees(side).astype(np.float64) ** 0.75
            cdf = np.cumsum(w)
            if cdf.size == 0 or cdf[-1] <= 0:
                raise InputError("negative sampling by degree needs a graph with edges; use weight='uniform'")
            self._cdf[key] = cdf
        return self._cdf[key]

    def negatives(self, count: int, rng: np.random.Generator, weight: Optional[np.ndarray] = None,
                  side: int = 0, at: Optional[np.ndarray] = None) -> np.ndarray:
        """``count`` random node ids of the source end's type (``side`` 0) or the destination's (1)
        by the configured weighting (or by ``weight``, one value per node, as PyG's
        ``src_weight``/``dst_weight``); ``at`` (one time per draw): where the type has node times,
        each draw among the nodes not newer than its time."""
        n = self.counts[side]
        cdf: Optional[np.ndarray] = None
        if weight is not None:
            cdf = np.cumsum(np.asarray(weight, dtype=np.float64))
            if cdf.size != n or not cdf[-1] > 0:
                raise InputError(f"a negative-sampling weight needs one non-negative value per node ({n}) and a "
                                 "positive sum")
        elif self.neg_sampling is not None and self.neg_sampling.weight == "degree":
            cdf = self._weights_cdf(side)
        timed = None if at is None else self._by_time(side)
        if timed is not None:
            return self._negatives_before(count, rng, cdf, timed, at)
        if cdf is None:
            return rng.integers(0, n, size=count, dtype=np.int64)
        u = rng.random(count) * cdf[-1]
        return np.minimum(np.searchsorted(cdf, u, side="right"), n - 1).astype(np.int64)

    def _by_time(self, side: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(the end's node ids in (time, id) order, their times), or None without node times."""
        key = self._ends[side]
        if key not in self._time_order:
            times = self.dataset.node_type(key).node_times()
            order = None if times is None else np.argsort(times, kind="stable")
            self._time_order[key] = None if order is None else (order, np.asarray(times)[order])
        return self._time_order[key]

    @staticmethod
    def _negatives_before(count: int, rng: np.random.Generator, cdf: Optional[np.ndarray],
                          timed: Tuple[np.ndarray, np.ndarray], at: np.ndarray) -> np.ndarray:
        """:meth:`negatives` among the nodes not newer than ``at`` (per draw): a prefix of the
        nodes in time order, drawn by the weights (``cdf``, None: uniform)."""
        order, times = timed
        eligible = np.maximum(np.searchsorted(times, at, side="right"), 1)
        if cdf is None:
            i = (rng.random(count) * eligible).astype(np.int64)
        else:
            c = np.cumsum(np.diff(cdf, prepend=0.0)[order])
            i = np.searchsorted(c, rng.random(count) * c[eligible - 1], side="right")
        return order[np.minimum(i, eligible - 1)].astype(np.int64)

    def rng(self, epoch: int, batch: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, NEG_PURPOSE, epoch, batch])))

    def _nodes(self, side: int) -> str:
        n = self.counts[side]
        where = "the dataset" if self.types is None else f"node type '{self.types[side]}'"
        return f"{where} has {n:,} nodes"

    def pairs(self, src: Any, dst: Any, *, epoch: int = 0, batch: int = 0, edge_label: Any = None,
              src_weight: Optional[np.ndarray] = None, dst_weight: Optional[np.ndarray] = None,
              fixed: Optional[np.ndarray] = None, time: Any = None) -> Pairs:
        """The :class:`Pairs` of link batch ``batch`` of epoch ``epoch`` for the positive pairs
        ``(src[i], dst[i])``; ``fixed``, an ``(n, K)`` array of destinations, replaces the drawn
        negatives (triplet layout); ``time``: each pair's time, at which it is sampled."""
        src = np.ascontiguousarray(src, dtype=np.int64).reshape(-1)
        dst = np.ascontiguousarray(dst, dtype=np.int64).reshape(-1)
        if src.shape != dst.shape:
            raise InputError(f"a link batch needs as many sources as destinations (got {src.size} and {dst.size})")
        for side, name, a in ((0, "source", src), (1, "destination", dst)):
            n = self.counts[side]
            if a.size and (a.min() < 0 or a.max() >= n):
                bad = a[(a < 0) | (a >= n)][0]
                raise InputError(f"link batch {name} {bad} is not a node: {self._nodes(side)}")
        num_pos = src.size
        ns = self.neg_sampling
        label = None
        at = None if time is None else _options.seed_times(time, num_pos, "edge_label_time")
        if at is not None and at.size and at.min() == np.iinfo(np.int64).min:
            raise InputError("edge_label_time: a pair at the smallest int64 time has no time before it to be "
                             "sampled at")
        # Each endpoint's pair time (and each negative's, its positive's), as ends are added.
        src_at = dst_at = at
        triplet = fixed is not None or (ns is not None and ns.mode == "triplet")
        if fixed is not None:
            fixed = np.asarray(fixed, dtype=np.int64)
            if fixed.ndim != 2 or fixed.shape[0] != num_pos or fixed.shape[1] < 1:
                raise InputError(f"fixed negatives need shape (pairs, K) = ({num_pos}, K >= 1), got {fixed.shape}")
            if fixed.size and (fixed.min() < 0 or fixed.max() >= self.counts[1]):
                raise InputError(f"a fixed negative is not a node: {self._nodes(1)}")
            if edge_label is not None:
                raise InputError("fixed negatives take no edge labels")
            dst = np.concatenate([dst, fixed.reshape(-1)])
            dst_at = None if at is None else np.concatenate([at, np.repeat(at, fixed.shape[1])])
        elif ns is not None and ns.mode == "binary":
            num_neg = math.ceil(num_pos * ns.amount)
            rng = self.rng(epoch, batch)
            neg_at = None if at is None or not num_pos else at[np.arange(num_neg) % num_pos]
            src_neg = self.negatives(num_neg, rng, src_weight, at=neg_at)
            dst_neg = self.negatives(num_neg, rng, dst_weight, side=1, at=neg_at)
            src = np.concatenate([src, src_neg])
            dst = np.concatenate([dst, dst_neg])
            if at is not None:
                src_at = dst_at = np.concatenate([at, neg_at])
            pos_label = (np.ones(num_pos, np.float32) if edge_label is None
                         else np.asarray(edge_label, np.float32).reshape(num_pos))
            label = np.concatenate([pos_label, np.zeros(num_neg, np.float32)])
        elif ns is not None:
            amount = int(ns.amount)
            neg_at = None if at is None else np.repeat(at, amount)
            dst_neg = self.negatives(num_pos * amount, self.rng(epoch, batch), dst_weight, side=1, at=neg_at)
            dst = np.concatenate([dst, dst_neg])
            dst_at = None if at is None else np.concatenate([at, neg_at])
            if edge_label is not None:
                raise InputError("triplet negative sampling takes no edge labels")
        elif edge_label is not None:
            label = np.asarray(edge_label, np.float32).reshape(num_pos)
        # Seeds: the distinct ends (at times, (node, time) ends sampled a tick before the pair, in
        # (time, node) order); of two node types, each end's in its own id space.
        src_t, dst_t = (None, None) if at is None else (src_at - 1, dst_at - 1)
        time = None if at is None else src_at[:num_pos] if triplet else src_at
        if self._ends[0] == self._ends[1]:
            seeds, seed_time, inverse = _distinct(np.concatenate([src, dst]),
                                                  None if at is None else np.concatenate([src_t, dst_t]))
            return Pairs(seeds, inverse, num_pos, triplet, label, seed_time=seed_time, time=time)
        (us, ts, si), (ud, td, di) = _distinct(src, src_t), _distinct(dst, dst_t)
        return Pairs(np.concatenate([us, ud]), np.concatenate([si, di]), num_pos, triplet, label, split=len(us),
                     seed_time=None if at is None else np.concatenate([ts, td]), time=time)

    def most_seeds(self, pairs: int, fixed_k: int = 0, timed: bool = False) -> int:
        """The most seed nodes a batch of ``pairs`` positives can have (what a memory plan is
        made for); ``timed``: at times, where a node may be a seed once per time."""
        ns = self.neg_sampling
        cap = math.inf if timed else self.dataset.num_nodes
        if fixed_k:
            per = 2 + fixed_k
        elif ns is None:
            per = 2
        elif ns.mode == "binary":
            return int(min(cap, 2 * (pairs + math.ceil(pairs * ns.amount))))
        else:
            per = 2 + int(ns.amount)
        return int(max(1, min(cap, per * pairs)))


def _distinct(ids: np.ndarray, times: Optional[np.ndarray]) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray]:
    """:func:`distinct_at`, or without times the distinct ids (ascending), None and the inverse."""
    if times is not None:
        return distinct_at(ids, times)
    u, inverse = np.unique(ids, return_inverse=True)
    return u, None, inverse.reshape(-1)


def distinct_at(ids: np.ndarray, times: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct (id, time) pairs' ids and times, in (time, id) order; where each input is
    among them)."""
    order = np.lexsort((ids, times))
    i, t = ids[order], times[order]
    new = np.ones(len(i), bool)
    new[1:] = (i[1:] != i[:-1]) | (t[1:] != t[:-1])
    inverse = np.empty(len(i), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return i[new], t[new], inverse
