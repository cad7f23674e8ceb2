"""Neighbor sampling from Python: :class:`NeighborSampler` and the :class:`SampledSubgraph` it returns.

The sampling itself runs in the Rust core (``ringgnn._core.Sampler``: io_uring rings, worker
threads, the prefetch queue). This module only checks arguments, creates that core object lazily
and once per process, and wraps its results. Lazily, because PyTorch ``DataLoader`` workers fork:
a core sampler (its rings and threads) created before a fork is never used in the child, which
builds its own on first use.

The output follows PyG's ``SamplerOutput``: ``node`` holds global ids, the seeds first (a seed
given twice is kept once), then the nodes first reached at hop 1, hop 2, ...; ``row`` is the local
index of the sampled neighbor (the message source) and ``col`` the local index of the node it was
sampled for; edges are grouped by hop. A batch's sample depends only on (seed, epoch, batch index),
never on the thread count or the I/O backend.
"""

from __future__ import annotations

import logging
import operator
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _core
from ._core import InputError
from ._options import parse_size
from .dataset import Dataset, PathLike

logger = logging.getLogger("ringgnn")

BACKENDS = ("auto", "memory", "uring", "pread")

#: Core samplers inherited from a parent process. They are kept alive, never used and never
#: dropped in the child: their threads did not survive the fork, so dropping one could wait on them.
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

        return replace(self, node=t(self.node), row=t(self.row), col=t(self.col), edge=t(self.edge))

    @classmethod
    def _from_core(cls, out: Dict[str, Any]) -> "SampledSubgraph":
        nodes = list(out["num_sampled_nodes"])
        return cls(
            node=out["node"],
            row=out["row"],
            col=out["col"],
            num_sampled_nodes=nodes,
            num_sampled_edges=list(out["num_sampled_edges"]),
            batch_size=nodes[0] if nodes else 0,
            edge=out.get("edge"),
        )


