"""Link prediction on one relation of a heterogeneous dataset (``ringgnn.training.hetero``): exact
link batches on a tiny typed graph, no held-out pair ever sampled (nor its reverse), a GraphBolt
link-prediction dataset written here converts and trains from the CLI, the planted generator's
authorship is learned well beyond chance, resume, and every refusal."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import ringgnn
import torch
from hypothesis import given, settings, strategies as st
from ringgnn import _core
from ringgnn.data import build
from conftest import WRITES_PAIRS, tiny_writes
from ringgnn.sampling.hetero import HeteroNeighborSampler
from ringgnn.data.generate import generate_hetero
from ringgnn.sampling.links import HeteroLinkBatches
from ringgnn.training.loop import train
from ringgnn.sampling.pairs import NEG_PURPOSE, SHUFFLE_PURPOSE, Shuffle

WRITES, REV = "author:writes:paper", "paper:rev_writes:author"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """5 authors, 6 papers (features), 20 writes pairs with val (4, 4) and (0, 1) given, test
    (3, 1): the reverse added (``conftest.tiny_writes``)."""
    return tiny_writes(tmp_path_factory.mktemp("tiny"))


HELD = {(4, 4), (0, 1), (3, 1)}


def test_batch_is_the_documented_pairs_negatives_and_one_typed_sample(tiny):
    sampler = HeteroNeighborSampler(tiny, [2, 2], seed=5)
    b = HeteroLinkBatches(tiny, WRITES, sampler, batch_size=4, neg_ratio=1.5, seed=5)
    train = tiny.relation(WRITES).edge_split("train")
    assert train.shape == (2, 17) and len(b) == 5
    data = b.batch(2, 1)
    # Positives: positions 4..7 of epoch 2's keyed order, ascending; 6 negatives from the stream.
    pos = np.sort(Shuffle(17, (5, SHUFFLE_PURPOSE, 2))(np.arange(4, 8)))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, NEG_PURPOSE, 2, 1])))
    neg_src, neg_dst = rng.integers(0, 5, 6), rng.integers(0, 6, 6)
    src = np.concatenate([train[0, pos], neg_src])
    dst = np.concatenate([train[1, pos], neg_dst])
    et = ("author", "writes", "paper")
    eli = data[et].edge_label_index.numpy()
    np.testing.assert_array_equal(data["author"].n_id.numpy()[eli[0]], src)
    np.testing.assert_array_equal(data["paper"].n_id.numpy()[eli[1]], dst)
    np.testing.assert_array_equal(data[et].edge_label.numpy(), [1] * 4 + [0] * 6)
    np.testing.assert_array_equal(data[et].input_id.numpy(), pos)
    # One sample seeded by both endpoint types: each type's distinct seeds first, in order.
    assert data["author"].batch_size == len(np.unique(src)) and data["paper"].batch_size == len(np.unique(dst))
    np.testing.assert_array_equal(data["author"].n_id.numpy()[:data["author"].batch_size], np.unique(src))
    np.testing.assert_array_equal(data["paper"].n_id.numpy()[:data["paper"].batch_size], np.unique(dst))
    np.testing.assert_array_equal(data["paper"].x.numpy(), np.arange(12, dtype=np.float32).reshape(6, 2)[
        data["paper"].n_id.numpy()])
    # The same (seed, epoch, batch) gives the same batch, whatever runs before or beside it.
    again = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=5), batch_size=4,
                              neg_ratio=1.5, seed=5, threads=3)
    again.set_epoch(2)
    other = list(again)[1]
    for key in (("author", "n_id"), ("paper", "n_id")):
        assert torch.equal(other[key[0]][key[1]], data[key[0]][key[1]])
    assert torch.equal(other[et].edge_label_index, data[et].edge_label_index)


def test_negatives_by_degree_follow_each_end_types_in_degree(tiny):
    """--neg-weight degree on a relation: each end's negatives by in-degree ** 0.75 over the
    relations entering its type (authors: rev_writes, papers: writes; the train pairs only), from
    the batch's stream, source draws first."""
    train = sorted(set(WRITES_PAIRS) - HELD)
    deg = {"author": np.bincount([a for a, _ in train], minlength=5), "paper": np.bincount([p for _, p in train],
                                                                                          minlength=6)}
    b = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=5), batch_size=4, neg_ratio=1.5,
                          seed=5, neg_weight="degree")
    data = b.batch(2, 1)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, NEG_PURPOSE, 2, 1])))
    want = {}
    for t in ("author", "paper"):
        cdf = np.cumsum(deg[t].astype(np.float64) ** 0.75)
        want[t] = np.minimum(np.searchsorted(cdf, rng.random(6) * cdf[-1], side="right"), len(cdf) - 1)
    et = ("author", "writes", "paper")
    eli = data[et].edge_label_index.numpy()
    np.testing.assert_array_equal(data["author"].n_id.numpy()[eli[0][4:]], want["author"])
    np.testing.assert_array_equal(data["paper"].n_id.numpy()[eli[1][4:]], want["paper"])
    pos = np.sort(Shuffle(17, (5, SHUFFLE_PURPOSE, 2))(np.arange(4, 8)))
    train_split = tiny.relation(WRITES).edge_split("train")
    np.testing.assert_array_equal(data["author"].n_id.numpy()[eli[0][:4]], train_split[0, pos])
    # Over many batches every author (each has train pairs, so weight) is drawn as a negative.
    seen = set()
    for epoch in range(40):
        for i in range(len(b)):
            d = b.batch(epoch, i)
            e, lab = d[et].edge_label_index.numpy(), d[et].edge_label.numpy()
            seen |= {int(x) for x in d["author"].n_id.numpy()[e[0][lab == 0]]}
    assert deg["author"].min() > 0 and seen == set(range(5))


