"""Using a link model (issue 21, part 4): ``ringgnn embed`` of a link run, ``ringgnn predict
--edges`` (exact pair scores, a held-out split's metrics) and ``ringgnn serve``'s ``Score`` and
``Embed``. The reference is a full-graph PyG forward of the run's encoder over the whole small
graph, then its decoder; the served answers are checked against the same sampling done in
process."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ringgnn
from ringgnn.inference import metrics
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.pyg import RingFeatureStore
from ringgnn.inference.scoring import predict_edges
from ringgnn.training.loop import train

from _sampling import full_graph, make_link_dataset, reference_scores

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = pytest.mark.timeout(300)

FANOUTS = [4, 3]
FAST = dict(fanouts=FANOUTS, batch_size=128, epochs=1, hidden=16, quiet=True, log=lambda s: None,
            eval_mode="sampled")
#: The link runs: an encoder and a decoder of each kind.
LINK_RUNS = (("sage", "dot"), ("gcn", "mlp"))


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """``node``: a 400-node SBM graph with labels (and a node run on it); ``link``: the same
    edges converted with a link split (val 10%, test 10%, 10 negatives each); and one link run
    per (encoder, decoder) of LINK_RUNS on it, 1 epoch each."""
    root = tmp_path_factory.mktemp("linkuse")
    link = make_link_dataset(root, nodes=400, negatives=10, classes=4, avg_degree=6, feature_dim=8,
                             link_split="val=0.1,test=0.1")
    runs = {}
    for model, decoder in LINK_RUNS:
        runs[model, decoder] = root / f"run-{model}-{decoder}"
        train(link, task="link", model=model, decoder=decoder, out=str(runs[model, decoder]), **FAST)
    train(root / "g", out=str(root / "noderun"), **FAST)
    return dict(root=root, node=root / "g", link=link, runs=runs, noderun=root / "noderun")


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# --- predict --edges ---------------------------------------------------------------------------


@pytest.mark.parametrize("model,decoder", LINK_RUNS)
def test_pair_scores_equal_a_full_graph_forward(graphs, model, decoder, cli, tmp_path):
    ds, run = graphs["link"], graphs["runs"][model, decoder]
    rng = np.random.default_rng(5)
    pairs = rng.integers(0, ds.num_nodes, (2, 50))
    pairs[:, 1] = pairs[:, 0]  # a pair given twice
    pairs[1, 2] = pairs[0, 2]  # a node with itself
    want, _ = reference_scores(ds, run, pairs)
    got = predict_edges(str(run), pairs)
    assert got["scores"].dtype == np.float32 and got["scores"].shape == (50,)
    close(got["scores"], want)
    assert got["endpoints"] == len(np.unique(pairs)) and got["negatives"] == 0 and "metrics" not in got
    # The command, with (n, 2) pairs in a file: the same scores; sigmoid with --probabilities.
    np.save(tmp_path / "pairs.npy", pairs.T.copy())
    r = cli("predict", run, "--edges", tmp_path / "pairs.npy", "--out", tmp_path / "s.npy", "--quiet")
    assert r.code == 0, r.err
    assert "scores (logits) of 50 pairs" in r.out and "(50,)" in r.out
    s = np.load(tmp_path / "s.npy")
    assert s.dtype == np.float32 and s.shape == (50,)
    close(s, want)
    r = cli("predict", run, "--edges", tmp_path / "pairs.npy", "--out", tmp_path / "p.npy", "--probabilities",
            "--quiet")
    assert r.code == 0, r.err
    close(np.load(tmp_path / "p.npy"), 1 / (1 + np.exp(-want.astype(np.float64))))


@pytest.mark.parametrize("model,decoder", LINK_RUNS)
def test_scoring_pairs_on_the_cpu_never_imports_pytorch(graphs, model, decoder, tmp_path):
    """`ringgnn predict --edges` reads the checkpoint as numpy arrays and decodes in numpy
    (``infer_dense.DenseDecoder``): PyTorch and PyG are never imported, and the scores are the
    full-graph forward's and the torch decoder's (all-close; each pair's best candidate the same)."""
    import subprocess
    import sys

    ds, run = graphs["link"], graphs["runs"][model, decoder]
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"rc = main(['predict', {str(run)!r}, '--edges', 'test', '--memory', '512M', '--quiet', '--out', "
            f"{str(tmp_path / 't.npy')!r}])\n"
            "print('torch' in sys.modules, 'torch_geometric' in sys.modules, rc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.split()[-3:] == ["False", "False", "0"], r.stderr
    pos, neg = reference_scores(ds, run, ds.edge_split("test"), ds.edge_negatives("test"))
    want = np.concatenate([pos[:, None], neg], axis=1)
    got = np.load(tmp_path / "t.npy")
    close(got, want)
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))


