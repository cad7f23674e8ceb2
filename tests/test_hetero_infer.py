"""Layer-wise inference of heterogeneous runs (python/ringgnn/inference/hetero.py) and what
``ringgnn predict``/``ringgnn embed`` do with such runs. The reference is a full-batch forward
of the same checkpoint's ``HeteroModel`` over the whole graph (every relation's full CSC)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ringgnn
from ringgnn import NodeType, Relation, _core, _options
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.data.generate import generate_hetero
from ringgnn.inference.hetero import infer_hetero, load_hetero_run
from ringgnn.training.loop import train

from conftest import python_m

QUIET = dict(epochs=1, quiet=True, log=lambda s: None)
WRITES = [(0, 0), (1, 0), (1, 1), (2, 3), (0, 4)]  # author -> paper: paper 2 has no author, author 3 no paper
CITES = [(1, 0), (2, 0), (3, 1), (0, 2), (4, 4)]  # paper -> paper, a self loop kept as stored
HOSTS = [(0, 0), (1, 2), (0, 3)]  # venue -> paper; no relation enters venue


def _edges(path, pairs):
    with open(path, "w") as f:
        f.writelines(f"{s},{d}\n" for s, d in pairs)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """Five papers (3-d features, labels, splits), four authors and two venues without features
    (learned embeddings); nodes without in-neighbors in a relation, a type no relation enters."""
    d = tmp_path_factory.mktemp("hinfer-tiny")
    np.save(d / "x.npy", np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    np.save(d / "y.npy", np.array([0, 1, 0, 1, 1]))
    for name, ids in (("train", [0, 1, 2]), ("val", [3]), ("test", [4])):
        np.save(d / f"{name}.npy", np.array(ids))
    split = {s: str(d / f"{s}.npy") for s in ("train", "val", "test")}
    ringgnn.build_hetero(
        d / "ds",
        [NodeType("paper", 5, features=d / "x.npy", labels=d / "y.npy", split=split), NodeType("author", 4),
         NodeType("venue", 2)],
        [Relation("author:writes:paper", _edges(d / "w.csv", WRITES)),
         Relation("paper:written_by:author", _edges(d / "wb.csv", [(p, a) for a, p in WRITES])),
         Relation("paper:cites:paper", _edges(d / "c.csv", CITES)),
         Relation("venue:hosts:paper", _edges(d / "h.csv", HOSTS))],
    )
    return d / "ds"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hinfer-gen") / "g"
    generate_hetero(out, papers=3000, authors=900, institutions=40, feature_dim=16, seed=1)
    return out


@pytest.fixture(scope="module")
def runs(tiny, generated, tmp_path_factory):
    """One epoch per (graph, model): 2 layers, embeddings narrower than the hidden layer."""
    root = tmp_path_factory.mktemp("hinfer-runs")
    out = {}
    for name, ds in (("tiny", tiny), ("generated", generated)):
        for model in ("sage", "rgcn"):
            run = root / f"{name}-{model}"
            train(ds, target="paper", model=model, hidden=16, embed_dim=8, layers=2, batch_size=1024,
                         out=str(run), **QUIET)
            out[name, model] = run
    return out


def full_batch(run, hidden_layer=None):
    """(logits of every paper, per type the rows after layer ``hidden_layer`` activated) of the
    run's model on the whole graph in memory: its own forward."""
    ds, net, _ = load_hetero_run(str(run))
    x = {t: torch.from_numpy(_core.FeatureReader(ds.path, part=f"node/{t}").gather(np.arange(n)))
         for t, n in ds.num_nodes_dict.items() if ds.feature_dims()[t] is not None}
    edges = {}
    for r in ds.relations:
        rel = ds.relation(r)
        dst = np.repeat(np.arange(rel.num_nodes), rel.degrees())
        src = np.concatenate([rel.neighbors(v) for v in range(rel.num_nodes)] + [np.empty(0, np.int64)])
        edges[tuple(r.split(":"))] = torch.from_numpy(np.stack([src.astype(np.int64), dst]))
    n_id = {t: torch.arange(n) for t, n in ds.num_nodes_dict.items()}
    seen = {}
    if hidden_layer is not None:
        net.convs[hidden_layer - 1].register_forward_hook(lambda _m, _i, out: seen.update(out))
    with torch.no_grad():
        logits = net(x, edges, n_id).numpy()
    return logits, {t: v.relu().numpy() for t, v in seen.items()}, ds, net


