"""PyG adapters: a ``BaseSampler`` and a ``FeatureStore``/``GraphStore`` pair over a ringgnn dataset.

With these, PyG's own ``NodeLoader`` trains on a dataset larger than RAM, on a plain
``pip install torch_geometric`` (no pyg-lib or torch-sparse needed)::

    from torch_geometric.loader import NodeLoader
    from ringgnn.pyg import RingNeighborSampler, ring_stores

    ds = ringgnn.Dataset.open("data/sbm")
    loader = NodeLoader(
        data=ring_stores(ds),
        node_sampler=RingNeighborSampler(ds, [10, 5]),
        input_nodes=torch.from_numpy(ds.split("train")),
        batch_size=256,
        shuffle=True,
    )

Batches are ``Data`` objects with ``x`` (float32), ``y``, ``edge_index``, ``n_id`` and
``batch_size``; the first ``batch_size`` nodes are the seeds. Importing this module imports torch
and torch_geometric; ``import ringgnn`` does not.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.data.feature_store import TensorAttr
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NegativeSampling, NodeSamplerInput, SamplerOutput

from . import _core, _options
from ._core import InputError
from .dataset import Dataset, PathLike, open_homogeneous
from .links import LinkSampler
from .links import NegativeSampling as LinkNegatives
from .sampler import NeighborSampler

#: The single edge type of a ringgnn dataset, as PyG names edge types (source, relation, target).
EDGE_TYPE = ("node", "to", "node")


def _open(dataset: Union[Dataset, PathLike]) -> Dataset:
    return open_homogeneous(dataset, "the PyG stores")


class RingNeighborSampler(BaseSampler):
    """PyG ``BaseSampler`` running :class:`ringgnn.NeighborSampler` (same arguments).

    Reproducibility: batch ``b`` of epoch ``e`` is sampled with (seed, e, b), where ``b`` counts
    the batches this sampler produced since :meth:`set_epoch`, worker-aware: in DataLoader worker
    ``w`` of ``n`` the ``k``-th batch is ``w + k * n``, which is its position in the epoch since
    the DataLoader hands batches to workers in turn. So ``num_workers=0`` and ``num_workers=2``
    give the same batches. Call ``set_epoch(e)`` at the start of every epoch (as with
    ``DistributedSampler``): workers are forked from the main process each epoch and see the new
    epoch; without it, workers repeat epoch 0's randomness (the seed order still changes with
    ``shuffle=True``). With ``persistent_workers=True`` the workers are not forked again, so
    ``set_epoch`` does not reach them: they keep counting batches across epochs instead.

    Fork safety: the core sampler (rings, threads) is created lazily in the process that samples;
    one inherited through a fork is never used.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], fanouts: Sequence[int], **kwargs: Any):
        self.sampler = NeighborSampler(_open(dataset), fanouts, **kwargs)
        self.epoch = 0
        self._count = 0
        self._pid = os.getpid()

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: its batches are numbered from 0 again."""
        self.epoch = int(epoch)
        self._count = 0

    def _next_batch_index(self) -> int:
        if self._pid != os.getpid():  # a forked worker starts counting from the epoch's start
            self._pid = os.getpid()
            self._count = 0
        k = self._count
        self._count += 1
        info = torch.utils.data.get_worker_info()
        return k if info is None else info.id + k * info.num_workers

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        seeds = index.node.numpy()
        if len(np.unique(seeds)) != len(seeds):
            # The loader takes the first `batch_size = len(input_id)` nodes as the seeds; with a
            # seed repeated in a batch they would not line up.
            raise InputError("a batch holds the same seed node twice; give input_nodes without duplicates")
        out = self.sampler.sample(seeds, epoch=self.epoch, batch=self._next_batch_index())
        return _output(out, (index.input_id, index.time))

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: Optional[NegativeSampling] = None) -> SamplerOutput:
        """Link batches for PyG's ``LinkLoader``/``LinkNeighborLoader`` semantics (see
        :mod:`ringgnn.links`): PyG's ``NegativeSampling`` (mode, amount, src/dst weights) is
        honoured; negatives come from the (seed, epoch, batch) stream, not torch's global RNG."""
        if index.time is not None:
            raise InputError("temporal link sampling (edge_label_time) is not supported")
        ours = None
        weights = {}
        if neg_sampling is not None:
            ours = LinkNegatives(mode=str(neg_sampling.mode.value if hasattr(neg_sampling.mode, "value") else neg_sampling.mode),
                                 amount=neg_sampling.amount)
            for k in ("src_weight", "dst_weight"):
                w = getattr(neg_sampling, k, None)
                weights[k] = None if w is None else w.detach().cpu().numpy()
        links = LinkSampler(self.sampler, ours)
        label = None if index.label is None else index.label.numpy()
        b = links.sample(index.row.numpy(), index.col.numpy(), epoch=self.epoch, batch=self._next_batch_index(),
                         edge_label=label, **weights)
        if b.edge_label_index is not None:
            el = None if b.edge_label is None else torch.from_numpy(b.edge_label)
            if el is not None and index.label is not None:
                el = el.to(index.label.dtype)
            metadata = (index.input_id, torch.from_numpy(b.edge_label_index), el, None)
        else:
            metadata = (index.input_id, torch.from_numpy(b.src_index), torch.from_numpy(b.dst_pos_index),
                        torch.from_numpy(b.dst_neg_index), None)
        return _output(b.sample, metadata)


