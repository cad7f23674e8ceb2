"""Layer-wise inference (python/ringgnn/inference/run.py) and the commands that use a trained run:
``ringgnn predict``, ``ringgnn embed``, ``ringgnn report``, ``ringgnn train --eval`` and the
plots. The reference is a full-batch PyG forward of the same checkpoint over the whole graph."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import ringgnn
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.inference.graph import blocks
from ringgnn.inference.rows import MemmapNpyWriter, RowFileWriter
from ringgnn.inference.run import infer
from ringgnn.pyg import RingFeatureStore
from ringgnn.training.loop import train

FAST = dict(batch_size=128, epochs=2, lr=0.01, quiet=True, log=lambda s: None)


@pytest.fixture(scope="module")
def hubby(tmp_path_factory) -> Path:
    """1,500 nodes in 4 classes: random edges within classes, two hubs with hundreds of
    in-neighbors, stored self loops on some nodes and duplicate edges (what GCN and GAT handle
    specially), features that carry the class weakly."""
    root = tmp_path_factory.mktemp("infer")
    rng = np.random.default_rng(3)
    n, classes, dim = 1500, 4, 10
    y = rng.integers(0, classes, n)
    src = rng.integers(0, n, 9000)
    dst = np.array([rng.choice(np.flatnonzero(y == y[s])) for s in src])
    hubs = np.repeat([7, 1200], 400), rng.integers(0, n, 800)
    loops = np.arange(0, n, 9)
    edges = np.concatenate([np.stack([src, dst]), np.stack([hubs[1], hubs[0]]), np.stack([loops, loops]),
                            np.stack([src[:200], dst[:200]])], axis=1).T
    np.save(root / "edges.npy", edges.astype(np.int64))
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x[np.arange(n), y] += 1.0
    np.save(root / "x.npy", x)
    np.save(root / "y.npy", y.astype(np.int64))
    out = root / "graph"
    ringgnn.convert(root / "edges.npy", out, features=root / "x.npy", labels=root / "y.npy",
                    split="train=0.6,val=0.2,test=0.2", seed=1)
    return out


@pytest.fixture(scope="module")
def runs(hubby, tmp_path_factory):
    """One short run per model (sampled evaluation only, to keep them fast)."""
    root = tmp_path_factory.mktemp("runs")
    return {m: (train(hubby, model=m, out=str(root / m), eval_mode="sampled", **FAST), root / m)
            for m in ("sage", "gcn", "gat")}


def full_batch(ds, net):
    """The model over the whole graph in memory: PyG's own forward."""
    ip = ds.indptr()
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ip))
    src = np.concatenate([ds.neighbors(v) for v in range(ds.num_nodes)]).astype(np.int64)
    x = torch.from_numpy(RingFeatureStore(ds).reader().gather(np.arange(ds.num_nodes)))
    with torch.no_grad():
        return net(x, torch.from_numpy(np.stack([src, dst]))).numpy()


def with_max_aggregation(ckpt):
    """The checkpoint's GraphSAGE as a PyG ``GraphSAGE(aggr="max")`` with the same weights
    (another aggregation than ringgnn's mean): (the checkpoint carrying it, the net)."""
    import dataclasses

    from torch_geometric.nn import GraphSAGE

    c0, c1 = ckpt.net.convs
    net = GraphSAGE(c0.in_channels, c0.out_channels, 2, c1.out_channels, act="relu", aggr="max")
    net.load_state_dict(ckpt.net.state_dict())
    net.eval()
    return dataclasses.replace(ckpt, net=net), net