@pytest.mark.parametrize("decoder", ["dot", "mlp"])
def test_the_numpy_decoder_is_the_torch_decoders(decoder):
    """``infer_dense.DenseDecoder`` from a decoder's state dict (as a checkpoint holds it) and from
    the module scores as the module does, pairs ``(m, d)`` and candidates ``(n, 1, d)`` with
    ``(n, K, d)``; a state that does not fit is refused naming the key."""
    from ringgnn.models.dense import decoder_from_state, dense_decoder
    from ringgnn.models.gnn import build_decoder

    torch.manual_seed(3)
    module = build_decoder(decoder, 8)
    state = {f"decoder.{k}": v.numpy() for k, v in module.state_dict().items()}
    rng = np.random.default_rng(3)
    zs, zd, zn = (rng.standard_normal(shape).astype(np.float32) for shape in ((6, 8), (6, 8), (6, 4, 8)))
    with torch.no_grad():
        want = module(torch.from_numpy(zs), torch.from_numpy(zd)).numpy()
        want_n = module(torch.from_numpy(zs).unsqueeze(1), torch.from_numpy(zn)).numpy()
    for dense in (decoder_from_state(decoder, state, 8, "run/best.pt", "8 features"), dense_decoder(module)):
        got, got_n = dense(zs, zd), dense(zs[:, None], zn)
        assert got.shape == (6,) and got_n.shape == (6, 4) and got.dtype == got_n.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_n, want_n, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got_n.argmax(1), want_n.argmax(1))
    if decoder == "mlp":
        with pytest.raises(ringgnn.InputError, match=r"run/best.pt does not fit the dataset \(8 features\): size "
                           r"mismatch: decoder.lin1.weight \(8, 8\) \(the model has \(16, 16\)\)"):
            decoder_from_state(decoder, state, 16, "run/best.pt", "8 features")


