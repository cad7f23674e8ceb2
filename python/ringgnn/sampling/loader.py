"""``ringgnn.Loader``: mini-batches as PyG ``Data`` from the Rust loader; at seed times, the typed
loader's batches of the one type (docs/ARCHITECTURE.md, "The pipelined loader")."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from ..data.dataset import Dataset, PathLike, open_homogeneous
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE, parse_edge_type
from .base import Epochs
from .hetero import HeteroLoader, seed_times

#: Options of the homogeneous engine alone, with their defaults: refused at seed times.
_HOMOGENEOUS_ONLY = dict(cache_policy="presample", presample_batches=64, reserve=None, hold=2, spill="auto",
                        processes=1)

logger = logging.getLogger("ringgnn")


class CoreReports:
    """What :class:`Loader` and ``LinkLoader`` report and how they run an epoch, over a
    ``_core.Loader`` (``_core``) or, at seed times, the typed engine's epochs (``typed``)."""

    _core: Any
    #: At seed times, the typed engine's epochs that make the batches; else None.
    typed: Any = None
    last_epoch: Dict[str, float]

    def plan(self) -> Dict[str, Any]:
        """How the memory budget was split (bytes per part, ``text`` for people; at seed times
        the typed plan's ``text``)."""
        if self.typed is not None:
            return dict(text=self.typed.plan.text(), note="")
        return dict(self._core.plan())

    def stats(self) -> Dict[str, Any]:
        """Counters of the engine (shared by loaders made with ``share=``): batches, worker
        seconds, feature rows, cache hits, pages and bytes read, the backends; at seed times the
        last epoch's batches and the typed engine's feature reads per type."""
        if self.typed is not None:
            return dict(batches=self.last_epoch.get("batches", 0), features=self.typed.feature_stats())
        return dict(self._core.stats())

    @property
    def backend(self) -> str:
        """How neighbor lists are read (``memory``, ``uring``, ``pread``; at seed times
        ``HeteroNeighborSampler.resolved_backend``)."""
        return self.typed.sampler.resolved_backend() if self.typed is not None else self._core.backend

    @property
    def feature_backend(self) -> Optional[str]:
        """How feature rows are read (``memory``, ``uring``, ``pread``)."""
        if self.typed is not None:
            return self.typed.features.backends.get(HOMOGENEOUS_TYPE)
        return self._core.feature_backend

    def _next_epoch(self) -> int:
        epoch, self.epoch = self.epoch, self.epoch + 1
        return epoch

    def _typed_epoch(self, epoch: int) -> Iterator[Tuple[int, Any]]:
        """(global index, ``HeteroData``) of epoch ``epoch``'s batches at seed times, counted."""
        self.typed.epoch, self.typed.batches = epoch, self.batches
        totals = self.last_epoch = dict(batches=0)
        for b, batch in zip(self.epoch_order(), self.typed):
            totals["batches"] += 1
            yield b, batch


