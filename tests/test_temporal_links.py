"""Link prediction at times (issue 36): link batches sample each pair, and its negatives, at the
pair's time minus one on the typed engine (``LinkLoader(edge_label_time=)``,
``HeteroLinkBatches(time=)``; a homogeneous dataset as its one-type case), negatives are drawn
among the nodes not newer than their pair, and nothing sampled is at or after its pair's time."""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import ringgnn
from ringgnn import InputError
from ringgnn.data import build
from ringgnn.data.build import NodeType, Relation, build_hetero
from ringgnn.inference.scoring import predict_edges, predict_link_edges, split_scores
from ringgnn.sampling.hetero import HeteroNeighborSampler
from ringgnn.sampling.links import HeteroLinkBatches, LinkLoader
from ringgnn.sampling.pairs import LinkPairs, NegativeSampling

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

R = "node:to:node"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Edges 0->1 @5, 2->1 @7, 3->1 @9, 1->2 @1, 0->2 @3, 3->0 @2 over 4 nodes (one-hot
    features): node 1's list is (5, 0), (7, 2), (9, 3), node 2's (1, 1), (3, 0), node 0's (2, 3)."""
    d = tmp_path_factory.mktemp("tiny")
    (d / "e.txt").write_text("0 1\n2 1\n3 1\n1 2\n0 2\n3 0\n")
    np.save(d / "t.npy", np.array([5, 7, 9, 1, 3, 2], dtype=np.int64))
    np.save(d / "x.npy", np.eye(4, dtype=np.float32))
    np.save(d / "nt.npy", np.array([0, 4, 8, 12], dtype=np.int64))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "t.npy", features=d / "x.npy")
    build.convert(d / "e.txt", d / "nodes", edge_time=d / "t.npy", node_time=d / "nt.npy", features=d / "x.npy")
    build.convert(d / "e.txt", d / "plain", features=d / "x.npy")
    return d


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """A 2,000-node SBM with uniform edge and node times in [0, 1000)."""
    d = tmp_path_factory.mktemp("timed") / "g"
    build.generate_sbm(d, nodes=2000, classes=4, avg_degree=12, feature_dim=4, edge_time="uniform",
                       node_time="uniform", time_range=(0, 1000))
    return d


def _ends(data):
    """The batch's (node, time) of each row of ``n_id``."""
    return list(zip(data.n_id.tolist(), data.seed_time.tolist()))


def test_link_loader_samples_each_pair_before_its_time(tiny):
    # Pairs 0->1 at 7 and 2->1 at 9: sampled at 6 and 8. Seeds (time, node) order: 0@6, 1@6, 1@8, 2@8.
    # At 6 node 1 has only 0@5 (0 is a seed), node 0 has 3@2 (new); at 8 node 1 has 0@5 (new at 8)
    # and 2@7, node 2 has 1@1 and 0@3: the positive 2->1 @9 is not there, nor 3->1 @9.
    loader = LinkLoader(tiny / "ds", [-1], 2, edges=np.array([[0, 2], [1, 1]]), edge_label_time=[7, 9],
                        shuffle=False, threads=1)
    (data,) = list(loader)
    assert _ends(data) == [(0, 6), (1, 6), (1, 8), (2, 8), (3, 6), (0, 8)]
    assert data.batch_size == 4 and data.x.shape == (6, 4)
    assert (data.x.argmax(1) == data.n_id).all()
    assert data.edge_label_index.tolist() == [[0, 3], [1, 2]]
    assert data.edge_label_time.tolist() == [7, 9] and data.input_id.tolist() == [0, 1]
    ends = _ends(data)
    edges = {(ends[r], ends[c]) for r, c in data.edge_index.t().tolist()}
    assert edges == {((3, 6), (0, 6)), ((0, 6), (1, 6)), ((0, 8), (1, 8)), ((2, 8), (1, 8)), ((1, 8), (2, 8)),
                     ((0, 8), (2, 8))}
    # A pair at the time of an edge does not see it: 0->1 at 5 sees nothing into 1.
    (data,) = list(LinkLoader(tiny / "ds", [-1], 1, edges=np.array([[0], [1]]), edge_label_time=[5], threads=1))
    assert _ends(data) == [(0, 4), (1, 4), (3, 4)]


def test_link_loader_at_times_reports_the_typed_engine(tiny):
    """stats() and plan() of a LinkLoader at times: its typed engine's, as Loader's at times."""
    loader = LinkLoader(tiny / "ds", [-1], 2, edges=np.array([[0, 2], [1, 1]]), edge_label_time=[7, 9],
                        shuffle=False, threads=1)
    assert loader.stats()["batches"] == 0
    (data,) = list(loader)
    st = loader.stats()
    assert st["batches"] == 1 and set(st["features"]) == {"node"}
    assert st["features"]["node"]["rows_requested"] == len(data.n_id) == 6
    assert st["features"]["node"]["distinct_rows"] == len(set(data.n_id.tolist())) == 4
    plan = loader.plan()
    assert plan == {"text": loader.typed.plan.text(), "note": ""} and "relation node:to:node" in plan["text"]
    assert loader.backend == loader.typed.sampler.resolved_backend()


