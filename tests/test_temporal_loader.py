"""The homogeneous ``Loader``, ``NeighborSampler`` and the PyG adapter at seed times (issue 36):
batches of the typed engine's one-type case in the homogeneous ``Data`` layout. Exact batches on
docs/FORMAT.md's example worked by hand, equality with ``HeteroLoader``, the invariant that nothing
sampled is newer than its seed, batches independent of backend, threads and hyperbatch size, the
defaults and warnings, and every refusal."""

import logging

import numpy as np
import pytest

import _temporal

import ringgnn
from ringgnn import _core
from ringgnn.data import build

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.loader import NeighborLoader, NodeLoader  # noqa: E402

from ringgnn.pyg import RingNeighborSampler, ring_stores  # noqa: E402

R = "node:to:node"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """docs/FORMAT.md's example with features (row v is [v, 10 v]), labels v % 3 and node times
    (node v at time v): edges 2->1, 7->1, 0->1, 1->1, 3->0 at times 5, 3, 3, 9, -4, so node 1's
    list is (3, 0), (3, 7), (5, 2), (9, 1) and node 0's (-4, 3)."""
    d = tmp_path_factory.mktemp("tiny")
    (d / "e.txt").write_text(_temporal.EXAMPLE_EDGES)
    np.save(d / "t.npy", np.array(_temporal.EXAMPLE_TIMES, dtype=np.int64))
    np.save(d / "x.npy", np.stack([np.arange(8), 10 * np.arange(8)], 1).astype(np.float32))
    np.save(d / "y.npy", np.arange(8) % 3)
    np.save(d / "n.npy", np.arange(8, dtype=np.int64))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "t.npy", features=d / "x.npy", labels=d / "y.npy")
    build.convert(d / "e.txt", d / "nt", edge_time=d / "t.npy", node_time=d / "n.npy", features=d / "x.npy",
                  labels=d / "y.npy")
    build.convert(d / "e.txt", d / "plain", features=d / "x.npy", labels=d / "y.npy")
    return d


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """A 3,000-node SBM with uniform edge and node times in [0, 1000)."""
    return _temporal.timed_sbm(tmp_path_factory.mktemp("timed") / "g", 3000, 8)


def _batches(loader):
    return [(b.n_id.tolist(), b.edge_index.tolist(), b.seed_time.tolist(), b.x.tolist(), b.y.tolist(),
             b.input_id.tolist(), b.batch_size, b.num_sampled_nodes, b.num_sampled_edges) for b in loader]


def test_exact_batch_at_times(tiny):
    """Node 1 at 3 and at 9, node 0 at 3: seeds at 3 share a subgraph (edges <= 3: 0->1, 7->1 and
    3->0 at -4, all at hop 1), node 1 at 9 has its own (its 4 edges at hop 1, then 3->0 at hop 2),
    so nodes 1, 0, 7 and 3 are there twice."""
    loader = ringgnn.Loader(tiny / "ds", [-1, -1], 3, split=np.array([1, 1, 0]), input_time=[3, 9, 3],
                            shuffle=False)
    assert loader.typed is not None and loader.seed_time.tolist() == [3, 9, 3]
    (b,) = list(loader)
    assert b.n_id.tolist() == [1, 1, 0, 7, 0, 7, 2, 3, 3]
    assert b.seed_time.tolist() == [3, 9, 3, 3, 9, 9, 9, 3, 9]
    assert b.edge_index.tolist() == [[2, 3, 4, 5, 6, 1, 7, 8], [0, 0, 1, 1, 1, 1, 2, 4]]
    assert b.batch_size == 3 and b.input_id.tolist() == [0, 1, 2]
    assert b.num_sampled_nodes == [3, 5, 1] and b.num_sampled_edges == [7, 1]
    assert b.x[:, 0].tolist() == b.n_id.tolist() and b.x[:, 1].tolist() == (10 * b.n_id).tolist()
    assert b.y.tolist() == (b.n_id % 3).tolist()
    # Every edge of the subgraph at 3 is at most 3: never 2->1 (5) nor 1->1 (9).
    at3 = b.seed_time[b.edge_index[1]] == 3
    pairs = {(b.n_id[r].item(), b.n_id[c].item()) for r, c in b.edge_index[:, at3].t().tolist()}
    assert pairs == {(0, 1), (7, 1), (3, 0)}
    assert len(loader) == 1 and loader.last_epoch["batches"] == 1


