"""A narrowing layer's ``W x`` computed once for all destination blocks
(``LayerwiseInference._pretransform``, docs/INFERENCE.md): the same outputs as the per-piece
products, the temporary file's bytes in the layer's stats and the cost model, nothing left
behind; decided once from the blocks that run (with some nodes only, fewer), the plan printed
and the run agreeing."""

from __future__ import annotations

import numpy as np
import pytest

import ringgnn
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.inference.plan import choose_scheme
from ringgnn.inference.run import LayerwiseInference, run_inference

from test_infer import full_batch, hubby, runs  # noqa: F401 (fixtures)


@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_w_x_once_equals_the_per_piece_products(hubby, runs, model, monkeypatch, tmp_path):  # noqa: F811
    ds = ringgnn.Dataset.open(hubby)
    _, run = runs[model]
    ckpt = load_checkpoint(str(run), ds)
    kw = dict(grid_nodes=100, block_edges=40, hidden_dtype="f32", work_dir=str(tmp_path), scheme="grid")  # 15 blocks
    stats = {}
    once = run_inference(ds, ckpt, None, stats=stats, **kw)
    first, last = stats["layers"]
    assert first["temp_written"] == 0 and "pretransform" not in first["phases"]  # 10 -> 64 widens
    # Layer 2 (64 -> 4) narrows: every node's 4 floats, 256 rows a page.
    assert last["temp_written"] == -(-ds.num_nodes // 256) * 4096 and "pretransform" in last["phases"]
    assert last["temp_read"] > 0 and last["row_bytes"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary file's directory is removed
    np.testing.assert_allclose(once, full_batch(ds, ckpt.net), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(LayerwiseInference, "_pretransforms", lambda self, k, blocks: False)
    stats = {}
    per_piece = run_inference(ds, ckpt, None, stats=stats, **kw)
    assert stats["layers"][1]["temp_written"] == 0
    np.testing.assert_allclose(once, per_piece, rtol=1e-6, atol=1e-6)


def test_when_w_x_is_computed_once(hubby, runs):  # noqa: F811
    ds = ringgnn.Dataset.open(hubby)
    li = LayerwiseInference(ds, load_checkpoint(str(runs["sage"][1]), ds), memory=2 << 30)
    assert li._sizes(1)[1] >= ds.num_nodes  # all sources in one piece under this budget
    assert not li._pretransforms(1, 1)  # one block, one piece: nothing to save
    assert li._pretransforms(1, 2)  # several blocks
    assert not li._pretransforms(0, 2)  # 10 -> 64: widens
    gat = LayerwiseInference(ds, load_checkpoint(str(runs["gat"][1]), ds), memory=2 << 30)
    assert not gat._pretransforms(1, 2)  # a softmax: the grid's transform stays per piece


def test_the_cost_model_counts_the_file_once_and_its_rows_per_sweep():
    indptr = np.arange(0, 2001, 2, dtype=np.int64)  # 1,000 nodes, 2 in-edges each
    common = dict(share=1 << 20, input_bytes=1000, acc_bytes=16, id_bytes=4, splits=True, force="grid")
    plain = choose_scheme(indptr, sweeps=3, **common)
    once = choose_scheme(indptr, sweeps=3, once_bytes=1500, sweep_bytes=500, **common)
    assert plain.grid_bytes == 3 * 1000 + 2000 * 4
    assert once.grid_bytes == 1500 + 3 * 500 + 2000 * 4


@pytest.mark.parametrize("ids, blocks", [([3, 50, 99], 1), ([3, 1450], 2)])
def test_with_some_nodes_w_x_once_is_decided_from_the_blocks_that_run(hubby, runs, ids, blocks,  # noqa: F811
                                                                       tmp_path):
    # 15 blocks of 100 nodes, but only the blocks holding the wanted nodes run for the last layer
    # (64 -> 4, narrowing): one block saves no product, so W x is computed once only for two.
    # (The plan used to decide from the 15 blocks of the whole graph, the grid from those run.)
    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs["sage"][1]), ds)
    kw = dict(grid_nodes=100, block_edges=10_000, hidden_dtype="f32", work_dir=str(tmp_path), scheme="grid")
    stats = {}
    got = run_inference(ds, ckpt, np.array(ids), stats=stats, **kw)
    first, last = stats["layers"]
    printed = stats["plan"]["schemes"]
    assert printed[0].startswith("grid (") and "15 blocks, 15 sweeps)" in printed[0]  # every node; 10 -> 64 widens
    once = blocks > 1
    assert f"{blocks} block{'s' * (blocks > 1)}, {blocks} sweep{'s' * (blocks > 1)}" in printed[1]
    assert ("W x computed once" in printed[1]) == once == (last["temp_written"] > 0)
    assert ("pretransform" in last["phases"]) == once
    assert last["plan"] == printed[1]  # the layer ran the choice the plan printed
    # The grid's cost is that of the blocks run: the input once and the W x file written, then
    # read once per block, or the input once per block; plus the neighbor file.
    li = LayerwiseInference(ds, ckpt, **kw)
    wanted = np.zeros(ds.num_nodes, dtype=bool)
    wanted[ids] = True
    c = li.choose(1, wanted)
    assert (len(c.blocks), c.sweeps, c.pretransform) == (blocks, blocks, once)
    wx = -(-ds.num_nodes // 256) * 4096  # 4 floats a row, 256 rows a page
    x = -(-ds.num_nodes // (4096 // 256)) * 4096  # 64 floats a row, 16 rows a page
    edges = int(li.graph.indptr[-1]) * np.dtype(li.graph.dtype).itemsize
    assert c.grid_bytes == (x + wx + blocks * wx if once else blocks * x) + edges
    np.testing.assert_allclose(got, full_batch(ds, ckpt.net)[ids], rtol=1e-4, atol=1e-4)
