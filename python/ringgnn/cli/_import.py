"""``ringgnn convert`` for the sources of :mod:`ringgnn.importers`: ``--from`` and each source's
options, which source an INPUT is, which options it refuses (edge lists and GraphBolt: :mod:`.data`)."""

from __future__ import annotations

import argparse
import re
import time
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

from .. import importers
from .._core import InputError
from ..importers import graphbolt
from ..importers.mag240m import convert_mag240m
from ..importers.ogb import convert_ogb
from ..importers.tables import convert_table
from ..importers.typed_tables import TypedNodes, TypedRelation, convert_typed_tables

#: Options each importer refuses when given, with their defaults.
_TABLE_ONLY = {"node_table": None, "node_id": None, "feature_columns": None, "label_column": None,
               "split_column": None, "relation": None, "time_column": None, "node_time_column": None}
_REFUSED = {
    "ogb": {"format": "detect", "num_nodes": None, "features": None, "labels": None, "split": None,
            "link_split": None, "feature": None, "task": None,
            **_TABLE_ONLY},
    "table": {"format": "detect", "num_nodes": None, "features": None, "labels": None, "link_split": None,
              "link_negatives": 100, "add_reverse": None, "feature": None, "task": None, "split_scheme": None},
    "mag240m": {"format": "detect", "undirected": False, "self_loops": "keep", "dedup": False, "num_nodes": None,
                "features": None, "labels": None, "split": None, "link_split": None, "link_negatives": 100,
                "feature": None, "task": None, "split_scheme": None, **_TABLE_ONLY},
}
#: Typed tables: relations are directed, splits come from node tables.
_REFUSED["typed"] = {**{k: v for k, v in _REFUSED["table"].items() if k != "add_reverse"},
                     "undirected": False, "self_loops": "keep", "dedup": False, "split": None}
_TYPED_INPUT = re.compile(r"^[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+=")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from", dest="source", choices=("detect",) + importers.SOURCES, default="detect",
        help="what INPUT is (default: detect): an edge list, a GraphBolt metadata.yaml, an OGB directory (raw/, "
        "split/: node or link property prediction, ogbn-mag's heterogeneous layout), MAG240M's processed layout "
        "(mag240m_kddcup2021/), or a table (.parquet, or .csv with a header, with --src/--dst)",
    )
    p.add_argument("--split-scheme", metavar="NAME", default=None,
                   help="OGB input: the directory under split/ to convert (default: the only one)")
    p.add_argument("--src", metavar="[S:R:D=]COL", action="append", default=None,
                   help="table input (.parquet, or .csv with a header): the column of the edges' sources, integer or "
                   "string ids of any range (dense ids are assigned; Dataset.node_ids() gives the originals); typed "
                   "tables: S:R:D=COL for one relation, COL for every relation without its own (repeatable)")
    p.add_argument("--dst", metavar="[S:R:D=]COL", action="append", default=None,
                   help="table input: the column of the edges' destinations (as --src)")
    p.add_argument("--relation", metavar="S:R:D=FILE", action="append", default=None,
                   help="typed tables (a heterogeneous dataset): the edge table of relation SRC:REL:DST, whose --src "
                   "names SRC nodes and --dst DST nodes, each type with its own ids; repeatable (INPUT may be one "
                   "too: ringgnn convert user:buys:item=buys.parquet OUT ...)")
    p.add_argument("--node-table", metavar="[TYPE=]FILE", action="append", default=None,
                   help="table input: a table (.parquet or .csv with a header) of one row per node, keyed by the "
                   "edges' ids, giving features, labels and splits (joined out of core); typed tables: TYPE=FILE, "
                   "one per node type that has one (repeatable)")
    p.add_argument("--time-column", metavar="[S:R:D=]COL", action="append", default=None,
                   help="table input: the column of each edge's time: integers, or a timestamp as its int64 in its "
                   "unit, a date32 as days, a date64 as milliseconds; typed tables: S:R:D=COL for one relation, COL "
                   "for every relation (repeatable)")
    for flag, cols, what in (
            ("--node-id", "COL", "its id column (typed tables: TYPE=COL, or COL for every node table)"),
            ("--feature-columns", "COLS", "feature columns, comma-separated (numbers), or one column of vectors "
             "(typed tables: TYPE=COLS per type, or COLS for every node table)"),
            ("--label-column", "COL", "the label column (integer classes; null or -1 = unlabeled)"),
            ("--split-column", "COL", "each node's split name (train, val, test; valid and validation are val; "
             "null or empty = none)"),
            ("--node-time-column", "COL", "each node's time (as --time-column's)")):
        p.add_argument(flag, metavar=f"[TYPE=]{cols}", action="append", default=None, help=f"--node-table: {what}")

