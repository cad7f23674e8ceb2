"""OGB's heterogeneous node property prediction layouts, CSV (``ogbn-mag``) and binary
(``DatasetSaver(is_hetero=True)``), into one ``build_hetero`` call."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._core import InputError
from .._excerpt import WITHHELD, quoted
from ..data import build
from ._described import resolve
from ._ogb_io import (SPLITS, Npz, array, build_typed, csv_column, csv_lines, load_split_dict, need, stage_csv_features,
                      stage_csv_ids, stage_edges, stage_ids, stage_labels, stage_npz_features, stage_npz_labels)
from ._stage import Staging, check_ids, split_name, split_names

CSV = "OGB's heterogeneous layout"
BINARY = "OGB's binary heterogeneous layout"

#: Stages a layout's files: its relations, and its features, labels and splits by node type.
Stager = Callable[[Staging], Tuple[List[build.Relation], Tuple[Dict[str, str], Dict[str, str],
                                                              Dict[str, Dict[str, str]]]]]


def convert(root: str, raw: str, out: Any, scheme: Optional[str], feature_dtype: Optional[str],
            **build_args: Any) -> Dict[str, Any]:
    """The heterogeneous dataset; ``build_args`` are :func:`ringgnn.data.build.build_hetero`'s."""
    if os.path.isfile(os.path.join(raw, "edge_index_dict.npz")):
        counts = _npz_counts(raw)
        stage_all = _binary(raw, counts, scheme)
    else:
        counts = _csv_counts(raw)
        stage_all = _csv(raw, counts, scheme)
    with Staging(out, build_args["overwrite"]) as stage:
        relations, staged = stage_all(stage)
        return build_typed(root, out, "ogb", counts, relations, staged, feature_dtype, **build_args)


def _lines(path: str) -> List[str]:
    return [line.strip() for _, chunk in csv_lines(path) for line in chunk if line.strip()]


def _header_table(path: str) -> Dict[str, str]:
    lines = _lines(path)
    if len(lines) < 2:
        raise InputError(f"{path}: expected a header line of node types and a line of values")
    names, values = lines[0].split(","), lines[1].split(",")
    if len(names) != len(values):
        raise InputError(f"{path}: {len(names)} node types in the header but {len(values)} values")
    return dict(zip(names, values))


def _csv_counts(raw: str) -> Dict[str, int]:
    path = need(os.path.join(raw, "num-node-dict.csv.gz"),
                f"{CSV} has the node count of each type (num-node-dict.csv.gz) there")
    out = {}
    for i, (t, v) in enumerate(_header_table(path).items()):
        try:
            out[t] = int(float(v))
        except ValueError:  # the file may not be what the layout says: quote nothing of it
            raise InputError(f"{path}: line 2, column {i + 1}: the count is not a number ({WITHHELD})") from None
    return out


def _triplets(raw: str, counts: Dict[str, int]) -> List[List[str]]:
    path = need(os.path.join(raw, "triplet-type-list.csv.gz"),
                f"{CSV} has the relations (triplet-type-list.csv.gz) there")
    rows = [line.split(",") for line in _lines(path)]
    for i, r in enumerate(rows):
        if len(r) != 3 or not all(r):
            raise InputError(f"{path}: line {i + 1} is not head,relation,tail")
        for c in (0, 2):
            if r[c] not in counts:  # the file may not be what the layout says: quote nothing of it
                raise InputError(f"{path}: line {i + 1}, column {c + 1} names a node type that num-node-dict.csv.gz "
                                 f"does not have (it has {', '.join(map(quoted, counts))}; {WITHHELD})")
    return sorted(rows)


def _flags(path: str) -> List[str]:
    return [t for t, v in _header_table(path).items() if v.strip().lower() in ("true", "1")]


def _csv(raw: str, counts: Dict[str, int], scheme: Optional[str]) -> Stager:
    relations = []
    for h, r, t in _triplets(raw, counts):
        where = f"{os.path.join(raw, 'triplet-type-list.csv.gz')}: relation {quoted(f'{h},{r},{t}')}"
        path = need(resolve(raw, os.path.join("relations", f"{h}___{r}___{t}", "edge.csv.gz"), where),
                    f"{CSV} has the edges of {h}___{r}___{t} there")
        relations.append(build.Relation(f"{h}:{r}:{t}", path, "text"))
    labeled = _flags(os.path.join(raw, "nodetype-has-label.csv.gz")) \
        if os.path.isfile(os.path.join(raw, "nodetype-has-label.csv.gz")) else []
    split_types = _flags(need(os.path.join(scheme, "nodetype-has-split.csv.gz"),
                              f"{CSV} has the types with splits (nodetype-has-split.csv.gz) there")) if scheme else []

    def stage_all(stage: Staging) -> Any:
        feats: Dict[str, str] = {}
        labels: Dict[str, str] = {}
        splits: Dict[str, Dict[str, str]] = {}
        for t, n in counts.items():
            where = f"{os.path.join(raw, 'num-node-dict.csv.gz')}: node type {quoted(t)}"
            fpath = resolve(raw, os.path.join("node-feat", t, "node-feat.csv.gz"), where)
            if os.path.isfile(fpath):
                feats[t] = stage_csv_features(stage, fpath, n, f"features-{t}",
                                              f"num-node-dict.csv.gz has {n} {quoted(t)} nodes")
            if t in labeled:
                lpath = need(resolve(raw, os.path.join("node-label", t, "node-label.csv.gz"), where),
                             f"{CSV} has the labels of {quoted(t)} there")
                labels[t] = stage_labels(stage, f"labels-{t}", lpath, ((c, lpath) for c in csv_column(lpath)), n,
                                         lambda rows: f"{lpath}: {rows} labels, but num-node-dict.csv.gz has {n} "
                                                      f"{quoted(t)} nodes")
            if t in split_types:
                split = splits[t] = {}
                for s in SPLITS:
                    spath = need(resolve(scheme, os.path.join(t, f"{s}.csv.gz"), where),
                                 f"{CSV} has the {s} split of {quoted(t)} there")
                    split[split_name(s, spath)] = stage_csv_ids(stage, spath, n, f"split-{t}-{s}", f"{quoted(t)} id")
        return relations, (feats, labels, splits)

    return stage_all


