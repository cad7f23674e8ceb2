"""`ringgnn train --task link` (issue 21, part 3): the run directory of a link run, exact
layer-wise scores against a full-graph forward pass, learning beyond chance, resume,
reproducibility, the decoders, and every refused option."""

from __future__ import annotations

import json
import re

import pytest

import ringgnn
from ringgnn.inference import metrics
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.training.loop import train

from _sampling import make_link_dataset, reference_scores

FAST = dict(task="link", fanouts=[5, 5], batch_size=128, epochs=3, lr=0.01, hidden=32, quiet=True,
            log=lambda s: None)
CLI_FAST = ["--task", "link", "--fanouts", "5,5", "--batch-size", "128", "--lr", "0.01", "--hidden", "32", "--quiet"]


@pytest.fixture(scope="module")
def link_ds(tmp_path_factory) -> ringgnn.Dataset:
    return make_link_dataset(tmp_path_factory.mktemp("linktrain"))


@pytest.fixture(scope="module")
def run(link_ds, tmp_path_factory):
    out = tmp_path_factory.mktemp("linkrun") / "sage"
    return train(link_ds, out=str(out), **FAST), out


def _curve(m):
    return [(e["epoch"], e["loss"], e["val_auc"], e["val_mrr"], e["test_auc"], e["test_mrr"]) for e in m["epochs"]]


def test_metrics_json_of_a_link_run(run):
    m, out = run
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk == json.loads(json.dumps(m))
    assert on_disk["args"]["task"] == "link" and on_disk["args"]["decoder"] == "dot"
    assert on_disk["args"]["neg_ratio"] == 1.0 and on_disk["args"]["neg_weight"] == "uniform"
    for e in on_disk["epochs"]:
        assert {"loss", "val_auc", "val_mrr", "val_hits", "test_auc", "test_mrr", "test_hits"} <= set(e)
        assert set(e["test_hits"]) == {"1", "3", "10", "20", "50", "100"}
        # 7 negatives: a positive ranks at most 8th, so every Hits@K with K >= 8 is 1.
        assert e["test_hits"]["10"] == 1.0 and 0 < e["test_mrr"] <= 1
    best = max(on_disk["epochs"], key=lambda e: e["val_auc"])
    assert on_disk["best_epoch"] == best["epoch"] and on_disk["best_val_auc"] == best["val_auc"]
    assert on_disk["test_auc"] == best["test_auc"] and on_disk["test_mrr"] == best["test_mrr"]
    assert on_disk["test_hits"] == best["test_hits"]
    lw = on_disk["layerwise"]
    assert lw["epoch"] == on_disk["best_epoch"]
    assert {"val_auc", "val_mrr", "val_hits", "test_auc", "test_mrr", "test_hits", "seconds"} <= set(lw)
    assert (out / "best.pt").exists() and (out / "last.pt").exists() and (out / "curves.png").exists()


def test_layerwise_scores_are_a_full_graph_forward(link_ds, run):
    m, out = run
    for split in ("val", "test"):
        pos, neg = reference_scores(link_ds, out, link_ds.edge_split(split), link_ds.edge_negatives(split))
        want = metrics.link_scores(pos, neg)
        got = m["layerwise"]
        assert got[f"{split}_auc"] == pytest.approx(want["auc"], abs=1e-4)
        assert got[f"{split}_mrr"] == pytest.approx(want["mrr"], abs=1e-4)
        assert got[f"{split}_hits"] == pytest.approx({str(k): v for k, v in want["hits"].items()}, abs=1e-3)


def test_a_link_model_learns(run):
    m, _ = run
    # Chance is AUC 0.5 and MRR (1/1 + ... + 1/8) / 8 = 0.34 with 7 negatives; with about 480
    # test pairs their standard deviations at chance are about 0.014 and 0.012.
    assert m["layerwise"]["test_auc"] > 0.58, m["layerwise"]
    assert m["layerwise"]["test_mrr"] > 0.38, m["layerwise"]
    assert m["epochs"][-1]["loss"] < m["epochs"][0]["loss"]


def test_same_seed_same_link_run_and_resume(cli, link_ds, run, tmp_path):
    again = train(link_ds, out=str(tmp_path / "again"), eval_mode="sampled", **FAST)
    assert _curve(again) == _curve(run[0])
    out = tmp_path / "r"
    r = cli("train", link_ds.path, "--epochs", "2", "--out", out, "--eval", "sampled", *CLI_FAST)
    assert r.code == 0, r.err
    assert "best val auc " in r.out.strip().splitlines()[-1]
    r = cli("train", link_ds.path, "--epochs", "3", "--out", out, "--resume", "--eval", "sampled", *CLI_FAST)
    assert r.code == 0, r.err
    assert _curve(json.loads((out / "metrics.json").read_text())) == _curve(run[0])
    r = cli("train", link_ds.path, "--epochs", "4", "--out", out, "--resume", "--decoder", "mlp", *CLI_FAST)
    assert r.code == 1 and "decoder=dot (now mlp)" in r.err