def hidden_full_batch(ds, net, k):
    """Layer k's output (activated) of the full-batch forward, by a hook on layer k + 1."""
    seen = []
    h = net.convs[k].register_forward_pre_hook(lambda _m, inp: seen.append(inp[0]))
    try:
        full_batch(ds, net)
    finally:
        h.remove()
    return seen[0].numpy()


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("strategy, block_edges, grid_nodes", [
    ("grid", None, None),  # sized from the budget: one destination block here
    ("grid", 40, 100),  # 15 destination blocks, pieces of 40 edges, hubs' edges in windows of 160
    ("grid", 7, 1),  # one node per block: every in-edge list swept in pieces of 7
    ("blocks", None, None),
    ("blocks", 40, None),  # hubs (400 in-edges) aggregated in chunks of 40
    ("blocks", 7, None),  # most nodes chunked
])
def test_layerwise_equals_a_full_batch_forward(hubby, runs, model, strategy, block_edges, grid_nodes):
    ds = ringgnn.Dataset.open(hubby)
    _, run = runs[model]
    ref = full_batch(ds, load_checkpoint(str(run), ds).net)
    got = infer(str(run), block_edges=block_edges, strategy=strategy, grid_nodes=grid_nodes, hidden_dtype="f32")
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_the_grid_reads_each_input_page_at_most_once_per_destination_block(hubby, runs):
    """Sources are swept in file order: with one destination block, a layer reads the input file
    at most twice (the block's own rows, then one sweep over its sources), GAT's too; the
    per-block strategy with small blocks reads far more."""
    ds = ringgnn.Dataset.open(hubby)
    _, run = runs["sage"]
    feature_file = os.path.getsize(os.path.join(hubby, "features.bin"))
    grid = infer(str(run), output="logits", out=None, strategy="grid")
    assert grid.shape == (ds.num_nodes, ds.num_classes)
    from ringgnn.inference.run import LayerwiseInference

    ckpt = load_checkpoint(str(run), ds)
    reads = {}
    for strategy, be in (("grid", None), ("blocks", 40)):
        li = LayerwiseInference(ds, ckpt, strategy=strategy, block_edges=be)
        li.run(1, None, lambda a, rows: None)
        reads[strategy] = li.stats["layers"][0]["row_bytes"]
    assert reads["grid"] <= 2 * feature_file
    assert reads["blocks"] > 3 * reads["grid"]
    # GAT too: its block's own rows are read once, when it starts (its self loop folded in then).
    for agg in ("rust", "python"):
        li = LayerwiseInference(ds, load_checkpoint(str(runs["gat"][1]), ds), aggregate=agg)
        li.run(1, None, lambda a, rows: None)
        assert feature_file <= li.stats["layers"][0]["row_bytes"] <= 2 * feature_file, agg


def test_the_summary_counts_the_destination_blocks_as_a_typed_runs_does(hubby, runs, tmp_path):
    """Every path finishes a block through ``finish_block``, which counts it in the summary's
    ``blocks`` (as a typed run's) and on the unit's progress bar: blocks of 400 of the 1,500
    nodes make 4 a layer; with the nodes asked for in the first block only, the last layer
    computes that one; source partitions count their merge blocks."""
    _, run = runs["sage"]
    L = load_checkpoint(str(run), ringgnn.Dataset.open(hubby)).layers
    s = infer(str(run), output="logits", out=str(tmp_path / "a.npy"), grid_nodes=400, scheme="grid")
    assert s["blocks"] == 4 * L
    s = infer(str(run), output="logits", nodes=np.array([399, 5]), out=str(tmp_path / "b.npy"), grid_nodes=400,
              scheme="grid")
    assert s["blocks"] == 4 * (L - 1) + 1
    s = infer(str(run), output="logits", out=str(tmp_path / "c.npy"), scheme="partitioned")
    assert {u["scheme"] for u in s["layers"]} == {"partitioned"} and s["blocks"] >= L


def test_the_graph_has_hubs_self_loops_and_duplicates(hubby):
    ds = ringgnn.Dataset.open(hubby)
    deg = np.diff(ds.indptr())
    assert deg.max() >= 400 > 40, "the chunked-hub path is exercised"
    loops = sum(int((ds.neighbors(v) == v).sum()) for v in range(ds.num_nodes))
    assert loops >= 167
    dups = sum(len(ds.neighbors(v)) - len(np.unique(ds.neighbors(v))) for v in range(ds.num_nodes))
    assert dups >= 200


