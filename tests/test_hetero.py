"""Heterogeneous datasets end to end from Python: build, open, sample (exact by hand, invariants,
backends), load as HeteroData, errors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import ringgnn
from ringgnn import HeteroLoader, HeteroNeighborSampler, NodeType, Relation

WRITES = [(0, 0), (1, 0), (1, 1), (2, 3)]  # author -> paper
CITES = [(1, 0), (2, 0), (3, 1), (0, 2)]  # paper -> paper


def _edges(path, pairs):
    with open(path, "w") as f:
        f.writelines(f"{s},{d}\n" for s, d in pairs)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Four papers (features 2-d, labels, splits), three authors without features; writes and
    cites with their reverse relations."""
    d = tmp_path_factory.mktemp("hetero")
    np.save(d / "x.npy", np.arange(8, dtype=np.float32).reshape(4, 2))
    np.save(d / "y.npy", np.array([0, 1, 0, 1]))
    np.save(d / "train.npy", np.array([0, 1]))
    np.save(d / "val.npy", np.array([2]))
    np.save(d / "test.npy", np.array([3]))
    split = {s: str(d / f"{s}.npy") for s in ("train", "val", "test")}
    ringgnn.build_hetero(
        d / "ds",
        [NodeType("paper", 4, features=d / "x.npy", labels=d / "y.npy", split=split), NodeType("author", 3)],
        [Relation("author:writes:paper", _edges(d / "writes.csv", WRITES)),
         Relation("paper:cites:paper", _edges(d / "cites.csv", CITES))],
        add_reverse=True,
    )
    return d / "ds"


def test_dataset_parts(tiny):
    ds = ringgnn.Dataset.open(tiny)
    assert isinstance(ds, ringgnn.HeteroDataset)
    assert ds.node_types == ["author", "paper"]
    assert ds.relations == ["author:writes:paper", "paper:cites:paper", "paper:rev_cites:paper",
                            "paper:rev_writes:author"]
    assert ds.num_nodes_dict == {"author": 3, "paper": 4}
    assert ds.num_edges_dict == dict.fromkeys(ds.relations, 4)
    assert ds.feature_dims() == {"author": None, "paper": 2}
    writes = ds.relation("author:writes:paper")
    assert [list(writes.neighbors(v)) for v in range(4)] == [[0, 1], [1], [], [2]]
    rev = ds.relation(("paper", "rev_writes", "author"))
    assert [list(rev.neighbors(v)) for v in range(3)] == [[0], [0, 1], [3]]
    paper = ds.node_type("paper")
    assert list(paper.labels) == [0, 1, 0, 1]
    assert list(paper.split("train")) == [0, 1]
    assert ringgnn.verify(tiny)["files_checked"] == len(ds.manifest["files"])
    with pytest.raises(ringgnn.InputError, match="no node type 'venue'"):
        ds.node_type("venue")
    with pytest.raises(ringgnn.InputError, match="heterogeneous dataset.*NeighborSampler takes a homogeneous"):
        ringgnn.NeighborSampler(tiny, [2])


def test_sample_worked_out_by_hand(tiny):
    """Seeds paper 0, every neighbor, two hops (see the walk-through in docs/ARCHITECTURE.md,
    "Heterogeneous sampling"): relations in name order, each hop's frontier fixed when it starts."""
    s = HeteroNeighborSampler(tiny, [-1, -1], backend="memory").sample([0], "paper")
    assert {t: list(v) for t, v in s.node.items()} == {"author": [0, 1], "paper": [0, 1, 2, 3]}
    assert s.num_sampled_nodes == {"author": [0, 2, 0], "paper": [1, 2, 1]}
    got = {r: (list(s.row[r]), list(s.col[r]), list(s.num_sampled_edges[r])) for r in s.row}
    assert got == {
        "author:writes:paper": ([0, 1, 1], [0, 0, 1], [2, 1]),
        "paper:cites:paper": ([1, 2, 3, 0], [0, 0, 1, 2], [2, 2]),
        "paper:rev_cites:paper": ([2, 0, 0], [0, 1, 2], [1, 2]),
        "paper:rev_writes:author": ([0, 0, 1], [0, 1, 1], [0, 3]),
    }
    assert s.batch_size == 1
    # Per-relation fanouts, one relation left out: rev_cites never sampled, and cites only at hop 1.
    f = {"author:writes:paper": [-1, -1], "paper:cites:paper": [0, -1], "paper:rev_cites:paper": [0, 0],
         "paper:rev_writes:author": [-1, -1]}
    s = HeteroNeighborSampler(tiny, f, backend="memory").sample([0, 0, 3], "paper")
    assert list(s.node["paper"][:2]) == [0, 3]  # the duplicate seed kept once
    assert s.batch_size == 2
    assert list(s.num_sampled_edges["paper:rev_cites:paper"]) == [0, 0]
    assert list(s.num_sampled_edges["paper:cites:paper"])[0] == 0


