"""Tests of ringgnn.models.hetero: R-GCN and heterogeneous GraphSAGE layers against their
formulas computed by hand on a tiny typed graph, the embedding tables of featureless types,
the config round trip, batches that lack relations, and learning on a planted typed graph."""

from __future__ import annotations

import json
from typing import Dict, List, Tuple

import pytest
import torch

from ringgnn.models.hetero import HeteroModel, hetero_batch_to_dicts

CITES, WRITES, WRITTEN_BY = ("a", "cites", "a"), ("b", "writes", "a"), ("a", "written_by", "b")

# A batch of the tiny graph: 4 nodes of type a (3 features each), 3 of featureless type b
# (global ids 4, 1, 3 of a table of 5). a0 has neighbors by both relations into a, a1 too,
# a2 only by `writes`, a3 none at all.
A_X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5], [-2.0, 1.0, 0.25], [0.0, 3.0, 1.0]])
B_NID = torch.tensor([4, 1, 3])
EDGES = {
    CITES: torch.tensor([[1, 2, 3], [0, 0, 1]]),
    WRITES: torch.tensor([[0, 1, 2, 0], [0, 0, 1, 2]]),
    WRITTEN_BY: torch.tensor([[0, 1], [0, 2]]),
}


def tiny(model: str, layers: int = 1, **kw) -> HeteroModel:
    torch.manual_seed(0)
    net = HeteroModel(["a", "b"], [CITES, WRITES, WRITTEN_BY], {"a": 3, "b": None}, {"a": 4, "b": 5}, "a",
                      hidden=4, out_dim=2, layers=layers, model=model, embed_dim=kw.pop("embed_dim", 2), **kw)
    return net.eval()


def run(net: HeteroModel, edges=EDGES) -> torch.Tensor:
    with torch.no_grad():
        return net({"a": A_X}, edges, {"a": torch.arange(4), "b": B_NID})


def neighbors(edges: Dict[Tuple[str, str, str], torch.Tensor], et, i: int) -> List[int]:
    ei = edges.get(et, torch.empty(2, 0, dtype=torch.long))
    return [int(s) for s, d in ei.t().tolist() if d == i]


def mean_rows(h: torch.Tensor, ids: List[int]) -> torch.Tensor:
    return h[ids].mean(0) if ids else torch.zeros(h.size(1))


def by_hand(net: HeteroModel, edges) -> torch.Tensor:
    """The first layer's output for the a nodes, from the formulas and the layer's weights."""
    conv = net.convs[0]
    h = {"a": A_X, "b": net.embeddings["b"].weight.detach()[B_NID]}
    rows = []
    for i in range(4):
        if net.model == "rgcn":
            root = conv.roots["a"]
            out = root.weight @ h["a"][i] + root.bias
            for et in (CITES, WRITES):
                w = conv.rels[":".join(et)].conv.lin_l.weight
                out = out + w @ mean_rows(h[et[0]], neighbors(edges, et, i))
        else:
            terms = []
            for et in (CITES, WRITES):
                c = conv.rels[":".join(et)].conv
                agg = mean_rows(h[et[0]], neighbors(edges, et, i))
                terms.append(c.lin_l.weight @ agg + c.lin_l.bias + c.lin_r.weight @ h["a"][i])
            out = sum(terms) / len(terms)
        rows.append(out)
    return torch.stack(rows).detach()


@pytest.mark.parametrize("model", ["rgcn", "sage"])
def test_one_layer_is_the_formula(model):
    net = tiny(model)
    for p in net.parameters():  # biases start at 0 in PyG's Linear: make every term count
        torch.nn.init.normal_(p)
    out = run(net)
    assert out.shape == (4, 2)
    torch.testing.assert_close(out, by_hand(net, EDGES))


@pytest.mark.parametrize("model", ["rgcn", "sage"])
def test_a_relation_missing_from_the_batch_has_no_edges(model):
    net = tiny(model)
    for p in net.parameters():
        torch.nn.init.normal_(p)
    partial = {WRITES: EDGES[WRITES]}
    out = run(net, partial)
    torch.testing.assert_close(out, by_hand(net, partial))
    torch.testing.assert_close(out, run(net, {**partial, CITES: torch.empty(2, 0, dtype=torch.long)}))
    # a0 and a1 had `cites` neighbors: their rows change; a2 and a3 had none: theirs do not.
    full = run(net)
    assert not torch.allclose(out[:2], full[:2])
    torch.testing.assert_close(out[2:], full[2:])


@pytest.mark.parametrize("model", ["rgcn", "sage"])
def test_featureless_types_use_the_embedding_rows_of_their_n_id(model):
    net = tiny(model)
    before = run(net)
    with torch.no_grad():
        net.embeddings["b"].weight[0] += 10.0  # global id 0: not in the batch
    torch.testing.assert_close(run(net), before)
    with torch.no_grad():
        net.embeddings["b"].weight[4] += 10.0  # global id 4 is local b0, written by a0 and a2
    after = run(net)
    changed = (after - before).abs().sum(1) > 1e-6
    assert changed.tolist() == [True, False, True, False]