def test_a_typed_link_run_trains_with_negatives_by_degree(tiny, tmp_path):
    m = train(tiny, task="link", relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, epochs=1, threads=1,
                          neg_weight="degree", out=tmp_path / "run", quiet=True, log=lambda s: None)
    assert m["args"]["neg_weight"] == "degree" and len(m["epochs"]) == 1


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32), epoch=st.integers(0, 3), fan=st.integers(1, 5))
def test_no_held_out_pair_is_ever_sampled_nor_its_reverse(tiny, seed, epoch, fan):
    sampler = HeteroNeighborSampler(tiny, [fan, fan], seed=seed)
    batches = HeteroLinkBatches(tiny, WRITES, sampler, batch_size=3, neg_ratio=2, seed=seed)
    batches.set_epoch(epoch)
    seen = 0
    for data in batches:
        for (s, r, d), key in ((("author", "writes", "paper"), False), (("paper", "rev_writes", "author"), True)):
            if "edge_index" not in data[s, r, d]:
                continue
            ei = data[s, r, d].edge_index.numpy()
            rows, cols = data[s].n_id.numpy()[ei[0]], data[d].n_id.numpy()[ei[1]]
            got = {(int(c), int(r_)) if key else (int(r_), int(c)) for r_, c in zip(rows, cols)}
            assert not got & HELD
            assert got <= set(WRITES_PAIRS)
            seen += len(got)
    assert seen > 0


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("planted") / "g"
    generate_hetero(out, papers=1500, authors=300, institutions=20, seed=3, link_split="val=0.1,test=0.1",
                    link_relation=WRITES, link_negatives=20)
    return out


