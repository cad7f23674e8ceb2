"""ringgnn.NeighborSampler: exact samples on tiny graphs, the SamplerOutput invariants on a random
graph, identical results across backends and thread counts, the io_uring fallback, fork safety."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import ringgnn
from ringgnn import InputError, NeighborSampler
from _sampling import as_tuple, check_sample, edges_by_hop, needs_sampler, path_graph, sbm, star_graph


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return sbm(tmp_path_factory.mktemp("sbm"), nodes=2000)


# --- arguments (no sampling) -----------------------------------------------------------------


@pytest.mark.parametrize("fanouts", [[0], [5, 0], [-2], [], "10,x", "", [1.5], b"10", 7, [2**32]])
def test_bad_fanouts(tmp_path, fanouts):
    ds = path_graph(tmp_path)
    with pytest.raises(InputError, match="fanout"):
        NeighborSampler(ds, fanouts)


def test_fanouts_have_one_rule_for_text_and_lists(tmp_path):
    # The Rust core's rule, whichever way they come in: a count up to 2^32 - 1, or -1.
    ds = path_graph(tmp_path)
    assert NeighborSampler(ds, "10, 5,-1").fanouts == NeighborSampler(ds, [10, 5, -1]).fanouts == [10, 5, -1]
    assert NeighborSampler(ds, np.array([2**32 - 1])).fanouts == [2**32 - 1]
    with pytest.raises(InputError, match="fanout 4294967296 at hop 1 is not valid"):
        ringgnn.Loader(sbm(tmp_path), [3, 2**32], 16)


def test_bad_options(tmp_path):
    ds = path_graph(tmp_path)
    with pytest.raises(InputError, match="backend 'disk' is unknown"):
        NeighborSampler(ds, [2], backend="disk")
    with pytest.raises(InputError, match="threads"):
        NeighborSampler(ds, [2], threads=0)
    with pytest.raises(InputError, match="is not a size"):
        NeighborSampler(ds, [2], memory="lots")
    assert NeighborSampler(ds, [2], memory="2K").memory == 2048
    s = NeighborSampler(str(ds.path), [2])
    with pytest.raises(InputError, match="seed node 5 is out of range: the graph has 5 nodes"):
        s.sample([0, 5])
    with pytest.raises(InputError, match="seed node -1 is out of range"):
        s.sample(np.array([-1]))
    with pytest.raises(InputError, match="seed node 9 is out of range"):
        s.epoch([1, 9], 2)
    with pytest.raises(InputError, match="batch 3 is not a batch of this epoch"):
        s.epoch(None, 2, batches=[0, 3])
    with pytest.raises(InputError, match="1-D"):
        s.sample(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(InputError, match="no split 'nope'"):
        s.epoch("nope", 2)


def test_import_is_light():
    code = "import sys, ringgnn; ringgnn.NeighborSampler; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pickle_creates_no_core_sampler(tmp_path):
    s = NeighborSampler(path_graph(tmp_path), [1, 1], seed=3)
    t = pickle.loads(pickle.dumps(s))
    assert t._core is None and t.fanouts == [1, 1] and t.seed == 3 and t.dataset.path == s.dataset.path


# --- exact samples -----------------------------------------------------------------------------


@needs_sampler
def test_path_exact(tmp_path):
    s = NeighborSampler(path_graph(tmp_path), [2, 2])
    sub = s.sample([4])
    assert as_tuple(sub) == ([4, 3, 2], [1, 2], [0, 1], [1, 1, 1], [1, 1])
    assert sub.batch_size == 1 and sub.edge is None
    # seed 4's neighbor 3 is a seed too: it is not added again; seed 3 reaches 2
    sub = NeighborSampler(s.dataset, [1]).sample([4, 3])
    assert as_tuple(sub) == ([4, 3, 2], [1, 2], [0, 1], [2, 1], [2])
    # node 0 has no in-neighbors; a duplicate seed is kept once
    assert as_tuple(s.sample([0, 0])) == ([0], [], [], [1, 0, 0], [0, 0])
    assert s.sample([0, 0]).batch_size == 1
    assert as_tuple(s.sample(np.zeros(0, dtype=np.int64))) == ([], [], [], [0, 0, 0], [0, 0])


@needs_sampler
@pytest.mark.parametrize("fanout", [-1, 5, 7])
def test_star_all_neighbors(tmp_path, fanout):
    s = NeighborSampler(star_graph(tmp_path), [fanout, fanout])
    sub = s.sample([0])
    assert sub.node[0] == 0 and sorted(sub.node[1:].tolist()) == [1, 2, 3, 4, 5]
    assert sub.num_sampled_nodes == [1, 5, 0] and sub.num_sampled_edges == [5, 5]
    hop1, hop2 = edges_by_hop(sub)
    assert hop1 == {(i, 0): 1 for i in range(1, 6)}
    assert hop2 == {(0, i): 1 for i in range(1, 6)}
    check_sample(s.dataset, sub, [0], [fanout, fanout])


@needs_sampler
def test_star_below_degree_and_replacement(tmp_path):
    ds = star_graph(tmp_path)
    sub = NeighborSampler(ds, [2]).sample([0])
    assert sub.num_sampled_edges == [2] and len(set(sub.node[1:].tolist()) - {1, 2, 3, 4, 5}) == 0
    check_sample(ds, sub, [0], [2])
    # with replacement a leaf (degree 1) draws its one neighbor `fanout` times
    sub = NeighborSampler(ds, [3], replace=True).sample([1])
    assert as_tuple(sub) == ([1, 0], [1, 1, 1], [0, 0, 0], [1, 1], [3])
    sub = NeighborSampler(ds, [12], replace=True).sample([0])
    check_sample(ds, sub, [0], [12], replace=True)


@needs_sampler
def test_edge_ids(tmp_path):
    ds = star_graph(tmp_path)
    sub = NeighborSampler(ds, [-1], with_edge_ids=True).sample([0])
    indptr = ds.indptr()
    assert sub.edge.dtype == np.int64
    assert sorted(sub.edge.tolist()) == list(range(indptr[0], indptr[1]))


# --- invariants, reproducibility, backends -----------------------------------------------------


@needs_sampler
@pytest.mark.parametrize("fanouts,replace", [([5, 3], False), ([2, 2, 2], True), ([-1], False), ([25, 10], False)])
def test_invariants(graph, fanouts, replace):
    s = NeighborSampler(graph, fanouts, replace=replace, seed=7)
    rng = np.random.default_rng(0)
    for b in range(5):
        seeds = rng.integers(0, graph.num_nodes, 64)
        check_sample(graph, s.sample(seeds, epoch=1, batch=b), seeds, fanouts, replace)


@needs_sampler
def test_reproducible_and_seed_dependent(graph):
    seeds = graph.split("train")[:100]
    a = NeighborSampler(graph, [5, 5], seed=1)
    b = NeighborSampler(graph, [5, 5], seed=1)
    assert as_tuple(a.sample(seeds, epoch=2, batch=3)) == as_tuple(b.sample(seeds, epoch=2, batch=3))
    others = [
        NeighborSampler(graph, [5, 5], seed=2).sample(seeds, epoch=2, batch=3),
        a.sample(seeds, epoch=3, batch=3),
        a.sample(seeds, epoch=2, batch=4),
    ]
    for o in others:
        assert as_tuple(o) != as_tuple(a.sample(seeds, epoch=2, batch=3))


@needs_sampler
def test_epoch_matches_sample(graph):
    s = NeighborSampler(graph, [4, 3], seed=5)
    train = graph.split("train")
    it = s.epoch("train", 100, shuffle=False, epoch=1)
    assert len(it) == -(-len(train) // 100)
    subs = list(it)
    assert len(subs) == len(it)
    for b, sub in enumerate(subs):
        seeds = train[b * 100 : (b + 1) * 100]
        assert as_tuple(sub) == as_tuple(s.sample(seeds, epoch=1, batch=b))
    assert len(list(s.epoch("train", 100, drop_last=True))) == len(train) // 100
    shuffled = list(s.epoch(None, 500, epoch=0))
    got = np.concatenate([x.node[: x.batch_size] for x in shuffled])
    assert sorted(got.tolist()) == list(range(graph.num_nodes))
    assert got.tolist() != list(range(graph.num_nodes))


def _epoch(ds, **kwargs):
    s = NeighborSampler(ds, [10, 5], seed=11, **kwargs)
    try:
        return s.backend, [as_tuple(x) for x in s.epoch("train", 128, epoch=2)]
    except (ringgnn.RingGnnError, OSError) as e:
        pytest.skip(f"{kwargs}: not available here: {e}")


@needs_sampler
def test_backends_and_threads_agree(graph):
    backend, want = _epoch(graph, backend="memory", threads=1)
    assert backend == "memory"
    for kwargs in [
        dict(backend="memory", threads=2),
        dict(backend="pread", threads=1),
        dict(backend="pread", threads=2),
        dict(backend="auto", threads=2),
    ]:
        got_backend, got = _epoch(graph, **kwargs)
        assert got == want, kwargs
        if kwargs["backend"] != "auto":
            assert got_backend == kwargs["backend"]


@needs_sampler
@pytest.mark.parametrize("direct", [False, True])
def test_uring_agrees(graph, direct):
    _, want = _epoch(graph, backend="memory", threads=2)
    backend, got = _epoch(graph, backend="uring", direct=direct, threads=2)
    if direct and backend == "uring":
        pytest.skip("the filesystem of the test dataset refuses O_DIRECT (tmpfs?)")
    assert backend == ("uring-direct" if direct else "uring")
    assert got == want


@needs_sampler
def test_io_stats(graph):
    s = NeighborSampler(graph, [5], backend="pread", threads=1, hyperbatch=1)
    assert s.io_stats()["batches"] == 0
    n = len(list(s.epoch("train", 256)))
    stats = s.io_stats()
    assert stats["batches"] == n and stats["reads"] > 0 and stats["bytes"] > 0
    assert stats["hyperbatches"] == stats["sequential_bytes"] == stats["random_bytes"] == 0
    # Hyperbatches: the batches are counted in them, the bytes split by how they were read.
    h = NeighborSampler(graph, [5], backend="pread", threads=1, hyperbatch=2)
    assert len(list(h.epoch("train", 256))) == n
    st = h.io_stats()
    assert (st["hyperbatches"], st["hyperbatch_batches"]) == (-(-n // 2), n)
    assert st["sequential_bytes"] + st["random_bytes"] == st["bytes"] < stats["bytes"]


@needs_sampler
def test_disable_uring_falls_back_to_pread(tmp_path):
    # Auto takes the neighbor file into memory whenever anything fits (a small file costs less
    # than a disk reader's buffer); here the feature file is left on disk by a tight budget, and
    # auto reads it with pread, saying why once.
    ds = sbm(tmp_path, nodes=2000)
    # The reference: the neighbor file in memory, the feature file on disk (by request: with a
    # roomy budget, auto would weigh hyperbatch staging against the file in memory by cost).
    plan = ringgnn.Loader(ds, [3], 64, backend="memory", feature_backend="pread", cache=0, prefetch=1,
                          reserve=0).plan()
    budget = (plan["total"] - plan["slack"] + 20_000) * 32 // 31
    code = (
        "import logging, sys, ringgnn\n"
        "logging.basicConfig(stream=sys.stderr, format='LOG %(name)s %(levelname)s %(message)s')\n"
        f"l = ringgnn.Loader({ds.path!r}, [3], 64, cache=0, prefetch=1, reserve=0, memory={budget})\n"
        "print(l.feature_backend); print(l._core.fallback_reason)\n"
        "print(next(iter(l)).x.sum().item())\n"
    )
    env = {**os.environ, "RINGGNN_DISABLE_URING": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    backend, reason, total = out.stdout.splitlines()
    assert backend == "pread" and "RINGGNN_DISABLE_URING" in reason
    log = [line for line in out.stderr.splitlines() if line.startswith("LOG ringgnn WARNING")]
    assert len(log) == 1 and "pread" in log[0] and reason in log[0], out.stderr
    want = next(iter(ringgnn.Loader(ds, [3], 64, backend="memory"))).x.sum().item()
    assert float(total) == want
    # asking for io_uring explicitly where it is disabled is an error, not a silent fallback
    code = f"import ringgnn; ringgnn.NeighborSampler({ds.path!r}, [3], backend='uring').backend"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1 and "io_uring is not available" in out.stderr


# --- torch and fork ----------------------------------------------------------------------------


@needs_sampler
def test_to_torch(graph):
    torch = pytest.importorskip("torch")
    sub = NeighborSampler(graph, [5, 5], with_edge_ids=True).sample(graph.split("train")[:50])
    t = sub.to_torch()
    for name in ("node", "row", "col", "edge"):
        assert getattr(t, name).dtype == torch.int64
        assert getattr(t, name).tolist() == getattr(sub, name).tolist()
    assert t.edge_index.shape == (2, sub.num_edges)
    assert t.edge_index.tolist() == sub.edge_index.tolist() == [sub.row.tolist(), sub.col.tolist()]
    assert t.batch_size == sub.batch_size and t.num_sampled_edges == sub.num_sampled_edges


_FORKED = {}


def _child_sample(_):
    # uses the sampler inherited through fork (not a pickled copy)
    s = _FORKED["sampler"]
    inherited = s._core is not None and s._pid != os.getpid()
    return os.getpid(), inherited, as_tuple(s.sample(_FORKED["seeds"], epoch=0, batch=1))


@needs_sampler
def test_fork_after_use(graph):
    s = NeighborSampler(graph, [5, 5], seed=4, threads=2)
    seeds = graph.split("val")[:64]
    want = as_tuple(s.sample(seeds, epoch=0, batch=1))
    list(s.epoch("val", 64))  # the parent's core sampler has run its threads
    parent_core = s._core
    _FORKED.update(sampler=s, seeds=seeds)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            results = pool.map(_child_sample, range(4))
    finally:
        _FORKED.clear()
    for pid, inherited, got in results:
        assert pid != os.getpid() and got == want
    assert any(inherited for _, inherited, _ in results)
    assert s._core is parent_core