def test_negatives_at_the_pair_time(tiny):
    # Triplet: each pair's negatives are sampled at its time; the same node at two times is two seeds.
    loader = LinkLoader(tiny / "ds", [1], 2, edges=np.array([[0, 2], [1, 1]]), edge_label_time=[7, 9],
                        shuffle=False, threads=1, neg_sampling=NegativeSampling("triplet", 3))
    (data,) = list(loader)
    ends = _ends(data)
    for i, t in enumerate([6, 8]):
        assert ends[int(data.src_index[i])] == ((0, 2)[i], t) and ends[int(data.dst_pos_index[i])] == (1, t)
        assert {ends[int(j)][1] for j in data.dst_neg_index[i]} == {t}
    assert len(set(ends)) == len(ends)
    assert max(data.src_index.max(), data.dst_pos_index.max(), data.dst_neg_index.max()) < data.batch_size
    # Binary: negative j at the time of positive j mod n, labelled 0 after the positives.
    loader = LinkLoader(tiny / "ds", [1], 2, edges=np.array([[0, 2], [1, 1]]), edge_label_time=[7, 9],
                        shuffle=False, threads=1, neg_sampling=NegativeSampling("binary", 2))
    (data,) = list(loader)
    ends = _ends(data)
    assert data.edge_label.tolist() == [1, 1, 0, 0, 0, 0] and data.edge_label_time.tolist() == [7, 9, 7, 9, 7, 9]
    for (s, d), t in zip(data.edge_label_index.t().tolist(), data.edge_label_time.tolist()):
        assert ends[s][1] == ends[d][1] == t - 1


def test_negatives_are_not_newer_than_their_pair(tiny):
    ds = ringgnn.Dataset.open(tiny / "nodes")  # node times 0, 4, 8, 12
    nt = ds.node_times()
    for weight in ("uniform", "degree"):
        pairs = LinkPairs(ds, 3, NegativeSampling("binary", 50, weight))
        times = np.array([0, 5, 9, 100])
        p = pairs.pairs([0, 0, 1, 2], [1, 2, 2, 1], time=times)
        n = 4
        ends = [(int(s), int(t)) for s, t in zip(p.seeds, p.seed_time)]
        neg = p.inverse.reshape(2, -1)[:, n:]
        neg_time = np.tile(times, 50)
        for side in (0, 1):
            ids = np.array([ends[j][0] for j in neg[side]])
            assert (nt[ids] <= neg_time).all()  # a pair at 0 can only draw node 0
            assert {ends[j][1] for j in neg[side]} <= set((times - 1).tolist())
        drawn = np.array([ends[j][0] for j in neg[1]])
        assert set(drawn[neg_time == 100].tolist()) == ({0, 1, 2, 3} if weight == "uniform" else {0, 1, 2})
        # The same (seed, epoch, batch): the same negatives.
        again = pairs.pairs([0, 0, 1, 2], [1, 2, 2, 1], time=times)
        assert (again.seeds == p.seeds).all() and (again.inverse == p.inverse).all()
    # Without node times the negatives are the ones drawn without times.
    plain = LinkPairs(ringgnn.Dataset.open(tiny / "ds"), 3, NegativeSampling("triplet", 4))
    at, off = plain.pairs([0, 2], [1, 1], time=[7, 9]), plain.pairs([0, 2], [1, 1])
    assert at.seeds[at.inverse][4:].tolist() == off.seeds[off.inverse][4:].tolist()


