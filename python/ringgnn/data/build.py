"""Building and checking datasets: thin layers over the core builder (``progress=``:
docs/USAGE.md, "Datasets")."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from .. import _core
from .._files import os_errors
from .._options import (check_default, count, default_memory, parse_link_split, parse_link_split_time,
                        parse_self_loops, parse_split, size)
from ..progress import reporting

PathLike = Union[str, "os.PathLike[str]"]
Size = Union[int, str]

DEFAULT_SBM_SPLIT = "train=0.6,val=0.2,test=0.2"
#: 1 GiB, or half of what the machine or a memory cgroup leaves if less.
DEFAULT_BUILD_MEMORY = 1 << 30


def _memory(memory: Optional[Size]) -> int:
    if memory is None:
        budget = default_memory(cap=DEFAULT_BUILD_MEMORY, held=0)
        check_default(budget, _core.MIN_BUILD_MEMORY)
        return budget
    return size(memory, "memory")


def _run(fn, progress, operation: str, out: PathLike, memory: Optional[Size], **kwargs) -> Dict[str, Any]:
    budget = _memory(memory)
    with os_errors(operation, out), reporting(progress) as bars:
        return json.loads(fn(out=os.fspath(out), memory=budget, progress=bars, **kwargs))


def convert(
    input: PathLike,
    out: PathLike,
    *,
    format: Optional[str] = None,
    undirected: bool = False,
    self_loops: Union[str, bool] = "keep",
    dedup: bool = False,
    num_nodes: Optional[int] = None,
    features: Optional[PathLike] = None,
    labels: Optional[PathLike] = None,
    split: Union[None, str, Mapping[str, Any]] = None,
    link_split: Union[None, str, Mapping[str, Any]] = None,
    link_negatives: int = 100,
    seed: int = 0,
    feature_dtype: Optional[str] = None,
    memory: Optional[Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
    node_ids: Optional[Sequence[Any]] = None,
    given_negatives: Optional[Mapping[str, PathLike]] = None,
    absent_ok: bool = False,
    shared_negatives: Optional[Mapping[str, PathLike]] = None,
    quote_input: bool = True,
    edge_time: Optional[PathLike] = None,
    node_time: Optional[PathLike] = None,
    link_split_time: Union[None, str, Mapping[str, int]] = None,
) -> Dict[str, Any]:
    """Build a dataset at ``out`` from an edge list (text, gz, bin32, bin64 or npy); returns the
    manifest. The options are ``ringgnn convert``'s (``--help``; docs/FORMAT.md, "Edge splits",
    "Edge splits by time", "Times", "Original node ids").

    ``link_split``: fractions or ``.npy`` pair lists held out for link prediction, each pair with
    ``link_negatives`` negatives; ``link_split_time`` ("val=T1,test=T2", needs ``edge_time``)
    splits by time instead. ``edge_time`` / ``node_time``: ``.npy`` int64 (or int32) times per
    input edge / per node. The importers' options: ``node_ids`` ``(dtype, ids, bytes)``, the
    original ids in dense order (an id given twice is an ``InputError``); ``given_negatives``,
    ``absent_ok`` as :class:`Relation`'s; ``shared_negatives``: per held-out split an ``.npy``
    int64 (m, 2) of negative pairs shared by all its positives; ``quote_input=False``: errors
    name ``input``'s line but quote nothing of it."""
    return _run(
        _core.convert, progress, "building the dataset", out, memory, input=os.fspath(input), format=format,
        undirected=undirected, self_loops=parse_self_loops(self_loops), dedup=dedup, num_nodes=num_nodes,
        features=_path(features), labels=_path(labels), split=None if split is None else parse_split(split),
        **_link_split(link_split, link_split_time, ""),
        link_negatives=count(link_negatives, "link_negatives", minimum=0), seed=seed, feature_dtype=feature_dtype,
        overwrite=overwrite, threads=threads, node_ids=_node_ids(node_ids), given_negatives=_files(given_negatives),
        absent_ok=bool(absent_ok), shared_negatives=_files(shared_negatives), quote_input=bool(quote_input),
        edge_time=_path(edge_time), node_time=_path(node_time),
    )


def _link_split(link_split: Any, link_split_time: Any, where: str, parse: Any = parse_link_split) -> Dict[str, Any]:
    """The core's ``link_split`` and ``link_split_time`` arguments, parsed; both given is refused."""
    if link_split is not None and link_split_time is not None:
        raise _core.InputError(
            f"{where}--link-split and --link-split-time cannot be combined: a graph with edge times is split by time "
            "(--link-split-time val=T1,test=T2), one without by --link-split")
    return {"link_split": None if link_split is None else parse(link_split),
            "link_split_time": None if link_split_time is None else parse_link_split_time(link_split_time)}


