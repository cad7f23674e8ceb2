"""The Rust core's neighbor aggregation of layer-wise inference (``FeatureReader.aggregate``,
crates/ringgnn-features/src/aggregate.rs and fold.rs), checked directly: sums, GCN's weighted
sums, maxima and GAT's online softmax (through a transform of each piece) worked out by hand on
a tiny graph with a self loop, a duplicate edge and a node without in-edges; a numpy reference on
random graphs whatever the pieces, threads and windows; its errors. The inference tests
(tests/test_infer.py) check the whole layer against PyG through it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ringgnn
from ringgnn import _core
from ringgnn._core import InputError
from ringgnn.inference.graph import NeighborFile

X = np.array([[1, 0], [0, 1], [2, 2], [10, 20]], dtype=np.float32)
# src -> dst: 0->1, 2->1 twice (a duplicate), 1->1 (a self loop), 3->0, 1->2; node 3 has none.
EDGES = np.array([[0, 1], [2, 1], [2, 1], [1, 1], [3, 0], [1, 2]], dtype=np.int64)


def make(root: Path, edges: np.ndarray, x: np.ndarray, name: str = "g") -> Path:
    np.save(root / f"{name}-edges.npy", edges)
    np.save(root / f"{name}-x.npy", x)
    out = root / name
    ringgnn.convert(root / f"{name}-edges.npy", out, features=root / f"{name}-x.npy", num_nodes=len(x))
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make(tmp_path_factory.mktemp("agg"), EDGES, X)


def aggregate(path, a, b, dinv=None, lo=None, hi=None, acc=None, **kw):
    ds = ringgnn.Dataset.open(path)
    g = NeighborFile(ds)
    reader = _core.FeatureReader(str(path), backend=kw.pop("backend", "auto"))
    acc = np.zeros((b - a, reader.dim), dtype=np.float32) if acc is None else acc
    ip = g.indptr
    lo = int(ip[a]) if lo is None else lo
    hi = int(ip[b]) if hi is None else hi
    read = reader.aggregate(acc, a, ip[a:b + 1], lo, hi, g.path, np.dtype(g.dtype).itemsize, dinv, **kw)
    return acc, read, reader


def test_the_graph_is_stored_as_written(tiny):
    ds = ringgnn.Dataset.open(tiny)
    assert sorted(ds.neighbors(1).tolist()) == [0, 1, 2, 2]
    assert ds.neighbors(0).tolist() == [3] and ds.neighbors(2).tolist() == [1] and len(ds.neighbors(3)) == 0


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("piece_rows", [1, 2, 100])
def test_sums_by_hand(tiny, threads, piece_rows):
    acc, read, reader = aggregate(tiny, 0, 4, piece_rows=piece_rows, threads=threads)
    # dst 0: x3; dst 1: x0 + x2 + x2 + x1 (self loop and duplicate kept); dst 2: x1; dst 3: none.
    np.testing.assert_array_equal(acc, [[10, 20], [5, 5], [0, 1], [0, 0]])
    ds = ringgnn.Dataset.open(tiny)
    assert read["neighbor_bytes"] == 6 * np.dtype(NeighborFile(ds).dtype).itemsize
    assert read["rows"] == 4 and reader.stats()["distinct_rows"] == 4  # sources 0, 1, 2, 3, each read once
    phases = ("sources", "positions", "read_wait", "transform", "fold")
    assert all(read[p] >= 0 for p in phases) and read["transform"] == 0  # no transform given


@pytest.mark.parametrize("threads", [1, 3])
def test_gcn_weights_by_hand(tiny, threads):
    dinv = np.array([1, 0.5, 0.25, 2], dtype=np.float32)
    acc, _, _ = aggregate(tiny, 0, 4, dinv=dinv, piece_rows=1, threads=threads)
    # dst 0: x3 * 2 * 1; dst 1: x0 * 1 * 0.5 + 2 * x2 * 0.25 * 0.5 (the self loop dropped);
    # dst 2: x1 * 0.5 * 0.25.
    np.testing.assert_array_equal(acc, [[20, 40], [1, 0.5], [0, 0.125], [0, 0]])


def test_a_block_and_windows_of_a_hub_add_into_the_accumulator(tiny):
    ds = ringgnn.Dataset.open(tiny)
    lo, hi = (int(v) for v in ds.indptr()[1:3])  # node 1's four in-edges, in two windows
    acc = np.full((2, 2), 100, dtype=np.float32)
    aggregate(tiny, 1, 3, lo=lo, hi=lo + 2, acc=acc)
    aggregate(tiny, 1, 3, lo=lo + 2, hi=hi, acc=acc)
    np.testing.assert_array_equal(acc, [[105, 105], [100, 100]])  # node 2's edge not in a window
    acc, _, _ = aggregate(tiny, 1, 4)
    np.testing.assert_array_equal(acc, [[5, 5], [0, 1], [0, 0]])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("piece_rows", [1, 3])
def test_maxima_by_hand(tiny, threads, piece_rows):
    acc = np.full((4, 2), -np.inf, dtype=np.float32)
    aggregate(tiny, 0, 4, acc=acc, fold="max", piece_rows=piece_rows, threads=threads)
    # dst 0: x3; dst 1: max of x0, x2, x2, x1; dst 2: x1; dst 3: no in-edges, left at -inf.
    np.testing.assert_array_equal(acc, [[10, 20], [2, 2], [0, 1], [-np.inf, -np.inf]])


SCALE = np.array([[1, 0], [0, 2]], dtype=np.float32)  # the "layer weight" of the attention tests


def messages(x):
    """Transformed rows ``x W`` (one head of two channels) and their logit, the sum of the
    channels (att_src = [1, 1]): what GAT's layer gives the fold."""
    xs = x @ SCALE
    return np.concatenate([xs, xs.sum(1, keepdims=True)], axis=1).astype(np.float32)


