"""Link batches: the pairs of :mod:`.pairs` sampled one at a time (:class:`LinkSampler`) or by
epochs (:class:`LinkLoader`; :class:`HeteroLinkBatches` for a typed relation, and every dataset's
link batches at times; docs/ARCHITECTURE.md, "Link prediction")."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from .._options import edge_pairs
from ..data.dataset import Dataset, PathLike, open_homogeneous, warn_without_times
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE, parse_edge_type
from .hetero import HeteroLoader, HeteroNeighborSampler
from .typed import TypedEpochs
from .loader import CoreReports, Epochs, Loader, require_features
from .pairs import SHUFFLE_PURPOSE, LinkBatch, LinkPairs, NegativeSampling, Pairs, Shuffle
from .sampler import NeighborSampler, SampledSubgraph

#: Bytes of seed lists a link epoch hands the Rust core at a time (a *window* of batches, 24 bytes
#: a seed: the only per-batch state Python holds), counted in the plan's reserve; it also bounds
#: a hyperbatch.
WINDOW_BYTES = 32 << 20
#: :class:`ringgnn.Loader`'s options a :class:`LinkLoader` at times takes (the typed engine's): the
#: sampler's (the first four), then the batches'.
TIMED_OPTIONS = ("replace", "backend", "direct", "memory", "threads", "prefetch", "hyperbatch", "staging_dir",
                 "staging_cap")


def pair_times(ds: Any, split: Optional[str], n: int, time: Any, ignore_time: bool) -> Optional[np.ndarray]:
    """The time of each of ``n`` link pairs of ``ds`` (a dataset, or a typed one's relation):
    ``time`` (PyG's ``edge_label_time``), by default the times of ``split`` (a stored split by
    time); None without times. Refused: ``time`` on a dataset without times, and pairs without
    times on a dataset with times (unless ``ignore_time``, which warns)."""
    if ignore_time:
        if time is not None:
            raise InputError("edge_label_time samples each pair at its time and ignore_time=True samples without "
                             "times: give one of them")
        if ds.has_times:
            warn_without_times(ds, f"ignore_time: {ds.path} has times, but its link pairs are sampled on every edge "
                                   "whatever its time, so a pair's neighborhood may hold its future (a leak)")
        return None
    if time is not None:
        if not ds.has_times:
            raise InputError(f"{ds.path}: edge_label_time was given but the dataset has no edge or node times; build "
                             "it with --edge-time, or leave edge_label_time out")
        return _options.seed_times(time, n, "edge_label_time")
    stored = None if split is None else ds.edge_split_times(split)
    if stored is not None:
        return stored
    if ds.has_times:
        raise InputError(f"{ds.path} has times, so link pairs are sampled at their times: give edge_label_time (one "
                         "time per pair, its event's), or ignore_time=True to sample every edge whatever its time "
                         "(a pair's neighborhood may then hold its future)")
    return None


class LinkSampler(LinkPairs):
    """Link batches over a :class:`NeighborSampler` (its dataset, fanouts, backend and seed)."""

    def __init__(self, sampler: NeighborSampler, neg_sampling: Optional[NegativeSampling] = None):
        super().__init__(sampler.dataset, sampler.seed, neg_sampling)
        self.sampler = sampler

    def sample(self, src: Any, dst: Any, *, epoch: int = 0, batch: int = 0, edge_label: Any = None,
               src_weight: Optional[np.ndarray] = None, dst_weight: Optional[np.ndarray] = None,
               fixed: Optional[np.ndarray] = None, time: Any = None) -> LinkBatch:
        """Sample link batch ``batch`` of epoch ``epoch`` for the positive pairs ``(src[i], dst[i])``;
        ``time`` (PyG's ``edge_label_time``, one per pair): each pair and its negatives at the
        pair's time minus one, as :class:`LinkLoader` samples them."""
        if time is not None:
            time = pair_times(self.dataset, None, np.size(src), time, False)
        p = self.pairs(src, dst, epoch=epoch, batch=batch, edge_label=edge_label, src_weight=src_weight,
                       dst_weight=dst_weight, fixed=fixed, time=time)
        return p.batch(self.sampler.sample(p.seeds, epoch=epoch, batch=batch, input_time=p.seed_time))

    def epoch(self, edges: Union[str, Any] = "train", batch_size: int = 1024, *, epoch: int = 0,
              shuffle: bool = True, drop_last: bool = False, batches: Optional[Sequence[int]] = None,
              negatives: Optional[Any] = None, window: Optional[int] = None) -> Iterator[Tuple[int, LinkBatch]]:
        """``(batch index, LinkBatch)`` for the batches of one epoch over ``edges`` (see
        :class:`LinkBatches`), sampled ahead by the core sampler's threads: each exactly
        :meth:`sample` of its pairs. Make the :class:`NeighborSampler` with ``batch_size`` = the
        most seeds of a batch (:meth:`LinkPairs.most_seeds`) so that its memory plan holds one."""
        lb = LinkBatches(self.dataset, self, batch_size, edges, negatives=negatives, shuffle=shuffle,
                         drop_last=drop_last, batches=batches, window=window, backend=self.sampler.backend_choice,
                         direct=self.sampler.direct, ignore_time=True)  # the homogeneous engine: no times
        if self.sampler._core is None and self.sampler.reserve is None:
            # The window's seed lists are held besides the sampler: reserve them in its plan.
            self.sampler.reserve = _options.process_rss() + WINDOW_BYTES
        for made, it in lb.windows(_options.count(epoch, "epoch"), self.sampler._sampler()):
            for index, _seeds, out in it:
                yield int(index), made[int(index)].batch(SampledSubgraph._from_core(out))


class LinkBatches(Epochs):
    """The pairs side of epochs of link batches (:meth:`LinkSampler.epoch`, :class:`LinkLoader`,
    :class:`HeteroLinkBatches`): each batch's pairs as :class:`LinkLoader` describes them, and the
    windows of seed lists handed to the Rust core (``WINDOW_BYTES``; ``window``: fewer batches).
    ``dataset``: where the pairs are (a typed dataset's relation); ``file_order``: a batch's
    positives in file order, not the epoch's."""

    def __init__(self, dataset: Dataset, pairs: LinkPairs, batch_size: int, edges: Union[str, Any] = "train", *,
                 negatives: Optional[Any] = None, edge_label: Any = None, shuffle: bool = True,
                 drop_last: bool = False, batches: Optional[Sequence[int]] = None, window: Optional[int] = None,
                 backend: str = "auto", direct: bool = False, file_order: bool = False, time: Any = None,
                 ignore_time: bool = False):
        self.dataset = dataset
        self.pairs = pairs
        self.file_order = bool(file_order)
        stored = _options.stored_split(dataset, edges)
        self.edges = dataset.edge_split(stored, mmap=True) if stored else edge_pairs(
            dataset, edges, counts=pairs.counts, types=pairs.types)
        #: Each pair's time (parallel to ``edges``), at which it is sampled; None: without times.
        self.time = pair_times(dataset, stored, self.edges.shape[1], time, ignore_time)
        # A stored split's pairs are read with the page-coalesced reader, not by faulting the map
        # a page at a time: a batch's pairs lie on as many random pages as it has pairs.
        self._pair_file = dataset.edge_split_file(stored) if stored else None
        self._pair_io = ("pread" if backend == "pread" else "auto", bool(direct))
        self._reader: Any = None
        self._reader_pid: Optional[int] = None
        self._cut_options(batch_size, shuffle, drop_last, batches)
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
        # Batches per window: what WINDOW_BYTES holds (or fewer, when asked).
        most = max(1, WINDOW_BYTES // (24 * self.most_seeds()))
        self.window = most if window is None else min(most, _options.count(window, "window", 1))

    def most_seeds(self) -> int:
        """The most seed nodes of one batch (what a memory plan is made for)."""
        return self.pairs.most_seeds(self.batch_size, 0 if self.negatives is None else self.negatives.shape[1],
                                     timed=self.time is not None)

    def _items(self) -> int:
        return self.edges.shape[1]

    def positions(self, epoch: int, start: int, stop: int) -> np.ndarray:
        """Positions in ``edges`` of the epoch's pairs ``start`` to ``stop`` (a :class:`Shuffle`
        keyed by (seed, epoch), or the identity without ``shuffle``)."""
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
        time = None if self.time is None else np.asarray(self.time[pos[order]])[inv]
        p = self.pairs.pairs(src, dst, epoch=epoch, batch=b, edge_label=label, fixed=fixed, time=time)
        p.positions = pos
        return p

    def read_pairs(self, positions: np.ndarray) -> np.ndarray:
        """The pairs at ``positions`` (ascending) of ``edges``, as a (2, m) int64 array."""
        if self._pair_file is None or not len(positions):
            return np.asarray(self.edges[:, positions])
        if self._reader is None or self._reader_pid != os.getpid():  # a reader's ring is per process
            path, rows = self._pair_file
            # 16-byte rows, 256 to a page: the feature-file layout of 4 float32 columns, so the
            # feature reader reads them; the bytes come back untouched, viewed as int64 pairs.
            self._reader = _core.FeatureReader.matrix(path, rows, 4, backend=self._pair_io[0],
                                                      direct=self._pair_io[1])
            self._reader_pid = os.getpid()
        return self._reader.gather(positions).view("<i8").T

    def window_pairs(self, epoch: int) -> Iterator[Tuple[List[int], Dict[int, Pairs]]]:
        """For each window of the epoch's batches: their global indices and their :class:`Pairs`
        by batch index."""
        wanted = self.epoch_order()
        for w in range(0, len(wanted), self.window):
            chosen = wanted[w:w + self.window]
            yield chosen, {b: self.batch_pairs(epoch, b) for b in dict.fromkeys(chosen)}

    def windows(self, epoch: int, core: Any) -> Iterator[Tuple[Dict[int, Pairs], Any]]:
        """For each window of the epoch's batches: their :class:`Pairs` by batch index and the
        epoch of ``core`` (a Rust sampler or loader) started over their seed lists."""
        for chosen, made in self.window_pairs(epoch):
            sizes = [len(made[b].seeds) for b in chosen]
            seeds = np.concatenate([made[b].seeds for b in chosen])
            for p in made.values():
                p.seeds = None  # in `seeds` now (and in the core's copy)
            bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
            yield made, core.epoch(seeds, max(1, max(sizes)), shuffle=False, epoch=epoch, bounds=bounds,
                                   indices=[int(b) for b in chosen])


class LinkLoader(LinkBatches, CoreReports):
    """Epochs of link batches as PyG ``Data``, sampled and gathered ahead by the Rust loader.

    Each batch is ``batch_size`` positive pairs of ``edges`` (an edge split's name, default
    ``train``, or pairs) in an order shuffled by (seed, epoch), plus negatives: sampled
    (``neg_sampling``) or fixed (``negatives``, ``(n, K)`` destinations per pair). The batches
    are :class:`LinkSampler`'s for the same pairs, epoch and batch index, whatever the backend,
    hyperbatch or threads. Each ``Data`` has :class:`ringgnn.Loader`'s attributes (the dataset
    must have features), ``input_id`` (positions of the positives in ``edges``), and
    ``edge_label_index``/``edge_label`` (binary or no negatives) or ``src_index``/
    ``dst_pos_index``/``dst_neg_index`` (triplet or fixed), as PyG's ``LinkNeighborLoader``.
    ``share``: a :class:`LinkLoader` or :class:`ringgnn.Loader` whose engine this one uses; the
    other keyword arguments are :class:`ringgnn.Loader`'s.

    **At times**: ``edge_label_time``, one time per pair, samples each pair and its negatives at
    the pair's time minus one on the typed engine (:attr:`typed`); each ``Data`` then also has
    ``seed_time`` and ``edge_label_time``. On a dataset with times, pairs without times are
    refused unless ``ignore_time=True`` (warned: a leak). At times the loader takes
    ``temporal_strategy`` and of :class:`ringgnn.Loader`'s options :data:`TIMED_OPTIONS`.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Union[str, Sequence[int]], batch_size: int, *,
                 edges: Union[str, Any] = "train", neg_sampling: Optional[NegativeSampling] = None,
                 negatives: Optional[Any] = None, edge_label: Any = None, shuffle: bool = True,
                 drop_last: bool = False, batches: Optional[Sequence[int]] = None, seed: int = 0,
                 share: Optional[Any] = None, window: Optional[int] = None, edge_label_time: Any = None,
                 ignore_time: bool = False, temporal_strategy: str = "uniform", **loader_opts: Any):
        ds = Dataset.opened(dataset)
        timed = not ignore_time and (edge_label_time is not None or ds.has_times)
        ds = require_features(open_homogeneous(ds, "LinkSampler", samples=not timed))
        if isinstance(share, LinkLoader) and share.typed is not None:
            raise InputError("share=: that LinkLoader samples at times, on the typed engine, whose engine is not "
                             "shared; leave share out")
        base = share._loader if isinstance(share, LinkLoader) else share
        if isinstance(share, LinkLoader):
            seed = share.pairs.seed  # one engine, one sampling stream
        super().__init__(ds, LinkPairs(ds, _options.count(seed, "seed"), neg_sampling), batch_size, edges,
                         negatives=negatives, edge_label=edge_label, shuffle=shuffle, drop_last=drop_last,
                         batches=batches, window=window, backend=loader_opts.get("backend", "auto"),
                         direct=loader_opts.get("direct", False), time=edge_label_time, ignore_time=not timed)
        self.epoch = 0
        self.last_epoch: Dict[str, float] = {}
        #: At times: the typed engine's batches of these pairs; else None.
        self.typed: Optional[HeteroLinkBatches] = None
        #: The homogeneous engine's node loader of the batches' seeds (None at times).
        self._loader: Optional[Loader] = None
        ends = np.zeros(0, np.int64)
        if base is None:
            look = loader_opts.get("presample_batches", 64) * self.batch_size
            first = self.positions(0, 0, min(look, self.edges.shape[1]))
            ends = np.unique(self.read_pairs(np.sort(first)))
        #: The nodes a look-ahead for the hot-row cache (and a GPU tier's) samples from: the
        #: endpoints of the first epoch's first batches.
        self.seeds = ends
        if timed:
            self.typed = self._at_times(edges, fanouts, share, temporal_strategy, loader_opts)
            return
        if base is None:
            # The window's seed lists are held besides the loader: reserve them in its plan.
            loader_opts["reserve"] = _options.reserve(loader_opts.get("reserve")) + WINDOW_BYTES
        self._loader = Loader(ds, fanouts, self.most_seeds(), split=ends, shuffle=False, seed=self.pairs.seed,
                              share=base, ignore_time=True, **loader_opts)  # the homogeneous engine: no times

    def _at_times(self, edges: Any, fanouts: Any, share: Any, strategy: str, opts: Dict[str, Any]) -> Any:
        """The typed engine's link batches of this loader's pairs at their times."""
        refused = sorted(set(opts) - set(TIMED_OPTIONS)) + (["share"] if share is not None else [])
        if refused:
            them = "it" if len(refused) == 1 else "them"
            raise InputError(f"{', '.join(refused)}: not taken by a LinkLoader at times, which samples on the typed "
                             f"engine (it takes {', '.join(TIMED_OPTIONS)}); leave {them} out, or give "
                             "ignore_time=True")
        sampler = HeteroNeighborSampler(self.dataset, {HOMOGENEOUS_RELATION: _options.fanouts(fanouts)},
                                        seed=self.pairs.seed, temporal_strategy=strategy,
                                        **{k: v for k, v in opts.items() if k in TIMED_OPTIONS[:4]})
        return HeteroLinkBatches(self.dataset, HOMOGENEOUS_RELATION, sampler, batch_size=self.batch_size,
                                 seed=self.pairs.seed, neg_sampling=self.pairs.neg_sampling, negatives=self.negatives,
                                 edge_label=self.edge_label, shuffle=self.shuffle, drop_last=self.drop_last,
                                 batches=self.batches, window=self.window, time=self.time,
                                 pairs=edges if self._pair_file is not None else self.edges,
                                 **{k: v for k, v in opts.items() if k in TIMED_OPTIONS[4:]})

    @property
    def _core(self) -> Any:
        """The homogeneous engine's ``_core.Loader`` (None at times: :attr:`typed` makes the batches)."""
        return None if self._loader is None else self._loader._core

    @property
    def fanouts(self) -> List[int]:
        if self.typed is not None:
            return self.typed.sampler.fanouts[HOMOGENEOUS_RELATION]
        return self._loader.fanouts

    def __iter__(self) -> Iterator[Any]:
        epoch = self._next_epoch()
        if self.typed is not None:
            for _, data in self._typed_epoch(epoch):
                yield one_type_data(data)
            return
        totals = self.last_epoch = self._loader._new_totals()
        for made, it in self.windows(epoch, self._core):
            for index, data in self._loader._batches(it, totals):
                made[int(index)].put(data)
                yield data
                del data

    def __repr__(self) -> str:
        engine = "at times" if self.typed is not None else f"backend={self.backend!r}"
        return (f"LinkLoader({self.dataset.path!r}, fanouts={self.fanouts}, batch_size={self.batch_size}, "
                f"{self.edges.shape[1]} pairs, {engine})")


def one_type_data(data: Any) -> Any:
    """A one-type ``HeteroData`` batch (a homogeneous dataset's, from the typed engine) as the
    ``Data`` of a homogeneous batch: its node type's attributes and its relation's together."""
    from torch_geometric.data import Data  # PyG only where its batches are made

    return Data(**data[HOMOGENEOUS_TYPE].to_dict(), **data[parse_edge_type(HOMOGENEOUS_RELATION)].to_dict())


class HeteroLinkBatches(LinkBatches, TypedEpochs):
    """The link batches of relation ``S:R:D`` of a typed dataset as ``HeteroData``: the pairs of
    :class:`LinkBatches` (negatives: ``ceil(neg_ratio * n)`` binary ones drawn over ``S`` and
    ``D``, uniform or by in-degree, ``neg_weight``; or ``neg_sampling`` or fixed ``negatives``, as
    :class:`LinkLoader`), each end's distinct ids seeding one typed sample
    (:meth:`HeteroNeighborSampler.sample_typed`), rows gathered per type, and on ``data[S, R, D]``
    ``edge_label_index`` (positions in ``data[S].n_id`` and ``data[D].n_id``), ``edge_label`` and
    ``input_id``, as PyG's ``LinkNeighborLoader``. Made by the Rust typed loader with
    :class:`ringgnn.HeteroLoader`'s options; the batches are the same whatever those. ``pairs``
    (2, n): the positives (default the ``train`` split); ``features``: a loader's, shared.

    **At times** (``time``, one per pair; required on a dataset with times unless
    ``ignore_time``): each pair and its negatives are sampled at the pair's time minus one
    (``data[t].seed_time``; ``data[S, R, D].edge_label_time`` holds the pairs' times)."""

    def __init__(self, ds: Any, relation: str, sampler: HeteroNeighborSampler, features: Any = None, *,
                 batch_size: int, neg_ratio: Optional[float] = None, seed: int, shuffle: bool = True,
                 threads: Optional[int] = None, prefetch: Optional[int] = None, pairs: Any = None,
                 hyperbatch: Any = "auto", neg_weight: str = "uniform", staging_dir: Any = None,
                 staging_cap: Any = None, neg_sampling: Optional[NegativeSampling] = None,
                 negatives: Optional[Any] = None, edge_label: Any = None, drop_last: bool = False,
                 batches: Optional[Sequence[int]] = None, window: Optional[int] = None, time: Any = None,
                 ignore_time: bool = False):
        self.ds, self.relation = ds, ds.check_relation(relation)
        self.edge_type = parse_edge_type(self.relation)
        self.types = (self.edge_type[0], self.edge_type[2])
        if neg_sampling is None and neg_ratio is not None:
            neg_sampling = NegativeSampling("binary", neg_ratio, neg_weight)
        link = LinkPairs(ds, int(seed), neg_sampling, types=self.types)
        super().__init__(ds.relation(self.relation), link, batch_size, "train" if pairs is None else pairs,
                         negatives=negatives, edge_label=edge_label, shuffle=shuffle, drop_last=drop_last,
                         batches=batches, window=window, backend=sampler.backend_choice, direct=sampler.direct,
                         file_order=True, time=time, ignore_time=ignore_time)
        if self.time is not None:
            sampler.require_times()
        if features is None:  # the readers (and cache) a loader of this sampler would make
            # It samples nothing: its one seed's time only keeps it from warning of sampling without times.
            # Rows are read with the sampler's backend, as ringgnn.Loader's `backend` reads both.
            at = dict(ignore_time=True) if self.time is None else dict(input_time=0)
            features = HeteroLoader(ds, sampler.fanouts, self.types[1], seeds=np.arange(1), sampler=sampler,
                                    feature_backend=sampler.backend_choice, **at).features
        # Link batches carry no labels.
        TypedEpochs.__init__(self, sampler, features, sampler.plan(), self.types[1], False, threads=threads,
                             prefetch=prefetch, hyperbatch=hyperbatch, staging_dir=staging_dir, staging_cap=staging_cap)

    def _job(self, b: int, p: Pairs) -> Tuple[int, List[Tuple[str, np.ndarray]], Optional[List[np.ndarray]]]:
        """Batch ``b`` of pairs ``p`` as the core takes it: (index, seeds by type, their times)."""
        return b, list(p.typed_seeds(self.types).items()), p.typed_times(self.types)

    def _probe_seeds(self) -> List[Tuple[List[Tuple[str, np.ndarray]], Optional[List[np.ndarray]]]]:
        probes = range(min(_core.TypedLoader.PROBE_BATCHES, len(self)))
        return [self._job(b, self.batch_pairs(0, b))[1:] for b in probes]

    def _data(self, out: Any, p: Pairs) -> Any:
        """A core batch as ``HeteroData`` with the pairs ``p`` set on its relation."""
        data = self._hetero_data(out, list(p.typed_seeds(self.types).items()))
        p.put(data[self.edge_type])
        return data

    def batch(self, epoch: int, b: int) -> Any:
        """Batch ``b`` of epoch ``epoch`` as ``HeteroData``, made on the calling thread."""
        p = self.batch_pairs(epoch, b)
        return self._data(self._make(epoch, [self._job(b, p)])[0], p)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        for chosen, made in self.window_pairs(epoch):
            for out in self._run(epoch, [self._job(b, made[b]) for b in chosen]):
                yield self._data(out, made[out["batch"]])
