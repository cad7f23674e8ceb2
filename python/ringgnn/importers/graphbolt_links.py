"""GraphBolt link-prediction tasks (both layouts, seeds and node_pairs) as edge splits of the
relations they name."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._excerpt import quoted
from ..data.schema import parse_edge_type

log = logging.getLogger(__name__)

PAIR_NAMES = ("seeds", "node_pairs")
NEGATIVE_NAMES = ("negative_dsts", "negative_srcs")
GROUP_NAMES = ("labels", "indexes")


@dataclass
class RelationSplits:
    pairs: Dict[str, str] = field(default_factory=dict)
    negatives: Dict[str, str] = field(default_factory=dict)


def link_splits(meta: Any, task: Any, stage: Any, load: Any) -> Dict[str, RelationSplits]:
    """Per relation, the staged files of ``task``'s sets; errors name the yaml field."""
    r = stage.r
    relations = {t for t, _ in meta.edges}
    out: Dict[str, RelationSplits] = {}
    for split, entries in task.sets.items():
        seen = set()
        for s in entries:
            if s.type is None or ":" not in s.type or s.type not in relations:
                what = "missing" if s.type is None else f"{quoted(s.type)} is not an edge type of graph.edges"
                raise r.error(f"{s.field}.type", f"{task} is a link-prediction task, but this set's type is {what}",
                              f"name one of {', '.join(sorted(t for t in relations if t))}")
            if s.type in seen:
                raise r.error(s.field, f"a second {split} entry for {quoted(s.type)}",
                              "give each edge type once per set")
            seen.add(s.type)
            src_t, _, dst_t = parse_edge_type(s.type)
            pos, neg = _read_set(meta, s, split, load, r, (meta.nodes[src_t], meta.nodes[dst_t]), src_t == dst_t)
            mine = out.setdefault(s.type, RelationSplits())
            order = np.lexsort((pos[:, 0], pos[:, 1]))  # the builder stores pairs by (dst, src)
            mine.pairs[split] = stage.copy(np.ascontiguousarray(pos[order]), s.field)
            if neg is not None:
                mine.negatives[split] = stage.copy(np.ascontiguousarray(neg[order]), s.field)
    for rel, splits in out.items():
        if not set(splits.pairs) - {"train"}:
            raise r.error(str(task), f"a link-prediction task with no validation_set or test_set for {quoted(rel)}",
                          "give held-out pairs to evaluate on (or remove the task from a copy of the yaml)")
    return out


def _read_set(meta, s, split: str, load, r, counts: Tuple[int, int], same_type: bool):
    """(positives (n, 2), negatives (n, K) or None) of one set entry."""
    arrays: Dict[str, Tuple[Any, np.ndarray]] = {}
    for f in s.data:
        if f.name not in PAIR_NAMES + NEGATIVE_NAMES + GROUP_NAMES:
            log.warning("%s: skipping %s ('%s'): a link-prediction set takes %s", meta.path, f.field, f.name,
                        ", ".join(PAIR_NAMES + NEGATIVE_NAMES + GROUP_NAMES))
            continue
        if f.name in arrays:
            raise r.error(f.field, f"a second {quoted(f.name)}", "give each array once")
        arrays[f.name] = (f, load(meta, f))
    names = [n for n in PAIR_NAMES if n in arrays]
    if len(names) != 1:
        raise r.error(f"{s.field}.data", "no entry named 'seeds' (or 'node_pairs')" if not names else
                      "both 'seeds' and 'node_pairs'", "give the (N, 2) node pairs once, named seeds")
    pf, pairs = arrays[names[0]]
    if pairs.ndim != 2 or pairs.shape[1] != 2 or (pairs.size and not np.issubdtype(pairs.dtype, np.integer)):
        raise r.error(pf.field, f"{pf.path} holds {pairs.dtype} of shape {pairs.shape}",
                      "give integer node pairs of shape (N, 2): column 0 sources, column 1 destinations")
    pairs = np.asarray(pairs, dtype=np.int64)
    check_ids(r, pf, pairs[:, 0], counts[0], "source")
    check_ids(r, pf, pairs[:, 1], counts[1], "destination")
    if "negative_srcs" in arrays:
        raise r.error(arrays["negative_srcs"][0].field, "negative sources are not supported",
                      "ringgnn stores negative destinations per positive (negative_dsts)")
    labels = _vector(r, arrays.get("labels"), len(pairs), "label")
    indexes = _vector(r, arrays.get("indexes"), len(pairs), "index")
    if labels is not None:
        if not np.isin(labels, (0, 1)).all():
            bad = np.flatnonzero(~np.isin(labels, (0, 1)))[0]
            raise r.error(arrays["labels"][0].field, f"label {labels[bad]} (entry {bad})", "give 1 (positive) or 0")
        labels = labels.astype(np.int64)
    if split == "train":
        pos = pairs if labels is None else pairs[labels == 1]
        return _drop_loops(meta, pf, pos, None, same_type)
    if "negative_dsts" in arrays:
        nf, neg = arrays["negative_dsts"]
        if labels is not None or indexes is not None:
            raise r.error(nf.field, "negative_dsts given with labels/indexes", "use one layout: seeds with labels "
                          "and indexes, or node_pairs with negative_dsts")
        if neg.ndim != 2 or neg.shape[0] != len(pairs) or (neg.size and not np.issubdtype(neg.dtype, np.integer)):
            raise r.error(nf.field, f"{nf.path} holds {neg.dtype} of shape {neg.shape}",
                          f"give ({len(pairs)}, K) integer negative destinations, one row per pair")
        neg = np.asarray(neg, dtype=np.int64)
        check_ids(r, nf, neg.ravel(), counts[1], "negative destination")
        return _drop_loops(meta, pf, pairs, neg, same_type)
    if labels is None and indexes is None:
        return _drop_loops(meta, pf, pairs, None, same_type)
    if labels is None or indexes is None:
        have, want = ("labels", "indexes") if labels is not None else ("indexes", "labels")
        raise r.error(f"{s.field}.data", f"{quoted(have)} without {quoted(want)}",
                      "give both: labels 1/0 and indexes grouping each positive with its negatives")
    return _group(r, s, pf, pairs, labels, indexes, meta, same_type)


