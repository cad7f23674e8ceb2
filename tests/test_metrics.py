"""ringgnn.inference.metrics: ranks, MRR, Hits@K and AUC against hand-worked tiny inputs and a brute-force
pairwise AUC."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringgnn.inference.metrics import KS, auc, link_scores, ranking_sums, ranks, scores_from_sums

# Three positives, two negatives each:
#   row 0: pos 3 vs {1, 2}: none above, none tied           -> rank 0.5 * (0 + 0) + 1 = 1
#   row 1: pos 1 vs {2, 3}: both above                      -> rank 0.5 * (2 + 2) + 1 = 3
#   row 2: pos 2 vs {2, 5}: 5 above, 2 tied (>= counts 2)   -> rank 0.5 * (1 + 2) + 1 = 2.5
POS = np.array([3.0, 1.0, 2.0])
NEG = np.array([[1.0, 2.0], [2.0, 3.0], [2.0, 5.0]])


def test_ranks_by_hand():
    np.testing.assert_array_equal(ranks(POS, NEG), [1.0, 3.0, 2.5])
    assert ranks(POS, NEG).dtype == np.float64


def test_ranking_sums_and_scores_by_hand():
    # n = 3; sum 1/rank = 1 + 1/3 + 1/2.5 = 1 + 0.3333... + 0.4 = 1.7333...
    # hits@1: ranks <= 1 -> row 0 only = 1; hits@2: still 1 (2.5 > 2); hits@3: all 3.
    sums = ranking_sums(POS, NEG, ks=(1, 2, 3))
    assert sums == pytest.approx([3.0, 1 + 1 / 3 + 0.4, 1.0, 1.0, 3.0])
    mrr, hits = scores_from_sums(sums, ks=(1, 2, 3))
    assert mrr == pytest.approx((1 + 1 / 3 + 0.4) / 3)  # 0.57777...
    assert hits == pytest.approx({1: 1 / 3, 2: 1 / 3, 3: 1.0})


def test_auc_by_hand():
    # Positives {3, 1, 2} against the pooled negatives {1, 2, 2, 3, 2, 5}: 3 * 6 = 18 pairs.
    #   pos 3: beats 1, 2, 2, 2 (4), ties 3 (0.5), loses to 5     -> 4.5
    #   pos 1: beats none, ties 1 (0.5)                           -> 0.5
    #   pos 2: beats 1 (1), ties 2, 2, 2 (1.5)                    -> 2.5
    # AUC = (4.5 + 0.5 + 2.5) / 18 = 7.5 / 18
    assert auc(POS, NEG) == pytest.approx(7.5 / 18)


def test_link_scores_by_hand():
    s = link_scores(POS, NEG, ks=(1, 2, 3))
    assert set(s) == {"auc", "mrr", "hits"}
    assert s["auc"] == pytest.approx(7.5 / 18)
    assert s["mrr"] == pytest.approx((1 + 1 / 3 + 0.4) / 3)
    assert s["hits"] == pytest.approx({1: 1 / 3, 2: 1 / 3, 3: 1.0})


def test_default_ks():
    assert KS == (1, 3, 10, 20, 50, 100)
    s = link_scores(POS, NEG)
    # Ranks 1, 3 and 2.5 (see above): Hits@1 is 1/3, and with 2 negatives every rank is <= 3.
    assert s["hits"] == pytest.approx({1: 1 / 3, 3: 1.0, 10: 1.0, 20: 1.0, 50: 1.0, 100: 1.0})


def test_default_ks_hold_every_k_ogb_reports():
    """OGB's link Evaluator reports, per dataset (ogb/linkproppred/master.csv), Hits@K of one K
    (ddi 20, collab 50, ppa 100) or MRR with Hits@1, 3 and 10: every one is a default K. The
    table is read as a file: importing ``ogb`` starts a thread that asks PyPI for its version."""
    import csv
    import importlib.util
    import os

    spec = importlib.util.find_spec("ogb")
    if spec is None:
        pytest.skip("ogb is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "linkproppred", "master.csv")
    with open(path) as f:
        rows = {r[0]: r[1:] for r in csv.reader(f)}
    metrics = dict(zip(rows[""], rows["eval metric"]))
    assert metrics["ogbl-ddi"] == "hits@20"
    wanted = set()
    for m in metrics.values():
        if m.startswith("hits@"):
            wanted.add(int(m[5:]))
        elif m == "mrr":
            wanted |= {1, 3, 10}  # Evaluator._eval_mrr's hits@1_list, hits@3_list, hits@10_list
    assert wanted == {1, 3, 10, 20, 50, 100} and wanted <= set(KS)


def test_ogb_tie_rule_is_the_mean_of_optimistic_and_pessimistic():
    # pos 1 vs {1, 1, 0, 2}: 1 strictly above (2), 3 at or above (1, 1, 2).
    # Optimistic rank 1 + 1 = 2, pessimistic 1 + 3 = 4, OGB's rank their mean 3.
    assert ranks(np.array([1.0]), np.array([[1.0, 1.0, 0.0, 2.0]]))[0] == 3.0


def test_all_tied_gives_the_middle_rank_not_the_first():
    # A constant model: every one of K = 4 negatives ties -> rank 0.5 * (0 + 4) + 1 = 3 = K/2 + 1.
    pos = np.zeros(2)
    neg = np.zeros((2, 4))
    np.testing.assert_array_equal(ranks(pos, neg), [3.0, 3.0])
    assert auc(pos, neg) == 0.5
    mrr, hits = scores_from_sums(ranking_sums(pos, neg, ks=(2, 3)), ks=(2, 3))
    assert mrr == pytest.approx(1 / 3)
    assert hits == {2: 0.0, 3: 1.0}


def test_one_negative_per_positive():
    # K = 1: pos 1 vs 0 -> rank 1; pos 0 vs 1 -> rank 2; pos 5 vs 5 -> tie -> 0.5 * (0 + 1) + 1 = 1.5.
    pos = np.array([1.0, 0.0, 5.0])
    neg = np.array([[0.0], [1.0], [5.0]])
    np.testing.assert_array_equal(ranks(pos, neg), [1.0, 2.0, 1.5])
    # Pooled AUC, 3 * 3 = 9 pairs against {0, 1, 5}: pos 1 -> 1 + 0.5; pos 0 -> 0.5;
    # pos 5 -> 2 + 0.5. (1.5 + 0.5 + 2.5) / 9 = 0.5.
    assert auc(pos, neg) == pytest.approx(4.5 / 9)


def test_integer_scores_and_mixed_dtypes():
    # Heuristic scores (common-neighbor counts) are integers; the float negatives are compared exactly.
    np.testing.assert_array_equal(ranks(np.array([2, 0]), np.array([[1, 2, 3], [0, 0, 0]])), [2.5, 2.5])
    # pos {1, 2} vs neg {1.5}: 2 beats it, 1 does not -> 1 / 2.
    assert auc(np.array([1, 2]), np.array([1.5])) == 0.5


def test_perfect_and_reversed_auc():
    assert auc(np.array([2.0, 3.0]), np.array([[0.0, 1.0], [1.0, 1.5]])) == 1.0
    assert auc(np.array([0.0, -1.0]), np.array([[0.5], [2.0]])) == 0.0


def test_sums_add_across_shards():
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 50).astype(float)
    neg = rng.integers(0, 5, (50, 7)).astype(float)
    whole = ranking_sums(pos, neg)
    parts = np.add(ranking_sums(pos[:20], neg[:20]), ranking_sums(pos[20:], neg[20:]))
    assert parts == pytest.approx(whole)


def brute_auc(pos, neg) -> float:
    pos = np.asarray(pos, dtype=float).ravel()
    neg = np.asarray(neg, dtype=float).ravel()
    wins = sum((1.0 if p > q else 0.5 if p == q else 0.0) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=30),
    st.lists(st.integers(-3, 3), min_size=1, max_size=30),
)
def test_auc_matches_pairwise_count_with_ties(pos, neg):
    # Scores from 7 values: ties are the common case, not the exception.
    assert auc(np.array(pos, dtype=float), np.array(neg, dtype=float)) == pytest.approx(brute_auc(pos, neg), abs=1e-12)


def test_auc_matches_pairwise_count_random_floats():
    rng = np.random.default_rng(1)
    pos = np.round(rng.normal(0.5, 1.0, 300), 1)  # rounded: many ties
    neg = np.round(rng.normal(0.0, 1.0, (300, 5)), 1)
    assert auc(pos, neg) == pytest.approx(brute_auc(pos, neg), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_ranks_match_the_definition(data):
    n = data.draw(st.integers(1, 8))
    k = data.draw(st.integers(1, 6))
    vals = st.integers(0, 3)
    pos = np.array(data.draw(st.lists(vals, min_size=n, max_size=n)), dtype=float)
    neg = np.array(data.draw(st.lists(st.lists(vals, min_size=k, max_size=k), min_size=n, max_size=n)), dtype=float)
    r = ranks(pos, neg)
    for i in range(n):
        above = sum(q > pos[i] for q in neg[i])
        tied = sum(q == pos[i] for q in neg[i])
        assert r[i] == 1 + above + tied / 2
        assert 1 <= r[i] <= k + 1


def test_errors():
    with pytest.raises(ValueError, match="AUC needs positive and negative"):
        auc(np.array([]), np.array([1.0]))
    with pytest.raises(ValueError, match="AUC needs positive and negative"):
        auc(np.array([1.0]), np.zeros((1, 0)))
    with pytest.raises(ValueError, match="shape"):
        ranks(np.array([1.0, 2.0]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="shape"):
        ranks(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="NaN"):
        ranks(np.array([math.nan]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="NaN"):
        auc(np.array([1.0]), np.array([math.nan]))
    with pytest.raises(ValueError, match="numeric"):
        ranks(np.array(["a"]), np.array([["b"]]))
    with pytest.raises(ValueError, match="expected 8 sums"):
        scores_from_sums([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="no positive pairs"):
        scores_from_sums([0.0] * (2 + len(KS)))
    with pytest.raises(ValueError, match="no positive pairs"):
        link_scores(np.zeros(0), np.zeros((0, 3)))