def test_seeds_of_two_types_worked_out_by_hand(tiny):
    """Seeds author 2 and paper 1 (twice) in one sample, every neighbor, two hops. Hop 0: writes,
    cites and rev_cites expand p1 (reaching a1, p3, p0), rev_writes expands a2 (p3 again). Hop 1:
    the papers first reached at hop 0, p3 and p0, and the author a1 are expanded."""
    sampler = HeteroNeighborSampler(tiny, [-1, -1], backend="memory")
    s = sampler.sample_typed({"author": [2], "paper": [1, 1]})
    assert {t: list(v) for t, v in s.node.items()} == {"author": [2, 1, 0], "paper": [1, 3, 0, 2]}
    assert s.num_sampled_nodes == {"author": [1, 1, 1], "paper": [1, 2, 1]}
    got = {r: (list(s.row[r]), list(s.col[r]), list(s.num_sampled_edges[r])) for r in s.row}
    assert got == {
        "author:writes:paper": ([1, 0, 2, 1], [0, 1, 2, 2], [1, 3]),
        "paper:cites:paper": ([1, 0, 3], [0, 2, 2], [1, 2]),
        "paper:rev_cites:paper": ([2, 0, 3], [0, 1, 2], [1, 2]),
        "paper:rev_writes:author": ([1, 2, 0], [0, 1, 1], [1, 2]),
    }
    assert s.seed_types == ("author", "paper") and s.batch_sizes == {"author": 1, "paper": 1}
    with pytest.raises(ringgnn.InputError, match="seeds of several types.*batch_sizes"):
        s.batch_size
    data = s.to_hetero_data(input_id={"author": np.array([2]), "paper": np.array([1, 1])})
    assert data["author"].batch_size == 1 and data["paper"].batch_size == 1
    assert data["author"].input_id.tolist() == [2] and data["paper"].input_id.tolist() == [1, 1]
    assert data["paper", "cites", "paper"].edge_index.tolist() == [[1, 0, 3], [0, 2, 2]]
    # The same seeds as (type, ids) pairs, a type given twice, or in the other order.
    for seeds in ([("paper", [1]), ("author", [2]), ("paper", [1])], {"paper": [1, 1], "author": [2]}):
        t = sampler.sample_typed(seeds)
        assert t.num_sampled_nodes == s.num_sampled_nodes
        assert all(np.array_equal(t.row[r], s.row[r]) and np.array_equal(t.col[r], s.col[r]) for r in s.row)
    # One type: exactly sample(); every backend agrees.
    one = sampler.sample([0, 3], "paper", epoch=1, batch=2)
    for backend in ("memory", "pread", "auto"):
        other = HeteroNeighborSampler(tiny, [-1, -1], backend=backend)
        for t in (other.sample_typed({"paper": [0, 3]}, epoch=1, batch=2),
                  other.sample_typed({"paper": [0, 3], "author": []}, epoch=1, batch=2)):
            assert t.node.keys() == one.node.keys() and all(np.array_equal(t.node[k], one.node[k]) for k in t.node)
            assert all(np.array_equal(t.row[r], one.row[r]) for r in t.row)
            assert t.num_sampled_nodes == one.num_sampled_nodes
    assert one.seed_types == ("paper",) and one.batch_size == 2 and one.batch_sizes == {"paper": 2}


