"""A node table (features, labels, splits, node times) joined out of core onto the dense ids that
:mod:`.tables` assigned, bucket by bucket."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._core import InputError
from .._excerpt import quoted
from .._files import NpyWriter
from ._arrow import Buckets, Table, arrow, bucket_of, id_type, times_of, to_np
from ._stage import LabelWriter, Staging, split_name


class NodeTable:
    """The node table's columns, checked before anything is read."""

    def __init__(self, path: str, id_col: str, features: Sequence[str], label: Optional[str], kind: str,
                 split: Optional[str] = None, time: Optional[str] = None):
        import pyarrow as pa

        self.t = Table(path, id_columns=(id_col,) + ((split,) if split else ()))
        self.path, self.id_col, self.features, self.label = path, id_col, list(features), label
        self.split, self.time = split, time
        self.time_unit = None if time is None else self.t.time_unit(time, "--node-time-column")
        self.id_kind = self.t.column_type(id_col, "--node-id")
        if (self.id_kind == "str") != (kind == "str"):
            what = "strings" if self.id_kind == "str" else "integers"
            raise InputError(f"{path}: column '{id_col}' (--node-id) holds {what}"
                             f" but the edge table's ids are {'strings' if kind == 'str' else 'integers'}")
        if not self.features and label is None and split is None and time is None:
            raise InputError(f"{path}: --node-table needs --feature-columns, --label-column or --split-column, or "
                             "--node-time-column (what to take from it)")
        self.list_column = False
        self.dim = 0
        dtypes = []
        for c in self.features:
            t = self.t.value_type(c, "--feature-columns")
            if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
                if len(self.features) != 1:
                    raise InputError(f"{path}: column '{c}' holds vectors; give it alone in --feature-columns, or "
                                     "give numeric columns")
                self.list_column = True
                t = t.value_type
            if not (pa.types.is_floating(t) or pa.types.is_integer(t)):
                raise InputError(f"{path}: column '{c}' (--feature-columns) holds {t}; features must be numbers")
            dtypes.append(t)
            self.dim += 1
        self.dtype = np.float16 if dtypes and all(pa.types.is_float16(t) for t in dtypes) else (
            np.float64 if any(pa.types.is_float64(t) for t in dtypes) else np.float32)
        if label is not None:
            t = self.t.value_type(label, "--label-column")
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise InputError(f"{path}: column '{label}' (--label-column) holds {t}; labels must be integer "
                                 "class ids (-1 or null = unlabeled)")
        if split is not None:
            t = self.t.value_type(split, "--split-column")
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise InputError(f"{path}: column '{split}' (--split-column) holds {t}; give split names (train, "
                                 "val, test; null = in no split)")

    def columns(self) -> List[str]:
        return self.features + [c for c in (self.label, self.split, self.time) if c is not None]

    def row_bytes(self) -> int:
        """Bytes a row takes in a bucket (a list column, its width unknown, counts one value)."""
        return 24 + 8 * self.dim

    def bucket_rows(self, stage: Staging, kind: str, p: int) -> Buckets:
        import pyarrow as pa

        cols = self.columns()
        fields = [pa.field("id", id_type(kind))]
        fields += [pa.field(f"c{i}", self.t.schema.field(c).type) for i, c in enumerate(cols)]
        b = Buckets(stage, "nodes", pa.schema(fields + [pa.field("row", pa.int64())]), p)
        row0 = 0
        for batch in self.t.batches([self.id_col] + cols):
            ids = self.t.ids(batch.column(0), self.id_kind, self.id_col, "--node-id", row0)
            if kind != "str" and kind != self.id_kind:  # signed ids against unsigned edge ids, or the reverse
                bad = np.flatnonzero(ids < 0 if kind == "uint" else ids >= np.uint64(2**63))
                if bad.size:
                    i = int(np.argmin(ids) if kind == "uint" else bad[0])  # the least id, or the first past int64
                    unsigned = " (the edge ids are unsigned)" if kind == "uint" else ""
                    raise InputError(f"{self.path}: id {ids[i]} (row {row0 + i}) is named by no edge{unsigned}; remove "
                                     "its row")
                ids = ids.astype(np.uint64 if kind == "uint" else np.int64)
            rows = np.arange(row0, row0 + batch.num_rows, dtype=np.int64)
            b.write(bucket_of(ids, kind, p), [ids] + [batch.column(i + 1) for i in range(len(cols))] + [rows])
            row0 += batch.num_rows
        b.close()
        return b


