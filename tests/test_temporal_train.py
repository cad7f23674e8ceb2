"""``ringgnn train`` at times (issue 36, tasks at a time): a dataset with times trains and evaluates
each seed at its time, on the typed engine (a homogeneous dataset as its one-type case);
``--ignore-time`` opts out. The planted graph shows the leak that sampling at times prevents."""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import _temporal

from ringgnn import InputError
from ringgnn.data import build
from ringgnn.data.generate import generate_hetero
from ringgnn.training.loop import train

pytest.importorskip("torch_geometric")

FAST = dict(fanouts=[10], layers=1, hidden=16, batch_size=100, epochs=4, lr=0.02, dropout=0.0, threads=1,
            quiet=True, log=lambda s: None)


def planted(d, n=1000, k=5):
    """:func:`_temporal.planted`'s graph (1,000 nodes, ``k`` = 5) as ``ds`` (edge and node times),
    ``edges_only`` (edge times) and ``plain`` (none)."""
    _temporal.planted(d, n, k)
    common = _temporal.planted_options(d)
    build.convert(d / "e.txt", d / "edges_only", edge_time=d / "et.npy", **common)
    build.convert(d / "e.txt", d / "plain", **common)
    return d


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return planted(tmp_path_factory.mktemp("planted"))


def test_sampling_at_times_hides_the_leak_that_ignore_time_shows(graph, tmp_path, caplog):
    lines = []
    m = train(graph / "ds", out=tmp_path / "at", **dict(FAST, log=lines.append))
    assert m["temporal"] is True and "heterogeneous" not in m
    assert m["layerwise"] is None  # no exact (leaky) score
    assert any(s.startswith("temporal: each seed is sampled at its time") for s in lines)
    assert any("evaluation: sampled at the val/test seeds' times" in s for s in lines)
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        leak = train(graph / "ds", out=tmp_path / "leak", ignore_time=True, eval_mode="sampled", **FAST)
    assert "--ignore-time" in caplog.text and "leak" in caplog.text
    assert leak["temporal"] is False
    at, leaky = m["best_val_acc"], leak["best_val_acc"]
    # At times only random past edges exist: chance (two classes, 200 val nodes); the future's
    # edges give the label away.
    assert at < 0.65 and leaky > 0.9, (at, leaky)
    with open(tmp_path / "at" / "metrics.json") as f:
        assert json.load(f)["temporal"] is True


def test_ignore_time_runs_as_without_times(graph, tmp_path):
    m = train(graph / "ds", out=tmp_path / "r", ignore_time=True, **dict(FAST, epochs=1))
    plain = train(graph / "plain", out=tmp_path / "p", **dict(FAST, epochs=1))
    assert m["temporal"] is False and plain["temporal"] is False
    assert m["layerwise"] is not None  # the exact evaluation of a run without times
    assert m.keys() == plain.keys() and m["args"] == plain["args"]