def test_embeddings_and_node_order(hubby, runs, tmp_path):
    ds = ringgnn.Dataset.open(hubby)
    _, run = runs["sage"]
    net = load_checkpoint(str(run), ds).net
    want = hidden_full_batch(ds, net, 1)  # input of layer 2 = layer 1's activated output
    nodes = np.array([5, 1, 1400, 5, 0], dtype=np.int64)
    got = infer(str(run), output="embeddings", nodes=nodes, block_edges=50)
    np.testing.assert_allclose(got, want[nodes], rtol=1e-4, atol=1e-4)
    np.save(tmp_path / "ids.npy", nodes)
    r = subprocess.run([sys.executable, "-m", "ringgnn", "embed", str(run), "--nodes", str(tmp_path / "ids.npy"),
                        "--out", str(tmp_path / "e.npy"), "--dtype", "f16", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    e = np.load(tmp_path / "e.npy")
    assert e.dtype == np.float16 and e.shape == (5, 64)  # hidden 64
    np.testing.assert_allclose(e.astype(np.float32), want[nodes], rtol=1e-2, atol=1e-2)
    logits = infer(str(run), output="embeddings", layer=2, nodes=nodes, hidden_dtype="f32")
    np.testing.assert_allclose(logits, full_batch(ds, net)[nodes], rtol=1e-4, atol=1e-4)


def test_predict_gives_the_accuracy_train_recorded(hubby, cli, tmp_path):
    sigterm = signal.getsignal(signal.SIGTERM)
    m = train(hubby, out=str(tmp_path / "run"), **FAST)  # --eval auto: layer-wise at the end
    lw = m["layerwise"]
    assert lw["epoch"] == m["best_epoch"] and 0 < lw["test_acc"] <= 1
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["layerwise"] == lw
    r = cli("predict", tmp_path / "run", "--nodes", "test", "--out", tmp_path / "p.npy", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["accuracy"] == pytest.approx(lw["test_acc"], abs=1e-12)
    pred = np.load(tmp_path / "p.npy")
    assert pred.dtype == np.int64 and len(pred) == len(ringgnn.Dataset.open(hubby).split("test"))
    r = cli("predict", tmp_path / "run", "--out", tmp_path / "probs.npy", "--probabilities", "--quiet")
    assert r.code == 0 and "class probabilities of 1,500 nodes" in r.out, r.err
    probs = np.load(tmp_path / "probs.npy")
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    test = ringgnn.Dataset.open(hubby).split("test")
    assert np.array_equal(probs[test].argmax(axis=1), pred)
    # Run in-process, the command's SIGTERM handler was for its run only: a process forked
    # later (a pool worker) must still die of `Pool.terminate()`.
    assert signal.getsignal(signal.SIGTERM) is sigterm


def test_a_command_s_signal_handlers_last_for_its_run_only():
    from ringgnn import _signals

    def mine(*_):
        pass

    before = signal.getsignal(signal.SIGTERM)
    with _signals.handling(mine, signal.SIGTERM):
        assert signal.getsignal(signal.SIGTERM) is mine
    assert signal.getsignal(signal.SIGTERM) is before
    # Off the main thread, where Python refuses to set handlers, they are left alone.
    seen = []

    def off_main():
        with _signals.handling(mine, signal.SIGTERM):
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=off_main)
    t.start()
    t.join()
    assert seen == [before]


def test_eval_layerwise_every_epoch(hubby, tmp_path):
    m = train(hubby, out=str(tmp_path / "run"), eval_mode="layerwise", **FAST)
    full = infer(str(tmp_path / "run"), output="predictions", nodes="test")
    ds = ringgnn.Dataset.open(hubby)
    best = m["epochs"][m["best_epoch"]]
    assert best["test_acc"] == pytest.approx(float((full == ds.labels[ds.split("test")]).mean()))


def test_report_plots_and_tensorboard(hubby, cli, tmp_path):
    pytest.importorskip("matplotlib")
    r = cli("train", hubby, "--epochs", "2", "--batch-size", "128", "--out", tmp_path / "run", "--quiet",
            "--tensorboard", "--eval", "sampled")
    assert r.code == 0, r.err
    png = (tmp_path / "run" / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    events = list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 100
    r = cli("report", tmp_path / "run", "--json")
    rep = json.loads(r.out)
    assert rep["epochs"] == 2 and rep["plots"] == ["curves.png"] and rep["tensorboard"] is True
    assert [e["epoch"] for e in rep["history"]] == [0, 1]
    r = cli("report", tmp_path / "run")
    assert r.code == 0 and "best epoch" in r.out and "curves.png" in r.out
    r = cli("report", tmp_path / "nothing")
    assert r.code == 1 and "metrics.json does not exist" in r.err


def test_report_of_a_run_without_a_test_split(cli, tmp_path):
    """A typed target without a test split records test_acc None, in its epochs and in its
    layer-wise scores: the report shows "-" there (it failed with a TypeError)."""
    run = tmp_path / "run"
    run.mkdir()
    epoch = dict(epoch=0, loss=1.0, val_acc=0.5, test_acc=None, seconds=1.0, train_seconds=0.5, wait_seconds=0.1,
                 eval_seconds=0.2)
    args = dict(task="node", model="sage", fanouts={"a:to:b": [2, 2]}, batch_size=4, hidden=8, layers=2, lr=0.01,
                dropout=0.0, seed=0)
    (run / "metrics.json").write_text(json.dumps(dict(
        dataset="/x/ds", task="node", best_val_acc=0.5, test_acc=None, best_epoch=0, world_size=1, epochs=[epoch],
        args=args, layerwise=dict(epoch=0, val_acc=0.5, test_acc=None, seconds=1.0))))
    r = cli("report", run)
    assert r.code == 0, r.err
    assert "best epoch 0: val acc 0.5000, test acc   -    (sampled neighborhoods)" in r.out
    assert "layer-wise (exact) evaluation of epoch 0: val acc 0.5000, test acc   -    (1.0 s)" in r.out


def test_errors(hubby, runs, cli, tmp_path):
    _, run = runs["sage"]
    r = cli("predict", tmp_path, "--out", tmp_path / "p.npy")
    assert r.code == 1 and "no best.pt or last.pt there" in r.err
    r = cli("predict", run, "--out", tmp_path / "p.txt")
    assert r.code == 1 and "give a .npy path" in r.err
    r = cli("embed", run, "--layer", "3", "--out", tmp_path / "e.npy")
    assert r.code == 1 and "--layer 3: the model has layers 1..2" in r.err
    r = cli("predict", run, "--nodes", "nope", "--out", tmp_path / "p.npy")
    assert r.code == 1 and "nope" in r.err
    bad = tmp_path / "ids.npy"
    np.save(bad, np.array([1, 99999]))
    r = cli("predict", run, "--nodes", bad, "--out", tmp_path / "p.npy")
    assert r.code == 1 and "99999" in r.err
    r = cli("predict", run, "--out", tmp_path / "p.npy", "--memory", "10M")
    assert r.code == 1 and "--memory" in r.err and "give at least" in r.err
    assert not list(tmp_path.glob("p.npy*")), "no output, not even a temporary one"
    with pytest.raises(ringgnn.InputError, match="eval"):
        train(hubby, out=str(tmp_path / "x"), eval_mode="nonsense", **FAST)


@pytest.mark.parametrize("model, signame, code", [("gat", "SIGINT", 130), ("gcn", "SIGTERM", 143)])
def test_an_interrupted_inference_leaves_no_output(hubby, runs, tmp_path, model, signame, code):
    """Ctrl-C or SIGTERM in the middle: no output file, no temporary files, no intermediate
    layers."""
    _, run = runs[model]
    out = tmp_path / "out"
    out.mkdir()
    script = ("import ringgnn.inference.run as I, os, signal\n"
              "orig = I.LayerwiseInference.compute\n"
              "def compute(self, k, *a, **kw):\n"
              f"    if k == 1: os.kill(os.getpid(), signal.{signame})\n"
              "    return orig(self, k, *a, **kw)\n"
              "I.LayerwiseInference.compute = compute\n"
              "import sys; from ringgnn.cli import main; sys.exit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", script, "predict", str(run), "--out", str(out / "p.npy"), "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == code, r.stderr
    assert list(out.iterdir()) == [], "nothing left behind"
    assert not [p for p in Path(run).iterdir() if p.name.startswith(".ringgnn-infer")]


def test_a_full_disk_leaves_no_output(hubby, runs, tmp_path):
    """Writes that fail (RLIMIT_FSIZE: a file larger than the limit cannot be written, as on a
    full disk) end with an error and no partial file."""
    _, run = runs["sage"]
    out = tmp_path / "out"
    out.mkdir()
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
            "from ringgnn.cli import main; sys.exit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, "embed", str(run), "--layer", "1", "--out", str(out / "e.npy"),
                        "--quiet", "--keep-layers"], capture_output=True, text=True)
    assert r.returncode != 0
    assert "File too large" in r.stderr or "error" in r.stderr
    assert list(out.iterdir()) == []


def test_row_file_layout_is_the_feature_file_layout(tmp_path):
    for dim in (3, 100, 1500):  # 12-byte rows, 400-byte rows (padding per page), rows larger than a page
        rows = np.random.default_rng(dim).standard_normal((1000, dim)).astype(np.float32)
        w = RowFileWriter(str(tmp_path / f"m{dim}"), dim)
        for part in np.array_split(rows, 7):
            w.append(part)
        path = w.finish()
        assert os.path.getsize(path) % 4096 == 0
        reader = ringgnn._core.FeatureReader.matrix(path, 1000, dim, backend="pread")
        ids = np.array([0, 999, 17, 17, 500], dtype=np.int64)
        np.testing.assert_array_equal(reader.gather(ids), rows[ids])
        with pytest.raises(ringgnn.RingGnnError):
            reader.gather(np.array([1000], dtype=np.int64))


def test_blocks_cover_every_edge_once_and_chunk_hubs():
    deg = np.array([3, 0, 12, 1, 1, 5, 0, 2])
    indptr = np.concatenate([[0], np.cumsum(deg)])
    got = list(blocks(indptr, 4, 3))
    assert [(b.lo, b.hi) for b in got][0][0] == 0
    spans = [(b.lo, b.hi) for b in got]
    assert all(s[1] == t[0] for s, t in zip(spans, spans[1:])) and spans[-1][1] == indptr[-1]
    assert all(b.hi - b.lo <= 4 and b.b - b.a <= 3 for b in got)
    hub = [b for b in got if b.a == 2]
    assert [(b.part, b.parts) for b in hub] == [(0, 3), (1, 3), (2, 3)]
    nodes = sorted({v for b in got for v in range(b.a, b.b)})
    assert nodes == list(range(8))
    wanted = np.zeros(8, dtype=bool)
    wanted[7] = True
    assert all(b.a <= 7 < b.b for b in blocks(indptr, 4, 3, wanted))


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_finishing_a_block_in_slices_changes_nothing(hubby, runs, model, monkeypatch):
    _, run = runs[model]
    whole = infer(str(run), grid_nodes=500, hidden_dtype="f32")
    monkeypatch.setattr("ringgnn.inference.engine.FINISH_ROWS", 7)
    # Equal up to float32 rounding (f32 hidden layers: a bf16 one would round such a difference
    # to its last bit): a matrix product over 7 rows may add in another order than
    # over 1000 (BLAS picks its kernel by shape; torch 2.15's CPU kernels do, by the last bit).
    np.testing.assert_allclose(infer(str(run), grid_nodes=500, hidden_dtype="f32"), whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_reading_the_next_piece_ahead_changes_nothing(hubby, runs, model):
    from ringgnn.inference.run import LayerwiseInference

    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs[model][1]), ds)
    got = {}
    for overlap in (True, False):
        li = LayerwiseInference(ds, ckpt, block_edges=30, grid_nodes=400, overlap=overlap)
        assert li.plan["overlap"] is overlap
        rows = {}
        li.run(None, None, lambda a, r: rows.__setitem__(a, r.copy()))
        got[overlap] = np.concatenate([rows[a] for a in sorted(rows)])
    np.testing.assert_array_equal(got[True], got[False])


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("block_edges, grid_nodes", [(None, None), (40, 100), (7, 1)])
def test_the_rust_and_python_aggregations_agree_with_pyg(hubby, runs, model, block_edges, grid_nodes, monkeypatch):
    """The grid's aggregates by the Rust core (default) and by torch (``aggregate="python"``, also
    chosen by RINGGNN_INFER_AGGREGATE) both equal the full-batch forward: sums, GCN's weighted
    sums and GAT's online softmax, with hubs, self loops, duplicates, many blocks and pieces, and
    hubs' edges in windows (``(40, 100)``: 15 blocks, pieces of 40 source rows, windows of 160
    edges; ``(7, 1)``: a block per node). The last layer (hidden -> 4 classes) sums ``W x`` in
    both: its accumulators are 4 wide."""
    from ringgnn.inference.run import LayerwiseInference
    from ringgnn.inference.engine import AGGREGATE_ENV

    ds = ringgnn.Dataset.open(hubby)
    _, run = runs[model]
    ckpt = load_checkpoint(str(run), ds)
    ref = full_batch(ds, ckpt.net)
    for agg in ("rust", "python"):
        li = LayerwiseInference(ds, ckpt, aggregate=agg, hidden_dtype="f32")
        assert li.widths[1] > li.widths[2] == 4
        if model != "gat":
            assert li._acc_width(1) == 4 and li._acc_width(0) == li.widths[0]
    got = {agg: infer(str(run), block_edges=block_edges, grid_nodes=grid_nodes, aggregate=agg, hidden_dtype="f32")
           for agg in ("rust", "python")}
    for agg, out in got.items():
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=agg)
    np.testing.assert_allclose(got["rust"], got["python"], rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(AGGREGATE_ENV, "python")
    assert LayerwiseInference(ds, load_checkpoint(str(run), ds)).plan["aggregate"] == "python"
    monkeypatch.setenv(AGGREGATE_ENV, "rust")
    assert LayerwiseInference(ds, load_checkpoint(str(run), ds)).plan["aggregate"] == "rust"
    monkeypatch.setenv(AGGREGATE_ENV, "numba")
    with pytest.raises(ringgnn.InputError, match="RINGGNN_INFER_AGGREGATE.*'numba' is unknown; use one of rust, python"):
        LayerwiseInference(ds, load_checkpoint(str(run), ds))


@pytest.mark.parametrize("grid_nodes, block_edges", [(None, None), (100, 40), (1, 7)])
def test_sage_with_max_aggregation_equals_a_full_batch_forward(hubby, runs, grid_nodes, block_edges):
    """ringgnn's GraphSAGE averages; a ``SAGEConv(aggr="max")`` (the same weights, another
    aggregation) runs on the grid too, its maxima folded by the Rust core or by torch, and a node
    without in-edges aggregates to 0 as in PyG."""
    from ringgnn.inference.run import LayerwiseInference

    ds = ringgnn.Dataset.open(hubby)
    assert (np.diff(ds.indptr()) == 0).any()  # nodes without in-edges
    ckpt, net = with_max_aggregation(load_checkpoint(str(runs["sage"][1]), ds))
    ref = full_batch(ds, net)
    assert not np.allclose(ref, full_batch(ds, load_checkpoint(str(runs["sage"][1]), ds).net), atol=1e-2)
    for agg in ("rust", "python"):
        li = LayerwiseInference(ds, ckpt, aggregate=agg, grid_nodes=grid_nodes, block_edges=block_edges,
                                hidden_dtype="f32")
        assert li._acc_width(1) == li.widths[1]  # a maximum is not linear: no W x before it
        rows = {}
        li.run(None, None, lambda a, r: rows.__setitem__(a, r.copy()))
        got = np.concatenate([rows[a] for a in sorted(rows)])
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=agg)