def _accuracy(ds, logits, split):
    part = ds.node_type("paper")
    ids = part.split(split)
    return float((logits[ids].argmax(1) == part.labels[ids]).mean())


@pytest.mark.parametrize("agg", ["rust", "python"])
@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_tiny_graph_every_edge_its_own_piece(runs, model, agg, monkeypatch):
    """Blocks of 2 destinations, pieces of one edge: every accumulation path, empty neighbor
    lists, a type only its root term computes; the sums by the Rust core (default) or numpy.
    The dense parts are numpy's (``HeteroDense``), the reference the model's PyTorch forward."""
    from ringgnn.inference.engine import AGGREGATE_ENV

    monkeypatch.setenv(AGGREGATE_ENV, agg)
    ref, _, ds, net = full_batch(runs["tiny", model])
    assert "venue" in net.computed[1] and not any(et[2] == "venue" for et in net.edge_types)
    assert (ds.relation("author:writes:paper").degrees()[2], ds.relation("paper:written_by:author").degrees()[3]) == (0, 0)
    s = infer_hetero(str(runs["tiny", model]), block_nodes=2, piece_edges=1)
    assert s["array"].shape == (5, 2)
    np.testing.assert_allclose(s["array"], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(s["array"].argmax(1), ref.argmax(1))
    assert s["accuracy"] == {"val": _accuracy(ds, ref, "val"), "test": _accuracy(ds, ref, "test")}
    # layer 1 computes paper, author and venue (in 3, 2 and 1 blocks), layer 2 paper (3 blocks)
    assert s["blocks"] == 3 + 2 + 1 + 3


@pytest.mark.parametrize("agg", ["rust", "python"])
@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_generated_graph_blocks_sized_from_memory(runs, model, agg, monkeypatch):
    """The homogeneous runs' plan (``infer_plan.InferencePlan``) sizes the blocks: each (layer,
    destination type) is cut by its in-degrees over the relations into the type. With the
    process's footprint pinned, a budget too small for any layer to run within MAX_SWEEPS sweeps
    is refused in the homogeneous runs' words, naming the least budget; that budget runs, in
    several blocks of some layer and at most MAX_SWEEPS of any, one block per sweep, and gives the
    full-batch forward's logits and accuracies, summed by the Rust core (default: destinations of
    one type, sources of another, an embedding table's rows too) or by numpy; one byte less is
    refused."""
    from ringgnn.inference.plan import FIXED_BYTES, MAX_SWEEPS, WRITE_BYTES
    from ringgnn.inference.engine import AGGREGATE_ENV, SCHEME_ENV

    monkeypatch.setenv(AGGREGATE_ENV, agg)
    monkeypatch.setenv(SCHEME_ENV, "grid")  # the grid's plan: source partitions are the next test's
    ref, _, ds, _ = full_batch(runs["generated", model])
    monkeypatch.setattr(_options, "held_memory", lambda: 100 << 20)  # what every plan takes off as held
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    run = str(runs["generated", model])
    with pytest.raises(ringgnn.InputError, match=f"would then sweep a layer's input more than {MAX_SWEEPS} times: "
                       "give at least --memory") as e:
        infer_hetero(run, memory=(100 << 20) + FIXED_BYTES + WRITE_BYTES + 1000)
    least = int(re.search(r"give at least --memory ([\d,]+)", str(e.value)).group(1).replace(",", ""))
    s = infer_hetero(run, memory=least)
    plan = s["plan"]
    assert plan["aggregate"] == agg and plan["budget"] == least
    layers = plan["grid"]["layers"]
    assert (layers[-1]["layer"], layers[-1]["type"]) == (2, "paper") and {g["layer"] for g in layers} == {1, 2}
    sweeps = [g["sweeps"] for g in layers]
    assert 1 < max(sweeps) <= MAX_SWEEPS
    assert s["blocks"] == sum(sweeps)
    np.testing.assert_allclose(s["array"], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(s["array"].argmax(1), ref.argmax(1))
    assert s["val_acc"] == _accuracy(ds, ref, "val") and s["test_acc"] == _accuracy(ds, ref, "test")
    with pytest.raises(ringgnn.InputError, match=re.escape(f"give at least --memory {least:,}")):
        infer_hetero(run, memory=least - 1)


def test_embeddings_of_every_layer_and_type(runs, tiny):
    run = str(runs["tiny", "sage"])
    ref, hidden, ds, net = full_batch(run, hidden_layer=1)
    # layer 0: a featureless type's table, a featured type's features
    e = infer_hetero(run, layer=0, node_type="author")
    assert e["output"] == "embeddings" and e["array"].shape == (4, 8)
    np.testing.assert_array_equal(e["array"], net.embeddings["author"].weight.detach().numpy())
    x = _core.FeatureReader(str(tiny), part="node/paper").gather(np.arange(5))
    np.testing.assert_array_equal(infer_hetero(run, layer=0)["array"], x)
    # layer 1 (the default for the target: the last hidden layer), activated, any node order
    for t in ("paper", "author", "venue"):
        got = infer_hetero(run, node_type=t, output="embeddings", block_nodes=1, piece_edges=2)
        assert got["layer"] == 1 and got["array"].shape == (ds.num_nodes_dict[t], 16)
        np.testing.assert_allclose(got["array"], hidden[t], rtol=1e-4, atol=1e-4)
    nodes = np.array([3, 0, 3, 1])
    got = infer_hetero(run, node_type="author", layer=1, nodes=nodes, dtype="f16")
    assert got["array"].dtype == np.float16
    np.testing.assert_allclose(got["array"].astype(np.float32), hidden["author"][nodes], rtol=1e-2, atol=1e-2)
    # layer 2 is the logits, of the target only
    np.testing.assert_allclose(infer_hetero(run, output="embeddings", layer=2)["array"], ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ringgnn.InputError, match="layer 2 of the model does not compute node type 'author'"):
        infer_hetero(run, node_type="author", layer=2)
    with pytest.raises(ringgnn.InputError, match="layers 0..2"):
        infer_hetero(run, layer=3)


def test_outputs_files_and_temporaries(runs, tmp_path):
    run = str(runs["tiny", "rgcn"])
    ref, hidden, _, _ = full_batch(run, hidden_layer=1)
    s = infer_hetero(run, output="predictions", nodes="val", out=str(tmp_path / "p.npy"), keep=True)
    assert s["out"] == str(tmp_path / "p.npy") and "array" not in s
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), ref[[3]].argmax(1))
    # the intermediate layer, kept: layer 1's activated rows in the feature-file layout
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["layer1.author.f32", "layer1.paper.f32", "layer1.venue.f32", "p.npy"]
    for t, n in (("author", 4), ("paper", 5), ("venue", 2)):
        rows = _core.FeatureReader.matrix(str(tmp_path / f"layer1.{t}.f32"), n, 16).gather(np.arange(n))
        np.testing.assert_allclose(rows, hidden[t], rtol=1e-4, atol=1e-4)
    p = infer_hetero(run, output="probabilities", out=str(tmp_path / "q.npy"))
    assert p["rows"] == 5
    q = np.load(tmp_path / "q.npy")
    np.testing.assert_allclose(q.sum(1), 1, rtol=1e-5)
    np.testing.assert_array_equal(q.argmax(1), ref.argmax(1))
    assert not [f for f in os.listdir(tmp_path) if "ringgnn-tmp" in f]  # temporaries gone