def flags(dests: Any) -> str:
    return ", ".join("--" + d.replace("_", "-") for d in dests)


def source_of(args: Any) -> str:
    """The source ``args.input`` is: ``--from``, else detected (a GraphBolt yaml first)."""
    if args.source != "detect":
        return args.source
    if is_typed(args):
        return "table"
    if args.src is not None or args.dst is not None or str(args.input).lower().endswith((".parquet", ".pq")):
        return "table"
    if graphbolt.find_metadata(args.input) is not None:
        return "graphbolt"
    return importers.detect(args.input) or "edges"


def is_typed(args: Any) -> bool:
    """Typed tables: INPUT is ``SRC:REL:DST=FILE`` or ``--relation`` is given."""
    return bool(args.relation) or bool(_TYPED_INPUT.match(str(args.input)))


def _single(args: Any, dest: str) -> Optional[str]:
    """A table option given at most once (an edge table of one node set)."""
    v = getattr(args, dest)
    if v is None:
        return None
    flag = "--" + dest.replace("_", "-")
    if len(v) > 1:
        raise InputError(f"{flag} is given {len(v)} times; an edge table of one node set takes it once (typed tables, "
                         "one per relation, take SRC:REL:DST=FILE INPUT and --relation)")
    return v[0]


def convert(args: Any, summary: Any, bars: Any) -> Optional[int]:
    """Run ``convert`` when ``args.input`` is an importer's source; None when it is an edge list
    or a GraphBolt yaml (then :mod:`.data` converts it)."""
    source = source_of(args)
    if source not in _REFUSED:
        if args.src is not None or args.dst is not None:
            raise InputError(f"--src and --dst name the columns of a table INPUT (--from table), and {args.input} is "
                             f"read as {source}")
        given = [d for d in _TABLE_ONLY if getattr(args, d) is not None]
        if given:
            raise InputError(f"{flags(given)}: options of a table INPUT "
                             f"(with --src and --dst), and {args.input} is read as {source}")
        if args.split_scheme is not None:
            raise InputError(f"--split-scheme applies to an OGB directory INPUT, and {args.input} is read as "
                             f"{'a GraphBolt metadata.yaml' if source == 'graphbolt' else 'an edge list'}")
        return None
    typed = source == "table" and is_typed(args)
    given = [d for d, default in _REFUSED["typed" if typed else source].items() if getattr(args, d) != default]
    if given:
        what = {"ogb": "an OGB directory", "mag240m": "MAG240M's processed layout", "table": "an edge table"}[source]
        if typed:
            what = "typed tables (relations are directed: --add-reverse adds the reverses; splits come from " \
                   "--split-column)"
        raise InputError(f"{flags(given)}: not options of {what} ({args.input})"
                         + (", which says itself what to convert" if source != "table" else ""))
    if source != "table" and (args.src is not None or args.dst is not None):
        raise InputError(f"--src and --dst name the columns of a table INPUT, and {args.input} is {source}'s layout")
    if source == "table" and not typed and (args.src is None or args.dst is None):
        raise InputError(f"{args.input}: a table INPUT needs --src COL and --dst COL, the columns of each edge's ends")
    if typed:
        run = partial(convert_typed_tables, args.out, *_typed(args), add_reverse=bool(args.add_reverse))
    elif source == "table":
        run = partial(convert_table, args.input, args.out, src=_single(args, "src"), dst=_single(args, "dst"),
                      undirected=args.undirected, self_loops=args.self_loops, dedup=args.dedup, split=args.split,
                      node_table=_single(args, "node_table"), node_id=_single(args, "node_id"),
                      feature_columns=_columns(_single(args, "feature_columns")),
                      label_column=_single(args, "label_column"), split_column=_single(args, "split_column"),
                      time_column=_single(args, "time_column"), node_time_column=_single(args, "node_time_column"))
    elif source == "ogb":
        run = partial(convert_ogb, args.input, args.out, split_scheme=args.split_scheme,
                      link_negatives=args.link_negatives, undirected=args.undirected,
                      add_reverse=bool(args.add_reverse), self_loops=args.self_loops, dedup=args.dedup)
    else:
        run = partial(convert_mag240m, args.input, args.out, add_reverse=bool(args.add_reverse))
    t0 = time.perf_counter()
    with bars(args) as b:
        manifest = run(feature_dtype=args.feature_dtype, seed=args.seed, memory=args.memory, overwrite=args.overwrite,
                       threads=args.threads, progress=b)
    summary(args, "converted", manifest, time.perf_counter() - t0)
    return 0