def test_a_budget_below_the_least_is_refused_with_it_and_the_least_runs(hubby, runs):
    """The plan (infer_plan) refuses a budget under which a layer could run neither on the grid
    (more than MAX_SWEEPS sweeps) nor by source partitions, naming the least; that budget (plus
    what the process may grow by between the two runs) runs, each layer within MAX_SWEEPS sweeps
    or by partitions, and gives the full-batch forward."""
    import re

    from ringgnn.inference.plan import MAX_SWEEPS
    from ringgnn.inference.run import LayerwiseInference

    ds = ringgnn.Dataset.open(hubby)
    _, run = runs["sage"]
    ckpt = load_checkpoint(str(run), ds)
    li = LayerwiseInference(ds, ckpt, memory=1 << 30)
    least = li.memplan.least_budget(range(2))
    with pytest.raises(ringgnn.InputError, match="give at least --memory") as e:
        infer(str(run), memory=li.memplan.fixed + 1000)
    named = int(re.search(r"give at least --memory ([\d,]+)", str(e.value)).group(1).replace(",", ""))
    assert abs(named - least) < 16 << 20  # the same rule; the process's held memory moves a little
    s = {}
    got = infer(str(run), memory=named + (16 << 20), quiet=True, hidden_dtype="f32")
    ref = full_batch(ds, ckpt.net)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    li = LayerwiseInference(ds, ckpt, memory=named + (16 << 20))
    li.run(2, None, lambda a, rows: s.setdefault("rows", []).append(len(rows)))
    # Each layer runs within MAX_SWEEPS sweeps, or by source partitions (infer_plan's check).
    for g, lay in zip(li.plan["grid"]["layers"], li.stats["layers"]):
        assert g["sweeps"] <= MAX_SWEEPS or lay["scheme"] == "partitioned"
    assert sum(s["rows"]) == ds.num_nodes