def join(nodes: NodeTable, stage: Staging, kind: str, p: int, uniq_b: Buckets, offsets: List[int]
         ) -> Tuple[Optional[str], Optional[str], Optional[Dict[str, str]], Optional[str]]:
    """Features, labels and node times in dense order and the splits' node ids, as staged
    ``.npy`` files (None where not asked)."""
    import pyarrow.compute as pc

    splits: Dict[str, NpyWriter] = {}

    rows_b = nodes.bucket_rows(stage, kind, p)
    feats = NpyWriter(stage.path("features", nodes.path), nodes.dtype, ()) if nodes.features else None
    label_source = f"{nodes.path}: column '{nodes.label}' (--label-column)"
    labels = LabelWriter(stage.path("labels", label_source), label_source) if nodes.label is not None else None
    times = NpyWriter(stage.path("node-times", nodes.path), np.int64) if nodes.time is not None else None
    try:
        for b in range(p):
            u = uniq_b.read(b).column("id")
            r = rows_b.read(b)
            pos = pc.index_in(r.column("id"), value_set=u)
            if pos.null_count:
                i = int(np.flatnonzero(to_np(pos.is_null()))[0])
                row = r.column("row")[i].as_py()
                raise InputError(f"{nodes.path}: id {quoted(r.column('id')[i].as_py())} (row {row}) is "
                                 "named by no edge; remove its row, or add its edges")
            pos = to_np(pos).astype(np.int64, copy=False)
            have = np.bincount(pos, minlength=len(u))
            if (have > 1).any():
                k = int(np.flatnonzero(have > 1)[0])
                raise InputError(f"{nodes.path}: id {quoted(u[k].as_py())} has {have[k]} rows; give each node one row")
            if (have == 0).any():
                k = int(np.flatnonzero(have == 0)[0])
                raise InputError(f"{nodes.path}: id {quoted(u[k].as_py())} of the edges has no row; every node "
                                 "needs one (give it a row, with -1 or null as its label if it has none)")
            if r.num_rows == 0:
                continue
            r = r.take(arrow(np.argsort(pos)))  # the bucket's rows in dense order
            block = _values(nodes, r)
            if feats is not None:
                x = block["features"]
                if feats.rows == 0 and not feats.row_shape:
                    feats.row_shape = x.shape[1:]
                elif x.shape[1:] != feats.row_shape:
                    raise InputError(f"{nodes.path}: vectors of column '{nodes.features[0]}' have {x.shape[1]} values "
                                     f"in some rows and {feats.row_shape[0]} in others; give them one length")
                feats.write(x)
            if labels is not None:
                labels.write(block["labels"], lambda i, v, r=r: f"{nodes.path}: label {v} (--label-column "
                             f"'{nodes.label}') of id {r.column('id')[i].as_py()!r} (row {r.column('row')[i].as_py()})")
            for name, k in (block.get("split") or {}).items():
                if name not in splits:
                    splits[name] = NpyWriter(stage.path(f"split-{len(splits)}", nodes.path), np.int64)
                splits[name].write(offsets[b] + k)  # the block's row k is dense id offsets[b] + k
            if times is not None:
                times.write(block["times"])
        split_files = {name: w.close() for name, w in splits.items()} if nodes.split is not None else None
        return (feats.close() if feats else None), (labels.close() if labels else None), split_files, \
            (times.close() if times else None)
    finally:
        for w in [feats, labels, times, *splits.values()]:
            if w is not None:
                w.__exit__()


