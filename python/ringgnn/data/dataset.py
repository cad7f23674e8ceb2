"""A ringgnn dataset on disk, as Python sees it: counts, splits, labels and neighbor lists.

The format is specified in ``docs/FORMAT.md``; reads go through the Rust core
(``ringgnn._core.DatasetHandle``), so nothing here depends on the byte layout.
"""

from __future__ import annotations

import json
import logging
import operator
import os
from functools import cached_property
from typing import Any, Dict, List, Optional, Union

import numpy as np

from .. import _core
from .._files import os_errors
from .schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE, edge_type_str, parse_edge_type

PathLike = Union[str, "os.PathLike[str]"]


def entry_field(entry: Dict[str, Any], key: str, field: str) -> Any:
    """``entry[key][field]``, or None where ``entry`` (a manifest, or a node type's entry in one)
    has no ``key`` (a dataset without features, labels or original ids)."""
    return None if entry.get(key) is None else entry[key][field]


def typed_entries(manifest: Dict[str, Any], key: str) -> Dict[str, Dict[str, Any]]:
    """``{name: entry}`` of a manifest's node types (``key`` ``node_types``) or relations
    (``relations``), in the manifest's order; a homogeneous manifest (or a part's view) is its own
    one entry, under :data:`HOMOGENEOUS_TYPE` or :data:`HOMOGENEOUS_RELATION`."""
    if "node_types" in manifest:
        return manifest[key]
    return {HOMOGENEOUS_TYPE if key == "node_types" else HOMOGENEOUS_RELATION: manifest}


class _Typed:
    """What both kinds of dataset answer as a typed one: node types, relations, their counts and
    parts. A homogeneous dataset is the one-type case: node type ``node`` and relation
    ``node:to:node`` (:data:`HOMOGENEOUS_TYPE`, :data:`HOMOGENEOUS_RELATION`), each the dataset
    itself."""

    path: str
    manifest: Dict[str, Any]

    def _entries(self, key: str) -> Dict[str, Dict[str, Any]]:
        return typed_entries(self.manifest, key)

    def _part(self, part: str) -> "Dataset":
        raise NotImplementedError

    @property
    def node_types(self) -> List[str]:
        """Type names, sorted (the order every per-type list of ringgnn uses)."""
        return sorted(self._entries("node_types"))

    @property
    def relations(self) -> List[str]:
        """``SRC:REL:DST`` names, sorted."""
        return sorted(self._entries("relations"))

    @property
    def edge_types(self) -> List[tuple]:
        """The relations as PyG edge types ``(src, rel, dst)``."""
        return [parse_edge_type(r) for r in self.relations]

    @property
    def num_nodes_dict(self) -> Dict[str, int]:
        return {t: self._entries("node_types")[t]["num_nodes"] for t in self.node_types}

    @property
    def num_edges_dict(self) -> Dict[str, int]:
        return {r: self._entries("relations")[r]["num_edges"] for r in self.relations}

    @property
    def num_nodes(self) -> int:
        return sum(self.num_nodes_dict.values())

    @property
    def num_edges(self) -> int:
        return sum(self.num_edges_dict.values())

    @property
    def has_times(self) -> bool:
        """True when a relation has edge times or a node type node times (``docs/FORMAT.md``,
        "Times"): samplers can then sample at seed times."""
        return any(e.get("edge_times") for e in self._entries("relations").values()) or \
            any(e.get("node_times") for e in self._entries("node_types").values())

    def check_type(self, t: str) -> str:
        if t not in self._entries("node_types"):
            raise _core.InputError(f"{self.path}: no node type '{t}' (it has: {', '.join(self.node_types)})")
        return t

    def check_relation(self, r: Any) -> str:
        name = edge_type_str(r)
        if name not in self._entries("relations"):
            raise _core.InputError(f"{self.path}: no relation '{name}' (it has: {', '.join(self.relations)})")
        return name

    def node_type(self, t: str) -> "Dataset":
        """Node type ``t`` as a dataset: its features, labels and splits."""
        return self._part(f"node/{self.check_type(t)}")

    def relation(self, r: Any) -> "Dataset":
        """Relation ``r`` (``"SRC:REL:DST"`` or a tuple) as a dataset: its CSC over the ``DST`` ids."""
        return self._part(f"relation/{self.check_relation(r)}")

    def feature_dims(self) -> Dict[str, Optional[int]]:
        """Feature width per type (None for a type without features)."""
        return {t: entry_field(self._entries("node_types")[t], "features", "dim") for t in self.node_types}

    def to_pyg(self, memory: Union[None, int, str] = None) -> Any:
        """The dataset as a PyG ``Data`` (homogeneous: ``edge_index``, ``x`` float32, ``y``,
        ``NAME_mask`` per split) or ``HeteroData`` in memory; refused when it needs more than
        ``memory`` bytes. See :mod:`ringgnn.importers.pyg_io`."""
        # Here, not at the top: importers sit above data, and only to_pyg needs one (and torch).
        from ..importers.pyg_io import to_pyg

        return to_pyg(self, memory)