def test_planted_authorship_is_learned_well_beyond_chance(planted, tmp_path):
    m = train(planted, task="link", relation=WRITES, epochs=4, lr=0.02, batch_size=256, hidden=32, threads=2,
                          out=tmp_path / "run", quiet=True, log=lambda s: None)
    ep = m["epochs"]
    assert [e["epoch"] for e in ep] == list(range(4))
    best = m["best_epoch"]
    assert m["best_val_auc"] == max(e["val_auc"] for e in ep) == ep[best]["val_auc"]
    for key in ("test_auc", "test_mrr", "test_hits", "val_mrr", "val_hits"):
        assert m[key] == ep[best][key]
    assert set(m["test_hits"]) == {"1", "3", "10", "20", "50", "100"}
    # Chance: AUC 0.5, MRR about 0.17 (one positive among 20 negatives: H(21) / 21); the class-level
    # ceiling is about 0.87 (docs/generators.md: an author writes in its field 87% of the time).
    lw = m["layerwise"]
    assert lw["epoch"] == best and lw["test_auc"] > 0.72 and lw["test_mrr"] > 0.3, lw
    # The sampled and exact evaluations of one checkpoint agree closely.
    assert abs(lw["val_auc"] - m["best_val_auc"]) < 0.05
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["layerwise"]["test_auc"] == lw["test_auc"] and on_disk["relation"] == WRITES


def test_resume_continues_the_same_run(tiny, tmp_path):
    common = dict(relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, threads=1, quiet=True,
                  eval_mode="sampled", log=lambda s: None)
    whole = train(tiny, task="link", epochs=3, out=tmp_path / "a", **common)
    train(tiny, task="link", epochs=2, out=tmp_path / "b", **common)
    resumed = train(tiny, task="link", epochs=3, out=tmp_path / "b", resume=True, **common)
    for x, y in zip(whole["epochs"], resumed["epochs"]):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-5) and x["val_auc"] == pytest.approx(y["val_auc"])
    with pytest.raises(_core.InputError, match="already holds a run"):
        train(tiny, task="link", epochs=3, out=tmp_path / "b", **common)
    with pytest.raises(_core.InputError, match="--resume: .*hidden=8 \\(now 16\\)"):
        train(tiny, task="link", epochs=4, out=tmp_path / "b", resume=True, **{**common, "hidden": 16})


def test_graphbolt_link_dataset_converts_and_trains_from_the_cli(tmp_path, cli):
    from test_graphbolt_links import seeds_meta, write_meta

    src = tmp_path / "gb"
    write_meta(src, seeds_meta(src))
    assert cli("convert", src / "metadata.yaml", tmp_path / "ds", "--add-reverse", "-q").code == 0
    r = cli("train", tmp_path / "ds", "--task", "link", "--relation", "user:like:item", "--epochs", 2, "--fanouts",
            "2,2", "--batch-size", 2, "--hidden", 8, "--decoder", "mlp", "--neg-ratio", 2, "--out", tmp_path / "run",
            "--threads", 1, "--json")
    assert r.code == 0, r.err
    m = json.loads(r.out)
    assert m["task"] == "link" and m["relation"] == "user:like:item" and len(m["epochs"]) == 2
    assert m["args"]["decoder"] == "mlp" and m["args"]["neg_ratio"] == 2
    assert 0 <= m["layerwise"]["test_auc"] <= 1 and set(m["layerwise"]) >= {"val_auc", "val_mrr", "test_hits"}
    assert (tmp_path / "run" / "best.pt").exists()


@pytest.mark.parametrize("args, message", [
    ([], "give --relation SRC:REL:DST"),
    (["--relation", "paper:rev_writes:author"], "it has no train/val/test edge split"),
    (["--relation", "author:reads:paper"], "author:reads:paper"),
    (["--relation", WRITES, "--decoder", "bilinear"], "--decoder"),
    (["--relation", WRITES, "--neg-ratio", "0"], "--neg-ratio must be a finite number > 0, not 0.0"),
    (["--relation", WRITES, "--target", "paper"], "--task link takes --relation"),
    (["--relation", WRITES, "--neg-weight", "bogus"], "--neg-weight"),
    (["--relation", WRITES, "--fanouts", "2,2,2"], "--fanouts has 3 hops but --layers is 2"),
])
def test_bad_link_options_are_refused(tiny, tmp_path, cli, args, message):
    r = cli("train", tiny.path, "--task", "link", *args, "--out", tmp_path / "run", "--epochs", 1)
    assert r.code != 0 and message in r.err, r.err
    assert not (tmp_path / "run" / "last.pt").exists()


