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

:class:`LinkPairs` makes a batch's seeds from its pairs (one place, for both drivers);
:class:`LinkSampler` samples one batch at a time (PyG's ``LinkLoader`` drives it through
:meth:`ringgnn.pyg.RingNeighborSampler.sample_from_edges`); :class:`LinkLoader` runs whole epochs
of link batches through the Rust loader (threads, hyperbatches, spill, feature rows gathered,
one memory budget) and gives the same batches as :class:`LinkSampler`. Evaluation batches take
*fixed* negatives instead (``negatives=``: a dataset's stored ``(n, K)`` candidates), in the
triplet layout. :class:`HeteroLinkBatches` is the same batcher over one relation ``S:R:D`` of a
typed dataset (PyG's ``LinkNeighborLoader`` on ``HeteroData``): each end's ids and negatives are
of its own node type, and each type's distinct endpoints seed one typed sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from ..data.dataset import Dataset, PathLike, open_homogeneous
from ..data.schema import parse_edge_type
from . import hyper as hetero_hyper
from .hetero import HeteroLoader, HeteroNeighborSampler
from .loader import Loader
from .sampler import NeighborSampler, SampledSubgraph

#: The numpy ``SeedSequence`` purpose word of negative sampling ("lneg" in ASCII).
NEG_PURPOSE = 0x6C6E6567
#: The purpose word of a link epoch's order of its pairs ("lshf").
SHUFFLE_PURPOSE = 0x6C736866
#: Bytes of seed lists a link epoch makes and hands the Rust core at a time (a *window* of
#: batches: their seeds in Python and the core's copy, and each batch's endpoint positions, 24
#: bytes a seed): the only per-batch state Python holds, counted in the memory plan's reserve.
#: It also bounds a hyperbatch (one window at most).
WINDOW_BYTES = 32 << 20
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


_M64 = np.uint64((1 << 64) - 1)


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Shuffle:
    """A pseudo-random permutation of ``range(n)`` keyed by ``key`` (e.g. seed and epoch), in
    O(1) memory: position ``i`` of the order is ``perm(i)``, computed when asked for, so an
    epoch over billions of pairs holds no permutation array. ``perm`` is a 4-round balanced
    Feistel network over ``2h`` bits (``4^h >= n``, round function SplitMix64 of the half and a
    round key), cycle-walked into ``[0, n)``: a bijection, so every pair comes once an epoch."""

    ROUNDS = 4

    def __init__(self, n: int, key: Sequence[int]):
        self.n = int(n)
        self.half = max(1, (max(self.n - 1, 1).bit_length() + 1) // 2)
        self.mask = np.uint64((1 << self.half) - 1)
        ss = np.random.SeedSequence(list(key))
        self.keys = [np.uint64(k) for k in ss.generate_state(self.ROUNDS, dtype=np.uint64)]

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self.half)
        left, right = x >> h, x & self.mask
        with np.errstate(over="ignore"):
            for k in self.keys:
                left, right = right, left ^ (_mix64(right ^ k) & self.mask)
        return (left << h) | right

    def __call__(self, i: np.ndarray) -> np.ndarray:
        """``perm(i)`` for an array of positions in ``[0, n)``, as int64."""
        x = self._feistel(np.asarray(i, dtype=np.uint64))
        out = x >= np.uint64(self.n)
        while out.any():  # cycle walking: at most a few steps (4^h < 4n)
            x[out] = self._feistel(x[out])
            out = x >= np.uint64(self.n)
        return x.astype(np.int64)


@dataclass
class Pairs:
    """A link batch's pairs, before sampling: its seed nodes (sorted unique endpoints; of two
    types, the sources' then the destinations', ``split`` of them sources) and where each
    endpoint is among them (among its type's)."""

    seeds: Optional[np.ndarray]
    inverse: np.ndarray
    num_pos: int
    triplet: bool
    label: Optional[np.ndarray] = None
    positions: Optional[np.ndarray] = None
    """Where the positives are in the epoch's pairs (``input_id``), when they come from one."""
    split: Optional[int] = None

    def typed_seeds(self, types: Tuple[str, str]) -> Dict[str, np.ndarray]:
        """The seeds per node type of a typed relation's ``(source, destination)`` types."""
        if self.split is None:
            return {types[0]: self.seeds}
        return {types[0]: self.seeds[:self.split], types[1]: self.seeds[self.split:]}

    def batch(self, sample: Any) -> LinkBatch:
        """The :class:`LinkBatch` of these pairs over ``sample``, the node sample of :attr:`seeds`."""
        if not self.triplet:
            return LinkBatch(sample, self.num_pos, edge_label_index=self.inverse.reshape(2, -1), edge_label=self.label)
        n = self.num_pos
        neg = self.inverse[2 * n:].reshape(n, -1)
        return LinkBatch(sample, n, src_index=self.inverse[:n], dst_pos_index=self.inverse[n:2 * n],
                         dst_neg_index=neg[:, 0] if neg.shape[1] == 1 else neg)

    def put(self, store: Any) -> None:
        """Set the pairs on ``store`` (a PyG ``Data``, or a ``HeteroData``'s relation) as PyG's
        ``LinkNeighborLoader`` does: ``input_id``, ``edge_label_index`` and ``edge_label``, or
        ``src_index``/``dst_pos_index``/``dst_neg_index``."""
        import torch  # the batches of PyG's types: torch only where they are made

        lb = self.batch(None)
        store.input_id = torch.from_numpy(np.ascontiguousarray(self.positions, dtype=np.int64))
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
    (seed, epoch, batch) stream: what :class:`LinkSampler`, :class:`LinkLoader` and
    :class:`HeteroLinkBatches` share. ``types``: a typed dataset's relation's (source,
    destination) node types, each end's ids and negatives in its own type (None: the one type
    of a homogeneous dataset)."""

    def __init__(self, dataset: Any, seed: int, neg_sampling: Optional[NegativeSampling] = None,
                 types: Optional[Tuple[str, str]] = None):
        self.dataset = dataset
        self.seed = seed
        self.neg_sampling = neg_sampling
        self.types = types
        n = dataset.num_nodes
        self.counts = (n, n) if types is None else (dataset.num_nodes_dict[types[0]], dataset.num_nodes_dict[types[1]])
        self._cdf: Optional[np.ndarray] = None

    def _weights_cdf(self) -> np.ndarray:
        if self._cdf is None:
            if self.types is not None:
                raise InputError("negative sampling by degree is for homogeneous datasets (a typed relation's ends "
                                 "are drawn uniformly over their node types); use weight='uniform'")
            w = self.dataset.degrees().astype(np.float64) ** 0.75
            cdf = np.cumsum(w)
            if cdf.size == 0 or cdf[-1] <= 0:
                raise InputError("negative sampling by degree needs a graph with edges; use weight='uniform'")
            self._cdf = cdf
        return self._cdf

    def negatives(self, count: int, rng: np.random.Generator, weight: Optional[np.ndarray] = None,
                  side: int = 0) -> np.ndarray:
        """``count`` random node ids (of the source end's type, ``side`` 0, or the destination's,
        1) by the configured weighting (or by ``weight``, one non-negative value per node, as
        PyG's ``src_weight``/``dst_weight``)."""
        n = self.counts[side]
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
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, NEG_PURPOSE, epoch, batch])))

    def _nodes(self, side: int) -> str:
        n = self.counts[side]
        where = "the dataset" if self.types is None else f"node type '{self.types[side]}'"
        return f"{where} has {n:,} nodes"

    def pairs(self, src: Any, dst: Any, *, epoch: int = 0, batch: int = 0, edge_label: Any = None,
              src_weight: Optional[np.ndarray] = None, dst_weight: Optional[np.ndarray] = None,
              fixed: Optional[np.ndarray] = None) -> Pairs:
        """The :class:`Pairs` of link batch ``batch`` of epoch ``epoch`` for the positive pairs
        ``(src[i], dst[i])``; ``fixed``, an ``(n, K)`` array of destinations, replaces the drawn
        negatives (triplet layout: evaluation against stored candidates)."""
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
        elif ns is not None and ns.mode == "binary":
            num_neg = math.ceil(num_pos * ns.amount)
            rng = self.rng(epoch, batch)
            src_neg = self.negatives(num_neg, rng, src_weight)
            dst_neg = self.negatives(num_neg, rng, dst_weight, side=1)
            src = np.concatenate([src, src_neg])
            dst = np.concatenate([dst, dst_neg])
            pos_label = np.ones(num_pos, np.float32) if edge_label is None else np.asarray(edge_label, np.float32).reshape(num_pos)
            label = np.concatenate([pos_label, np.zeros(num_neg, np.float32)])
        elif ns is not None:
            amount = int(ns.amount)
            dst_neg = self.negatives(num_pos * amount, self.rng(epoch, batch), dst_weight, side=1)
            dst = np.concatenate([dst, dst_neg])
            if edge_label is not None:
                raise InputError("triplet negative sampling takes no edge labels")
        elif edge_label is not None:
            label = np.asarray(edge_label, np.float32).reshape(num_pos)
        if self.types is None or self.types[0] == self.types[1]:
            seeds, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
            return Pairs(seeds, inverse.reshape(-1), num_pos, triplet, label)
        # Two node types: each end's distinct ids in its own id space.
        (us, si), (ud, di) = (np.unique(a, return_inverse=True) for a in (src, dst))
        return Pairs(np.concatenate([us, ud]), np.concatenate([si.reshape(-1), di.reshape(-1)]), num_pos, triplet,
                     label, split=len(us))

    def most_seeds(self, pairs: int, fixed_k: int = 0) -> int:
        """The most seed nodes a batch of ``pairs`` positives can have (what a memory plan is
        made for)."""
        ns = self.neg_sampling
        if fixed_k:
            per = 2 + fixed_k
        elif ns is None:
            per = 2
        elif ns.mode == "binary":
            return min(self.dataset.num_nodes, 2 * (pairs + math.ceil(pairs * ns.amount)))
        else:
            per = 2 + int(ns.amount)
        return max(1, min(self.dataset.num_nodes, per * pairs))