def test_typed_link_batches_at_times(tmp_path):
    # user:buys:item u0->i0 @1, u1->i0 @4, u2->i1 @2, u0->i1 @6, and its reverse. Pairs (u0, i0) @4 and
    # (u1, i1) @7: users 0@3, 1@6 and items 0@3, 1@6 are the seeds. At 3, u0's items: i0@1 (a seed); at 6,
    # u1's: i0@4 (new); i0 at 3: u0@1 (a seed); i1 at 6: u2@2, u0@6 (new).
    (tmp_path / "buys.txt").write_text("0 0\n1 0\n2 1\n0 1\n")
    np.save(tmp_path / "t.npy", np.array([1, 4, 2, 6], dtype=np.int64))
    build_hetero(tmp_path / "h", [NodeType("item", 2), NodeType("user", 3)],
                 [Relation("user:buys:item", tmp_path / "buys.txt", edge_time=tmp_path / "t.npy")], add_reverse=True)
    ds = ringgnn.Dataset.open(tmp_path / "h")
    sampler = HeteroNeighborSampler(ds, [-1])
    b = HeteroLinkBatches(ds, "user:buys:item", sampler, batch_size=2, seed=0, pairs=np.array([[0, 1], [0, 1]]),
                          time=[4, 7], threads=1)
    data = b.batch(0, 0)
    assert data["user"].n_id.tolist() == [0, 1, 2, 0] and data["user"].seed_time.tolist() == [3, 6, 6, 6]
    assert data["item"].n_id.tolist() == [0, 1, 0] and data["item"].seed_time.tolist() == [3, 6, 6]
    rel = data["user", "buys", "item"]
    assert rel.edge_label_index.tolist() == [[0, 1], [0, 1]] and rel.edge_label_time.tolist() == [4, 7]
    assert [d["user"].n_id.tolist() for d in b] == [[0, 1, 2, 0]]  # the epoch's batch is the same
    with pytest.raises(InputError, match="has times, so link pairs are sampled at their times: give edge_label_time"):
        HeteroLinkBatches(ds, "user:buys:item", sampler, batch_size=2, seed=0, pairs=np.array([[0], [0]]))


def _edge_times(ds):
    m = json.loads((ds / "manifest.json").read_text())
    return np.fromfile(ds / m["files"]["edge_times"]["path"], dtype="<i8", count=m["num_edges"])


@pytest.mark.parametrize("backend", ["memory", "pread"])
def test_nothing_sampled_is_at_or_after_its_pair(timed, backend):
    ds = ringgnn.Dataset.open(timed)
    etime, ntime = _edge_times(timed), ds.node_times()
    rng = np.random.default_rng(11)
    dst = rng.integers(0, 2000, 300)
    src = np.array([ds.neighbors(v)[rng.integers(len(ds.neighbors(v)))] if len(ds.neighbors(v)) else v for v in dst])
    times = rng.integers(0, 1100, 300)
    sampler = HeteroNeighborSampler(ds, [4, 3], backend=backend, with_edge_ids=True, seed=2)
    b = HeteroLinkBatches(ds, R, sampler, batch_size=64, neg_sampling=NegativeSampling("binary", 1.5), seed=2,
                          pairs=np.stack([src, dst]), time=times, threads=2, hyperbatch=2)
    seen = 0
    for data in b:
        node, st, rel = data["node"].n_id.numpy(), data["node"].seed_time.numpy(), data["node", "to", "node"]
        row, col = rel.edge_index.numpy()
        e = rel.e_id.numpy()
        pair_t = rel.edge_label_time.numpy()
        # Every end of every pair (and negative) is sampled strictly before its pair's time.
        s, d = rel.edge_label_index.numpy()
        assert (st[s] == pair_t - 1).all() and (st[d] == pair_t - 1).all()
        # Negatives (label 0) are nodes not newer than their pair (where any node is that old).
        neg = (rel.edge_label.numpy() == 0) & (pair_t >= ntime.min())
        assert neg.any() and (ntime[node[s[neg]]] <= pair_t[neg]).all() and (ntime[node[d[neg]]] <= pair_t[neg]).all()
        # No edge at or after the time of the pair its subgraph is for, no node newer than it.
        assert (etime[e] <= st[col]).all() and (st[row] == st[col]).all()
        assert set(st.tolist()) <= set((times - 1).tolist())
        bs = data["node"].batch_size
        assert (ntime[node[bs:]] <= st[bs:]).all()
        assert len(set(zip(node.tolist(), st.tolist()))) == len(node)
        seen += len(pair_t)
    assert seen == sum(m + int(np.ceil(1.5 * m)) for m in (64, 64, 64, 64, 44))


def test_batches_do_not_depend_on_hyperbatch_or_threads(timed):
    ds = ringgnn.Dataset.open(timed)
    rng = np.random.default_rng(5)
    pairs, times = rng.integers(0, 2000, (2, 200)), rng.integers(0, 1000, 200)

    def epoch(**kw):
        loader = LinkLoader(ds, [4, 2], 50, edges=pairs, edge_label_time=times, backend="pread", seed=4,
                            neg_sampling=NegativeSampling("binary", 1), **kw)
        out = []
        for d in loader:  # shuffled: each positive keeps its own time, its negative takes it too
            n = len(d.input_id)
            assert (d.edge_label_time[:n].numpy() == times[d.input_id.numpy()]).all()
            assert (d.edge_label_time[n:] == d.edge_label_time[:n]).all()
            out.append((d.n_id.tolist(), d.seed_time.tolist(), d.edge_index.tolist(), d.edge_label_index.tolist()))
        return out

    a = epoch(hyperbatch=1, threads=1)
    assert len(a) == 4 and a == epoch(hyperbatch=3, threads=2)