def test_node_task_refuses_relation(tiny, tmp_path, cli):
    r = cli("train", tiny.path, "--relation", WRITES, "--out", tmp_path / "run")
    assert r.code != 0 and "--relation is for --task link" in r.err


def test_a_relation_without_negatives_or_incoming_relation_is_refused(tmp_path):
    d = tmp_path
    (d / "w.csv").write_text("".join(f"{a},{p}\n" for a, p in WRITES_PAIRS))
    build.build_hetero(d / "noneg", [build.NodeType("author", 5), build.NodeType("paper", 6)],
                       [build.Relation(WRITES, d / "w.csv", link_split="val=0.3,test=0.3", link_negatives=0)],
                       add_reverse=True)
    with pytest.raises(_core.InputError, match="has no stored negatives"):
        train(d / "noneg", task="link", relation=WRITES, out=d / "r1", quiet=True, log=lambda s: None)
    build.build_hetero(d / "norev", [build.NodeType("author", 5), build.NodeType("paper", 6)],
                       [build.Relation(WRITES, d / "w.csv", link_split="val=0.3,test=0.3", link_negatives=2)])
    with pytest.raises(_core.InputError, match="no relation enters node type 'author'"):
        train(d / "norev", task="link", relation=WRITES, out=d / "r2", quiet=True, log=lambda s: None)
    with pytest.raises(_core.InputError, match="--relation is for heterogeneous datasets; .*homo is homogeneous"):
        ringgnn.data.build.convert(d / "w.csv", d / "homo")
        train(d / "homo", task="link", relation=WRITES, out=d / "r3", quiet=True, log=lambda s: None)


def _full_graph(ds):
    """Every relation's edges and every type's features, for a full-batch forward."""
    edges = {}
    for r in ds.relations:
        rel = ds.relation(r)
        pairs = [(int(s), v) for v in range(rel.num_nodes) for s in rel.neighbors(v)]
        edges[tuple(r.split(":"))] = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T.contiguous()
    x = {"paper": torch.arange(12, dtype=torch.float32).reshape(6, 2)}
    n_id = {t: torch.arange(n) for t, n in ds.num_nodes_dict.items()}
    return x, edges, n_id


@pytest.mark.parametrize("decoder", ["dot", "mlp"])
def test_predict_edges_is_a_full_graph_forward_of_the_checkpoint(tiny, tmp_path, cli, decoder):
    from ringgnn.training.hetero import build_link_model

    train(tiny, task="link", relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, epochs=2, decoder=decoder,
                      threads=1, out=tmp_path / "run", quiet=True, log=lambda s: None)
    state = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    net = build_link_model(state["args"]["hetero_link"])
    net.load_state_dict(state["model"])
    net.eval()
    with torch.no_grad():
        x, e, n = _full_graph(tiny)
        zs, zd = net.tower("src")(x, e, n), net.tower("dst")(x, e, n)
        rel = tiny.relation(WRITES)
        p, neg = rel.edge_split("test"), rel.edge_negatives("test")
        want_pos = net.decoder(zs[p[0]], zd[p[1]]).numpy()
        want_neg = net.decoder(zs[p[0]].unsqueeze(1), zd[neg]).numpy()
    # The command on the CPU reads the checkpoint as arrays, runs the towers' dense parts and the
    # decoder in numpy: PyTorch and PyG are never imported, the scores are the torch forward's.
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"rc = main(['predict', {str(tmp_path / 'run')!r}, '--edges', 'test', '--memory', '512M', '--json', "
            f"'--out', {str(tmp_path / 's.npy')!r}])\n"
            "print('torch' in sys.modules, 'torch_geometric' in sys.modules, rc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    *summary, last = r.stdout.strip().splitlines()
    assert last.split() == ["False", "False", "0"], r.stderr
    got = np.load(tmp_path / "s.npy")
    want = np.concatenate([want_pos[:, None], want_neg], 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
    assert json.loads("\n".join(summary))["metrics"]["auc"] == pytest.approx(
        float((want_pos[:, None] > want_neg).mean() + 0.5 * (want_pos[:, None] == want_neg).mean()))
    # Given pairs (n, 2); out-of-range ids and the node commands are refused.
    np.save(tmp_path / "p.npy", np.array([[0, 5], [4, 0], [2, 3]]))  # (n, 2)
    assert cli("predict", tmp_path / "run", "--edges", tmp_path / "p.npy", "--out", tmp_path / "q.npy").code == 0
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), net.decoder(zs[[0, 4, 2]], zd[[5, 0, 3]]).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    np.save(tmp_path / "bad.npy", np.array([[0, 6]]))
    r = cli("predict", tmp_path / "run", "--edges", tmp_path / "bad.npy", "--out", tmp_path / "b.npy")
    assert r.code != 0 and "destination 6, but node type 'paper' has 6 nodes" in r.err
    r = cli("predict", tmp_path / "run", "--out", tmp_path / "e.npy")
    assert r.code != 0 and "a link model scores pairs, it has no predictions of nodes: give --edges" in r.err


