"""`ringgnn train DS --target TYPE` on heterogeneous datasets: typed models learn what a model
that ignores types cannot, runs resume, bad options are refused, and a GraphBolt dataset written
here converts and trains from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ringgnn
from ringgnn.data.generate import generate_hetero
from ringgnn.training.loop import train

QUIET = dict(quiet=True, log=lambda s: None)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("planted") / "mag"
    generate_hetero(out, papers=3000, authors=2000, institutions=50, seed=0)
    return out


def _homogeneous_copy(ds, out):
    """The same graph with its types erased: one id space (types one after another), every
    relation's edges in one edge list, zero features for the featureless types."""
    n, offset, at = ds.num_nodes_dict, {}, 0
    for t in ds.node_types:
        offset[t], at = at, at + n[t]
    src, dst = [], []
    for r in ds.relations:
        s, _, d = r.split(":")
        rel = ds.relation(r)
        ptr = rel.indptr()
        ids = np.concatenate([rel.neighbors(v) for v in range(rel.num_nodes)] + [np.zeros(0, np.int64)])
        src.append(ids + offset[s])
        dst.append(np.repeat(np.arange(rel.num_nodes), np.diff(ptr)) + offset[d])
    d = out.parent
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "edges.npy", np.stack([np.concatenate(src), np.concatenate(dst)]))
    paper = ds.node_type("paper")
    x = np.zeros((at, ds.feature_dims()["paper"]), np.float32)
    lo = offset["paper"]
    x[lo:lo + n["paper"]] = ringgnn._core.FeatureReader(ds.path, part="node/paper").gather(np.arange(n["paper"]))
    np.save(d / "x.npy", x)
    y = -np.ones(at, np.int64)
    y[lo:lo + n["paper"]] = paper.labels
    np.save(d / "y.npy", y)
    split = {}
    for s in ("train", "val", "test"):
        np.save(d / f"{s}.npy", paper.split(s) + lo)
        split[s] = str(d / f"{s}.npy")
    ringgnn.convert(d / "edges.npy", out, features=d / "x.npy", labels=d / "y.npy", split=split, num_nodes=at)
    return out


def test_typed_models_beat_a_model_that_ignores_types(planted, tmp_path):
    ds = ringgnn.Dataset.open(planted)
    typed = {}
    for model in ("sage", "rgcn"):
        m = train(ds, target="paper", model=model, fanouts=[10, 5], epochs=3, batch_size=256, lr=0.01,
                         out=str(tmp_path / model), **QUIET)
        typed[model] = m["test_acc"]
        assert m["best_epoch"] is not None and 0 <= m["best_epoch"] < 3
        assert json.loads((tmp_path / model / "metrics.json").read_text())["test_acc"] == m["test_acc"]
    homo = _homogeneous_copy(ds, tmp_path / "homo" / "ds")
    m = ringgnn.training.loop.train(homo, model="sage", fanouts=[10, 5], epochs=3, batch_size=256, lr=0.01,
                            out=str(tmp_path / "homo-run"), eval_mode="sampled", **QUIET)
    untyped = m["test_acc"]
    # Chance is 1/8; the features alone give about 0.38 (the generator's calibration).
    assert typed["sage"] > 0.7 and typed["rgcn"] > 0.7, typed
    assert min(typed.values()) > untyped + 0.1, (typed, untyped)


def test_resume_continues_and_refuses_other_options(planted, tmp_path):
    run = str(tmp_path / "run")
    a = train(planted, target="paper", fanouts=[5], layers=1, epochs=1, out=run, **QUIET)
    b = train(planted, target="paper", fanouts=[5], layers=1, epochs=2, out=run, resume=True, **QUIET)
    assert [e["epoch"] for e in b["epochs"]] == [0, 1]
    assert b["epochs"][0] == a["epochs"][0]
    with pytest.raises(ringgnn.InputError, match="--resume.*hidden"):
        train(planted, target="paper", fanouts=[5], layers=1, epochs=3, hidden=32, out=run, resume=True,
                     **QUIET)
    with pytest.raises(ringgnn.InputError, match="already holds a run"):
        train(planted, target="paper", fanouts=[5], layers=1, epochs=1, out=run, **QUIET)


@pytest.mark.parametrize("kwargs, message", [
    (dict(target=None), "give --target TYPE.*types with labels: paper"),
    (dict(target="venue"), "no node type 'venue'"),
    (dict(target="author"), "node type 'author' has no labels"),
    (dict(target="paper", model="gat"), "--model 'gat' is unknown; use one of sage, rgcn"),
    (dict(target="paper", fanouts=[5, 5], layers=1), "2 hops but --layers is 1"),
    (dict(target="paper", fanouts={"paper:cites:paper": [5]}, layers=1), "no entry for relation"),
])
def test_bad_options(planted, tmp_path, kwargs, message):
    kwargs = {"fanouts": [5], "layers": 1, **kwargs}
    with pytest.raises(ringgnn.InputError, match=message):
        train(planted, out=str(tmp_path / "r"), epochs=1, **kwargs, **QUIET)
    assert not (tmp_path / "r").exists()