def test_refused(tiny, caplog):
    pairs = np.array([[0, 2], [1, 1]])
    with pytest.raises(InputError, match="has times, so link pairs are sampled at their times: give edge_label_time "
                                         r"\(one time per pair, its event's\), or ignore_time=True"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs)
    with pytest.raises(InputError, match="edge_label_time was given but the dataset has no edge or node times"):
        LinkLoader(tiny / "plain", [2], 2, edges=pairs, edge_label_time=[1, 2])
    with pytest.raises(InputError, match="edge_label_time has 1 times for 2 seeds"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[1])
    with pytest.raises(InputError, match="edge_label_time must be integer times"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[1.5, 2.0])
    with pytest.raises(InputError, match="edge_label_time samples each pair at its time and ignore_time=True"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[1, 2], ignore_time=True)
    with pytest.raises(InputError, match="cache, presample_batches: not taken by a LinkLoader at times.*"
                                         "ignore_time=True"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[1, 2], cache=0, presample_batches=2)
    with pytest.raises(InputError, match="share: not taken by a LinkLoader at times"):
        LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[1, 2], share=object())
    with pytest.raises(InputError, match="no time before it"):
        next(iter(LinkLoader(tiny / "ds", [2], 2, edges=pairs, edge_label_time=[np.iinfo(np.int64).min, 0])))
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        off = LinkLoader(tiny / "ds", [2], 2, edges=pairs, ignore_time=True, shuffle=False)
        data = next(iter(off))
    assert "samples without times" in caplog.text and "seed_time" not in data
    assert data.n_id.tolist()[:3] == [0, 1, 2]


# --- training ---------------------------------------------------------------------------------

TRAIN = dict(fanouts=[-1], layers=1, hidden=32, batch_size=200, lr=0.05, dropout=0.0, threads=1, quiet=True,
             eval_mode="sampled", log=lambda s: None)


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    """A homogeneous event graph split by time (val after 800, test after 900): 300 nodes, 3,000
    random events at times in [0, 1000), random features."""
    d = tmp_path_factory.mktemp("events")
    rng = np.random.default_rng(4)
    e = rng.integers(0, 300, (3000, 2))
    np.savetxt(d / "e.txt", e, fmt="%d")
    np.save(d / "t.npy", rng.integers(0, 1000, 3000).astype(np.int64))
    np.save(d / "x.npy", rng.standard_normal((300, 8)).astype(np.float32))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "t.npy", features=d / "x.npy",
                  link_split_time="val=800,test=900", link_negatives=5)
    return d / "ds"


def test_a_split_by_time_is_sampled_at_its_times(events):
    ds = ringgnn.Dataset.open(events)
    times, pairs = ds.edge_split_times("val"), ds.edge_split("val")
    loader = LinkLoader(ds, [2], 16, edges="val", negatives=ds.edge_negatives("val"), shuffle=False, threads=1)
    data = next(iter(loader))
    assert (data.edge_label_time.numpy() == times[:16]).all() and (times[:16] > 800).all()
    ends = _ends(data)
    assert [ends[int(i)] for i in data.src_index] == list(zip(pairs[0, :16].tolist(), (times[:16] - 1).tolist()))
    assert {ends[int(j)][1] for j in data.dst_neg_index[0]} == {int(times[0]) - 1}


def test_link_training_at_times(events, tmp_path):
    lines = []
    m = ringgnn.train(events, task="link", out=tmp_path / "at", epochs=1, **dict(TRAIN, log=lines.append,
                                                                                 eval_mode="auto"))
    assert m["temporal"] is True and m["layerwise"] is None and "heterogeneous" not in m
    assert any(s.startswith("temporal: each pair and its negatives are sampled at the pair's time minus one")
               for s in lines)
    assert any("evaluation: sampled at the val/test seeds' times" in s for s in lines)
    assert 0 <= m["best_val_auc"] <= 1 and 0 <= m["test_mrr"] <= 1
    with open(tmp_path / "at" / "metrics.json") as f:
        assert json.load(f)["temporal"] is True
    with pytest.raises(InputError, match="was trained at times; resume it without --ignore-time"):
        ringgnn.train(events, task="link", out=tmp_path / "at", resume=True, ignore_time=True, epochs=2, **TRAIN)
    off = ringgnn.train(events, task="link", out=tmp_path / "off", epochs=1, ignore_time=True, **TRAIN)
    assert off["temporal"] is False


