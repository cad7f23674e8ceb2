"""Importing a DGL GraphBolt ``OnDiskDataset`` (``ringgnn convert metadata.yaml OUT``): its yaml
checked whole, then one build; ``graph.feature_data`` entries named ``time_feature`` are node and
edge times."""

from __future__ import annotations

import errno
import logging
import os
import pickle
import zipfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._core import InputError
from .._excerpt import excerpt, quoted, reason
from .._files import allocated_memmap, os_errors
from ..data import build
from ..data.schema import parse_edge_type
from . import graphbolt_links
from ._described import resolve
from ._stage import PathLike, Staging

log = logging.getLogger(__name__)

SETS = (("train_set", "train"), ("validation_set", "val"), ("test_set", "test"))
_SEED_NAMES = ("seeds", "seed_nodes")  # seed_nodes: datasets written before DGL 2.1
_LINK_NAMES = ("node_pairs", "negative_srcs", "negative_dsts", "indexes")
_KINDS = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "a mapping"}
TimeKey = Tuple[str, Optional[str]]  # (domain "node" or "edge", node or edge type; None: homogeneous)


def find_metadata(input: PathLike) -> Optional[str]:
    """The GraphBolt ``metadata.yaml`` that ``input`` names (itself, or in the directory), else None."""
    path = os.fspath(input)
    if path.lower().endswith((".yaml", ".yml")):
        return path
    inner = os.path.join(path, "metadata.yaml")
    return inner if os.path.isdir(path) and os.path.isfile(inner) else None


@dataclass
class DataFile:
    """A file the yaml names: ``field`` is where (``graph.edges[1]``)."""

    field: str
    format: str
    path: str
    name: Optional[str] = None


@dataclass
class TaskSet:
    field: str
    type: Optional[str]
    data: List[DataFile]


@dataclass
class Task:
    field: str
    name: Optional[str]
    num_classes: Optional[int]
    sets: Dict[str, List[TaskSet]] = field(default_factory=dict)  # split name -> entries

    def __str__(self) -> str:
        return f"{self.field} ({quoted(self.name)})" if self.name else self.field


@dataclass
class Metadata:
    """A checked ``metadata.yaml``; a homogeneous dataset has the one node type ``None``."""

    path: str
    dataset_name: Optional[str]
    nodes: Dict[Optional[str], int]
    edges: List[Tuple[Optional[str], DataFile]]
    features: List[Tuple[Optional[str], DataFile]]  # node features: (type, file with its name)
    tasks: List[Task]
    times: Dict[TimeKey, DataFile] = field(default_factory=dict)

    @property
    def homogeneous(self) -> bool:
        return None in self.nodes


class _Reader:
    def __init__(self, path: str):
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))

    def error(self, where: str, problem: str, fix: str = "") -> InputError:
        return InputError(f"{self.path}: {where}: {problem}" + (f"; {fix}" if fix else ""))

    def get(self, obj: dict, key: str, where: str, kind: type, required: bool = True) -> Any:
        at = f"{where}.{key}" if where else key
        value = obj.get(key)
        if value is None:
            if required:
                raise self.error(at, "missing", f"give it ({_KINDS[kind]})")
            return None
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok or (kind is str and not value.strip()):
            raise self.error(at, f"must be {'a non-empty string' if kind is str else _KINDS[kind]}, "
                             f"not {quoted(value)}")
        return value

    def items(self, obj: dict, key: str, where: str, required: bool = True) -> List[Tuple[str, dict]]:
        at = f"{where}.{key}" if where else key
        out = []
        for i, item in enumerate(self.get(obj, key, where, list, required) or []):
            if not isinstance(item, dict):
                raise self.error(f"{at}[{i}]", f"must be a mapping of fields, not {quoted(item)}")
            out.append((f"{at}[{i}]", item))
        return out

    def node_type(self, t: Optional[str], at: str, nodes: Dict[Optional[str], int]) -> Optional[str]:
        if None in nodes and t is not None:
            raise self.error(f"{at}.type", f"{quoted(t)} given, but graph.nodes has no types", "leave it out")
        if None not in nodes and t not in nodes:
            raise self.error(f"{at}.type", "missing" if t is None else f"{quoted(t)} is not a node type of graph.nodes",
                             f"use one of {', '.join(nodes)}")
        return t

    def file(self, obj: dict, where: str, formats: Tuple[str, ...]) -> DataFile:
        fmt = self.get(obj, "format", where, str)
        if fmt not in formats:
            raise self.error(f"{where}.format", f"{quoted(fmt)} is not a format of this entry",
                             f"use {' or '.join(formats)}")
        self.get(obj, "in_memory", where, bool, required=False)  # a GraphBolt loading hint: ignored
        path = resolve(self.dir, self.get(obj, "path", where, str), f"{self.path}: {where}.path")
        if not os.path.isfile(path):
            raise FileNotFoundError(
                errno.ENOENT,
                f"no such file, named by {where}.path of {self.path} (paths are relative to its directory)", path)
        return DataFile(where, fmt, path)