def test_embed_of_a_link_run_is_each_encoders_full_graph_output(tiny, tmp_path, cli):
    """`ringgnn embed` of a typed link run writes the rows of the encoder of --type (S or D), the
    embeddings its decoder scores: a full-batch forward of that tower."""
    from ringgnn.inference.hetero import infer_hetero
    from ringgnn.training.hetero import build_link_model

    train(tiny, task="link", relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, epochs=2, threads=1,
                      out=tmp_path / "run", quiet=True, log=lambda s: None)
    state = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    net = build_link_model(state["args"]["hetero_link"])
    net.load_state_dict(state["model"])
    net.eval()
    with torch.no_grad():
        want = {"author": net.tower("src")(*_full_graph(tiny)).numpy(),
                "paper": net.tower("dst")(*_full_graph(tiny)).numpy()}
    assert want["author"].shape == (5, 8) and want["paper"].shape == (6, 8)
    for t in ("author", "paper"):
        r = cli("embed", tmp_path / "run", "--type", t, "--out", tmp_path / f"{t}.npy")
        assert r.code == 0, r.err
        np.testing.assert_allclose(np.load(tmp_path / f"{t}.npy"), want[t], rtol=1e-4, atol=1e-5)
        assert f"layer 2 embeddings of {len(want[t])} {t} nodes (8 float32)" in r.out
    # The decoder scores exactly those rows: predict --edges of given pairs from them.
    np.save(tmp_path / "p.npy", np.array([[0, 5], [4, 0], [2, 3]]))
    assert cli("predict", tmp_path / "run", "--edges", tmp_path / "p.npy", "--out", tmp_path / "q.npy").code == 0
    with torch.no_grad():
        scores = net.decoder(torch.from_numpy(np.load(tmp_path / "author.npy")[[0, 4, 2]]),
                             torch.from_numpy(np.load(tmp_path / "paper.npy")[[5, 0, 3]])).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), scores, rtol=1e-4, atol=1e-5)
    # Some nodes, a layer, the summary; from the API as from the command.
    s = infer_hetero(str(tmp_path / "run"), node_type="paper", nodes=np.array([3, 0]), output="embeddings")
    np.testing.assert_allclose(s["array"], want["paper"][[3, 0]], rtol=1e-4, atol=1e-5)
    assert (s["type"], s["target"], s["relation"], s["layer"]) == ("paper", "paper", WRITES, 2)
    assert "accuracy" not in s
    first = infer_hetero(str(tmp_path / "run"), node_type="author", output="embeddings", layer=1)
    assert first["layer"] == 1 and first["array"].shape == (5, 8)
    # Refused: no --type where the two ends differ, a type that is neither end, predictions.
    for args, message in ((("--out", tmp_path / "e.npy"), "give --type author or --type paper"),
                          (("--type", "venue", "--out", tmp_path / "e.npy"),
                           "--type venue: a link run on author:writes:paper encodes its ends' node types only")):
        r = cli("embed", tmp_path / "run", *args)
        assert r.code != 0 and message in r.err, r.err
    with pytest.raises(_core.InputError, match="it has no probabilities of nodes"):
        infer_hetero(str(tmp_path / "run"), node_type="paper", output="probabilities")
    assert not (tmp_path / "e.npy").exists()