def test_link_training_refused_at_times(events, tmp_path):
    out = tmp_path / "bad"
    with pytest.raises(InputError, match="--eval layerwise: .*cannot honour each seed's time"):
        ringgnn.train(events, task="link", out=out, epochs=1, **dict(TRAIN, eval_mode="layerwise"))
    with pytest.raises(InputError, match="--seed-time .*: node times for --task node; a link run samples each pair"):
        ringgnn.train(events, task="link", out=out, epochs=1, seed_time=tmp_path / "t.npy", **TRAIN)
    with pytest.raises(InputError, match="--model gcn: a run at times trains on the typed engine"):
        ringgnn.train(events, task="link", out=out, epochs=1, model="gcn", **TRAIN)
    assert not out.exists()


def test_typed_split_without_times_is_refused(tmp_path):
    (tmp_path / "buys.txt").write_text("".join(f"{u} {u % 7}\n" for u in range(40)))
    np.save(tmp_path / "t.npy", np.arange(40, dtype=np.int64))
    build_hetero(tmp_path / "h", [NodeType("item", 7), NodeType("user", 40)],
                 [Relation("user:buys:item", tmp_path / "buys.txt", link_split="val=0.2,test=0.2", link_negatives=3),
                  Relation("user:views:item", tmp_path / "buys.txt", edge_time=tmp_path / "t.npy")], add_reverse=True)
    with pytest.raises(InputError, match="has times, but its train/val/test edge splits have no pair times.*"
                                         "--link-split-time val=T1,test=T2.*--ignore-time"):
        ringgnn.train(tmp_path / "h", task="link", relation="user:buys:item", out=tmp_path / "r", epochs=1, **TRAIN)


def test_planted_future_reveals_the_link(tmp_path, caplog):
    """Users buy random items at random times; each purchase is reviewed (user:reviews:item) one
    step later. Only the review, in the future of its purchase, reveals the link: sampled at their
    times the pairs see past reviews of other purchases (chance), ignoring time they see their own."""
    rng = np.random.default_rng(3)
    n, m = 1000, 1500
    u, i, t = rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(0, 1000, m)
    np.savetxt(tmp_path / "buys.txt", np.stack([u, i], 1), fmt="%d")
    np.save(tmp_path / "bt.npy", t.astype(np.int64))
    np.save(tmp_path / "rt.npy", (t + 1).astype(np.int64))
    for name in ("user", "item"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((n, 16)).astype(np.float32))
    build_hetero(tmp_path / "h", [NodeType("item", n, features=tmp_path / "item.npy"),
                                  NodeType("user", n, features=tmp_path / "user.npy")],
                 [Relation("user:buys:item", tmp_path / "buys.txt", edge_time=tmp_path / "bt.npy",
                           link_split_time="val=800,test=900", link_negatives=10),
                  Relation("user:reviews:item", tmp_path / "buys.txt", edge_time=tmp_path / "rt.npy")],
                 add_reverse=True)
    run = dict(TRAIN, task="link", relation="user:buys:item", epochs=5)
    at = ringgnn.train(tmp_path / "h", out=tmp_path / "at", **run)
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        leak = ringgnn.train(tmp_path / "h", out=tmp_path / "leak", ignore_time=True, **run)
    assert "--ignore-time" in caplog.text and "leak" in caplog.text
    assert at["temporal"] is True and leak["temporal"] is False
    # Measured: 0.53 at times, 0.77 ignoring time (about 180 val pairs, 10 negatives each).
    assert at["best_val_auc"] < 0.62 and leak["best_val_auc"] > 0.7, (at["best_val_auc"], leak["best_val_auc"])


# --- pair scores as of a time (predict --edges --at T) --------------------------------------------

SCORE = dict(TRAIN, layers=2, fanouts=[5, 5], epochs=1)


@pytest.fixture(scope="module")
def link_runs(events, tmp_path_factory):
    """A link run of each engine on ``events``: at times (the typed engine's one-type case, the
    default) and ``--ignore-time`` (the homogeneous engine)."""
    root = tmp_path_factory.mktemp("link-runs")
    ringgnn.train(events, task="link", out=root / "typed", **SCORE)
    ringgnn.train(events, task="link", out=root / "plain", ignore_time=True, **SCORE)
    return {k: str(root / k) for k in ("typed", "plain")}


def _past_graph(ds_path, t, out):
    """The dataset of ``ds_path``'s graph edges at or before ``t`` alone (same features, no
    splits): what scoring as of ``t`` must equal."""
    ds = ringgnn.Dataset.open(ds_path)
    ip, times = ds.indptr(), _edge_times(ds_path)
    src = np.concatenate([ds.neighbors(v) for v in range(ds.num_nodes)])
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ip))
    keep = times <= t
    out.mkdir()
    np.save(out / "e.npy", np.stack([src[keep], dst[keep]], 1))
    np.save(out / "t.npy", times[keep])
    build.convert(out / "e.npy", out / "ds", edge_time=out / "t.npy", features=ds_path.parent / "x.npy",
                  num_nodes=ds.num_nodes)
    return out / "ds"