def test_layers_hold_modules_only_for_types_that_reach_the_target():
    # c is entered from a but reaches nothing: no embedding, no layer computes it.
    net = HeteroModel(["a", "b", "c"], [CITES, WRITES, WRITTEN_BY, ("a", "to", "c")], {"a": 3, "b": None, "c": None},
                      {"b": 5, "c": 7}, "a", hidden=4, out_dim=2, layers=2, model="rgcn")
    assert set(net.embeddings) == {"b"}
    assert sorted(net.convs[0].roots) == ["a", "b"] and sorted(net.convs[1].roots) == ["a"]
    assert sorted(net.convs[1].rels) == ["a:cites:a", "b:writes:a"]
    c_ids = {"c": torch.tensor([0, 6])}
    out = net({"a": A_X}, {**EDGES, ("a", "to", "c"): torch.tensor([[0], [1]])}, {"b": B_NID, **c_ids})
    assert out.shape == (4, 2)


@pytest.mark.parametrize("model", ["rgcn", "sage"])
def test_config_round_trip_rebuilds_the_same_model(model):
    net = tiny(model, layers=2, embed_dim=None, dropout=0.25)
    cfg = json.loads(json.dumps(net.config()))
    assert cfg["edge_types"] == ["a:cites:a", "b:writes:a", "a:written_by:b"]
    fresh = HeteroModel.from_config(cfg).eval()
    assert fresh.config() == net.config()
    assert not torch.allclose(run(fresh), run(net))  # fresh weights differ ...
    fresh.load_state_dict(net.state_dict())
    torch.testing.assert_close(run(fresh), run(net), rtol=0, atol=0)  # ... the loaded ones do not


def test_bad_batches_and_configs_are_refused_with_the_field_named():
    net = tiny("sage")
    with pytest.raises(ValueError, match="'a:likes:b' is not one of the model's"):
        net({"a": A_X}, {("a", "likes", "b"): torch.tensor([[0], [0]])}, {"b": B_NID})
    with pytest.raises(ValueError, match=r"features of node type 'a' have shape \(4, 2\)"):
        net({"a": A_X[:, :2]}, EDGES, {"b": B_NID})
    with pytest.raises(ValueError, match="no relation enters it"):
        HeteroModel(["a", "b"], [WRITTEN_BY], {"a": 3, "b": None}, {"b": 5}, "a", 4, 2, 1)
    with pytest.raises(ValueError, match="num_nodes\\['b'\\]"):
        HeteroModel(["a", "b"], [WRITES], {"a": 3, "b": None}, {}, "a", 4, 2, 1)
    with pytest.raises(ValueError, match="unknown keys \\['fanouts'\\]"):
        HeteroModel.from_config({**net.config(), "fanouts": [5]})


def test_hetero_batch_to_dicts_reads_a_heterodata_batch():
    from torch_geometric.data import HeteroData

    data = HeteroData()
    data["a"].x, data["a"].n_id = A_X, torch.arange(4)
    data["b"].n_id = B_NID
    for et, ei in EDGES.items():
        data[et].edge_index = ei
    x_dict, edge_index_dict, n_id_dict = hetero_batch_to_dicts(data)
    assert set(x_dict) == {"a"} and set(n_id_dict) == {"a", "b"} and set(edge_index_dict) == set(EDGES)
    net = tiny("rgcn")
    with torch.no_grad():
        torch.testing.assert_close(net(x_dict, edge_index_dict, n_id_dict), run(net))


# --- learning ----------------------------------------------------------------------------------


def planted(papers: int = 160, authors: int = 32, classes: int = 4, dim: int = 8):
    """Papers with a class and pure-noise features; authors (featureless) of one class each,
    every paper written by 3 authors of its class; random citations. A paper's class shows only
    through its authors, whose class shows through their other papers' labels."""
    g = torch.Generator().manual_seed(1)
    y = torch.arange(papers) % classes
    author_class = torch.arange(authors) % classes
    src, dst = [], []
    for p in range(papers):
        pool = (author_class == y[p]).nonzero().flatten()
        for a in pool[torch.randperm(len(pool), generator=g)[:3]].tolist():
            src.append(a)
            dst.append(p)
    writes = torch.tensor([src, dst])
    edges = {("author", "writes", "paper"): writes, ("paper", "rev_writes", "author"): writes.flip(0),
             ("paper", "cites", "paper"): torch.randint(0, papers, (2, papers), generator=g)}
    x = torch.randn(papers, dim, generator=g)
    train = torch.zeros(papers, dtype=torch.bool)
    train[torch.randperm(papers, generator=g)[: papers * 6 // 10]] = True
    return x, y, edges, train, {"paper": papers, "author": authors}


def fit(net: torch.nn.Module, call, y: torch.Tensor, train: torch.Tensor, steps: int = 200) -> float:
    opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(steps):
        net.train()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(call()[train], y[train]).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        return (call()[~train].argmax(1) == y[~train]).float().mean().item()


def test_hetero_models_learn_what_features_alone_cannot():
    x, y, edges, train, num_nodes = planted()
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(16, 4))
    mlp_acc = fit(mlp, lambda: mlp(x), y, train)
    assert mlp_acc < 0.45  # 4 classes: chance is 0.25
    n_id = {t: torch.arange(n) for t, n in num_nodes.items()}
    for model in ("sage", "rgcn"):
        torch.manual_seed(0)
        net = HeteroModel(["paper", "author"], list(edges), {"paper": 8, "author": None}, num_nodes, "paper",
                          hidden=16, out_dim=4, layers=2, model=model, dropout=0.5)
        acc = fit(net, lambda: net({"paper": x}, edges, n_id), y, train)
        assert acc > 0.85 and acc > mlp_acc + 0.4, (model, acc, mlp_acc)