CITES = "paper:cites:paper"
CITE_PAIRS = [(a, b) for a in range(6) for b in range(6) if a != b and (a * 7 + b) % 3 == 0]


def test_a_relation_within_one_type_has_one_tower_and_exact_scores(tmp_path, cli):
    d = tmp_path
    (d / "c.csv").write_text("".join(f"{a},{b}\n" for a, b in CITE_PAIRS))
    (d / "w.csv").write_text("".join(f"{a},{p}\n" for a, p in WRITES_PAIRS))
    np.save(d / "x.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
    np.save(d / "val.npy", np.array([list(CITE_PAIRS[0]), list(CITE_PAIRS[3])]))
    np.save(d / "test.npy", np.array([list(CITE_PAIRS[5]), list(CITE_PAIRS[7])]))
    build.build_hetero(d / "ds", [build.NodeType("author", 5), build.NodeType("paper", 6, features=d / "x.npy")],
                       [build.Relation(CITES, d / "c.csv", link_split={"val": d / "val.npy", "test": d / "test.npy"},
                                       link_negatives=2), build.Relation(WRITES, d / "w.csv")], add_reverse=True)
    ds = ringgnn.Dataset.open(d / "ds")
    held = {CITE_PAIRS[i] for i in (0, 3, 5, 7)}
    rev = ds.relation("paper:rev_cites:paper")
    assert not {(int(s), v) for v in range(6) for s in rev.neighbors(v)} & {(b, a) for a, b in held}
    sampler = HeteroNeighborSampler(ds, [2, 2], seed=1)
    data = HeteroLinkBatches(ds, CITES, sampler, batch_size=3, neg_ratio=1, seed=1).batch(0, 0)
    eli = data["paper", "cites", "paper"].edge_label_index.numpy()
    seeds = data["paper"].n_id.numpy()[:data["paper"].batch_size]
    assert set(eli.ravel()) == set(range(len(seeds)))  # both ends index one type's seeds
    m = train(ds, task="link", relation=CITES, fanouts=[2, 2], batch_size=3, hidden=8, epochs=2, threads=1,
                          out=d / "run", quiet=True, log=lambda s: None)
    state = torch.load(d / "run" / "best.pt", weights_only=True)
    assert state["args"]["hetero_link"]["dst"] is None
    from ringgnn.training.hetero import build_link_model

    net = build_link_model(state["args"]["hetero_link"])
    net.load_state_dict(state["model"])
    net.eval()
    with torch.no_grad():
        z = net.tower("src")(*_full_graph(ds))
        p, neg = ds.relation(CITES).edge_split("test"), ds.relation(CITES).edge_negatives("test")
        want = np.concatenate([net.decoder(z[p[0]], z[p[1]]).numpy()[:, None],
                               net.decoder(z[p[0]].unsqueeze(1), z[neg]).numpy()], 1)
    r = cli("predict", d / "run", "--edges", "test", "--out", d / "s.npy")
    assert r.code == 0, r.err
    np.testing.assert_allclose(np.load(d / "s.npy"), want, rtol=1e-4, atol=1e-5)
    assert m["layerwise"]["test_auc"] == pytest.approx(
        float((want[:, :1] > want[:, 1:]).mean() + 0.5 * (want[:, :1] == want[:, 1:]).mean()))


def test_layerwise_after_every_epoch_is_what_predict_edges_scores(tiny, tmp_path):
    """--eval layerwise on a heterogeneous link run: each epoch's scores are the exact ones of its
    model, those `predict RUN --edges val` computes from the checkpoint (no PyTorch)."""
    from ringgnn.inference.scoring import predict_link_edges

    lines = []
    m = train(tiny, task="link", relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, epochs=2, threads=1,
              eval_mode="layerwise", prefetch=1, out=tmp_path / "run", quiet=True, log=lines.append)
    best = m["epochs"][m["best_epoch"]]
    s = predict_link_edges(str(tmp_path / "run"), "val")
    assert best["val_auc"] == pytest.approx(s["metrics"]["auc"])
    assert best["val_mrr"] == pytest.approx(s["metrics"]["mrr"])
    assert lines[-1].startswith(f"best val auc {m['best_val_auc']:.4f} at epoch {m['best_epoch']}; val auc ")


def test_two_ranks_under_torchrun_share_the_batches_and_the_pairs(tiny, tmp_path):
    """`torchrun --nproc-per-node 2 -m ringgnn train DS --task link --relation S:R:D`: each rank
    its share of the 5 link batches (3, the short rank wrapping round), DDP, rank 0's run
    directory; the sampled scores are counted over every held-out pair."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ringgnn.__file__))  # the ringgnn this test imported
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "-m", "ringgnn", "train", str(tiny.path), "--task", "link", "--relation", WRITES,
                        "--fanouts", "2,2", "--batch-size", "4", "--hidden", "8", "--epochs", "2", "--threads", "1",
                        "--out", str(out), "--quiet"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["args"]["world_size"] == 2 and m["world_size"] == 2 and len(m["epochs"]) == 2
    assert "batch 4, 3 batches per epoch per rank, 2 ranks (batch 4 per rank)" in r.stdout
    assert m["layerwise"]["epoch"] == m["best_epoch"] and set(m["layerwise"]["test_hits"]) == set(m["test_hits"])


def test_the_ranks_shares_of_the_held_out_pairs_sum_to_the_whole_evaluation(tiny, tmp_path):
    """What each rank of a torchrun scores (pairs i % world == rank) adds up to one process's sums."""
    from ringgnn.training.distributed import Ranks
    from ringgnn.training.loop import make_task

    task = make_task(tiny, "link", decoder=None, neg_ratio=None, neg_weight=None, target=None, relation=WRITES,
                     embed_dim=None, embed_tables="auto")
    opts = dict(model="sage", fanouts=task.fanouts(tiny, [2, 2]), batch_size=4, epochs=1, hidden=8, layers=2, lr=0.01,
                dropout=0.0, cache=None, memory=None, device="cpu", seed=0)
    run_args = task.run_args(tiny, dict(opts, world_size=1))
    torch.manual_seed(0)
    net, loaders = task.prepare(tiny, Ranks(), run_args, None, "cpu",
                                dict(opts, backend="auto", direct=False, threads=1, prefetch=None, hyperbatch="auto",
                                     out=str(tmp_path / "run")))
    whole = task.evaluate(net, loaders, "cpu", "sage")
    shares = []
    for rank in (0, 1):
        task._share = (rank, 2)
        shares.append(task.evaluate(net, loaders, "cpu", "sage"))
    summed = [a + b for a, b in zip(*shares)]
    assert summed == pytest.approx(whole)
    assert shares[0][0] == 1 and shares[1][0] == 1  # val: 2 pairs, one each (test: 1 pair, rank 0's)
    assert task.scores(summed)["val_mrr"] == pytest.approx(task.scores(whole)["val_mrr"])


def test_negatives_are_uniform_over_each_endpoint_type(tiny):
    """Binary negatives: sources uniform over the 5 authors, destinations over the 6 papers."""
    b = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [1, 1], seed=9), batch_size=4, neg_ratio=2,
                          seed=9)
    et = ("author", "writes", "paper")
    src, dst = [], []
    for epoch in range(60):
        for i in range(len(b)):
            data = b.batch(epoch, i)
            eli, label = data[et].edge_label_index.numpy(), data[et].edge_label.numpy()
            src.append(data["author"].n_id.numpy()[eli[0][label == 0]])
            dst.append(data["paper"].n_id.numpy()[eli[1][label == 0]])
    src, dst = np.concatenate(src), np.concatenate(dst)
    assert len(src) == 60 * (4 * 2 * 4 + 1 * 2)  # ceil(2 * 4) per full batch, ceil(2 * 1) for the last
    for ids, n in ((src, 5), (dst, 6)):
        counts = np.bincount(ids, minlength=n)
        expect = len(ids) / n
        sd = math.sqrt(len(ids) * (1 / n) * (1 - 1 / n))
        assert np.all(np.abs(counts - expect) < 5 * sd), counts