@pytest.mark.parametrize("kind", ["typed", "plain"])
def test_pair_scores_as_of_a_time_are_those_of_the_past_graph(events, link_runs, kind, tmp_path):
    score = predict_link_edges if kind == "typed" else predict_edges
    ds = ringgnn.Dataset.open(events)
    pairs, negs = ds.edge_split("val"), ds.edge_negatives("val")
    now = score(link_runs[kind], "val")["scores"]
    for t in (-1, 300, 650):
        ref = _past_graph(events, t, tmp_path / f"p{t}")
        want = score(link_runs[kind], pairs, dataset=ref)["scores"]
        want_neg = score(link_runs[kind], np.stack([np.repeat(pairs[0], negs.shape[1]), negs.ravel()]),
                         dataset=ref)["scores"].reshape(negs.shape)
        s = score(link_runs[kind], "val", at=t)
        np.testing.assert_allclose(s["scores"], np.concatenate([want[:, None], want_neg], 1), rtol=1e-5, atol=1e-6)
        assert not np.allclose(s["scores"], now)
        assert s["at"] == t and s["as_of"]["edges"] == ringgnn.Dataset.open(ref).num_edges
        assert s["metrics"]["auc"] == split_scores(s["scores"][:, 0], s["scores"][:, 1:])["auc"]
    assert score(link_runs[kind], "val")["at"] is None


def test_pair_scores_as_of_a_time_from_the_command(events, link_runs, tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "ringgnn", "predict", *map(str, args), "--quiet"],
                              capture_output=True, text=True)

    pairs = ringgnn.Dataset.open(events).edge_split("test")[:, :50]
    np.save(tmp_path / "pairs.npy", pairs)
    for kind in ("typed", "plain"):
        r = cli(link_runs[kind], "--edges", tmp_path / "pairs.npy", "--at", 420, "--out", tmp_path / f"{kind}.npy")
        assert r.returncode == 0, r.stderr
        assert "scores (logits) of 50 pairs" in r.stdout and "as of time 420: " in r.stdout
    want = predict_link_edges(link_runs["typed"], pairs, at=420)["scores"]
    assert np.array_equal(np.load(tmp_path / "typed.npy"), want)
    r = cli(link_runs["typed"], "--edges", "val", "--at", 900)
    assert r.returncode == 0 and "val: AUC " in r.stdout and "as of time 900" in r.stdout, r.stderr
    for bad in ("abc", "1.5"):
        r = cli(link_runs["typed"], "--edges", tmp_path / "pairs.npy", "--at", bad, "--out", tmp_path / "bad.npy")
        assert r.returncode == 2 and f"argument --at: the time '{bad}' is not an integer" in r.stderr
    plain = tmp_path / "plain-ds"
    build.convert(events.parent / "e.txt", plain, features=events.parent / "x.npy")
    for kind in ("typed", "plain"):
        r = cli(link_runs[kind], "--dataset", plain, "--edges", tmp_path / "pairs.npy", "--at", 3, "--out",
                tmp_path / "bad.npy")
        assert r.returncode != 0 and "--at 3: " in r.stderr and "has no edge or node times" in r.stderr, r.stderr
    assert not (tmp_path / "bad.npy").exists()
    assert sorted(os.listdir(tmp_path)) == ["pairs.npy", "plain-ds", "plain.npy", "typed.npy"]
    assert not [f for k in link_runs.values() for f in os.listdir(k) if "ringgnn-tmp" in f or "as-of" in f]


def test_embed_of_a_link_run_at_times_as_of_a_time(events, link_runs, tmp_path):
    """`ringgnn embed` of a link run at times (the typed engine's one-type case): its encoder's
    rows, those ``predict --edges`` decodes; with ``--at T`` those of the graph as of ``T`` alone."""
    from ringgnn.cli import main
    from ringgnn.inference.hetero import infer_hetero

    run = link_runs["typed"]
    pairs = ringgnn.Dataset.open(events).edge_split("test")[:, :40]
    for at in (None, 420):
        extra = [] if at is None else ["--at", str(at)]
        assert main(["embed", run, "--out", str(tmp_path / f"z{at}.npy"), "--quiet", *extra]) == 0
        z = np.load(tmp_path / f"z{at}.npy")
        assert z.shape == (300, 32)
        # The dot decoder's scores of the pairs are those of these rows.
        want = predict_link_edges(run, pairs, at=at)["scores"]
        np.testing.assert_allclose((z[pairs[0]] * z[pairs[1]]).sum(1), want, rtol=1e-4, atol=1e-4)
    assert not np.allclose(np.load(tmp_path / "zNone.npy"), np.load(tmp_path / "z420.npy"))
    # As of T: the rows of the dataset of the edges at or before T alone.
    ref = _past_graph(events, 420, tmp_path / "p420")
    np.testing.assert_allclose(np.load(tmp_path / "z420.npy"),
                               infer_hetero(run, ref, output="embeddings")["array"], rtol=1e-5, atol=1e-6)
    s = infer_hetero(run, output="embeddings", at=420, nodes=np.array([7, 3]))
    assert s["at"] == 420 and s["as_of"]["edges"] == ringgnn.Dataset.open(ref).num_edges
    np.testing.assert_array_equal(s["array"], np.load(tmp_path / "z420.npy")[[7, 3]])