@pytest.mark.parametrize("model,decoder", LINK_RUNS)
def test_predict_a_held_out_split_prints_its_metrics(graphs, model, decoder, cli, tmp_path):
    ds, run = graphs["link"], graphs["runs"][model, decoder]
    pairs, negs = ds.edge_split("test"), ds.edge_negatives("test")
    want_pos, want_neg = reference_scores(ds, run, pairs, negs)
    r = cli("predict", run, "--edges", "test", "--out", tmp_path / "t.npy", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    table = np.load(tmp_path / "t.npy")
    # The layout: each pair's score, then its K negatives'.
    assert table.dtype == np.float32 and table.shape == (pairs.shape[1], 1 + negs.shape[1]) == tuple(s["shape"])
    close(table[:, 0], want_pos)
    close(table[:, 1:], want_neg)
    # The metrics printed are those of the scores written.
    m = metrics.link_scores(table[:, 0], table[:, 1:])
    assert s["metrics"] == dict(auc=m["auc"], mrr=m["mrr"], hits={str(k): v for k, v in m["hits"].items()})
    assert (s["edges"], s["pairs"], s["negatives"], s["output"]) == ("test", pairs.shape[1], negs.shape[1], "scores")
    # Without --out: the metrics only, in words.
    r = cli("predict", run, "--edges", "val", "--quiet")
    assert r.code == 0, r.err
    val = metrics.link_scores(*reference_scores(ds, run, ds.edge_split("val"), ds.edge_negatives("val")))
    assert (f"val: AUC {val['auc']:.4f}, MRR {val['mrr']:.4f}, Hits@1 {val['hits'][1]:.4f}, Hits@3 "
            f"{val['hits'][3]:.4f}, Hits@10 {val['hits'][10]:.4f}, Hits@20") in r.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npy"]


def test_the_train_split_has_no_negatives_and_is_scored_as_pairs(graphs, tmp_path):
    ds, run = graphs["link"], graphs["runs"]["sage", "dot"]
    s = predict_edges(str(run), "train", out=str(tmp_path / "tr.npy"))
    pairs = ds.edge_split("train")
    assert s["negatives"] == 0 and "metrics" not in s and s["shape"] == [pairs.shape[1]]
    close(np.load(tmp_path / "tr.npy"), reference_scores(ds, run, pairs)[0])


# --- embed -------------------------------------------------------------------------------------


def test_embed_of_a_link_run_is_its_last_layer_by_default(graphs, cli, tmp_path):
    ds, run = graphs["link"], graphs["runs"]["gcn", "mlp"]
    net = load_checkpoint(str(run), ds).net
    r = cli("embed", run, "--out", tmp_path / "e.npy", "--quiet", "--hidden-dtype", "f32")  # layer 1 as f32: exact
    assert r.code == 0, r.err
    assert "layer 2 embeddings of 400 nodes (16 float32)" in r.out
    close(np.load(tmp_path / "e.npy"), full_graph(ds, net))
    r = cli("embed", run, "--layer", "1", "--nodes", "all", "--out", tmp_path / "e1.npy", "--quiet")
    assert r.code == 0, r.err
    close(np.load(tmp_path / "e1.npy"), full_graph(ds, net, layer=1))
    # A node run's default stays its last hidden layer.
    node = ringgnn.Dataset.open(graphs["node"])
    r = cli("embed", graphs["noderun"], "--out", tmp_path / "n.npy", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["layer"] == 1
    close(np.load(tmp_path / "n.npy"), full_graph(node, load_checkpoint(str(graphs["noderun"]), node).net, layer=1))


# --- bad input ---------------------------------------------------------------------------------


def test_errors_name_the_option_and_write_nothing(graphs, cli, tmp_path):
    run, ds = graphs["runs"]["sage", "dot"], graphs["link"]
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    n = ds.num_nodes
    np.save(inputs / "ok.npy", np.array([[0, 1], [2, 3]]))
    np.save(inputs / "oob.npy", np.array([[0, 1], [2, n]]))
    np.save(inputs / "neg.npy", np.array([[0, -1], [2, 3]]))
    np.save(inputs / "shape.npy", np.zeros((3, 4), dtype=np.int64))
    np.save(inputs / "flat.npy", np.zeros(6, dtype=np.int64))
    np.save(inputs / "float.npy", np.zeros((2, 3), dtype=np.float32))
    (inputs / "text.npy").write_text("0 1\n")
    cases = [
        ((graphs["noderun"], "--edges", inputs / "ok.npy", "--out", out / "s.npy"),
         "is a node-classification run"),
        ((run, "--out", out / "s.npy"), "a link model scores pairs, it has no predictions of nodes: give --edges"),
        ((run, "--out", out / "s.npy", "--probabilities"), "has no probabilities of nodes: give --edges"),
        ((run, "--edges", inputs / "oob.npy", "--out", out / "s.npy"),
         f"--edges {inputs / 'oob.npy'}: node {n} is not a node of"),
        ((run, "--edges", inputs / "neg.npy", "--out", out / "s.npy"), "node -1 is not a node of"),
        ((run, "--edges", inputs / "shape.npy", "--out", out / "s.npy"),
         "pairs need shape (2, n) or (n, 2), got (3, 4)"),
        ((run, "--edges", inputs / "flat.npy", "--out", out / "s.npy"), "pairs need shape (2, n) or (n, 2), got (6,)"),
        ((run, "--edges", inputs / "float.npy", "--out", out / "s.npy"), "node ids must be integers, got float32"),
        ((run, "--edges", inputs / "text.npy", "--out", out / "s.npy"), "not a .npy array of pairs"),
        ((run, "--edges", inputs / "missing.npy", "--out", out / "s.npy"), "missing.npy"),
        ((run, "--edges", "nope", "--out", out / "s.npy"), "--edges 'nope': not an edge split of"),
        ((run, "--edges", inputs / "ok.npy"), "--out: give the .npy file to write the scores of --edges"),
        ((run, "--edges", "train"), "--out: give the .npy file"),
        ((run, "--edges", "test", "--out", out / "s.txt"), "--out " + str(out / "s.txt") + ": give a .npy path"),
        ((run, "--edges", "test", "--nodes", "all"), "drop --nodes"),
    ]
    for args, message in cases:
        r = cli("predict", *args)
        assert r.code != 0 and message in r.err, (args, r.err)
    r = cli("embed", run, "--layer", "3", "--out", out / "e.npy")
    assert r.code != 0 and "--layer 3: the model has layers 1..2" in r.err
    with pytest.raises(ringgnn.InputError, match="node-classification"):
        predict_edges(str(graphs["noderun"]), np.array([[0], [1]]))
    assert not list(out.iterdir()), "no output, not even a temporary one"


# --- serving -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["rust", "grpcio"])
def served(graphs, request):
    """In-process servers on 127.0.0.1 of the sage/dot link run (at most 64 node ids per
    request) and of the node run, with each gRPC frontend; stopped at the end."""
    from ringgnn.serving.server import Server

    link = Server(graphs["link"], listen="127.0.0.1:0", model=str(graphs["runs"]["sage", "dot"]), threads=1,
                  max_nodes=64, frontend=request.param).start()
    node = Server(graphs["node"], listen="127.0.0.1:0", model=str(graphs["noderun"]), threads=1, max_nodes=64,
                  frontend=request.param).start()
    try:
        with ringgnn.Client(link.address, wait_ready=30) as lc, ringgnn.Client(node.address, wait_ready=30) as nc:
            yield lc, nc
    finally:
        link.stop(1.0)
        node.stop(1.0)


def served_reference(ds, run, seeds, seed):
    """The served encoder's embeddings of the distinct ``seeds`` (sampled in that order)
    computed in process: the sampler with the model's fanouts and ``seed``, the file's rows, the
    checkpoint's encoder; and the model (its decoder)."""
    from ringgnn.serving.server import Model

    model = Model(str(run), ds)
    sub = ringgnn.NeighborSampler(ds, model.fanouts, seed=seed).sample(seeds)
    x = RingFeatureStore(ds).reader().gather(sub.node)
    z = model.embeddings({"row": sub.row, "col": sub.col, "num_sampled_nodes": sub.num_sampled_nodes,
                          "num_sampled_edges": sub.num_sampled_edges}, x)
    return seeds, z, model


def test_score_and_embed_equal_the_library(graphs, served):
    lc, _ = served
    ds, run = graphs["link"], graphs["runs"]["sage", "dot"]
    src, dst = np.array([5, 7, 5, 399, 0]), np.array([9, 7, 11, 5, 1])
    # Score samples the distinct endpoints, ascending.
    seeds = np.unique(np.concatenate([src, dst]))
    _, z, model = served_reference(ds, run, seeds, seed=3)
    want = model.score(z[np.searchsorted(seeds, src)], z[np.searchsorted(seeds, dst)]).numpy()
    got = lc.score(src, dst, seed=3)
    assert got.dtype == np.float32 and got.shape == (5,)
    close(got, want)
    assert np.array_equal(lc.score(src, dst, seed=3), got), "the same seed, the same answer"
    # Embed: the encoder's last layer (what Score decodes), of the distinct nodes sampled in
    # first-occurrence order (as Predict), rows in request order.
    _, z, _ = served_reference(ds, run, np.array([11, 5]), seed=4)
    e = lc.embed([11, 5, 11], seed=4)
    assert e.shape == (3, 16)
    close(e, z.numpy()[[0, 1, 0]])
    info = lc.info()
    assert (info["model_task"], info["model_decoder"], info["num_classes"]) == ("link", "dot", 0)
    assert served[1].info()["model_task"] == "node" and served[1].info()["model_decoder"] == ""


def test_score_and_predict_refuse_what_the_model_is_not(served):
    lc, nc = served
    with pytest.raises(ringgnn.InputError, match=r"Score: the served model .* is a node-classification model"):
        nc.score([1], [2])
    with pytest.raises(ringgnn.InputError, match=r"Predict: the served model .* is a link model"):
        lc.predict([1])
    assert nc.predict([1]).probs.shape == (1, 4), "the node server goes on"


def test_bad_score_requests_get_invalid_argument(graphs, served):
    grpc = pytest.importorskip("grpc")
    lc, _ = served
    n = graphs["link"].num_nodes
    for src, dst, message in (([1, n], [2, 3], f"node {n} is out of range"), ([-1], [2], "out of range"),
                              ([], [], "no node ids"), (list(range(40)), list(range(40, 80)), "64")):
        with pytest.raises(ringgnn.InputError, match=message):
            lc.score(src, dst)
    with pytest.raises(ringgnn.InputError, match="src has 2 node ids and dst 1"):
        lc.score([1, 2], [3])
    # The server's own check of the lengths (a client of another language).
    pb = lc._pb
    with pytest.raises(grpc.RpcError) as e:
        lc._stub.Score(pb.ScoreRequest(src=[1, 2], dst=[3]), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "one destination per source" in e.value.details()
    assert lc.score([1], [2]).shape == (1,), "the server goes on"


def test_report_of_a_link_run_shows_its_ranking_scores(graphs, cli):
    run = graphs["runs"]["sage", "dot"]
    m = json.loads((run / "metrics.json").read_text())
    r = cli("report", run, "--json")
    assert r.code == 0, r.err
    rep = json.loads(r.out)
    assert rep["task"] == "link" and rep["best_val_auc"] == m["best_val_auc"] and rep["test_mrr"] == m["test_mrr"]
    assert [e["val_auc"] for e in rep["history"]] == [e["val_auc"] for e in m["epochs"]]
    r = cli("report", run)
    assert r.code == 0, r.err
    assert "val auc  val mrr  test auc  test mrr" in r.out and "decoder dot" in r.out
    assert f"best epoch {m['best_epoch']}: val auc {m['best_val_auc']:.4f}" in r.out
