"""``ringgnn.Loader``: mini-batches as PyG ``Data``, sampled and gathered ahead by Rust threads.

Each worker thread of an epoch samples a whole mini-batch from the graph on disk and then reads
that batch's feature rows (page-coalesced, hot rows from the cache) and labels into a reused
buffer, while Python trains on earlier batches. At most ``prefetch`` gathered batches exist
ahead of the consumer, and one memory budget covers the loader's parts (``plan()`` says how it
was split; see ``docs/ARCHITECTURE.md``). The feature matrix reaches PyTorch without a copy:
``x`` borrows the worker's buffer, which goes back to the loader when the tensor is freed.

Each yielded ``Data`` has what PyG's ``NeighborLoader`` gives: ``x`` (float32), ``y`` (int64,
-1 = unlabeled), ``edge_index`` (local, row = message source), ``n_id`` (global ids, seeds
first), ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id`` (the
seeds' positions in the split).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from .._options import process_rss  # noqa: F401  (re-exported: train and benchmarks use it)
from ..data.dataset import Dataset, PathLike, open_homogeneous

logger = logging.getLogger("ringgnn")


class Epochs:
    """An epoch cut into batches of ``batch_size`` (the last one short unless ``drop_last``), of
    which ``batches`` (global indices, e.g. one rank's share; None: all, in order) are yielded:
    what every loader shares. It cuts :meth:`_items` (its seeds, or its pairs)."""

    batch_size: int
    drop_last: bool
    batches: Optional[List[int]]
    seeds: Any
    epoch: int  # the epoch of the next iter()

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next ``iter()``."""
        self.epoch = _options.count(epoch, "epoch")

    def _items(self) -> int:
        return len(self.seeds)

    def epoch_batches(self) -> int:
        """The number of batches of a whole epoch."""
        n = self._items()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __len__(self) -> int:
        return self.epoch_batches() if self.batches is None else len(self.batches)

    def epoch_order(self) -> List[int]:
        """The global indices of the batches an epoch yields."""
        return list(range(self.epoch_batches())) if self.batches is None else list(self.batches)


class CoreReports:
    """What a loader over an engine, a ``_core.Loader`` (``_core``), reports: :class:`Loader`
    and ``ringgnn.sampling.links.LinkLoader``."""

    _core: Any

    def plan(self) -> Dict[str, Any]:
        """How the memory budget was split (bytes per part, ``text`` for people)."""
        return dict(self._core.plan())

    def stats(self) -> Dict[str, Any]:
        """Counters of the loader (shared by loaders made with ``share=``): batches, worker
        seconds sampling and gathering, feature rows, cache hits and hit rate, pages and bytes
        read, the cache's rows and bytes, the look-ahead's batches and seconds, the backends."""
        return dict(self._core.stats())

    @property
    def backend(self) -> str:
        return self._core.backend

    @property
    def feature_backend(self) -> str:
        return self._core.feature_backend


class Loader(CoreReports, Epochs):
    """Iterate over mini-batches of ``split`` (or an array of seed ids), one epoch per ``iter()``.

    Args:
        dataset: a :class:`Dataset` or its path; it must have features.
        fanouts: neighbors per hop (``-1``: all).
        batch_size: seeds per batch (the largest batch; the memory plan is sized for it).
        split: a split name, an array of node ids, or None for all nodes.
        shuffle, drop_last: as in PyTorch's ``DataLoader``.
        cache: bytes of hot feature rows kept in memory (``"512M"`` works too); None: what the
            budget leaves; 0: none.
        cache_policy: ``"presample"`` (rows the batches touch most, counted by sampling
            ``presample_batches`` batches of this loader's seeds ahead) or ``"degree"``.
        memory: the budget of the whole process (``"4G"`` works too); None: half the
            available memory. ``reserve`` of it is left to the caller.
        reserve: bytes the caller needs besides the loader (default: what this process already
            uses, i.e. the Python runtime, PyTorch and anything loaded so far).
        prefetch: gathered batches held ahead of training (default: one per thread, or 1 when
            the budget is tight).
        hold: batches your loop holds while it asks for the next, for the memory plan: 2 for a
            plain ``for batch in loader`` (the loop variable keeps the previous batch alive),
            1 if you ``del batch`` before the next one (as ``ringgnn train`` does).
        batches: which batches of each epoch to produce, by global index (e.g. one rank's
            share); each is exactly the batch a whole epoch gives at that index. Default: all.
        hyperbatch: batches sampled together when the neighbor file is read from disk (see
            :class:`NeighborSampler`): ``"auto"`` (default) or a number. With feature rows on
            disk too, a hyperbatch's rows are read either batch by batch or *staged*: one pass
            over the feature file writes each batch's rows the cache lacks to a staging file,
            and each batch reads them back sequentially; a cost model chooses per hyperbatch
            (``stats()`` counts its choices).
        staging_dir: where the staging file goes (on the SSD; default: the dataset's parent
            directory), and the spill file of hyperbatches that write their finished samples
            to disk; both are unlinked at once, so nothing is left behind.
        staging_cap: bytes the staging file may hold (default: the feature file's size; 0: never
            stage).
        spill: whether a hyperbatch writes each finished sample to a spill file (in
            ``staging_dir``) and reads it back when its turn comes, keeping in memory only the
            row ids its staging pass reads: ``"auto"`` (default: when that fits more batches in
            the memory plan's share than keeping them), ``"on"`` or ``"off"``. Batches do not
            depend on it.
        backend: "auto", "memory", "uring" or "pread", for neighbor lists and feature rows.
        feature_backend: the same choice for feature rows alone (default: ``backend``), e.g.
            ``"memory"`` with ``backend="uring"`` to hold the features but sample from disk.
        direct, threads, seed: as for :class:`NeighborSampler`.
        share: another :class:`Loader` of the same dataset and fanouts whose engine (threads'
            configuration, cache, labels, budget) this one uses, e.g. the val and test loaders
            sharing the train loader's; the options above other than ``batch_size``, ``split``,
            ``shuffle``, ``drop_last`` and ``batches`` are then taken from it (a larger
            ``batch_size`` than the shared loader's is accepted while its memory plan still fits).
        processes: processes on this machine that each run a loader (the local ranks of a
            ``torchrun`` job): the default ``threads`` and ``memory`` are this process's equal
            share of the machine's cores and available memory.

    Epochs count up from 0 with each ``iter()``; :meth:`set_epoch` sets the next one. A batch
    depends only on (seed, epoch, batch index): it is what :class:`NeighborSampler` with the
    same fanouts and seed samples, whatever the backend, threads or cache.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Union[str, Sequence[int]], batch_size: int, *,
                 split: Union[None, str, Any] = "train", batches: Optional[Sequence[int]] = None, shuffle: bool = True,
                 drop_last: bool = False, cache: Union[None, int, str] = None, cache_policy: str = "presample",
                 presample_batches: int = 64, memory: Union[None, int, str] = None,
                 reserve: Union[None, int, str] = None, prefetch: Optional[int] = None, hold: int = 2,
                 backend: str = "auto", feature_backend: Optional[str] = None, direct: bool = False,
                 threads: Optional[int] = None, seed: int = 0, hyperbatch: Union[int, str] = "auto",
                 staging_dir: Optional[PathLike] = None, staging_cap: Union[None, int, str] = None,
                 spill: str = "auto", share: Optional["Loader"] = None, processes: int = 1):
        self.dataset = open_homogeneous(dataset, "Loader", samples=True)
        if self.dataset.feature_dim is None:
            raise InputError(f"{self.dataset.path}: the dataset has no node features; rebuild it with --features")
        self.fanouts = _options.fanouts(fanouts)
        self.batch_size = _options.count(batch_size, "batch_size", 1)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.batches = None if batches is None else [_options.count(b, "batch") for b in batches]
        self.seeds = _options.seeds(self.dataset, split, "split")
        if share is not None:
            same = os.path.abspath(share.dataset.path) == os.path.abspath(self.dataset.path)
            if not same or share.fanouts != self.fanouts:
                raise InputError("share= needs a Loader of the same dataset and fanouts")
            self._core = share._core
        else:
            # Batches are PyG `Data` of torch tensors: import them now, so that the default
            # reserve (what this process holds) counts them.
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
        #: Per-epoch totals of the last epoch iterated: batches, worker seconds sampling,
        #: waiting for their turn (the prefetch bound) and gathering, bytes read, cache hits.
        self.last_epoch: Dict[str, float] = {}

    def __iter__(self) -> Iterator[Any]:
        epoch, self.epoch = self.epoch, self.epoch + 1
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
        ``totals`` (``ringgnn.sampling.links.LinkLoader`` adds its pairs to the same batches)."""
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


def _input_ids(where: Dict[int, int], seeds: Any) -> Any:
    import torch

    return torch.tensor([where[int(s)] for s in seeds.tolist()], dtype=torch.int64)