def test_each_evaluated_split_of_a_link_run_shows_a_bar_unless_quiet(cli, link_ds, tmp_path):
    # The held-out pairs' sampled embeddings: one bar per split over its ends' batches, on stderr.
    args = ["train", link_ds.path, "--epochs", "1", "--eval", "sampled", "--out", tmp_path / "r", *CLI_FAST[:-1]]
    r = cli(*args)
    assert r.code == 0, r.err
    for split in ("val", "test"):
        assert re.search(rf"\reval {split}: +0%\|.*\| 0/[1-9]\d* \[00:00<\?, \?batch/s\]", r.err), r.err
    quiet = cli(*args, "--overwrite", "--quiet")
    assert quiet.code == 0 and "eval " not in quiet.err and "batch/s" not in quiet.err, quiet.err


@pytest.mark.parametrize("model,decoder", [("sage", "mlp"), ("gcn", "dot"), ("gat", "mlp")])
def test_encoders_and_decoders(link_ds, tmp_path, model, decoder):
    m = train(link_ds, out=str(tmp_path / "r"), model=model, decoder=decoder, eval_mode="sampled",
              **{**FAST, "epochs": 1})
    assert m["args"]["model"] == model and m["args"]["decoder"] == decoder
    assert 0 <= m["test_auc"] <= 1
    ckpt = load_checkpoint(str(tmp_path / "r"), link_ds)
    assert ckpt.task == "link" and ckpt.decoder is not None
    assert len(list(ckpt.decoder.parameters())) == (4 if decoder == "mlp" else 0)


def test_degree_weighted_negatives_and_a_ratio(link_ds, tmp_path):
    m = train(link_ds, out=str(tmp_path / "r"), neg_ratio=3, neg_weight="degree", eval_mode="sampled",
              **{**FAST, "epochs": 1})
    assert m["args"]["neg_ratio"] == 3.0 and m["args"]["neg_weight"] == "degree"


def test_link_errors(cli, link_ds, tmp_path):
    ringgnn.generate_sbm(tmp_path / "nodes", nodes=200, classes=2, avg_degree=4, feature_dim=4, seed=1)
    r = cli("train", tmp_path / "nodes", "--task", "link", "--out", tmp_path / "a")
    assert r.code == 1 and "no train/val/test edge split" in r.err and "--link-split" in r.err
    r = cli("train", tmp_path / "nodes", "--decoder", "mlp", "--out", tmp_path / "a")
    assert r.code == 1 and "--decoder goes with --task link" in r.err
    r = cli("train", tmp_path / "nodes", "--neg-ratio", "2", "--neg-weight", "degree", "--out", tmp_path / "a")
    assert r.code == 1 and "--neg-ratio, --neg-weight go with --task link" in r.err
    r = cli("train", link_ds.path, "--task", "link", "--decoder", "bilinear", "--out", tmp_path / "a")
    assert r.code == 1 and "bilinear" in r.err and "dot, mlp" in r.err
    r = cli("train", link_ds.path, "--task", "link", "--neg-ratio", "0", "--out", tmp_path / "a")
    assert r.code == 1 and "ringgnn train: error: --neg-ratio must be a finite number > 0, not 0.0\n" == r.err
    r = cli("train", link_ds.path, "--task", "link", "--neg-weight", "pagerank", "--out", tmp_path / "a")
    assert r.code == 1 and "pagerank" in r.err
    r = cli("train", link_ds.path, "--task", "edge", "--out", tmp_path / "a")
    assert r.code == 2 and "invalid choice: 'edge'" in r.err
    # The link dataset has no labels: the node task says so.
    r = cli("train", link_ds.path, "--out", tmp_path / "a")
    assert r.code == 1 and "has no labels" in r.err
    assert not (tmp_path / "a").exists()


def test_a_link_run_keeps_to_its_memory_budget(link_ds, tmp_path):
    m = train(link_ds, out=str(tmp_path / "r"), memory="1500M", eval_mode="sampled", **{**FAST, "epochs": 1})
    plan = m["memory_plan"]
    assert plan["budget"] == 1500 << 20 and plan["total"] <= plan["budget"]
    # The plan is made for the largest link batch: 128 positives and 128 negatives, 512 seeds.
    assert m["loader"]["batches"] > 0
