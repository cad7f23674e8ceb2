"""A ringgnn dataset on disk, as Python sees it: counts, splits, labels and neighbor lists.

The format is specified in ``docs/FORMAT.md``; reads go through the Rust core
(``ringgnn._core.DatasetHandle``), so nothing here depends on the byte layout.
"""

from __future__ import annotations

import json
import operator
import os
from functools import cached_property
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _core
from ._files import os_errors

PathLike = Union[str, "os.PathLike[str]"]


class Dataset:
    """An open dataset directory. Use :meth:`Dataset.open`.

    Arrays come back as ``np.int64``. The graph is stored in CSC orientation, as PyG samples it:
    ``neighbors(v)`` are the *sources* of the edges into ``v``.
    """

    def __init__(self, handle: "_core.DatasetHandle"):
        self._handle = handle
        self.manifest: Dict[str, Any] = json.loads(handle.manifest_json())
        """The parsed ``manifest.json``."""

    @classmethod
    def open(cls, path: PathLike) -> "Dataset":
        """Open the dataset at ``path``; checks that its files are present with the recorded sizes
        (``ringgnn verify`` checks everything)."""
        with os_errors("opening the dataset", path):
            return cls(_core.DatasetHandle.open(os.fspath(path)))

    @property
    def path(self) -> str:
        return os.fspath(self._handle.path)

    @property
    def num_nodes(self) -> int:
        return self.manifest["num_nodes"]

    @property
    def num_edges(self) -> int:
        return self.manifest["num_edges"]

    @property
    def feature_dim(self) -> Optional[int]:
        """Feature width, or None when the dataset has no features."""
        f = self.manifest.get("features")
        return None if f is None else f["dim"]

    @property
    def feature_dtype(self) -> Optional[str]:
        """'f32', 'f16' or 'bf16', or None when the dataset has no features."""
        f = self.manifest.get("features")
        return None if f is None else f["dtype"]

    @property
    def num_classes(self) -> Optional[int]:
        """Largest label + 1, or None when the dataset has no labels."""
        lab = self.manifest.get("labels")
        return None if lab is None else lab["num_classes"]

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

    def _mapped(self, key: str, name: str, width: int) -> np.ndarray:
        """File ``key`` of the manifest as a read-only (rows, width) little-endian int64 map."""
        path, rows = self._file(key, name)
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
        return f"Dataset({self.path!r}, {', '.join(parts)})"
