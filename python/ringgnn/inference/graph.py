"""The graph side of layer-wise inference, for both kinds of runs: a CSC's neighbor file read
in ranges (:class:`NeighborFile`: a homogeneous dataset's, or one relation of a heterogeneous
one, whose sources are of one type and destinations of another), the ``blocks`` strategy's
edge-bounded destination blocks (:func:`blocks`), and the one fold of a destination block's
in-neighbors' rows into its accumulators (:func:`fold_windows`: the Rust core's
``FeatureReader.aggregate``, a window of in-edges at a time).

A heterogeneous relation's aggregation is the homogeneous fold applied to that relation's CSC:
the rows of its source type summed into the accumulators of its destination type's block, with
the same windows and pieces; :func:`numpy_sums` is the same sums in numpy
(``aggregate="python"`` of a heterogeneous run: no PyTorch)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple

import numpy as np

from .._core import InputError
from .._files import os_errors
from ..data.build import read_manifest

#: The Rust aggregation's phases (``FeatureReader.aggregate``) a layer's ``stats`` add up.
PHASES = ("sources", "positions", "read_wait", "transform", "fold")


class NeighborFile:
    """The in-neighbor lists of a dataset (or, with ``relation``, of one relation of a
    heterogeneous dataset), read in ranges of the neighbor file (sequential reads; only the
    offset index is in memory)."""

    def __init__(self, ds: Any, relation: Optional[str] = None):
        if relation is None:
            manifest, indptr, n = read_manifest(ds.path), ds.indptr(), ds.num_nodes
        else:
            part = ds.relation(relation)
            manifest, indptr, n = part.manifest, part.indptr(), part.num_nodes
        entry = manifest["files"].get("indices")
        self.name = relation or os.path.basename(os.path.abspath(ds.path))
        self.path = None if entry is None else os.path.join(ds.path, entry["path"])
        self.dtype = np.uint32 if manifest["graph"]["indices_dtype"] == "u32" else np.uint64
        self.indptr = indptr.astype(np.int64, copy=False)
        #: Destination nodes (the CSC's columns).
        self.num_nodes = n
        self.bytes_read = 0

    @property
    def id_bytes(self) -> int:
        return np.dtype(self.dtype).itemsize

    def edges(self, lo: int, hi: int, dtype: Any = np.int64) -> np.ndarray:
        """Entries ``lo..hi`` of the neighbor file (source ids) as ``dtype``."""
        n = hi - lo
        if n <= 0:
            return np.empty(0, dtype=dtype)
        size = self.id_bytes
        with os_errors("reading the neighbor file of " + self.name, self.path):
            out = np.fromfile(self.path, dtype=self.dtype, count=n, offset=lo * size)
        if len(out) != n:
            raise InputError(f"{self.path}: ends before entry {hi}; run `ringgnn verify` on the dataset")
        self.bytes_read += n * size
        return out.astype(dtype, copy=False)


def fold_windows(reader: Any, graph: NeighborFile, acc: np.ndarray, a: int, b: int,
                 windows: Iterable[Tuple[int, int]], piece_rows: int, phases: Optional[Dict[str, float]] = None,
                 **kw: Any) -> None:
    """Fold destination block ``a..b``'s in-neighbors' rows (``reader``'s) into ``acc`` by the
    Rust core (``FeatureReader.aggregate``: the neighbor lists read, the distinct sources read in
    file order ``piece_rows`` at a time with the next piece read ahead, folded in on all threads,
    the GIL released), one call per window of in-edges ``lo..hi``; ``kw``: the fold
    (``fold="sum"`` by default; GCN's ``dinv``, a ``transform`` of each piece, GAT's logits).
    The neighbor bytes go to ``graph.bytes_read``, the phases' seconds to ``phases``."""
    ip = graph.indptr[a:b + 1]
    for lo, hi in windows:
        got = reader.aggregate(acc, a, ip, lo, hi, graph.path, graph.id_bytes, piece_rows=piece_rows, **kw)
        graph.bytes_read += got["neighbor_bytes"]
        if phases is not None:
            for p in PHASES:
                phases[p] = phases.get(p, 0.0) + got[p]


def numpy_sums(reader: Any, graph: NeighborFile, acc: np.ndarray, a: int, b: int,
               windows: Iterable[Tuple[int, int]], piece_edges: int) -> None:
    """:func:`fold_windows`'s sums (``fold="sum"``) in numpy, ``piece_edges`` in-edges at a time:
    the second implementation of a heterogeneous run's sums (``aggregate="python"``)."""
    ip = graph.indptr[a:b + 1]
    for lo, hi in windows:
        for p0 in range(lo, hi, piece_edges):
            p1 = min(hi, p0 + piece_edges)
            ids = graph.edges(p0, p1)
            counts = np.maximum(np.minimum(ip[1:], p1) - np.maximum(ip[:-1], p0), 0)
            u, inv = np.unique(ids, return_inverse=True)  # sources in id order: reads in file order
            rows = reader.gather(u)[inv.reshape(-1)]
            has = counts > 0  # the piece's edges are grouped by destination (CSC), in order
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[has]
            acc[has] += np.add.reduceat(rows, starts, axis=0)


@dataclass(frozen=True)
class Block:
    """Destination nodes ``a..b`` and their in-edges ``lo..hi`` of the neighbor file; for a hub
    (``b == a + 1``) possibly one chunk of its list (``part`` of ``parts``)."""

    a: int
    b: int
    lo: int
    hi: int
    part: int = 0
    parts: int = 1


def blocks(indptr: np.ndarray, max_edges: int, max_nodes: int, wanted: Optional[np.ndarray] = None) -> Iterator[Block]:
    """Consecutive blocks of at most ``max_edges`` in-edges and ``max_nodes`` nodes; a node with
    more in-edges than ``max_edges`` comes alone, in chunks. With ``wanted`` (a bool per node),
    blocks holding none of the wanted nodes are skipped."""
    n = len(indptr) - 1
    a = 0
    while a < n:
        limit = indptr[a] + max_edges
        b = int(np.searchsorted(indptr, limit, side="right")) - 1
        b = min(max(b, a), a + max_nodes, n)
        if b == a:  # a hub: its list alone is larger than a block
            lo, hi = int(indptr[a]), int(indptr[a + 1])
            parts = -(-(hi - lo) // max_edges)
            if wanted is None or wanted[a]:
                for p in range(parts):
                    yield Block(a, a + 1, lo + p * max_edges, min(hi, lo + (p + 1) * max_edges), p, parts)
            a += 1
            continue
        if wanted is None or wanted[a:b].any():
            yield Block(a, b, int(indptr[a]), int(indptr[b]))
        a = b
