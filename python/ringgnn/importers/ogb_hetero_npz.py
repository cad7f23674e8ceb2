"""OGB's binary heterogeneous node property prediction layout (what OGB's ``DatasetSaver`` writes
with ``is_hetero=True``, read by OGB's ``read_binary_heterograph_raw``) into a heterogeneous
ringgnn dataset with :func:`ringgnn.data.build.build_hetero`; :func:`ringgnn.importers.ogb.convert_ogb`
calls :func:`convert` when ``raw/`` holds ``edge_index_dict.npz``.

What becomes what:

* ``raw/num_nodes_dict.npz`` (node type -> a one-element count) -> node types;
* ``raw/edge_index_dict.npz`` (``HEAD___REL___TAIL`` -> int (2, E)) -> relation
  ``HEAD:REL:TAIL`` (streamed to a staged ``.npy``, ids checked against both types' counts);
  ``add_reverse`` adds ``TAIL:rev_REL:HEAD``;
* ``raw/node_feat_dict.npz`` (node type -> (n, D)) -> the types' features (optional);
* ``raw/node-label.npz`` (one node type -> (n, 1); NaN = unlabeled) -> that type's labels;
* ``split/SCHEME/split_dict.pt`` (``train``/``valid``/``test`` -> node type -> ids) -> the
  splits of the types it names (``valid`` -> ``val``).

Edge features (``edge_feat_dict.npz``, ``edge_reltype``) and other ``node_*_dict.npz`` are not
converted. Arrays are read as streams (:class:`._ogb_io.Npz`), never whole; every problem names
the file and the array.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Dict, Optional

import numpy as np

from .._core import InputError
from .._files import NpyWriter
from ..data import build
from ._ogb_io import Npz, load_split_dict, write_labels
from ._stage import LabelWriter, Staging, check_ids, split_names, unambiguous_edges
from .ogb_hetero import _scheme

SPLITS = ("train", "valid", "test")


def _need(raw: str, name: str, what: str) -> str:
    path = os.path.join(raw, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, f"no such file: OGB's binary heterogeneous layout has {what} there",
                                path)
    return path


def _counts(raw: str) -> Dict[str, int]:
    npz = Npz(_need(raw, "num_nodes_dict.npz", "the node count of each type (num_nodes_dict.npz)"))
    try:
        out = {}
        for t in npz.names:
            c = npz.small(t, "")
            if c.size != 1 or c.dtype.kind not in "iu" or int(c.reshape(-1)[0]) < 0:
                raise InputError(f"{npz.path}: '{t}' is {c.dtype} {c.tolist()}; give one node count per type (one "
                                 "graph: a node property prediction dataset)")
            out[t] = int(c.reshape(-1)[0])
        return out
    finally:
        npz.close()


def _relation(npz: Npz, key: str, counts: Dict[str, int], stage: Staging) -> "build.Relation":
    parts = key.split("___")
    if len(parts) != 3 or not all(parts) or parts[0] not in counts or parts[2] not in counts:
        raise InputError(f"{npz.path}: array '{key}' is not HEAD___REL___TAIL of node types of num_nodes_dict.npz "
                         f"({', '.join(counts)})")
    h, r, t = parts
    f, s = npz.open(key, "")
    where = f"{npz.path}: {key}"
    shape = s.shape[::-1] if s.transposed else s.shape  # as stored: (2, E)
    if len(shape) != 2 or shape[0] != 2 or s.dtype.kind not in "iu":
        raise InputError(f"{where}: {s.dtype} of shape {shape}; OGB's edge_index is integers of shape (2, E)")
    e = shape[1]
    with f, NpyWriter(stage.path(f"edges-{h}-{r}-{t}", where), np.int64) as out:
        seen = 0
        for chunk in s.flat_chunks():
            c = chunk.astype(np.int64, copy=False)
            # Entry k of the stream: row-major (2, E), or (E, 2) for a Fortran-ordered array.
            rows = (np.arange(seen, seen + c.size) % 2) if s.transposed else (np.arange(seen, seen + c.size) // e)
            for row, typ in ((0, h), (1, t)):
                pick = np.flatnonzero(rows == row)
                check_ids(c[pick], counts[typ], lambda i, pick=pick, row=row: _place(where, seen + pick[i], row, e,
                                                                                    s.transposed),
                          f"'{typ}' id")
            out.write(c)
            seen += c.size
        path = out.close(s.shape) if s.transposed else unambiguous_edges(out.close((2, e)), stage)
    return build.Relation(f"{h}:{r}:{t}", path, "npy")


def _place(where: str, k: int, row: int, e: int, transposed: bool) -> str:
    col = k // 2 if transposed else k % e
    return f"{where}[{'src' if row == 0 else 'dst'}, {col}]"


def _features(raw: str, counts: Dict[str, int], stage: Staging) -> Dict[str, str]:
    path = os.path.join(raw, "node_feat_dict.npz")
    if not os.path.isfile(path):
        return {}
    npz, out = Npz(path), {}
    try:
        for t in npz.names:
            if t not in counts:
                raise InputError(f"{path}: features of '{t}', which num_nodes_dict.npz does not have")
            f, s = npz.open(t, "")
            if len(s.shape) != 2 or s.shape[0] != counts[t] or s.dtype.kind not in "fiu":
                raise InputError(f"{path}: '{t}' is {s.dtype} of shape {s.shape}; give numbers of shape "
                                 f"({counts[t]}, D)")
            dtype = s.dtype if s.dtype in (np.float16, np.float32, np.float64) else np.float32
            with f, NpyWriter(stage.path(f"features-{t}", f"{path}: {t}"), dtype, s.shape[1:]) as w:
                for chunk in s.chunks():
                    w.write(chunk)
                out[t] = w.close()
        return out
    finally:
        npz.close()


def _labels(raw: str, counts: Dict[str, int], stage: Staging) -> Dict[str, str]:
    path = os.path.join(raw, "node-label.npz")
    if not os.path.isfile(path):
        return {}
    npz, out = Npz(path), {}
    try:
        for t in npz.names:
            if t not in counts:
                raise InputError(f"{path}: labels of '{t}', which num_nodes_dict.npz does not have")
            f, s = npz.open(t, "")
            with f, LabelWriter(stage.path(f"labels-{t}", f"{path}: {t}"), f"{path}: {t}") as w:
                write_labels(((c, f"{path}: {t}") for c in s.chunks()), w)
                if w.rows != counts[t]:
                    raise InputError(f"{path}: {w.rows} labels of '{t}', but num_nodes_dict.npz has {counts[t]}")
                out[t] = w.close()
        return out
    finally:
        npz.close()


def _splits(scheme_dir: Optional[str], counts: Dict[str, int], stage: Staging) -> Dict[str, Dict[str, str]]:
    if scheme_dir is None:
        return {}
    path = os.path.join(scheme_dir, "split_dict.pt")
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no such file: OGB's binary heterogeneous layout keeps its splits in "
                                "split_dict.pt (train/valid/test -> node type -> ids)", path)
    out: Dict[str, Dict[str, str]] = {}
    d = load_split_dict(path)
    for s, name in split_names(d, path).items():
        by_type = d[s]
        if not isinstance(by_type, dict):
            raise InputError(f"{path}: '{s}' is a {type(by_type).__name__}, not a dictionary of node type -> ids")
        for t, ids in by_type.items():
            if t not in counts:
                raise InputError(f"{path}: '{s}' names node type '{t}', which num_nodes_dict.npz does not have")
            a = np.asarray(ids.numpy() if hasattr(ids, "numpy") else ids).reshape(-1)
            if a.size and a.dtype.kind not in "iu":
                raise InputError(f"{path}: '{s}' of '{t}' is {a.dtype}; give node ids")
            a = a.astype(np.int64)
            check_ids(a, counts[t], lambda i, s=s, t=t: f"{path}: '{s}' of '{t}', entry {i}", f"'{t}' id")
            with NpyWriter(stage.path(f"split-{t}-{name}", f"{path}: '{s}' of '{t}'"), np.int64) as w:
                w.write(a)
                out.setdefault(t, {})[name] = w.close()
    return out


def convert(root: str, raw: str, out: Any, *, split_scheme: Optional[str], add_reverse: bool,
            feature_dtype: Optional[str], seed: int, memory: Any, overwrite: bool, threads: Optional[int],
            progress: Any) -> Dict[str, Any]:
    """Build the heterogeneous dataset (see the module)."""
    counts = _counts(raw)
    scheme_dir = _scheme(root, split_scheme)
    with Staging(out, overwrite) as stage:
        npz = Npz(_need(raw, "edge_index_dict.npz", "the relations (edge_index_dict.npz)"))
        try:
            relations = [_relation(npz, k, counts, stage) for k in npz.names]
        finally:
            npz.close()
        feats, labels = _features(raw, counts, stage), _labels(raw, counts, stage)
        splits = _splits(scheme_dir, counts, stage)
        types = [build.NodeType(t, n, features=feats.get(t), labels=labels.get(t), split=splits.get(t),
                                feature_dtype=feature_dtype if t in feats else None) for t, n in counts.items()]
        source = {"command": "convert", "from": "ogb", "dir": os.path.basename(os.path.normpath(root))}
        return build.build_hetero(out, types, relations, add_reverse=add_reverse, seed=seed, memory=memory,
                                  overwrite=overwrite, threads=threads, source=source, progress=progress,
                                  quote_input=False)