def softmax_reference(x, edges, a, b, a_dst, slope):
    """Per destination of ``a..b``, the softmax-weighted sum of its in-neighbors' messages over
    its stored edges but self loops, its maximum logit and its sum of exponentials."""
    xs = messages(x).astype(np.float64)
    out = np.zeros((b - a, 4))
    for d in range(a, b):
        srcs = [s for s, t in edges if t == d and s != d]
        out[d - a, 2] = -np.inf
        if not srcs:
            continue
        e = xs[srcs, 2] + a_dst[d - a, 0]
        e = np.where(e >= 0, e, e * slope)
        w = np.exp(e - e.max())
        out[d - a] = [*(w[:, None] * xs[srcs, :2]).sum(0), e.max(), w.sum()]
    return out


@pytest.mark.parametrize("piece_rows", [1, 2, 100])
def test_attention_by_hand(tiny, piece_rows):
    a_dst = np.array([[0], [-1], [0], [0]], dtype=np.float32)
    acc = np.zeros((4, 4), dtype=np.float32)
    acc[:, 2] = -np.inf
    aggregate(tiny, 0, 4, acc=acc, fold="softmax", a_dst=a_dst, negative_slope=0.5, transform=messages,
              width=3, piece_rows=piece_rows)
    # Messages: x0 -> [1, 0 | 1], x1 -> [0, 2 | 2], x2 -> [2, 4 | 6], x3 -> [10, 40 | 50].
    # dst 0: x3 alone, logit 50. dst 1: x0 (logit 0), x2 twice (logit 5), the self loop dropped:
    # weights e^-5, 1, 1 (relative to the maximum 5). dst 2: x1 alone, logit 2. dst 3: none.
    e5 = np.exp(-5.0)
    want = [[10, 40, 50, 1], [1 * e5 + 4, 0 + 8, 5, e5 + 2], [0, 2, 2, 1], [0, 0, -np.inf, 0]]
    np.testing.assert_allclose(acc, want, rtol=1e-6)


def reference(x, edges, a, b, fold, dinv=None):
    if fold == "max":
        out = np.full((b - a, x.shape[1]), -np.inf)
        for s, d in edges:
            if a <= d < b:
                out[d - a] = np.maximum(out[d - a], x[s])
        return out
    out = np.zeros((b - a, x.shape[1]), dtype=np.float64)
    for s, d in edges:
        if a <= d < b and not (dinv is not None and s == d):
            out[d - a] += x[s] * (1.0 if dinv is None else float(dinv[s]) * float(dinv[d]))
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 40), st.integers(0, 200), st.integers(1, 9), st.integers(1, 4),
       st.sampled_from(["sum", "gcn", "max", "softmax"]), st.integers(0, 2**31 - 1))
