"""OGB-LSC MAG240M's processed layout into a heterogeneous dataset: :func:`convert_mag240m`."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._core import InputError
from ..data import build
from ..data.schema import edge_type_str
from ._ogb_io import build_typed, load_pt, need, stage_split_dict
from ._stage import LabelWriter, PathLike, Staging, open_npy, unambiguous_edges

DIR_NAME = "mag240m_kddcup2021"


def find_root(path: PathLike) -> str:
    path = os.fspath(path)
    inner = os.path.join(path, DIR_NAME)
    return inner if os.path.isdir(inner) and not os.path.isdir(os.path.join(path, "processed")) else path


def _need(path: str, what: str) -> str:
    return need(path, f"MAG240M's processed layout has {what} there")


def _header(path: str):
    f, s = open_npy(path)
    f.close()
    return s


def convert_mag240m(
    root: PathLike,
    out: PathLike,
    *,
    add_reverse: bool = False,
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a heterogeneous ringgnn dataset at ``out`` from MAG240M's processed directory
    ``root``; returns the manifest. The rest are :func:`ringgnn.data.build.build_hetero`'s."""
    root = find_root(root)
    processed = os.path.join(root, "processed")
    if not os.path.isdir(processed):
        raise InputError(f"{root}: no processed/ directory, so not MAG240M's layout; give the "
                         f"{DIR_NAME} directory that ogb.lsc.MAG240MDataset downloads")
    meta_path = _need(os.path.join(root, "meta.pt"), "the node counts (meta.pt)")
    meta = load_pt(meta_path, "MAG240M's meta.pt maps node types to their counts")
    if not isinstance(meta, dict):
        raise InputError(f"{meta_path}: holds a {type(meta).__name__}, not a dictionary of node counts")

    relations: List[Tuple[str, str]] = []
    types: Dict[str, int] = {}

    def count(t: str) -> int:
        n = meta.get(t)
        if n is None or int(n) != n or n < 0:
            raise InputError(f"{meta_path}: no node count for '{t}' (it has: {', '.join(map(str, meta))}); "
                             f"processed/ has edges of type '{t}'")
        return types.setdefault(t, int(n))

    for d in sorted(os.listdir(processed)):
        parts = d.split("___")
        if len(parts) != 3 or not os.path.isdir(os.path.join(processed, d)):
            continue
        path = _need(os.path.join(processed, d, "edge_index.npy"), f"the edges of {d} (edge_index.npy)")
        s = _header(path)
        if len(s.shape) != 2 or s.shape[0] != 2 or s.dtype.kind not in "iu":
            raise InputError(f"{path}: {s.dtype} of shape {s.shape}; MAG240M's edge_index is integers of shape (2, E)")
        count(parts[0]), count(parts[2])
        relations.append((edge_type_str(tuple(parts)), path))
    if not relations:
        raise InputError(f"{processed}: no SRC___REL___DST/edge_index.npy directories; MAG240M's processed "
                         "layout has paper___cites___paper and others")
    n_paper = count("paper")
    feat = _need(os.path.join(processed, "paper", "node_feat.npy"), "the paper features (paper/node_feat.npy)")
    s = _header(feat)
    if len(s.shape) != 2 or s.shape[0] != n_paper or s.dtype.kind != "f":
        raise InputError(f"{feat}: {s.dtype} of shape {s.shape}, but meta.pt has {n_paper} papers; give float "
                         f"features of shape ({n_paper}, D)")
    label_path = os.path.join(processed, "paper", "node_label.npy")
    num_classes = meta.get("num_classes")
    split_path = _need(os.path.join(root, "split_dict.pt"), "the paper splits (split_dict.pt)")

    with Staging(out, overwrite) as stage:
        labels = _labels(stage, label_path, n_paper, num_classes) if os.path.isfile(label_path) else None
        split = stage_split_dict(stage, split_path, n_paper, "paper id", " is", "paper ids")
        rels = [build.Relation(name, unambiguous_edges(path, stage), "npy") for name, path in relations]
        staged = ({"paper": feat}, {"paper": labels}, {"paper": split or None})
        return build_typed(root, out, "mag240m", dict(sorted(types.items())), rels, staged, feature_dtype,
                           add_reverse=add_reverse, seed=seed, memory=memory, overwrite=overwrite, threads=threads,
                           progress=progress)


def _labels(stage: Staging, path: str, n: int, num_classes: Any) -> str:
    f, s = open_npy(path)
    with f:
        if s.shape not in ((n,), (n, 1)) or s.dtype.kind not in "fiu":
            raise InputError(f"{path}: {s.dtype} of shape {s.shape}; give one label per paper ({n})")
        limit = int(num_classes) if num_classes is not None else None
        with LabelWriter(stage.path("labels", path), path) as w:
            for c in s.chunks():
                c = c.reshape(-1).astype(np.float64)
                nan = np.isnan(c)
                bad = np.flatnonzero(~nan & ((c != np.floor(c)) | (c < 0) | (c >= (limit or np.inf))))
                if bad.size:
                    i = int(bad[0])
                    below = f" below num_classes {limit} (meta.pt)" if limit else ""
                    raise InputError(f"{path}: label {c[i]} of paper {w.rows + i} is not a class; give whole numbers "
                                     f">= 0{below}, NaN = unlabeled")
                w.write(np.where(nan, -1, c).astype(np.int64))
            return w.close()