def test_a_seed_twice_at_one_time_is_one_seed(tiny):
    loader = ringgnn.Loader(tiny / "ds", [-1], 4, split=np.array([1, 1, 0, 1]), input_time=[4, 4, 4, 2],
                            shuffle=False)
    (b,) = list(loader)
    # (1, 4) once, then (0, 4), then (1, 2); input_id: their first positions in the split.
    assert b.n_id[:b.batch_size].tolist() == [1, 0, 1] and b.input_id.tolist() == [0, 2, 3]
    assert b.seed_time[:3].tolist() == [4, 4, 2]


def test_unlabeled_nodes_have_y_minus_one(tmp_path):
    (tmp_path / "e.txt").write_text("2 1\n0 1\n")
    np.save(tmp_path / "t.npy", np.array([5, 3], dtype=np.int64))
    np.save(tmp_path / "x.npy", np.ones((3, 2), dtype=np.float32))
    build.convert(tmp_path / "e.txt", tmp_path / "ds", edge_time=tmp_path / "t.npy", features=tmp_path / "x.npy")
    (b,) = list(ringgnn.Loader(tmp_path / "ds", [-1], 2, split=np.array([1]), input_time=4))
    assert b.n_id.tolist() == [1, 0] and b.y.tolist() == [-1, -1] and b.x.tolist() == [[1, 1], [1, 1]]


def test_default_times_are_node_times(tiny):
    ds = ringgnn.Dataset.open(tiny / "nt")
    loader = ringgnn.Loader(ds, [-1], 2, split=None, shuffle=False)
    assert loader.seed_time.tolist() == list(range(8))
    first = next(iter(loader))
    # Node 1 at its time 1: no edge into it is that old, and node 0 (time 0) has 3->0 at -4 but
    # node 3 (time 3) is newer than 0: dropped.
    assert first.n_id.tolist() == [0, 1] and first.edge_index.numel() == 0
    at = ringgnn.Loader(ds, [-1], 2, split=np.array([1]), input_time=9, shuffle=False)
    (b,) = list(at)
    assert sorted(b.n_id[1:].tolist()) == [0, 2, 7] and set(b.seed_time.tolist()) == {9}  # 1 is the seed


def test_last_takes_the_most_recent(tiny):
    """``last`` reaches the typed Rust loader's workers: the 2 most recent edges into 1 at 9 are
    1->1 (at 9; 1 is the seed) and 2->1 (at 5), whatever the seed; uniform draws among all 4."""
    def n_id(seed, **kw):
        loader = ringgnn.Loader(tiny / "ds", [2], 1, split=np.array([1]), input_time=[9], seed=seed, **kw)
        return next(iter(loader)).n_id.tolist()

    assert all(n_id(k, temporal_strategy="last") == [1, 2] for k in range(4))
    assert any(n_id(k) != [1, 2] for k in range(4))
    typed = ringgnn.HeteroLoader(tiny / "ds", [2], "node", seeds=np.array([1]), input_time=[9],
                                 temporal_strategy="last", batch_size=1, hyperbatch=1)
    assert next(iter(typed))["node"].n_id.tolist() == [1, 2]