def test_seeds_of_several_types_errors(tiny):
    sampler = HeteroNeighborSampler(tiny, [1], backend="memory")
    with pytest.raises(ringgnn.InputError, match="no node type 'venue'"):
        sampler.sample_typed({"paper": [0], "venue": [0]})
    with pytest.raises(ringgnn.InputError, match="seed node 3 of node type author is out of range: that type has 3"):
        sampler.sample_typed({"paper": [3], "author": [0, 3]})
    with pytest.raises(ringgnn.InputError, match="seed node -1 of node type paper is negative"):
        sampler.sample_typed({"paper": [-1]})
    with pytest.raises(ringgnn.InputError, match="no node type given"):
        sampler.sample_typed({})
    with pytest.raises(ringgnn.InputError, match=r"not a \(node type, ids\) pair"):
        sampler.sample_typed([("paper", [0], 1)])
    with pytest.raises(ringgnn.InputError, match=r"seeds\['paper'\] must be a 1-D array"):
        sampler.sample_typed({"paper": [[0]]})
    # The core binding names the type too.
    core = sampler._sampler()
    with pytest.raises(ringgnn.InputError, match="seed type 'venue' is not a node type"):
        core.sample_typed([("venue", np.array([0]))])
    with pytest.raises(ringgnn.InputError, match="seed node 4 of node type paper is out of range"):
        core.sample_typed([("author", np.array([0])), ("paper", np.array([4]))])


def _csc(ds, r):
    rel = ds.relation(r)
    return [set(rel.neighbors(v)) for v in range(rel.num_nodes)], [len(rel.neighbors(v)) for v in range(rel.num_nodes)]


@pytest.mark.parametrize("fanout", [1, 2])
def test_every_edge_exists_and_counts_are_min_of_fanout_and_degree(tiny, fanout):
    ds = ringgnn.Dataset.open(tiny)
    lists = {r: _csc(ds, r) for r in ds.relations}
    sampler = HeteroNeighborSampler(ds, [fanout, fanout], backend="pread", seed=3)
    for batch in range(20):
        for seed_type in ("paper", "author"):
            seeds = np.random.default_rng(batch).permutation(ds.num_nodes_dict[seed_type])[:2]
            s = sampler.sample(seeds, seed_type, batch=batch)
            for t, ids in s.node.items():
                assert len(set(ids)) == len(ids)
                assert sum(s.num_sampled_nodes[t]) == len(ids)
            assert list(s.node[seed_type][:2]) == list(seeds)
            for r in ds.relations:
                src, _, dst = r.split(":")
                nbrs, deg = lists[r]
                u, v = s.node[src][s.row[r]], s.node[dst][s.col[r]]
                assert all(a in nbrs[b] for a, b in zip(u, v))
                assert sum(s.num_sampled_edges[r]) == len(s.row[r])
                for b in set(v.tolist()):
                    assert (v == b).sum() == min(fanout, deg[b])


def test_backends_give_identical_samples(tiny):
    outs = []
    for backend in ("memory", "pread", "auto"):
        s = HeteroNeighborSampler(tiny, [1, 1], backend=backend, seed=7).sample([1, 2], "paper", epoch=2, batch=5)
        outs.append((s.node, s.row, s.col))
    for o in outs[1:]:
        for a, b in zip(outs[0], o):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_errors(tiny):
    with pytest.raises(ringgnn.InputError, match="unknown relation 'paper:writes:author'"):
        HeteroNeighborSampler(tiny, {"paper:writes:author": [1]})
    with pytest.raises(ringgnn.InputError, match="no entry for relation"):
        HeteroNeighborSampler(tiny, {"author:writes:paper": [1]})
    with pytest.raises(ringgnn.InputError, match="same number of hops"):
        HeteroNeighborSampler(tiny, {r: [1] * (2 if r.startswith("author") else 1)
                                     for r in ringgnn.Dataset.open(tiny).relations})
    s = HeteroNeighborSampler(tiny, [1])
    with pytest.raises(ringgnn.InputError, match="out of range"):
        s.sample([4], "paper")
    with pytest.raises(ringgnn.InputError, match="no node type 'venue'"):
        s.sample([0], "venue")
    with pytest.raises(ringgnn.InputError, match="node type 'author' has no split 'train'"):
        HeteroLoader(tiny, [1], "author", seeds="train")
    # A homogeneous dataset is the one-type case: node type "node", relation "node:to:node".
    one = HeteroNeighborSampler(os.path.join(os.path.dirname(__file__), "fixtures", "v2-tiny"), [1])
    assert list(one.sample([0], "node").node) == ["node"]
    with pytest.raises(ringgnn.InputError, match="no node type 'paper'"):
        one.sample([0], "paper")