class Dataset(_Typed):
    """An open dataset directory. Use :meth:`Dataset.open`.

    Arrays come back as ``np.int64``. The graph is stored in CSC orientation, as PyG samples it:
    ``neighbors(v)`` are the *sources* of the edges into ``v``.
    """

    #: A homogeneous dataset (or one part of a heterogeneous one); see :class:`HeteroDataset`.
    is_hetero = False

    def __init__(self, handle: "_core.DatasetHandle", part: Optional[str] = None):
        self._handle = handle
        self.part = part
        """``None``, or the part of a heterogeneous dataset this is (``node/TYPE``,
        ``relation/SRC:REL:DST``): core readers of this dataset are opened with it."""
        self.manifest: Dict[str, Any] = json.loads(handle.manifest_json())
        """The parsed ``manifest.json`` (of a part: its view, see ``docs/FORMAT.md``)."""

    @classmethod
    def open(cls, path: PathLike) -> "Union[Dataset, HeteroDataset]":
        """Open the dataset at ``path``; checks that its files (every part's, of a heterogeneous
        one) are present, readable, of the recorded sizes and as large as the counts need
        (``ringgnn verify`` checks everything). A heterogeneous dataset opens as a
        :class:`HeteroDataset`."""
        with os_errors("opening the dataset", path):
            manifest = json.loads(_core.read_manifest(os.fspath(path)))
            if "node_types" in manifest:
                hetero = HeteroDataset(os.fspath(path), manifest)
                # Each part's files present, readable and of their sizes now, as a homogeneous
                # dataset's are, not first where a sampler reads them.
                for t in manifest["node_types"]:
                    hetero._part(f"node/{t}")
                for r in manifest["relations"]:
                    hetero._part(f"relation/{r}")
                return hetero
            return cls(_core.DatasetHandle.open(os.fspath(path)))

    @classmethod
    def opened(cls, dataset: "Union[Dataset, HeteroDataset, PathLike]") -> "Union[Dataset, HeteroDataset]":
        """``dataset`` as it is when already open (either kind), else :meth:`open` of the path:
        what every API that takes "a dataset or its path" does with it."""
        return dataset if isinstance(dataset, _Typed) else cls.open(dataset)

    @classmethod
    def open_part(cls, path: PathLike, part: str) -> "Dataset":
        """One part of the heterogeneous dataset at ``path`` (``node/TYPE`` or
        ``relation/SRC:REL:DST``) as a dataset of its own."""
        with os_errors("opening the dataset", path):
            return cls(_core.DatasetHandle.open(os.fspath(path), part), part)

    @property
    def path(self) -> str:
        return os.fspath(self._handle.path)

    @property
    def feature_dim(self) -> Optional[int]:
        """Feature width, or None when the dataset has no features."""
        return entry_field(self.manifest, "features", "dim")

    @property
    def feature_dtype(self) -> Optional[str]:
        """'f32', 'f16' or 'bf16', or None when the dataset has no features."""
        return entry_field(self.manifest, "features", "dtype")

    @property
    def num_classes(self) -> Optional[int]:
        """Largest label + 1, or None when the dataset has no labels."""
        return entry_field(self.manifest, "labels", "num_classes")

    @property
    def split_names(self) -> List[str]:
        return sorted(self.manifest.get("splits", {}))

    def split(self, name: str) -> np.ndarray:
        """Node ids of split ``name`` (e.g. 'train') as int64."""
        return self._handle.split(name)

    @property
    def edge_split_names(self) -> List[str]:
        """Names of the edge splits (``train`` and the held-out ones) made by ``convert
        --link-split``; empty for datasets without one."""
        return sorted(self.manifest.get("edge_splits", {}))

    def edge_split(self, name: str, mmap: bool = False) -> np.ndarray:
        """The (src, dst) pairs of edge split ``name`` as an int64 array of shape (2, n).

        ``train`` holds every distinct pair left in the graph (self loops excluded); a held-out
        split's pairs are not in the graph at all. Undirected datasets list each pair once.
        ``mmap``: a read-only view of the file instead of a copy in memory (pages are read as
        they are touched: what an out-of-core loader of a large split wants)."""
        if mmap:
            return self._mapped(f"edge_split.{name}", name, 2).T
        return np.ascontiguousarray(self._handle.edge_split(name).T)

    def edge_negatives(self, name: str, mmap: bool = False) -> np.ndarray:
        """The fixed evaluation negatives of held-out edge split ``name``: an int64 array of shape
        (n, K), row i holding K distinct destinations for pair i's source, none of them pair i's
        own destination (drawn once by ``convert``; see ``docs/FORMAT.md``). ``mmap``: a
        read-only view of the file instead of a copy."""
        if mmap:
            return self._mapped(f"edge_negatives.{name}", name, (self.manifest["edge_splits"][name]["negatives"]))
        return self._handle.edge_negatives(name)

    def edge_shared_negatives(self, name: str, mmap: bool = False) -> Optional[np.ndarray]:
        """The negative (src, dst) pairs shared by every positive of held-out edge split
        ``name`` (OGB's ``edge_neg``: Hits@K counts the positives above the K-th best of them),
        an int64 array of shape (2, m); None when the split has none (its negatives, if any, are
        per pair: :meth:`edge_negatives`). ``mmap``: a read-only view of the file."""
        info = self.manifest.get("edge_splits", {}).get(name)
        if info is None:
            self._file(f"edge_split.{name}", name)  # raises, naming the splits there are
        if not info.get("shared_negatives", 0):
            return None
        m = self._mapped(f"edge_shared_negatives.{name}", name, 2, info["shared_negatives"]).T
        return m if mmap else np.array(m, dtype=np.int64)

    def edge_split_times(self, name: str) -> Optional[np.ndarray]:
        """The event times of edge split ``name`` of a split by time (``convert
        --link-split-time``): a read-only int64 map of length n, time i for pair i of
        :meth:`edge_split` (pairs ordered by (time, src, dst)); None when the split has no times.
        A typed dataset's: ``HeteroDataset.relation(r).edge_split_times(name)``."""
        info = self.manifest.get("edge_splits", {}).get(name)
        if info is None:
            self._file(f"edge_split.{name}", name)  # raises, naming the splits there are
        if not info.get("times", False):
            return None
        return self._mapped(f"edge_split_times.{name}", name, 1).reshape(-1)

    def edge_split_file(self, name: str) -> "tuple[str, int]":
        """(path, pairs) of edge split ``name``'s file: ``pairs`` rows of two little-endian
        int64 (``docs/FORMAT.md``), for readers of their own."""
        return self._file(f"edge_split.{name}", name)

    def _file(self, key: str, name: str) -> "tuple[str, int]":
        splits = self.manifest.get("edge_splits", {})
        if name not in splits:
            have = ", ".join(sorted(splits)) or "none"
            raise _core.InputError(f"{self.path}: no edge split '{name}' (it has: {have})")
        entry = self.manifest["files"].get(key)
        if entry is None:
            raise _core.InputError(f"{self.path}: edge split '{name}' has no stored negatives")
        return os.path.join(self.path, entry["path"]), splits[name]["edges"]

    def _mapped(self, key: str, name: str, width: int, rows: Optional[int] = None) -> np.ndarray:
        """File ``key`` of the manifest as a read-only (rows, width) little-endian int64 map (``rows``
        by default: the pairs of edge split ``name``)."""
        path, pairs = self._file(key, name)
        rows = pairs if rows is None else rows
        if rows * width == 0:
            return np.zeros((rows, width), dtype=np.int64)
        with os_errors("mapping", path):
            return np.memmap(path, dtype="<i8", mode="r", shape=(rows, width))

    @cached_property
    def labels(self) -> Optional[np.ndarray]:
        """Label per node as int64 (-1 = unlabeled), or None; read on first use."""
        return self._handle.labels()

    def neighbors(self, v: int) -> np.ndarray:
        """In-neighbors of node ``v``: sources of the edges into ``v``, ascending, duplicates kept."""
        v = operator.index(v)
        if not 0 <= v < self.num_nodes:
            raise IndexError(f"node {v} is out of range: the dataset has {self.num_nodes} nodes")
        return self._handle.neighbors(v)

    def indptr(self) -> np.ndarray:
        """The CSC offsets (``num_nodes + 1`` values): ``neighbors(v)`` is
        ``indices[indptr[v]:indptr[v + 1]]``."""
        return self._handle.indptr()

    def degrees(self) -> np.ndarray:
        """In-degree of every node as int64."""
        return np.diff(self.indptr())

    def node_times(self) -> Optional[np.ndarray]:
        """Every node's time as int64 (``docs/FORMAT.md`` "Times"), read-only and mapped, so that
        taking some nodes' times (``node_times()[ids]``) reads only their pages; None when the
        nodes have no times."""
        entry = self.manifest["files"].get("node_times")
        if self.manifest.get("node_times") is None or entry is None:
            return None
        if self.num_nodes == 0:
            return np.zeros(0, dtype=np.int64)
        path = os.path.join(self.path, entry["path"])
        with os_errors("mapping", path):
            return np.memmap(path, dtype="<i8", mode="r", shape=(self.num_nodes,))

    @property
    def has_node_ids(self) -> bool:
        """True when the dataset stores its nodes' original ids (built from a table whose ids
        were not dense integers): see :meth:`node_ids`."""
        return self.manifest.get("node_ids") is not None

    def node_ids(self, nodes: Any = None) -> Optional[np.ndarray]:
        """The original ids of ``nodes`` (dense ids, default all), in their order: int64 or
        uint64 for integer ids, an object array of ``str`` for string ids; None when the dataset
        stores none (its ids were dense integers already). Reads only the rows asked for."""
        info = self.manifest.get("node_ids")
        if info is None:
            return None
        n = self.num_nodes
        idx = np.arange(n, dtype=np.int64) if nodes is None else np.asarray(nodes, dtype=np.int64).reshape(-1)
        bad = np.flatnonzero((idx < 0) | (idx >= n))
        if bad.size:
            raise IndexError(f"node {idx[bad[0]]} is out of range: the dataset has {n} nodes")
        files = self.manifest["files"]
        path = os.path.join(self.path, files["node_ids"]["path"])
        with os_errors("reading", path):
            if info["dtype"] != "str":
                dtype = "<i8" if info["dtype"] == "i64" else "<u8"
                if n == 0:
                    return np.zeros(0, dtype=dtype)
                return np.array(np.memmap(path, dtype=dtype, mode="r", shape=(n,))[idx])
            offsets = np.memmap(path, dtype="<u8", mode="r", shape=(n + 1,))
            text = os.path.join(self.path, files["node_id_bytes"]["path"])
            data = np.memmap(text, dtype=np.uint8, mode="r", shape=(info["bytes"],)) if info["bytes"] else b""
            out = np.empty(len(idx), dtype=object)
            for k, i in enumerate(idx):
                out[k] = bytes(data[offsets[i]: offsets[i + 1]]).decode("utf-8")
            return out

    def _part(self, part: str) -> "Dataset":
        return self

    def __repr__(self) -> str:
        parts = [f"num_nodes={self.num_nodes:,}", f"num_edges={self.num_edges:,}"]
        if self.feature_dim is not None:
            parts.append(f"features={self.feature_dim}x{self.feature_dtype}")
        if self.num_classes is not None:
            parts.append(f"num_classes={self.num_classes}")
        if self.split_names:
            parts.append("splits=" + "/".join(self.split_names))
        if self.edge_split_names:
            parts.append("edge_splits=" + "/".join(self.edge_split_names))
        if self.part is not None:
            parts.insert(0, f"part={self.part!r}")
        return f"Dataset({self.path!r}, {', '.join(parts)})"