def test_outputs_synced_and_dropped_in_small_steps_are_the_same(hubby, runs, tmp_path, monkeypatch):
    """The output .npy and the layer files are synced and dropped from memory every SYNC_BYTES
    (what a memory cap counts of them): written that way a few KiB at a time, the files are the
    same."""
    _, run = runs["gcn"]
    whole = infer(str(run), output="embeddings", out=str(tmp_path / "a.npy"))
    monkeypatch.setattr("ringgnn.inference.rows.SYNC_BYTES", 4096)
    infer(str(run), output="logits", out=str(tmp_path / "b.npy"), keep=True)
    monkeypatch.undo()
    infer(str(run), output="logits", out=str(tmp_path / "c.npy"))
    assert whole["rows"] == 1500
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), np.load(tmp_path / "c.npy"))


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_hidden_layers_in_bf16_and_f16_give_the_same_predictions(hubby, runs, model, tmp_path):
    """--hidden-dtype (bf16 by default): the hidden layers' rows are stored in 2 bytes between
    layers, so each later layer reads half the bytes; the test split's predictions are those of
    f32 hidden layers, and the logits all-close within the stated tolerance (INFERENCE.md)."""
    _, run = runs[model]
    ds = ringgnn.Dataset.open(hubby)
    ref = full_batch(ds, load_checkpoint(str(run), ds).net)
    f32 = infer(str(run), output="logits", hidden_dtype="f32")
    np.testing.assert_allclose(f32, ref, rtol=1e-4, atol=1e-4)
    test = ds.split("test")
    for dt in ("bf16", "f16"):
        got = infer(str(run), output="logits", hidden_dtype=dt)
        np.testing.assert_allclose(got, f32, rtol=2e-2, atol=2e-2 * np.abs(f32).max(), err_msg=dt)
        np.testing.assert_array_equal(infer(str(run), output="predictions", nodes="test", hidden_dtype=dt),
                                      f32[test].argmax(1))
    assert not np.array_equal(infer(str(run), output="logits"), f32)  # the default is bf16, not f32
    s = infer(str(run), output="logits", out=str(tmp_path / "l.npy"), keep=True)
    assert s["plan"]["hidden_dtype"] == "bf16" and (tmp_path / "layer1.bf16").exists()
    size = os.path.getsize(tmp_path / "layer1.bf16")
    width = s["plan"]["grid"]["layers"][0]["layer"] and load_checkpoint(str(run), ds).net.convs[0].out_channels
    heads = getattr(load_checkpoint(str(run), ds).net.convs[0], "heads", 1) if model == "gat" else 1
    per_page = 4096 // (2 * width * heads)
    assert size == -(-ds.num_nodes // per_page) * 4096


def test_bf16_rows_round_to_nearest_even_as_torch_does(tmp_path):
    from ringgnn.inference.rows import encode_rows

    rng = np.random.default_rng(0)
    x = np.concatenate([(rng.standard_normal(5000) * 10.0 ** rng.integers(-30, 30, 5000)).astype(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8],
                                 dtype=np.float32)])
    got = encode_rows(x.reshape(-1, 1), "bf16").ravel()
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, want)
    nan = encode_rows(np.array([[np.nan]], dtype=np.float32), "bf16")
    assert np.isnan(torch.from_numpy(nan.view(np.int16)).view(torch.bfloat16).float().numpy()).all()
    # written and read back by the core's reader, widened to f32
    w = RowFileWriter(str(tmp_path / "m.bf16"), 3, "bf16")
    rows = rng.standard_normal((1000, 3)).astype(np.float32)
    w.append(rows[:400])
    w.append(rows[400:])
    path = w.finish()
    back = ringgnn._core.FeatureReader.matrix(path, 1000, 3, dtype="bf16").gather(np.arange(1000))
    np.testing.assert_array_equal(back, torch.from_numpy(rows).to(torch.bfloat16).float().numpy())
    with pytest.raises(ringgnn.InputError, match="bf8"):
        ringgnn._core.FeatureReader.matrix(path, 1000, 3, dtype="bf8")