def _values(nodes: NodeTable, table: Any) -> dict:
    import pyarrow.compute as pc

    out = {}
    if nodes.features:
        if nodes.list_column:
            col = table.column("c0").combine_chunks()
            if len(col) == 0:
                x = np.zeros((0, 0), dtype=nodes.dtype)
            else:
                if col.null_count:
                    raise InputError(f"{nodes.path}: column '{nodes.features[0]}' has an empty (null) vector")
                lens = to_np(pc.list_value_length(col))
                if (lens != lens[0]).any():
                    raise InputError(f"{nodes.path}: vectors of column '{nodes.features[0]}' have {lens.min()} to "
                                     f"{lens.max()} values; give them one length")
                x = to_np(pc.list_flatten(col)).astype(nodes.dtype, copy=False).reshape(len(col), int(lens[0]))
        else:
            x = np.stack([_numbers(table.column(f"c{i}"), nodes, c) for i, c in enumerate(nodes.features)], axis=1) \
                if table.num_rows else np.zeros((0, len(nodes.features)), dtype=nodes.dtype)
        out["features"] = x
    if nodes.label is not None:
        out["labels"] = _labels(table.column(f"c{len(nodes.features)}"), nodes)
    if nodes.split is not None:
        out["split"] = _split_rows(table.column(f"c{len(nodes.features) + (nodes.label is not None)}"), nodes)
    if nodes.time is not None:
        out["times"] = _times(table.column(f"c{len(nodes.columns()) - 1}"), table, nodes)
    return out


def _times(col: Any, table: Any, nodes: NodeTable) -> np.ndarray:
    def where(i: int, v: Any = None) -> str:
        return (f"{nodes.path}: column '{nodes.time}' (--node-time-column) of id "
                f"{quoted(table.column('id')[i].as_py())} (row {table.column('row')[i].as_py()})")

    if col.null_count:
        i = int(np.flatnonzero(to_np(col.is_null()))[0])
        raise InputError(f"{where(i)} has no time (null); every node needs its time")
    return times_of(col, lambda i, v: f"{where(i)} is {v}")


def _split_rows(col: Any, nodes: NodeTable) -> Dict[str, np.ndarray]:
    """Split name -> the block's rows in it, ascending; null and empty cells are in none."""
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col.combine_chunks() if hasattr(col, "combine_chunks") else col)
    codes = to_np(enc.indices).astype(np.int64)
    codes[to_np(enc.is_null())] = -1
    out: Dict[str, List[np.ndarray]] = {}
    for c, cell in enumerate(enc.dictionary.to_pylist()):
        if not cell.strip():
            continue  # an empty cell: CSV's null
        name = split_name(cell, nodes.path, f" (--split-column '{nodes.split}')")
        out.setdefault(name, []).append(np.flatnonzero(codes == c))
    return {name: np.sort(np.concatenate(rows)) if len(rows) > 1 else rows[0] for name, rows in out.items()}


def _numbers(col: Any, nodes: NodeTable, name: str) -> np.ndarray:
    if col.null_count:
        raise InputError(f"{nodes.path}: column '{name}' has empty (null) values; give every node its features")
    return to_np(col).astype(nodes.dtype)


def _labels(col: Any, nodes: NodeTable) -> np.ndarray:
    import pyarrow as pa

    null = to_np(col.is_null())
    if pa.types.is_integer(col.type):
        a = to_np(col).astype(np.int64)
        a[null] = -1
    else:
        f = to_np(col).astype(np.float64)
        f[null] = np.nan
        nan = np.isnan(f)
        bad = np.flatnonzero(~nan & (f != np.floor(f)))
        if bad.size:
            raise InputError(f"{nodes.path}: label {f[bad[0]]} (--label-column '{nodes.label}') is not a class id")
        a = np.where(nan, -1, f).astype(np.int64)
    return a