def link_fractions(spec: Any) -> list:
    """A generator's ``link_split``, parsed: fractions only."""
    return fractions(spec, "link_split (--link-split)", parse_link_split, "val=0.05,test=0.1")


def _generated_link(link_split: Any, link_split_time: Any, link_negatives: Any) -> Dict[str, Any]:
    return {**_link_split(link_split, link_split_time, "", link_fractions),
            "link_negatives": count(link_negatives, "link_negatives (--link-negatives)")}


def _path(path: Optional[PathLike]) -> Optional[str]:
    return None if path is None else os.fspath(path)


def _files(files: Optional[Mapping[str, PathLike]]) -> list:
    return [(str(k), os.fspath(v)) for k, v in (files or {}).items()]


def _node_ids(ids: Optional[Sequence[Any]]) -> Optional[tuple]:
    if ids is None:
        return None
    return str(ids[0]), os.fspath(ids[1]), _path(ids[2])


def generate_rmat(
    out: PathLike,
    *,
    scale: int,
    edge_factor: int = 16,
    undirected: bool = False,
    self_loops: Union[str, bool] = "keep",
    dedup: bool = False,
    seed: int = 0,
    memory: Optional[Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
    edge_time: Optional[str] = None,
    node_time: Optional[str] = None,
    time_range: Optional[Sequence[int]] = None,
    link_split: Union[None, str, Mapping[str, float]] = None,
    link_split_time: Union[None, str, Mapping[str, int]] = None,
    link_negatives: int = 100,
) -> Dict[str, Any]:
    """Generate a Graph500 R-MAT graph with ``2**scale`` nodes and ``edge_factor * 2**scale``
    edges at ``out``; returns the manifest. ``edge_time`` / ``node_time``: ``"uniform"`` (in
    ``time_range``, default ``[0, 2**31)``) or ``"growth"`` (generation order). ``link_split``
    (fractions) or ``link_split_time``: as :func:`convert`'s."""
    return _run(_core.generate_rmat, progress, "generating the dataset", out, memory, scale=scale,
                edge_factor=edge_factor, undirected=undirected, self_loops=parse_self_loops(self_loops), dedup=dedup,
                seed=seed, overwrite=overwrite, threads=threads, **_times(edge_time, node_time, time_range),
                **_generated_link(link_split, link_split_time, link_negatives))


def generate_sbm(
    out: PathLike,
    *,
    nodes: int,
    classes: int,
    avg_degree: float,
    feature_dim: int,
    feature_dtype: str = "f32",
    split: Union[str, Mapping[str, float]] = DEFAULT_SBM_SPLIT,
    seed: int = 0,
    memory: Optional[Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
    edge_time: Optional[str] = None,
    node_time: Optional[str] = None,
    time_range: Optional[Sequence[int]] = None,
    link_split: Union[None, str, Mapping[str, float]] = None,
    link_split_time: Union[None, str, Mapping[str, int]] = None,
    link_negatives: int = 100,
) -> Dict[str, Any]:
    """Generate a degree-corrected planted-partition dataset (graph, features, labels, splits)
    at ``out`` (``docs/generators.md``); returns the manifest. Times and link splits as
    :func:`generate_rmat`'s."""
    parsed = fractions(split)
    return _run(_core.generate_sbm, progress, "generating the dataset", out, memory, nodes=nodes, classes=classes,
                avg_degree=float(avg_degree), feature_dim=feature_dim, feature_dtype=feature_dtype, split=parsed,
                seed=seed, overwrite=overwrite, threads=threads, **_times(edge_time, node_time, time_range),
                **_generated_link(link_split, link_split_time, link_negatives))


def _times(edge_time: Optional[str], node_time: Optional[str], time_range: Optional[Sequence[int]]) -> Dict[str, Any]:
    rng = None if time_range is None else (int(time_range[0]), int(time_range[1]))
    return {"edge_time": edge_time, "node_time": node_time, "time_range": rng}


def fractions(spec: Any, name: str = "split", parse: Any = parse_split, example: str = DEFAULT_SBM_SPLIT) -> list:
    """``spec`` parsed by ``parse``, refused unless every part is a fraction."""
    parsed = parse(spec)
    if not all(isinstance(v, float) for _, v in parsed):
        raise _core.InputError(f"{name} '{spec}': generated datasets take fractions, e.g. {example}")
    return parsed


@dataclass
class NodeType:
    """One node type of :func:`build_hetero`: ``num_nodes`` ids of its own, optional
    ``features`` (``.npy`` [num_nodes, D] float), ``labels`` (``.npy`` integers, -1 = unlabeled),
    ``split``, ``node_ids`` and ``node_time`` as :func:`convert` takes them (an id given twice
    within the type is refused)."""

    name: str
    num_nodes: int
    features: Optional[PathLike] = None
    labels: Optional[PathLike] = None
    split: Union[None, str, Mapping[str, Any]] = None
    feature_dtype: Optional[str] = None
    node_ids: Optional[Sequence[Any]] = None
    node_time: Optional[PathLike] = None


@dataclass
class Relation:
    """One relation of :func:`build_hetero`: ``name`` is ``SRC:REL:DST``; ``edges`` an edge list
    of (SRC id, DST id) pairs in any format :func:`convert` reads. ``link_split``,
    ``link_negatives``, ``link_split_time`` and ``edge_time`` as :func:`convert`'s (the reverse
    drops the same pairs and gets the same times). ``given_negatives``: per listed held-out split
    an ``.npy`` int64 (n, K) of negatives in the stored pair order (ascending (dst, src));
    ``absent_ok``: a listed held-out pair the edge file lacks is stored anyway."""

    name: str
    edges: PathLike
    format: Optional[str] = None
    link_split: Union[None, str, Mapping[str, Any]] = None
    link_negatives: int = 100
    given_negatives: Optional[Mapping[str, PathLike]] = None
    absent_ok: bool = False
    edge_time: Optional[PathLike] = None
    link_split_time: Union[None, str, Mapping[str, int]] = None


def convert_one_type(out: PathLike, node_type: NodeType, relation: Relation, **options: Any) -> Dict[str, Any]:
    """The one-type case of :func:`build_hetero`, stored as a homogeneous dataset by
    :func:`convert` (``options``: its other arguments)."""
    t, r = node_type, relation
    return convert(r.edges, out, format=r.format, num_nodes=t.num_nodes, features=t.features,
                   feature_dtype=t.feature_dtype, labels=t.labels, split=t.split, node_ids=t.node_ids,
                   edge_time=r.edge_time, node_time=t.node_time, **options)


def build_hetero(
    out: PathLike,
    node_types: Sequence[NodeType],
    relations: Sequence[Relation],
    *,
    add_reverse: bool = False,
    seed: int = 0,
    memory: Optional[Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    source: Any = None,
    progress: Any = None,
    quote_input: bool = True,
) -> Dict[str, Any]:
    """Build a heterogeneous dataset at ``out`` (``docs/FORMAT.md``, "Typed nodes and
    relations"), each relation its own CSC; ``add_reverse`` also builds ``DST:rev_REL:SRC`` for
    each. ``source`` (JSON-able) is recorded in the manifest; ``quote_input`` is
    :func:`convert`'s. Returns the manifest."""
    types = []
    for t in node_types:
        types.append((
            str(t.name), count(t.num_nodes, f"node type {t.name}: num_nodes"), _path(t.features), t.feature_dtype,
            _path(t.labels), None if t.split is None else parse_split(t.split), _node_ids(t.node_ids),
        ))
    rels = []
    for r in relations:
        link = _link_split(r.link_split, r.link_split_time, f"relation {r.name}: ")
        rels.append((str(r.name), os.fspath(r.edges), None if r.format in (None, "detect") else r.format,
                     link["link_split"], count(r.link_negatives, f"relation {r.name}: link_negatives", minimum=0),
                     _files(r.given_negatives), bool(r.absent_ok), link["link_split_time"]))
    times = {"edge_times": [(str(r.name), os.fspath(r.edge_time)) for r in relations if r.edge_time is not None],
             "node_times": [(str(t.name), os.fspath(t.node_time)) for t in node_types if t.node_time is not None]}
    return _run(_core.build_hetero, progress, "building the dataset", out, memory, node_types=types, relations=rels,
                add_reverse=bool(add_reverse), seed=seed, overwrite=overwrite, threads=threads, **times,
                source=json.dumps(source), quote_input=bool(quote_input))


def verify(path: PathLike, progress: Any = None, memory: Optional[Size] = None,
           spill_dir: Optional[PathLike] = None) -> Dict[str, int]:
    """Check checksums and structure of the dataset at ``path``, and that each original node id
    occurs once; raises :class:`ringgnn.CorruptDatasetError` naming the first problem. Returns
    ``files_checked``, ``bytes_checked`` and ``spilled_bytes`` (what the id check wrote under
    ``spill_dir``, default beside the dataset, beyond ``memory``)."""
    memory = _memory(memory)
    with os_errors("verifying the dataset", path), reporting(progress) as bars:
        return _core.verify(os.fspath(path), memory, _path(spill_dir), bars)


def read_manifest(path: PathLike) -> Dict[str, Any]:
    """The checked manifest of the dataset at ``path``."""
    return json.loads(_core.read_manifest(os.fspath(path)))
