"""PyG adapters over a ringgnn dataset of either kind: a ``BaseSampler``
(:class:`RingNeighborSampler`) and a ``FeatureStore``/``GraphStore`` pair (:func:`ring_stores`)
for PyG's own ``NodeLoader`` (docs/USAGE.md, "Sampling"). Importing it imports torch and PyG."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.data.feature_store import TensorAttr
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.sampler import (BaseSampler, EdgeSamplerInput, HeteroSamplerOutput, NegativeSampling,
                                     NodeSamplerInput, SamplerOutput)

from . import _core, _options
from ._core import InputError
from .data.dataset import Dataset, HeteroDataset, PathLike
from .data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE, edge_type_str, parse_edge_type
from .sampling.base import ProcessLocal
from .sampling.hetero import HeteroNeighborSampler, HeteroSample, seed_times
from .sampling.links import LinkSampler, NegativeSampling as LinkNegatives
from .sampling.sampler import NeighborSampler

#: The single edge type of a homogeneous ringgnn dataset, as PyG names edge types (source,
#: relation, target).
EDGE_TYPE = parse_edge_type(HOMOGENEOUS_RELATION)

AnyDataset = Union[Dataset, HeteroDataset]


class RingNeighborSampler(BaseSampler):
    """PyG ``BaseSampler`` running :class:`ringgnn.NeighborSampler` on a homogeneous dataset, or
    :class:`ringgnn.HeteroNeighborSampler` on a heterogeneous one (same arguments; ``fanouts`` is
    PyG's ``num_neighbors``: a list, or a dict keyed by edge type, every relation given). A
    heterogeneous dataset's seeds come with their type (``input_nodes=("paper", ids)``); link
    sampling (:meth:`sample_from_edges`) takes homogeneous datasets only.

    Batch ``b`` of epoch ``e`` is sampled with (seed, e, b), ``b`` counting the batches since
    :meth:`set_epoch` across DataLoader workers (worker ``w`` of ``n``: ``w + k * n``), so
    ``num_workers`` does not change the batches. Call ``set_epoch(e)`` at the start of every
    epoch (with ``persistent_workers=True`` workers keep counting instead).

    At times: where the loader gives seed times (``input_time``) each seed is sampled at its
    time, PyG's temporal sampling with ``disjoint=True`` (``temporal_strategy``: ``"uniform"``
    or ``"last"``). ``time_attr`` (PyG's: ``"time"`` or ``"edge_time"``) samples against the
    dataset's stored times, a batch given no times at its seeds' node times, as PyG does. The
    core sampler is made lazily in the process (and thread) that samples.
    """

    def __init__(self, dataset: Union[AnyDataset, PathLike], fanouts: Any, *, temporal_strategy: str = "uniform",
                 time_attr: Optional[str] = None, **kwargs: Any):
        ds = Dataset.opened(dataset)
        if time_attr is not None and (time_attr not in ("time", "edge_time") or not ds.has_times):
            raise InputError(f"time_attr={time_attr!r}: RingNeighborSampler samples at {ds.path}'s stored times (its "
                             "node times, PyG's 'time', and edge times, PyG's 'edge_time', as ringgnn.from_pyg "
                             "imports them), " + ("which it has none of: build it with --edge-time (and --node-time)"
                                                  if not ds.has_times else "so time_attr is 'time' or 'edge_time'"))
        #: PyG's ``time_attr``: None, or ``"time"``/``"edge_time"``, sampling every batch at times.
        self.time_attr = time_attr
        kind = HeteroNeighborSampler if ds.is_hetero else NeighborSampler
        self.sampler: Union[NeighborSampler, HeteroNeighborSampler] = kind(
            ds, fanouts, temporal_strategy=temporal_strategy, **kwargs)
        self.epoch = 0
        self._count = 0
        self._pid = os.getpid()

    @property
    def is_hetero(self) -> bool:
        return isinstance(self.sampler, HeteroNeighborSampler)

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

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> Union[SamplerOutput, HeteroSamplerOutput]:
        seeds = index.node.numpy()
        times = None if index.time is None else index.time.numpy()
        # The loader takes the first `batch_size = len(input_id)` nodes as the seeds; with a seed
        # repeated in a batch (at one time) they would not line up.
        if (len(np.unique(seeds)) if times is None else len(set(zip(seeds.tolist(), times.tolist())))) != len(seeds):
            raise InputError("a batch holds the same seed node twice" + ("" if times is None else " at one time")
                             + "; give input_nodes without duplicates")
        if self.is_hetero and index.input_type is None:
            raise InputError(f"{self.sampler.dataset.path}: a heterogeneous dataset; give the seeds with their node "
                             f"type, input_nodes=(TYPE, ids) (types: {', '.join(self.sampler.dataset.node_types)})")
        if times is None and self.time_attr is not None:
            times = self._node_times(index.input_type, seeds)
        metadata = (index.input_id, None if times is None else torch.from_numpy(times))
        typed = (index.input_type,) if self.is_hetero else ()
        s = self.sampler.sample(seeds, *typed, epoch=self.epoch, batch=self._next_batch_index(), input_time=times)
        return _output(s, metadata)

    def _node_times(self, node_type: Optional[str], seeds: np.ndarray) -> np.ndarray:
        """With ``time_attr`` and no ``input_time``, PyG's default: the seeds' node times."""
        ds, t = self.sampler.dataset, node_type or HOMOGENEOUS_TYPE
        if ds.node_type(t).node_times() is None:
            raise InputError(f"time_attr={self.time_attr!r} but the loader gave no input_time, and node type '{t}' "
                             f"of {ds.path} has no node times to sample its seeds at: give input_time")
        return seed_times(ds, t, seeds, None, False, "RingNeighborSampler")

    def sample_from_edges(self, index: EdgeSamplerInput,
                          neg_sampling: Optional[NegativeSampling] = None) -> SamplerOutput:
        """Link batches with PyG's ``LinkNeighborLoader`` semantics (:class:`ringgnn.LinkSampler`):
        PyG's ``NegativeSampling`` (mode, amount, src/dst weights) is honoured, negatives drawn
        from the (seed, epoch, batch) stream. At times (``edge_label_time``): each pair and its
        negatives are sampled at the pair's time minus one, as :class:`ringgnn.LinkLoader` does."""
        if self.is_hetero:
            raise InputError("link sampling (LinkLoader) over a heterogeneous dataset is not supported; "
                             "sample_from_edges takes a homogeneous dataset")
        ours = None
        weights = {}
        if neg_sampling is not None:
            mode = neg_sampling.mode
            ours = LinkNegatives(mode=str(mode.value if hasattr(mode, "value") else mode), amount=neg_sampling.amount)
            for k in ("src_weight", "dst_weight"):
                w = getattr(neg_sampling, k, None)
                weights[k] = None if w is None else w.detach().cpu().numpy()
        links = LinkSampler(self.sampler, ours)
        label = None if index.label is None else index.label.numpy()
        b = links.sample(index.row.numpy(), index.col.numpy(), epoch=self.epoch, batch=self._next_batch_index(),
                         edge_label=label, time=None if index.time is None else index.time.numpy(), **weights)
        time = None if b.time is None else torch.from_numpy(b.time)
        if b.edge_label_index is not None:
            el = None if b.edge_label is None else torch.from_numpy(b.edge_label)
            if el is not None and index.label is not None:
                el = el.to(index.label.dtype)
            metadata = (index.input_id, torch.from_numpy(b.edge_label_index), el, time)
        else:
            metadata = (index.input_id, torch.from_numpy(b.src_index), torch.from_numpy(b.dst_pos_index),
                        torch.from_numpy(b.dst_neg_index), time)
        return _output(b.sample, metadata)


def _output(s: Any, metadata: Tuple[Any, ...]) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """A ringgnn sample as PyG's ``SamplerOutput`` (no ``batch`` vector); a :class:`HeteroSample`
    as ``HeteroSamplerOutput``, keyed by node types and edge type tuples, every type and relation
    present."""
    if not isinstance(s, HeteroSample):
        out = s.to_torch()
        return SamplerOutput(node=out.node, row=out.row, col=out.col, edge=out.edge, batch=None,
                             num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges,
                             metadata=metadata)
    et = {r: parse_edge_type(r) for r in s.row}
    return HeteroSamplerOutput(
        node={t: torch.from_numpy(v) for t, v in s.node.items()},
        row={et[r]: torch.from_numpy(v) for r, v in s.row.items()},
        col={et[r]: torch.from_numpy(v) for r, v in s.col.items()},
        edge=None if s.edge is None else {et[r]: torch.from_numpy(v) for r, v in s.edge.items()}, batch=None,
        num_sampled_nodes={t: list(v) for t, v in s.num_sampled_nodes.items()},
        num_sampled_edges={et[r]: list(v) for r, v in s.num_sampled_edges.items()}, metadata=metadata)


def _index(n: int, index: Any) -> np.ndarray:
    """``index`` (None, a slice, ids, negative ids or a mask) as int64 ids in ``0 .. n-1``."""
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


def _read_only(*_: Any) -> bool:
    """The stores' writers: a ringgnn dataset is read-only."""
    raise NotImplementedError("a ringgnn dataset is read-only; build a new one with ringgnn convert")


class RingFeatureStore(ProcessLocal, FeatureStore):
    """Read-only PyG ``FeatureStore`` over a dataset: attribute ``x`` (features as float32) and
    ``y`` (labels as int64, -1 = unlabeled). A homogeneous dataset has group ``None``; a
    heterogeneous one a group per node type (``group_name="paper"``) with the attributes its type
    has. Rows are gathered by the Rust feature reader (``backend``, ``direct``; a hot-row cache
    of ``cache`` bytes, rows of highest in-degree, per node type), made lazily in each process.
    """

    def __init__(self, dataset: Union[AnyDataset, PathLike], *, backend: str = "auto", direct: bool = False,
                 cache: Union[int, str] = 0):
        super().__init__()
        self.dataset = Dataset.opened(dataset)
        self._opts = dict(backend=_options.backend(backend), direct=bool(direct), cache=_options.size(cache, "cache"))
        self.__dict__.update(self._fresh())

    def _fresh(self) -> Dict[str, Any]:
        # This process's readers by node type.
        return dict(_readers=(os.getpid(), {}))

    # --- reading ------------------------------------------------------------------------------

    def reader(self, node_type: Optional[str] = None) -> Any:
        """This process's ``_core.FeatureReader`` (``.stats()`` has the read counters): of the
        dataset, or of node type ``node_type`` of a heterogeneous one."""
        part = self._part(node_type).part
        pid, readers = self._readers
        if pid != os.getpid():
            self._readers = pid, readers = os.getpid(), {}
        if node_type not in readers:
            readers[node_type] = _core.FeatureReader(self.dataset.path, part=part, **self._opts)
        return readers[node_type]

    def _part(self, group: Optional[str]) -> Dataset:
        """The dataset that holds group ``group``'s rows: the dataset itself when homogeneous
        (whatever the group), else node type ``group``."""
        ds = self.dataset
        if ds.is_hetero and group not in ds.node_types:
            raise KeyError(f"{ds.path}: a heterogeneous dataset has no node type {group!r}; group_name is one of "
                           f"{', '.join(ds.node_types)}")
        return ds.node_type(group) if ds.is_hetero else ds

    def _get_tensor(self, attr: TensorAttr) -> Optional[torch.Tensor]:
        part = self._part(attr.group_name)
        scalar = isinstance(attr.index, (int, np.integer))
        idx = _index(part.num_nodes, [attr.index] if scalar else attr.index)
        if attr.attr_name == "x" and part.feature_dim is not None:
            out = torch.from_numpy(self.reader(attr.group_name).gather(np.ascontiguousarray(idx, dtype=np.int64)))
        elif attr.attr_name == "y" and part.num_classes is not None:
            out = torch.from_numpy(part.labels[idx])
        else:
            where = f"node type {attr.group_name!r}" if self.dataset.is_hetero else "the dataset"
            raise KeyError(f"{where} has no node attribute '{attr.attr_name}' (it has: {self._names(attr.group_name)})")
        return out[0] if scalar else out

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple[int, ...]]:
        try:
            part = self._part(attr.group_name)
        except KeyError:
            return None
        if attr.attr_name == "x" and part.feature_dim is not None:
            return (part.num_nodes, part.feature_dim)
        if attr.attr_name == "y" and part.num_classes is not None:
            return (part.num_nodes,)
        return None

    def _names(self, group: Optional[str]) -> str:
        hetero = self.dataset.is_hetero
        names = [a.attr_name for a in self.get_all_tensor_attrs() if not hetero or a.group_name == group]
        return ", ".join(names) or "none"

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        # Fresh objects on every call: NodeLoader sets `.index` on the ones it gets.
        ds = self.dataset
        groups: List[Optional[str]] = list(ds.node_types) if ds.is_hetero else [None]
        out = []
        for g in groups:
            part = self._part(g)
            if part.feature_dim is not None:
                out.append(TensorAttr(group_name=g, attr_name="x"))
            if part.num_classes is not None:
                out.append(TensorAttr(group_name=g, attr_name="y"))
        return out

    _put_tensor = _remove_tensor = _read_only