def test_relation_pair_scores_as_of_a_time(tmp_path):
    """A ``--relation`` run (user:buys:item and its reverse, split by time) scores its pairs as
    of T as it does on the typed dataset of the graph's edges as of T alone."""
    rng = np.random.default_rng(8)
    u, i, t = rng.integers(0, 60, 800), rng.integers(0, 40, 800), rng.integers(0, 1000, 800)
    for name, n in (("user", 60), ("item", 40)):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((n, 4)).astype(np.float32))

    def typed(out, keep, **split):
        np.save(tmp_path / f"{out}.e.npy", np.stack([u[keep], i[keep]], 1))
        np.save(tmp_path / f"{out}.t.npy", t[keep].astype(np.int64))
        build_hetero(tmp_path / out, [NodeType("item", 40, features=tmp_path / "item.npy"),
                                      NodeType("user", 60, features=tmp_path / "user.npy")],
                     [Relation("user:buys:item", tmp_path / f"{out}.e.npy", edge_time=tmp_path / f"{out}.t.npy",
                               **split)], add_reverse=True)
        return tmp_path / out

    full = typed("full", t >= 0, link_split_time="val=700,test=850", link_negatives=4)
    ringgnn.train(full, task="link", relation="user:buys:item", out=tmp_path / "run",
                  **dict(SCORE, batch_size=100))
    rel = ringgnn.Dataset.open(full).relation("user:buys:item")
    pairs, negs = rel.edge_split("val"), rel.edge_negatives("val")
    now = predict_link_edges(tmp_path / "run", "val")["scores"]
    for at in (250, 600):
        ref = typed(f"p{at}", t <= at)
        want = predict_link_edges(tmp_path / "run", pairs, dataset=ref)["scores"]
        want_neg = predict_link_edges(tmp_path / "run", np.stack([np.repeat(pairs[0], negs.shape[1]), negs.ravel()]),
                                      dataset=ref)["scores"].reshape(negs.shape)
        s = predict_link_edges(tmp_path / "run", "val", at=at)
        np.testing.assert_allclose(s["scores"], np.concatenate([want[:, None], want_neg], 1), rtol=1e-5, atol=1e-6)
        assert not np.allclose(s["scores"], now)
        assert s["at"] == at and s["as_of"]["edges"] == 2 * int((t <= at).sum())


# --- PyG's LinkNeighborLoader with our sampler at times ----------------------------------------------


def _pyg_links(ds, fanouts, pairs, times, neg=None, batch_size=2, **sampler):
    from torch_geometric.loader import LinkNeighborLoader

    from ringgnn.pyg import EDGE_TYPE, RingNeighborSampler, ring_stores

    return LinkNeighborLoader(ring_stores(ds), fanouts, edge_label_index=(EDGE_TYPE, torch.as_tensor(pairs)),
                              edge_label_time=torch.as_tensor(times), time_attr="edge_time", batch_size=batch_size,
                              neg_sampling=neg, neighbor_sampler=RingNeighborSampler(ds, fanouts, **sampler))


def test_pyg_link_neighbor_loader_at_times(tiny):
    """PyG's LinkNeighborLoader(edge_label_time=...) with our sampler: each pair at its time minus
    one, the batch LinkLoader makes (test_link_loader_samples_each_pair_before_its_time's)."""
    from torch_geometric.sampler import NegativeSampling as PygNegatives

    ds = ringgnn.Dataset.open(tiny / "ds")
    (b,) = list(_pyg_links(ds, [-1], [[0, 2], [1, 1]], [7, 9]))
    assert b.n_id.tolist() == [0, 1, 1, 2, 3, 0]
    assert b.edge_label_index.tolist() == [[0, 3], [1, 2]] and b.edge_label_time.tolist() == [7, 9]
    assert b.input_id.tolist() == [0, 1] and (b.x.argmax(1) == b.n_id).all()
    at = [6, 6, 8, 8, 6, 8]  # each row's time (the seeds 0@6, 1@6, 1@8, 2@8, then 3@6, 0@8)
    edges = {((int(b.n_id[r]), at[r]), (int(b.n_id[c]), at[c])) for r, c in b.edge_index.t().tolist()}
    assert edges == {((3, 6), (0, 6)), ((0, 6), (1, 6)), ((0, 8), (1, 8)), ((2, 8), (1, 8)), ((1, 8), (2, 8)),
                     ((0, 8), (2, 8))}
    (t,) = list(_pyg_links(ds, [1], [[0, 2], [1, 1]], [7, 9], neg=PygNegatives("triplet", 3)))
    (want,) = list(LinkLoader(ds, [1], 2, edges=np.array([[0, 2], [1, 1]]), edge_label_time=[7, 9], shuffle=False,
                              threads=1, neg_sampling=NegativeSampling("triplet", 3)))
    assert t.seed_time.tolist() == [7, 9] and "edge_label_time" not in t
    for k in ("n_id", "edge_index", "src_index", "dst_pos_index", "dst_neg_index"):
        assert torch.equal(t[k], want[k]), k
    with pytest.raises(InputError, match="edge_label_time was given but the dataset has no edge or node times"):
        next(iter(_pyg_links(ringgnn.Dataset.open(tiny / "plain"), [1], [[0], [1]], [7])))
    with pytest.raises(InputError, match="edge_label_time must be integer times"):
        next(iter(_pyg_links(ds, [1], [[0], [1]], [7.5])))


