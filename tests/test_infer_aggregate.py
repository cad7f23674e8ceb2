"""The Rust core's neighbor aggregation of layer-wise inference (``FeatureReader.aggregate``,
crates/ringgnn-features/src/aggregate.rs), checked directly: sums worked out by hand on a tiny
graph with a self loop, a duplicate edge and a node without in-edges; a numpy reference on
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
from ringgnn.inference import NeighborFile

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
    assert read == 6 * np.dtype(NeighborFile(ds).dtype).itemsize
    assert reader.stats()["distinct_rows"] == 4  # sources 0, 1, 2, 3, each read once


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


def reference(x, edges, a, b, dinv=None):
    out = np.zeros((b - a, x.shape[1]), dtype=np.float64)
    for s, d in edges:
        if a <= d < b and not (dinv is not None and s == d):
            out[d - a] += x[s] * (1.0 if dinv is None else float(dinv[s]) * float(dinv[d]))
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 40), st.integers(0, 200), st.integers(1, 9), st.integers(1, 4), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_equals_a_numpy_reference(tmp_path_factory, n, m, piece_rows, threads, gcn, seed):
    rng = np.random.default_rng(seed)
    # A hub (node 0 gets a third of the edges), self loops and duplicates come by chance.
    dst = np.where(rng.random(m) < 0.3, 0, rng.integers(0, n, m))
    edges = np.stack([rng.integers(0, n, m), dst], axis=1).astype(np.int64)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    path = make(tmp_path_factory.mktemp("prop"), edges, x)
    dinv = rng.random(n).astype(np.float32) if gcn else None
    a = int(rng.integers(0, n))
    b = int(rng.integers(a + 1, n + 1))
    got, _, _ = aggregate(path, a, b, dinv=dinv, piece_rows=piece_rows, threads=threads)
    np.testing.assert_allclose(got, reference(x, edges, a, b, dinv), rtol=1e-5, atol=1e-5)


def test_errors(tiny):
    with pytest.raises(InputError, match="accumulator holds 6 values but 4 destinations of 2 need 8"):
        aggregate(tiny, 0, 4, acc=np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(InputError, match="edges 0..5 are not within the block's 1..6"):
        aggregate(tiny, 1, 3, lo=0, hi=5)
    with pytest.raises(InputError, match="3 GCN normalisation values for a graph of 4 nodes"):
        aggregate(tiny, 0, 4, dinv=np.ones(3, np.float32))
    with pytest.raises(InputError, match="C-contiguous"):
        aggregate(tiny, 0, 2, acc=np.zeros((2, 4), dtype=np.float32)[:, ::2])


def test_a_corrupt_neighbor_file_is_named(tmp_path):
    path = make(tmp_path, EDGES, X)
    g = NeighborFile(ringgnn.Dataset.open(path))
    ids = np.fromfile(g.path, dtype=g.dtype)
    ids[0] = 99
    ids.tofile(g.path)
    with pytest.raises(InputError, match=r"entry 0 is node 99, but the graph has 4 nodes; run `ringgnn verify`"):
        aggregate(path, 0, 4)