def read_metadata(yaml_path: PathLike, time_feature: str = "timestamp") -> Metadata:
    """Parse and check a GraphBolt ``metadata.yaml`` (or the directory holding one); the files
    it names must exist, nothing is read from them."""
    import yaml

    path = find_metadata(yaml_path) or os.fspath(yaml_path)
    r = _Reader(path)
    with os_errors("reading the GraphBolt metadata", path), open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise r.error(where, f"not valid YAML ({excerpt(e.problem or e.context or '')})",
                      "fix the syntax there") from None
    except yaml.YAMLError as e:
        raise r.error("YAML", f"not valid YAML ({excerpt(str(e))})") from None
    if not isinstance(doc, dict):
        raise r.error("top level", "must be a mapping with graph, feature_data and tasks")
    if doc.get("graph") is None and doc.get("graph_topology") is not None:
        raise r.error("graph_topology", "this is a dataset GraphBolt has preprocessed (its FusedCSCSamplingGraph)",
                      "give the original metadata.yaml, the one with graph: nodes and edges")
    graph = r.get(doc, "graph", "", dict)

    nodes: Dict[Optional[str], int] = {}
    typed = None
    for at, item in r.items(graph, "nodes", "graph"):
        t = r.get(item, "type", at, str, required=False)
        typed = t is not None if typed is None else typed
        if (t is not None) != typed:
            raise _mixed(r, at)
        if t in nodes:
            raise r.error(at, "a second entry for " + (f"node type {quoted(t)}" if typed else "the nodes"),
                          "a homogeneous graph has one nodes entry" if not typed else "give each type once")
        if t is not None and ":" in t:
            raise r.error(f"{at}.type", f"{quoted(t)} contains ':'", "node type names cannot contain ':'")
        nodes[t] = _count(r, item, at)
    if not nodes:
        raise r.error("graph.nodes", "empty", "list the node types with their num")

    edges: List[Tuple[Optional[str], DataFile]] = []
    for at, item in r.items(graph, "edges", "graph"):
        t = r.get(item, "type", at, str, required=False)
        if (t is not None) != typed:
            raise _mixed(r, at)
        if t is not None:
            try:
                parts = parse_edge_type(t)
            except ValueError:
                raise r.error(f"{at}.type", f"{quoted(t)} is not SRC:REL:DST", "e.g. author:writes:paper") from None
            for end in (parts[0], parts[2]):
                if end not in nodes:
                    raise r.error(f"{at}.type", f"{quoted(t)} names node type {quoted(end)}, which graph.nodes does "
                                  "not have", f"use one of {', '.join(nodes)} or add it to graph.nodes")
        if any(t == u for u, _ in edges):
            raise r.error(at, "a second entry for " + (f"edge type {quoted(t)}" if typed else "the edges"),
                          "give each edge type once" if typed else "a homogeneous graph has one edges entry")
        edges.append((t, r.file(item, at, ("csv", "numpy", "torch"))))
    if not edges:
        raise r.error("graph.edges", "empty", "list the edge files")
    skipped = []
    times: Dict[TimeKey, DataFile] = {}
    for at, it in r.items(graph, "feature_data", "graph", required=False):
        if it.get("name") != time_feature:
            skipped.append(f"{at} ({it.get('domain')} feature {quoted(it.get('name'))} of the graph structure)")
            continue
        key = _time_key(r, it, at, nodes, [t for t, _ in edges])
        if key in times:
            raise r.error(at, f"a second {key[0]} feature {quoted(time_feature)}"
                          + (f" of type {quoted(key[1])}" if key[1] else ""), "give each once")
        times[key] = r.file(it, at, ("numpy", "torch"))

    features: List[Tuple[Optional[str], DataFile]] = []
    for at, item in r.items(doc, "feature_data", "", required=False):
        domain = r.get(item, "domain", at, str)
        if domain not in ("node", "edge", "graph"):
            raise r.error(f"{at}.domain", f"{quoted(domain)} is not a domain", "use node, edge or graph")
        t = r.get(item, "type", at, str, required=False)
        name = r.get(item, "name", at, str)
        f = r.file(item, at, ("numpy", "torch"))
        f.name = name
        if domain != "node":
            skipped.append(f"{at} ({domain} feature {quoted(name)}" + (f" of {t})" if t else ")"))
            continue
        r.node_type(t, at, nodes)
        if any(t == u and name == g.name for u, g in features):
            raise r.error(at, f"a second node feature {quoted(name)}" + (f" of type {quoted(t)}" if t else ""),
                          "give each once")
        features.append((t, f))
    for what in skipped:
        log.warning("%s: skipping %s: ringgnn converts node features and times (graph.feature_data named %s) only",
                    path, what, quoted(time_feature))

    tasks = []
    for at, item in r.items(doc, "tasks", "", required=False):
        classes = r.get(item, "num_classes", at, int, required=False)
        if classes is not None and classes < 1:
            raise r.error(f"{at}.num_classes", f"{classes}", "give at least 1")
        task = Task(at, r.get(item, "name", at, str, required=False), classes)
        for key, split in SETS:
            entries = []
            for sat, entry in r.items(item, key, at, required=False):
                data = []
                for dat, d in r.items(entry, "data", sat):
                    data.append(r.file(d, dat, ("numpy", "torch")))
                    data[-1].name = r.get(d, "name", dat, str, required=False)
                entries.append(TaskSet(sat, r.get(entry, "type", sat, str, required=False), data))
            if entries:
                task.sets[split] = entries
        tasks.append(task)
    name = doc.get("dataset_name")
    return Metadata(path, None if name is None else str(name), nodes, edges, features, tasks, times)