def _output(sample: Any, metadata: Tuple[Any, ...]) -> SamplerOutput:
    """A ringgnn sample as PyG's ``SamplerOutput`` (torch tensors, no ``batch`` vector)."""
    out = sample.to_torch()
    return SamplerOutput(
        node=out.node,
        row=out.row,
        col=out.col,
        edge=out.edge,
        batch=None,
        num_sampled_nodes=out.num_sampled_nodes,
        num_sampled_edges=out.num_sampled_edges,
        metadata=metadata,
    )


class RingFeatureStore(FeatureStore):
    """Read-only PyG ``FeatureStore`` over a dataset: attribute ``x`` (features as float32,
    converted from f16/bf16) and ``y`` (labels as int64, -1 = unlabeled), group ``None``.

    Feature rows are gathered by the Rust feature reader: ids deduplicated, the 4 KiB pages that
    hold them read once each in coalesced runs (io_uring, pread, or O_DIRECT with
    ``direct=True``; ``backend="memory"`` loads the file), an optional hot-row cache of
    ``cache`` bytes (rows of highest in-degree). The reader is created lazily in each process,
    so DataLoader workers get their own.
    """

    def __init__(self, dataset: Union[Dataset, PathLike], *, backend: str = "auto", direct: bool = False,
                 cache: Union[int, str] = 0):
        super().__init__()
        self.dataset = _open(dataset)
        self._opts = dict(backend=_options.backend(backend), direct=bool(direct), cache=_options.size(cache, "cache"))
        self._reader_of: Optional[Tuple[int, Any]] = None

    # --- reading ------------------------------------------------------------------------------

    def reader(self) -> Any:
        """This process's ``_core.FeatureReader`` (``.stats()`` has the read counters)."""
        pid = os.getpid()
        if self._reader_of is None or self._reader_of[0] != pid:
            self._reader_of = (pid, _core.FeatureReader(self.dataset.path, **self._opts))
        return self._reader_of[1]

    def _features(self, idx: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.reader().gather(np.ascontiguousarray(idx, dtype=np.int64)))

    def _index(self, index: Any) -> np.ndarray:
        n = self.dataset.num_nodes
        if index is None:
            return np.arange(n, dtype=np.int64)
        if isinstance(index, slice):
            return np.arange(n, dtype=np.int64)[index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        idx = np.asarray(index)
        if idx.dtype == np.bool_:
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"node index out of range: the dataset has {n:,} nodes")
        return np.where(idx < 0, idx + n, idx)

    def _get_tensor(self, attr: TensorAttr) -> Optional[torch.Tensor]:
        scalar = isinstance(attr.index, (int, np.integer))
        idx = self._index([attr.index] if scalar else attr.index)
        if attr.attr_name == "x" and self.dataset.feature_dim is not None:
            out = self._features(idx)
        elif attr.attr_name == "y" and self.dataset.num_classes is not None:
            out = torch.from_numpy(self.dataset.labels[idx])
        else:
            raise KeyError(f"the dataset has no node attribute '{attr.attr_name}' (it has: {self._names()})")
        return out[0] if scalar else out

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple[int, ...]]:
        n = self.dataset.num_nodes
        if attr.attr_name == "x" and self.dataset.feature_dim is not None:
            return (n, self.dataset.feature_dim)
        if attr.attr_name == "y" and self.dataset.num_classes is not None:
            return (n,)
        return None

    def _names(self) -> List[str]:
        return [a.attr_name for a in self.get_all_tensor_attrs()]

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        # Fresh objects on every call: NodeLoader sets `.index` on the ones it gets.
        out = []
        if self.dataset.feature_dim is not None:
            out.append(TensorAttr(group_name=None, attr_name="x"))
        if self.dataset.num_classes is not None:
            out.append(TensorAttr(group_name=None, attr_name="y"))
        return out

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError("a ringgnn dataset is read-only; build a new one with ringgnn convert")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError("a ringgnn dataset is read-only; build a new one with ringgnn convert")

    def __getstate__(self) -> Dict[str, Any]:
        return {"dataset": self.dataset.path, "_tensor_attr_cls": self._tensor_attr_cls}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state, dataset=Dataset.open(state["dataset"]), _rows=None)


