"""OGB link property prediction directories (``ogbl-*``): the graph of ``raw/`` (as for
:mod:`.ogb`) and the positive edges of ``split/SCHEME/{train,valid,test}.pt`` (or one
``split_dict.pt`` of such dictionaries, as ``DatasetSaver`` writes it) become a dataset with edge
splits (``docs/FORMAT.md`` "Edge splits"): ``valid`` -> ``val`` and ``test`` are held out of the
graph, ``train`` is every pair left in it. :func:`ringgnn.importers.ogb.convert_ogb` calls
:func:`convert` when the split files hold edge dictionaries.

A split's positives are ``edge`` ((n, 2) pairs) or ``source_node``/``target_node`` (ogbl-citation2).
OGB's graph (``raw/edge.csv.gz`` / ``data.npz``) is its training graph, without the valid and test
edges, while ringgnn's builder holds out pairs *of its input*: the input staged for the builder is
the raw edges followed by the held-out positives, all of whose copies then leave the graph (a
valid pair that also occurs among the training edges, as repeated collaborations in
ogbl-collab do, leaves the training graph too).

Not yet: OGB's own negatives (``edge_neg``, ``target_node_neg``) are not stored; the builder
draws ``link_negatives`` per held-out pair instead (a warning says so). ogbl-citation2's per-pair
negatives fit the stored layout but the builder has no input for given negatives; ogbl-collab/ppa/
ddi's ``edge_neg`` are pairs shared by all positives, which the format has no place for.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._core import InputError
from ._stage import NpyWriter, Staging, check_ids

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")


def is_link(split_dir: Optional[str]) -> bool:
    """Whether ``split_dir`` holds link prediction splits (``train.pt`` ... files)."""
    return split_dir is not None and any(os.path.isfile(os.path.join(split_dir, f"{s}.pt")) for s in SPLITS)


def load_splits(split_dir: str) -> Dict[str, Tuple[Dict[str, Any], str]]:
    """split name -> (its dictionary, where it came from)."""
    from .ogb import load_pt, load_split_dict

    one = os.path.join(split_dir, "split_dict.pt")
    if os.path.isfile(one) and not is_link(split_dir):
        d = load_split_dict(one)
        return {k: (v, f"{one}: '{k}'") for k, v in d.items()}
    out = {}
    for s in SPLITS:
        path = os.path.join(split_dir, f"{s}.pt")
        if not os.path.isfile(path):
            raise FileNotFoundError(2, f"no such file: split scheme {split_dir} needs {', '.join(SPLITS)} "
                                    "(.pt dictionaries of edges)", path)
        out[s] = (load_pt(path, "OGB's link splits are dictionaries of edge tensors"), path)
    return out


def _array(v: Any) -> np.ndarray:
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def pairs(d: Any, where: str, n: int) -> np.ndarray:
    """The positive (src, dst) pairs of one split dictionary, (m, 2) int64, ids checked."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: a {type(d).__name__}, not a dictionary of edges; OGB's link splits map 'edge' "
                         "(or 'source_node'/'target_node') to tensors")
    if "edge" in d:
        e = _array(d["edge"])
        if e.ndim != 2 or e.shape[1] != 2 or (e.size and e.dtype.kind not in "iu"):
            raise InputError(f"{where}: 'edge' is {e.dtype} of shape {e.shape}; OGB's edges are (n, 2) node ids")
    elif "source_node" in d and "target_node" in d:
        s, t = _array(d["source_node"]), _array(d["target_node"])
        if s.ndim != 1 or s.shape != t.shape or (s.size and (s.dtype.kind not in "iu" or t.dtype.kind not in "iu")):
            raise InputError(f"{where}: 'source_node' {s.dtype}{s.shape} and 'target_node' {t.dtype}{t.shape}; give "
                             "two 1-D arrays of node ids of one length")
        e = np.stack([s, t], axis=1)
    else:
        raise InputError(f"{where}: no 'edge' and no 'source_node'/'target_node' (it has: {', '.join(map(str, d))}); "
                         "OGB's link splits hold their positive edges there")
    e = e.astype(np.int64)
    check_ids(e.reshape(-1), n, lambda i: f"{where}: pair {i // 2}", "node id")
    return e