def _group(r, s, pf, pairs, labels, indexes, meta, same_type):
    """Positives and their negatives' destinations from GraphBolt's seeds/labels/indexes."""
    where = f"{s.field}.data"
    pos_rows = np.flatnonzero(labels == 1)
    neg_rows = np.flatnonzero(labels == 0)
    pos_idx = indexes[pos_rows]
    uniq, counts = np.unique(pos_idx, return_counts=True)
    if (counts > 1).any():
        raise r.error(where, f"index {uniq[counts > 1][0]} has more than one positive (label 1)",
                      "give each positive its own index")
    order = np.argsort(pos_idx, kind="stable")
    slot = np.searchsorted(pos_idx[order], indexes[neg_rows])
    slot_ok = (slot < len(order)) & (pos_idx[order][np.minimum(slot, max(len(order) - 1, 0))] == indexes[neg_rows]) \
        if len(order) else np.zeros(len(neg_rows), dtype=bool)
    if not slot_ok.all():
        bad = neg_rows[np.flatnonzero(~slot_ok)[0]]
        raise r.error(where, f"negative row {bad} has index {indexes[bad]}, which no positive has",
                      "every negative shares its positive's index")
    owner = pos_rows[order[slot]]  # the positive row of each negative row
    per = np.bincount(np.searchsorted(pos_rows, owner), minlength=len(pos_rows))
    if len(pos_rows) and (per != per[0]).any():
        i = int(np.flatnonzero(per != per[0])[0])
        raise r.error(where, f"the positive of row {pos_rows[i]} has {per[i]} negatives, the one of row {pos_rows[0]} "
                      f"{per[0]}", "give every positive the same number of negatives (ringgnn stores (n, K))")
    wrong = np.flatnonzero(pairs[neg_rows, 0] != pairs[owner, 0])
    if wrong.size:
        bad = neg_rows[wrong[0]]
        raise r.error(where, f"negative row {bad} has source {pairs[bad, 0]}, its positive {pairs[owner[wrong[0]], 0]}",
                      "ringgnn stores negative destinations: a negative keeps its positive's source")
    k = int(per[0]) if len(pos_rows) else 0
    by_owner = np.argsort(np.searchsorted(pos_rows, owner), kind="stable")  # negatives grouped, in file order
    neg = pairs[neg_rows[by_owner], 1].reshape(len(pos_rows), k) if k else None
    return _drop_loops(meta, pf, pairs[pos_rows], neg, same_type)


def _drop_loops(meta, pf, pos, neg, same_type):
    if not same_type:
        return pos, neg
    loop = pos[:, 0] == pos[:, 1]
    if loop.any():
        log.warning("%s: %s: dropping %d self loops: they are never link-prediction pairs", meta.path, pf.field,
                    int(loop.sum()))
        pos = pos[~loop]
        neg = None if neg is None else neg[~loop]
    return pos, neg


def _vector(r, entry, n: int, what: str) -> Optional[np.ndarray]:
    if entry is None:
        return None
    f, a = entry
    if a.ndim != 1 or a.shape[0] != n or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)
                                               or a.dtype == np.bool_):
        raise r.error(f.field, f"{f.path} holds {a.dtype} of shape {a.shape}", f"give one {what} per seed pair ({n})")
    if np.issubdtype(a.dtype, np.floating) and not np.array_equal(a, np.round(a)):
        raise r.error(f.field, f"{f.path} holds non-integer values", f"give integer {what}s")
    return np.asarray(a, dtype=np.int64)


def check_ids(r, f, ids: np.ndarray, num: int, what: str, owner: str = "its node type") -> None:
    """Refuse ids of file ``f`` outside ``[0, num)``; ``owner`` names the nodes they index."""
    bad = np.flatnonzero((ids < 0) | (ids >= num))
    if bad.size:
        raise r.error(f.field, f"{what} {ids[bad[0]]} (entry {bad[0]}) of {f.path} is out of range: {owner} has "
                      f"{num} nodes", "give ids 0 .. num-1")