def _time_key(r: _Reader, item: dict, at: str, nodes: Dict[Optional[str], int],
              edge_types: List[Optional[str]]) -> TimeKey:
    domain = r.get(item, "domain", at, str)
    t = r.get(item, "type", at, str, required=False)
    if domain == "node":
        return domain, r.node_type(t, at, nodes)
    if domain != "edge":
        raise r.error(f"{at}.domain", f"{quoted(domain)} is not a domain of times", "use node or edge")
    if t not in edge_types:
        if edge_types == [None]:
            raise r.error(f"{at}.type", f"{quoted(t)} given, but graph.edges has no types", "leave it out")
        raise r.error(f"{at}.type", "missing" if t is None else f"{quoted(t)} is not an edge type of graph.edges",
                      f"use one of {', '.join(map(str, edge_types))}")
    return domain, t


def _owner(t: Optional[str]) -> str:
    return f"node type {quoted(t)}" if t is not None else "the graph"


def _mixed(r: _Reader, at: str) -> InputError:
    return r.error(f"{at}.type", "typed and untyped entries are mixed",
                   "type every node and edge entry (a heterogeneous graph) or none (a homogeneous one)")


def _count(r: _Reader, item: dict, at: str) -> int:
    n = r.get(item, "num", at, int)
    if n < 0:
        raise r.error(f"{at}.num", f"{n} is negative", "give the number of nodes")
    return n


