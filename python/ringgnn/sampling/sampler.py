""":class:`NeighborSampler` over the Rust core sampler (made once per process) and the
:class:`SampledSubgraph` it returns; at seed times, the typed sampler's one-type case."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from .. import _core, _options
from ..data.dataset import Dataset, PathLike, open_homogeneous, warn_sampling_without_times
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE
from .base import ProcessLocal
from .hetero import HeteroNeighborSampler, HeteroSample

logger = logging.getLogger("ringgnn")

#: Core samplers inherited from a parent process, kept alive and never used: their threads did
#: not survive the fork, so dropping one could wait on them.
_INHERITED: List[Any] = []
#: Fallback reasons already logged by this process, so that each is logged once.
_LOGGED: set = set()


@dataclass
class SampledSubgraph:
    """One sampled mini-batch, in PyG's ``SamplerOutput`` layout.

    Arrays are ``np.int64`` (``torch.int64`` tensors after :meth:`to_torch`). The first
    ``batch_size`` entries of ``node`` are the seeds.
    """

    node: Any
    row: Any
    col: Any
    num_sampled_nodes: List[int]
    num_sampled_edges: List[int]
    batch_size: int
    edge: Any = None
    """Global edge ids (positions in ``indices.bin``), when the sampler was asked for them."""
    seed_time: Any = None
    """Sampled at seed times: parallel to ``node``, the seed time each node was sampled at (its
    subgraph's); None otherwise."""

    @property
    def num_nodes(self) -> int:
        return len(self.node)

    @property
    def num_edges(self) -> int:
        return len(self.row)

    @property
    def edge_index(self) -> Any:
        """``[2, num_edges]``: ``row`` (message sources) over ``col`` (targets), local indices."""
        if isinstance(self.row, np.ndarray):
            return np.stack([self.row, self.col])
        import torch

        return torch.stack([self.row, self.col])

    def to_torch(self) -> "SampledSubgraph":
        """The same subgraph with ``torch.int64`` tensors (sharing memory with the arrays)."""
        import torch

        def t(a):
            return a if a is None or isinstance(a, torch.Tensor) else torch.from_numpy(a)

        return replace(self, node=t(self.node), row=t(self.row), col=t(self.col), edge=t(self.edge),
                       seed_time=t(self.seed_time))

    @classmethod
    def _from_core(cls, out: Dict[str, Any]) -> "SampledSubgraph":
        nodes = list(out["num_sampled_nodes"])
        return cls(node=out["node"], row=out["row"], col=out["col"], num_sampled_nodes=nodes,
                   num_sampled_edges=list(out["num_sampled_edges"]), batch_size=nodes[0] if nodes else 0,
                   edge=out.get("edge"))

    @classmethod
    def _one_type(cls, s: HeteroSample) -> "SampledSubgraph":
        """A homogeneous dataset's sample from the typed sampler (its one type) in this layout."""
        r, t = HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE
        return cls(node=s.node[t], row=s.row[r], col=s.col[r], num_sampled_nodes=list(s.num_sampled_nodes[t]),
                   num_sampled_edges=list(s.num_sampled_edges[r]), batch_size=s.num_sampled_nodes[t][0],
                   edge=None if s.edge is None else s.edge[r],
                   seed_time=None if s.seed_time is None else s.seed_time[t])


class NeighborSampler(ProcessLocal):
    """Node-wise uniform neighbor sampling (GraphSAGE) over a dataset on disk.

    Args:
        dataset: a :class:`ringgnn.Dataset` or its path.
        fanouts: neighbors to draw per node at each hop (``-1``: all; ``"20,15,10"`` works too).
        replace: draw with replacement (default: without).
        backend: ``"auto"`` (the neighbor file in memory when the memory plan fits it, else
            io_uring, else pread), ``"memory"``, ``"uring"`` or ``"pread"``.
        direct: with io_uring, read with O_DIRECT.
        threads: sampling threads of :meth:`epoch` (default: available cores).
        seed: random seed; a batch's sample depends only on (seed, epoch, batch index).
        memory, reserve: the budget of the whole process (bytes or ``"2G"``; default: ``reserve``
            plus half the available memory) and what of it the caller needs (default: what the
            process uses when the sampler starts).
        batch_size: the largest batch you will sample (default 1024), which the plan is made for.
        hyperbatch: batches sampled together when the neighbor file is read from disk, each
            page read once per hop for all: ``"auto"`` (as many as the plan holds) or a number.
        spill: whether a hyperbatch writes finished samples to a spill file (in ``spill_dir``,
            default beside the dataset) until their turn: ``"auto"``, ``"on"`` or ``"off"``.
        with_edge_ids: also return global edge ids (``SampledSubgraph.edge``).
        temporal_strategy: how a sample at seed times draws among the edges not newer than its
            seed: ``"uniform"`` (default) or ``"last"`` (the most recent ones).

    Samples do not depend on ``backend``, ``threads``, ``hyperbatch`` or ``spill``.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Union[str, Sequence[int]], *, replace: bool = False,
                 backend: str = "auto", direct: bool = False, threads: Optional[int] = None, seed: int = 0,
                 memory: Union[None, int, str] = None, reserve: Union[None, int, str] = None, batch_size: int = 1024,
                 hyperbatch: Union[int, str] = "auto", spill: str = "auto", spill_dir: Optional[PathLike] = None,
                 with_edge_ids: bool = False, temporal_strategy: str = "uniform"):
        self.dataset = open_homogeneous(dataset, "NeighborSampler")
        self.fanouts = _options.fanouts(fanouts)
        self.replace = bool(replace)
        self.backend_choice = _options.backend(backend)
        self.direct = bool(direct)
        self.threads = _options.optional_count(threads, "threads")
        self.seed = _options.count(seed, "seed")
        self.memory = _options.size(memory, "memory")
        self.reserve = _options.size(reserve, "reserve")
        self.batch_size = _options.count(batch_size, "batch_size", 1)
        self.hyperbatch = _options.hyperbatch(hyperbatch)
        self.spill = str(spill)
        self.spill_dir = None if spill_dir is None else os.fspath(spill_dir)
        self.with_edge_ids = bool(with_edge_ids)
        self.temporal_strategy = _options.choice(temporal_strategy, ("uniform", "last"), "temporal_strategy")
        self.__dict__.update(self._fresh())

    def _fresh(self) -> Dict[str, Any]:
        return dict(_core=None, _pid=None, _timed=None)

    def _sampler(self) -> Any:
        pid = os.getpid()
        if self._core is not None and self._pid == pid:
            return self._core
        if self._core is not None:
            _INHERITED.append(self._core)
        self._core = _core.Sampler(self.dataset.path, list(self.fanouts), replace=self.replace,
                                   backend=self.backend_choice, direct=self.direct, threads=self.threads,
                                   seed=self.seed, memory=self.memory, reserve=_options.reserve(self.reserve),
                                   with_edge_ids=self.with_edge_ids, batch_size=self.batch_size,
                                   hyperbatch=self.hyperbatch, spill=self.spill, spill_dir=self.spill_dir)
        self._pid = pid
        reason = self._core.fallback_reason
        if reason and (pid, reason) not in _LOGGED:
            _LOGGED.add((pid, reason))
            logger.warning("ringgnn: sampling with %s: %s", self._core.backend, reason)
        return self._core

    @property
    def backend(self) -> str:
        """The backend in use: 'memory', 'uring', 'uring-direct' or 'pread'."""
        return self._sampler().backend

    @property
    def fallback_reason(self) -> Optional[str]:
        """Why ``auto`` could not use io_uring, or None."""
        return self._sampler().fallback_reason

    def plan(self) -> Dict[str, Any]:
        """How the memory budget was split (bytes per part, ``text`` for people)."""
        return dict(self._sampler().plan())

    def io_stats(self) -> Dict[str, int]:
        """Counters of this process's sampler: ``reads``, ``bytes``, ``batches``; for
        hyperbatches ``sequential_bytes``, ``random_bytes``, ``hyperbatches``,
        ``hyperbatch_batches`` and ``spilled_bytes``."""
        return dict(self._sampler().io_stats())

    def timed(self) -> HeteroNeighborSampler:
        """The sampler at seed times: the typed sampler of this dataset's one type with this
        sampler's options, made on first use."""
        if self._timed is None:
            self._timed = HeteroNeighborSampler(
                self.dataset, {HOMOGENEOUS_RELATION: list(self.fanouts)}, replace=self.replace,
                backend=self.backend_choice, direct=self.direct, seed=self.seed, memory=self.memory,
                with_edge_ids=self.with_edge_ids, temporal_strategy=self.temporal_strategy)
        return self._timed

    def sample(self, seeds: Any, *, epoch: int = 0, batch: int = 0, input_time: Any = None) -> SampledSubgraph:
        """Sample the subgraph around ``seeds`` (node ids) as batch ``batch`` of epoch ``epoch``;
        with ``input_time`` (one integer time per seed, or one for all), at those times (docs/USAGE.md,
        "Sampling at seed times"; refused on a dataset without times)."""
        if input_time is not None:
            s = self.timed().sample(seeds, HOMOGENEOUS_TYPE, epoch=epoch, batch=batch, input_time=input_time)
            return SampledSubgraph._one_type(s)
        warn_sampling_without_times(self.dataset, "NeighborSampler")
        ids = _options.node_ids(seeds)
        out = self._sampler().sample(ids, _options.count(epoch, "epoch"), _options.count(batch, "batch"))
        return SampledSubgraph._from_core(out)

    def epoch(self, seeds: Union[None, str, Any] = None, batch_size: int = 1024, shuffle: bool = True, epoch: int = 0,
              drop_last: bool = False, batches: Optional[Sequence[int]] = None) -> "EpochIterator":
        """Iterate over one epoch of mini-batches, sampled ahead in background threads, without
        times. ``seeds``: a split name, an array of node ids, or None for all nodes; ``shuffle``
        permutes them by (seed, epoch). Batch ``i`` is ``sample(its seeds, epoch=epoch,
        batch=i)``; ``batches`` selects batches by global index."""
        warn_sampling_without_times(self.dataset, "NeighborSampler")
        it = self._sampler().epoch(
            self.resolve_seeds(seeds), _options.count(batch_size, "batch_size", 1), shuffle=bool(shuffle),
            epoch=_options.count(epoch, "epoch"), drop_last=bool(drop_last),
            batches=None if batches is None else [_options.count(b, "batch") for b in batches])
        return EpochIterator(it)

    def resolve_seeds(self, seeds: Union[None, str, Any]) -> np.ndarray:
        """Node ids as int64: a split name, an array of ids, or None (all nodes)."""
        return _options.seeds(self.dataset, seeds)

    def __repr__(self) -> str:
        return (f"NeighborSampler({self.dataset.path!r}, fanouts={self.fanouts}, replace={self.replace}, "
                f"backend={self.backend_choice!r}, direct={self.direct}, threads={self.threads}, seed={self.seed})")


class EpochIterator:
    """The batches of one epoch, in order, as :class:`SampledSubgraph` (``len()`` = batch count)."""

    def __init__(self, core_iter: Any):
        self._it = core_iter

    def __len__(self) -> int:
        return len(self._it)

    def __iter__(self) -> Iterator[SampledSubgraph]:
        return self

    def __next__(self) -> SampledSubgraph:
        _index, _seeds, out = next(self._it)
        return SampledSubgraph._from_core(out)
