"""Edge tables whose node ids are not dense integers: a Parquet file or a CSV with a header,
two columns naming each edge's source and destination by 64-bit integers (hashes, database
keys) or strings. :func:`convert_table` assigns dense ids ``0 .. V-1`` out of core and builds
the dataset with :func:`ringgnn.data.build.convert`, storing the original ids beside it
(``Dataset.node_ids()``; ``docs/FORMAT.md`` "Original node ids"). ``ringgnn convert
edges.parquet OUT --src COL --dst COL`` calls it.

**The id map** is sort-based and partitioned, so that only one part's ids are in memory at a
time (``memory``): pass 1 reads the table in record batches and appends every id to one of
``P`` bucket files by a hash of the id (a fixed function of its value or bytes), and every edge
to the bucket of its source; pass 2 loads each id bucket, sorts its distinct ids and gives them
consecutive dense ids (bucket by bucket, so dense ids follow (bucket, value) order: a function of
the set of ids alone, the same on every run); pass 3 maps each edge bucket's sources, re-bucketed
by destination, and pass 4 their destinations, into the ``.npy`` edge list the builder reads.
``P`` is chosen so that a bucket's ids take at most a quarter of ``memory``. Bucket files are
Arrow IPC streams in the staging directory beside ``out``, removed at the end. Passes 2 to 4 are
:class:`IdMap` and :func:`map_edges`, which :mod:`.typed_tables` uses once per node type and per
relation.

Requires ``pyarrow`` (``pip install 'ringgnn[parquet]'``). A CSV's id columns are read as
strings (CSV has no types: ``007`` and ``7`` are different text, so different nodes); integer ids
come from Parquet's integer columns. A column that does not exist, holds floats or has nulls is an
error naming the file and column; nothing is written.
"""

from __future__ import annotations

import ctypes
import gc
import math
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .._core import InputError
from .._files import NpyWriter, os_errors
from .._options import default_memory, parse_split, process_rss
from ..data import build
from ._arrow import Buckets, Table, allow_open_files, bucket_of, require_pyarrow, to_np
from ._stage import PathLike, Staging
from .node_table import NodeTable, join

#: At most this many buckets (files open at once while the table is read).
MAX_BUCKETS = 1024