def test_neighbor_sampler_at_times(tiny):
    s = ringgnn.NeighborSampler(tiny / "ds", [-1, -1], with_edge_ids=True)
    o = s.sample([1, 1, 0], input_time=[3, 9, 3])
    assert o.node.tolist() == [1, 1, 0, 7, 0, 7, 2, 3, 3] and o.batch_size == 3
    assert o.seed_time.tolist() == [3, 9, 3, 3, 9, 9, 9, 3, 9]
    assert o.row.tolist() == [2, 3, 4, 5, 6, 1, 7, 8] and o.col.tolist() == [0, 0, 1, 1, 1, 1, 2, 4]
    assert o.num_sampled_nodes == [3, 5, 1] and o.num_sampled_edges == [7, 1]
    h = ringgnn.HeteroNeighborSampler(tiny / "ds", [-1, -1], with_edge_ids=True).sample(
        [1, 1, 0], "node", input_time=[3, 9, 3])
    assert o.edge.tolist() == h.edge[R].tolist()
    t = o.to_torch()
    assert t.seed_time.tolist() == o.seed_time.tolist()
    assert s.sample([1], input_time=2).node.tolist() == [1]  # before every edge into 1
    plain = s.sample([1])
    assert plain.seed_time is None and plain.node.tolist() == [1, 0, 7, 2, 3]


def test_equals_hetero_loader(timed):
    """The Loader at times is HeteroLoader's one-type case: the same batches, converted."""
    loader = ringgnn.Loader(timed, [5, 3], 200, seed=4)
    typed = ringgnn.HeteroLoader(timed, {R: [5, 3]}, "node", seeds=loader.seeds, input_time=loader.seed_time,
                                 batch_size=200, seed=4)
    ours = list(loader)
    assert len(ours) == len(typed) == 1800 // 200
    for b, h in zip(ours, typed):
        n, e = h["node"], h["node", "to", "node"]
        assert torch.equal(b.n_id, n.n_id) and torch.equal(b.edge_index, e.edge_index)
        assert torch.equal(b.x, n.x) and torch.equal(b.y, n.y) and torch.equal(b.seed_time, n.seed_time)
        assert b.batch_size == n.batch_size and b.num_sampled_nodes == n.num_sampled_nodes
        # input_id: the seeds' positions in the split.
        assert torch.equal(torch.from_numpy(loader.seeds)[b.input_id], b.n_id[:b.batch_size])
        assert torch.equal(torch.from_numpy(loader.seed_time)[b.input_id], b.seed_time[:b.batch_size])


def test_nothing_sampled_is_newer_than_its_seed(timed):
    ds = ringgnn.Dataset.open(timed)
    ntime = ds.node_times()
    indptr = ds.indptr()
    # The oldest time of each (src, dst) edge, from the CSC and its time file.
    m = ds.manifest
    etime = np.fromfile(timed / m["files"]["edge_times"]["path"], dtype="<i8", count=m["num_edges"])
    src = np.fromfile(timed / m["files"]["indices"]["path"], dtype="<u4" if m["graph"]["indices_dtype"] == "u32"
                      else "<u8", count=m["num_edges"]).astype(np.int64)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    oldest = {}
    for s, d, t in zip(src.tolist(), dst.tolist(), etime.tolist()):
        oldest[(s, d)] = min(t, oldest.get((s, d), t))
    rng = np.random.default_rng(5)
    seeds = rng.integers(0, 3000, 400)
    times = rng.integers(0, 1100, 400)
    loader = ringgnn.Loader(timed, [6, 4], 64, split=seeds, input_time=times, backend="pread", seed=2)
    for b in loader:
        node, st, (row, col) = b.n_id.numpy(), b.seed_time.numpy(), b.edge_index.numpy()
        assert (st[row] == st[col]).all()
        assert all(oldest[(s, d)] <= t for s, d, t in zip(node[row].tolist(), node[col].tolist(), st[col].tolist()))
        assert (ntime[node[b.batch_size:]] <= st[b.batch_size:]).all()
        assert len(set(zip(node.tolist(), st.tolist()))) == len(node)  # a subgraph per time


def test_batches_do_not_depend_on_backend_threads_or_hyperbatch(timed):
    def epoch(**kw):
        return _batches(ringgnn.Loader(timed, [5, 3], 200, seed=1, **kw))

    a = epoch(backend="memory", threads=1, hyperbatch=1)
    assert a == epoch(backend="pread", threads=2, hyperbatch=4)
    assert a == epoch(backend="pread", feature_backend="memory", threads=3, hyperbatch="auto", cache=0)


