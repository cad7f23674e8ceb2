"""Typed tables: a heterogeneous dataset from one edge table per relation and optional node tables
per type, each type with its own id map."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

from .._core import InputError
from ..data import build
from ._arrow import require_pyarrow
from ._stage import PathLike, Staging
from .node_table import NodeTable
from .tables import EdgeTable, build_share, import_budget, map_tables, type_kinds


@dataclass
class TypedRelation:
    """One relation's edge table: ``name`` ``SRC:REL:DST``, columns ``src`` (``SRC`` ids) and
    ``dst`` (``DST`` ids), and ``time_column`` (each edge's time; None: none)."""

    name: str
    table: PathLike
    src: str
    dst: str
    time_column: Optional[str] = None


@dataclass
class TypedNodes:
    """One node type's node table, keyed by column ``node_id``, with the columns of
    :func:`.tables.convert_table`'s node table."""

    type: str
    table: PathLike
    node_id: str
    feature_columns: Sequence[str] = field(default_factory=tuple)
    label_column: Optional[str] = None
    split_column: Optional[str] = None
    node_time_column: Optional[str] = None


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
    node tables per type; returns the manifest. The rest are
    :func:`ringgnn.data.build.build_hetero`'s."""
    require_pyarrow()
    if not relations:
        raise InputError("typed tables: give at least one relation table (SRC:REL:DST=FILE)")
    names = [r.name for r in relations]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"relation {dup[0]} is given twice; give each relation one table")
    # Every column is checked before anything is read.
    edges = [EdgeTable(r.table, r.src, r.dst, r.name, r.time_column) for r in relations]
    kinds = type_kinds(edges)
    nodes: Dict[str, NodeTable] = {}
    for n in node_tables:
        if n.type not in kinds:
            raise InputError(f"{os.fspath(n.table)}: node type '{n.type}' is in no relation (the relations name: "
                             f"{', '.join(sorted(kinds))}); every node of a node table must be named by an edge")
        if n.type in nodes:
            raise InputError(f"node type '{n.type}' has two node tables; give it one")
        nodes[n.type] = NodeTable(os.fspath(n.table), n.node_id, list(n.feature_columns), n.label_column,
                                  kinds[n.type], n.split_column, n.node_time_column)
    budget = import_budget(memory)
    with Staging(out, overwrite) as stage:
        types, files = map_tables(stage, edges, kinds, nodes, budget, feature_dtype)
        build_memory = build_share(budget)
        rels = [build.Relation(r.name, e, format="npy", edge_time=t) for r, (e, t) in zip(relations, files)]
        source = {"importer": "tables",
                  "relations": {r.name: {"table": os.path.basename(os.fspath(r.table)), "src": r.src, "dst": r.dst}
                                for r in relations},
                  "node_tables": {n.type: os.path.basename(os.fspath(n.table)) for n in node_tables}}
        return build.build_hetero(out, types, rels, add_reverse=add_reverse, seed=seed, memory=build_memory,
                                  overwrite=overwrite, threads=threads, source=source, progress=progress)
