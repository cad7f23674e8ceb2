"""ringgnn.inference.metrics with negatives shared by all positives (OGB's ``edge_neg`` protocol of
ogbl-collab/ppa/ddi): hand-worked values, OGB's Evaluator rule re-stated with torch.topk, and
the sums adding across pieces of the positives."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ringgnn.inference.metrics import scores_from_sums, shared_link_scores, shared_ranking_sums

# Four positives against four shared negatives {2, 3, 1, 2.5} (sorted: 1, 2, 2.5, 3):
#   Hits@1: above the highest negative 3        -> only 4          = 1/4
#   Hits@2: above the 2nd highest 2.5           -> 3 and 4         = 2/4
#   Hits@3: above the 3rd highest 2 (strictly)  -> 3 and 4, not 2  = 2/4
#   Hits@5: fewer than 5 negatives              -> every positive  = 1 (OGB's rule)
#   ranks (ties half): 3 -> 0.5 * (0 + 1) + 1 = 1.5; 1 -> 0.5 * (3 + 4) + 1 = 4.5;
#                      2 -> 0.5 * (2 + 3) + 1 = 3.5; 4 -> 1
#   AUC: 3 beats 1, 2, 2.5 and ties 3 (3.5); 1 ties 1 (0.5); 2 beats 1, ties 2 (1.5); 4 beats all (4)
#        -> 9.5 / 16
POS = np.array([3.0, 1.0, 2.0, 4.0])
NEG = np.array([2.0, 3.0, 1.0, 2.5])


def test_shared_sums_and_scores_by_hand():
    sums = shared_ranking_sums(POS, NEG, ks=(1, 2, 3, 5))
    rr = 1 / 1.5 + 1 / 4.5 + 1 / 3.5 + 1
    assert sums == pytest.approx([4.0, rr, 1.0, 2.0, 2.0, 4.0])
    s = shared_link_scores(POS, NEG, ks=(1, 2, 3, 5))
    assert s["auc"] == pytest.approx(9.5 / 16)
    assert s["mrr"] == pytest.approx(rr / 4)
    assert s["hits"] == pytest.approx({1: 0.25, 2: 0.5, 3: 0.5, 5: 1.0})


def ogb_hits(pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    """OGB's ``Evaluator._eval_hits`` (ogb/linkproppred/evaluate.py), as it computes it."""
    pos_t, neg_t = torch.from_numpy(pos), torch.from_numpy(neg)
    if len(neg_t) < k:
        return 1.0
    kth = torch.topk(neg_t, k)[0][-1]
    return float(torch.sum(pos_t > kth).cpu()) / len(pos_t)


SCORES = st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=30)  # small range: many ties


@settings(max_examples=200, deadline=None)
@given(SCORES, SCORES, st.integers(1, 40))
def test_hits_are_ogb_evaluators(pos, neg, k):
    pos, neg = np.array(pos), np.array(neg)
    _, hits = scores_from_sums(shared_ranking_sums(pos, neg, ks=(k,)), ks=(k,))
    assert hits[k] == pytest.approx(ogb_hits(pos, neg, k))


@settings(max_examples=100, deadline=None)
@given(SCORES, SCORES, st.integers(1, 5))
def test_sums_add_across_pieces_of_the_positives(pos, neg, pieces):
    pos, neg = np.array(pos), np.array(neg)
    whole = shared_ranking_sums(pos, neg, ks=(1, 3))
    parts = [shared_ranking_sums(pos[i::pieces], neg, ks=(1, 3)) for i in range(pieces)]
    assert np.sum(parts, axis=0) == pytest.approx(whole)


def test_mrr_ranks_match_the_definition():
    rng = np.random.default_rng(3)
    pos, neg = rng.integers(0, 4, 50).astype(float), rng.integers(0, 4, 20).astype(float)
    want = [0.5 * ((neg > p).sum() + (neg >= p).sum()) + 1 for p in pos]
    assert shared_ranking_sums(pos, neg, ks=(1,))[1] == pytest.approx(sum(1 / r for r in want))


def test_errors():
    with pytest.raises(ValueError, match=r"shared neg of shape \(m >= 1,\)"):
        shared_ranking_sums(POS, np.zeros(0))
    with pytest.raises(ValueError, match=r"shared neg of shape"):
        shared_ranking_sums(POS, NEG.reshape(2, 2))
    with pytest.raises(ValueError, match="NaN"):
        shared_ranking_sums(POS, np.array([np.nan, 1.0]))