def test_epochs_batches_and_share(timed):
    loader = ringgnn.Loader(timed, [4], 300, seed=2)
    first, second = _batches(loader), _batches(loader)
    assert first != second  # epoch 1 shuffles anew
    loader.set_epoch(0)
    assert _batches(loader) == first
    some = ringgnn.Loader(timed, [4], 300, seed=2, batches=[1, 4])
    assert _batches(some) == [first[1], first[4]] and len(some) == 2
    val = ringgnn.Loader(timed, [4], 300, split="val", shuffle=False, seed=2, share=loader)
    assert val.typed.features is loader.typed.features and val.typed.sampler is loader.typed.sampler
    assert len(list(val)) == len(val)
    assert "memory plan" in loader.plan()["text"] and loader.stats()["batches"] == len(loader)
    assert "memory" in repr(loader)


def test_without_times_is_the_homogeneous_engine(tiny, timed, caplog):
    plain = ringgnn.Loader(tiny / "plain", [-1], 2, split=None)
    assert plain.typed is None and plain.seed_time is None and "seed_time" not in next(iter(plain))
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        off = ringgnn.Loader(timed, [4], 300, ignore_time=True, seed=2)
        assert off.typed is None and off.seed_time is None and "seed_time" not in next(iter(off))
        # Edge times but no node times: sampled without times unless given input_time, warned.
        nodes = ringgnn.Loader(tiny / "ds", [-1], 2, split=None)
        assert nodes.typed is None and nodes.seed_time is None
    text = caplog.text
    assert "Loader with ignore_time=True samples without times" in text
    assert "node type 'node' has no node times" in text and "give input_time" in text


def test_refusals(tiny, timed):
    with pytest.raises(_core.InputError, match="no edge or node times"):
        ringgnn.Loader(tiny / "plain", [-1], 2, input_time=3, split=None)
    with pytest.raises(_core.InputError, match="no edge or node times"):
        ringgnn.NeighborSampler(tiny / "plain", [-1]).sample([1], input_time=[3])
    with pytest.raises(_core.InputError, match="has 3 times for 8 seeds"):
        ringgnn.Loader(tiny / "ds", [-1], 2, split=None, input_time=[1, 2, 3])
    with pytest.raises(_core.InputError, match="must be integer times"):
        ringgnn.Loader(tiny / "ds", [-1], 2, split=np.array([1]), input_time=[1.5])
    with pytest.raises(_core.InputError, match="give one of them"):
        ringgnn.Loader(tiny / "nt", [-1], 2, split=None, input_time=3, ignore_time=True)
    with pytest.raises(_core.InputError, match="give one of them"):
        ringgnn.HeteroLoader(tiny / "nt", [-1], "node", seeds=None, input_time=3, ignore_time=True)
    with pytest.raises(_core.InputError, match=r"cache_policy, hold: option\(s\) of the homogeneous engine"):
        ringgnn.Loader(tiny / "nt", [-1], 2, split=None, cache_policy="degree", hold=1)
    with pytest.raises(_core.InputError, match="temporal_strategy"):
        ringgnn.Loader(tiny / "nt", [-1], 2, split=None, temporal_strategy="newest")
    with pytest.raises(_core.InputError, match="temporal_strategy"):
        ringgnn.NeighborSampler(tiny / "nt", [-1], temporal_strategy="newest")
    timed_loader = ringgnn.Loader(timed, [4], 300)
    with pytest.raises(_core.InputError, match="both at seed times or both without"):
        ringgnn.Loader(timed, [4], 300, ignore_time=True, share=timed_loader)