class Loader(CoreReports, Epochs):
    """Iterate over mini-batches of ``split`` (or an array of seed ids) as PyG ``Data``, one epoch
    per ``iter()`` (:meth:`set_epoch` sets the next). A batch depends only on (seed, epoch, batch
    index): it is what :class:`NeighborSampler` with the same fanouts and seed samples, whatever
    the backend, threads or cache.

    Args:
        dataset: a :class:`Dataset` or its path; it must have features.
        fanouts: neighbors per hop (``-1``: all).
        batch_size: seeds per batch (the largest batch; the memory plan is sized for it).
        split: a split name, an array of node ids, or None for all nodes.
        shuffle, drop_last: as in PyTorch's ``DataLoader``.
        batches: which batches of each epoch to produce, by global index (e.g. one rank's
            share); each is exactly the batch a whole epoch gives at that index. Default: all.
        cache: bytes of hot feature rows kept in memory (``"512M"`` works too); None: what the
            budget leaves; 0: none.
        cache_policy: ``"presample"`` (rows the first ``presample_batches`` batches touch most)
            or ``"degree"``.
        memory, reserve: the budget of the whole process (``"4G"`` works too; None: half the
            available memory) and what of it the caller needs (default: what it already uses).
        prefetch: gathered batches held ahead (default: one per thread, 1 when the budget is tight).
        hold: batches your loop holds while it asks for the next: 2 for a plain ``for batch in
            loader``, 1 if you ``del batch`` before the next one.
        hyperbatch: batches sampled together when the neighbor file is read from disk (see
            :class:`NeighborSampler`); with feature rows on disk too, a cost model chooses per
            hyperbatch whether to *stage* its rows (one pass over the feature file).
        staging_dir, staging_cap: where the staging and spill files go (default: the dataset's
            parent; unlinked at once), and bytes the staging file may hold (0: never stage).
        spill: ``"auto"``, ``"on"`` or ``"off"``, as :class:`NeighborSampler`'s.
        backend: "auto", "memory", "uring" or "pread", for neighbor lists and feature rows;
            ``feature_backend``: for feature rows alone.
        direct, threads, seed: as for :class:`NeighborSampler`.
        share: another :class:`Loader` of the same dataset and fanouts whose engine (threads,
            cache, labels, budget) this one uses; options other than ``batch_size``, ``split``,
            ``shuffle``, ``drop_last`` and ``batches`` are then taken from it.
        processes: processes on this machine that each run a loader (a ``torchrun`` job's local
            ranks): the default ``threads`` and ``memory`` are this process's equal share.
        input_time: each seed's time (one integer per seed of ``split``, or one for all); by
            default, on a dataset with node times, each seed's node time.
        ignore_time: sample without times on a dataset with times (warned).
        temporal_strategy: at seed times, ``"uniform"`` (default) or ``"last"``.

    At seed times (docs/USAGE.md, "Sampling at seed times"; :attr:`seed_time`) the batches are
    :class:`ringgnn.HeteroLoader`'s of the dataset's one type (:attr:`typed`), converted, each
    with ``seed_time``; ``cache_policy``, ``presample_batches``, ``reserve``, ``hold``, ``spill``
    and ``processes`` are then refused, and ``share`` shares the typed loader's graph, feature
    readers and cache.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Union[str, Sequence[int]], batch_size: int, *,
                 split: Union[None, str, Any] = "train", batches: Optional[Sequence[int]] = None, shuffle: bool = True,
                 drop_last: bool = False, cache: Union[None, int, str] = None, cache_policy: str = "presample",
                 presample_batches: int = 64, memory: Union[None, int, str] = None,
                 reserve: Union[None, int, str] = None, prefetch: Optional[int] = None, hold: int = 2,
                 backend: str = "auto", feature_backend: Optional[str] = None, direct: bool = False,
                 threads: Optional[int] = None, seed: int = 0, hyperbatch: Union[int, str] = "auto",
                 staging_dir: Optional[PathLike] = None, staging_cap: Union[None, int, str] = None,
                 spill: str = "auto", share: Optional["Loader"] = None, processes: int = 1, input_time: Any = None,
                 ignore_time: bool = False, temporal_strategy: str = "uniform"):
        self.dataset = require_features(open_homogeneous(dataset, "Loader"))
        self.fanouts = _options.fanouts(fanouts)
        self._cut_options(batch_size, shuffle, drop_last, batches)
        self.seeds = _options.seeds(self.dataset, split, "split")
        self.seed_time = seed_times(self.dataset, HOMOGENEOUS_TYPE, self.seeds, input_time, bool(ignore_time), "Loader")
        """Each seed's time (parallel to ``seeds``), or None: sampled without times."""
        #: At seed times, the typed loader that makes the batches; else None.
        self.typed: Optional[HeteroLoader] = None
        self._core: Any = None
        if share is not None:
            same = os.path.abspath(share.dataset.path) == os.path.abspath(self.dataset.path)
            if not same or share.fanouts != self.fanouts:
                raise InputError("share= needs a Loader of the same dataset and fanouts")
            if (share.typed is None) != (self.seed_time is None):
                raise InputError("share= needs a Loader that samples as this one does, both at seed times or both "
                                 "without")
        if self.seed_time is not None:
            given = dict(cache_policy=cache_policy, presample_batches=presample_batches, reserve=reserve, hold=hold,
                         spill=spill, processes=processes)
            other = [k for k, v in given.items() if v != _HOMOGENEOUS_ONLY[k]]
            if other:
                raise InputError(f"{', '.join(other)}: option(s) of the homogeneous engine, which samples without "
                                 f"times; this Loader samples {self.dataset.path} at the seeds' times (the typed "
                                 "engine): leave them out, or give ignore_time=True")
            shared = {} if share is None else dict(sampler=share.typed.sampler, features=share.typed.features)
            self.typed = HeteroLoader(
                self.dataset, {HOMOGENEOUS_RELATION: list(self.fanouts)}, HOMOGENEOUS_TYPE, seeds=self.seeds,
                input_time=self.seed_time, batch_size=self.batch_size, shuffle=self.shuffle, drop_last=self.drop_last,
                seed=seed, threads=threads, prefetch=prefetch, backend=backend,
                feature_backend=backend if feature_backend is None else feature_backend, direct=direct,
                memory=memory, cache=cache, hyperbatch=hyperbatch, staging_dir=staging_dir, staging_cap=staging_cap,
                temporal_strategy=temporal_strategy, **shared)
        elif share is not None:
            self._core = share._core
        else:
            # Import torch and PyG now, so that the default reserve (what this process holds) counts them.
            import torch  # noqa: F401
            from torch_geometric.data import Data  # noqa: F401

            self._core = _core.Loader(
                self.dataset.path, self.fanouts, self.batch_size, backend=_options.backend(backend),
                direct=bool(direct), threads=_options.optional_count(threads, "threads"),
                seed=_options.count(seed, "seed"),
                memory=_options.size(memory, "memory"), reserve=_options.reserve(reserve),
                cache=_options.size(cache, "cache"), cache_policy=_options.cache_policy(cache_policy),
                presample_batches=_options.count(presample_batches, "presample_batches"), presample_seeds=self.seeds,
                prefetch=_options.optional_count(prefetch, "prefetch"), hold=_options.count(hold, "hold", 1),
                feature_backend=None if feature_backend is None else _options.backend(feature_backend,
                                                                                      "feature_backend"),
                hyperbatch=_options.hyperbatch(hyperbatch),
                staging_dir=None if staging_dir is None else os.fspath(staging_dir),
                staging_cap=_options.size(staging_cap, "staging_cap"),
                processes=_options.count(processes, "processes", 1), spill=str(spill))
            note = self._core.plan()["note"]
            if note:
                logger.warning("ringgnn: %s", note)
            reason = self._core.fallback_reason
            if reason:
                logger.warning("ringgnn: reading with pread: %s", reason)
        self.epoch = 0
        #: Totals of the last epoch iterated: batches, worker seconds sampling, waiting for
        #: their turn and gathering, bytes read, cache hits.
        self.last_epoch: Dict[str, float] = {}

    def __iter__(self) -> Iterator[Any]:
        epoch = self._next_epoch()
        if self.typed is not None:
            order, n = self.typed._order(epoch), self.batch_size
            for b, batch in self._typed_epoch(epoch):
                data = _one_type(batch, order[b * n:(b + 1) * n], self.seeds, self.seed_time)
                del batch
                yield data
                del data
            return
        # Positions of the seeds in `self.seeds`, to report `input_id` as PyG does.
        where = {int(s): i for i, s in enumerate(self.seeds.tolist())} if len(self.seeds) < 1 << 22 else None
        it = self._core.epoch(self.seeds, self.batch_size, shuffle=self.shuffle, epoch=epoch, drop_last=self.drop_last,
                              batches=self.batches)
        for _index, data in self._batches(it, self._new_totals()):
            if where is not None:
                data.input_id = _input_ids(where, data.n_id[: data.batch_size])
            yield data
            del data  # the generator keeps no batch alive once the consumer asks for the next

    def _new_totals(self) -> Dict[str, float]:
        """Zeroed per-epoch totals, which become :attr:`last_epoch`."""
        self.last_epoch = dict(batches=0, sample=0.0, wait=0.0, gather=0.0, bytes_read=0, pages_read=0,
                               distinct_rows=0, cache_hits=0)
        return self.last_epoch

    def _batches(self, it: Any, totals: Dict[str, float]) -> Iterator[Any]:
        """``(global batch index, Data)`` for each batch of a core epoch ``it``, counted in
        ``totals`` (``LinkLoader`` adds its pairs to them)."""
        import torch
        from torch_geometric.data import Data

        for index, seeds, sub, x, y, info in it:
            for k in ("sample", "wait", "gather", "bytes_read", "pages_read", "distinct_rows", "cache_hits"):
                totals[k] += info[k]
            totals["batches"] += 1
            node = sub["node"]
            if y is None:
                y = np.full(len(node), -1, dtype=np.int64)
            data = Data(x=torch.from_numpy(x), y=torch.from_numpy(y),
                        edge_index=torch.from_numpy(np.stack([sub["row"], sub["col"]])), n_id=torch.from_numpy(node),
                        batch_size=len(seeds), num_sampled_nodes=list(sub["num_sampled_nodes"]),
                        num_sampled_edges=list(sub["num_sampled_edges"]))
            del x
            yield index, data
            del data

    def __repr__(self) -> str:
        return (f"Loader({self.dataset.path!r}, fanouts={self.fanouts}, batch_size={self.batch_size}, "
                f"{len(self.seeds)} seeds, backend={self.backend!r}, features={self.feature_backend!r})")


