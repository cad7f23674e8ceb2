"""Tables of typed nodes: a heterogeneous dataset from one edge table per relation ``SRC:REL:DST``
(Parquet, or CSV with a header) whose columns name nodes by 64-bit integers or strings, and an
optional node table per type (features, labels, splits), as :mod:`.tables` does for one node set.
``ringgnn convert user:buys:item=buys.parquet OUT --src user_id --dst item_id --relation ...
--node-table user=users.parquet ...`` calls :func:`convert_typed_tables`.

Each node type has its own id space and its own id map (:class:`.tables.IdMap`): pass 1 reads
every relation table once, appending each source id to its ``SRC`` type's buckets and each
destination id to its ``DST`` type's, and each edge to the bucket of its source (in ``SRC``'s
buckets); pass 2 numbers each type's distinct ids, one type and one bucket at a time; a type's
node table is joined onto its dense ids (:func:`.node_table.join`); passes 3 and 4 map each
relation's sources through ``SRC``'s map and its destinations through ``DST``'s
(:func:`.tables.map_edges`) into the ``.npy`` edge list :func:`ringgnn.data.build.build_hetero`
reads, which stores each type's original ids as ``node.TYPE.node_ids``. A type's bucket count
keeps one of its buckets (ids, or node rows) within a quarter of ``memory``, the same rule as a
homogeneous table's: only one bucket of one type is in memory at a time, so each type's map has
that whole quarter to itself. Dense ids of a type follow (bucket, value) order, a function of
that type's set of ids alone.

The columns naming one type must name it the same way (all strings, or all integers; a signed
and an unsigned column mix when no id is negative), as must its node table's id column. Every
type needs at least one relation; a type's node table must give exactly one row to each id its
relations name (an id of a relation missing from it, a row no relation names, or an id with two
rows is an error naming the file and the id). Nothing is written on an error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._core import InputError
from ..data import build
from ..data.schema import parse_edge_type
from ._arrow import Buckets, Table, allow_open_files, bucket_of, require_pyarrow
from ._stage import PathLike, Staging
from .node_table import NodeTable, join
from .tables import MAX_BUCKETS, IdMap, build_share, import_budget, map_edges


@dataclass
class TypedRelation:
    """One relation's edge table: ``name`` ``SRC:REL:DST``, columns ``src`` (``SRC`` ids) and
    ``dst`` (``DST`` ids)."""

    name: str
    table: PathLike
    src: str
    dst: str


@dataclass
class TypedNodes:
    """One node type's node table, keyed by column ``node_id``: ``feature_columns`` (numeric
    columns, or one column of vectors), ``label_column``, ``split_column`` (each node's split
    name, null for none), as :func:`.tables.convert_table`'s node table."""

    type: str
    table: PathLike
    node_id: str
    feature_columns: Sequence[str] = field(default_factory=tuple)
    label_column: Optional[str] = None
    split_column: Optional[str] = None


def _relation_types(name: str) -> Tuple[str, str]:
    try:
        src, _, dst = parse_edge_type(name)
    except ValueError:
        raise InputError(f"relation '{name}' must be SRC:REL:DST (three names separated by ':'), as in "
                         "user:buys:item") from None
    return src, dst


def _type_kind(t: str, uses: List[Tuple[str, str, str]]) -> str:
    """'int', 'uint' or 'str' for node type ``t`` from the kinds of the columns naming it
    (``uses``: (file, column, kind))."""
    kinds = {k for _, _, k in uses}
    if len(kinds) == 1:
        return kinds.pop()
    if kinds == {"int", "uint"}:
        return "uint"  # the signed columns are checked per value
    s = next(u for u in uses if u[2] == "str")
    i = next(u for u in uses if u[2] != "str")
    raise InputError(f"node type '{t}': {s[0]}: column '{s[1]}' holds strings but {i[0]}: column '{i[1]}' holds "
                     "integers; the columns naming one type must name its nodes the same way")