@pytest.mark.parametrize("backend", ["pread", "uring"])
def test_batches_are_the_same_from_disk(tiny, backend):
    et = ("author", "writes", "paper")
    mem = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=4, backend="memory"),
                            batch_size=5, neg_ratio=1, seed=4)
    try:
        disk_sampler = HeteroNeighborSampler(tiny, [2, 2], seed=4, backend=backend)
        disk = HeteroLinkBatches(tiny, WRITES, disk_sampler, batch_size=5, neg_ratio=1, seed=4)
        b = disk.batch(1, 2)
    except _core.InputError as e:
        if backend == "uring" and "uring" in str(e):  # io_uring unavailable here
            pytest.skip(str(e))
        raise
    a = mem.batch(1, 2)
    for t in ("author", "paper"):
        assert torch.equal(a[t].n_id, b[t].n_id)
    for key in a.edge_types:
        assert torch.equal(a[key].edge_index, b[key].edge_index)
    assert torch.equal(a[et].edge_label_index, b[et].edge_label_index)


@pytest.mark.parametrize("h", [2, 3])
def test_a_hyperbatch_of_link_batches_is_each_batch_alone(tiny, h):
    et = ("author", "writes", "paper")
    alone = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=6, backend="pread"),
                              batch_size=4, neg_ratio=1.5, seed=6, hyperbatch=1)
    together = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=6, backend="pread"),
                                 batch_size=4, neg_ratio=1.5, seed=6, hyperbatch=h, threads=2)
    assert together.hyperbatch_size()[0] == h
    together.set_epoch(3)
    got = list(together)
    assert len(got) == len(alone)
    for b, data in enumerate(got):
        want = alone.batch(3, b)
        for t in ("author", "paper"):
            assert torch.equal(data[t].n_id, want[t].n_id) and torch.equal(data[t].x, want[t].x) if "x" in want[t] \
                else torch.equal(data[t].n_id, want[t].n_id)
        for key in want.edge_types:
            assert torch.equal(data[key].edge_index, want[key].edge_index)
        for attr in ("edge_label_index", "edge_label", "input_id"):
            assert torch.equal(data[et][attr], want[et][attr])