def test_loader_gives_hetero_data_with_features_and_labels(tiny):
    loader = HeteroLoader(tiny, [-1, -1], "paper", seeds=None, batch_size=2, shuffle=True, seed=1, threads=2)
    assert len(loader) == 2
    seen = []
    for b in loader:
        n = b["paper"].n_id.numpy()
        assert np.array_equal(b["paper"].x.numpy(), np.arange(8, dtype=np.float32).reshape(4, 2)[n])
        assert list(b["paper"].y.numpy()) == [[0, 1, 0, 1][i] for i in n]
        assert "x" not in b["author"]
        seen += list(b["paper"].input_id.numpy())
        assert b["paper"].batch_size == 2
        for et in b.edge_types:
            ei = b[et].edge_index
            assert ei.shape[0] == 2
            assert ei[0].numpy().max(initial=-1) < b[et[0]].num_nodes
            assert ei[1].numpy().max(initial=-1) < b[et[2]].num_nodes
    assert sorted(seen) == [0, 1, 2, 3]
    # Same epoch, same batches; threads do not change them.
    a = [b["paper"].n_id.tolist() for b in loader]
    loader2 = HeteroLoader(tiny, [-1, -1], "paper", seeds=None, batch_size=2, shuffle=True, seed=1, threads=1)
    assert a == [b["paper"].n_id.tolist() for b in loader2]


def test_a_pickled_sampler_and_loader_make_their_own_core_objects_and_the_same_batches(tiny):
    s = HeteroNeighborSampler(tiny, [1, 1], seed=7)
    want = s.sample([1, 2], "paper", epoch=2, batch=5)
    t = pickle.loads(pickle.dumps(s))
    assert t._graph is None and not hasattr(t._local, "core") and t.fanouts == s.fanouts
    assert isinstance(t.dataset, ringgnn.HeteroDataset) and t.dataset.path == s.dataset.path
    got = t.sample([1, 2], "paper", epoch=2, batch=5)
    for k in want.node:
        assert np.array_equal(got.node[k], want.node[k])
    loader = HeteroLoader(tiny, [-1, -1], "paper", seeds=None, batch_size=2, seed=1, threads=1)
    a = [b["paper"].n_id.tolist() for b in loader]
    again = pickle.loads(pickle.dumps(loader))
    assert again._core is None and again.features._protos is None and again.features._readers == []
    assert [b["paper"].n_id.tolist() for b in again] == a


def test_placement_holds_the_largest_neighbor_files_that_fit(tiny, monkeypatch):
    """`backend="auto"`: offset indexes always held, then within half of what the budget leaves
    the process, every neighbor file if all fit, else the largest that fit; samples never change."""
    from ringgnn import _options

    monkeypatch.setattr(_options, "held_memory", lambda: 0)  # what every plan takes off as held
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    ds = ringgnn.Dataset.open(tiny)
    index = 4 * sum(ds.num_nodes_dict[r.split(":")[2]] + 1 for r in ds.relations)  # u32 offsets
    assert HeteroNeighborSampler(ds, [1], memory=2 * (index + 4 * 16)).placement() == ("memory", [])
    s = HeteroNeighborSampler(ds, [-1, 1], memory=2 * (index + 16), seed=5)
    assert s.placement() == ("auto", ["author:writes:paper"])
    assert s.resolved_backend() == "auto, 1 of 4 relations in memory"
    assert HeteroNeighborSampler(ds, [1], memory=2 * index).placement() == ("auto", [])
    assert HeteroNeighborSampler(ds, [1], backend="pread", memory=1 << 40).placement() == ("pread", [])
    ref = HeteroNeighborSampler(ds, [-1, 1], backend="memory", seed=5).sample([2, 0], "paper", batch=3)
    got = s.sample([2, 0], "paper", batch=3)
    assert all(np.array_equal(ref.row[r], got.row[r]) and np.array_equal(ref.col[r], got.col[r]) for r in ref.row)


def test_commands_of_homogeneous_datasets_refuse_a_heterogeneous_one(tiny, capsys):
    from ringgnn import cli

    assert cli.main(["sample", str(tiny), "--fanouts", "2", "--epochs", "1"]) not in (0, None)
    assert "ringgnn sample takes a homogeneous one" in capsys.readouterr().err
    with pytest.raises(ringgnn.InputError, match="Loader takes a homogeneous one"):
        ringgnn.Loader(tiny, [2], 4)
    part = ringgnn.Dataset.open(tiny).relation("paper:cites:paper")
    with pytest.raises(ringgnn.InputError, match="relation/paper:cites:paper is one part of a heterogeneous dataset"):
        ringgnn.NeighborSampler(part, [2])