def _columns(v: Optional[str]) -> List[str]:
    return [c.strip() for c in (v or "").split(",") if c.strip()]


def _scoped(args: Any, dest: str, keys: List[str], what: str) -> Tuple[Optional[str], Dict[str, str]]:
    """(the default, {key: value}) of repeated ``--OPT KEY=VALUE`` and ``--OPT VALUE`` (the default)."""
    flag = "--" + dest.replace("_", "-")
    default, scoped = None, {}
    for v in getattr(args, dest) or ():
        key, sep, value = v.partition("=")
        if not sep:
            if default is not None:
                raise InputError(f"{flag} {default} and {flag} {v}: give one value for every {what}, or "
                                 f"{flag} {what.upper()}=VALUE for each")
            default = v
            continue
        if key not in keys:
            raise InputError(f"{flag} {v}: '{key}' is not a {what} of the tables (they have: {', '.join(keys)})")
        if key in scoped:
            raise InputError(f"{flag} names {what} {key} twice")
        scoped[key] = value
    return default, scoped


def _pairs(values: List[str], flag: str, what: str) -> List[Tuple[str, str]]:
    out = []
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key or not value:
            raise InputError(f"{flag} {v}: give {what}=FILE")
        out.append((key, value))
    return out


def _typed(args: Any) -> Tuple[List[TypedRelation], List[TypedNodes]]:
    """Typed tables: one edge table per relation, optional node tables per type."""
    if not _TYPED_INPUT.match(str(args.input)):
        raise InputError(f"{args.input}: with --relation, INPUT is a relation's table too: SRC:REL:DST=FILE")
    rel_files = _pairs([str(args.input)] + (args.relation or []), "--relation", "SRC:REL:DST")
    names = [r for r, _ in rel_files]
    src_default, src = _scoped(args, "src", names, "relation")
    dst_default, dst = _scoped(args, "dst", names, "relation")
    time_default, time = _scoped(args, "time_column", names, "relation")
    relations = []
    for name, path in rel_files:
        s, d = src.get(name, src_default), dst.get(name, dst_default)
        if s is None or d is None:
            raise InputError(f"relation {name} ({path}): name its columns with --src {name}=COL and --dst {name}=COL "
                             "(or --src COL --dst COL for every relation)")
        relations.append(TypedRelation(name, path, s, d, time.get(name, time_default)))
    node_files = _pairs(args.node_table or [], "--node-table", "TYPE")
    types = [t for t, _ in node_files]
    opts = {d: _scoped(args, d, types, "node type")
            for d in ("node_id", "feature_columns", "label_column", "split_column", "node_time_column")}
    if not node_files:
        given = [d for d, (default, scoped) in opts.items() if default is not None or scoped]
        if given:
            raise InputError(f"{flags(given)}: options of a --node-table "
                             "TYPE=FILE; give it")
    nodes = []
    for t, path in node_files:
        v = {d: scoped.get(t, default) for d, (default, scoped) in opts.items()}
        if v["node_id"] is None:
            raise InputError(f"--node-table {t}={path}: name its id column (--node-id {t}=COL, or --node-id COL)")
        nodes.append(TypedNodes(t, path, v["node_id"], _columns(v["feature_columns"]), v["label_column"],
                                v["split_column"], v["node_time_column"]))
    return relations, nodes