def require_features(ds: Dataset) -> Dataset:
    """``ds``, refused where it has no node features (a loader's batches carry ``x``)."""
    if ds.feature_dim is None:
        raise InputError(f"{ds.path}: the dataset has no node features; rebuild it with --features")
    return ds


def _one_type(batch: Any, positions: np.ndarray, seeds: np.ndarray, times: np.ndarray) -> Any:
    """A typed batch of a homogeneous dataset's one type (``HeteroData``) as :class:`Loader`'s
    ``Data``, plus ``seed_time``; ``positions``: its seeds' positions in ``seeds`` (and ``times``),
    of which the batch kept each distinct (seed, time) pair once, in order of first appearance."""
    import torch  # torch and PyG stay off `import ringgnn`'s path
    from torch_geometric.data import Data

    node, rel = batch[HOMOGENEOUS_TYPE], batch[parse_edge_type(HOMOGENEOUS_RELATION)]
    _, first = np.unique(np.stack([seeds[positions], times[positions]]), axis=1, return_index=True)
    y = node.y if "y" in node else torch.full((node.num_nodes,), -1, dtype=torch.int64)
    return Data(x=node.x, y=y, edge_index=rel.edge_index, n_id=node.n_id, batch_size=node.batch_size,
                num_sampled_nodes=node.num_sampled_nodes, num_sampled_edges=rel.num_sampled_edges,
                input_id=torch.from_numpy(positions[np.sort(first)]), seed_time=node.seed_time)


def _input_ids(where: Dict[int, int], seeds: Any) -> Any:
    import torch

    return torch.tensor([where[int(s)] for s in seeds.tolist()], dtype=torch.int64)
