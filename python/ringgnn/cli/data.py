"""``ringgnn convert``, ``generate``, ``info``, ``verify`` and ``demo``: build, inspect and check
datasets."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any, Dict, List

from .. import _threads
from .._core import InputError
from .._files import temporary
from .._options import count_arg, positive_arg, size_arg
from ..data import build
from ..data.dataset import Dataset, entry_field, typed_entries
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE
from ..data.generate import DEFAULTS as HD, generate_hetero
from ..importers import graphbolt
from ..progress import TqdmProgress
from . import _import
from ._import import flags
from .._format import human, human_bytes

DEMO = dict(nodes=20_000, classes=8, avg_degree=10.0, feature_dim=32, seed=0)
DEMO_EPOCHS = 5  # GraphSAGE passes 0.9 test accuracy in 1-2


def _add_build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=count_arg, default=0, help="random seed (default 0)")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE", help="budget of the build: bytes or "
                   "K/M/G/T (default 1G, or half of what the machine or a memory cgroup leaves if less)")
    p.add_argument("--threads", type=positive_arg, default=_threads.cores(),
                   help="worker threads (default: all cores)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the dataset at OUT (a folder that is not a dataset is refused)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars and no summary")


def _add_graph_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--undirected", action="store_true", help="also add the reverse of every edge")
    p.add_argument("--self-loops", choices=["keep", "drop"], default="keep", help="what to do with edges u->u "
                   "(default keep)")
    p.add_argument("--dedup", action="store_true", help="keep one copy of each distinct edge")


def _time_range(text: str) -> tuple:
    """``--time-range LO,HI``: two integers."""
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not LO,HI (two integers, e.g. 0,1000000)") from None
    return lo, hi


def _add_time_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--edge-time", choices=["uniform", "growth"], default=None,
                   help="give edges times: uniform (in --time-range, from --seed) or growth (each edge's index in "
                   "generation order)")
    p.add_argument("--node-time", choices=["uniform", "growth"], default=None,
                   help="give nodes times: uniform (in --time-range, from --seed) or growth (the node's id)")
    p.add_argument("--time-range", type=_time_range, default=None, metavar="LO,HI",
                   help="uniform times are drawn in [LO, HI) (default 0,2147483648)")


def _add_link_options(p: argparse.ArgumentParser, files: bool = False) -> None:
    """The link split of a generator (fractions only) or of ``convert`` (``files``: or .npy files)."""
    p.add_argument("--link-split", metavar="SPEC", default=None,
                   help="hold out edges for link prediction: val=0.05,test=0.1 (fractions of the distinct pairs, "
                   "random by --seed)" + (" or val=val.npy,test=test.npy (pairs of INPUT, (2, n) or (n, 2); "
                                          "train=train.npy: exactly those pairs train)" if files else "")
                   + "; held-out pairs leave the graph, the pairs left are the edge split 'train'")
    p.add_argument("--link-split-time", metavar="SPEC", default=None,
                   help="hold out edges for link prediction by time (needs --edge-time; not with --link-split): "
                   "val=T1,test=T2 sends each edge event after T1 to val and after T2 to test (test= optional), the "
                   "rest stay in the graph as train")
    p.add_argument("--link-negatives", type=count_arg, default=100, metavar="K",
                   help="fixed negative destinations stored per held-out pair (default 100; 0: none)"
                   + ("; for a metadata.yaml, where its link task gives none" if files else ""))


def add_parsers(sub: Any) -> None:
    """``convert``, ``generate``, ``info`` and ``verify`` (``demo`` comes last: :func:`add_demo_parser`)."""
    p = sub.add_parser("convert", help="build a dataset from an edge list", description=_CONVERT_HELP)
    p.add_argument("input", metavar="INPUT", help="edge list: text (.tsv/.csv/.txt, optionally .gz), .bin32/.bin64, "
                   ".npy; or a GraphBolt metadata.yaml or its directory; or an OGB directory; or MAG240M's processed "
                   "layout; or a table (.parquet, .csv with a header) with --src/--dst; or SRC:REL:DST=FILE, a "
                   "relation's table (see --from)")
    p.add_argument("out", metavar="OUT_DIR", help="dataset directory to create")
    p.add_argument("--format", choices=["detect", "text", "tsv", "csv", "bin32", "bin64", "npy"], default="detect",
                   help="input format (default: detect from the name and contents)")
    _add_graph_options(p)
    p.add_argument("--num-nodes", type=count_arg, default=None, metavar="N",
                   help="number of nodes (default: max id + 1)")
    p.add_argument("--features", metavar="X.npy", help="node features [num_nodes, dim], float16/32/64")
    p.add_argument("--labels", metavar="Y.npy", help="node labels [num_nodes], int32/int64, -1 = unlabeled")
    p.add_argument("--split", metavar="SPEC",
                   help="train=0.5,val=0.1,test=0.4 (random, by --seed) or train=a.npy,val=b.npy")
    _add_link_options(p, files=True)
    p.add_argument("--feature-dtype", choices=["f32", "f16", "bf16"], help="stored feature type (default: from input)")
    p.add_argument("--edge-time", metavar="T.npy", default=None,
                   help="edge times: an int64 (or int32) .npy with one time per input edge, in input order")
    p.add_argument("--node-time", metavar="N.npy", default=None,
                   help="node times: an int64 (or int32) .npy with one time per node")
    p.add_argument("--add-reverse", action="store_true", default=None,
                   help="heterogeneous input: also build DST:rev_REL:SRC for each relation (PyG ToUndirected)")
    p.add_argument("--feature", metavar="NAME", default=None, help="metadata.yaml input: the node feature to "
                   "convert per type (default feat, else a type's only one)")
    p.add_argument("--task", metavar="NAME", default=None, help="metadata.yaml input: the task whose sets become "
                   "labels and splits, or a link task's edge splits (default: the first task of each kind)")
    _import.add_arguments(p)
    _add_build_options(p)
    p.set_defaults(func=cmd_convert)

    g = sub.add_parser("generate", help="generate a synthetic dataset (rmat, sbm, hetero)")
    gsub = g.add_subparsers(dest="generator", required=True, metavar="GENERATOR")
    p = _generator(gsub, "rmat", cmd_generate_rmat, help="Graph500 R-MAT graph",
                   description="Graph500 R-MAT (a=0.57, b=0.19, c=0.19), ids permuted.")
    p.add_argument("--scale", type=count_arg, required=True, metavar="S", help="2^S nodes")
    p.add_argument("--edge-factor", type=count_arg, default=16, metavar="F", help="F * 2^S edges (default 16)")
    _add_graph_options(p)
    _add_time_options(p)
    _add_link_options(p)
    _add_build_options(p)

    p = _generator(
        gsub, "sbm", cmd_generate_sbm,
        help="planted-partition graph with features, labels and splits",
        description="Degree-corrected planted partition with power-law degrees, noisy class features, "
        "labels and splits (docs/generators.md).",
    )
    p.add_argument("--nodes", type=positive_arg, required=True, metavar="N")
    p.add_argument("--classes", type=positive_arg, required=True, metavar="C")
    p.add_argument("--avg-degree", type=float, required=True, metavar="D", help="mean in-degree of the stored graph")
    p.add_argument("--feature-dim", type=count_arg, required=True, metavar="F")
    p.add_argument("--feature-dtype", choices=["f32", "f16", "bf16"], default="f32")
    p.add_argument("--split", metavar="SPEC", default=build.DEFAULT_SBM_SPLIT,
                   help=f"default {build.DEFAULT_SBM_SPLIT}")
    _add_time_options(p)
    _add_link_options(p)
    _add_build_options(p)

    p = _generator(
        gsub, "hetero", cmd_generate_hetero,
        help="MAG-like heterogeneous graph: papers (features, classes), authors, institutions",
        description="A planted heterogeneous graph like MAG240M (docs/generators.md): papers with classes and "
        "noisy features, featureless authors and institutions, writes, cites and affiliated_with relations "
        "(and rev_ ones).",
    )
    p.add_argument("--papers", type=positive_arg, required=True, metavar="N")
    p.add_argument("--authors", type=positive_arg, required=True, metavar="N")
    p.add_argument("--institutions", type=positive_arg, required=True, metavar="N")
    p.add_argument("--classes", type=positive_arg, default=HD["classes"], metavar="C",
                   help=f"paper classes (default {HD['classes']})")
    p.add_argument("--feature-dim", type=positive_arg, default=HD["feature_dim"], metavar="F",
                   help=f"paper feature width (default {HD['feature_dim']})")
    p.add_argument("--avg-authors", type=float, default=HD["avg_authors"], metavar="A",
                   help=f"mean authors per paper (default {HD['avg_authors']})")
    p.add_argument("--avg-cites", type=float, default=HD["avg_cites"], metavar="C",
                   help=f"mean citations per paper (default {HD['avg_cites']})")
    for name in ("writes", "cites", "affiliation"):
        key = f"homophily_{name}"
        p.add_argument(f"--homophily-{name}", type=float, default=HD[key], metavar="P",
                       help=f"probability that a {name} edge stays within the class (default {HD[key]})")
    p.add_argument("--feature-noise", type=float, default=None, metavar="SIGMA",
                   help="noise of the paper features (default: calibrated so features alone give a weak classifier)")
    p.add_argument("--split", metavar="SPEC", default=HD["split"], help=f"paper splits (default {HD['split']})")
    p.add_argument("--no-reverse", action="store_true", help="do not add the rev_ relations")
    p.add_argument("--link-split", metavar="SPEC", default=None,
                   help="hold out pairs of --link-relation for link prediction: val=0.05,test=0.1 (fractions of "
                   "its distinct pairs, by --seed; its rev_ relation drops them too)")
    p.add_argument("--link-relation", metavar="S:R:D", default=None,
                   help="the relation --link-split holds out pairs of (author:writes:paper, paper:cites:paper or "
                   "author:affiliated_with:institution)")
    p.add_argument("--link-negatives", type=count_arg, default=100, metavar="K",
                   help="fixed negative destinations stored per held-out pair (default 100; 0: none)")
    _add_build_options(p)

    p = sub.add_parser("info", help="counts, dtypes, file sizes and degree statistics of a dataset")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "verify", help="check the checksums and structure of a dataset",
        description="Check a dataset against docs/FORMAT.md: every file's size, checksum, padding and "
        "structure, and that each original node id occurs once.",
    )  # fmt: skip
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE", help="budget of the check: bytes or "
                   "K/M/G/T (default 1G, or half of what the machine or a memory cgroup leaves if less)")
    p.add_argument("--spill-dir", default=None, metavar="DIR",
                   help="directory for the sorted runs of the original ids that do not fit --memory (default: "
                   "beside the dataset)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars; print only errors")
    p.set_defaults(func=cmd_verify)


def _generator(gsub: Any, name: str, func: Any, **kw: Any) -> argparse.ArgumentParser:
    p = gsub.add_parser(name, **kw)
    p.add_argument("out", metavar="OUT")
    p.set_defaults(func=func)
    return p


def add_demo_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo", help="generate a small dataset, verify it, sample it and train GraphSAGE on it",
        description="Generate a small sbm dataset (%(nodes)d nodes, %(classes)d classes, feature dim %(feature_dim)d), "
        "print its info, verify it, run sampling epochs and train GraphSAGE on it for a few epochs "
        "(the run goes to DIR-run when DIR is given)." % DEMO,
    )
    p.add_argument("dir", metavar="DIR", nargs="?", help="where to keep it (default: a temporary directory)")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)


_CONVERT_HELP = """Build a dataset from an edge list, out of core: memory stays within --memory
whatever the edge count. Text lines hold 'src dst' separated by spaces, tabs or a comma; lines
starting with # or % are comments. The dataset is built in a hidden directory next to OUT_DIR and
renamed into place when complete."""


def _bars(args) -> TqdmProgress:
    return TqdmProgress(disable=getattr(args, "quiet", False))


def _summary(args, verb: str, manifest: Dict[str, Any], seconds: float) -> None:
    if args.quiet:
        return
    types, rels = typed_entries(manifest, "node_types"), typed_entries(manifest, "relations")
    n, e = sum(t["num_nodes"] for t in types.values()), sum(r["num_edges"] for r in rels.values())
    what = f"{n:,} nodes, {e:,} edges"
    if "node_types" in manifest:
        what = f"{n:,} nodes in {len(types)} types, {e:,} edges in {len(rels)} relations"
    times = [f"{key.replace('_', ' ')} {r['min']:,} to {r['max']:,}"
             for key in ("edge_times", "node_times") if (r := manifest.get(key))]
    if times:
        what += " (" + ", ".join(times) + ")"
    rate = e / seconds if seconds > 0 else float("inf")
    print(f"{verb} {what} in {seconds:.2f} s ({human(rate)} edges/s) -> {args.out}")


#: Options of an edge-list INPUT, with their defaults: refused with a metadata.yaml input.
_EDGE_LIST_OPTIONS = {
    "format": "detect", "undirected": False, "self_loops": "keep", "dedup": False, "num_nodes": None,
    "features": None, "labels": None, "split": None, "link_split": None, "feature_dtype": None,
    "edge_time": None, "node_time": None, "link_split_time": None,
}
_GRAPHBOLT_OPTIONS = ("add_reverse", "feature", "task")


def cmd_convert(args) -> int:
    times = [d for d in ("edge_time", "node_time", "link_split_time") if getattr(args, d) is not None]
    source = _import.source_of(args) if times else "edges"
    if source not in ("edges", "graphbolt"):  # a GraphBolt yaml is refused below
        raise InputError(f"{flags(times)} apply to an edge-list INPUT (text, .bin32/.bin64, .npy), and "
                         f"{args.input} is read as {source}")
    rc = _import.convert(args, _summary, _bars)  # OGB, MAG240M: None when INPUT is neither
    if rc is not None:
        return rc
    metadata = graphbolt.find_metadata(args.input) if args.source in ("detect", "graphbolt") else None
    if args.source == "graphbolt" and metadata is None:
        raise InputError(f"--from graphbolt: {args.input} is neither a metadata.yaml nor a directory holding one")
    if metadata is not None:
        return _convert_graphbolt(args, metadata)
    given = [d for d in _GRAPHBOLT_OPTIONS if getattr(args, d) is not None]
    if given:
        raise InputError(f"{flags(given)} apply to a GraphBolt metadata.yaml INPUT, and {args.input} is an "
                         "edge list (for an edge list, --undirected adds the reverse edges)")
    options = _pick(args, *_EDGE_LIST_OPTIONS, "link_negatives")
    options["format"] = None if args.format == "detect" else args.format
    return _build(args, "converted", build.convert, args.input, **options)


def _convert_graphbolt(args, metadata: str) -> int:
    given = [d for d, default in _EDGE_LIST_OPTIONS.items() if getattr(args, d) != default]
    if given:
        raise InputError(
            f"{flags(given)} apply to an edge-list INPUT; a GraphBolt metadata.yaml ({metadata}) says what to "
            "convert itself and takes --add-reverse, --feature NAME, --task NAME, --link-negatives K, --seed, "
            "--memory, --threads, --overwrite and --quiet"
        )
    return _build(args, "converted", graphbolt.convert_graphbolt, metadata,
                  feature="feat" if args.feature is None else args.feature, task=args.task,
                  add_reverse=bool(args.add_reverse), link_negatives=args.link_negatives)


def cmd_generate_rmat(args) -> int:
    return _build(args, "generated rmat:", build.generate_rmat,
                  **_pick(args, "scale", "edge_factor", "undirected", "self_loops", "dedup", *_GENERATOR_OPTIONS))


def cmd_generate_sbm(args) -> int:
    return _build(args, "generated sbm:", build.generate_sbm,
                  **_pick(args, "nodes", "classes", "avg_degree", "feature_dim", "feature_dtype", "split",
                          *_GENERATOR_OPTIONS))


#: The options of :func:`_add_time_options` and :func:`_add_link_options`.
_GENERATOR_OPTIONS = ("edge_time", "node_time", "time_range", "link_split", "link_split_time", "link_negatives")


def cmd_generate_hetero(args) -> int:
    return _build(args, "generated hetero:", generate_hetero, add_reverse=not args.no_reverse, **_pick(
        args, "papers", "authors", "institutions", "classes", "feature_dim", "avg_authors", "avg_cites",
        "homophily_writes", "homophily_cites", "homophily_affiliation", "feature_noise", "split", "link_split",
        "link_relation", "link_negatives"))


def _pick(args, *dests: str) -> Dict[str, Any]:
    return {d: getattr(args, d) for d in dests}


def _build(args, verb: str, fn: Any, *inputs: Any, **options: Any) -> int:
    """Build ``args.out`` with ``fn(*inputs, out, **options)`` and the build options; print its summary."""
    t0 = time.perf_counter()
    with _bars(args) as bars:
        manifest = fn(*inputs, args.out, **_pick(args, "seed", "memory", "overwrite", "threads"), progress=bars,
                      **options)
    _summary(args, verb, manifest, time.perf_counter() - t0)
    return 0


def info_dict(path: str) -> Dict[str, Any]:
    """What ``ringgnn info --json`` prints."""
    ds = Dataset.open(path)
    m = ds.manifest
    files = {k: {"path": f["path"], "bytes": f["bytes"]} for k, f in m["files"].items()}
    head = {"path": os.path.abspath(path), "format_version": m["version"]}
    tail = {"files": files, "total_bytes": sum(f["bytes"] for f in files.values())}
    types = {t: _type_info(i) for t, i in typed_entries(m, "node_types").items()}
    rels = {r: _relation_info(i) for r, i in typed_entries(m, "relations").items()}
    if ds.is_hetero:
        return {**head, "heterogeneous": True, "num_nodes": ds.num_nodes, "num_edges": ds.num_edges,
                "node_types": types, "relations": rels, **tail}
    # The one-type case: its type's and relation's fields at the top.
    fields = {**types[HOMOGENEOUS_TYPE], **rels[HOMOGENEOUS_RELATION]}
    times = {k: fields[k] for k in _TIMES if k in fields}
    return {**head, **{k: fields[k] for k in _HOMOGENEOUS_INFO}, **times, **tail}


#: The fields of a homogeneous dataset's ``info --json``, in their order.
_HOMOGENEOUS_INFO = ("num_nodes", "num_edges", "indices_dtype", "feature_dim", "feature_dtype", "num_classes",
                     "num_labeled", "splits", "edge_splits", "degree", "node_ids")
_TIMES = ("edge_times", "node_times")


def _type_info(i: Dict[str, Any]) -> Dict[str, Any]:
    return {"num_nodes": i["num_nodes"], "feature_dim": entry_field(i, "features", "dim"),
            "feature_dtype": entry_field(i, "features", "dtype"),
            "num_classes": entry_field(i, "labels", "num_classes"),
            "num_labeled": entry_field(i, "labels", "num_labeled"), "splits": dict(i.get("splits", {})),
            "node_ids": entry_field(i, "node_ids", "dtype"),
            **({"node_times": dict(i["node_times"])} if "node_times" in i else {})}


def _relation_info(i: Dict[str, Any]) -> Dict[str, Any]:
    return {"num_edges": i["num_edges"], "indices_dtype": i["graph"]["indices_dtype"], "degree": dict(i["degree"]),
            "edge_splits": {k: dict(v) for k, v in i.get("edge_splits", {}).items()},
            **({"edge_times": dict(i["edge_times"])} if "edge_times" in i else {})}


def cmd_info(args) -> int:
    info = info_dict(args.dir)
    print(json.dumps(info, indent=2) if args.json else _format_info(info))
    return 0


def _format_info(info: Dict[str, Any]) -> str:
    if info.get("heterogeneous"):
        return _format_hetero_info(info)
    d = info["degree"]
    lines = [
        f"dataset   {info['path']} (format v{info['format_version']})",
        f"nodes     {info['num_nodes']:,}",
        f"edges     {info['num_edges']:,} (indices {info['indices_dtype']})",
        "features  " + ("none" if info["feature_dim"] is None else f"{info['feature_dim']} x {info['feature_dtype']}"),
        "labels    " + ("none" if info["num_classes"] is None
                            else f"{info['num_classes']} classes, {info['num_labeled']:,} labeled"),
        "splits    " + (", ".join(f"{k} {v:,}" for k, v in info["splits"].items()) or "none"),
        "edge splits " + (_edge_splits(info["edge_splits"]) or "none"),
        f"in-degree min {d['min']:,}  median {d['median']:,}  mean {d['mean']:.2f}  max {d['max']:,}  "
        f"zero-degree nodes {d['zero']:,}",
    ]
    if info.get("node_ids"):
        lines.append(f"node ids  original ids of the input ({info['node_ids']}): Dataset.node_ids()")
    times = [f"{k.split('_')[0]}s {info[k]['min']:,} to {info[k]['max']:,}" for k in _TIMES if k in info]
    if times:
        lines.append("times     " + "; ".join(times))
    return "\n".join(lines + _files_lines(info, 20))


def _format_hetero_info(info: Dict[str, Any]) -> str:
    lines = [
        f"dataset   {info['path']} (format v{info['format_version']}, heterogeneous)",
        f"nodes     {info['num_nodes']:,} in {len(info['node_types'])} types",
        f"edges     {info['num_edges']:,} in {len(info['relations'])} relations",
        "node types",
    ]
    for t, i in info["node_types"].items():
        feat = "no features" if i["feature_dim"] is None else f"features {i['feature_dim']} x {i['feature_dtype']}"
        lab = "" if i["num_classes"] is None else f", {i['num_classes']} classes ({i['num_labeled']:,} labeled)"
        spl = ", ".join(f"{k} {v:,}" for k, v in i["splits"].items())
        ids = f", original ids ({i['node_ids']}): node_ids('{t}')" if i.get("node_ids") else ""
        lines.append(f"  {t:<16} {i['num_nodes']:>14,} nodes, {feat}{lab}" + (f", splits {spl}" if spl else "") + ids)
    lines.append("relations (in-degree over the destination type)")
    width = max((len(r) for r in info["relations"]), default=0)
    for r, i in info["relations"].items():
        d = i["degree"]
        lines.append(
            f"  {r:<{width}} {i['num_edges']:>14,} edges ({i['indices_dtype']}); in-degree min {d['min']:,} "
            f"median {d['median']:,} mean {d['mean']:.2f} max {d['max']:,}, zero {d['zero']:,}"
        )
        if i["edge_splits"]:
            lines.append(f"  {'':<{width}} edge splits " + _edge_splits(i["edge_splits"]))
    return "\n".join(lines + _files_lines(info, 40))


def _edge_splits(splits: Dict[str, Any]) -> str:
    return ", ".join(f"{k} {v['edges']:,}" + (f" ({v['negatives']} negatives each)" if v["negatives"] else "")
                     for k, v in splits.items())


def _files_lines(info: Dict[str, Any], width: int) -> List[str]:
    """The files of ``info`` and their total, their keys at least ``width`` characters wide."""
    rows = [(key, f["path"], f["bytes"]) for key, f in info["files"].items()] + [("total", "", info["total_bytes"])]
    width = max(width, *(len(key) for key, _, _ in rows))
    return ["files"] + [f"  {key:<{width}} {path:<26} {human_bytes(n)}" for key, path, n in rows]


def cmd_verify(args) -> int:
    with _bars(args) as bars:
        report = build.verify(args.dir, progress=bars, memory=args.memory, spill_dir=args.spill_dir)
    if not args.quiet:
        spilled = report["spilled_bytes"]
        also = f"; {human_bytes(spilled)} of sorted original ids spilled to disk" if spilled else ""
        print(f"ok: {args.dir} ({report['files_checked']} files, {human_bytes(report['bytes_checked'])} checked{also})")
    return 0


def cmd_demo(args) -> int:
    from . import main

    tmp = None
    if args.dir is None:
        tmp = temporary(tempfile.gettempdir(), "ringgnn-demo", directory=True)
        out = os.path.join(tmp.path, "sbm")
    else:
        out = args.dir
    try:
        print(
            f"generating a demo dataset: sbm with {DEMO['nodes']:,} nodes, {DEMO['classes']} classes, "
            f"average degree {DEMO['avg_degree']:g}, {DEMO['feature_dim']} features"
        )
        t0 = time.perf_counter()
        with _bars(args) as bars:
            manifest = build.generate_sbm(out, overwrite=args.overwrite, progress=bars, **DEMO)
        dt = time.perf_counter() - t0
        print(f"generated {manifest['num_nodes']:,} nodes, {manifest['num_edges']:,} edges in {dt:.2f} s\n")
        print(_format_info(info_dict(out)))
        with _bars(args) as bars:
            report = build.verify(out, progress=bars)
        print(f"\nverify: ok ({report['files_checked']} files)\n")
        rc = main(["sample", out, "--fanouts", "15,10", "--batch-size", "512", "--epochs", "2"]
                  + (["--quiet"] if args.quiet else []))
        if rc:
            return rc
        run = os.path.join(tmp.path, "run") if tmp is not None else os.path.normpath(out) + "-run"
        print()
        rc = main(["train", out, "--epochs", str(DEMO_EPOCHS), "--out", run] + (["--quiet"] if args.quiet else [])
                  + (["--overwrite"] if args.overwrite else []))  # the new dataset's run replaces the old one
        if rc:
            return rc
        print("done." if tmp is None else "done (the dataset was in a temporary directory; pass DIR to keep it).")
    finally:
        if tmp is not None:
            tmp.close()
    return 0
