"""ringgnn.pyg: the FeatureStore/GraphStore pair, RingNeighborSampler inside PyG's NodeLoader
(0 and 2 workers give the batches NeighborSampler gives), and the README training example."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _sampling import REPO_README, make_dataset, needs_sampler, sbm

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data.graph_store import EdgeLayout  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402

import ringgnn  # noqa: E402
from ringgnn import NeighborSampler  # noqa: E402
from ringgnn.pyg import EDGE_TYPE, RingFeatureStore, RingGraphStore, RingNeighborSampler, ring_stores  # noqa: E402


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return sbm(tmp_path_factory.mktemp("sbm"), nodes=2000)


# --- stores ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("dim", [3, 8, 1024, 1100])  # many rows per page, one per page, rows over a page
def test_feature_store_reads_page_packed_rows(tmp_path, dtype, dim):
    n = 700 if dim < 1024 else 9
    x = np.random.default_rng(dim).standard_normal((n, dim)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    labels = np.arange(n) % 3
    labels[1] = -1
    np.save(tmp_path / "y.npy", labels)
    ds = make_dataset(
        tmp_path,
        "d",
        [(i, (i + 1) % n) for i in range(n)],
        features=tmp_path / "x.npy",
        labels=tmp_path / "y.npy",
        feature_dtype=dtype,
    )
    want = torch.from_numpy(x).to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]).float()
    fs = RingFeatureStore(ds)
    idx = torch.tensor([n - 1, 0, 5, n // 2, 5])
    got = fs.get_tensor(group_name=None, attr_name="x", index=idx)
    assert got.dtype == torch.float32 and torch.equal(got, want[idx])
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=None), want)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=np.array([2])), want[[2]])
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="y", index=idx), torch.from_numpy(labels)[idx])
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (n, dim)
    assert [a.attr_name for a in fs.get_all_tensor_attrs()] == ["x", "y"]
    with pytest.raises(KeyError, match="no node attribute 'z'"):
        fs.get_tensor(group_name=None, attr_name="z", index=idx)
    with pytest.raises(IndexError, match="out of range"):
        fs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([n]))
    with pytest.raises(NotImplementedError, match="read-only"):
        fs.put_tensor(torch.zeros(1), group_name=None, attr_name="x", index=None)


@pytest.mark.parametrize(
    "opts",
    [dict(backend="memory"), dict(backend="pread"), dict(backend="uring"), dict(backend="uring", direct=True),
     dict(backend="pread", cache=20 * (4 * 16 + 8)), dict(backend="auto", cache=1 << 30)],
)
def test_feature_store_backends_and_cache_read_the_same_rows(tmp_path, opts):
    n, dim = 300, 16
    x = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    # A star into node 0 plus a path: node 0 has the highest in-degree, so a cache holds it first.
    ds = make_dataset(tmp_path, "d", [(i, 0) for i in range(1, n)] + [(i, i + 1) for i in range(n - 1)],
                      features=tmp_path / "x.npy")
    fs = RingFeatureStore(ds, **opts)
    idx = np.array([0, 299, 7, 0, 150, 7, 1])
    try:
        got = fs.get_tensor(group_name=None, attr_name="x", index=torch.from_numpy(idx))
    except OSError as e:
        if opts["backend"] == "uring" and "io_uring" in str(e):
            pytest.skip(f"io_uring is not available here: {e}")
        raise
    assert torch.equal(got, torch.from_numpy(x[idx]))
    st = fs.reader().stats()
    assert st["rows_requested"] == 7 and st["distinct_rows"] == 5
    if opts.get("cache"):
        assert st["cache_hits"] >= 1  # node 0 at least (the largest in-degree)
        # Each cached row costs its stored bytes plus its 8-byte id.
        assert fs.reader().cached_rows == (20 if opts["cache"] < 1 << 20 else n)
    else:
        assert st["cache_hits"] == 0
    if opts["backend"] == "memory":
        assert st["bytes_read"] == 0
    elif not opts.get("cache") or opts["cache"] < 1 << 20:
        assert 0 < st["bytes_read"] <= 5 * 4096  # only the pages of the 5 distinct rows



def test_graph_store_is_the_csc(graph):
    gs = RingGraphStore(graph)
    (attr,) = gs.get_all_edge_attrs()
    assert attr.edge_type == EDGE_TYPE and attr.layout == EdgeLayout.CSC and attr.size == (2000, 2000)
    row, colptr = gs.get_edge_index(EDGE_TYPE, "csc")
    assert colptr.tolist() == graph.indptr().tolist()
    for v in (0, 7, 1999):
        assert row[colptr[v] : colptr[v + 1]].tolist() == graph.neighbors(v).tolist()
    rows, cols, _ = gs.coo()
    assert rows[EDGE_TYPE].numel() == graph.num_edges == cols[EDGE_TYPE].numel()
    with pytest.raises(KeyError):
        gs.get_edge_index(EDGE_TYPE, "csr")


# --- NodeLoader --------------------------------------------------------------------------------


def _loader(graph, num_workers, **kwargs):
    sampler = RingNeighborSampler(graph, [5, 3], seed=9, **kwargs)
    loader = NodeLoader(
        data=ring_stores(graph),
        node_sampler=sampler,
        input_nodes=torch.from_numpy(graph.split("train")),
        batch_size=100,
        shuffle=False,
        num_workers=num_workers,
    )
    return sampler, loader


@needs_sampler
@pytest.mark.parametrize("num_workers", [0, 2])
def test_node_loader_batches_equal_neighbor_sampler(graph, num_workers):
    reference = NeighborSampler(graph, [5, 3], seed=9)
    train = graph.split("train")
    x = RingFeatureStore(graph).get_tensor(group_name=None, attr_name="x", index=None)
    labels = torch.from_numpy(graph.labels)
    sampler, loader = _loader(graph, num_workers)
    sampler.sampler.sample(train[:10])  # a core sampler exists before the workers fork
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(loader) == -(-len(train) // 100)
        for b, batch in enumerate(batches):
            want = reference.sample(train[b * 100 : (b + 1) * 100], epoch=epoch, batch=b)
            assert batch.batch_size == want.batch_size
            assert batch.n_id.tolist() == want.node.tolist()
            assert batch.edge_index.tolist() == [want.row.tolist(), want.col.tolist()]
            assert batch.num_sampled_edges == want.num_sampled_edges
            assert torch.equal(batch.x, x[batch.n_id]) and torch.equal(batch.y, labels[batch.n_id])
            assert batch.num_nodes == len(want.node)


@needs_sampler
def test_node_loader_rejects_duplicate_seeds(graph):
    loader = NodeLoader(
        data=ring_stores(graph),
        node_sampler=RingNeighborSampler(graph, [2]),
        input_nodes=torch.tensor([3, 3]),
        batch_size=2,
    )
    with pytest.raises(ringgnn.InputError, match="same seed node twice"):
        next(iter(loader))


def _readme_snippet() -> str:
    text = REPO_README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (snippet,) = [b for b in blocks if "NodeLoader(" in b]
    return snippet


@needs_sampler
def test_readme_example_trains(tmp_path, monkeypatch, capsys):
    """The README's Sampling example runs as written, and the loss goes down."""
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "readme"}
    exec(compile(_readme_snippet(), "README.md", "exec"), scope)
    losses = scope["losses"]
    per_epoch = len(losses) // 3
    assert np.mean(losses[-per_epoch:]) < 0.8 * np.mean(losses[:per_epoch]), losses
    assert "epoch 2: loss" in capsys.readouterr().out