def _as_kind(ids: Any, col_kind: str, kind: str, path: str, col: str, t: str, row0: int) -> Any:
    """A signed column's ids as the unsigned ids of its type (none may be negative)."""
    if kind != "uint" or col_kind != "int":
        return ids
    bad = np.flatnonzero(ids < 0)
    if bad.size:
        raise InputError(f"{path}: column '{col}' row {row0 + bad[0]} is {ids[bad[0]]}, negative, while other columns "
                         f"naming node type '{t}' are unsigned; give them one integer type")
    return ids.astype(np.uint64)


def _cat(a: Any, b: Any) -> Any:
    import pyarrow as pa

    return np.concatenate([a, b]) if isinstance(a, np.ndarray) else pa.concat_arrays([a, b])


def convert_typed_tables(
    out: PathLike,
    relations: Sequence[TypedRelation],
    node_tables: Sequence[TypedNodes] = (),
    *,
    add_reverse: bool = False,
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a heterogeneous dataset at ``out`` from one edge table per relation and optional
    node tables per type (see the module); returns the manifest. ``HeteroDataset.node_ids(TYPE)``
    gives each type's original ids back. The other arguments are
    :func:`ringgnn.data.build.build_hetero`'s (``feature_dtype``: the stored type of every node
    table's features)."""
    pa = require_pyarrow()
    if not relations:
        raise InputError("typed tables: give at least one relation table (SRC:REL:DST=FILE)")
    names = [r.name for r in relations]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"relation {dup[0]} is given twice; give each relation one table")
    # Every column is checked before anything is read.
    tables, uses = [], {}
    for r in relations:
        s_type, d_type = _relation_types(r.name)
        path = os.fspath(r.table)
        t = Table(path, id_columns=(r.src, r.dst))
        ks = (t.column_type(r.src, f"--src of {r.name}"), t.column_type(r.dst, f"--dst of {r.name}"))
        uses.setdefault(s_type, []).append((path, r.src, ks[0]))
        uses.setdefault(d_type, []).append((path, r.dst, ks[1]))
        tables.append((r, path, t, ks, s_type, d_type))
    kinds = {ty: _type_kind(ty, u) for ty, u in uses.items()}
    nodes: Dict[str, Any] = {}
    for n in node_tables:
        if n.type not in kinds:
            raise InputError(f"{os.fspath(n.table)}: node type '{n.type}' is in no relation (the relations name: "
                             f"{', '.join(sorted(kinds))}); every node of a node table must be named by an edge")
        if n.type in nodes:
            raise InputError(f"node type '{n.type}' has two node tables; give it one")
        nodes[n.type] = NodeTable(os.fspath(n.table), n.node_id, list(n.feature_columns), n.label_column,
                                  kinds[n.type], n.split_column)
    budget = import_budget(memory)
    id_types = {ty: pa.large_string() if k == "str" else (pa.uint64() if k == "uint" else pa.int64())
                for ty, k in kinds.items()}
    with Staging(out, overwrite) as stage:
        staged = _map(stage, tables, kinds, id_types, budget, nodes)
        build_memory = build_share(budget)
        types = [build.NodeType(ty, m.num_nodes, features=f, labels=y, split=sp, feature_dtype=feature_dtype,
                                node_ids=m.files)
                 for ty, (m, f, y, sp) in sorted(staged["types"].items())]
        rels = [build.Relation(name, e, format="npy") for name, e in staged["relations"]]
        source = {"importer": "tables",
                  "relations": {r.name: {"table": os.path.basename(os.fspath(r.table)), "src": r.src, "dst": r.dst}
                                for r in relations},
                  "node_tables": {n.type: os.path.basename(os.fspath(n.table)) for n in node_tables}}
        return build.build_hetero(out, types, rels, add_reverse=add_reverse, seed=seed, memory=build_memory,
                                  overwrite=overwrite, threads=threads, source=source, progress=progress)