class RingGraphStore(GraphStore):
    """Read-only PyG ``GraphStore`` over a dataset: one edge type ``('node', 'to', 'node')`` in
    CSC layout (``(row, colptr)``). The sampler never calls it; :meth:`get_edge_index` loads the
    whole edge list into memory, so it is for inspecting small graphs."""

    def __init__(self, dataset: Union[Dataset, PathLike]):
        super().__init__()
        self.dataset = _open(dataset)

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        n = self.dataset.num_nodes
        return [EdgeAttr(EDGE_TYPE, EdgeLayout.CSC, is_sorted=True, size=(n, n))]

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        if tuple(edge_attr.edge_type) != EDGE_TYPE or edge_attr.layout != EdgeLayout.CSC:
            return None
        m = self.dataset.manifest
        path = os.path.join(self.dataset.path, m["files"]["indices"]["path"])
        dtype = "<u4" if m["graph"]["indices_dtype"] == "u32" else "<u8"
        e = self.dataset.num_edges
        row = np.fromfile(path, dtype=dtype, count=e).astype(np.int64) if e else np.zeros(0, np.int64)
        return torch.from_numpy(row), torch.from_numpy(self.dataset.indptr().astype(np.int64))

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError("a ringgnn dataset is read-only; build a new one with ringgnn convert")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError("a ringgnn dataset is read-only; build a new one with ringgnn convert")

    def __getstate__(self) -> Dict[str, Any]:
        return {"dataset": self.dataset.path, "_edge_attr_cls": self._edge_attr_cls}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state, dataset=Dataset.open(state["dataset"]))


def ring_stores(dataset: Union[Dataset, PathLike], **features: Any) -> Tuple[RingFeatureStore, RingGraphStore]:
    """``(RingFeatureStore, RingGraphStore)`` over one dataset: the ``data`` of a ``NodeLoader``.
    Keyword arguments (``backend``, ``direct``, ``cache``) go to the feature store."""
    ds = _open(dataset)
    return RingFeatureStore(ds, **features), RingGraphStore(ds)
