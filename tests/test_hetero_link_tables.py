"""Embedding tables in files for heterogeneous link runs (``--task link --embed-tables file``):
each tower's table of a featureless type is a file ``RUN/tables/SIDE.TYPE.*.npy``, copied beside
every checkpoint; resume continues from the copies exactly; the exact scores of the live model
during training are those `predict RUN --edges` computes from the checkpoint's copies."""

from __future__ import annotations

import os

import numpy as np
import pytest
import ringgnn
import torch
from conftest import tiny_writes

WRITES = "author:writes:paper"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The typed link tests' graph (``conftest.tiny_writes``)."""
    return tiny_writes(tmp_path_factory.mktemp("tiny"))


COMMON = dict(task="link", relation=WRITES, fanouts=[2, 2], batch_size=4, hidden=8, embed_dim=4, threads=1,
              prefetch=1, quiet=True, log=lambda s: None)


def _last(run):
    return torch.load(os.path.join(run, "last.pt"), weights_only=True)


def test_link_tables_in_files_checkpoint_and_resume_exactly(tiny, tmp_path):
    from ringgnn.training.loop import train

    run, straight = str(tmp_path / "run"), str(tmp_path / "straight")
    m = train(tiny, epochs=2, out=run, embed_tables="file", eval_mode="sampled", **COMMON)
    assert len(m["epochs"]) == 2
    state = _last(run)
    cfg = state["args"]["hetero_link"]
    assert cfg["src"]["external"] == ["author"] and cfg["dst"]["external"] == ["author"]
    assert not any(".embeddings." in k for k in state["model"])
    assert set(state["tables"]) == {"src.author", "dst.author"}
    rec = state["tables"]["src.author"]
    assert rec["files"]["weight"] == "last.e1.src.author.weight.npy" and rec["steps"] > 0
    assert (rec["num_nodes"], rec["dim"]) == (5, 4)
    live = np.load(os.path.join(run, "tables", "src.author.weight.npy"))
    assert np.array_equal(np.load(os.path.join(run, rec["files"]["weight"])), live)
    assert not np.array_equal(live, np.load(os.path.join(run, "tables", "dst.author.weight.npy")))
    assert "last.e0.src.author.weight.npy" not in os.listdir(run)  # pruned once last.pt named the new ones
    # One more epoch from the copies is a run of three epochs straight through.
    m3 = train(tiny, epochs=3, out=run, embed_tables="file", eval_mode="sampled", resume=True, **COMMON)
    s3 = train(tiny, epochs=3, out=straight, embed_tables="file", eval_mode="sampled", **COMMON)
    assert [e["loss"] for e in m3["epochs"]] == pytest.approx([e["loss"] for e in s3["epochs"]], rel=1e-5)
    a, b = _last(run)["tables"], _last(straight)["tables"]
    for name in ("src.author", "dst.author"):
        assert np.allclose(np.load(os.path.join(run, a[name]["files"]["weight"])),
                           np.load(os.path.join(straight, b[name]["files"]["weight"])), atol=1e-5)
    # Resumed with tables in memory: the tables stay where the run put them.
    m4 = train(tiny, epochs=4, out=run, embed_tables="memory", eval_mode="sampled", resume=True, **COMMON)
    assert len(m4["epochs"]) == 4 and _last(run)["args"]["hetero_link"]["src"]["external"] == ["author"]


def test_link_tables_in_files_score_as_predict_edges_does(tiny, tmp_path):
    """Layer-wise scores of the live model (tables read from the live files) are those of the
    checkpoint (tables read from its copies), with and without PyTorch."""
    from ringgnn.inference.scoring import predict_link_edges
    from ringgnn.training.loop import train

    m = train(tiny, epochs=2, out=tmp_path / "run", embed_tables="file", eval_mode="layerwise", **COMMON)
    best = m["epochs"][m["best_epoch"]]
    s = predict_link_edges(str(tmp_path / "run"), "val")
    assert best["val_auc"] == pytest.approx(s["metrics"]["auc"])
    assert best["val_mrr"] == pytest.approx(s["metrics"]["mrr"])
    # Sampled epochs, then the exact scores of the best checkpoint (its tables' copies) at the end.
    m = train(tiny, epochs=2, out=tmp_path / "s", embed_tables="file", eval_mode="auto", **COMMON)
    s = predict_link_edges(str(tmp_path / "s"), "test")
    assert m["layerwise"]["test_auc"] == pytest.approx(s["metrics"]["auc"])
    assert m["layerwise"]["test_mrr"] == pytest.approx(s["metrics"]["mrr"])


def test_link_tables_in_memory_by_choice_and_by_the_plan(tiny, tmp_path):
    from ringgnn.training.loop import train

    train(tiny, epochs=1, out=tmp_path / "m", embed_tables="memory", eval_mode="sampled", **COMMON)
    train(tiny, epochs=1, out=tmp_path / "a", eval_mode="sampled", **COMMON)
    for run in ("m", "a"):  # a tiny table fits any plan: held
        state = _last(tmp_path / run)
        assert "external" not in state["args"]["hetero_link"]["src"] and not state.get("tables")
        assert any(k.startswith("encoders.src.embeddings.author") for k in state["model"])
        assert not (tmp_path / run / "tables").exists()
    with pytest.raises(ringgnn.InputError, match="--embed-tables"):
        train(tiny, epochs=1, out=tmp_path / "bad", embed_tables="disk", **COMMON)


def test_both_kinds_say_the_same_things_in_the_same_words(tiny, tmp_path):
    """A typed run's lines and metrics.json say what a homogeneous run's say in the same words:
    the task in ``metrics.json["task"]``, the epoch line, the pass line, the final line."""
    import re

    from _sampling import make_link_dataset
    from ringgnn.training.loop import train

    (tmp_path / "h").mkdir()
    homo = make_link_dataset(tmp_path / "h", nodes=60, negatives=3)
    runs = {}
    for name, ds, extra in [("homo", homo, dict(task="link")), ("typed", tiny, dict(COMMON, embed_tables="auto"))]:
        lines = []
        kw = dict(fanouts=[2, 2], batch_size=16, hidden=8, threads=1, epochs=1, quiet=True)
        m = train(ds, out=str(tmp_path / name), eval_mode="sampled", **{**kw, **extra, "log": lines.append})
        runs[name] = (m, lines)
    for m, lines in runs.values():
        assert m["task"] == "link"
        assert re.fullmatch(r"epoch 0: loss \d\.\d{4}, val auc \d\.\d{4} mrr \d\.\d{4}, test auc \d\.\d{4} mrr "
                            r"\d\.\d{4}, \d+\.\d\d s", next(x for x in lines if x.startswith("epoch 0")))
        assert any(re.match(r"  training pass \d+\.\d\d s: .*train \d+\.\d\d s, waiting for batches \d+\.\d\d s;"
                            r".* evaluation \d+\.\d\d s$", x) for x in lines)
        assert re.match(r"best val auc \d\.\d{4} at epoch 0; val auc ", lines[-1])
