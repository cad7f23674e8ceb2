"""ringgnn.pyg on heterogeneous datasets: the FeatureStore per node type, the GraphStore per
relation, RingNeighborSampler inside PyG's NodeLoader/NeighborLoader (batches equal
HeteroNeighborSampler's, with 0 and 2 workers), a hetero model on a batch, errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.data.graph_store import EdgeLayout  # noqa: E402
from torch_geometric.loader import NeighborLoader, NodeLoader  # noqa: E402

import ringgnn  # noqa: E402
from ringgnn import HeteroNeighborSampler, NodeType, Relation  # noqa: E402
from ringgnn.pyg import RingFeatureStore, RingGraphStore, RingNeighborSampler, ring_stores  # noqa: E402

N = {"author": 8, "paper": 12, "venue": 3}
RNG = np.random.default_rng(5)
X = {"paper": RNG.standard_normal((12, 4)).astype(np.float32), "author": RNG.standard_normal((8, 3)).astype(np.float32)}
Y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, -1, 1])
TRAIN = np.array([0, 2, 3, 5, 7, 8, 10])
EDGES = {
    "author:writes:paper": sorted({(int(a), int(p)) for a, p in zip(RNG.integers(0, 8, 20), RNG.integers(0, 12, 20))}),
    "paper:cites:paper": sorted({(int(a), int(b)) for a, b in zip(RNG.integers(0, 12, 25), RNG.integers(0, 12, 25))}),
    "paper:published_in:venue": [(p, p % 3) for p in range(12)],
}
# Per edge type as PyG's NeighborLoader takes num_neighbors; rev_cites left out at hop 1.
FANOUTS = {("author", "writes", "paper"): [2, 2], ("paper", "cites", "paper"): [2, 1],
           ("paper", "published_in", "venue"): [1, 1], ("paper", "rev_cites", "paper"): [0, 2],
           ("paper", "rev_writes", "author"): [2, 1], ("venue", "rev_published_in", "paper"): [2, 2]}


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """Papers (4-d features, labels, a train split), authors (3-d features, no labels), venues
    (nothing); writes, cites, published_in and their reverses."""
    d = tmp_path_factory.mktemp("pyg_hetero")
    for t, x in X.items():
        np.save(d / f"{t}_x.npy", x)
    np.save(d / "y.npy", Y)
    np.save(d / "train.npy", TRAIN)
    for r, pairs in EDGES.items():
        with open(d / f"{r.split(':')[1]}.csv", "w") as f:
            f.writelines(f"{s},{t}\n" for s, t in pairs)
    ringgnn.build_hetero(
        d / "ds",
        [NodeType("paper", N["paper"], features=d / "paper_x.npy", labels=d / "y.npy",
                  split={"train": str(d / "train.npy")}),
         NodeType("author", N["author"], features=d / "author_x.npy"), NodeType("venue", N["venue"])],
        [Relation(r, d / f"{r.split(':')[1]}.csv") for r in EDGES],
        add_reverse=True,
    )
    return ringgnn.Dataset.open(d / "ds")


def _csc(ds, r):
    rel = ds.relation(r)
    return rel.indptr(), np.concatenate([rel.neighbors(v) for v in range(rel.num_nodes)] + [np.zeros(0, np.int64)])


# --- stores ------------------------------------------------------------------------------------


def test_feature_store_serves_each_type(typed):
    fs = RingFeatureStore(typed, backend="pread")
    assert [(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()] == [("author", "x"), ("paper", "x"),
                                                                                 ("paper", "y")]
    for t, x in X.items():
        idx = torch.tensor([N[t] - 1, 0, 5, 5, 2])
        assert torch.equal(fs.get_tensor(group_name=t, attr_name="x", index=idx), torch.from_numpy(x[idx.numpy()]))
        assert torch.equal(fs.get_tensor(group_name=t, attr_name="x", index=None), torch.from_numpy(x))
        assert torch.equal(fs.get_tensor(group_name=t, attr_name="x", index=np.array([-1])), torch.from_numpy(x[[-1]]))
        assert torch.equal(fs.get_tensor(group_name=t, attr_name="x", index=torch.tensor([], dtype=torch.long)),
                           torch.zeros(0, x.shape[1]))
        assert fs.get_tensor_size(group_name=t, attr_name="x") == x.shape
        assert fs.reader(t).dim == x.shape[1]
    idx = torch.tensor([11, 10, 3])
    assert fs.get_tensor(group_name="paper", attr_name="y", index=idx).tolist() == Y[[11, 10, 3]].tolist()
    assert fs.get_tensor(group_name="paper", attr_name="y", index=3).item() == Y[3]
    assert fs.get_tensor_size(group_name="paper", attr_name="y") == (12,)
    with pytest.raises(KeyError, match="node type 'venue' has no node attribute 'x' \\(it has: none\\)"):
        fs.get_tensor(group_name="venue", attr_name="x", index=None)
    with pytest.raises(KeyError, match="node type 'author' has no node attribute 'y' \\(it has: x\\)"):
        fs.get_tensor(group_name="author", attr_name="y", index=None)
    with pytest.raises(KeyError, match="no node type None"):
        fs.get_tensor(group_name=None, attr_name="x", index=None)
    with pytest.raises(IndexError, match="out of range"):
        fs.get_tensor(group_name="author", attr_name="x", index=torch.tensor([8]))
    # Pickled (a spawned DataLoader worker): same rows from a reader of its own.
    fs2 = pickle.loads(pickle.dumps(fs))
    assert fs2.reader("paper") is not fs.reader("paper")
    assert torch.equal(fs2.get_tensor(group_name="paper", attr_name="x", index=idx), torch.from_numpy(X["paper"][idx]))


def test_graph_store_serves_each_relation_as_csc(typed):
    gs = RingGraphStore(typed)
    attrs = gs.get_all_edge_attrs()
    assert [a.edge_type for a in attrs] == typed.edge_types and len(attrs) == 6
    for a in attrs:
        src, _, dst = a.edge_type
        assert a.layout == EdgeLayout.CSC and a.size == (N[src], N[dst])
        row, colptr = gs.get_edge_index(a.edge_type, "csc")
        indptr, indices = _csc(typed, ":".join(a.edge_type))
        assert colptr.tolist() == indptr.tolist() and row.tolist() == indices.tolist()
    # Forward relations hold exactly the input pairs (src -> dst: src is an in-neighbor of dst).
    row, colptr = gs.get_edge_index(("author", "writes", "paper"), "csc")
    col = np.repeat(np.arange(N["paper"]), np.diff(colptr.numpy()))
    assert sorted(zip(row.tolist(), col.tolist())) == EDGES["author:writes:paper"]
    with pytest.raises(KeyError):
        gs.get_edge_index(("paper", "writes", "author"), "csc")
    g2 = pickle.loads(pickle.dumps(gs))
    row, _ = g2.get_edge_index(("paper", "cites", "paper"), "csc")
    assert row.tolist() == _csc(typed, "paper:cites:paper")[1].tolist()


# --- loaders -----------------------------------------------------------------------------------


def _check_batch(typed, batch, want, seed_type, seeds):
    """`batch` (a loader's HeteroData) is exactly `want` (HeteroNeighborSampler's sample of the
    same seeds), its edges exist, its features and labels are those of its nodes."""
    assert isinstance(batch, HeteroData)
    assert batch[seed_type].batch_size == want.batch_size == len(seeds)
    assert batch[seed_type].n_id[: len(seeds)].tolist() == list(seeds)
    assert set(batch.node_types) == set(typed.node_types)
    for t in typed.node_types:
        assert batch[t].n_id.tolist() == want.node[t].tolist()
        assert batch[t].num_sampled_nodes == list(want.num_sampled_nodes[t])
        if t in X:
            assert torch.equal(batch[t].x, torch.from_numpy(X[t][want.node[t]]))
        else:
            assert "x" not in batch[t]
    assert batch["paper"].y.tolist() == Y[want.node["paper"]].tolist()
    assert "y" not in batch["author"]
    for r in typed.relations:
        et = tuple(r.split(":"))
        ei = batch[et].edge_index
        assert ei.tolist() == [want.row[r].tolist(), want.col[r].tolist()]
        assert batch[et].num_sampled_edges == list(want.num_sampled_edges[r])
        # Every edge exists in its relation, and e_id is its position in the relation's CSC.
        indptr, indices = _csc(typed, r)
        u = batch[et[0]].n_id[ei[0]].numpy()
        v = batch[et[2]].n_id[ei[1]].numpy()
        e = batch[et].e_id.numpy()
        assert np.array_equal(indices[e], u)
        assert np.all((indptr[v] <= e) & (e < indptr[v + 1]))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_node_loader_batches_equal_hetero_sampler(typed, num_workers):
    # How PyG's batches map onto ringgnn's (seed, epoch, batch): with shuffle=False, batch b of
    # the loader holds input_nodes[b * batch_size : (b + 1) * batch_size], and RingNeighborSampler
    # samples it as batch b of the epoch set by set_epoch (worker w of n numbers its k-th batch
    # w + k * n, which is the batch's position in the epoch), with the sampler's own seed. So
    # HeteroNeighborSampler(seed=...).sample(those seeds, "paper", epoch=e, batch=b) is the
    # reference, whatever num_workers.
    reference = HeteroNeighborSampler(typed, FANOUTS, seed=11, with_edge_ids=True, backend="memory")
    sampler = RingNeighborSampler(typed, FANOUTS, seed=11, with_edge_ids=True, backend="pread")
    sampler.sampler.sample(TRAIN[:2], "paper")  # a core sampler exists before the workers fork
    loader = NodeLoader(data=ring_stores(typed), node_sampler=sampler, input_nodes=("paper", torch.from_numpy(TRAIN)),
                        batch_size=3, shuffle=False, num_workers=num_workers)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(loader) == 3
        for b, batch in enumerate(batches):
            seeds = TRAIN[b * 3:(b + 1) * 3]
            want = reference.sample(seeds, "paper", epoch=epoch, batch=b)
            _check_batch(typed, batch, want, "paper", seeds)
            assert batch["paper"].input_id.tolist() == list(range(b * 3, b * 3 + len(seeds)))
    # Different epochs draw differently (fanouts below the degrees somewhere).
    sampler.set_epoch(0)
    e0 = [b["paper"].n_id.tolist() for b in loader]
    sampler.set_epoch(1)
    assert e0 != [b["paper"].n_id.tolist() for b in loader]


def test_neighbor_loader_runs_the_ring_sampler(typed):
    """PyG's NeighborLoader with `neighbor_sampler=`: all authors as seeds (`input_nodes="author"`),
    one fanout list for every relation; seeds of a type without labels."""
    sampler = RingNeighborSampler(typed, [2, 2], seed=4, with_edge_ids=True)
    loader = NeighborLoader(ring_stores(typed), num_neighbors=[2, 2], input_nodes="author", batch_size=5,
                            neighbor_sampler=sampler)
    reference = HeteroNeighborSampler(typed, [2, 2], seed=4)
    batches = list(loader)
    assert len(batches) == 2
    for b, batch in enumerate(batches):
        seeds = np.arange(N["author"])[b * 5:(b + 1) * 5]
        _check_batch(typed, batch, reference.sample(seeds, "author", batch=b), "author", seeds)


def test_hetero_model_trains_on_a_batch(typed):
    from torch_geometric.nn import SAGEConv, to_hetero

    from ringgnn.models.hetero import HeteroModel, hetero_batch_to_dicts

    torch.manual_seed(0)
    loader = NodeLoader(data=ring_stores(typed), node_sampler=RingNeighborSampler(typed, [2, 2]),
                        input_nodes=("paper", torch.from_numpy(TRAIN)), batch_size=4)
    batch = next(iter(loader))
    bs = batch["paper"].batch_size
    target = batch["paper"].y[:bs].clamp(min=0)

    model = HeteroModel(typed.node_types, typed.edge_types, typed.feature_dims(), typed.num_nodes_dict, "paper",
                        hidden=8, out_dim=3, layers=2)
    x, edges, n_id = hetero_batch_to_dicts(batch)
    out = model(x, edges, n_id)[:bs]
    torch.nn.functional.cross_entropy(out, target).backward()
    assert out.shape == (bs, 3) and all(p.grad is not None for p in model.convs.parameters())

    # PyG's own to_hetero of a 2-layer GraphSAGE; venues (no features) get a learned embedding.
    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = SAGEConv((-1, -1), 8, aggr="mean"), SAGEConv((-1, -1), 3, aggr="mean")

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    venue = torch.nn.Embedding(N["venue"], 5)
    sage = to_hetero(SAGE(), batch.metadata(), aggr="mean")
    x = dict(x, venue=venue(batch["venue"].n_id))
    out = sage(x, batch.edge_index_dict)["paper"][:bs]
    torch.nn.functional.cross_entropy(out, target).backward()
    assert out.shape == (bs, 3) and venue.weight.grad is not None


def test_errors(typed):
    with pytest.raises(ringgnn.InputError, match="unknown relation 'paper:writes:author'"):
        RingNeighborSampler(typed, {("paper", "writes", "author"): [1], **FANOUTS})
    with pytest.raises(ringgnn.InputError, match="no entry for relation"):
        RingNeighborSampler(typed, {("author", "writes", "paper"): [1, 1]})

    def first(input_nodes, sampler=None):
        loader = NodeLoader(data=ring_stores(typed), node_sampler=sampler or RingNeighborSampler(typed, [1]),
                            input_nodes=input_nodes, batch_size=4)
        return next(iter(loader))

    with pytest.raises(ringgnn.InputError, match="no node type 'conference'"):
        first(("conference", torch.tensor([0, 1])))
    with pytest.raises(ringgnn.InputError, match="give the seeds with their node type"):
        first(torch.tensor([0, 1]))
    with pytest.raises(ringgnn.InputError, match="out of range"):
        first(("venue", torch.tensor([3])))
    with pytest.raises(ringgnn.InputError, match="same seed node twice"):
        first(("paper", torch.tensor([1, 1])))
    with pytest.raises(ringgnn.InputError, match="link sampling .* heterogeneous dataset"):
        from torch_geometric.sampler import EdgeSamplerInput

        RingNeighborSampler(typed, [1]).sample_from_edges(
            EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([0]), input_type=("author", "writes", "paper")))


def test_node_loader_samples_typed_seeds_at_input_time(tmp_path):
    """A typed dataset with edge times through PyG's NodeLoader with input_time: user 1 bought
    item 0 at time 2 and item 2 at time 5 (the reverse relation has the same times)."""
    from ringgnn.data.build import NodeType, Relation, build_hetero

    (tmp_path / "buys.csv").write_text("0,0\n1,0\n1,2\n")
    np.save(tmp_path / "et.npy", np.array([7, 2, 5], dtype=np.int64))
    build_hetero(tmp_path / "h", [NodeType("user", 2), NodeType("item", 3)],
                 [Relation("user:buys:item", tmp_path / "buys.csv", edge_time=tmp_path / "et.npy")], add_reverse=True)
    ds = ringgnn.Dataset.open(tmp_path / "h")
    sampler = RingNeighborSampler(ds, [-1])
    loader = NodeLoader(ring_stores(ds), node_sampler=sampler, input_nodes=("user", torch.tensor([1, 1])),
                        input_time=torch.tensor([3, 9]), batch_size=2)
    (batch,) = list(loader)
    assert batch["user"].n_id.tolist() == [1, 1] and batch["user"].seed_time.tolist() == [3, 9]
    # At 3 user 1 had bought item 0 only; at 9 items 0 and 2.
    assert batch["item"].n_id.tolist() == [0, 0, 2]
    assert batch["item", "rev_buys", "user"].edge_index.tolist() == [[0, 1, 2], [0, 1, 1]]
