"""Sampling at seed times from Python (issue 36): ``HeteroNeighborSampler`` and ``HeteroLoader``
with ``input_time``, a homogeneous dataset being the one-type case (node type ``node``, relation
``node:to:node``). Exact outputs on a graph worked by hand, the invariant that nothing sampled is
newer than its seed, batches independent of hyperbatch size and threads, and every bad input."""

import json
import os

import numpy as np
import pytest

import _temporal

import ringgnn
from ringgnn import _core
from ringgnn.data import build

R = "node:to:node"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """docs/FORMAT.md's example: edges 2->1, 7->1, 0->1, 1->1, 3->0 at times 5, 3, 3, 9, -4, so
    node 1's list is (3, 0), (3, 7), (5, 2), (9, 1) and node 0's (-4, 3)."""
    return _temporal.example(tmp_path_factory.mktemp("tiny")) / "ds"


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """A 3,000-node SBM with uniform edge and node times in [0, 1000)."""
    return _temporal.timed_sbm(tmp_path_factory.mktemp("timed") / "g", 3000, 8)


def test_exact_samples_at_times(tiny):
    s = ringgnn.HeteroNeighborSampler(tiny, [-1, -1])
    plain = s.sample([1], "node")
    assert plain.seed_time is None
    assert plain.node["node"].tolist() == [1, 0, 7, 2, 3]
    # Before every edge into 1: the seed alone.
    o = s.sample([1], "node", input_time=[2])
    assert o.node["node"].tolist() == [1] and o.row[R].size == 0 and o.seed_time["node"].tolist() == [2]
    # At 3: the two edges at time 3 (time <= T, as PyG), then 0's edge at -4 at hop 2.
    o = s.sample([1], "node", input_time=3)
    assert o.node["node"].tolist() == [1, 0, 7, 3]
    assert o.row[R].tolist() == [1, 2, 3] and o.col[R].tolist() == [0, 0, 1]
    assert o.num_sampled_nodes["node"] == [1, 2, 1] and o.num_sampled_edges[R] == [2, 1]
    assert o.seed_time["node"].tolist() == [3] * 4
    # At 9: every edge, the same subgraph as without times.
    o = s.sample([1], "node", input_time=[9])
    assert o.node["node"].tolist() == plain.node["node"].tolist() and o.row[R].tolist() == plain.row[R].tolist()


def test_seeds_at_different_times_get_disjoint_subgraphs(tiny):
    s = ringgnn.HeteroNeighborSampler(tiny, [-1, -1])
    o = s.sample([1, 1, 0], "node", input_time=[3, 9, 3])
    # Groups by time: {1, 0} at 3 share a subgraph, 1 at 9 is its own: node 1 twice, 0 twice, 7 twice.
    assert o.node["node"].tolist() == [1, 1, 0, 7, 0, 7, 2, 3, 3]
    assert o.seed_time["node"].tolist() == [3, 9, 3, 3, 9, 9, 9, 3, 9]
    assert o.row[R].tolist() == [2, 3, 4, 5, 6, 1, 7, 8]
    assert o.col[R].tolist() == [0, 0, 1, 1, 1, 1, 2, 4]
    assert o.num_sampled_nodes["node"] == [3, 5, 1]


def test_last_takes_the_most_recent(tiny):
    s = ringgnn.HeteroNeighborSampler(tiny, [2], temporal_strategy="last")
    assert s.sample([1], "node", input_time=[9]).node["node"].tolist() == [1, 2]  # times 5 and 9 (1 is the seed)
    assert s.sample([1], "node", input_time=[4]).node["node"].tolist() == [1, 0, 7]  # both at time 3
    # Uniform draws 2 of the 4 eligible at 9; last never varies with the seed.
    last = [ringgnn.HeteroNeighborSampler(tiny, [2], temporal_strategy="last", seed=k).sample(
        [1], "node", input_time=[9]).node["node"].tolist() for k in range(5)]
    assert all(x == [1, 2] for x in last)


def test_one_type_sample_many_equals_one_by_one(tiny):
    s = ringgnn.HeteroNeighborSampler(tiny, [1, 1])
    seeds = [[("node", np.array([1]))], [("node", np.array([1, 0]))]]
    times = [[np.array([9])], [np.array([3, 9])]]
    many = s.sample_many(seeds, [0, 1], input_time=times)
    for k, m in enumerate(many):
        one = s.sample_typed(seeds[k], batch=k, input_time=times[k])
        assert m.node["node"].tolist() == one.node["node"].tolist()
        assert m.seed_time["node"].tolist() == one.seed_time["node"].tolist()


def _edge_times(ds):
    m = json.loads((ds / "manifest.json").read_text())
    f = m["files"]["edge_times"]
    return np.fromfile(ds / f["path"], dtype="<i8", count=m["num_edges"])


