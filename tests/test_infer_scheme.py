"""The choice between the grid and source partitions (``infer_plan.choose_scheme``) and the
partitioned scheme itself (``python/ringgnn/inference/partition.py``, its per-edge work in the Rust
core): exact against the grid and a full-batch PyG forward (GraphSAGE's mean and max, GCN, GAT)
on a graph with hubs, self loops and duplicates, with many partitions, windows and merge blocks;
its temporaries removed; a budget under which the grid would sweep too often runs by partitions;
the torch aggregation refused; a failed write names the temporary."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import ringgnn
from ringgnn._core import InputError
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.inference.plan import MAX_PARTS, PART_EDGE, PART_NODE, bucket_edge_bytes, choose_scheme, reached
from ringgnn.inference.run import infer
from ringgnn.training.loop import train

from test_infer import FAST, full_batch, hubby, with_max_aggregation  # noqa: F401  (the fixture is used by name)


def _random_indptr(n: int, degree: int) -> np.ndarray:
    return np.arange(0, n * degree + 1, degree, dtype=np.int64)


# (name, nodes, in-degree, grid sweeps, row bytes, expected scheme)
CASES = [
    # Dense random graphs (the SBMs): every partition reaches nearly every destination, so the
    # spilled partials (~ edges x a row) dwarf a few more sweeps of the input.
    ("sbm-like, 8 sweeps", 100_000, 20, 8, 512, "grid"),
    ("sbm-like, 2 sweeps", 100_000, 20, 2, 512, "grid"),
    # One in-edge a node: partials are one row per edge, the input read once instead of 8 times.
    ("degree 1, 8 sweeps", 100_000, 1, 8, 512, "partitioned"),
    ("degree 2, 8 sweeps", 100_000, 2, 8, 512, "partitioned"),
    # Few edges per node but few blocks: the grid's 2 sweeps are cheaper than spilling partials.
    ("degree 2, 2 sweeps", 100_000, 2, 2, 512, "grid"),
    ("degree 1, 1 sweep", 100_000, 1, 1, 512, "grid"),
]


@pytest.mark.parametrize("name, n, degree, sweeps, row, want", CASES, ids=[c[0] for c in CASES])
def test_the_scheme_that_moves_fewer_bytes_is_chosen(name, n, degree, sweeps, row, want):
    indptr = _random_indptr(n, degree)
    share = 32 << 20
    c = choose_scheme(indptr, sweeps=sweeps, share=share, input_bytes=n * row, acc_bytes=row, id_bytes=8, splits=True)
    assert c.scheme == want
    assert c.grid_bytes == sweeps * n * row + n * degree * 8
    assert (c.partitioned_bytes < c.grid_bytes) == (want == "partitioned")
    window = share // (row + PART_NODE + PART_EDGE)
    assert c.window_edges == window and c.parts == -(-n * degree // window)
    assert c.scheme in c.text() and ("partitioned would move" in c.text()) == (want == "grid")


def test_the_partitioned_cost_worked_by_hand():
    # 4 destinations of in-degree 1, 2 partitions (forced): each partition is expected to reach
    # 4 * (1 - (1 - 1/2)) = 2 destinations, 4 partials in all, each written and read (an id and
    # a 16-byte row); the input once, the neighbor file once, 4 edges bucketed (two 4-byte ids
    # written and read: 16 bytes each).
    indptr = _random_indptr(4, 1)
    c = choose_scheme(indptr, sweeps=3, share=1 << 20, input_bytes=4096, acc_bytes=16, id_bytes=4, splits=True,
                      parts=2)
    assert bucket_edge_bytes(4) == 16
    assert c.partitioned_bytes == 4096 + 4 * (4 + 16) + 2 * 4 * (16 + 8)
    # GAT's destination logits (a pass over the input and a file of them) count as extra bytes.
    extra = choose_scheme(indptr, sweeps=3, share=1 << 20, input_bytes=4096, acc_bytes=16, id_bytes=4,
                          splits=True, parts=2, extra_bytes=4096 + 32)
    assert extra.partitioned_bytes == c.partitioned_bytes + 4096 + 32
    assert c.grid_bytes == 3 * 4096 + 4 * 4
    assert c.scheme == "partitioned"
    assert reached(np.bincount([0, 0, 3]), 0.5) == pytest.approx(1 - 0.5 ** 3)


def test_the_torch_aggregation_and_impossible_cases_stay_on_the_grid():
    indptr = _random_indptr(100_000, 1)
    kw = dict(sweeps=8, share=8 << 20, input_bytes=100_000 * 512, acc_bytes=512, id_bytes=8)
    torch_sums = choose_scheme(indptr, splits=False, **kw)
    assert torch_sums.scheme == "grid" and torch_sums.partitioned_bytes is None
    assert "only the Rust folds" in torch_sums.text()
    with pytest.raises(InputError, match="only the Rust folds"):
        choose_scheme(indptr, splits=False, force="partitioned", **kw)
    empty = choose_scheme(np.zeros(5, dtype=np.int64), splits=True, **kw)
    assert empty.scheme == "grid" and empty.why == "no edges"
    tiny = choose_scheme(indptr, splits=True, **dict(kw, share=1000))
    assert tiny.scheme == "grid" and f"more than {MAX_PARTS}" in tiny.why
    assert choose_scheme(indptr, splits=True, force="grid", **kw).scheme == "grid"


@pytest.fixture(scope="module")
def sum_runs(hubby, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("scheme-runs")
    return {m: root / m for m in ("sage", "gcn", "gat")
            if train(hubby, model=m, out=str(root / m), eval_mode="sampled", **FAST) is not None}


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("parts, grid_nodes, block_edges", [
    (1, None, None),  # one partition, sized from the budget
    (7, 100, 40),  # 7 partitions, windows of about 100 edges (hubs split between them), 14 merge blocks
    (40, 5, 7),  # many partitions, windows of 5 edges: most destinations split between windows
])
def test_partitioned_equals_the_grid_and_a_full_batch_forward(hubby, sum_runs, model, parts, grid_nodes,  # noqa: F811
                                                               block_edges, tmp_path):
    ds = ringgnn.Dataset.open(hubby)
    run = sum_runs[model]
    ref = full_batch(ds, load_checkpoint(str(run), ds).net)
    grid = infer(str(run), scheme="grid", hidden_dtype="f32")
    out = tmp_path / "logits.npy"
    summary = infer(str(run), scheme="partitioned", parts=parts, grid_nodes=grid_nodes, block_edges=block_edges,
                    out=str(out), hidden_dtype="f32")
    got = np.load(out)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, grid, rtol=1e-4, atol=1e-5)
    assert [lay["scheme"] for lay in summary["layers"]] == ["partitioned", "partitioned"]
    assert all(lay["temp_written"] > 0 and lay["temp_read"] > 0 for lay in summary["layers"])
    assert all(s.startswith("partitioned") for s in summary["plan"]["schemes"])
    # Its temporaries (buckets, partials) are gone: only the output is left beside it.
    assert sorted(os.listdir(tmp_path)) == ["logits.npy"]
    assert not [f for f in os.listdir(run) if f.startswith(".ringgnn")]


def test_embeddings_of_some_nodes_by_partitions(hubby, sum_runs):  # noqa: F811
    nodes = np.array([1200, 7, 0, 1499, 33])
    want = infer(str(sum_runs["sage"]), output="embeddings", nodes=nodes, scheme="grid", hidden_dtype="f32")
    got = infer(str(sum_runs["sage"]), output="embeddings", nodes=nodes, scheme="partitioned", parts=5,
                grid_nodes=50, block_edges=16, hidden_dtype="f32")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_sage_with_max_aggregation_by_partitions(hubby, sum_runs):  # noqa: F811
    """A ``SAGEConv(aggr="max")``: partial maxima merged by maxima; a node without in-edges
    aggregates to 0 as in PyG."""
    from ringgnn.inference.run import LayerwiseInference

    ds = ringgnn.Dataset.open(hubby)
    ckpt, net = with_max_aggregation(load_checkpoint(str(sum_runs["sage"]), ds))
    ref = full_batch(ds, net)
    li = LayerwiseInference(ds, ckpt, scheme="partitioned", parts=6, grid_nodes=70, block_edges=9,
                            hidden_dtype="f32")
    rows = {}
    li.run(None, None, lambda a, r: rows.__setitem__(a, r.copy()))
    got = np.concatenate([rows[a] for a in sorted(rows)])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert [lay["scheme"] for lay in li.stats["layers"]] == ["partitioned", "partitioned"]


def test_the_torch_aggregation_is_refused_the_partitioned_scheme(hubby, sum_runs):  # noqa: F811
    with pytest.raises(InputError, match="only the Rust folds"):
        infer(str(sum_runs["gat"]), scheme="partitioned", parts=3, aggregate="python")
    summary = infer(str(sum_runs["gat"]), out=str(sum_runs["gat"] / "x.npy"), aggregate="python")
    assert [lay["scheme"] for lay in summary["layers"]] == ["grid", "grid"]


def test_a_budget_the_grid_would_sweep_too_often_runs_by_partitions(hubby, sum_runs, monkeypatch):  # noqa: F811
    """With the process's held memory pinned (so that budgets are exact), a budget between the
    partitions' least and the grid's runs every layer by partitions and gives the grid's
    outputs; under the partitions' least it is refused naming it; with the grid forced, naming
    the grid's."""
    import ringgnn.inference.plan as plan_mod
    from ringgnn.inference.run import LayerwiseInference

    monkeypatch.setattr("ringgnn._options.held_memory", lambda: 300 << 20)
    ds = ringgnn.Dataset.open(hubby)
    run = sum_runs["gcn"]
    probe = LayerwiseInference(ds, load_checkpoint(str(run), ds), memory=1 << 30).memplan
    grid_least = probe.least_budget(range(2), grid_only=True)
    part_least = probe.least_budget(range(2))
    assert part_least < grid_least
    want = infer(str(run), scheme="grid", hidden_dtype="f32")
    mid = (part_least + grid_least) // 2
    summary = infer(str(run), memory=mid, hidden_dtype="f32", out=str(run / "mid.npy"))
    sweeps = [g["sweeps"] for g in summary["plan"]["grid"]["layers"]]
    assert sweeps[0] > plan_mod.MAX_SWEEPS  # the widest layer's accumulators: the grid would sweep too often
    for s, lay in zip(sweeps, summary["layers"]):
        assert lay["scheme"] == "partitioned" or s <= plan_mod.MAX_SWEEPS
    np.testing.assert_allclose(np.load(run / "mid.npy"), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(InputError, match=f"give at least --memory {part_least:,}"):
        infer(str(run), memory=part_least - 1)
    with pytest.raises(InputError, match=f"give at least --memory {grid_least:,}"):
        infer(str(run), memory=mid, scheme="grid")


def test_a_full_disk_while_spilling_names_the_temporary_and_leaves_nothing(hubby, sum_runs, tmp_path):  # noqa: F811
    """Buckets that cannot be written (RLIMIT_FSIZE: the Rust core's first page of a bucket is
    over the limit, as on a full disk; the output, of two nodes, is under it): an error naming
    what was written where, no output, no temporaries left."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    run = sum_runs["sage"]
    code = ("import json, resource, signal\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "from ringgnn.inference.run import infer\n"
            "try:\n"
            f"    infer({str(run)!r}, scheme='partitioned', parts=3, output='predictions', nodes=[0, 1],\n"
            f"          out={str(out / 'p.npy')!r})\n"
            "except OSError as e:\n"
            "    print(json.dumps(dict(errno=e.errno, operation=getattr(e, 'operation', None), path=e.path)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["errno"] == errno.EFBIG and got["operation"] == "writing the partition buckets in", got
    assert ".ringgnn-infer-parts1" in got["path"]
    assert list(out.iterdir()) == []
    assert not [f for f in os.listdir(run) if f.startswith(".ringgnn")]