def convert(layout: Any, stager: Any, stage: Staging, n: int, out: Any, *, link_negatives: int,
            build_args: Dict[str, Any]) -> Dict[str, Any]:
    """Build the link dataset (see the module); ``stager`` is :mod:`.ogb`'s, for the graph."""
    from .. import build

    splits = load_splits(layout.split_dir)
    held: Dict[str, str] = {}
    extra = []
    seen: Dict[Tuple[int, int], str] = {}
    for name, (d, where) in splits.items():
        negs = [k for k in ("edge_neg", "target_node_neg") if isinstance(d, dict) and k in d]
        if negs:
            log.warning("%s: OGB's own negatives (%s) are not stored yet; ringgnn draws %d per held-out pair "
                        "(--link-negatives)", where, negs[0], link_negatives)
        p = pairs(d, where, n)
        if name == "train":
            continue  # the raw graph's edges: every pair left in the graph is the train split
        _check(p, where, seen, build_args.get("undirected", False))
        rename = "val" if name == "valid" else name.lower().replace("-", "_")
        with NpyWriter(stage.path(f"link-{rename}"), np.int64, (2,)) as w:
            w.write(p)
            held[rename] = w.close()
        extra.append(p)
    edges = _graph_with(stager, stage, n, extra)
    return build.convert(edges, out, format="npy", num_nodes=n, link_split=held, link_negatives=link_negatives,
                         features=stager.features(n), **build_args)


def _check(p: np.ndarray, where: str, seen: Dict[Tuple[int, int], str], undirected: bool) -> None:
    """What the builder refuses of held-out pairs, named by the OGB file: a self loop, a pair
    twice in a split or in two splits (with ``undirected``, (u, v) and (v, u) are one pair)."""
    loops = np.flatnonzero(p[:, 0] == p[:, 1])
    if loops.size:
        raise InputError(f"{where}: pair {loops[0]} is the self loop ({p[loops[0], 0]}, {p[loops[0], 0]}); a "
                         "held-out pair joins two different nodes")
    keys = np.sort(p, axis=1) if undirected else p
    mine: Dict[Tuple[int, int], int] = {}
    for i, (a, b) in enumerate(keys.tolist()):  # held-out splits are small (OGB's: up to ~1M pairs)
        if (a, b) in mine:
            raise InputError(f"{where}: pairs {mine[(a, b)]} and {i} are both ({a}, {b}); list each pair once")
        if (a, b) in seen:
            raise InputError(f"{where}: pair {i} ({a}, {b}) is also in {seen[(a, b)]}; a pair belongs to one split")
        mine[(a, b)] = i
    seen.update({k: where for k in mine})


def _graph_with(stager: Any, stage: Staging, n: int, extra: list) -> str:
    """The raw graph's edges followed by ``extra`` pairs, as one (E, 2) ``.npy``."""
    from .ogb import _csv_floats

    with NpyWriter(stage.path("edges"), np.int64, (2,)) as w:
        if stager.npz is None:
            path = stager.layout.edge_csv
            for chunk in _csv_floats(path):
                if chunk.shape[1] < 2 or not np.all(chunk[:, :2] == np.floor(chunk[:, :2])):
                    raise InputError(f"{path}: not 'src,dst' node ids per line")
                e = chunk[:, :2].astype(np.int64)
                first = w.rows
                check_ids(e.reshape(-1), n, lambda i: f"{path}: line {first + i // 2 + 1}", "node id")
                w.write(e)
        else:
            staged, _ = stager.edges(n)  # (2, E) or (E, 2), checked
            a = np.load(staged, mmap_mode="r")
            rows = a if a.shape[1] == 2 else a.T  # read as the builder reads it: (E, 2) and (2, 2) are pairs
            step = 1 << 20
            for i in range(0, rows.shape[0], step):
                w.write(np.ascontiguousarray(rows[i:i + step]))
            del a, rows
        for p in extra:
            w.write(p)
        return w.close()