class RingGraphStore(ProcessLocal, GraphStore):
    """Read-only PyG ``GraphStore`` over a dataset, in CSC layout: one edge type
    ``('node', 'to', 'node')`` for a homogeneous dataset, each relation ``(src, rel, dst)`` of a
    heterogeneous one. The sampler never calls it; :meth:`get_edge_index` loads a whole relation
    into memory (for small graphs)."""

    def __init__(self, dataset: Union[AnyDataset, PathLike]):
        super().__init__()
        self.dataset = Dataset.opened(dataset)

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        n = self.dataset.num_nodes_dict
        return [EdgeAttr(et, EdgeLayout.CSC, is_sorted=True, size=(n[et[0]], n[et[2]]))
                for et in self.dataset.edge_types]

    def _relation(self, edge_type: Any) -> Optional[Dataset]:
        """The CSC of ``edge_type`` (a tuple or ``"SRC:REL:DST"``), or None if there is none."""
        name = edge_type_str(edge_type)
        return self.dataset.relation(name) if name in self.dataset.relations else None

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        rel = self._relation(edge_attr.edge_type) if edge_attr.layout == EdgeLayout.CSC else None
        if rel is None:
            return None
        m = rel.manifest
        path = os.path.join(rel.path, m["files"]["indices"]["path"])
        dtype = "<u4" if m["graph"]["indices_dtype"] == "u32" else "<u8"
        e = rel.num_edges
        row = np.fromfile(path, dtype=dtype, count=e).astype(np.int64) if e else np.zeros(0, np.int64)
        return torch.from_numpy(row), torch.from_numpy(rel.indptr().astype(np.int64))

    _put_edge_index = _remove_edge_index = _read_only


def ring_stores(dataset: Union[AnyDataset, PathLike], **features: Any) -> Tuple[RingFeatureStore, RingGraphStore]:
    """``(RingFeatureStore, RingGraphStore)`` over one dataset: the ``data`` of a ``NodeLoader``.
    Keyword arguments (``backend``, ``direct``, ``cache``) go to the feature store."""
    ds = Dataset.opened(dataset)
    return RingFeatureStore(ds, **features), RingGraphStore(ds)


__all__: Sequence[str] = ("EDGE_TYPE", "RingFeatureStore", "RingGraphStore", "RingNeighborSampler", "ring_stores")
