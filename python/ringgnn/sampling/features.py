"""Feature rows of a typed loader: per node type a reader of its feature file, and one hot-row
cache across the types, its rows ranked by hits per byte (chosen in Rust, ``budget/files/rows.rs``)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from .. import _core
from .._files import os_errors
from ..data.dataset import typed_entries
from ..data.schema import parse_edge_type
from .base import ProcessLocal


def row_bytes(ds: Any) -> Dict[str, int]:
    """Bytes of one stored feature row per type with features (its dtype, not float32)."""
    out = {}
    for t in ds.node_types:
        f = typed_entries(ds.manifest, "node_types")[t].get("features")
        if f is not None:
            out[t] = int(f["row_bytes"])
    return out


def neighbor_file(ds: Any, r: str) -> Optional[Tuple[str, int]]:
    """Relation ``r``'s neighbor file: (its path, bytes an entry), None where it has none."""
    part = ds.relation(r)
    entry = part.manifest["files"].get("indices")
    if entry is None:
        return None
    return os.path.join(ds.path, entry["path"]), 4 if part.manifest["graph"]["indices_dtype"] == "u32" else 8


def source_hits(ds: Any, t: str, relations: Iterable[str], chunk: Optional[int] = None) -> np.ndarray:
    """Per node of type ``t``, how often it appears in the neighbor files of ``relations`` whose
    source type is ``t`` (uint32, saturating): read ``chunk`` entries at a time."""
    files = []
    for r in relations:
        f = neighbor_file(ds, r) if parse_edge_type(r)[0] == t else None
        if f is not None and ds.num_edges_dict[r]:
            files.append((*f, int(ds.num_edges_dict[r])))
    with os_errors("counting the sources of type " + t):
        return _core.source_hits(t, ds.num_nodes_dict[t], files, chunk)


@dataclass(frozen=True)
class CacheChoice:
    """The rows a cache of ``budget`` bytes holds: per type its ids (ascending) and bytes
    (``rows * (row_bytes + 8)``); ``total`` bytes in all (at most ``budget``)."""

    budget: int
    ids: Dict[str, np.ndarray]
    bytes: Dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    def rows(self) -> Dict[str, int]:
        return {t: len(v) for t, v in self.ids.items()}


def _types(hits: Mapping[str, np.ndarray], row_bytes: Mapping[str, int]) -> List[Tuple[str, np.ndarray, int]]:
    return [(t, np.ascontiguousarray(h, dtype=np.uint32), int(row_bytes[t])) for t, h in hits.items()]


def ranked_groups(hits: Mapping[str, np.ndarray], row_bytes: Mapping[str, int]) -> List[Tuple[str, int, int]]:
    """The rows with at least one hit, grouped by (type, hit count), best first: ``(type, hits,
    rows)`` by hits per byte held descending, then type name (within a group, smaller ids first)."""
    return _core.ranked_groups(_types(hits, row_bytes))


def choose_cache_rows(hits: Mapping[str, np.ndarray], row_bytes: Mapping[str, int], budget: int) -> CacheChoice:
    """The longest prefix of the ranking of every row of every type by hits per byte held whose
    rows fit in ``budget`` bytes."""
    return CacheChoice(*_core.choose_cache_rows(_types(hits, row_bytes), int(budget)))


class TypedRows(ProcessLocal):
    """Per node type with features, a ``_core.FeatureReader`` of its file (``backends[t]``;
    ``memory`` loads it once for the process) and the cache's rows of that type; :meth:`reader`
    is this thread's reader. Loaders of one run share one (``HeteroLoader(features=...)``)."""

    def __init__(self, path: str, backends: Mapping[str, str], direct: bool,
                 cache: Optional[CacheChoice] = None):
        self.path, self.backends, self.direct = path, dict(backends), bool(direct)
        self.cache = cache
        self.__dict__.update(self._fresh())

    def _fresh(self) -> Dict[str, Any]:
        # _protos: (pid, the process's reader per type); _readers: every thread's (counters summed).
        return dict(_local=threading.local(), _lock=threading.Lock(), _protos=None, _readers=[])

    @property
    def types(self) -> List[str]:
        return sorted(self.backends)

    def _prototypes(self) -> Dict[str, Any]:
        pid = os.getpid()
        with self._lock:
            if self._protos is None or self._protos[0] != pid:
                protos = {}
                for t, backend in self.backends.items():
                    ids = None if self.cache is None or backend == "memory" else self.cache.ids.get(t)
                    protos[t] = _core.FeatureReader(self.path, backend=backend, direct=self.direct, part=f"node/{t}",
                                                    cache_ids=None if ids is None or not len(ids) else ids)
                self._protos = (pid, protos)
                self._readers = []
            return self._protos[1]

    def reader(self, t: str) -> Any:
        """This thread's reader of type ``t`` (a ``memory`` file's reader is the process's: a
        gather from memory is a copy under its lock)."""
        pid = os.getpid()
        st = self._local
        if getattr(st, "pid", None) != pid:
            protos = self._prototypes()
            st.readers = {t: (p if self.backends[t] == "memory" else p.sibling()) for t, p in protos.items()}
            st.pid = pid
            with self._lock:
                self._readers.append(st.readers)
        return st.readers[t]

    def cached_rows(self) -> Dict[str, int]:
        """Rows held by the cache per type."""
        return {t: p.cached_rows for t, p in self._prototypes().items()}

    def cache_bytes(self) -> int:
        """Bytes the cache holds (rows and ids), all types."""
        return sum(p.cache_bytes for p in self._prototypes().values())

    def stats(self) -> Dict[str, Dict[str, int]]:
        """Per type, the read counters of every thread's reader in this process, summed
        (rows requested, distinct rows, cache hits, pages, bytes read, read requests)."""
        keys = ("rows_requested", "distinct_rows", "cache_hits", "pages_read", "bytes_read", "read_requests")
        out = {t: dict.fromkeys(keys, 0) for t in self.types}
        with self._lock:
            seen = set()
            for readers in self._readers:
                for t, r in readers.items():
                    if id(r) in seen:
                        continue
                    seen.add(id(r))
                    s = r.stats()
                    for k in keys:
                        out[t][k] += int(s[k])
        return out


__all__ = ("CacheChoice", "TypedRows", "choose_cache_rows", "neighbor_file", "ranked_groups",
           "row_bytes", "source_hits")
