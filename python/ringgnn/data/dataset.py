"""A ringgnn dataset on disk (``docs/FORMAT.md``), read through the Rust core: counts, splits,
labels and neighbor lists."""

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
    """``entry[key][field]``, or None where ``entry`` has no ``key``."""
    return None if entry.get(key) is None else entry[key][field]


def typed_entries(manifest: Dict[str, Any], key: str) -> Dict[str, Dict[str, Any]]:
    """``{name: entry}`` of a manifest's ``node_types`` or ``relations``; a homogeneous manifest is
    its own one entry."""
    if "node_types" in manifest:
        return manifest[key]
    return {HOMOGENEOUS_TYPE if key == "node_types" else HOMOGENEOUS_RELATION: manifest}


class _Typed:
    """What both kinds of dataset answer as a typed one. A homogeneous dataset is the one-type
    case: node type :data:`HOMOGENEOUS_TYPE` and relation :data:`HOMOGENEOUS_RELATION`, each the
    dataset itself."""

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
        """True when a relation has edge times or a node type node times."""
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
        """The dataset as a PyG ``Data`` or ``HeteroData`` in memory; refused when it needs more
        than ``memory`` bytes (:mod:`ringgnn.importers.pyg_io`)."""
        # Here, not at the top: importers sit above data, and only to_pyg needs one (and torch).
        from ..importers.pyg_io import to_pyg

        return to_pyg(self, memory)


class Dataset(_Typed):
    """An open dataset directory (:meth:`Dataset.open`). Arrays come back as ``np.int64``; the
    graph is stored as a CSC: ``neighbors(v)`` are the *sources* of the edges into ``v``."""

    is_hetero = False

    def __init__(self, handle: "_core.DatasetHandle", part: Optional[str] = None):
        self._handle = handle
        self.part = part
        """``None``, or the part of a heterogeneous dataset this is (``node/TYPE``,
        ``relation/SRC:REL:DST``)."""
        self.manifest: Dict[str, Any] = json.loads(handle.manifest_json())
        """The parsed ``manifest.json`` (of a part: its view)."""

    @classmethod
    def open(cls, path: PathLike) -> "Union[Dataset, HeteroDataset]":
        """Open the dataset at ``path`` (a :class:`HeteroDataset` if typed), checking that every
        file is present, readable and of its recorded size (``ringgnn verify`` checks all)."""
        with os_errors("opening the dataset", path):
            manifest = json.loads(_core.read_manifest(os.fspath(path)))
            if "node_types" in manifest:
                hetero = HeteroDataset(os.fspath(path), manifest)
                # Each part's files checked now, not first where a sampler reads them.
                for t in manifest["node_types"]:
                    hetero._part(f"node/{t}")
                for r in manifest["relations"]:
                    hetero._part(f"relation/{r}")
                return hetero
            return cls(_core.DatasetHandle.open(os.fspath(path)))

    @classmethod
    def opened(cls, dataset: "Union[Dataset, HeteroDataset, PathLike]") -> "Union[Dataset, HeteroDataset]":
        """``dataset`` as it is when already open, else :meth:`open` of the path."""
        return dataset if isinstance(dataset, _Typed) else cls.open(dataset)

    @classmethod
    def open_part(cls, path: PathLike, part: str) -> "Dataset":
        """One part (``node/TYPE`` or ``relation/SRC:REL:DST``) of the dataset at ``path``."""
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
        """Names of the edge splits (``train`` and the held-out ones); empty without a link split."""
        return sorted(self.manifest.get("edge_splits", {}))

    def edge_split(self, name: str, mmap: bool = False) -> np.ndarray:
        """The (src, dst) pairs of edge split ``name``, int64 of shape (2, n): ``train`` every
        distinct pair left in the graph (no self loops), a held-out split pairs not in it.
        ``mmap``: a read-only view of the file instead of a copy."""
        if mmap:
            return self._mapped(f"edge_split.{name}", name, 2).T
        return np.ascontiguousarray(self._handle.edge_split(name).T)

    def edge_negatives(self, name: str, mmap: bool = False) -> np.ndarray:
        """The fixed negatives of held-out edge split ``name``, int64 of shape (n, K): row i
        holds K destinations for pair i's source. ``mmap``: a read-only view of the file."""
        if mmap:
            return self._mapped(f"edge_negatives.{name}", name, (self.manifest["edge_splits"][name]["negatives"]))
        return self._handle.edge_negatives(name)

    def edge_shared_negatives(self, name: str, mmap: bool = False) -> Optional[np.ndarray]:
        """The negative (src, dst) pairs shared by every positive of held-out edge split
        ``name`` (OGB's ``edge_neg``), int64 of shape (2, m); None when the split has none.
        ``mmap``: a read-only view of the file."""
        info = self.manifest.get("edge_splits", {}).get(name)
        if info is None:
            self._file(f"edge_split.{name}", name)  # raises, naming the splits there are
        if not info.get("shared_negatives", 0):
            return None
        m = self._mapped(f"edge_shared_negatives.{name}", name, 2, info["shared_negatives"]).T
        return m if mmap else np.array(m, dtype=np.int64)

    def edge_split_times(self, name: str) -> Optional[np.ndarray]:
        """The event times of edge split ``name`` (a split by time): a read-only int64 map, time
        i for pair i of :meth:`edge_split`; None when the split has no times."""
        info = self.manifest.get("edge_splits", {}).get(name)
        if info is None:
            self._file(f"edge_split.{name}", name)  # raises, naming the splits there are
        if not info.get("times", False):
            return None
        return self._mapped(f"edge_split_times.{name}", name, 1).reshape(-1)

    def edge_split_file(self, name: str) -> "tuple[str, int]":
        """(path, pairs) of edge split ``name``'s file: rows of two little-endian int64."""
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
        """Every node's time as a read-only int64 map; None when the nodes have no times."""
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
        """True when the dataset stores its nodes' original ids (:meth:`node_ids`)."""
        return self.manifest.get("node_ids") is not None

    def node_ids(self, nodes: Any = None) -> Optional[np.ndarray]:
        """The original ids of ``nodes`` (dense ids, default all): int64 or uint64, or an object
        array of ``str``; None when the dataset stores none."""
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


_WARNED_TIMES: set = set()


def warn_without_times(ds: Any, message: str) -> None:
    """Warn ``message``, once per dataset and process, that ``ds`` is sampled without its times."""
    if ds.path not in _WARNED_TIMES:
        _WARNED_TIMES.add(ds.path)
        logging.getLogger("ringgnn").warning("ringgnn: %s", message)


def open_homogeneous(dataset: Any, what: str, samples: bool = False) -> "Dataset":
    """``dataset`` opened, refused when it is heterogeneous or a part of one, which ``what`` (a
    command or class) does not take. ``samples``: warn if it has times (``what`` ignores them)."""
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
    """An open heterogeneous dataset (:meth:`Dataset.open`): node types with their own ids,
    features, labels and splits, and relations ``SRC:REL:DST``, each its own CSC. Each part opens
    as a plain :class:`Dataset` (:meth:`node_type`, :meth:`relation`)."""

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
        """The original ids of ``nodes`` of type ``node_type``, as :meth:`Dataset.node_ids`."""
        return self.node_type(node_type).node_ids(nodes)

    def __repr__(self) -> str:
        types = ", ".join(f"{t}={n:,}" for t, n in self.num_nodes_dict.items())
        rels = ", ".join(f"{r}={n:,}" for r, n in self.num_edges_dict.items())
        return f"HeteroDataset({self.path!r}, nodes: {types}; edges: {rels})"