#: Datasets (paths) whose sampling without times was already warned of in this process.
_WARNED_TIMES: set = set()


def warn_without_times(ds: Any, message: str) -> None:
    """Warn, once per dataset and process, that ``ds`` (which has times) is sampled without them:
    ``message`` says by what and why; the one owner of that warning (the homogeneous samplers and
    ``train --ignore-time`` give it)."""
    if ds.path not in _WARNED_TIMES:
        _WARNED_TIMES.add(ds.path)
        logging.getLogger("ringgnn").warning("ringgnn: %s", message)


def open_homogeneous(dataset: Any, what: str, samples: bool = False) -> "Dataset":
    """``dataset`` (a :class:`Dataset` or a path) opened, refused with a clear error when it is
    heterogeneous, or one part of such a dataset, and ``what`` (a command or class) does not take
    such datasets. ``samples``: ``what`` samples neighborhoods, which the homogeneous engine does
    without times: on a dataset with times that is warned of (:func:`warn_without_times`), with the
    way to sample at times."""
    ds = Dataset.opened(dataset)
    if isinstance(ds, HeteroDataset):
        raise _core.InputError(
            f"{ds.path}: a heterogeneous dataset (node types {', '.join(ds.node_types)}); {what} takes a "
            "homogeneous one. Heterogeneous datasets are sampled with ringgnn.HeteroNeighborSampler, loaded with "
            "ringgnn.HeteroLoader and trained with `ringgnn train DS --target TYPE`")
    if ds.part is not None:
        raise _core.InputError(
            f"{ds.path}: {ds.part} is one part of a heterogeneous dataset; {what} takes a whole homogeneous dataset "
            "(sample a heterogeneous one with ringgnn.HeteroNeighborSampler)")
    if samples:
        warn_sampling_without_times(ds, what)
    return ds