@pytest.mark.parametrize("backend", ["memory", "pread"])
def test_nothing_sampled_is_newer_than_its_seed(timed, backend):
    ds = ringgnn.Dataset.open(timed)
    etime, ntime = _edge_times(timed), ds.node_times()
    s = ringgnn.HeteroNeighborSampler(timed, [6, 4], backend=backend, with_edge_ids=True)
    rng = np.random.default_rng(7)
    for b in range(6):
        seeds = rng.integers(0, 3000, 64)
        t = rng.integers(0, 1100, 64)
        o = s.sample(seeds, "node", input_time=t, batch=b)
        node, st = o.node["node"], o.seed_time["node"]
        assert len(st) == len(node)
        # Seeds keep their own times; every other node was reached at a seed's time.
        assert set(zip(node[:o.batch_size].tolist(), st[:o.batch_size].tolist())) == set(zip(seeds.tolist(), t.tolist()))
        assert set(st.tolist()) <= set(t.tolist())
        # An edge is never newer than the seed time of the node it was drawn for, nor its source.
        row, col, e = o.row[R], o.col[R], o.edge[R]
        assert (etime[e] <= st[col]).all() and (st[row] == st[col]).all()
        assert (ntime[node[o.batch_size:]] <= st[o.batch_size:]).all()
        # No (node, time) pair twice: a subgraph per time.
        assert len(set(zip(node.tolist(), st.tolist()))) == len(node)


def test_loader_batches_do_not_depend_on_hyperbatch_or_threads(timed):
    def epoch(**kw):
        loader = ringgnn.HeteroLoader(timed, [5, 3], "node", batch_size=200, backend="pread", **kw)
        return [(b["node"].n_id.tolist(), b["node"].seed_time.tolist(), b["node", "to", "node"].edge_index.tolist())
                for b in loader]

    a = epoch(hyperbatch=1, threads=1)
    assert a == epoch(hyperbatch=4, threads=2)
    assert len(a) == 1800 // 200


def test_loader_seed_times(timed):
    ds = ringgnn.Dataset.open(timed)
    loader = ringgnn.HeteroLoader(timed, [5, 3], "node", batch_size=200)
    # By default, the target's node times.
    assert (loader.seed_time == ds.node_times()[loader.seeds]).all()
    b = loader.make_batch(loader.seeds[:10], 0, 0)
    assert "seed_time" not in b["node"]  # explicit seeds without times: sampled without
    b = loader.make_batch(loader.seeds[:10], 0, 0, times=np.full(10, 5))
    assert set(b["node"].seed_time.tolist()) == {5}
    given = ringgnn.HeteroLoader(timed, [5, 3], "node", batch_size=200, input_time=500)
    assert set(next(iter(given))["node"].seed_time.tolist()) == {500}
    off = ringgnn.HeteroLoader(timed, [5, 3], "node", batch_size=200, ignore_time=True)
    assert off.seed_time is None and "seed_time" not in next(iter(off))["node"]


def test_bad_times_are_refused(tiny, timed, tmp_path):
    s = ringgnn.HeteroNeighborSampler(tiny, [-1])
    with pytest.raises(_core.InputError, match="must be integer times"):
        s.sample([1], "node", input_time=[1.5])
    with pytest.raises(_core.InputError, match="has 1 times for 2 seeds"):
        s.sample([1, 2], "node", input_time=[1])
    with pytest.raises(_core.InputError, match="1-D array"):
        s.sample([1], "node", input_time=[[1]])
    with pytest.raises(_core.InputError, match="1 lists of seed times but 2 seed sets"):
        s.sample_many([[("node", [1])], [("node", [2])]], [0, 1], input_time=[[[1]]])
    with pytest.raises(_core.InputError, match="temporal_strategy"):
        ringgnn.HeteroNeighborSampler(tiny, [-1], temporal_strategy="newest")
    with pytest.raises(_core.InputError, match="has 3 times for 1800 seeds"):
        ringgnn.HeteroLoader(timed, [5], "node", input_time=[1, 2, 3])
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    build.convert(tmp_path / "e.txt", tmp_path / "plain")
    plain = ringgnn.HeteroNeighborSampler(tmp_path / "plain", [-1])
    with pytest.raises(_core.InputError, match="no edge or node times"):
        plain.sample([1], "node", input_time=[3])
    with pytest.raises(_core.InputError, match="it has no node/paper"):
        _core.FeatureReader(str(tmp_path / "plain"), part="node/paper")
    assert os.listdir(tmp_path / "plain")  # untouched


def test_homogeneous_samplers_warn_once_that_they_ignore_times(tmp_path, caplog):
    import logging

    (tmp_path / "e.txt").write_text("2 1\n7 1\n0 1\n")
    np.save(tmp_path / "t.npy", np.array([5, 3, 3], dtype=np.int64))
    build.convert(tmp_path / "e.txt", tmp_path / "ds", edge_time=tmp_path / "t.npy")
    build.convert(tmp_path / "e.txt", tmp_path / "plain")
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        ringgnn.NeighborSampler(tmp_path / "plain", [2]).sample([1])
        assert "without times" not in caplog.text
        timed = ringgnn.NeighborSampler(tmp_path / "ds", [2])
        timed.sample([1], input_time=3)
        assert "without times" not in caplog.text  # at times: no warning
        timed.sample([1])
        with pytest.raises(_core.InputError, match="no node features"):  # warned once already, refused after
            ringgnn.Loader(tmp_path / "ds", [2], 2, split=None)
    warned = [r.getMessage() for r in caplog.records if "without times" in r.getMessage()]
    assert len(warned) == 1 and "NeighborSampler samples without times" in warned[0]
    assert "HeteroLoader" in warned[0]
