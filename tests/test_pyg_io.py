"""``ringgnn.from_pyg`` and ``Dataset.to_pyg``: PyG ``Data`` and ``HeteroData`` built into
datasets, checked against the tensors they came from, and loaded back (round trips, also as a
property over random graphs); every bad input names the attribute and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ringgnn
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringgnn import _core
from torch_geometric.data import Data, HeteroData

# 6 nodes: a duplicate edge (0->1 twice), a self loop (2->2), node 5 isolated, a (2, 2)-free shape
EDGES = torch.tensor([[0, 0, 1, 2, 3, 4, 4], [1, 1, 2, 2, 0, 0, 3]])
X = torch.arange(18, dtype=torch.float32).reshape(6, 3) / 4
Y = torch.tensor([2, 0, -1, 1, 2, -1])
TRAIN = torch.tensor([True, True, False, True, False, False])
VAL = torch.tensor([False, False, False, False, True, False])


def csc(edges, n):
    lists = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        lists[d].append(s)
    return [sorted(x) for x in lists]


def neighbors(ds):
    return [ds.neighbors(v).tolist() for v in range(ds.num_nodes)]


def stored_order(edges):
    """edge_index as to_pyg gives it: sorted by destination, then source."""
    order = np.lexsort((edges[0].numpy(), edges[1].numpy()))
    return edges[:, torch.from_numpy(order)]


def assert_nothing_left(out: Path):
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


def data(**kw):
    d = Data(edge_index=EDGES, x=X, y=Y, train_mask=TRAIN, val_mask=VAL, num_nodes=6)
    for k, v in kw.items():
        setattr(d, k, v)
    return d


def test_data_converts_exactly_and_round_trips(tmp_path):
    ringgnn.from_pyg(data(), tmp_path / "out")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.num_nodes == 6 and neighbors(ds) == csc(EDGES, 6)
    assert ds.labels.tolist() == Y.tolist() and ds.split_names == ["train", "val"]
    assert ds.split("train").tolist() == [0, 1, 3] and ds.split("val").tolist() == [4]
    back = ds.to_pyg()
    assert torch.equal(back.edge_index, stored_order(EDGES))
    assert torch.equal(back.x, X) and torch.equal(back.y, Y)
    assert torch.equal(back.train_mask, TRAIN) and torch.equal(back.val_mask, VAL)
    assert back.num_nodes == 6


def test_index_splits_given_splits_and_undirected(tmp_path):
    d = Data(edge_index=EDGES, num_nodes=7, train_idx=torch.tensor([6, 0]), test_idx=np.array([2]))
    ringgnn.from_pyg(d, tmp_path / "a", undirected=True)
    ds = ringgnn.Dataset.open(tmp_path / "a")
    reverse = EDGES.flip(0)[:, EDGES[0] != EDGES[1]]  # a self loop's reverse is itself, stored once
    assert neighbors(ds) == csc(torch.cat([EDGES, reverse], 1), 7)  # 7 nodes: 5 and 6 isolated
    assert ds.split("train").tolist() == [6, 0] and ds.split("test").tolist() == [2]
    assert ds.feature_dim is None and ds.labels is None
    # split= overrides the store's masks: masks, ids, or the builder's fractions
    ringgnn.from_pyg(data(), tmp_path / "b", split={"train": VAL, "extra": torch.tensor([5])})
    assert ringgnn.Dataset.open(tmp_path / "b").split("extra").tolist() == [5]
    ringgnn.from_pyg(data(), tmp_path / "c", split="train=0.5,test=0.5", seed=3)
    ds = ringgnn.Dataset.open(tmp_path / "c")
    assert len(ds.split("train")) == 2 and set(ds.split("train").tolist()) <= {0, 1, 3, 4}  # labeled nodes


def test_float_labels_with_nan_and_half_features(tmp_path):
    y = torch.tensor([1.0, float("nan"), 0.0, 2.0, float("nan"), 0.0])
    ringgnn.from_pyg(data(y=y, x=X.half()), tmp_path / "out")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.labels.tolist() == [1, -1, 0, 2, -1, 0] and ds.feature_dtype == "f16"
    assert torch.equal(ds.to_pyg().x, X.half().float())


def hetero():
    h = HeteroData()
    h["paper"].x = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    h["paper"].y = torch.tensor([0, 1, 1, -1])
    h["paper"].train_mask = torch.tensor([True, False, True, False])
    h["author"].num_nodes = 3
    h["author"].x = torch.tensor([[1.5], [2.5], [-1.0]], dtype=torch.bfloat16)
    h["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 2, 2], [0, 0, 3, 1]])
    h["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 2]])  # (2, 2): two edges
    return h


def test_hetero_data_converts_exactly_and_round_trips(tmp_path):
    h = hetero()
    ringgnn.from_pyg(h, tmp_path / "out", add_reverse=True)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.num_nodes_dict == {"author": 3, "paper": 4}
    w = h["author", "writes", "paper"].edge_index
    assert neighbors(ds.relation("author:writes:paper")) == csc(w, 4)
    assert neighbors(ds.relation("paper:rev_writes:author")) == csc(w.flip(0), 3)
    assert neighbors(ds.relation("paper:cites:paper")) == [[], [0], [1], []]
    assert ds.node_type("author").feature_dtype == "bf16"
    back = ds.to_pyg()
    assert set(back.edge_types) == {("author", "writes", "paper"), ("paper", "cites", "paper"),
                                    ("paper", "rev_writes", "author"), ("paper", "rev_cites", "paper")}
    assert torch.equal(back["author", "writes", "paper"].edge_index, stored_order(w))
    assert torch.equal(back["paper"].x, h["paper"].x) and torch.equal(back["paper"].y, h["paper"].y)
    assert torch.equal(back["author"].x, h["author"].x.float())  # bf16 values are exact in f32
    assert torch.equal(back["paper"].train_mask, h["paper"].train_mask)
    assert back["author"].num_nodes == 3 and "y" not in back["author"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=25))))
def test_round_trip_keeps_every_edge(tmp_path_factory, case):
    n, pairs = case
    edges = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T
    out = tmp_path_factory.mktemp("rt") / "out"
    ringgnn.from_pyg(Data(edge_index=edges, num_nodes=n), out)
    back = ringgnn.Dataset.open(out).to_pyg()
    assert back.num_nodes == n
    assert torch.equal(back.edge_index, stored_order(edges))


# --- bad input ---------------------------------------------------------------------------------

BAD = [
    (lambda: ({"edge_index": EDGES}, {}), r"takes a torch_geometric.data.Data or HeteroData, not a dict"),
    (lambda: (Data(x=X), {}), r"data: no edge_index"),
    (lambda: (data(edge_index=torch.tensor([[0, 6], [1, 2]])), {}), r"data.edge_index\[0, 1\]: source 6 is out of"),
    (lambda: (data(edge_index=EDGES.float()), {}), r"data.edge_index: float32 of shape \(2, 7\)"),
    (lambda: (data(x=torch.ones(6, 2, dtype=torch.long)), {}), r"data.x: int64 .*cast integer features"),
    (lambda: (data(x=torch.ones(5, 2)), {}), r"data.x: float32 of shape \(5, 2\); give float features of shape \(6"),
    (lambda: (data(y=torch.rand(6)), {}), r"data.y\[0\] = .*: not a class"),
    (lambda: (data(y=torch.ones(6, 3, dtype=torch.long)), {}), r"data.y: shape \(6, 3\); give one class per node"),
    (lambda: (data(y=torch.tensor([0, -2, 0, 0, 0, 0])), {}), r"data.y\[1\] = -2"),
    (lambda: (data(train_mask=torch.ones(6, 2, dtype=torch.bool)), {}), r"data.train_mask: a mask of shape \(6, 2\)"),
    (lambda: (data(), {"split": {"train": torch.tensor([0, 9])}}), r"split\['train'\]\[1\]: node 9 is out of range"),
    (lambda: (hetero(), {"undirected": True}), r"for a HeteroData pass add_reverse=True"),
    (lambda: (data(), {"add_reverse": True}), r"for a Data pass undirected=True"),
    (lambda: (hetero(), {"split": "train=0.5"}), r"a HeteroData's split is a dict node type -> split spec"),
]


@pytest.mark.parametrize("make,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_names_the_attribute_and_leaves_nothing(tmp_path, make, pattern):
    obj, kw = make()
    with pytest.raises(_core.InputError, match=pattern):
        ringgnn.from_pyg(obj, tmp_path / "out", **kw)
    assert_nothing_left(tmp_path / "out")


def test_hetero_edge_out_of_its_types_range(tmp_path):
    h = hetero()
    h["author", "writes", "paper"].edge_index = torch.tensor([[3], [0]])  # 3 authors: ids 0..2
    with pytest.raises(_core.InputError, match=r"data\[\('author', 'writes', 'paper'\)\].edge_index\[0, 0\]: "
                       r"source 3 is out of range \(3 nodes\)"):
        ringgnn.from_pyg(h, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


def test_to_pyg_refuses_what_does_not_fit(tmp_path):
    ringgnn.from_pyg(data(), tmp_path / "out")
    with pytest.raises(_core.InputError, match=r"more than 0.0 GiB; sample it with ringgnn's loaders"):
        ringgnn.Dataset.open(tmp_path / "out").to_pyg(memory=100)


def test_attributes_not_converted_are_reported(tmp_path, caplog):
    d = data(edge_attr=torch.ones(7, 2), year=torch.arange(6))
    ringgnn.from_pyg(d, tmp_path / "out")
    assert "from_pyg: not converted: edge_attr, year" in caplog.text
    h = hetero()
    h["author", "writes", "paper"].edge_weight = torch.ones(4)
    ringgnn.from_pyg(h, tmp_path / "h")
    assert "not converted of ('author', 'writes', 'paper'): edge_weight" in caplog.text