class LinkSampler(LinkPairs):
    """Link batches over a :class:`NeighborSampler` (its dataset, fanouts, backend and seed)."""

    def __init__(self, sampler: NeighborSampler, neg_sampling: Optional[NegativeSampling] = None):
        super().__init__(sampler.dataset, sampler.seed, neg_sampling)
        self.sampler = sampler

    def sample(self, src: Any, dst: Any, *, epoch: int = 0, batch: int = 0, edge_label: Any = None,
               src_weight: Optional[np.ndarray] = None, dst_weight: Optional[np.ndarray] = None,
               fixed: Optional[np.ndarray] = None) -> LinkBatch:
        """Sample link batch ``batch`` of epoch ``epoch`` for the positive pairs ``(src[i], dst[i])``."""
        p = self.pairs(src, dst, epoch=epoch, batch=batch, edge_label=edge_label, src_weight=src_weight,
                       dst_weight=dst_weight, fixed=fixed)
        return p.batch(self.sampler.sample(p.seeds, epoch=epoch, batch=batch))

    def epoch(self, edges: Union[str, Any] = "train", batch_size: int = 1024, *, epoch: int = 0,
              shuffle: bool = True, drop_last: bool = False, batches: Optional[Sequence[int]] = None,
              negatives: Optional[Any] = None, window: Optional[int] = None) -> Iterator[Tuple[int, LinkBatch]]:
        """``(batch index, LinkBatch)`` for the batches of one epoch over ``edges`` (see
        :class:`LinkBatches`), sampled ahead by the core sampler's threads (hyperbatches
        included when the neighbor file is on disk): each exactly :meth:`sample` of its pairs.
        Make the :class:`NeighborSampler` with ``batch_size`` = the most seeds of a batch
        (:meth:`LinkPairs.most_seeds`) so that its memory plan holds one."""
        lb = LinkBatches(self.dataset, self, batch_size, edges, negatives=negatives, shuffle=shuffle,
                         drop_last=drop_last, batches=batches, window=window, backend=self.sampler.backend_choice,
                         direct=self.sampler.direct)
        if self.sampler._core is None and self.sampler.reserve is None:
            # The window's seed lists are held besides the sampler: reserve them in its plan.
            self.sampler.reserve = _options.process_rss() + WINDOW_BYTES
        for made, it in lb.windows(_options.count(epoch, "epoch"), self.sampler._sampler()):
            for index, _seeds, out in it:
                yield int(index), made[int(index)].batch(SampledSubgraph._from_core(out))