def test_auto_sizes_link_hyperbatches_from_their_probe_batches(tiny):
    b = HeteroLinkBatches(tiny, WRITES, HeteroNeighborSampler(tiny, [2, 2], seed=6, backend="pread"), batch_size=2,
                          neg_ratio=1.5, seed=6, threads=2)
    assert len(b) >= 3
    h, why = b.hyperbatch_size()
    assert 1 <= h <= -(-len(b) // 2) and "3 probe batches" in why
    # Read from disk with rows to gather: two drivers, each sampling a hyperbatch with both threads (one batch at a
    # time: a worker a thread).
    drivers = "2 hyperbatches at a time read from disk (one gathers its rows while the next is sampled), each sampled " \
        "with 2 threads"
    assert why.startswith(f"{h} (auto: {drivers if h > 1 else '2 threads'}, ") and b.sizes().drivers == (h > 1)
    # The probes are batches 0, 1, 2 of epoch 0: each end's distinct ids, of its own type.
    for (got, times), i in zip(b._probe_seeds(), range(3)):
        want = b.batch_pairs(0, i).typed_seeds(b.types)
        assert times is None  # link batches are sampled without times
        assert [t for t, _ in got] == ["author", "paper"]
        for t, ids in got:
            assert np.array_equal(ids, want[t])
    # Link batches carry no labels: the loader holds none.
    assert b._core_loader().held_bytes() == 0
    b.set_epoch(1)
    for i, data in enumerate(b):
        want = b.batch(1, i)
        for t in ("author", "paper"):
            assert torch.equal(data[t].n_id, want[t].n_id)
        assert "y" not in data["paper"]