def _cli(*args, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ringgnn.__file__))  # the ringgnn this test imported
    return subprocess.run([sys.executable, "-m", "ringgnn", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def test_graphbolt_dataset_converts_and_trains_from_the_command_line(planted, tmp_path):
    """A GraphBolt OnDiskDataset written here (csv edges, numpy features, a node-classification
    task), converted with `ringgnn convert metadata.yaml` and trained with `ringgnn train --target`."""
    ds = ringgnn.Dataset.open(planted)
    gb = tmp_path / "gb"
    gb.mkdir()
    edges = []
    for r in ("author:writes:paper", "paper:cites:paper", "author:affiliated_with:institution"):
        rel = ds.relation(r)
        with open(gb / f"{r.replace(':', '-')}.csv", "w") as f:
            for v in range(rel.num_nodes):
                f.writelines(f"{u},{v}\n" for u in rel.neighbors(v))
        edges.append(f"    - type: {r}\n      format: csv\n      path: {r.replace(':', '-')}.csv\n")
    paper = ds.node_type("paper")
    x = ringgnn._core.FeatureReader(ds.path, part="node/paper").gather(np.arange(paper.num_nodes))
    np.save(gb / "paper-feat.npy", x)
    sets = ""
    for s, key in (("train", "train_set"), ("val", "validation_set"), ("test", "test_set")):
        ids = paper.split(s)
        np.save(gb / f"{s}-seeds.npy", ids)
        np.save(gb / f"{s}-labels.npy", paper.labels[ids])
        sets += (f"    {key}:\n      - type: paper\n        data:\n"
                 f"          - name: seeds\n            format: numpy\n            path: {s}-seeds.npy\n"
                 f"          - name: labels\n            format: numpy\n            path: {s}-labels.npy\n")
    nodes = "".join(f"    - type: {t}\n      num: {n}\n" for t, n in ds.num_nodes_dict.items())
    (gb / "metadata.yaml").write_text(
        "dataset_name: planted\ngraph:\n  nodes:\n" + nodes + "  edges:\n" + "".join(edges)
        + "feature_data:\n  - domain: node\n    type: paper\n    name: feat\n    format: numpy\n"
        "    in_memory: false\n    path: paper-feat.npy\n"
        "tasks:\n  - name: node_classification\n    num_classes: 8\n" + sets)
    r = _cli("convert", str(gb / "metadata.yaml"), str(tmp_path / "ds"), "--add-reverse", "-q")
    assert r.returncode == 0, r.stderr
    conv = ringgnn.Dataset.open(tmp_path / "ds")
    assert conv.relations == ds.relations
    assert conv.num_edges_dict == ds.num_edges_dict
    fanouts = json.dumps({rel: [5, 5] for rel in conv.relations})
    r = _cli("train", str(tmp_path / "ds"), "--target", "paper", "--model", "rgcn", "--fanouts", fanouts,
             "--epochs", "2", "--lr", "0.01", "--cache", "256K", "--out", str(tmp_path / "run"), "-q")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["heterogeneous"] and m["target"] == "paper" and m["best_val_acc"] > 0.5
    assert m["args"]["cache"] == 256 << 10
    # Staging options reach the typed loader: a run with them trains, and leaves no staging file.
    (tmp_path / "scratch").mkdir()
    r = _cli("train", str(tmp_path / "ds"), "--target", "paper", "--fanouts", fanouts, "--epochs", "1", "--backend",
             "pread", "--hyperbatch", "2", "--staging-dir", str(tmp_path / "scratch"), "--staging-cap", "64M",
             "--out", str(tmp_path / "r1"), "-q")
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "scratch").iterdir()) == []
    r = _cli("train", str(tmp_path / "ds"), "--target", "paper", "--cache-policy", "degree", "--out",
             str(tmp_path / "r2"))
    assert r.returncode != 0 and "--cache-policy: not available for heterogeneous datasets" in r.stderr
    r = _cli("train", str(tmp_path / "ds"), "--out", str(tmp_path / "r3"))
    assert r.returncode != 0 and "--target TYPE" in r.stderr


