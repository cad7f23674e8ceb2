"""OGB link property prediction directories (``ogbl-*``): the graph of ``raw/`` and the split
files' positives as a dataset with edge splits, OGB's negatives stored as given."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._core import InputError
from ..data import build
from ._ogb_io import SPLITS, array, load_pt, load_split_dict, need, stage_ids
from ._stage import Staging, check_ids, split_names


def is_link(split_dir: Optional[str]) -> bool:
    return split_dir is not None and any(os.path.isfile(os.path.join(split_dir, f"{s}.pt")) for s in SPLITS)


KG_REFUSAL = ("a knowledge-graph completion split (head/relation/tail triples, as ogbl-wikikg2 and ogbl-biokg "
              "give): ringgnn does not convert these yet (their head_neg negatives replace the source, which "
              "the format has no place for, and link training scores one relation at a time)")


def load_splits(split_dir: str) -> Dict[str, Tuple[Dict[str, Any], str]]:
    one = os.path.join(split_dir, "split_dict.pt")
    if os.path.isfile(one) and not is_link(split_dir):
        d = load_split_dict(one)
        return {k: (v, f"{one}: '{k}'") for k, v in d.items()}
    out = {}
    for s in SPLITS:
        path = need(os.path.join(split_dir, f"{s}.pt"), f"split scheme {split_dir} needs {', '.join(SPLITS)} (.pt "
                    "dictionaries of edges)")
        out[s] = (load_pt(path, "OGB's link splits are dictionaries of edge tensors"), path)
    return out


def pairs(d: Any, where: str, n: int) -> np.ndarray:
    """The positive (src, dst) pairs of one split dictionary, (m, 2) int64, ids checked."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: a {type(d).__name__}, not a dictionary of edges; OGB's link splits map 'edge' "
                         "(or 'source_node'/'target_node') to tensors")
    if {"head", "relation", "tail"} <= set(d):
        raise InputError(f"{where}: {KG_REFUSAL}")
    if "edge" in d:
        e = array(d["edge"])
        if e.ndim != 2 or e.shape[1] != 2 or (e.size and e.dtype.kind not in "iu"):
            raise InputError(f"{where}: 'edge' is {e.dtype} of shape {e.shape}; OGB's edges are (n, 2) node ids")
    elif "source_node" in d and "target_node" in d:
        s, t = array(d["source_node"]), array(d["target_node"])
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
    splits = load_splits(layout.split_dir)
    undirected = bool(build_args.get("undirected", False))
    held: Dict[str, str] = {}
    given: Dict[str, str] = {}
    shared: Dict[str, str] = {}
    seen: Dict[Tuple[int, int], str] = {}
    renamed = split_names(splits, layout.split_dir)
    for name, (d, where) in splits.items():
        p = pairs(d, where, n)
        if name == "train":
            continue  # the raw graph's edges: every pair left in the graph is the train split
        _check(p, where, seen, undirected)
        rename = renamed[name]
        neg = _negatives(d, where, p, n)
        order = np.lexsort((p[:, 0], p[:, 1]))  # the stored order: ascending (dst, src)
        held[rename] = stage_ids(stage, p[order], f"link-{rename}", where)
        if "edge_neg" in d:
            shared[rename] = stage_ids(stage, _shared(d["edge_neg"], where, n), f"shared-negatives-{rename}",
                                       f"{where}: 'edge_neg'")
        if neg is not None:
            given[rename] = stage_ids(stage, neg[order], f"negatives-{rename}", where)
    edges, fmt = stager.edges(n)
    return build.convert(edges, out, format=fmt, num_nodes=n, link_split=held, link_negatives=link_negatives,
                         given_negatives=given, shared_negatives=shared, absent_ok=True, features=stager.features(n),
                         quote_input=False, **build_args)


def _negatives(d: Dict[str, Any], where: str, p: np.ndarray, n: int) -> Optional[np.ndarray]:
    if "target_node_neg" in d:
        neg = array(d["target_node_neg"])
        if neg.ndim == 1:
            neg = neg.reshape(-1, 1)
        if neg.ndim != 2 or neg.shape[0] != len(p) or (neg.size and neg.dtype.kind not in "iu"):
            raise InputError(f"{where}: 'target_node_neg' is {neg.dtype} of shape {neg.shape}; give ({len(p)}, K) "
                             "node ids, a row per positive")
        neg = neg.astype(np.int64)
        check_ids(neg.reshape(-1), n, lambda i: f"{where}: target_node_neg[{i // neg.shape[1]}]", "node id")
        return neg  # with undirected too: a split of given negatives keeps its pairs' direction
    return None


def _shared(v: Any, where: str, n: int) -> np.ndarray:
    """A split's ``edge_neg``: (m, 2) negative pairs shared by all its positives, ids checked."""
    e = array(v)
    if e.ndim != 2 or e.shape[1] != 2 or len(e) == 0 or e.dtype.kind not in "iu":
        raise InputError(f"{where}: 'edge_neg' is {e.dtype} of shape {e.shape}; OGB's negative edges are (m >= 1, 2) "
                         "node ids")
    e = e.astype(np.int64)
    check_ids(e.reshape(-1), n, lambda i: f"{where}: edge_neg[{i // 2}]", "node id")
    return e


def _check(p: np.ndarray, where: str, seen: Dict[Tuple[int, int], str], undirected: bool) -> None:
    """What the builder refuses of held-out pairs (a self loop, a pair twice), named by the OGB file."""
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