def test_errors_name_what_is_wrong(runs, tmp_path, generated):
    run = str(runs["tiny", "sage"])
    with pytest.raises(ringgnn.InputError, match="--type venue2: not a node type of the run"):
        infer_hetero(run, node_type="venue2")
    with pytest.raises(ringgnn.InputError, match="only the target type 'paper' has logits"):
        infer_hetero(run, node_type="author", output="logits")
    with pytest.raises(ringgnn.InputError, match=r"was trained with node types \['author', 'paper', 'venue'\].*; use "
                       "the dataset the model was trained on"):
        infer_hetero(run, dataset=generated)
    with pytest.raises(ringgnn.InputError, match="--nodes: 9 is not a node of type 'paper'"):
        infer_hetero(run, nodes=np.array([1, 9]))
    with pytest.raises(ringgnn.InputError, match="is a heterogeneous run.*ringgnn predict"):
        load_checkpoint(run, None, "--model")


def test_cli_predict_and_embed(runs, tmp_path):
    run = runs["generated", "sage"]
    ref, _, ds, _ = full_batch(run)
    env = {"PYTHONPATH": str(Path(ringgnn.__file__).parent.parent)}
    r = python_m("predict", run, "--out", tmp_path / "p.npy", "--memory", "3G", "--quiet", env=env)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), ref.argmax(1))
    assert f"predictions of 3,000 paper nodes -> {tmp_path / 'p.npy'}" in r.stdout
    assert f"val accuracy {_accuracy(ds, ref, 'val'):.4f}; test accuracy {_accuracy(ds, ref, 'test'):.4f}" in r.stdout
    r = python_m("embed", run, "--type", "institution", "--layer", "0", "--out", tmp_path / "e.npy", "--quiet",
                 env=env)
    assert r.returncode == 0, r.stderr
    _, net, _ = load_hetero_run(str(run))
    np.testing.assert_array_equal(np.load(tmp_path / "e.npy"), net.embeddings["institution"].weight.detach().numpy())
    assert "layer 0 embeddings of 40 institution nodes (8 float32)" in r.stdout