def test_two_ranks_under_torchrun_share_the_epoch(planted, tmp_path):
    """`torchrun --nproc-per-node 2 -m ringgnn train DS --target paper`: each rank its share of
    the batches (DDP), the accuracy counted over every seed, rank 0's run directory."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ringgnn.__file__))  # the ringgnn this test imported
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "-m", "ringgnn", "train", str(planted), "--target", "paper", "--fanouts", "5,5", "--epochs",
                        "2", "--batch-size", "256", "--lr", "0.01", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["args"]["world_size"] == 2 and m["world_size"] == 2 and len(m["epochs"]) == 2
    assert m["test_acc"] > 0.6 and m["layerwise"]["test_acc"] > 0.6
    # 1800 training papers in batches of 256: 8 batches, 4 per rank.
    assert "batch 256, 4 batches per epoch per rank, 2 ranks (batch 256 per rank)" in r.stdout


def test_a_target_without_a_test_split_trains_and_evaluates_exactly(tmp_path):
    d = tmp_path
    np.save(d / "x.npy", np.random.default_rng(0).standard_normal((6, 3), dtype=np.float32))
    np.save(d / "y.npy", np.array([0, 1, 0, 1, 0, 1]))
    (d / "w.csv").write_text("0,0\n1,1\n0,2\n1,3\n0,4\n1,5\n")
    split = {"train": str(d / "tr.npy"), "val": str(d / "va.npy")}
    np.save(d / "tr.npy", np.arange(4))
    np.save(d / "va.npy", np.array([4, 5]))
    ringgnn.build_hetero(d / "ds", [ringgnn.NodeType("paper", 6, features=d / "x.npy", labels=d / "y.npy",
                                                     split=split), ringgnn.NodeType("author", 2)],
                         [ringgnn.Relation("author:writes:paper", d / "w.csv")], add_reverse=True)
    lines = []
    m = train(d / "ds", target="paper", fanouts=[-1], layers=1, epochs=1, out=str(d / "run"), quiet=True,
                     log=lines.append)
    assert "test_acc" not in m["epochs"][0] and m["test_acc"] is None
    assert m["layerwise"]["val_acc"] is not None and m["layerwise"]["test_acc"] is None
    assert any("layer-wise (exact) evaluation of epoch 0: val acc " in ln for ln in lines)


def test_layerwise_after_every_epoch_is_the_exact_inference_of_that_epoch(tmp_path):
    """The one loop gives heterogeneous runs what homogeneous ones have: --eval layerwise (the
    live model's exact accuracy, what infer_hetero computes from the epoch's checkpoint),
    --prefetch, curves and TensorBoard, and the same words in the log."""
    from ringgnn.inference.hetero import infer_hetero

    d = tmp_path
    rng = np.random.default_rng(1)
    np.save(d / "x.npy", rng.standard_normal((8, 3), dtype=np.float32))
    np.save(d / "y.npy", np.array([0, 1, 0, 1, 0, 1, 1, 0]))
    (d / "w.csv").write_text("0,0\n1,1\n0,2\n1,3\n0,4\n1,5\n2,6\n2,7\n0,7\n")
    split = {s: str(d / f"{s}.npy") for s in ("train", "val", "test")}
    np.save(d / "train.npy", np.arange(4))
    np.save(d / "val.npy", np.array([4, 5, 6]))
    np.save(d / "test.npy", np.array([7]))
    ringgnn.build_hetero(d / "ds", [ringgnn.NodeType("paper", 8, features=d / "x.npy", labels=d / "y.npy",
                                                     split=split), ringgnn.NodeType("author", 3)],
                         [ringgnn.Relation("author:writes:paper", d / "w.csv")], add_reverse=True)
    lines = []
    m = train(d / "ds", target="paper", fanouts=[-1, -1], epochs=2, lr=0.05, eval_mode="layerwise", prefetch=1,
              tensorboard=True, out=str(d / "run"), quiet=True, log=lines.append)
    best = m["epochs"][m["best_epoch"]]
    r = infer_hetero(str(d / "run"), output="predictions")
    assert best["val_acc"] == r["val_acc"] and best["test_acc"] == r["test_acc"]
    assert m["layerwise"] is None and m["heterogeneous"] and m["target"] == "paper"
    assert {"best_val_acc", "test_acc", "best_epoch", "loader", "memory_plan"} <= set(m)
    assert (d / "run" / "curves.png").exists() and os.listdir(d / "run" / "tensorboard")
    assert lines[0].startswith("training sage on ") and "batch 512, 1 batches per epoch, device cpu" in lines[0]
    assert any(ln.startswith("epoch 1: loss ") and ", val acc " in ln for ln in lines)
    assert lines[-1].startswith(f"best val acc {m['best_val_acc']:.4f} at epoch {m['best_epoch']}, test acc ")
