"""The graph side of layer-wise inference: a CSC's neighbor file read in ranges
(:class:`NeighborFile`) and as of a time, the ``blocks`` strategy's blocks (:func:`blocks`), and
the one fold of a block's in-neighbors' rows (:func:`fold_windows`; numpy's :func:`numpy_sums`)."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple

import numpy as np

from .._core import InputError
from .._files import os_errors
from ..data.build import read_manifest
from ..data.schema import HOMOGENEOUS_TYPE, parse_edge_type
from .plan import SYNC_BYTES
from .rows import sync_and_drop

#: The Rust aggregation's phases (``FeatureReader.aggregate``) a layer's ``stats`` add up.
PHASES = ("sources", "positions", "read_wait", "transform", "fold")
#: Entries read at a time while a neighbor file is cut to a time (about 12 MiB, within the plan's
#: ``FIXED_BYTES``); node times are read 8 times as many at a time.
AS_OF_EDGES = 1 << 19


def newer_than(part: Any, t: int) -> Optional[Tuple[np.ndarray, int]]:
    """(a bitmap of the nodes of ``part`` whose time is after ``t``, their count);
    None where nodes have no times or none is newer."""
    times = part.node_times()
    if times is None:
        return None
    n, step = len(times), 8 * AS_OF_EDGES
    bits, count = np.zeros(-(-n // 8), dtype=np.uint8), 0
    for a in range(0, n, step):
        newer = np.asarray(times[a:a + step]) > t
        bits[a // 8:a // 8 + -(-len(newer) // 8)] = np.packbits(newer, bitorder="little")
        count += int(newer.sum())
    return (bits, count) if count else None


class NeighborFile:
    """The in-neighbor lists of a dataset (or of one ``relation``), read in ranges."""

    def __init__(self, ds: Any, relation: Optional[str] = None):
        if relation is None:
            manifest, indptr, n = read_manifest(ds.path), ds.indptr(), ds.num_nodes
        else:
            part = ds.relation(relation)
            manifest, indptr, n = part.manifest, part.indptr(), part.num_nodes
        entry, times = manifest["files"].get("indices"), manifest["files"].get("edge_times")
        self.name = relation or os.path.basename(os.path.abspath(ds.path))
        self.path = None if entry is None else os.path.join(ds.path, entry["path"])
        self.dtype = np.uint32 if manifest["graph"]["indices_dtype"] == "u32" else np.uint64
        self.indptr = indptr.astype(np.int64, copy=False)
        #: Destination nodes (the CSC's columns).
        self.num_nodes = n
        self.bytes_read = 0
        #: The edge times (one per entry; None: the edges have none) and the latest of them.
        self.times_path = None if times is None else os.path.join(ds.path, times["path"])
        self.latest = (manifest.get("edge_times") or {}).get("max")
        #: The sources' node type (whose node times say which are newer than a time).
        self.source_type = HOMOGENEOUS_TYPE if relation is None else parse_edge_type(relation)[0]

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

    def as_of(self, t: int, newer: Optional[np.ndarray], path: str) -> "NeighborFile":
        """This CSC as of time ``t``: the edges at or before ``t`` whose source is
        not in ``newer`` (:func:`newer_than`), in stored order, written to ``path``; ``self`` where that
        is every edge."""
        if newer is None and (self.times_path is None or self.latest is None or self.latest <= t):
            return self
        ip, kept = self.indptr, 0
        cut = np.zeros_like(ip)
        with os_errors("writing the neighbor file as of a time of " + self.name, path), open(path, "wb") as out:
            unsynced = 0
            for lo in range(0, int(ip[-1]), AS_OF_EDGES):
                hi = min(int(ip[-1]), lo + AS_OF_EDGES)
                ids = self.edges(lo, hi, self.dtype)
                keep = np.ones(hi - lo, dtype=bool) if self.times_path is None else self._times(lo, hi) <= t
                if newer is not None:
                    keep &= ((newer[ids >> 3] >> (ids & 7)) & 1) == 0
                before = np.concatenate([[0], np.cumsum(keep)])  # kept entries of the chunk before each
                v0, v1 = np.searchsorted(ip, [lo, hi], side="right")  # the lists that start in lo+1..hi
                cut[v0:v1] = kept + before[ip[v0:v1] - lo]
                out.write(ids[keep].tobytes())
                kept += int(before[-1])
                unsynced += int(before[-1]) * self.id_bytes
                if unsynced >= SYNC_BYTES:
                    sync_and_drop(out)
                    unsynced = 0
        view = copy.copy(self)
        view.path, view.indptr, view.times_path, view.bytes_read = path, cut, None, 0
        return view

    def _times(self, lo: int, hi: int) -> np.ndarray:
        """The times of entries ``lo..hi``."""
        with os_errors("reading the edge times of " + self.name, self.times_path):
            out = np.fromfile(self.times_path, dtype="<i8", count=hi - lo, offset=lo * 8)
        if len(out) != hi - lo:
            raise InputError(f"{self.times_path}: ends before entry {hi}; run `ringgnn verify` on the dataset")
        self.bytes_read += 8 * (hi - lo)
        return out


def fold_windows(reader: Any, graph: NeighborFile, acc: np.ndarray, a: int, b: int,
                 windows: Iterable[Tuple[int, int]], piece_rows: int, phases: Optional[Dict[str, float]] = None,
                 **kw: Any) -> None:
    """Fold block ``a..b``'s in-neighbors' rows into ``acc`` by the Rust core, one call per window;
    ``kw``: the fold (default ``sum``). Bytes read go to ``graph.bytes_read``, seconds to ``phases``."""
    ip = graph.indptr[a:b + 1]
    for lo, hi in windows:
        got = reader.aggregate(acc, a, ip, lo, hi, graph.path, graph.id_bytes, piece_rows=piece_rows, **kw)
        graph.bytes_read += got["neighbor_bytes"]
        if phases is not None:
            for p in PHASES:
                phases[p] = phases.get(p, 0.0) + got[p]


def numpy_sums(reader: Any, graph: NeighborFile, acc: np.ndarray, a: int, b: int,
               windows: Iterable[Tuple[int, int]], piece_edges: int) -> None:
    """:func:`fold_windows`'s sums in numpy, ``piece_edges`` in-edges at a time (``aggregate="python"``)."""
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
    """Destinations ``a..b`` and in-edges ``lo..hi``; for a hub, chunk ``part`` of ``parts``."""

    a: int
    b: int
    lo: int
    hi: int
    part: int = 0
    parts: int = 1


def blocks(indptr: np.ndarray, max_edges: int, max_nodes: int, wanted: Optional[np.ndarray] = None) -> Iterator[Block]:
    """Consecutive blocks of at most ``max_edges`` in-edges and ``max_nodes`` nodes (a hub
    alone, in chunks), skipping those without ``wanted`` nodes."""
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