@needs_sampler
def test_node_loader_samples_at_input_time(tmp_path):
    """PyG's NodeLoader with input_time: each seed sampled at its time by the one-type typed
    sampler (docs/FORMAT.md's example: node 1's in-edges from 0, 7, 2, 1 at times 3, 3, 5, 9)."""
    (tmp_path / "e.txt").write_text("2 1\n7 1\n0 1\n1 1\n3 0\n")
    np.save(tmp_path / "t.npy", np.array([5, 3, 3, 9, -4], dtype=np.int64))
    ringgnn.data.build.convert(tmp_path / "e.txt", tmp_path / "ds", edge_time=tmp_path / "t.npy")
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    sampler = RingNeighborSampler(ds, [-1, -1])
    loader = NodeLoader(data=ring_stores(ds), node_sampler=sampler, input_nodes=torch.tensor([1, 1, 0]),
                        input_time=torch.tensor([3, 9, 3]), batch_size=3)
    (batch,) = list(loader)
    # Node 1 at 3 and at 9 are two subgraphs; 0 at 3 shares the first (as HeteroNeighborSampler gives it).
    assert batch.n_id.tolist() == [1, 1, 0, 7, 0, 7, 2, 3, 3]
    assert batch.edge_index.tolist() == [[2, 3, 4, 5, 6, 1, 7, 8], [0, 0, 1, 1, 1, 1, 2, 4]]
    assert batch.batch_size == 3 and batch.seed_time.tolist() == [3, 9, 3]
    # Without times, the plain sample; the same seed twice at one time is refused.
    (plain,) = list(NodeLoader(data=ring_stores(ds), node_sampler=RingNeighborSampler(ds, [-1, -1]),
                               input_nodes=torch.tensor([1]), batch_size=1))
    assert plain.n_id.tolist() == [1, 0, 7, 2, 3]
    with pytest.raises(ringgnn.InputError, match="same seed node twice at one time"):
        next(iter(NodeLoader(data=ring_stores(ds), node_sampler=sampler, input_nodes=torch.tensor([1, 1]),
                             input_time=torch.tensor([4, 4]), batch_size=2)))
    last = RingNeighborSampler(ds, [2], temporal_strategy="last")
    (b,) = list(NodeLoader(data=ring_stores(ds), node_sampler=last, input_nodes=torch.tensor([1]),
                           input_time=torch.tensor([9]), batch_size=1))
    assert b.n_id.tolist() == [1, 2]