def edge_pairs(dataset: Dataset, edges: Union[str, Any], what: str = "edges",
               counts: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """Pairs as a (2, n) int64 array: an edge split's name, a ``.npy`` file or an array of shape
    (2, n) or (n, 2) (a (2, 2) array is read as (2, n): rows are sources and destinations).
    ``counts``: the nodes of the source and destination ends (a typed relation's two types;
    default ``dataset.num_nodes`` both)."""
    if isinstance(edges, (str, os.PathLike)):
        spec = os.fspath(edges)
        if spec in dataset.edge_split_names:
            return dataset.edge_split(spec)
        if not spec.endswith(".npy"):
            have = ", ".join(dataset.edge_split_names) or "none: convert with --link-split"
            raise InputError(f"{what} '{spec}': not an edge split of {dataset.path} (it has: {have}) nor a .npy file")
        try:
            edges = np.load(spec, allow_pickle=False)
        except ValueError as e:
            raise InputError(f"{what} {spec}: not a .npy array of pairs ({e})") from None
        what = f"{what} {spec}"
    if hasattr(edges, "detach"):
        edges = edges.detach().cpu().numpy()
    a = np.asarray(edges)
    if a.ndim != 2 or 2 not in a.shape:
        raise InputError(f"{what}: pairs need shape (2, n) or (n, 2), got {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{what}: node ids must be integers, got {a.dtype}")
    if a.shape[0] != 2:
        a = a.T
    a = np.ascontiguousarray(a, dtype=np.int64)
    for row, n in zip(a, counts or (dataset.num_nodes,) * 2):
        if row.size and (row.min() < 0 or row.max() >= n):
            bad = row[(row < 0) | (row >= n)][0]
            raise InputError(f"{what}: node {bad} is not a node of {dataset.path} ({n:,} nodes)")
    return a


class LinkBatches:
    """The pairs side of epochs of link batches, shared by :meth:`LinkSampler.epoch` and
    :class:`LinkLoader`: ``batch_size`` positive pairs of ``edges`` per batch (an edge split's
    name, read from its file through a map as batches need them, or pairs), in an order
    shuffled by (seed, epoch) (:class:`Shuffle`: no permutation is held), with negatives drawn
    by ``pairs`` or fixed (``negatives``, an ``(n, K)`` array of destinations per pair); and
    the windows of seed lists handed to the Rust core, as many batches at a time as
    ``WINDOW_BYTES`` holds (``window``: fewer). ``dataset``: where the pairs are (a typed
    dataset's relation, for :class:`HeteroLinkBatches`); ``file_order``: a batch's positives in
    the order of the file (ascending positions), not the epoch's."""

    def __init__(self, dataset: Dataset, pairs: LinkPairs, batch_size: int, edges: Union[str, Any] = "train", *,
                 negatives: Optional[Any] = None, edge_label: Any = None, shuffle: bool = True,
                 drop_last: bool = False, batches: Optional[Sequence[int]] = None, window: Optional[int] = None,
                 backend: str = "auto", direct: bool = False, file_order: bool = False):
        self.dataset = dataset
        self.pairs = pairs
        self.file_order = bool(file_order)
        stored = isinstance(edges, str) and edges in dataset.edge_split_names
        self.edges = dataset.edge_split(edges, mmap=True) if stored else edge_pairs(dataset, edges,
                                                                                     counts=pairs.counts)
        # A stored split's pairs are read with the project's page-coalesced reader (io_uring, many
        # reads in flight; O_DIRECT with `direct`), not by faulting the map a page at a time:
        # a batch's pairs lie on as many random pages as it has pairs.
        self._pair_file = dataset.edge_split_file(edges) if stored else None
        self._pair_io = ("pread" if backend == "pread" else "auto", bool(direct))
        self._reader: Any = None
        self._reader_pid: Optional[int] = None
        self.batch_size = _options.count(batch_size, "batch_size", 1)
        if negatives is not None and pairs.neg_sampling is not None:
            raise InputError("give negatives (fixed candidates) or neg_sampling (drawn), not both")
        self.negatives = None
        if negatives is not None:
            self.negatives = negatives if isinstance(negatives, np.ndarray) else np.asarray(negatives, dtype=np.int64)
            if self.negatives.ndim != 2 or self.negatives.shape[0] != self.edges.shape[1]:
                raise InputError(f"negatives need one row per pair: shape ({self.edges.shape[1]}, K), "
                                 f"got {self.negatives.shape}")
        self.edge_label = None if edge_label is None else np.asarray(edge_label, np.float32).reshape(-1)
        if self.edge_label is not None and self.edge_label.size != self.edges.shape[1]:
            raise InputError(f"edge_label needs one value per pair ({self.edges.shape[1]}), got {self.edge_label.size}")
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.batches = None if batches is None else [_options.count(b, "batch") for b in batches]
        # Batches per window: what WINDOW_BYTES holds (or fewer, when asked).
        most = self.window_batches = max(1, WINDOW_BYTES // (24 * self.most_seeds()))
        self.window = most if window is None else min(most, _options.count(window, "window", 1))

    def most_seeds(self) -> int:
        """The most seed nodes of one batch (what a memory plan is made for)."""
        return self.pairs.most_seeds(self.batch_size, 0 if self.negatives is None else self.negatives.shape[1])

    def __len__(self) -> int:
        if self.batches is not None:
            return len(self.batches)
        n = self.edges.shape[1]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def positions(self, epoch: int, start: int, stop: int) -> np.ndarray:
        """Positions in ``edges`` of the epoch's pairs ``start`` to ``stop`` (in batch order):
        a :class:`Shuffle` keyed by (seed, epoch), or the identity without ``shuffle``."""
        i = np.arange(start, min(stop, self.edges.shape[1]), dtype=np.int64)
        if not self.shuffle:
            return i
        return Shuffle(self.edges.shape[1], [self.pairs.seed, SHUFFLE_PURPOSE, epoch])(i)

    def batch_positions(self, epoch: int, b: int) -> np.ndarray:
        """Positions in ``edges`` of the positives of batch ``b`` of epoch ``epoch``."""
        return self.positions(epoch, b * self.batch_size, (b + 1) * self.batch_size)

    def batch_pairs(self, epoch: int, b: int) -> Pairs:
        """The :class:`Pairs` of batch ``b`` of epoch ``epoch``."""
        pos = self.batch_positions(epoch, b)
        if self.file_order:
            pos = np.sort(pos)
        # Read in file order (a mapped split: ascending pages), then put back in batch order.
        order = np.argsort(pos, kind="stable")
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        src, dst = self.read_pairs(pos[order])[:, inv]
        label = None if self.edge_label is None else self.edge_label[pos]
        fixed = None if self.negatives is None else np.asarray(self.negatives[pos[order]])[inv]
        p = self.pairs.pairs(src, dst, epoch=epoch, batch=b, edge_label=label, fixed=fixed)
        p.positions = pos
        return p

    def read_pairs(self, positions: np.ndarray) -> np.ndarray:
        """The pairs at ``positions`` (ascending) of ``edges``, as a (2, m) int64 array."""
        if self._pair_file is None or not len(positions):
            return np.asarray(self.edges[:, positions])
        if self._reader is None or self._reader_pid != os.getpid():  # a reader's ring is per process
            path, rows = self._pair_file
            # 16-byte rows, 256 to a page: exactly the feature-file layout of 4 float32 columns,
            # so the feature reader reads them; the bytes come back untouched and are viewed as
            # the int64 pairs they are.
            self._reader = _core.FeatureReader.matrix(path, rows, 4, backend=self._pair_io[0],
                                                      direct=self._pair_io[1])
            self._reader_pid = os.getpid()
        return self._reader.gather(positions).view("<i8").T

    def windows(self, epoch: int, core: Any) -> Iterator[Tuple[Dict[int, Pairs], Any]]:
        """For each window of the epoch's batches: their :class:`Pairs` by batch index and the
        epoch of ``core`` (a Rust sampler or loader) started over their seed lists."""
        wanted = list(range(len(self))) if self.batches is None else self.batches
        for w in range(0, len(wanted), self.window):
            chosen = wanted[w:w + self.window]
            made = {b: self.batch_pairs(epoch, b) for b in dict.fromkeys(chosen)}
            sizes = [len(made[b].seeds) for b in chosen]
            seeds = np.concatenate([made[b].seeds for b in chosen])
            for p in made.values():
                p.seeds = None  # in `seeds` now (and in the core's copy)
            bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
            yield made, core.epoch(seeds, max(1, max(sizes)), shuffle=False, epoch=epoch, bounds=bounds,
                                   indices=[int(b) for b in chosen])


class LinkLoader(LinkBatches):
    """Epochs of link batches as PyG ``Data``, sampled and gathered ahead by the Rust loader.

    Each batch is ``batch_size`` positive pairs of ``edges`` (an edge split's name, default
    ``train``, read from its file as batches need them; or pairs), in an order shuffled by
    (seed, epoch) (:class:`Shuffle`: no permutation is held), plus negatives: sampled
    (``neg_sampling``, as :class:`LinkSampler`) or fixed (``negatives``, an ``(n, K)`` array of
    destinations per pair, e.g. ``dataset.edge_negatives("val")``). The batches are exactly
    :class:`LinkSampler`'s for the same pairs, epoch and batch index, whatever the backend,
    hyperbatch size or threads: a link batch is the node batch of its endpoints, and the loader
    samples that with the (seed, epoch, batch) stream.

    Each ``Data`` has what :class:`ringgnn.Loader` gives (``x``, ``y``, ``edge_index``, ``n_id``,
    ``batch_size`` = the number of seed nodes, ``num_sampled_nodes``/``edges``), ``input_id``
    (positions of the positives in ``edges``), and ``edge_label_index`` with ``edge_label``
    (binary or no negatives) or ``src_index``/``dst_pos_index``/``dst_neg_index`` (triplet or
    fixed negatives), positions in ``n_id``, as PyG's ``LinkNeighborLoader``.

    ``share``: another :class:`LinkLoader` (or :class:`ringgnn.Loader`) of the same dataset and
    fanouts whose engine this one uses. The other keyword arguments are :class:`ringgnn.Loader`'s
    (``memory``, ``cache``, ``backend``, ``hyperbatch`` ...); its memory plan is made for the
    most seed nodes one batch can have, and its reserve counts the seed lists of a window
    (``WINDOW_BYTES``; ``window`` batches at most, when given).
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Union[str, Sequence[int]], batch_size: int, *,
                 edges: Union[str, Any] = "train", neg_sampling: Optional[NegativeSampling] = None,
                 negatives: Optional[Any] = None, edge_label: Any = None, shuffle: bool = True,
                 drop_last: bool = False, batches: Optional[Sequence[int]] = None, seed: int = 0,
                 share: Optional[Any] = None, window: Optional[int] = None, **loader_opts: Any):
        ds = open_homogeneous(dataset, "LinkSampler")
        base = share._loader if isinstance(share, LinkLoader) else share
        if isinstance(share, LinkLoader):
            seed = share.pairs.seed  # one engine, one sampling stream
        super().__init__(ds, LinkPairs(ds, _options.count(seed, "seed"), neg_sampling), batch_size, edges,
                         negatives=negatives, edge_label=edge_label, shuffle=shuffle, drop_last=drop_last,
                         batches=batches, window=window, backend=loader_opts.get("backend", "auto"),
                         direct=loader_opts.get("direct", False))
        # The seeds a look-ahead for the hot-row cache samples from: the endpoints of the
        # first epoch's first batches (bounded, whatever the split's size).
        ends = np.zeros(0, np.int64)
        if base is None:
            look = loader_opts.get("presample_batches", 64) * self.batch_size
            first = self.positions(0, 0, min(look, self.edges.shape[1]))
            ends = np.unique(self.read_pairs(np.sort(first)))
        #: The nodes a look-ahead over this loader's batches starts from (the hot-row cache's,
        #: and a GPU tier's, ``ringgnn.sampling.cuda``): the first batches' endpoints.
        self.seeds = ends
        if base is None:
            # The window's seed lists are held besides the loader: reserve them in its plan.
            loader_opts["reserve"] = _options.reserve(loader_opts.get("reserve")) + WINDOW_BYTES
        self._loader = Loader(ds, fanouts, self.most_seeds(), split=ends, shuffle=False, seed=self.pairs.seed,
                              share=base, **loader_opts)
        self._epoch = 0
        self.last_epoch: Dict[str, float] = {}

    @property
    def _core(self) -> Any:
        return self._loader._core

    @property
    def fanouts(self) -> List[int]:
        return self._loader.fanouts

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next ``iter()``."""
        self._epoch = _options.count(epoch, "epoch")

    def __iter__(self) -> Iterator[Any]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        totals = self._loader._new_totals()
        self.last_epoch = totals
        for made, it in self.windows(epoch, self._core):
            for index, data in self._loader._batches(it, totals):
                made[int(index)].put(data)
                yield data
                del data

    def plan(self) -> Dict[str, Any]:
        return self._loader.plan()

    def stats(self) -> Dict[str, Any]:
        return self._loader.stats()

    @property
    def backend(self) -> str:
        return self._loader.backend

    @property
    def feature_backend(self) -> str:
        return self._loader.feature_backend

    def __repr__(self) -> str:
        return (f"LinkLoader({self.dataset.path!r}, fanouts={self.fanouts}, batch_size={self.batch_size}, "
                f"{self.edges.shape[1]} pairs, backend={self.backend!r})")


class HeteroLinkBatches(LinkBatches):
    """The link batches of relation ``S:R:D`` of a typed dataset, as ``HeteroData``: the pairs
    of :class:`LinkBatches` (``batch_size`` positives of the epoch's keyed order, in file order;
    ``ceil(neg_ratio * n)`` binary negatives, source uniform over ``S`` and destination over
    ``D``, from the (seed, "lneg", epoch, batch) stream), each end's distinct ids seeding one
    typed sample (:meth:`HeteroNeighborSampler.sample_many`; one type when ``S = D``), features
    gathered per type. ``data[S, R, D]`` holds ``edge_label_index`` (positions in ``data[S].n_id``
    and ``data[D].n_id``), ``edge_label`` and ``input_id``, as PyG's ``LinkNeighborLoader``.
    Batches are made on ``threads`` threads, ``prefetch`` ahead; ``hyperbatch``: batches a thread
    samples together from disk (each relation file read once per hop for all of them; ``"auto"``
    sizes H as :class:`ringgnn.HeteroLoader` does); the batches are the same. ``pairs`` (2, n):
    the positives (default the relation's ``train`` split)."""

    def __init__(self, ds: Any, relation: str, sampler: HeteroNeighborSampler, features: Any = None, *,
                 batch_size: int, neg_ratio: float, seed: int, shuffle: bool = True, threads: Optional[int] = None,
                 prefetch: int = 2, pairs: Optional[np.ndarray] = None, hyperbatch: Any = "auto"):
        self.ds, self.relation = ds, ds.check_relation(relation)
        self.edge_type = parse_edge_type(self.relation)
        self.types = (self.edge_type[0], self.edge_type[2])
        link = LinkPairs(ds, int(seed), NegativeSampling("binary", neg_ratio), types=self.types)
        super().__init__(ds.relation(self.relation), link, batch_size, "train" if pairs is None else pairs,
                         shuffle=shuffle, backend=sampler.backend_choice, direct=sampler.direct, file_order=True)
        if features is None:  # the readers (and cache) a loader of this sampler would make
            features = HeteroLoader(ds, sampler.fanouts, self.types[1], seeds=np.arange(1), sampler=sampler).features
        self.sampler, self.features = sampler, features
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self.prefetch = prefetch
        self.feature_types = [t for t, d in ds.feature_dims().items() if d is not None]
        self.hyperbatch = _options.hyperbatch_size(hyperbatch)
        self._hyper: Optional[Tuple[int, str]] = None
        self.epoch = 0

    def epoch_batches(self) -> int:
        """The number of batches of a whole epoch (:attr:`batches`: one rank's share of them)."""
        return -(-self.edges.shape[1] // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = _options.count(epoch, "epoch")

    def batch(self, epoch: int, b: int) -> Any:
        """Batch ``b`` of epoch ``epoch`` as ``HeteroData``."""
        return self.make_batches(epoch, [b])[0]

    def make_batches(self, epoch: int, indices: List[int]) -> List[Any]:
        """Batches ``indices`` of epoch ``epoch`` sampled together (one hyperbatch): each exactly
        :meth:`batch` of its own."""
        made = [self.batch_pairs(epoch, b) for b in indices]
        samples = self.sampler.sample_many([p.typed_seeds(self.types) for p in made], indices, epoch=epoch)
        out = []
        for sample, p in zip(samples, made):
            data = sample.to_hetero_data({t: self.features.gather(t, sample.node[t]) for t in self.feature_types})
            p.put(data[self.edge_type])
            out.append(data)
        return out

    def hyperbatch_size(self) -> Tuple[int, str]:
        """(H, why): link batches sampled together, decided once (``ringgnn.sampling.hyper``, as
        :class:`ringgnn.HeteroLoader` decides it, for the most endpoints a link batch can have)."""
        if self._hyper is None:
            backend, _ = self.sampler.placement()
            per_batch = 0
            if self.hyperbatch is None and backend != "memory":
                b = self.batch_size + math.ceil(self.batch_size * self.pairs.neg_sampling.amount)
                (s, d), (ns, nd) = self.types, self.pairs.counts
                most = {s: min(ns, b)}
                most[d] = min(nd, most.get(d, 0) + b)
                dims = self.ds.feature_dims()
                rows = {t: 4 * dims[t] for t in self.feature_types}
                per_batch = hetero_hyper.batch_bound(self.sampler.bound(most), rows, d, False)
            self._hyper = hetero_hyper.choose(self.hyperbatch, in_memory=backend == "memory",
                                              share=hetero_hyper.share(self.sampler.plan().batch_memory),
                                              per_batch=per_batch, threads=self.threads, prefetch=self.prefetch,
                                              batches=max(1, len(self)))
        return self._hyper

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        order = list(range(self.epoch_batches())) if self.batches is None else list(self.batches)
        h = self.hyperbatch_size()[0]
        jobs = [order[i:i + h] for i in range(0, len(order), h)]
        ahead = hetero_hyper.jobs_in_flight(h, self.threads, self.prefetch)
        yield from hetero_hyper.run_in_order(jobs, lambda job: self.make_batches(epoch, job), threads=self.threads,
                                             ahead=ahead, name="ringgnn-hlink")