def test_the_hidden_dtype_option_of_the_commands(hubby, runs, cli, tmp_path):
    _, run = runs["gcn"]
    r = cli("predict", run, "--nodes", "test", "--hidden-dtype", "f16", "--out", tmp_path / "p.npy", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["plan"]["hidden_dtype"] == "f16"
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  infer(str(run), output="predictions", nodes="test", hidden_dtype="f16"))
    r = cli("embed", run, "--hidden-dtype", "bf8", "--out", tmp_path / "e.npy")
    assert r.code == 2 and "bf8" in r.err and not (tmp_path / "e.npy").exists()
    with pytest.raises(ringgnn.InputError, match="--hidden-dtype.*'bf8' is unknown"):
        infer(str(run), hidden_dtype="bf8")


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_the_device_path_runs_on_the_cpu(hubby, runs, model, monkeypatch):
    """--device: the dense parts go through up/down (a GPU's page-locked copies; infer_dense);
    with cpu, the same code runs on the host's numpy arrays (no GPU here: the CUDA copies are
    untested), and the results are the default's. Every dense input passes up, every output down."""
    from ringgnn.models.dense import Numpy

    _, run = runs[model]
    want = infer(str(run), output="logits", hidden_dtype="f32")
    seen = {"up": 0, "down": 0}
    up, down = Numpy.up, Numpy.down

    def count_up(a):
        seen["up"] += 1
        assert isinstance(a, np.ndarray)  # host rows
        return up(a)

    def count_down(x):
        seen["down"] += 1
        return down(x)

    monkeypatch.setattr(Numpy, "up", staticmethod(count_up))
    monkeypatch.setattr(Numpy, "down", staticmethod(count_down))
    got = infer(str(run), output="logits", hidden_dtype="f32", device="cpu")
    np.testing.assert_array_equal(got, want)
    assert seen["up"] > 0 and seen["down"] > 0
    if not torch.cuda.is_available():
        with pytest.raises(ringgnn.InputError, match="--device cuda: PyTorch sees no CUDA device"):
            infer(str(run), device="cuda")
    with pytest.raises(ringgnn.InputError, match="--device.*'tpu' is unknown"):
        infer(str(run), device="tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: run on a machine with a GPU")