def warn_sampling_without_times(ds: Any, what: str) -> None:
    """Where ``ds`` has times, warn (:func:`warn_without_times`) that ``what`` samples without them."""
    if ds.has_times:
        warn_without_times(ds, f"{what} samples without times, but {ds.path} has times: a seed's neighborhood may "
                               "hold its future. Sample at times with input_time (ringgnn.Loader and HeteroLoader "
                               "default to the seeds' node times; NeighborSampler.sample, HeteroNeighborSampler and "
                               "ringgnn.pyg.RingNeighborSampler take it), without ignore_time=True")


class HeteroDataset(_Typed):
    """An open heterogeneous dataset: node types, each with its own ids ``0 .. n-1`` and its own
    features, labels and splits, and relations ``SRC:REL:DST``, each its own CSC (see
    ``docs/FORMAT.md``, "Typed nodes and relations"). Use :meth:`Dataset.open`.

    Each part opens as a plain :class:`Dataset`: :meth:`node_type` (features, labels, splits;
    no graph) and :meth:`relation` (its CSC over the destination type: ``neighbors(v)`` are the
    source-type ids of the edges into destination ``v``).
    """

    is_hetero = True

    def __init__(self, path: str, manifest: Dict[str, Any]):
        self.path = path
        self.manifest = manifest
        self._parts: Dict[str, Dataset] = {}

    def _part(self, part: str) -> Dataset:
        if part not in self._parts:
            self._parts[part] = Dataset.open_part(self.path, part)
        return self._parts[part]

    def node_ids(self, node_type: str, nodes: Any = None) -> Optional[np.ndarray]:
        """The original ids of ``nodes`` (ids of type ``node_type``, default all), as
        :meth:`Dataset.node_ids` gives a homogeneous dataset's: None when the type stores none
        (its ids were dense integers already; ``docs/FORMAT.md`` "Original node ids")."""
        return self.node_type(node_type).node_ids(nodes)

    def __repr__(self) -> str:
        types = ", ".join(f"{t}={n:,}" for t, n in self.num_nodes_dict.items())
        rels = ", ".join(f"{r}={n:,}" for r, n in self.num_edges_dict.items())
        return f"HeteroDataset({self.path!r}, nodes: {types}; edges: {rels})"