def _npz_counts(raw: str) -> Dict[str, int]:
    with Npz(need(os.path.join(raw, "num_nodes_dict.npz"),
                  f"{BINARY} has the node count of each type (num_nodes_dict.npz) there")) as npz:
        out = {}
        for t in npz.names:
            c = npz.small(t, "")
            if c.size != 1 or c.dtype.kind not in "iu" or int(c.reshape(-1)[0]) < 0:
                raise InputError(f"{npz.path}: '{t}' is {c.dtype} {c.tolist()}; give one node count per type (one "
                                 "graph: a node property prediction dataset)")
            out[t] = int(c.reshape(-1)[0])
        return out


def _binary(raw: str, counts: Dict[str, int], scheme: Optional[str]) -> Stager:
    def each(name: str, what: str, stage_one: Any) -> Dict[str, str]:
        path = os.path.join(raw, name)
        if not os.path.isfile(path):
            return {}
        with Npz(path) as npz:
            out = {}
            for t in npz.names:
                if t not in counts:
                    raise InputError(f"{path}: {what} of '{t}', which num_nodes_dict.npz does not have")
                out[t] = stage_one(npz, t)
            return out

    def stage_all(stage: Staging) -> Any:
        with Npz(need(os.path.join(raw, "edge_index_dict.npz"),
                      f"{BINARY} has the relations (edge_index_dict.npz) there")) as npz:
            relations = [_relation(npz, k, counts, stage) for k in npz.names]
        feats = each("node_feat_dict.npz", "features", lambda npz, t: stage_npz_features(
            stage, npz, t, counts[t], f"features-{t}", f"{npz.path}: '{t}' is"))
        labels = each("node-label.npz", "labels", lambda npz, t: stage_npz_labels(
            stage, npz, t, "", f"labels-{t}", f"{npz.path}: {t}", counts[t],
            lambda rows: f"{npz.path}: {rows} labels of '{t}', but num_nodes_dict.npz has {counts[t]}"))
        return relations, (feats, labels, _splits(scheme, counts, stage))

    return stage_all


def _relation(npz: Npz, key: str, counts: Dict[str, int], stage: Staging) -> build.Relation:
    parts = key.split("___")
    if len(parts) != 3 or not all(parts) or parts[0] not in counts or parts[2] not in counts:
        raise InputError(f"{npz.path}: array '{key}' is not HEAD___REL___TAIL of node types of num_nodes_dict.npz "
                         f"({', '.join(counts)})")
    h, r, t = parts
    path = stage_edges(stage, npz, key, "", [(0, counts[h], f"'{h}' id"), (1, counts[t], f"'{t}' id")],
                       f"edges-{h}-{r}-{t}")
    return build.Relation(f"{h}:{r}:{t}", path, "npy")


def _splits(scheme: Optional[str], counts: Dict[str, int], stage: Staging) -> Dict[str, Dict[str, str]]:
    if scheme is None:
        return {}
    path = os.path.join(scheme, "split_dict.pt")
    need(path, f"{BINARY} keeps its splits in split_dict.pt (train/valid/test -> node type -> ids)")
    out: Dict[str, Dict[str, str]] = {}
    d = load_split_dict(path)
    for s, name in split_names(d, path).items():
        by_type = d[s]
        if not isinstance(by_type, dict):
            raise InputError(f"{path}: '{s}' is a {type(by_type).__name__}, not a dictionary of node type -> ids")
        for t, ids in by_type.items():
            if t not in counts:
                raise InputError(f"{path}: '{s}' names node type '{t}', which num_nodes_dict.npz does not have")
            a = array(ids).reshape(-1)
            if a.size and a.dtype.kind not in "iu":
                raise InputError(f"{path}: '{s}' of '{t}' is {a.dtype}; give node ids")
            a = a.astype(np.int64)
            check_ids(a, counts[t], lambda i, s=s, t=t: f"{path}: '{s}' of '{t}', entry {i}", f"'{t}' id")
            out.setdefault(t, {})[name] = stage_ids(stage, a, f"split-{t}-{name}", f"{path}: '{s}' of '{t}'")
    return out