def _bucket_counts(tables: List[Any], kinds: Dict[str, str], budget: int, nodes: Dict[str, Any]) -> Dict[str, int]:
    """Buckets per type: a bucket's ids (about 4 copies while sorted; a string's average bytes
    plus 8, from each table's first batch) and its node rows within a quarter of ``budget``."""
    ids = dict.fromkeys(kinds, 0)
    per_id = dict.fromkeys(kinds, 8)
    for r, path, t, _, s_type, d_type in tables:
        batches = t.batches([r.src, r.dst])
        first = next(batches, None)
        batches.close()
        if first is None or first.num_rows == 0 and t.rows == 0:
            raise InputError(f"{path}: no rows; the table of relation {r.name} has no edges")
        rows = t.rows if t.rows is not None else max(first.num_rows, os.path.getsize(path) // 4)
        for ty, col in ((s_type, 0), (d_type, 1)):
            ids[ty] += rows
            if kinds[ty] == "str":
                avg = first.column(col).nbytes // max(1, first.num_rows)
                per_id[ty] = max(per_id[ty], max(8, avg) + 8)
    out = {}
    quarter = max(1, budget // 4)
    for ty in kinds:
        p = math.ceil(ids[ty] * per_id[ty] * 4 / quarter)
        n = nodes.get(ty)
        if n is not None:
            size = n.t.rows * n.row_bytes() if n.t.rows is not None else 0
            p = max(p, math.ceil(max(size, 2 * os.path.getsize(n.path)) * 4 / quarter))
        out[ty] = min(MAX_BUCKETS, max(1, p))
    return out


def _map(stage: Staging, tables: List[Any], kinds: Dict[str, str], id_types: Dict[str, Any], budget: int,
         nodes: Dict[str, Any]) -> Dict[str, Any]:
    """Passes 1 to 4: per type its :class:`IdMap` and staged node-table files, per relation its
    staged edge list of dense ids."""
    import pyarrow as pa

    p = _bucket_counts(tables, kinds, budget, nodes)
    allow_open_files(sum(p.values()) + max(p.values()))  # pass 1: every type's ids, one relation's edges
    ids_b = {ty: Buckets(stage, f"ids-{i}", pa.schema([("id", id_types[ty])]), p[ty])
             for i, ty in enumerate(sorted(kinds))}
    edges_b = []
    for j, (r, path, t, ks, s_type, d_type) in enumerate(tables):
        eb = Buckets(stage, f"edges-{j}", pa.schema([("src", id_types[s_type]), ("dst", id_types[d_type])]),
                     p[s_type])
        row0 = 0
        for batch in t.batches([r.src, r.dst]):
            s = t.ids(batch.column(0), ks[0], r.src, f"--src of {r.name}", row0)
            d = t.ids(batch.column(1), ks[1], r.dst, f"--dst of {r.name}", row0)
            s = _as_kind(s, ks[0], kinds[s_type], path, r.src, s_type, row0)
            d = _as_kind(d, ks[1], kinds[d_type], path, r.dst, d_type, row0)
            bs = bucket_of(s, kinds[s_type], p[s_type])
            bd = bucket_of(d, kinds[d_type], p[d_type])
            if s_type == d_type:
                ids_b[s_type].write(np.concatenate([bs, bd]), [_cat(s, d)])
            else:
                ids_b[s_type].write(bs, [s])
                ids_b[d_type].write(bd, [d])
            eb.write(bs, [s, d])
            row0 += batch.num_rows
        eb.close()
        edges_b.append(eb)
    for b in ids_b.values():
        b.close()
    maps: Dict[str, IdMap] = {}
    types: Dict[str, Tuple[IdMap, Optional[str], Optional[str], Optional[Dict[str, str]]]] = {}
    for ty in sorted(kinds):
        m = maps[ty] = IdMap.number(stage, ids_b[ty], kinds[ty], id_types[ty])
        f = y = sp = None
        if ty in nodes:
            f, y, sp = join(nodes[ty], stage, kinds[ty], m.p, m.uniq, m.offsets)
        types[ty] = (m, f, y, sp or None)
    rels = [(r.name, map_edges(stage, eb, maps[s_type], maps[d_type]))
            for (r, _, _, _, s_type, d_type), eb in zip(tables, edges_b)]
    return {"types": types, "relations": rels}

