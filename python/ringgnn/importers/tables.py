"""Edge tables (Parquet, or CSV with a header) naming nodes by any 64-bit integers or strings:
:func:`convert_table`, and the out-of-core id map of every table import (:func:`map_tables`)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from .._core import InputError
from .._files import NpyWriter, os_errors
from .._options import default_memory, parse_split, process_rss
from ..data import build
from ..data.schema import HOMOGENEOUS_RELATION, parse_edge_type
from ._arrow import Buckets, Table, allow_open_files, bucket_of, id_type, require_pyarrow, to_np
from ._stage import PathLike, Staging
from .node_table import NodeTable, join

MAX_BUCKETS = 1024


class EdgeTable:
    """One edge table, its columns checked before anything is read: relation ``name``
    (``SRC:REL:DST``; None for a homogeneous table) from column ``src`` to ``dst``, with each
    edge's time in column ``time`` (unit ``unit``)."""

    def __init__(self, table: PathLike, src: str, dst: str, name: Optional[str] = None, time: Optional[str] = None):
        self.types = ("node", "node")
        if name is not None:
            try:
                self.types = parse_edge_type(name)[::2]
            except ValueError:
                raise InputError(f"relation '{name}' must be SRC:REL:DST (three names separated by ':'), as in "
                                 "user:buys:item") from None
        self.path, self.name, self.columns = os.fspath(table), name, (src, dst)
        self.t = Table(self.path, id_columns=(src, dst))
        self.kinds = tuple(self.t.column_type(c, self.option(end)) for end, c in enumerate(self.columns))
        self.time = time
        self.unit = None if time is None else self.t.time_unit(time, self.time_option())

    def time_option(self) -> str:
        return "--time-column" if self.name is None else f"--time-column of {self.name}"

    def read_columns(self) -> List[str]:
        return list(self.columns) + ([self.time] if self.time is not None else [])

    def option(self, end: int) -> str:
        flag = ("--src", "--dst")[end]
        return flag if self.name is None else f"{flag} of {self.name}"

    def first(self) -> Tuple[Any, int]:
        """The first record batch, and the rows (a CSV's guessed from its size); refused when none."""
        batches = self.t.batches(self.read_columns())
        first = next(batches, None)
        batches.close()
        if first is None or first.num_rows == 0 and self.t.rows == 0:
            of = "" if self.name is None else f" of relation {self.name}"
            raise InputError(f"{self.path}: no rows; the table{of} has no edges")
        return first, self.t.rows if self.t.rows is not None else max(first.num_rows, os.path.getsize(self.path) // 4)

    def ids(self, batch: Any, kinds: Tuple[str, str], row0: int) -> List[Any]:
        """Both ends' ids in a batch whose first row is ``row0``, as ids of their types' ``kinds``
        (a signed column as unsigned where its type's are: none may be negative)."""
        ends = [self.t.ids(batch.column(end), self.kinds[end], c, self.option(end), row0)
                for end, c in enumerate(self.columns)]
        for end, kind in enumerate(kinds):
            if kind != "uint" or self.kinds[end] != "int":
                continue
            bad = np.flatnonzero(ends[end] < 0)
            if bad.size:
                others, both = ("the other column is", "both columns") if self.name is None else \
                    (f"other columns naming node type '{self.types[end]}' are", "them")
                i = bad[0]
                raise InputError(f"{self.path}: column '{self.columns[end]}' row {row0 + i} is {ends[end][i]}, "
                                 f"negative, while {others} unsigned; give {both} one integer type")
            ends[end] = ends[end].astype(np.uint64)
        return ends


def type_kinds(edges: Sequence[EdgeTable]) -> Dict[str, str]:
    """'int', 'uint' or 'str' per node type, from the columns naming it, which must agree (signed
    and unsigned integers mix as 'uint')."""
    uses: Dict[str, List[Tuple[EdgeTable, int]]] = {}
    for e in edges:
        for end, ty in enumerate(e.types):
            uses.setdefault(ty, []).append((e, end))
    kinds = {}
    for ty, u in uses.items():
        found = {e.kinds[end] for e, end in u}
        if len(found) > 1 and found != {"int", "uint"}:
            e = u[0][0]
            if e.name is None:
                what = ["strings" if k == "str" else "integers" for k in e.kinds]
                raise InputError(f"{e.path}: column '{e.columns[0]}' holds {what[0]} and '{e.columns[1]}' {what[1]}; "
                                 "the two ends must name nodes the same way")
            s, i = (next(f"{e.path}: column '{e.columns[end]}'" for e, end in u if (e.kinds[end] == "str") is text)
                    for text in (True, False))
            raise InputError(f"node type '{ty}': {s} holds strings but {i} holds integers; the columns naming one type "
                             "must name its nodes the same way")
        kinds[ty] = "uint" if len(found) > 1 else found.pop()
    return kinds


def convert_table(
    table: PathLike,
    out: PathLike,
    *,
    src: str,
    dst: str,
    undirected: bool = False,
    self_loops: str = "keep",
    dedup: bool = False,
    split: Any = None,
    node_table: Optional[PathLike] = None,
    node_id: Optional[str] = None,
    feature_columns: Sequence[str] = (),
    label_column: Optional[str] = None,
    split_column: Optional[str] = None,
    time_column: Optional[str] = None,
    node_time_column: Optional[str] = None,
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a dataset at ``out`` from the edge table ``table`` (Parquet, or CSV with a header)
    whose columns ``src`` and ``dst`` name nodes by integers or strings; returns the manifest.

    ``node_table``, keyed by column ``node_id``, gives features (``feature_columns``: numeric
    columns, or one column of vectors), labels (``label_column``), splits (``split_column``) and
    node times (``node_time_column``); ``time_column``: each edge's time. The rest are
    :func:`ringgnn.data.build.convert`'s (``split``: fractions only)."""
    require_pyarrow()
    edges = [EdgeTable(table, src, dst, time=time_column)]
    kinds = type_kinds(edges)
    nodes = {}
    if node_table is not None:
        if node_id is None:
            raise InputError(f"{os.fspath(node_table)}: name its id column (--node-id COL)")
        nodes["node"] = NodeTable(os.fspath(node_table), node_id, list(feature_columns), label_column, kinds["node"],
                                  split_column, node_time_column)
    elif feature_columns or label_column is not None or node_id is not None or split_column is not None \
            or node_time_column is not None:
        raise InputError("--node-id, --feature-columns, --label-column, --split-column and --node-time-column name "
                         "columns of a --node-table; give it")
    if split is not None:
        if split_column is not None or not all(isinstance(v, float) for _, v in parse_split(split)):
            raise InputError(f"split {split!r}: a table's splits are fractions (train=0.8,...) or a node table's "
                             "--split-column; its dense ids are assigned by the import, so id files cannot name them")
    budget = import_budget(memory)
    with Staging(out, overwrite) as stage:
        (t,), ((staged, times),) = map_tables(stage, edges, kinds, nodes, budget, feature_dtype)
        return build.convert_one_type(out, replace(t, split=t.split or split),
                                      build.Relation(HOMOGENEOUS_RELATION, staged, "npy", edge_time=times),
                                      undirected=undirected,
                                      self_loops=self_loops, dedup=dedup, seed=seed, memory=build_share(budget),
                                      overwrite=overwrite, threads=threads, progress=progress)


def bucket_counts(edges: Sequence[EdgeTable], kinds: Dict[str, str], budget: int,
                  nodes: Dict[str, NodeTable]) -> Dict[str, int]:
    """Buckets per node type: a bucket's ids (a string's estimated from the first batch) and its
    node rows each within a quarter of ``budget``."""
    ids = dict.fromkeys(kinds, 0)
    per_id = dict.fromkeys(kinds, 8)
    for e in edges:
        first, rows = e.first()
        for end, ty in enumerate(e.types):
            ids[ty] += rows
            if kinds[ty] == "str" and (end == 0 or e.name is not None):
                per_id[ty] = max(per_id[ty], max(8, first.column(end).nbytes // max(1, first.num_rows)) + 8)
    p = {}
    for ty in kinds:
        p[ty] = bucket_count(ids[ty], per_id[ty], budget)
        n = nodes.get(ty)
        if n is not None:
            size = max(n.t.rows * n.row_bytes() if n.t.rows is not None else 0, 2 * os.path.getsize(n.path))
            p[ty] = min(MAX_BUCKETS, max(p[ty], math.ceil(size * 4 / max(1, budget // 4))))
    return p


def map_tables(stage: Staging, edges: Sequence[EdgeTable], kinds: Dict[str, str], nodes: Dict[str, NodeTable],
               budget: int, feature_dtype: Optional[str]
               ) -> Tuple[List[build.NodeType], List[Tuple[str, Optional[str]]]]:
    """Passes 1 to 4 (docs/ARCHITECTURE.md, "Importers", tables), each type's ids in
    :func:`bucket_counts` buckets: the node types, sorted, with their original ids and node
    tables' staged columns, and per edge table (its staged edge list of dense ids, its times or None)."""
    pa = require_pyarrow()
    p = bucket_counts(edges, kinds, budget, nodes)
    same_unit(edges, nodes)
    allow_open_files(sum(p.values()) + max(p.values()))  # pass 1: every type's ids, one table's edges
    ids_b = {ty: Buckets(stage, f"ids-{i}", pa.schema([("id", id_type(kinds[ty]))]), p[ty])
             for i, ty in enumerate(sorted(kinds))}
    edges_b = []
    for j, e in enumerate(edges):
        (s_type, d_type), ends = e.types, (kinds[e.types[0]], kinds[e.types[1]])
        time_field = [("time", pa.int64())] if e.time is not None else []
        eb = Buckets(stage, f"edges-{j}", pa.schema([("src", id_type(ends[0])), ("dst", id_type(ends[1]))]
                                                   + time_field), p[s_type])
        row0 = 0
        for batch in e.t.batches(e.read_columns()):
            s, d = e.ids(batch, ends, row0)
            t = [e.t.times(batch.column(2), e.time, e.time_option(), row0)] if e.time is not None else []
            bs, bd = bucket_of(s, ends[0], p[s_type]), bucket_of(d, ends[1], p[d_type])
            if s_type == d_type:
                ids_b[s_type].write(np.concatenate([bs, bd]), [pa.concat_arrays([s, d]) if ends[0] == "str" else
                                                               np.concatenate([s, d])])
            else:
                ids_b[s_type].write(bs, [s])
                ids_b[d_type].write(bd, [d])
            eb.write(bs, [s, d] + t)
            row0 += batch.num_rows
        eb.close()
        edges_b.append(eb)
    for b in ids_b.values():
        b.close()
    maps: Dict[str, IdMap] = {}
    types = []
    for ty in sorted(kinds):
        m = maps[ty] = IdMap.number(stage, ids_b[ty], kinds[ty])
        f, y, sp, nt = join(nodes[ty], stage, kinds[ty], m.p, m.uniq, m.offsets) if ty in nodes else (None,) * 4
        types.append(build.NodeType(ty, m.num_nodes, features=f, labels=y, split=sp or None,
                                    feature_dtype=feature_dtype, node_ids=m.files, node_time=nt))
    return types, [map_edges(stage, eb, maps[e.types[0]], maps[e.types[1]]) for e, eb in zip(edges, edges_b)]


def same_unit(edges: Sequence[EdgeTable], nodes: Dict[str, NodeTable]) -> None:
    """The time columns whose types give a unit (timestamps, dates) give one unit."""
    units = [(e.unit, f"{e.path}: column '{e.time}'") for e in edges if e.unit] + \
        [(n.time_unit, f"{n.path}: column '{n.time}'") for n in nodes.values() if n.time_unit]
    for unit, where in units[1:]:
        if unit != units[0][0]:
            raise InputError(f"{units[0][1]} holds times in {units[0][0]} and {where} in {unit}; a dataset's times "
                             "share one unit: cast them to one timestamp unit (or to int64 in one unit)")


class IdMap:
    """Dense ids of one node type: ``p`` bucket files of distinct sorted ids, bucket ``b``'s
    numbered from ``offsets[b]``, and the originals in dense order as ``node_ids`` files."""

    def __init__(self, kind: str, uniq: Buckets, offsets: List[int], files: Tuple[str, str, Optional[str]]):
        self.kind, self.uniq, self.offsets, self.files = kind, uniq, offsets, files
        self.p = len(offsets) - 1
        self.num_nodes = offsets[-1]

    @classmethod
    def number(cls, stage: Staging, ids_b: Buckets, kind: str) -> "IdMap":
        """Pass 2: each bucket's distinct ids, sorted, get consecutive dense ids."""
        import pyarrow as pa
        import pyarrow.compute as pc

        p = len(ids_b.paths)
        uniq_b = Buckets(stage, "uniq", pa.schema([("id", id_type(kind))]), p)
        offsets = [0]
        ids_path = stage.path("node-ids")[:-4] + ".bin"
        bytes_path = stage.path("node-id-bytes")[:-4] + ".bin" if kind == "str" else None
        with os_errors("writing the original ids in", stage.dir), open(ids_path, "wb") as ids_f, \
                (open(bytes_path, "wb") if bytes_path else contextlib.nullcontext()) as bytes_f:
            if kind == "str":
                ids_f.write(np.zeros(1, "<u8").tobytes())
            text_end = 0
            for b in range(p):
                col = ids_b.read(b).column("id")
                u = pc.unique(col)
                u = u.take(pc.sort_indices(u)) if len(u) else u
                u = u.combine_chunks() if isinstance(u, pa.ChunkedArray) else u
                uniq_b.write(np.full(len(u), b, dtype=np.int64), [u])
                os.remove(ids_b.paths[b]) if os.path.exists(ids_b.paths[b]) else None
                if kind == "str":
                    lens = to_np(pc.binary_length(u)).astype(np.int64) if len(u) else np.zeros(0, np.int64)
                    ids_f.write((text_end + np.cumsum(lens)).astype("<u8").tobytes())
                    text_end += int(lens.sum())
                    if len(u):
                        o = np.frombuffer(u.buffers()[1], np.int64)
                        data = u.buffers()[2]
                        if data is not None:
                            bytes_f.write(np.frombuffer(data, np.uint8)[o[u.offset]: o[u.offset + len(u)]].tobytes())
                else:
                    ids_f.write(to_np(u).astype("<u8" if kind == "uint" else "<i8").tobytes())
                offsets.append(offsets[-1] + len(u))
        uniq_b.close()
        dtype = "str" if kind == "str" else ("u64" if kind == "uint" else "i64")
        return cls(kind, uniq_b, offsets, (dtype, ids_path, bytes_path))

    def bucket(self, ids: Any) -> np.ndarray:
        return bucket_of(ids, self.kind, self.p)

    def dense(self, b: int, ids: Any) -> np.ndarray:
        import pyarrow.compute as pc

        u = self.uniq.read(b).column("id")
        return to_np(pc.index_in(ids, value_set=u)).astype(np.int64, copy=False) + self.offsets[b]


def map_edges(stage: Staging, edges_b: Buckets, src: IdMap, dst: IdMap) -> Tuple[str, Optional[str]]:
    """Passes 3 and 4: edges bucketed by source become a staged ``(E, 2)`` ``.npy`` of dense ids
    (sources mapped, re-bucketed by destination, destinations mapped), with their times if any."""
    import pyarrow as pa

    timed = "time" in edges_b.schema.names
    mid_b = Buckets(stage, "mid", pa.schema([("src", pa.int64()), ("dst", id_type(dst.kind))]
                                            + ([("time", pa.int64())] if timed else [])), dst.p)
    for b in range(len(edges_b.paths)):
        e = edges_b.read(b)
        if e.num_rows == 0:
            continue
        dense = src.dense(b, e.column("src"))
        dcol = e.column("dst").combine_chunks()
        d_np = dcol if dst.kind == "str" else to_np(dcol)
        mid_b.write(dst.bucket(d_np), [dense, d_np] + ([to_np(e.column("time"))] if timed else []))
        os.remove(edges_b.paths[b])
    mid_b.close()
    with NpyWriter(stage.path("edges"), np.int64, (2,)) as w, \
            (NpyWriter(stage.path("edge-times"), np.int64) if timed else contextlib.nullcontext()) as tw:
        for b in range(dst.p):
            e = mid_b.read(b)
            if e.num_rows == 0:
                continue
            w.write(np.stack([to_np(e.column("src")), dst.dense(b, e.column("dst"))], axis=1))
            if tw is not None:
                tw.write(to_np(e.column("time")))
            os.remove(mid_b.paths[b])
        return w.close(), (tw.close() if tw is not None else None)


#: The interpreter with numpy, which the builder's fixed part (budget.rs ``OVERHEAD``) counts.
BUILDER_COUNTS_PYTHON = 50 << 20


def import_budget(memory: Optional[build.Size]) -> int:
    """The import's budget for the whole process: ``memory``, or by default what the process
    holds now plus the build's default growth (:func:`build_share` takes what it holds off)."""
    if memory is not None:
        return build._memory(memory)
    return default_memory(cap=build.DEFAULT_BUILD_MEMORY)


def build_share(budget: int) -> int:
    """What the builder may take of an import's ``budget``: the budget less what the process
    holds beyond the interpreter the builder already counts, after the id map's memory is freed."""
    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    try:  # glibc keeps freed numpy buffers in its heap until asked
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    held = process_rss()
    share = budget - max(0, held - BUILDER_COUNTS_PYTHON)
    if share < _core.MIN_BUILD_MEMORY:  # the builder's smallest budget, crates/ringgnn-store/src/budget.rs
        raise InputError(f"--memory {budget >> 20} MiB is the whole process's budget, and the process already holds "
                         f"{held >> 20} MiB after the id map; the build needs {_core.MIN_BUILD_MEMORY >> 20} MiB more: "
                         "give a larger --memory (the default adds to what the process holds)")
    return share


def bucket_count(ids: int, per_id: int, budget: int) -> int:
    """Buckets for ``ids`` ids of ``per_id`` bytes: about 4 copies of a bucket's ids (while
    sorted) within a quarter of ``budget``."""
    return min(MAX_BUCKETS, max(1, math.ceil(ids * per_id * 4 / max(1, budget // 4))))