def test_pyg_neighbor_loader_time_attr(tiny):
    """PyG's NeighborLoader(time_attr=..., input_time=...) with our sampler: at input_time, or by
    default (time_attr given) at the seeds' node times, as PyG samples."""
    ds = ringgnn.Dataset.open(tiny / "nt")
    sampler = RingNeighborSampler(ds, [-1, -1], time_attr="time")
    loader = NeighborLoader(ring_stores(ds), num_neighbors=[-1, -1], input_nodes=torch.tensor([1, 1, 0]),
                            input_time=torch.tensor([3, 9, 3]), time_attr="time", batch_size=3,
                            neighbor_sampler=sampler)
    (b,) = list(loader)
    # At 3, node 7 (time 7) is newer than its seed: dropped; at 9 node 1 keeps 0, 7 and 2.
    assert b.n_id.tolist() == [1, 1, 0, 0, 7, 2, 3, 3] and b.seed_time.tolist() == [3, 9, 3]
    same = ringgnn.NeighborSampler(ds, [-1, -1]).sample([1, 1, 0], input_time=[3, 9, 3])
    assert b.n_id.tolist() == same.node.tolist() and b.edge_index.tolist() == same.edge_index.tolist()
    # No input_time: each seed at its node time (1 at 1, 2 at 2): nothing is that old.
    (d,) = list(NodeLoader(ring_stores(ds), node_sampler=sampler, input_nodes=torch.tensor([1, 2]), batch_size=2))
    assert d.n_id.tolist() == [1, 2] and d.seed_time.tolist() == [1, 2]
    edge = RingNeighborSampler(ds, [-1], time_attr="edge_time")
    (e,) = list(NodeLoader(ring_stores(ds), node_sampler=edge, input_nodes=torch.tensor([1]),
                           input_time=torch.tensor([9]), batch_size=1))
    assert sorted(e.n_id[1:].tolist()) == [0, 2, 7]
    with pytest.raises(ringgnn.InputError, match="time_attr is 'time' or 'edge_time'"):
        RingNeighborSampler(ds, [-1], time_attr="ts")
    with pytest.raises(ringgnn.InputError, match="which it has none of"):
        RingNeighborSampler(tiny / "plain", [-1], time_attr="time")
    no_node_times = RingNeighborSampler(tiny / "ds", [-1], time_attr="edge_time")
    with pytest.raises(ringgnn.InputError, match="no node times to sample its seeds at: give input_time"):
        next(iter(NodeLoader(ring_stores(tiny / "ds"), node_sampler=no_node_times, input_nodes=torch.tensor([1]),
                             batch_size=1)))


def test_the_plans_probe_batch_is_sampled_at_the_loaders_times(tmp_path):
    """``probe_batch_bytes`` makes its batch at the loader's seed times: 200 seeds at distinct times
    each reach the same 10 hubs, 2,200 nodes in their own subgraphs, where a loader without times
    shares the hubs (210 nodes); the probe measures more, as the batches the plan is for hold."""
    from ringgnn.sampling.plan import probe_batch_bytes

    hubs, others = np.arange(10), np.arange(10, 210)
    edges = np.array([(h, v) for v in others for h in hubs], dtype=np.int64)
    np.save(tmp_path / "e.npy", edges)
    np.save(tmp_path / "t.npy", np.zeros(len(edges), dtype=np.int64))
    np.save(tmp_path / "n.npy", np.concatenate([np.zeros(10), 100 + others]).astype(np.int64))
    np.save(tmp_path / "x.npy", np.ones((210, 16), dtype=np.float32))
    build.convert(tmp_path / "e.npy", tmp_path / "at", edge_time=tmp_path / "t.npy", node_time=tmp_path / "n.npy",
                  features=tmp_path / "x.npy")
    build.convert(tmp_path / "e.npy", tmp_path / "plain", features=tmp_path / "x.npy")
    measured, sizes = {}, {}
    for name in ("at", "plain"):
        loader = ringgnn.HeteroLoader(tmp_path / name, [-1], "node", seeds=others, batch_size=200, shuffle=False)
        made = loader.make_batch
        loader.make_batch = lambda ids, epoch, index, times=None: sizes.setdefault(
            name, made(ids, epoch, index, times))
        measured[name] = probe_batch_bytes(loader, lambda batch: None, 1000)
    if measured["at"] is None:
        pytest.skip("the peak resident memory cannot be reset here (/proc/self/clear_refs)")
    assert (sizes["at"]["node"].num_nodes, sizes["plain"]["node"].num_nodes) == (2200, 210)
    assert sizes["at"]["node"].seed_time[:200].tolist() == (100 + others).tolist()
    assert measured["at"] > 3 * measured["plain"]
