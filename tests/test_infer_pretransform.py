"""A narrowing layer's ``W x`` computed once for all destination blocks
(``LayerwiseInference._pretransform``, docs/INFERENCE.md): the same outputs as the per-piece
products, the temporary file's bytes in the layer's stats and the cost model, nothing left
behind."""

from __future__ import annotations

import numpy as np
import pytest

import ringgnn
from ringgnn.checkpoints import load_checkpoint
from ringgnn.infer_plan import choose_scheme
from ringgnn.inference import LayerwiseInference, run_inference

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
