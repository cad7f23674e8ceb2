"""Layer-wise inference as of a time (issue 36): ``ringgnn.infer(..., at=T)``, ``infer_hetero(...,
at=T)`` and ``ringgnn predict``/``embed --at T`` give every node's output on the graph as of T.
The reference is the same model on a dataset built from those edges alone (at or before T, and,
where nodes have times, from sources not newer than T): the outputs must be the same, for the
homogeneous engine's models and the typed engine (a homogeneous dataset's run at times being its
one-type case), planned from the budget, with sizes given, and by source partitions."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringgnn
from ringgnn import InputError
from ringgnn.data import build
from ringgnn.inference.engine import SCHEME_ENV
from ringgnn.inference.hetero import infer_hetero
from ringgnn.inference.run import infer
from ringgnn.training.loop import train

pytest.importorskip("torch_geometric")

N = 400
FAST = dict(batch_size=128, epochs=1, layers=2, hidden=16, fanouts=[5, 5], quiet=True, log=lambda s: None)


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Path:
    """400 nodes in 3 classes, 3,000 random edges with times uniform in [0, 1000), a hub (node
    7, 300 in-edges), stored self loops and duplicate edges; node times uniform in [0, 1000).
    Built three ways: ``edges`` (edge times), ``nodes`` (edge and node times), ``plain`` (none)."""
    d = tmp_path_factory.mktemp("at")
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, N)
    src, dst = rng.integers(0, N, 3000), rng.integers(0, N, 3000)
    src = np.concatenate([src, rng.integers(0, N, 300), np.arange(0, N, 11), src[:100]])
    dst = np.concatenate([dst, np.full(300, 7), np.arange(0, N, 11), dst[:100]])
    et = rng.integers(0, 1000, len(src))
    x = rng.standard_normal((N, 6)).astype(np.float32)
    x[np.arange(N), y] += 1.0
    np.save(d / "edges.npy", np.stack([src, dst], 1))
    np.save(d / "et.npy", et)
    np.save(d / "nt.npy", rng.integers(0, 1000, N))
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    order = rng.permutation(N)
    for name, ids in (("train", order[:240]), ("val", order[240:320]), ("test", order[320:])):
        np.save(d / f"{name}.npy", ids)
    common = _common(d)
    build.convert(d / "edges.npy", d / "edges", edge_time=d / "et.npy", **common)
    build.convert(d / "edges.npy", d / "nodes", edge_time=d / "et.npy", node_time=d / "nt.npy", **common)
    build.convert(d / "edges.npy", d / "plain", **common)
    return d


def _common(d: Path) -> dict:
    return dict(features=d / "x.npy", labels=d / "y.npy", num_nodes=N,
                split={s: str(d / f"{s}.npy") for s in ("train", "val", "test")})


def past(d: Path, t: int, out: Path, node_times: bool = False) -> Path:
    """The dataset of the edges as of ``t`` alone: those at or before ``t`` (and, with
    ``node_times``, whose source is not newer than ``t``), with the same features, labels and
    splits (and node times)."""
    edges, et, nt = np.load(d / "edges.npy"), np.load(d / "et.npy"), np.load(d / "nt.npy")
    keep = et <= t
    if node_times:
        keep &= nt[edges[:, 0]] <= t
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "edges.npy", edges[keep])
    np.save(out / "et.npy", et[keep])
    build.convert(out / "edges.npy", out / "ds", edge_time=out / "et.npy",
                  node_time=d / "nt.npy" if node_times else None, **_common(d))
    return out / "ds"


@pytest.fixture(scope="module")
def runs(graph, tmp_path_factory):
    """The homogeneous engine's models (trained without times) and the typed engine's one-type
    case (a run at times)."""
    root = tmp_path_factory.mktemp("at-runs")
    out = {m: root / m for m in ("sage", "gcn", "gat")}
    for m, run in out.items():
        train(graph / "edges", model=m, out=str(run), ignore_time=True, eval_mode="sampled", **FAST)
    out["typed"] = root / "typed"
    train(graph / "nodes", out=str(out["typed"]), **FAST)
    return out


def _same(got: np.ndarray, want: np.ndarray, exact: bool) -> None:
    if exact:
        assert np.array_equal(got, want)
    else:  # blocks planned from what the process holds: the same sums, maybe in other pieces
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


SIZES = {"planned": {}, "given": dict(grid_nodes=50, block_edges=64)}


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_as_of_equals_the_dataset_of_the_past_edges(graph, runs, model, sizes, tmp_path):
    run = str(runs[model])
    now = infer(run, dataset=str(graph / "edges"), **SIZES[sizes])
    for t in (-1, 120, 500, 998):
        want = infer(run, dataset=past(graph, t, tmp_path / f"p{t}"), **SIZES[sizes])
        got = infer(run, dataset=str(graph / "edges"), at=t, **SIZES[sizes])
        _same(got, want, sizes == "given")
        assert not np.allclose(got, now)
    s = infer(run, dataset=str(graph / "edges"), at=500, out=str(tmp_path / "o.npy"))
    et = np.load(graph / "et.npy")
    kept = int((et <= 500).sum())
    assert s["at"] == 500 and s["as_of"]["edges"] == kept and s["as_of"]["edges_total"] == len(et)
    assert s["as_of"]["newer_nodes"] == 0 and s["as_of"]["bytes_written"] == 4 * kept
    # the graph as of 500 was written beside the output (or the checkpoint) and removed
    assert sorted(os.listdir(tmp_path)) == sorted([f"p{t}" for t in (-1, 120, 500, 998)] + ["o.npy"])
    assert not [f for f in os.listdir(runs[model]) if "ringgnn-tmp" in f]


def test_node_times_drop_newer_sources_and_newer_nodes_get_outputs(graph, runs, tmp_path):
    run = str(runs["sage"])
    nt = np.load(graph / "nt.npy")
    for t in (300, 700):
        want = infer(run, dataset=past(graph, t, tmp_path / f"p{t}", node_times=True), output="embeddings")
        s = infer(run, dataset=str(graph / "nodes"), at=t, output="embeddings", out=str(tmp_path / "e.npy"))
        np.testing.assert_allclose(np.load(tmp_path / "e.npy"), want, rtol=1e-5, atol=1e-6)
        assert s["as_of"]["newer_nodes"] == int((nt > t).sum()) > 0


def test_after_every_time_is_every_edge_and_writes_nothing(graph, runs, tmp_path):
    run = str(runs["gcn"])
    s = infer(run, dataset=str(graph / "edges"), at=1000, out=str(tmp_path / "a.npy"))
    assert s["as_of"]["bytes_written"] == 0 and s["as_of"]["edges"] == s["as_of"]["edges_total"]
    now = infer(run, dataset=str(graph / "edges"), out=str(tmp_path / "b.npy"))
    assert now["at"] is None and "as_of" not in now
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    assert "at" not in infer(run, dataset=str(graph / "plain"), out=str(tmp_path / "c.npy"))


@settings(max_examples=12, deadline=None)
@given(t=st.integers(-5, 1005), node_times=st.booleans())
def test_any_time_equals_the_past_dataset(graph, runs, t, node_times):
    sizes = dict(grid_nodes=37, block_edges=29)
    with tempfile.TemporaryDirectory() as d:
        ref = past(graph, t, Path(d), node_times)
        want = infer(str(runs["sage"]), dataset=ref, output="embeddings", **sizes)
        got = infer(str(runs["sage"]), dataset=str(graph / ("nodes" if node_times else "edges")), at=t,
                    output="embeddings", **sizes)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_the_cut_in_chunks_is_the_cut_in_one(graph, runs, chunk, monkeypatch):
    """Lists (the hub's among them) and node times read across chunk boundaries."""
    sizes = dict(grid_nodes=37, block_edges=29, output="embeddings", dataset=str(graph / "nodes"), at=450)
    want = infer(str(runs["gcn"]), **sizes)
    monkeypatch.setattr("ringgnn.inference.graph.AS_OF_EDGES", chunk)
    assert np.array_equal(infer(str(runs["gcn"]), **sizes), want)


def test_source_partitions_under_a_budget_the_grid_would_sweep_too_often(graph, runs, tmp_path, monkeypatch):
    """With the held memory pinned, a budget under the grid's least runs each layer by source
    partitions, as of a time as on the dataset of the past edges."""
    from ringgnn.inference.run import LayerwiseInference
    from ringgnn.models.checkpoints import load_checkpoint

    monkeypatch.setattr("ringgnn._options.held_memory", lambda: 300 << 20)
    run = str(runs["gcn"])
    ref = past(graph, 600, tmp_path / "p")
    ds = ringgnn.Dataset.open(ref)
    probe = LayerwiseInference(ds, load_checkpoint(run, ds), memory=1 << 30).memplan
    grid_least, part_least = probe.least_budget(range(2), grid_only=True), probe.least_budget(range(2))
    assert part_least < grid_least
    mid = (part_least + grid_least) // 2
    s = infer(run, dataset=str(graph / "edges"), at=600, memory=mid, hidden_dtype="f32", out=str(tmp_path / "a.npy"))
    assert "partitioned" in [lay["scheme"] for lay in s["layers"]]
    want = infer(run, dataset=ref, memory=mid, hidden_dtype="f32")
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scheme", ["grid", "partitioned"])
def test_a_run_at_times_is_the_typed_engines_one_type_case(graph, runs, scheme, tmp_path, monkeypatch):
    monkeypatch.setenv(SCHEME_ENV, scheme)
    run = str(runs["typed"])
    for t in (250, 800):
        want = infer_hetero(run, past(graph, t, tmp_path / f"p{t}", node_times=True), output="logits")
        s = infer_hetero(run, str(graph / "nodes"), at=t, output="logits")
        _same(s["array"], want["array"], False)
        assert s["at"] == t and s["as_of"]["edges"] == ringgnn.Dataset.open(tmp_path / f"p{t}" / "ds").num_edges
        assert {lay["scheme"] for lay in s["layers"]} == {scheme}
    assert infer_hetero(run, output="logits")["at"] is None


def test_the_one_type_case_under_its_least_budget_runs_by_partitions(graph, runs, tmp_path, monkeypatch):
    """With the held memory pinned, the least budget of the typed engine as of a time is that of
    the dataset of the past edges (the view is what the plan cuts), and it runs by partitions."""
    from ringgnn.inference.hetero import HeteroLayerwise, load_hetero_dense
    from ringgnn import _options

    monkeypatch.setattr(_options, "held_memory", lambda: 100 << 20)
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    run = str(runs["typed"])
    ref = past(graph, 650, tmp_path / "p", node_times=True)
    ds, net, _ = load_hetero_dense(run, ref)
    plan = HeteroLayerwise(ds, net, memory=1).memplan
    units = list(range(len(plan.costs)))
    least = plan.least_budget(units)
    assert least < plan.least_budget(units, grid_only=True)
    at = HeteroLayerwise(ringgnn.Dataset.open(graph / "nodes"), net, memory=1, at=650, work_dir=str(tmp_path))
    assert at.memplan.least_budget(units) == least
    at.close()
    s = infer_hetero(run, str(graph / "nodes"), at=650, memory=least)
    assert "partitioned" in {u["scheme"] for u in s["layers"]}
    _same(s["array"], infer_hetero(run, ref, memory=least)["array"], False)
    with pytest.raises(InputError, match=f"give at least --memory {least:,}"):
        infer_hetero(run, str(graph / "nodes"), at=650, memory=least - 1)


def test_a_typed_dataset_as_of_a_time(graph, tmp_path):
    """Papers with node times cite papers at times; authors (no times) write papers (no edge
    times): as of T, citations after T and from papers newer than T are left out, and every
    authorship stays."""
    d = tmp_path
    edges, et, nt = np.load(graph / "edges.npy"), np.load(graph / "et.npy"), np.load(graph / "nt.npy")
    writes = np.stack([np.arange(N) % 30, np.arange(N)], 1)
    np.save(d / "writes.npy", writes)

    def typed(out, cites, times):
        np.save(out.parent / f"{out.name}.c.npy", cites)
        np.save(out.parent / f"{out.name}.t.npy", times)
        build.build_hetero(out, [
            build.NodeType("paper", N, features=graph / "x.npy", labels=graph / "y.npy", node_time=graph / "nt.npy",
                           split={s: str(graph / f"{s}.npy") for s in ("train", "val", "test")}),
            build.NodeType("author", 30)],
            [build.Relation("paper:cites:paper", out.parent / f"{out.name}.c.npy",
                            edge_time=out.parent / f"{out.name}.t.npy"),
             build.Relation("author:writes:paper", d / "writes.npy")], seed=1)
        return out

    full = typed(d / "full", edges, et)
    train(full, target="paper", out=str(d / "run"), **dict(FAST, model="rgcn"))
    for t in (400, 900):
        keep = (et <= t) & (nt[edges[:, 0]] <= t)
        ref = typed(d / f"p{t}", edges[keep], et[keep])
        for scheme in ("grid", "partitioned"):
            os.environ[SCHEME_ENV] = scheme
            try:
                want = infer_hetero(str(d / "run"), ref, output="embeddings", layer=1)
                got = infer_hetero(str(d / "run"), full, output="embeddings", layer=1, at=t)
                _same(got["array"], want["array"], False)
                want = infer_hetero(str(d / "run"), ref)
                got = infer_hetero(str(d / "run"), full, at=t)
                _same(got["array"], want["array"], False)
            finally:
                del os.environ[SCHEME_ENV]
        assert got["as_of"]["edges"] == int(keep.sum()) + N  # every authorship


def test_bad_times_are_refused_and_leave_nothing(graph, runs, tmp_path):
    run = str(runs["sage"])
    for at, words in (("abc", "--at 'abc' is not an integer"), (1.5, "--at must be an integer, not 1.5"),
                      (True, "--at must be an integer, not True"), (1 << 63, "64-bit signed")):
        with pytest.raises(InputError, match=words):
            infer(run, dataset=str(graph / "edges"), at=at, out=str(tmp_path / "o.npy"))
    with pytest.raises(InputError, match="--at 5: .*plain has no edge or node times.*--edge-time.*or leave --at out"):
        infer(run, dataset=str(graph / "plain"), at=5, out=str(tmp_path / "o.npy"))
    with pytest.raises(InputError, match="--at 5: .*plain has no edge or node times"):
        infer_hetero(str(runs["typed"]), str(graph / "plain"), at=5, out=str(tmp_path / "o.npy"))
    assert os.listdir(tmp_path) == []


def test_the_commands(graph, runs, tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "ringgnn", *map(str, args), "--quiet"], capture_output=True,
                              text=True)

    run = runs["sage"]
    r = cli("predict", run, "--dataset", graph / "nodes", "--at", 400, "--out", tmp_path / "p.npy")
    assert r.returncode == 0, r.stderr
    newer = int((np.load(graph / "nt.npy") > 400).sum())
    assert "as of time 400: " in r.stdout and f"{newer:,} nodes newer than 400" in r.stdout
    want = infer(str(run), dataset=str(graph / "nodes"), at=400, output="predictions")
    assert np.array_equal(np.load(tmp_path / "p.npy"), want)
    r = cli("embed", runs["typed"], "--at", 400, "--out", tmp_path / "e.npy")
    assert r.returncode == 0 and "as of time 400" in r.stdout, r.stderr
    r = cli("predict", run, "--out", tmp_path / "now.npy")
    assert r.returncode == 0 and "every edge, whatever its time (the graph as it is now)" in r.stdout, r.stderr
    r = cli("predict", run, "--dataset", graph / "plain", "--out", tmp_path / "plain.npy")
    assert r.returncode == 0 and "every edge" not in r.stdout and "as of" not in r.stdout, r.stderr
    for bad in ("abc", "1.5"):
        r = cli("predict", run, "--at", bad, "--out", tmp_path / "bad.npy")
        assert r.returncode == 2 and f"argument --at: the time '{bad}' is not an integer" in r.stderr
    r = cli("predict", run, "--dataset", graph / "plain", "--at", 3, "--out", tmp_path / "bad.npy")
    assert r.returncode != 0 and "has no edge or node times" in r.stderr
    np.save(tmp_path / "pairs.npy", np.array([[0, 1]]))
    r = cli("predict", run, "--edges", tmp_path / "pairs.npy", "--at", 3, "--out", tmp_path / "bad.npy")
    assert r.returncode != 0 and "--edges: " in r.stderr and "is a node-classification run" in r.stderr
    assert not (tmp_path / "bad.npy").exists()
    assert sorted(os.listdir(tmp_path)) == ["e.npy", "now.npy", "p.npy", "pairs.npy", "plain.npy"]