def _id_type(kinds: Tuple[str, str], t: Table, src: str, dst: str) -> str:
    if kinds[0] == kinds[1]:
        return kinds[0]
    if set(kinds) == {"int", "uint"}:
        return "uint" if "uint" in kinds else "int"  # checked per value below
    raise InputError(f"{t.path}: column '{src}' holds {'strings' if kinds[0] == 'str' else 'integers'} and '{dst}' "
                     f"{'strings' if kinds[1] == 'str' else 'integers'}; the two ends must name nodes the same way")


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
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a dataset at ``out`` from the edge table ``table`` (Parquet, or CSV with a header)
    whose columns ``src`` and ``dst`` name nodes by integers or strings; returns the manifest.

    ``node_table`` (Parquet or CSV), keyed by column ``node_id`` (the same kind of ids), gives
    features (``feature_columns``: numeric columns, or one column of vectors), labels
    (``label_column``) and splits (``split_column``: each node's split name, null for none),
    joined out of core (:mod:`.node_table`). The other arguments are
    :func:`ringgnn.data.build.convert`'s (``split``: fractions only, the dense ids being unknown to
    the caller)."""
    pa = require_pyarrow()

    path = os.fspath(table)
    t = Table(path, id_columns=(src, dst))
    kinds = (t.column_type(src, "--src"), t.column_type(dst, "--dst"))
    kind = _id_type(kinds, t, src, dst)
    nodes = None
    if node_table is not None:
        if node_id is None:
            raise InputError(f"{os.fspath(node_table)}: name its id column (--node-id COL)")
        nodes = NodeTable(os.fspath(node_table), node_id, list(feature_columns), label_column, kind, split_column)
    elif feature_columns or label_column is not None or node_id is not None or split_column is not None:
        raise InputError("--node-id, --feature-columns, --label-column and --split-column name columns of a "
                         "--node-table; give it")
    if split is not None:
        if split_column is not None or not all(isinstance(v, float) for _, v in parse_split(split)):
            raise InputError(f"split {split!r}: a table's splits are fractions (train=0.8,...) or a node table's "
                             "--split-column; its dense ids are assigned by the import, so id files cannot name them")
    budget = import_budget(memory)
    id_type = pa.large_string() if kind == "str" else (pa.uint64() if kind == "uint" else pa.int64())
    with Staging(out, overwrite) as stage:
        edges, num_nodes, ids, features, labels, node_splits = _map_ids(stage, t, path, src, dst, kinds, kind,
                                                                        id_type, budget, nodes)
        build_memory = build_share(budget)
        return build.convert(edges, out, format="npy", num_nodes=num_nodes, undirected=undirected,
                             self_loops=self_loops, dedup=dedup, split=node_splits or split, features=features,
                             labels=labels,
                             feature_dtype=feature_dtype, seed=seed, memory=build_memory, overwrite=overwrite,
                             threads=threads, progress=progress, node_ids=ids)


def _map_ids(stage: Staging, t: "Table", path: str, src: str, dst: str, kinds: Tuple[str, str], kind: str,
             id_type: Any, budget: int, nodes: Any) -> Tuple[str, int, Tuple[str, str, Optional[str]],
                                                            Optional[str], Optional[str], Optional[Dict[str, str]]]:
    """Passes 1 to 4 (see the module): the staged edge list of dense ids, the node count, the
    original ids' files, and the node table's features and labels (or None)."""
    import pyarrow as pa

    batches = t.batches([src, dst])
    first = next(batches, None)
    if first is None or first.num_rows == 0 and t.rows == 0:
        raise InputError(f"{path}: no rows; the table has no edges")
    # Bytes an id takes in a bucket (ids, their sort and unique copies, Arrow's hash table).
    per_id = 8 if kind != "str" else max(8, first.column(0).nbytes // max(1, first.num_rows)) + 8
    rows = t.rows if t.rows is not None else max(first.num_rows, os.path.getsize(path) // 4)
    p = bucket_count(rows, per_id, budget)
    if nodes is not None:  # a bucket's node rows within the same quarter of the budget
        size = nodes.t.rows * nodes.row_bytes() if nodes.t.rows is not None else 0
        size = max(size, 2 * os.path.getsize(nodes.path))
        p = min(MAX_BUCKETS, max(p, math.ceil(size * 4 / max(1, budget // 4))))
    allow_open_files(2 * p)  # pass 1 writes ids and edges; the later passes at most as many
    ids_b = Buckets(stage, "ids", pa.schema([("id", id_type)]), p)
    edges_b = Buckets(stage, "edges", pa.schema([("src", id_type), ("dst", id_type)]), p)
    row0 = 0
    for batch in _chain(first, batches):
        s = t.ids(batch.column(0), kinds[0], src, "--src", row0)
        d = t.ids(batch.column(1), kinds[1], dst, "--dst", row0)
        if kind != "str":
            s, d = _same_width(s, d, path, src, dst, row0)
        bs, bd = bucket_of(s, kind, p), bucket_of(d, kind, p)
        ids_b.write(np.concatenate([bs, bd]), [_concat(s, d)])
        edges_b.write(bs, [s, d])
        row0 += batch.num_rows
    ids_b.close(), edges_b.close()

    ids = IdMap.number(stage, ids_b, kind, id_type)
    features = labels = node_splits = None
    if nodes is not None:
        features, labels, node_splits = join(nodes, stage, kind, p, ids.uniq, ids.offsets)
    edges = map_edges(stage, edges_b, ids, ids)
    return edges, ids.num_nodes, ids.files, features, labels, node_splits


class IdMap:
    """Dense ids of one set of original ids (a homogeneous table's nodes, or one node type's):
    ``p`` bucket files of distinct ids, each sorted, bucket ``b``'s numbered from
    ``offsets[b]``, and the originals in dense order as the builder's ``node_ids`` files."""

    def __init__(self, kind: str, id_type: Any, uniq: Buckets, offsets: List[int],
                 files: Tuple[str, str, Optional[str]]):
        self.kind, self.id_type, self.uniq, self.offsets, self.files = kind, id_type, uniq, offsets, files
        self.p = len(offsets) - 1
        self.num_nodes = offsets[-1]

    @classmethod
    def number(cls, stage: Staging, ids_b: Buckets, kind: str, id_type: Any) -> "IdMap":
        """Pass 2: each bucket's distinct ids, sorted, get consecutive dense ids (the bucket
        files of ``ids_b`` are removed as they are read)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        p = len(ids_b.paths)
        uniq_b = Buckets(stage, "uniq", pa.schema([("id", id_type)]), p)
        offsets = [0]
        ids_path = stage.path("node-ids")[:-4] + ".bin"
        bytes_path = stage.path("node-id-bytes")[:-4] + ".bin" if kind == "str" else None
        with os_errors("writing the original ids in", stage.dir), open(ids_path, "wb") as ids_f, \
                (open(bytes_path, "wb") if bytes_path else _Null()) as bytes_f:
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
        return cls(kind, id_type, uniq_b, offsets, (dtype, ids_path, bytes_path))

    def bucket(self, ids: Any) -> np.ndarray:
        return bucket_of(ids, self.kind, self.p)

    def dense(self, b: int, ids: Any) -> np.ndarray:
        """The dense ids of ``ids`` (all in bucket ``b``, all present)."""
        import pyarrow.compute as pc

        u = self.uniq.read(b).column("id")
        return to_np(pc.index_in(ids, value_set=u)).astype(np.int64, copy=False) + self.offsets[b]


def map_edges(stage: Staging, edges_b: Buckets, src: IdMap, dst: IdMap) -> str:
    """Passes 3 and 4: edges bucketed by their source's bucket of ``src`` become a staged
    ``(E, 2)`` ``.npy`` of dense ids: sources mapped bucket by bucket (re-bucketed by the
    destination's bucket of ``dst``), then destinations. The bucket files are removed as read."""
    import pyarrow as pa

    mid_b = Buckets(stage, "mid", pa.schema([("src", pa.int64()), ("dst", dst.id_type)]), dst.p)
    for b in range(len(edges_b.paths)):
        e = edges_b.read(b)
        if e.num_rows == 0:
            continue
        dense = src.dense(b, e.column("src"))
        dcol = e.column("dst").combine_chunks()
        d_np = dcol if dst.kind == "str" else to_np(dcol)
        mid_b.write(dst.bucket(d_np), [dense, d_np])
        os.remove(edges_b.paths[b])
    mid_b.close()
    with NpyWriter(stage.path("edges"), np.int64, (2,)) as w:
        for b in range(dst.p):
            e = mid_b.read(b)
            if e.num_rows == 0:
                continue
            w.write(np.stack([to_np(e.column("src")), dst.dense(b, e.column("dst"))], axis=1))
            os.remove(mid_b.paths[b])
        return w.close()


#: The Python interpreter with numpy that the builder's fixed part already counts (``OVERHEAD``
#: in ``crates/ringgnn-store/src/builder/mod.rs``).
BUILDER_COUNTS_PYTHON = 50 << 20
#: The builder's smallest budget (``MIN_MEMORY`` in ``crates/ringgnn-store/src/builder/mod.rs``).
MIN_BUILD = 128 << 20


def import_budget(memory: Optional[build.Size]) -> int:
    """The import's budget for the whole process: ``memory``, or by default what the process
    holds now plus the build's default growth (:func:`ringgnn._options.default_memory`). The
    builder's own default (``build._memory(None)``) leaves out what the process holds, which
    :func:`build_share` takes off: in a process that already holds ~1 GB (torch, a model: a
    notebook, a test session) the default left the builder less than its 128M minimum."""
    if memory is not None:
        return build._memory(memory)
    return default_memory(cap=build.DEFAULT_BUILD_MEMORY)


def build_share(budget: int) -> int:
    """What the builder may take of an import's ``budget`` (one budget for the whole process):
    the budget less what the process holds beyond the interpreter the builder already counts
    (pyarrow, and the pages the id map's allocators kept). The map's arrays are freed first and
    the allocators asked to return them. Counting only the growth since the import started, as
    before, left pyarrow's own ~30 MiB out: a 100M-edge table peaked at 521 MiB under 512M."""
    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    try:  # glibc keeps freed numpy buffers in its heap until asked
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    held = process_rss()
    share = budget - max(0, held - BUILDER_COUNTS_PYTHON)
    if share < MIN_BUILD:
        raise InputError(f"--memory {budget >> 20} MiB is the whole process's budget, and the process already holds "
                         f"{held >> 20} MiB after the id map; the build needs {MIN_BUILD >> 20} MiB more: give a larger "
                         "--memory (the default adds to what the process holds)")
    return share


def bucket_count(rows: int, per_id: int, budget: int) -> int:
    """Buckets for ``rows`` edges whose ids take ``per_id`` bytes each: a bucket's ids (about
    ``2 * rows / P``, and about 4 copies of them while their distinct values are sorted) within a
    quarter of ``budget``."""
    return min(MAX_BUCKETS, max(1, math.ceil(2 * rows * per_id * 4 / max(1, budget // 4))))


class _Null:
    def __enter__(self) -> "_Null":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _concat(s: Any, d: Any) -> Any:
    import pyarrow as pa

    if isinstance(s, np.ndarray):
        return np.concatenate([s, d])
    return pa.concat_arrays([s, d])


def _same_width(s: np.ndarray, d: np.ndarray, path: str, src: str, dst: str,
                row0: int) -> Tuple[np.ndarray, np.ndarray]:
    """Integer ids of one type: a signed column's negative ids cannot meet an unsigned column's."""
    if s.dtype == d.dtype:
        return s, d
    signed, name = (s, src) if s.dtype == np.int64 else (d, dst)
    bad = np.flatnonzero(signed < 0)
    if bad.size:
        raise InputError(f"{path}: column '{name}' row {row0 + bad[0]} is {signed[bad[0]]}, negative, while the other "
                         "column is unsigned; give both columns one integer type")
    return s.astype(np.uint64), d.astype(np.uint64)