def test_seed_time_file_and_its_errors(graph, tmp_path):
    n = 1000
    np.save(tmp_path / "ok.npy", np.full(n, 2000, dtype=np.int64))
    # At time 2000 every edge is in the past: the leak is back, as the seed times say.
    m = train(graph / "edges_only", out=tmp_path / "r", seed_time=tmp_path / "ok.npy", **FAST)
    assert m["temporal"] is True and m["best_val_acc"] > 0.9
    for name, a, words in (("short.npy", np.zeros(n - 1, np.int64), "999 times but node type 'node' has 1,000"),
                           ("float.npy", np.zeros(n, np.float64), "integer times"),
                           ("flat.npy", np.zeros((n, 1), np.int64), "1-D array")):
        np.save(tmp_path / name, a)
        with pytest.raises(InputError, match=f"--seed-time {tmp_path / name}: .*{words}"):
            train(graph / "ds", out=tmp_path / "bad", seed_time=tmp_path / name, **FAST)
    (tmp_path / "junk.npy").write_text("not an array")
    with pytest.raises(InputError, match="--seed-time .*junk.npy: not a readable .npy"):
        train(graph / "ds", out=tmp_path / "bad", seed_time=tmp_path / "junk.npy", **FAST)
    np.save(tmp_path / "obj.npy", np.zeros(n, dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"--seed-time .*obj.npy: not a readable .npy array \(Object arrays cannot"):
        train(graph / "ds", out=tmp_path / "bad", seed_time=tmp_path / "obj.npy", **FAST)
    with open(tmp_path / "z.npy", "wb") as f:  # an .npz archive under a .npy name
        np.savez(f, t=np.zeros(n, np.int64))
    with pytest.raises(InputError, match="--seed-time .*z.npy: an .npz archive of arrays, not a .npy array; save"):
        train(graph / "ds", out=tmp_path / "bad", seed_time=tmp_path / "z.npy", **FAST)
    with pytest.raises(InputError, match="--seed-time .*no edge or node times"):
        train(graph / "plain", out=tmp_path / "bad", seed_time=tmp_path / "ok.npy", **FAST)
    with pytest.raises(InputError, match="--seed-time .* and --ignore-time .*give one of them"):
        train(graph / "ds", out=tmp_path / "bad", seed_time=tmp_path / "ok.npy", ignore_time=True, **FAST)
    assert not os.path.exists(tmp_path / "bad")


def test_refused_at_times(graph, tmp_path):
    out = tmp_path / "bad"
    with pytest.raises(InputError, match="edge times but node type 'node' has no node times.*--seed-time FILE.npy.*"
                                         "--ignore-time"):
        train(graph / "edges_only", out=out, **FAST)
    with pytest.raises(InputError, match="--eval layerwise: .*cannot honour each seed's time"):
        train(graph / "ds", out=out, eval_mode="layerwise", **FAST)
    with pytest.raises(InputError, match="--model gat: a run at times trains on the typed engine.*--ignore-time"):
        train(graph / "ds", out=out, model="gat", **FAST)
    with pytest.raises(InputError, match="--cache-policy: not available for runs at times"):
        train(graph / "ds", out=out, cache_policy="degree", **FAST)
    with pytest.raises(InputError, match="no train/val/test edge split, which --task link trains and scores on"):
        train(graph / "ds", out=out, task="link", **FAST)
    assert not os.path.exists(out)


def test_resume_keeps_time(graph, tmp_path):
    out = tmp_path / "r"
    train(graph / "ds", out=out, **dict(FAST, epochs=1))
    with pytest.raises(InputError, match="was trained at times; resume it without --ignore-time"):
        train(graph / "ds", out=out, resume=True, ignore_time=True, **dict(FAST, epochs=2))
    m = train(graph / "ds", out=out, resume=True, **dict(FAST, epochs=2))
    assert [e["epoch"] for e in m["epochs"]] == [0, 1] and m["temporal"] is True


def test_cli_at_times(graph, tmp_path):
    np.save(tmp_path / "t.npy", np.full(1000, 500, dtype=np.int64))
    base = [sys.executable, "-m", "ringgnn", "train", "--fanouts", "5", "--layers", "1", "--hidden", "8",
            "--epochs", "1", "--threads", "1", "--json"]
    r = subprocess.run(base + [str(graph / "edges_only"), "--out", str(tmp_path / "r"), "--seed-time",
                               str(tmp_path / "t.npy")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["temporal"] is True and m["layerwise"] is None
    r = subprocess.run(base + [str(graph / "ds"), "--out", str(tmp_path / "r2"), "--eval", "layerwise"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--eval layerwise: exact layer-wise evaluation" in r.stderr
    assert not os.path.exists(tmp_path / "r2")


def test_heterogeneous_without_times(tmp_path):
    generate_hetero(tmp_path / "mag", papers=300, authors=200, institutions=10, seed=0)
    m = train(tmp_path / "mag", target="paper", out=tmp_path / "r", **dict(FAST, fanouts=[5], epochs=1))
    assert m["temporal"] is False and m["heterogeneous"] is True and m["layerwise"] is not None
    np.save(tmp_path / "t.npy", np.zeros(300, np.int64))
    with pytest.raises(InputError, match="--seed-time .*no edge or node times"):
        train(tmp_path / "mag", target="paper", out=tmp_path / "bad", seed_time=tmp_path / "t.npy", **FAST)


def test_heterogeneous_at_times(graph, tmp_path):
    """The planted graph as a typed dataset (papers citing papers, and authors writing papers
    without times): the same leak, hidden at times and shown by --ignore-time."""
    d = graph
    src_dst = np.loadtxt(d / "e.txt", dtype=np.int64)
    np.save(tmp_path / "cites.npy", src_dst)
    np.save(tmp_path / "writes.npy", np.stack([np.arange(1000) % 50, np.arange(1000)], 1))
    build.build_hetero(tmp_path / "h", [
        build.NodeType("paper", 1000, features=d / "x.npy", labels=d / "y.npy", split="train=0.6,val=0.2,test=0.2",
                       node_time=d / "nt.npy"),
        build.NodeType("author", 50)],
        [build.Relation("paper:cites:paper", tmp_path / "cites.npy", edge_time=d / "et.npy"),
         build.Relation("author:writes:paper", tmp_path / "writes.npy")], seed=1)
    m = train(tmp_path / "h", target="paper", out=tmp_path / "at", **FAST)
    assert m["temporal"] is True and m["heterogeneous"] is True and m["layerwise"] is None
    leak = train(tmp_path / "h", target="paper", out=tmp_path / "leak", ignore_time=True, eval_mode="sampled", **FAST)
    assert leak["temporal"] is False
    # (the authors' learned embeddings, averaged in with the citations, dilute the leak a little)
    assert m["best_val_acc"] < 0.65 and leak["best_val_acc"] > 0.8, (m["best_val_acc"], leak["best_val_acc"])
