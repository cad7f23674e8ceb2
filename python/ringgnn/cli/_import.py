"""``ringgnn convert`` for the sources of :mod:`ringgnn.importers`: ``--from`` and each source's
options, which source an INPUT is, and which options it refuses. Edge lists and GraphBolt
``metadata.yaml`` stay with :mod:`.data`."""

from __future__ import annotations

import argparse
import time
from typing import Any, Optional

from .. import graphbolt, importers
from .._core import InputError

#: Options of an edge-list INPUT and their defaults (``data._EDGE_LIST_OPTIONS`` less those an
#: importer takes): an importer refuses them when given.
_TABLE_ONLY = {"node_table": None, "node_id": None, "feature_columns": None, "label_column": None,
               "split_column": None}
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from", dest="source", choices=("detect",) + importers.SOURCES, default="detect",
        help="what INPUT is (default: detect): an edge list, a GraphBolt metadata.yaml, an OGB directory (raw/, "
        "split/: node or link property prediction, ogbn-mag's heterogeneous layout), MAG240M's processed layout "
        "(mag240m_kddcup2021/), or a table (.parquet, or .csv with a header, with --src/--dst)",
    )
    p.add_argument("--split-scheme", metavar="NAME", default=None,
                   help="OGB input: the directory under split/ to convert (default: the only one)")
    p.add_argument("--src", metavar="COL", default=None,
                   help="table input (.parquet, or .csv with a header): the column of the edges' sources, integer or "
                   "string ids of any range (dense ids are assigned; Dataset.node_ids() gives the originals)")
    p.add_argument("--dst", metavar="COL", default=None, help="table input: the column of the edges' destinations")
    p.add_argument("--node-table", metavar="FILE", default=None,
                   help="table input: a table (.parquet or .csv with a header) of one row per node, keyed by the "
                   "edges' ids, giving features, labels and splits (joined out of core)")
    p.add_argument("--node-id", metavar="COL", default=None, help="--node-table: its id column")
    p.add_argument("--feature-columns", metavar="COLS", default=None,
                   help="--node-table: feature columns, comma-separated (numbers), or one column of vectors")
    p.add_argument("--label-column", metavar="COL", default=None,
                   help="--node-table: the label column (integer classes; null or -1 = unlabeled)")
    p.add_argument("--split-column", metavar="COL", default=None,
                   help="--node-table: each node's split name (train, val, test; null = none)")


def source_of(args: Any) -> str:
    """The source ``args.input`` is: ``--from``, else detected (a GraphBolt yaml first)."""
    if args.source != "detect":
        return args.source
    if args.src is not None or args.dst is not None or str(args.input).lower().endswith((".parquet", ".pq")):
        return "table"
    if graphbolt.find_metadata(args.input) is not None:
        return "graphbolt"
    return importers.detect(args.input) or "edges"


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
            raise InputError(f"{', '.join('--' + d.replace('_', '-') for d in given)}: options of a table INPUT "
                             f"(with --src and --dst), and {args.input} is read as {source}")
        if args.split_scheme is not None:
            raise InputError(f"--split-scheme applies to an OGB directory INPUT, and {args.input} is read as "
                             f"{'a GraphBolt metadata.yaml' if source == 'graphbolt' else 'an edge list'}")
        return None
    given = [d for d, default in _REFUSED[source].items() if getattr(args, d) != default]
    if given:
        flags = ", ".join("--" + d.replace("_", "-") for d in given)
        what = {"ogb": "an OGB directory", "mag240m": "MAG240M's processed layout", "table": "an edge table"}[source]
        raise InputError(f"{flags}: not options of {what} ({args.input})"
                         + (", which says itself what to convert" if source != "table" else ""))
    if source != "table" and (args.src is not None or args.dst is not None):
        raise InputError(f"--src and --dst name the columns of a table INPUT, and {args.input} is {source}'s layout")
    if source == "table" and (args.src is None or args.dst is None):
        raise InputError(f"{args.input}: a table INPUT needs --src COL and --dst COL, the columns of each edge's ends")
    common = dict(seed=args.seed, memory=args.memory, overwrite=args.overwrite,
                  threads=args.threads)
    t0 = time.perf_counter()
    with bars(args) as b:
        if source == "ogb":
            from ..importers.ogb import convert_ogb

            manifest = convert_ogb(args.input, args.out, split_scheme=args.split_scheme,
                                   link_negatives=args.link_negatives, undirected=args.undirected,
                                   add_reverse=bool(args.add_reverse),
                                   self_loops=args.self_loops, dedup=args.dedup, feature_dtype=args.feature_dtype,
                                   progress=b, **common)
        elif source == "table":
            from ..importers.tables import convert_table

            manifest = convert_table(args.input, args.out, src=args.src, dst=args.dst, undirected=args.undirected,
                                     self_loops=args.self_loops, dedup=args.dedup, split=args.split,
                                     node_table=args.node_table, node_id=args.node_id,
                                     feature_columns=[c.strip() for c in (args.feature_columns or "").split(",")
                                                      if c.strip()],
                                     label_column=args.label_column, split_column=args.split_column,
                                     feature_dtype=args.feature_dtype, progress=b,
                                     **common)
        else:
            from ..importers.mag240m import convert_mag240m

            manifest = convert_mag240m(args.input, args.out, add_reverse=bool(args.add_reverse),
                                       feature_dtype=args.feature_dtype, progress=b, **common)
    summary(args, "converted", manifest, time.perf_counter() - t0)
    return 0