@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_inference_on_cuda_equals_the_cpu(hubby, runs, model):
    """--device cuda: the dense parts on the GPU, blocks copied through page-locked buffers; the
    logits are the CPU's within float32 rounding and the test split's predictions are the same."""
    _, run = runs[model]
    want = infer(str(run), output="logits", hidden_dtype="f32")
    got = infer(str(run), output="logits", hidden_dtype="f32", device="cuda")
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(infer(str(run), output="predictions", nodes="test", device="cuda"),
                                  infer(str(run), output="predictions", nodes="test"))


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_the_cpu_commands_never_import_pytorch_and_give_pyg_s_answers(hubby, runs, model, tmp_path):
    """`ringgnn predict`/`embed` on the CPU read the checkpoint as numpy arrays (ringgnn.models.torchfile)
    and run the dense parts in numpy (ringgnn.models.dense): PyTorch and PyG are never imported
    (435 MiB of anonymous memory), and the logits are the full-batch PyG forward's, the test
    split's predictions the same as from the PyG model held in memory."""
    from ringgnn.inference.run import LayerwiseInference

    ds = ringgnn.Dataset.open(hubby)
    _, run = runs[model]
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"rc = main(['predict', {str(run)!r}, '--probabilities', '--hidden-dtype', 'f32', '--quiet', '--out', "
            f"{str(tmp_path / 'p.npy')!r}])\n"
            "print('torch' in sys.modules, 'torch_geometric' in sys.modules, rc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.split()[-3:] == ["False", "False", "0"], r.stderr
    ckpt = load_checkpoint(str(run), ds)
    ref = torch.softmax(torch.from_numpy(full_batch(ds, ckpt.net)), dim=1).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), ref, rtol=1e-4, atol=1e-5)
    # The PyG model in memory (infer_dense.from_module) and the arrays (from_state) agree.
    rows = {}
    LayerwiseInference(ds, ckpt, hidden_dtype="f32").run(None, None, lambda a, x: rows.__setitem__(a, x.copy()))
    held = np.concatenate([rows[a] for a in sorted(rows)])
    np.testing.assert_allclose(infer(str(run), output="logits", hidden_dtype="f32"), held, rtol=1e-5, atol=1e-5)
    test = ds.split("test")
    np.testing.assert_array_equal(infer(str(run), output="predictions", nodes="test", hidden_dtype="f32"),
                                  held[test].argmax(1))