class NeighborSampler:
    """Node-wise uniform neighbor sampling (GraphSAGE) over a dataset on disk.

    Args:
        dataset: a :class:`ringgnn.Dataset` or the path of one.
        fanouts: neighbors to draw per node at each hop, ``fanouts[0]`` for the seeds; ``-1``
            takes all neighbors.
        replace: draw with replacement (default: without; a node whose degree is at most the
            fanout keeps all its neighbors).
        backend: ``"auto"`` (the neighbor file in memory when it fits ``memory``, else io_uring,
            else pread), ``"memory"``, ``"uring"`` or ``"pread"``.
        direct: with io_uring, read with O_DIRECT (bypasses the page cache).
        threads: sampling threads of :meth:`epoch` (default: available cores).
        seed: random seed; a batch's sample depends only on (seed, epoch, batch index).
        memory: byte budget of the sampler, as bytes or a size such as ``"2G"`` (default: half the
            available memory; ``auto`` holds the neighbor file in RAM only when it fits).
        with_edge_ids: also return global edge ids (``SampledSubgraph.edge``).
    """

    def __init__(
        self,
        dataset: Union[Dataset, PathLike],
        fanouts: Sequence[int],
        *,
        replace: bool = False,
        backend: str = "auto",
        direct: bool = False,
        threads: Optional[int] = None,
        seed: int = 0,
        memory: Union[None, int, str] = None,
        with_edge_ids: bool = False,
    ):
        self.dataset = dataset if isinstance(dataset, Dataset) else Dataset.open(dataset)
        self.fanouts = _check_fanouts(fanouts)
        if backend not in BACKENDS:
            raise InputError(f"backend '{backend}' is unknown; use one of {', '.join(BACKENDS)}")
        if threads is not None and operator.index(threads) < 1:
            raise InputError(f"threads must be at least 1, not {threads}")
        if operator.index(seed) < 0:
            raise InputError(f"seed must be >= 0, not {seed}")
        self.replace = bool(replace)
        self.backend_choice = backend
        self.direct = bool(direct)
        self.threads = threads
        self.seed = int(seed)
        self.memory = None if memory is None else (parse_size(memory) if isinstance(memory, str) else int(memory))
        self.with_edge_ids = bool(with_edge_ids)
        self._core: Any = None
        self._pid: Optional[int] = None

    # --- the per-process core sampler ---------------------------------------------------------

    def _sampler(self) -> Any:
        pid = os.getpid()
        if self._core is not None and self._pid == pid:
            return self._core
        if self._core is not None:
            _INHERITED.append(self._core)
        self._core = _core.Sampler(
            self.dataset.path,
            list(self.fanouts),
            replace=self.replace,
            backend=self.backend_choice,
            direct=self.direct,
            threads=self.threads,
            seed=self.seed,
            memory=self.memory,
            with_edge_ids=self.with_edge_ids,
        )
        self._pid = pid
        reason = self._core.fallback_reason
        if reason and (pid, reason) not in _LOGGED:
            _LOGGED.add((pid, reason))
            logger.warning("ringgnn: sampling with %s: %s", self._core.backend, reason)
        return self._core

    def __getstate__(self) -> Dict[str, Any]:
        # A core sampler cannot cross a process boundary; the receiving process builds its own.
        state = dict(self.__dict__)
        state["_core"] = None
        state["_pid"] = None
        state["dataset"] = self.dataset.path
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state["dataset"] = Dataset.open(state["dataset"])
        self.__dict__.update(state)

    @property
    def backend(self) -> str:
        """The backend in use: 'memory', 'uring', 'uring-direct' or 'pread'."""
        return self._sampler().backend

    @property
    def fallback_reason(self) -> Optional[str]:
        """Why ``auto`` could not use io_uring, or None."""
        return self._sampler().fallback_reason

    @property
    def memory_estimate(self) -> int:
        """Bytes the sampler expects to use (offset index, workspaces, prefetch queue)."""
        return self._sampler().memory_estimate

    def io_stats(self) -> Dict[str, int]:
        """Counters of this process's sampler since it was created: ``reads`` issued, ``bytes``
        read, ``batches`` sampled."""
        return dict(self._sampler().io_stats())

    # --- sampling -------------------------------------------------------------------------------

    def sample(self, seeds: Any, *, epoch: int = 0, batch: int = 0) -> SampledSubgraph:
        """Sample the subgraph around ``seeds`` (node ids) as batch ``batch`` of epoch ``epoch``."""
        ids = self._in_range(_ids(seeds))
        return SampledSubgraph._from_core(self._sampler().sample(ids, epoch, batch))

    def epoch(
        self,
        seeds: Union[None, str, Any] = None,
        batch_size: int = 1024,
        shuffle: bool = True,
        epoch: int = 0,
        drop_last: bool = False,
    ) -> "EpochIterator":
        """Iterate over one epoch of mini-batches, sampled ahead in background threads.

        ``seeds`` is a split name ('train'), an array of node ids, or None for all nodes. With
        ``shuffle`` the seeds are permuted by (seed, epoch). Batch ``i`` is the same as
        ``sample(its seeds, epoch=epoch, batch=i)``.
        """
        if operator.index(batch_size) < 1:
            raise InputError(f"batch_size must be at least 1, not {batch_size}")
        ids = self.resolve_seeds(seeds)
        it = self._sampler().epoch(ids, batch_size, shuffle=shuffle, epoch=epoch, drop_last=drop_last)
        return EpochIterator(it)

    def resolve_seeds(self, seeds: Union[None, str, Any]) -> np.ndarray:
        """Node ids as int64: a split name, an array of ids, or None (all nodes)."""
        if seeds is None:
            return np.arange(self.dataset.num_nodes, dtype=np.int64)
        if isinstance(seeds, str):
            return np.ascontiguousarray(self.dataset.split(seeds), dtype=np.int64)
        return self._in_range(_ids(seeds))

    def _in_range(self, ids: np.ndarray) -> np.ndarray:
        n = self.dataset.num_nodes
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = ids[(ids < 0) | (ids >= n)][0]
            raise InputError(f"seed {bad} is not a node id: the dataset has {n:,} nodes (ids 0..{n - 1})")
        return ids

    def __repr__(self) -> str:
        return (
            f"NeighborSampler({self.dataset.path!r}, fanouts={self.fanouts}, replace={self.replace}, "
            f"backend={self.backend_choice!r}, direct={self.direct}, threads={self.threads}, seed={self.seed})"
        )


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


def _check_fanouts(fanouts: Sequence[int]) -> List[int]:
    if isinstance(fanouts, (str, bytes)) or not hasattr(fanouts, "__iter__"):
        raise InputError(f"fanouts must be a list of integers such as [20, 15, 10], not {fanouts!r}")
    out = []
    for f in fanouts:
        try:
            f = operator.index(f)
        except TypeError:
            raise InputError(f"fanout {f!r} is not an integer; use e.g. [20, 15, 10]") from None
        if f == 0 or f < -1:
            raise InputError(f"fanout {f} is invalid: use a positive count, or -1 for all neighbors")
        out.append(int(f))
    if not out:
        raise InputError("fanouts is empty: give one fanout per hop, e.g. [20, 15, 10]")
    return out


def _ids(seeds: Any) -> np.ndarray:
    if hasattr(seeds, "detach"):  # a torch tensor, without importing torch
        seeds = seeds.detach().cpu().numpy()
    a = np.asarray(seeds)
    if a.ndim != 1:
        raise InputError(f"seeds must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"seeds must be integer node ids, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)