def _load(meta: Metadata, f: DataFile) -> np.ndarray:
    r = _Reader(meta.path)
    with os_errors("reading", f.path):
        if f.format == "numpy":
            try:
                a = np.load(f.path, mmap_mode="r", allow_pickle=False)
            except (ValueError, EOFError, zipfile.BadZipFile) as e:  # the reason may quote the file: withheld
                raise r.error(f"{f.field}.path", f"{f.path} is not a .npy array ({reason(e, quote=False)})",
                              "save it with numpy.save") from None
            if not isinstance(a, np.ndarray):
                raise r.error(f"{f.field}.path", f"{f.path} is not a .npy array", "save it with numpy.save")
            return a
        import torch

        try:
            try:
                t = torch.load(f.path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # files saved in torch's legacy format cannot be mapped
                t = torch.load(f.path, map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError, IndexError) as e:
            raise r.error(f"{f.field}.path",
                          f"{f.path} is not a tensor saved with torch.save ({reason(e, quote=False)})") from None
        if not isinstance(t, torch.Tensor):
            raise r.error(f"{f.field}.path", f"{f.path} holds a {type(t).__name__}, not a tensor",
                          "torch.save one tensor per file")
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _link_reason(meta: Metadata, task: Task) -> Optional[str]:
    """Why ``task`` is a link-prediction task, or None for node classification."""
    for entries in task.sets.values():
        for s in entries:
            if s.type is not None and ":" in s.type:
                return f"{s.field}.type {quoted(s.type)} is an edge type"
            for f in s.data:
                if f.name in _LINK_NAMES:
                    return f"{f.field}.name is {quoted(f.name)}"
                if f.name in _SEED_NAMES and _load(meta, f).ndim == 2:
                    return f"{f.field} holds node pairs"
    return None


def _choose_task(meta: Metadata, name: Optional[str]) -> Tuple[Optional[Task], Optional[Task]]:
    """(node-classification task, link-prediction task): the one named, or the first of each kind."""
    r = _Reader(meta.path)
    if name is not None:
        named = [t for t in meta.tasks if t.name == name]
        if not named:
            have = ", ".join(f"{quoted(t.name)}" for t in meta.tasks if t.name) or "no named tasks"
            raise r.error("tasks", f"no task named {quoted(name)} (it has {have})", "name one of those")
        reason = _link_reason(meta, named[0])
        if reason and meta.homogeneous:
            raise r.error(str(named[0]), f"a link-prediction task ({reason}) of a homogeneous dataset: not supported "
                          "yet", "build link splits with `ringgnn convert EDGES --link-split`")
        return (None, named[0]) if reason else (named[0], None)
    node = link = None
    for task in meta.tasks:
        reason = _link_reason(meta, task)
        if reason is None and node is None:
            node = task
        elif reason is not None and link is None and not meta.homogeneous and set(task.sets) - {"train"}:
            link = task
        else:
            why = "only the first task of each kind is converted (name one with task=/--task)"
            if reason and meta.homogeneous:
                why = "a link-prediction task of a homogeneous dataset: not supported yet"
            elif reason and not set(task.sets) - {"train"}:
                why = "a link-prediction task without validation_set or test_set"
            log.warning("%s: skipping %s: %s", meta.path, task, why)
    return node, link


def _choose_features(meta: Metadata, feature: str) -> Dict[Optional[str], DataFile]:
    chosen = {}
    for t in meta.nodes:
        mine = [f for u, f in meta.features if u == t]
        named = [f for f in mine if f.name == feature]
        what = _owner(t)
        if named:
            chosen[t] = named[0]
        elif len(mine) == 1:
            log.warning("%s: %s has no node feature '%s'; using its only one, '%s'", meta.path, what, feature,
                        mine[0].name)
            chosen[t] = mine[0]
        elif mine:
            log.warning("%s: %s has node features %s and none named '%s': converting none (pass feature=NAME)",
                        meta.path, what, ", ".join(f"{quoted(f.name)}" for f in mine), feature)
    return chosen


#: Labels set per slice of a staged label map: Python handles signals between slices.
_FILL = 1 << 22


class _Staging(Staging):
    """Writes what the builder cannot read as given (torch tensors, labels, splits, times) as
    ``.npy`` files in the staging directory."""

    def __init__(self, meta: Metadata, out: str, overwrite: bool):
        super().__init__(out, overwrite)
        self.meta, self.r = meta, _Reader(meta.path)

    def copy(self, a: np.ndarray, field: Optional[str] = None) -> str:
        return self.save(a, None, field and f"{self.meta.path}: {field}", f"a staged copy of {field or 'an array'}")

    def edges(self, f: DataFile) -> Tuple[str, str]:
        if f.format == "csv":
            return f.path, "csv"  # the builder's text reader takes "src,dst" lines
        a = _load(self.meta, f)
        if a.ndim != 2 or a.shape[0] != 2 or not np.issubdtype(a.dtype, np.integer):
            raise self.r.error(f.field, f"{f.path} holds a {a.dtype} array of shape {a.shape}",
                               "GraphBolt's edges are integers of shape (2, E): row 0 sources, row 1 destinations")
        if a.shape[1] == 2:  # ringgnn reads a (2, 2) array as one edge per row: give it that
            return self.copy(np.ascontiguousarray(a.T)), "npy"
        return (f.path if f.format == "numpy" else self.copy(a)), "npy"

    def features(self, t: Optional[str], f: DataFile) -> str:
        a, num = _load(self.meta, f), self.meta.nodes[t]
        if a.ndim not in (1, 2) or a.shape[0] != num:
            raise self.r.error(f.field, f"{f.path} has shape {a.shape}, but {_owner(t)} has {num} nodes (graph.nodes)",
                               "give one row per node")
        if a.dtype not in (np.float16, np.float32, np.float64):
            raise self.r.error(f.field, f"{f.path} holds {a.dtype} values", "ringgnn stores float16/32/64 features")
        if f.format == "numpy" and a.ndim == 2:
            return f.path
        return self.copy(a.reshape(num, -1))

    def task(self, task: Task) -> Dict[Optional[str], Tuple[Optional[str], Dict[str, str]]]:
        """Per node type the task names: (labels file or None, {split: seed ids file})."""
        labels: Dict[Optional[str], np.ndarray] = {}
        paths: Dict[Optional[str], str] = {}
        splits: Dict[Optional[str], Dict[str, str]] = {}
        for split, entries in task.sets.items():
            seen: Dict[Optional[str], List[np.ndarray]] = {}
            for s in entries:
                t = self.r.node_type(s.type, s.field, self.meta.nodes)
                seeds, lab = self._entry(task, s, t)
                seen.setdefault(t, []).append(seeds)
                if lab is None:
                    continue
                if t not in labels:
                    paths[t] = os.path.join(self.dir, f"labels-{len(paths)}.npy")
                    n = self.meta.nodes[t]
                    self.check_room(f"the staged labels of {_owner(t)}: {n} x 8 B", 8 * n)
                    with os_errors("writing", paths[t]):  # a map: the labels need no memory of their own
                        labels[t] = allocated_memmap(paths[t], np.int64, (n,))
                        for i in range(0, n, _FILL):  # a slice at a time: Ctrl-C and SIGTERM are noticed between
                            labels[t][i:i + _FILL] = -1
                have = labels[t][seeds]
                clash = np.flatnonzero((have != -1) & (have != lab))
                if clash.size:
                    i = clash[0]
                    raise self.r.error(s.field, f"node {seeds[i]} has label {lab[i]} here and {have[i]} in another set "
                                       "of the task", "give each node one label")
                labels[t][seeds] = lab
            for t, parts in seen.items():
                ids = np.concatenate(parts)
                uniq, counts = np.unique(ids, return_counts=True)
                if uniq.size != ids.size:
                    where = f"{task.field}.{next(key for key, name in SETS if name == split)}"
                    raise self.r.error(where, f"node {uniq[counts > 1][0]}" + (f" of type {quoted(t)}" if t else "")
                                       + " is a seed more than once", "list each seed once")
                splits.setdefault(t, {})[split] = self.copy(ids)
        for a in labels.values():
            a.flush()
        labels.clear()  # closes the maps before the builder reads the files
        return {t: (paths.get(t), s) for t, s in splits.items()}

    def _entry(self, task: Task, s: TaskSet, t: Optional[str]) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        seeds = lab = None
        for f in s.data:
            if f.name in _SEED_NAMES:
                seeds = self._ids(f, t)
            elif f.name == "labels":
                lab = (f, _load(self.meta, f))
            else:
                log.warning("%s: skipping %s ('%s'): a node-classification set takes seeds and labels",
                            self.meta.path, f.field, f.name)
        if seeds is None:
            raise self.r.error(f"{s.field}.data", "no entry named 'seeds'", "add the seed node ids (name: seeds)")
        if lab is None:
            return seeds, None
        f, a = lab
        if a.ndim != 1 or a.shape[0] != seeds.shape[0] or not np.issubdtype(a.dtype, np.integer):
            raise self.r.error(f.field, f"{f.path} holds {a.dtype} of shape {a.shape}",
                               f"give one integer class per seed ({seeds.shape[0]})")
        a = np.asarray(a, dtype=np.int64)
        bad = np.flatnonzero((a < 0) | (a >= (task.num_classes or np.iinfo(np.int64).max)))
        if bad.size:
            limit = f" below num_classes {task.num_classes}" if task.num_classes else ""
            raise self.r.error(f.field, f"label {a[bad[0]]} (entry {bad[0]}) of {f.path}", f"give classes >= 0{limit}")
        return seeds, a

    def _ids(self, f: DataFile, t: Optional[str]) -> np.ndarray:
        a, num = _load(self.meta, f), self.meta.nodes[t]
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise self.r.error(f.field, f"{f.path} holds {a.dtype} of shape {a.shape}", "give a 1-D array of node ids")
        ids = np.asarray(a, dtype=np.int64)
        graphbolt_links.check_ids(self.r, f, ids, num, "seed", _owner(t))
        return ids

    def times(self) -> Dict[TimeKey, str]:
        """Each entry of the times as an ``.npy`` the builder reads."""
        meta, out = self.meta, {}
        for (domain, t), f in meta.times.items():
            if domain == "node":
                n: Optional[int] = meta.nodes[t]
            else:
                edges = next(e for u, e in meta.edges if u == t)
                n = None if edges.format == "csv" else int(_load(meta, edges).shape[1])
            a = _load(meta, f)
            if a.ndim == 2 and a.shape[1] == 1:
                a = a[:, 0]
            if a.ndim != 1 or (n is not None and a.shape[0] != n) or (a.size and a.dtype.kind not in "iu"):
                raise self.r.error(f.field, f"{f.path} holds {a.dtype} of shape {a.shape}",
                                   f"give one integer time per {domain}" + (f" ({n})" if n is not None else ""))
            if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
                raise self.r.error(f.field, f"{f.path} holds a time past 2^63 - 1", "give int64 times")
            if f.format == "numpy" and a.dtype in (np.int64, np.int32) and a.dtype.byteorder in "=<|":
                out[domain, t] = f.path
            else:
                out[domain, t] = self.copy(np.asarray(a, dtype=np.int64), f.field)
        return out


def convert_graphbolt(
    yaml_path: PathLike,
    out: PathLike,
    *,
    feature: str = "feat",
    task: Optional[str] = None,
    time_feature: str = "timestamp",
    add_reverse: bool = False,
    link_negatives: int = 100,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a ringgnn dataset at ``out`` from the GraphBolt ``OnDiskDataset`` whose
    ``metadata.yaml`` is ``yaml_path`` (or the directory holding it); returns the manifest.

    ``feature``: the node feature to convert for each type (else a type's only feature).
    ``task``: the task whose sets become labels and splits, by default the first
    node-classification and the first link-prediction task (``link_negatives`` drawn where a
    held-out set gives none). ``add_reverse``: also build ``DST:rev_REL:SRC`` for each relation
    (a homogeneous dataset is built ``undirected``). ``time_feature``: the name of the
    ``graph.feature_data`` entries that give times. The rest are
    :func:`ringgnn.data.build.build_hetero`'s."""
    meta = read_metadata(yaml_path, time_feature)
    out = os.fspath(out)
    chosen, link_task = _choose_task(meta, task)
    feats = _choose_features(meta, feature)
    with _Staging(meta, out, overwrite) as stage:
        edges = [(t, stage.edges(f)) for t, f in meta.edges]
        features = {t: stage.features(t, f) for t, f in feats.items()}
        targets = stage.task(chosen) if chosen is not None else {}
        links = graphbolt_links.link_splits(meta, link_task, stage, _load) if link_task is not None else {}
        times = stage.times()
        for t in (t for t in links if ("edge", t) in times):
            raise stage.r.error(meta.times["edge", t].field, f"edge type {quoted(t)} has times and link-prediction "
                                f"task {link_task} splits it", "edge splits of edges with times are not supported "
                                "yet: leave out the times, or name another task (task=NAME)")
        # quote_input=False: the builder's errors name a described file's line, never its content.
        common = {"seed": seed, "memory": memory, "overwrite": overwrite, "threads": threads, "progress": progress,
                  "quote_input": False}
        types = [build.NodeType(t, n, features=features.get(t), labels=targets.get(t, (None, None))[0],
                                split=targets.get(t, (None, None))[1], node_time=times.get(("node", t)))
                 for t, n in meta.nodes.items()]
        relations = []
        for t, (path, fmt) in edges:
            lk, edge_time = links.get(t), times.get(("edge", t))
            relations.append(build.Relation(t, path, fmt, edge_time=edge_time) if lk is None else build.Relation(
                t, path, fmt, link_split=lk.pairs, link_negatives=link_negatives, given_negatives=lk.negatives,
                absent_ok=True, edge_time=edge_time))
        if meta.homogeneous:  # the one-type case (untyped entries: type None)
            (t,), (r,) = types, relations
            return build.convert_one_type(out, t, r, undirected=add_reverse, **common)
        source = {"command": "convert", "from": "graphbolt", "yaml": os.path.basename(meta.path),
                  "dataset_name": meta.dataset_name, "task": None if chosen is None else (chosen.name or chosen.field)}
        if link_task is not None:
            source["link_task"] = link_task.name or link_task.field
        return build.build_hetero(out, types, relations, add_reverse=add_reverse, source=source, **common)