def test_a_checkpoint_that_does_not_fit_is_refused_by_key_and_shape(hubby, runs, tmp_path):
    """Read without PyTorch, a checkpoint is checked as load_state_dict checks it: a misshapen,
    missing or unexpected weight is an error naming the file and the key, before anything runs."""
    _, run = runs["sage"]
    state = torch.load(run / "best.pt", weights_only=True)
    for name, change, match in (
            ("shape", lambda m: m.__setitem__("convs.0.lin_l.weight", torch.zeros(3, 3)),
             r"size mismatch: convs.0.lin_l.weight \(3, 3\)"),
            ("missing", lambda m: m.pop("convs.1.lin_r.weight"), "missing convs.1.lin_r.weight"),
            ("extra", lambda m: m.__setitem__("convs.2.lin_l.weight", torch.zeros(1)),
             "unexpected convs.2.lin_l.weight")):
        bad = tmp_path / name
        bad.mkdir()
        s = dict(state, model=dict(state["model"]))
        change(s["model"])
        torch.save(s, bad / "best.pt")
        with pytest.raises(ringgnn.InputError, match=f"best.pt does not fit the dataset .*{match}"):
            infer(str(bad), dataset=str(hubby))


def test_the_memmap_writer_puts_rows_at_their_positions_and_renames_when_finished(tmp_path):
    """predict/embed's ``.npy`` outputs: rows put at any positions, in any order; the file
    appears, whole, at :meth:`finish`; :meth:`abort` leaves nothing."""
    out = tmp_path / "rows.npy"
    w = MemmapNpyWriter(str(out), (5, 2), np.float32)
    w.put(np.array([4, 0]), np.array([[4, 4], [0, 0]], np.float32))
    w.put(slice(1, 4), np.array([[1, 1], [2, 2], [3, 3]], np.float32))
    assert not out.exists()
    assert w.finish() == str(out)
    np.testing.assert_array_equal(np.load(out), np.repeat(np.arange(5, dtype=np.float32)[:, None], 2, axis=1))
    w = MemmapNpyWriter(str(tmp_path / "gone.npy"), (3,), np.int64)
    w.put(np.array([1]), np.array([7]))
    w.abort()
    assert os.listdir(tmp_path) == ["rows.npy"]