def test_cli_refuses_what_does_not_apply(runs, tmp_path, cli):
    run = runs["tiny", "sage"]
    r = cli("embed", run, "--type", "venue2", "--out", tmp_path / "e.npy")
    assert r.code == 1 and "--type venue2: not a node type of the run (it has: author, paper, venue)" in r.err
    r = cli("predict", run, "--edges", "val")
    assert r.code == 1 and "--edges: scoring pairs is not supported yet for heterogeneous runs" in r.err
    # --type on a homogeneous run
    homo = tmp_path / "homo"
    homo.mkdir()
    torch.save({"args": {"model": "sage", "fanouts": [2], "layers": 1}}, homo / "best.pt")
    r = cli("embed", homo, "--type", "paper", "--out", tmp_path / "e.npy")
    assert r.code == 1 and "--type paper: names a node type of a heterogeneous run" in r.err
    assert not (tmp_path / "e.npy").exists()


@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_the_cpu_commands_never_import_pytorch_and_give_its_answers(runs, model, tmp_path):
    """`ringgnn predict`/`embed` of a heterogeneous run read the checkpoint as numpy arrays and run
    the dense parts in numpy (ringgnn.models.hetero_dense): PyTorch and PyG are never imported, and the
    answers are the PyTorch model's full-batch forward's (probabilities all-close, predictions the
    same, a featureless type's hidden rows all-close)."""
    run = runs["generated", model]
    ref, hidden, ds, _ = full_batch(run, hidden_layer=1)
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"a = main(['predict', {str(run)!r}, '--memory', '1G', '--quiet', '--out', {str(tmp_path / 'p.npy')!r}])\n"
            f"b = main(['predict', {str(run)!r}, '--probabilities', '--quiet', '--out', {str(tmp_path / 'q.npy')!r}])\n"
            f"c = main(['embed', {str(run)!r}, '--type', 'author', '--quiet', '--out', {str(tmp_path / 'e.npy')!r}])\n"
            "print('torch' in sys.modules, 'torch_geometric' in sys.modules, a, b, c)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.split()[-5:] == ["False", "False", "0", "0", "0"], r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), ref.argmax(1))
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), torch.softmax(torch.from_numpy(ref), 1).numpy(),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), hidden["author"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_dense_parts_from_the_checkpoint_are_the_models(runs, model):
    """The arrays read without PyTorch (``HeteroDense.from_state``) are the weights of the model
    PyTorch loads (``from_module``), key by key; the inference of either is the same."""
    from ringgnn.models.hetero_dense import HeteroDense
    from ringgnn.inference.hetero import HeteroLayerwise, load_hetero_dense

    run = str(runs["tiny", model])
    ds, dense, _ = load_hetero_dense(run)
    _, net, _ = load_hetero_run(run)
    held = HeteroDense.from_module(net)
    assert dense.computed == net.computed and sorted(dense.embeddings) == sorted(held.embeddings) == ["author", "venue"]
    for t in held.embeddings:
        np.testing.assert_array_equal(dense.embeddings[t], held.embeddings[t])
    for a, b in zip(dense.convs, held.convs):
        assert a.edge_types == b.edge_types and sorted(a.rels) == sorted(b.rels) and sorted(a.roots) == sorted(b.roots)
        for k in a.rels:
            for f in ("weight", "bias", "root"):
                x, y = getattr(a.rels[k], f), getattr(b.rels[k], f)
                assert (x is None) == (y is None) == (model == "rgcn" and f != "weight")
                if x is not None:
                    np.testing.assert_array_equal(x, y)
        for t in a.roots:
            np.testing.assert_array_equal(a.roots[t][0], b.roots[t][0])
            np.testing.assert_array_equal(a.roots[t][1], b.roots[t][1])
    got = {}
    for which in (dense, net):
        rows = []
        HeteroLayerwise(ds, which, block_nodes=2, piece_edges=3).run(2, "paper", lambda a, x: rows.append(x.copy()))
        got[which is net] = np.concatenate(rows)
    np.testing.assert_array_equal(got[True], got[False])


def test_a_checkpoint_that_does_not_fit_its_config_is_refused(runs, tmp_path):
    """A weight missing, misshapen or unexpected, read without PyTorch, is an error naming the
    checkpoint and the key (what ``load_state_dict`` would say), not a wrong answer."""
    from ringgnn.models.torchfile import load

    src = runs["tiny", "rgcn"] / "best.pt"
    state = torch.load(src, weights_only=True)
    key = "convs.1.rels.paper:cites:paper.conv.lin_l.weight"
    for what, change in (("missing " + key, lambda m: m.pop(key)),
                         (f"size mismatch: {key} (2, 15)", lambda m: m.__setitem__(key, m[key][:, 1:])),
                         ("unexpected convs.1.roots.venue.weight",
                          lambda m: m.__setitem__("convs.1.roots.venue.weight", torch.zeros(2, 16)))):
        bad = tmp_path / what.split()[0]
        bad.mkdir()
        s = {**state, "model": dict(state["model"])}
        change(s["model"])
        torch.save(s, bad / "best.pt")
        assert all(isinstance(v, np.ndarray) for v in load(str(bad / "best.pt"))["model"].values())
        with pytest.raises(ringgnn.InputError, match=re.escape(f"{bad / 'best.pt'} does not fit") + ".*"
                           + re.escape(what)):
            infer_hetero(str(bad))


def test_the_plan_is_the_homogeneous_runs_with_each_relations_costs(tmp_path, monkeypatch):
    """The plan's costs of each (layer, destination type), on a graph whose types all have
    features (32 floats; hidden 16): a destination holds 6 rows of the widest of its rows and
    ``DEST_BYTES``; a piece unit is a distinct source row and its 8-byte id for the Rust core
    (``8 + 4 x 32``), an edge of numpy's piece for ``aggregate="python"`` (``48 + 2 x 4 x 32``);
    a window's edge the core's source position (``_core.aggregate_edge_bytes``: 4 bytes here,
    none for numpy). Each is cut by the in-degrees of the relation into its type, and the least
    budget named is the plan's (``InferencePlan.least_budget``, from those costs)."""
    from ringgnn.inference.hetero import HeteroLayerwise
    from ringgnn.models.hetero import HeteroModel
    from ringgnn.inference.plan import (DEST_BYTES, FIXED_BYTES, MIN_ROWS, PART_EDGE, PART_NODE, SLACK, WRITE_BYTES,
                                        least_block_bytes)
    from ringgnn.inference.engine import SCHEME_ENV

    monkeypatch.setenv(SCHEME_ENV, "grid")  # the least budget of the grid (source partitions: their own test)
    rng = np.random.default_rng(5)
    for t, n in (("paper", 5), ("author", 4)):
        np.save(tmp_path / f"{t}.npy", rng.standard_normal((n, 32)).astype(np.float32))
    ringgnn.build_hetero(
        tmp_path / "ds", [NodeType("paper", 5, features=tmp_path / "paper.npy"),
                          NodeType("author", 4, features=tmp_path / "author.npy")],
        [Relation("author:writes:paper", _edges(tmp_path / "w.csv", WRITES)),
         Relation("paper:written_by:author", _edges(tmp_path / "wb.csv", [(p, a) for a, p in WRITES]))])
    ds = ringgnn.Dataset.open(str(tmp_path / "ds"))
    net = HeteroModel(["paper", "author"], ["author:writes:paper", "paper:written_by:author"],
                      {"paper": 32, "author": 32}, ds.num_nodes_dict, "paper", 16, 3, 2).eval()
    monkeypatch.setattr(_options, "held_memory", lambda: 100 << 20)
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    into = {"paper": ds.relation("author:writes:paper").indptr(), "author": ds.relation("paper:written_by:author").indptr()}
    exact = []
    for agg, unit, edge, in_flight, extra in (("rust", 8 + 4 * 32, 4, 2, 5 // 4 + 16), ("python", 48 + 8 * 32, 0, 1, 0)):
        run = HeteroLayerwise(ds, net, aggregate=agg, memory=1)
        assert sorted(run.units) == [(1, "author"), (1, "paper"), (2, "paper")]
        for (k, d), c, ip in zip(run.units, run.memplan.costs, run.memplan.indptrs):
            wide = 32 if k == 1 else 16  # layer 2's input and sources are layer 1's rows
            window = 4 * wide + PART_NODE + PART_EDGE if agg == "rust" else 0  # a source row's accumulator
            want = (4 * 6 * wide + DEST_BYTES, unit if k == 1 else unit - (64 if agg == "rust" else 128), 0, edge,
                    window)
            assert (c.per_node, c.per_unit, c.per_finish_row, c.per_edge, c.per_window_edge) == want
            np.testing.assert_array_equal(ip, into[d])
        need = max(least_block_bytes(ip, c.per_node, per_edge=c.per_edge)
                   for c, ip in zip(run.memplan.costs, run.memplan.indptrs)) + in_flight * MIN_ROWS * unit
        least = (100 << 20) + FIXED_BYTES + WRITE_BYTES + extra + int(need / (1 - SLACK)) + 2
        with pytest.raises(ringgnn.InputError, match=re.escape(f"give at least --memory {least:,}")):
            run.run(2, "paper", lambda a, x: None)
        rows = []
        HeteroLayerwise(ds, net, aggregate=agg, memory=least).run(2, "paper", lambda a, x: rows.append(x.copy()))
        exact.append(np.concatenate(rows))
    rows = []
    HeteroLayerwise(ds, net, block_nodes=1, piece_edges=1).run(2, "paper", lambda a, x: rows.append(x.copy()))
    for got in exact:
        np.testing.assert_allclose(got, np.concatenate(rows), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(_core, "aggregate_edge_bytes", lambda n: 8)
    assert {c.per_edge for c in HeteroLayerwise(ds, net, aggregate="rust", memory=1).memplan.costs} == {8}


@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_source_partitions_give_the_grids_outputs(runs, model, monkeypatch, tmp_path):
    """Typed units by source partitions (each relation's sources cut by their own count, merged
    in blocks of its destination type; ``infer_partition``), forced with 1, 2 or 3 partitions:
    the grid's outputs of every type and layer (the same sums in another order), the full-batch
    forward's logits; the partials' temporaries are written and read, then removed."""
    from ringgnn.inference.hetero import HeteroLayerwise, load_hetero_dense
    from ringgnn.inference.engine import SCHEME_ENV

    run = str(runs["tiny", model])
    ds, net, _ = load_hetero_dense(run)
    ref, hidden, _, _ = full_batch(run, hidden_layer=1)

    def rows(t, layer, **kw):
        got = {}
        li = HeteroLayerwise(ds, net, block_nodes=2, piece_edges=1, work_dir=str(tmp_path), **kw)
        li.run(layer, t, lambda a, x: got.__setitem__(a, x.copy()), activate_last=layer < 2)
        return np.concatenate([got[a] for a in sorted(got)]), li.stats

    for t, layer in (("paper", 2), ("paper", 1), ("author", 1)):
        grid, gs = rows(t, layer, scheme="grid")
        assert {u["scheme"] for u in gs["layers"]} == {"grid"}
        for parts in (1, 2, 3):
            got, st = rows(t, layer, scheme="partitioned", parts=parts)
            assert {u["scheme"] for u in st["layers"] if u["type"] != "venue"} == {"partitioned"}
            assert all(u["temp_written"] > 0 and u["temp_read"] > 0 for u in st["layers"] if u["type"] != "venue")
            np.testing.assert_allclose(got, grid, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grid, ref if layer == 2 else hidden[t], rtol=1e-4, atol=1e-4)
    assert list(tmp_path.iterdir()) == []
    # The command's way: the scheme from the environment, the summary's units say which ran.
    monkeypatch.setenv(SCHEME_ENV, "partitioned")
    s = infer_hetero(run, block_nodes=2, piece_edges=1)
    assert {u["scheme"] for u in s["layers"] if u["type"] != "venue"} == {"partitioned"}
    np.testing.assert_allclose(s["array"], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scheme", ["grid", "partitioned"])
def test_the_summary_names_each_units_scheme_and_some_nodes_skip_blocks(runs, scheme, monkeypatch):
    """The engine's one check (``Engine.check``) puts each unit's scheme in a typed run's plan, as
    in a homogeneous run's: the text of the choice each unit then ran with, in the units' order.
    A typed unit's blocks (grid) or merge blocks (source partitions, ``merge_and_finish``)
    without a wanted node are skipped: papers 4 and 3 of five (the test and val nodes, whose
    accuracies the summary holds), blocks of 2, compute layer 2's blocks 2..4 and 4..5 only, and
    give the full-batch forward's logits in the asked order."""
    from ringgnn.inference.engine import SCHEME_ENV

    monkeypatch.setenv(SCHEME_ENV, scheme)
    run = str(runs["tiny", "sage"])
    ref, _, _, _ = full_batch(run)
    s = infer_hetero(run, nodes=np.array([4, 3]), block_nodes=2, piece_edges=1)
    assert [(u["layer"], u["type"]) for u in s["layers"]] == [(1, "author"), (1, "paper"), (1, "venue"), (2, "paper")]
    assert s["plan"]["schemes"] == [u["plan"] for u in s["layers"]]
    assert [u["scheme"] for u in s["layers"]] == [scheme, scheme, "grid", scheme]  # venue: its root term only
    assert s["blocks"] == 2 + 3 + 1 + 2
    np.testing.assert_allclose(s["array"], ref[[4, 3]], rtol=1e-4, atol=1e-4)


def test_the_least_budget_counts_source_partitions(runs, monkeypatch):
    """With source partitions allowed (``auto``), the least budget of a typed run is the
    homogeneous rule's: each unit on the grid within ``MAX_SWEEPS`` sweeps or by at most
    ``MAX_PARTS`` partition windows, whichever needs less (``InferencePlan.least_budget``); it
    runs, a unit beyond the sweep limit by partitions, and gives the full-batch logits; one byte
    less is refused naming it."""
    from ringgnn.inference.hetero import HeteroLayerwise, load_hetero_dense
    from ringgnn.inference.plan import MAX_PARTS

    monkeypatch.setattr(_options, "held_memory", lambda: 100 << 20)
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    run = str(runs["generated", "sage"])
    ds, net, _ = load_hetero_dense(run)
    ref, _, _, _ = full_batch(run)
    li = HeteroLayerwise(ds, net, memory=1)
    units = list(range(len(li.units)))
    least = li.memplan.least_budget(units)
    assert least < li.memplan.least_budget(units, grid_only=True)
    with pytest.raises(ringgnn.InputError, match=re.escape(f"source partitions would need more than {MAX_PARTS} "
                                                           f"windows: give at least --memory {least:,}")):
        infer_hetero(run, memory=least - 1)
    s = infer_hetero(run, memory=least)
    assert "partitioned" in {u["scheme"] for u in s["layers"]}
    np.testing.assert_allclose(s["array"], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("model", ["sage", "rgcn"])
def test_hidden_layers_in_f16_and_bf16_as_the_homogeneous_runs(runs, model, tmp_path, cli):
    """``--hidden-dtype`` on a typed run (f32 unless given): the layer files are
    ``layerK.TYPE.DTYPE`` in 2 bytes a value, the plan weighs them so (a layer's input, the
    files' pages), and the logits and test predictions are the f32 run's within the tolerance of
    the homogeneous test (``test_infer.py``)."""
    from ringgnn.inference.hetero import HeteroLayerwise, load_hetero_dense

    run = str(runs["generated", model])
    ds, net, _ = load_hetero_dense(run)
    f32 = infer_hetero(run, output="logits")
    assert f32["plan"]["hidden_dtype"] == "f32"
    test = ds.node_type("paper").split("test")
    for dt in ("f16", "bf16"):
        out = tmp_path / dt
        out.mkdir()
        s = infer_hetero(run, output="logits", hidden_dtype=dt, out=str(out / "l.npy"), keep=True)
        assert s["plan"]["hidden_dtype"] == dt
        got = np.load(out / "l.npy")
        np.testing.assert_allclose(got, f32["array"], rtol=2e-2, atol=2e-2 * np.abs(f32["array"]).max(), err_msg=dt)
        # the test predictions are f32's wherever f32's top two logits are further apart than
        # the tolerance allows them to move (a model trained one epoch has near ties)
        top2 = np.sort(f32["array"][test], axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * 2e-2 * np.abs(f32["array"]).max()
        pred = infer_hetero(run, output="predictions", nodes="test", hidden_dtype=dt)["array"]
        assert clear.mean() > 0.5, dt
        np.testing.assert_array_equal(pred[clear], f32["array"][test][clear].argmax(1), err_msg=dt)
        np.testing.assert_array_equal(pred, got[test].argmax(1), err_msg=dt)
        kept = sorted(p.name for p in out.iterdir() if p.name != "l.npy")
        assert kept == sorted(f"layer1.{t}.{dt}" for t in net.computed[1])
        li = HeteroLayerwise(ds, net, hidden_dtype=dt)
        for i, (k, d) in enumerate(li.units):
            if k == 2:  # layer 2 reads layer 1's files, as stored: the plan counts their pages
                srcs = [et[0] for et in net.convs[1].edge_types if et[2] == d]
                want = sum(os.path.getsize(out / f"layer1.{s}.{dt}") for s in srcs)
                assert li._scheme_bytes(i, False)["input_bytes"] == want
                for s in srcs:
                    per_page = 4096 // (2 * net.hidden)
                    assert os.path.getsize(out / f"layer1.{s}.{dt}") == -(-ds.num_nodes_dict[s] // per_page) * 4096
    r = cli("predict", run, "--hidden-dtype", "f16", "--keep-layers", "--out", tmp_path / "p.npy", "--quiet")
    assert r.code == 0, r.err
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), np.load(tmp_path / "f16" / "l.npy").argmax(1))
    assert (tmp_path / "layer1.paper.f16").exists()
