"""Link-prediction ranking metrics (MRR, Hits@K, AUC), pure numpy, OGB's protocols.

A positive pair is ranked against the ``K`` stored negatives of its row, ties counted half
above and half below (so equal scores give rank ``K / 2 + 1``); MRR is the mean of ``1 / rank``,
Hits@k the fraction with ``rank <= k``; AUC pools every positive against every negative (ties
1/2). Negatives shared by every positive (:func:`shared_ranking_sums`, OGB's ``edge_neg``): a
hit at k scores strictly above the k-th highest negative. :func:`ranking_sums` returns sums that
add across pieces; :func:`scores_from_sums` turns them into scores. NaN scores are refused."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

#: Every K that OGB's link ``Evaluator`` reports for some ogbl dataset.
KS: Tuple[int, ...] = (1, 3, 10, 20, 50, 100)


def _scores(name: str, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "fiub":
        raise ValueError(f"{name}: expected numeric scores, got dtype {x.dtype}")
    if x.dtype.kind == "f" and np.isnan(x).any():
        raise ValueError(f"{name}: {int(np.isnan(x).sum())} score(s) are NaN; check the model for divergence")
    return x


def ranks(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """The rank (float64, from 1) of each ``pos[i]`` (n,) among itself and ``neg[i]`` (n, K):
    ``0.5 * (#{neg > pos} + #{neg >= pos}) + 1``."""
    pos = _scores("pos", pos)
    neg = _scores("neg", neg)
    if pos.ndim != 1 or neg.ndim != 2 or neg.shape[0] != pos.shape[0]:
        raise ValueError(
            f"expected pos of shape (n,) and neg of shape (n, K), got {pos.shape} and {neg.shape}"
        )
    p = pos[:, None]
    above = np.count_nonzero(neg > p, axis=1)
    at_or_above = np.count_nonzero(neg >= p, axis=1)
    return 0.5 * (above + at_or_above).astype(np.float64) + 1.0


def ranking_sums(pos: np.ndarray, neg: np.ndarray, ks: Sequence[int] = KS) -> List[float]:
    """``[n, sum(1 / rank), hits@k count for each k in ks]``: sums that add element-wise across
    batches or ranks; :func:`scores_from_sums` makes the scores."""
    r = ranks(pos, neg)
    return [float(len(r)), float(np.sum(1.0 / r))] + [float(np.count_nonzero(r <= k)) for k in ks]


def scores_from_sums(sums: Sequence[float], ks: Sequence[int] = KS) -> Tuple[float, Dict[int, float]]:
    """``(mrr, {k: hits@k})`` from (added) :func:`ranking_sums`, hits as fractions."""
    if len(sums) != 2 + len(ks):
        raise ValueError(f"expected {2 + len(ks)} sums (n, sum 1/rank, one per k in {tuple(ks)}), got {len(sums)}")
    n = sums[0]
    if n <= 0:
        raise ValueError("no positive pairs were scored: MRR and Hits@K are undefined")
    return sums[1] / n, {int(k): sums[2 + i] / n for i, k in enumerate(ks)}


def auc(pos_scores: np.ndarray, neg_scores: np.ndarray) -> float:
    """Area under the ROC curve of all positive against all negative scores (ties 1/2),
    exact in O((a + b) log b)."""
    pos = _scores("pos_scores", pos_scores).ravel()
    neg = _scores("neg_scores", neg_scores).ravel()
    if pos.size == 0 or neg.size == 0:
        raise ValueError(
            f"AUC needs positive and negative scores, got {pos.size} positive and {neg.size} negative"
        )
    dt = np.result_type(pos.dtype, neg.dtype)
    neg = np.sort(neg.astype(dt, copy=False))
    pos = pos.astype(dt, copy=False)
    below = np.searchsorted(neg, pos, side="left").astype(np.int64)
    at_or_below = np.searchsorted(neg, pos, side="right").astype(np.int64)
    # Twice the win count (ties 1/2) stays an exact integer.
    twice_wins = int(below.sum()) + int(at_or_below.sum())
    return twice_wins / (2.0 * pos.size * neg.size)


def link_scores(pos: np.ndarray, neg: np.ndarray, ks: Sequence[int] = KS) -> Dict[str, object]:
    """``{"auc": ..., "mrr": ..., "hits": {k: fraction}}`` of positives ``pos`` (n,) against
    their negatives ``neg`` (n, K)."""
    mrr, hits = scores_from_sums(ranking_sums(pos, neg, ks), ks)
    return {"auc": auc(pos, neg), "mrr": mrr, "hits": hits}


def shared_ranking_sums(pos: np.ndarray, neg: np.ndarray, ks: Sequence[int] = KS) -> List[float]:
    """:func:`ranking_sums` of positives ``pos`` (n,) against negatives ``neg``
    (m,) shared by all: rank among all ``m``, a hit at ``k`` strictly above the ``k``-th highest
    negative (every positive with fewer than ``k`` negatives)."""
    pos = _scores("pos", pos)
    neg = _scores("neg", neg)
    if pos.ndim != 1 or neg.ndim != 1 or neg.size == 0:
        raise ValueError(f"expected pos of shape (n,) and shared neg of shape (m >= 1,), got {pos.shape} and "
                         f"{neg.shape}")
    dt = np.result_type(pos.dtype, neg.dtype)
    s = np.sort(neg.astype(dt, copy=False))
    p = pos.astype(dt, copy=False)
    above = len(s) - np.searchsorted(s, p, side="right")
    at_or_above = len(s) - np.searchsorted(s, p, side="left")
    r = 0.5 * (above + at_or_above).astype(np.float64) + 1.0
    hits = [float(len(p)) if len(s) < k else float(np.count_nonzero(p > s[len(s) - k])) for k in ks]
    return [float(len(p)), float(np.sum(1.0 / r))] + hits


def shared_link_scores(pos: np.ndarray, neg: np.ndarray, ks: Sequence[int] = KS) -> Dict[str, object]:
    """:func:`link_scores` against negatives ``neg`` (m,) shared by all positives ``pos`` (n,)
    (:func:`shared_ranking_sums`); AUC pools every positive against every shared negative."""
    mrr, hits = scores_from_sums(shared_ranking_sums(pos, neg, ks), ks)
    return {"auc": auc(pos, neg), "mrr": mrr, "hits": hits}