@pytest.mark.parametrize("mode, amount", [("binary", 1.5), ("triplet", 2)])
def test_pyg_link_batches_at_times_are_link_loaders(timed, mode, amount):
    """Batch for batch the LinkLoader's at times, and nothing in them at or after its pair's time."""
    from torch_geometric.sampler import NegativeSampling as PygNegatives

    ds = ringgnn.Dataset.open(timed)
    etime = _edge_times(timed)
    rng = np.random.default_rng(7)
    pairs, times = rng.integers(0, 2000, (2, 150)), rng.integers(0, 1100, 150)
    ours = LinkLoader(ds, [4, 3], 64, edges=pairs, edge_label_time=times, shuffle=False, seed=3,
                      neg_sampling=NegativeSampling(mode, amount))
    pyg = _pyg_links(ds, [4, 3], pairs, times, neg=PygNegatives(mode, amount), batch_size=64, seed=3,
                     with_edge_ids=True)
    got, want = list(pyg), list(ours)
    assert len(got) == len(want) == 3
    keys = ("edge_label_index", "edge_label", "edge_label_time") if mode == "binary" else (
        "src_index", "dst_pos_index", "dst_neg_index")
    for b, w in zip(got, want):
        for k in ("n_id", "edge_index", "input_id") + keys:
            assert torch.equal(b[k], w[k]), k
        # Each row's time is the LinkLoader's seed_time: every edge's time is at most it.
        assert (etime[b.e_id.numpy()] <= w.seed_time[b.edge_index[1]].numpy()).all()
        assert set(w.seed_time.tolist()) <= set((times - 1).tolist())


# --- evaluation: each layer computes only what the next ones read ---------------------------------


@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_trimmed_evaluation_is_the_full_forward(tmp_path, timed, model):
    """HeteroModel.forward(hops=) (sampled evaluation) gives the seeds the rows of the full forward,
    bit for bit: on a typed dataset (authors and institutions first reached at hop 1) and at times on
    the one-type case."""
    from ringgnn.data.generate import generate_hetero
    from ringgnn.models.hetero import HeteroModel, hetero_batch_to_dicts
    from ringgnn.sampling.hetero import HeteroLoader
    from ringgnn.training.hetero import sampled_hops

    generate_hetero(tmp_path / "h", papers=300, authors=150, institutions=20, classes=3, feature_dim=5, seed=2)
    torch.manual_seed(0)
    cases = []
    for ds, target, seeds, at in ((ringgnn.Dataset.open(tmp_path / "h"), "paper", np.arange(0, 300, 2), None),
                                  (ringgnn.Dataset.open(timed), "node", np.arange(0, 2000, 13), "times")):
        at = {} if at is None else dict(input_time=np.random.default_rng(1).integers(0, 1000, len(seeds)))
        for layers in (1, 2, 3):
            net = HeteroModel(ds.node_types, ds.relations, ds.feature_dims(), ds.num_nodes_dict, target, 8, 3, layers,
                              model=model, embed_dim=4).eval()
            loader = HeteroLoader(ds, [3] * layers, target, seeds=seeds, batch_size=64, shuffle=False, threads=1, **at)
            for b in loader:
                hops = sampled_hops(b, layers)
                assert hops is not None and sampled_hops(b, layers + 1) is None
                with torch.no_grad():
                    full, cut = net(*hetero_batch_to_dicts(b)), net(*hetero_batch_to_dicts(b), hops=hops)
                n = b[target].batch_size
                assert torch.equal(full[:n], cut[:n]) and len(cut) == sum(hops[0][target][:2])
                cases.append(len(full) > len(cut))
    assert any(cases)  # something was trimmed