def test_equals_a_numpy_reference(tmp_path_factory, n, m, piece_rows, threads, fold, seed):
    rng = np.random.default_rng(seed)
    # A hub (node 0 gets a third of the edges), self loops and duplicates come by chance.
    dst = np.where(rng.random(m) < 0.3, 0, rng.integers(0, n, m))
    edges = np.stack([rng.integers(0, n, m), dst], axis=1).astype(np.int64)
    x = rng.standard_normal((n, 2 if fold == "softmax" else 3)).astype(np.float32)
    path = make(tmp_path_factory.mktemp("prop"), edges, x)
    a = int(rng.integers(0, n))
    b = int(rng.integers(a + 1, n + 1))
    kw = dict(piece_rows=piece_rows, threads=threads)
    if fold == "softmax":
        a_dst = rng.standard_normal((b - a, 1)).astype(np.float32)
        acc = np.zeros((b - a, 4), dtype=np.float32)
        acc[:, 2] = -np.inf
        aggregate(path, a, b, acc=acc, fold="softmax", a_dst=a_dst, transform=messages, width=3, **kw)
        np.testing.assert_allclose(acc, softmax_reference(x, edges, a, b, a_dst, 0.2), rtol=1e-5, atol=1e-5)
        return
    dinv = rng.random(n).astype(np.float32) if fold == "gcn" else None
    acc = np.full((b - a, 3), -np.inf if fold == "max" else 0, dtype=np.float32)
    aggregate(path, a, b, acc=acc, dinv=dinv, fold=fold, **kw)
    np.testing.assert_allclose(acc, reference(x, edges, a, b, fold, dinv), rtol=1e-5, atol=1e-5)


def test_a_transform_s_rows_are_what_is_summed(tiny):
    acc, _, _ = aggregate(tiny, 0, 4, acc=np.zeros((4, 1), dtype=np.float32),
                          transform=lambda x: x.sum(1, keepdims=True) * 2, width=1, piece_rows=2)
    np.testing.assert_array_equal(acc, [[60], [20], [2], [0]])  # 2 * the row sums of the sums by hand


def test_a_transform_s_errors_are_raised(tiny):
    class Stop(Exception):
        pass

    def boom(x):
        raise Stop("from the transform")

    with pytest.raises(Stop, match="from the transform"):
        aggregate(tiny, 0, 4, acc=np.zeros((4, 1), dtype=np.float32), transform=boom, width=1)
    with pytest.raises(InputError, match=r"the transform returned an array of shape \[4, 2\] for 4 rows; \[4, 1\]"):
        aggregate(tiny, 0, 4, acc=np.zeros((4, 1), dtype=np.float32), transform=lambda x: x, width=1)
    with pytest.raises(InputError, match="give transform and width"):
        aggregate(tiny, 0, 4, transform=lambda x: x)


def test_errors(tiny):
    with pytest.raises(InputError, match="accumulator holds 6 values but 4 destinations of 2 need 8"):
        aggregate(tiny, 0, 4, acc=np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(InputError, match="edges 0..5 are not within the block's 1..6"):
        aggregate(tiny, 1, 3, lo=0, hi=5)
    with pytest.raises(InputError, match="3 GCN normalisation values for a graph of 4 nodes"):
        aggregate(tiny, 0, 4, dinv=np.ones(3, np.float32))
    with pytest.raises(InputError, match="C-contiguous"):
        aggregate(tiny, 0, 2, acc=np.zeros((2, 4), dtype=np.float32)[:, ::2])
    with pytest.raises(InputError, match='fold "softmax": use sum or max .*softmax \\(with a_dst\\)'):
        aggregate(tiny, 0, 4, fold="softmax")
    with pytest.raises(InputError, match='fold "gcn"'):
        aggregate(tiny, 0, 4, fold="gcn")
    with pytest.raises(InputError, match="attention rows of 2 values cannot hold 2 heads"):
        aggregate(tiny, 0, 4, acc=np.zeros((4, 4), dtype=np.float32), fold="softmax",
                  a_dst=np.zeros((4, 2), dtype=np.float32))
    with pytest.raises(InputError, match="3 destination logits for 4 destinations of 1 heads"):
        aggregate(tiny, 0, 4, acc=np.zeros((4, 4), dtype=np.float32), fold="softmax",
                  a_dst=np.zeros((3, 1), dtype=np.float32), transform=messages, width=3)


def test_a_corrupt_neighbor_file_is_named(tmp_path):
    path = make(tmp_path, EDGES, X)
    g = NeighborFile(ringgnn.Dataset.open(path))
    ids = np.fromfile(g.path, dtype=g.dtype)
    ids[0] = 99
    ids.tofile(g.path)
    with pytest.raises(InputError, match=r"entry 0 is node 99, but the graph has 4 nodes; run `ringgnn verify`"):
        aggregate(path, 0, 4)
