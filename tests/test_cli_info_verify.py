"""`ringgnn info`, `ringgnn verify` and `ringgnn demo`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import SMALL_EDGES, python_m, reference_csc


@pytest.fixture
def dataset(cli, small_tsv, tmp_path) -> Path:
    """The small graph with features, labels and splits."""
    np.save(tmp_path / "x.npy", np.ones((6, 5), dtype=np.float32))
    np.save(tmp_path / "y.npy", np.array([0, 1, 1, 2, -1, 0]))
    out = tmp_path / "ds"
    r = cli(
        "convert", small_tsv, out, "--features", tmp_path / "x.npy", "--labels", tmp_path / "y.npy",
        "--split", "train=0.4,val=0.2,test=0.2", "--quiet",
    )  # fmt: skip
    assert r.code == 0, r.err
    return out


def test_info_json(cli, dataset):
    r = cli("info", dataset, "--json")
    assert r.code == 0, r.err
    info = json.loads(r.out)
    degrees = [len(x) for x in reference_csc(SMALL_EDGES)]
    assert info["num_nodes"] == 6 and info["num_edges"] == len(SMALL_EDGES)
    assert (info["feature_dim"], info["feature_dtype"], info["num_classes"]) == (5, "f32", 3)
    assert info["num_labeled"] == 5
    assert set(info["splits"]) == {"train", "val", "test"} and sum(info["splits"].values()) <= 5
    assert info["degree"]["min"] == min(degrees) and info["degree"]["max"] == max(degrees)
    assert info["degree"]["zero"] == degrees.count(0)
    assert info["degree"]["mean"] == pytest.approx(np.mean(degrees))
    assert info["degree"]["median"] == sorted(degrees)[(len(degrees) - 1) // 2]
    assert info["path"] == str(dataset)
    for key in ["indptr", "indices", "features", "labels", "split.train"]:
        f = info["files"][key]
        assert f["bytes"] == os.path.getsize(dataset / f["path"]) and f["bytes"] % 4096 == 0
    assert info["total_bytes"] == sum(f["bytes"] for f in info["files"].values())


def test_info_text(cli, dataset):
    r = cli("info", dataset)
    assert r.code == 0, r.err
    for fragment in [
        "nodes     6",
        f"edges     {len(SMALL_EDGES)}",
        "5 x f32",
        "3 classes",
        "train",
        "median",
        "indptr",
    ]:
        assert fragment in r.out, r.out


def test_info_text_of_a_typed_dataset_keeps_its_files_in_columns(cli, tmp_path):
    from ringgnn.data.generate import generate_hetero

    generate_hetero(tmp_path / "mag", papers=60, authors=40, institutions=5, feature_dim=4, seed=0)
    r = cli("info", tmp_path / "mag")
    assert r.code == 0, r.err
    files = r.out[r.out.index("\nfiles\n") + len("\nfiles\n"):].splitlines()
    # the longest key, one space, then every file's name and size in the same columns
    for start in ("  relation.institution:rev_affiliated_with:author.indices rel2_indices.bin ",
                  "  relation.author:affiliated_with:institution.indices     rel0_indices.bin "):
        assert any(ln.startswith(start) for ln in files), r.out
    assert len({ln.index(" rel") for ln in files if " rel" in ln}) == 1
    assert len({len(ln) - len(ln.split()[-2] + " " + ln.split()[-1]) for ln in files}) == 1, r.out


def test_info_without_features(cli, small_tsv, tmp_path):
    assert cli("convert", small_tsv, tmp_path / "ds", "-q").code == 0
    info = json.loads(cli("info", tmp_path / "ds", "--json").out)
    assert info["feature_dim"] is None and info["num_classes"] is None and info["splits"] == {}
    assert "features  none" in cli("info", tmp_path / "ds").out


@pytest.mark.parametrize("cmd", ["info", "verify"])
def test_not_a_dataset(cli, tmp_path, cmd):
    r = cli(cmd, tmp_path)
    assert r.code == 1 and r.err.startswith(f"ringgnn {cmd}: error: ") and "manifest.json" in r.err
    r = cli(cmd, tmp_path / "missing")
    assert r.code == 1 and "missing" in r.err


def test_verify_good(cli, dataset):
    r = cli("verify", dataset)
    assert r.code == 0, r.err
    assert r.out.startswith("ok: ") and "7 files" in r.out
    r = cli("verify", dataset, "--quiet")
    assert r.code == 0 and r.out == "" and r.err == ""


@pytest.mark.parametrize("key", ["indices", "indptr", "features", "labels", "split.train"])
def test_verify_detects_a_flipped_byte(cli, dataset, key):
    m = json.loads((dataset / "manifest.json").read_text())
    path = dataset / m["files"][key]["path"]
    data = bytearray(path.read_bytes())
    data[min(3, m["files"][key]["payload_bytes"] - 1)] ^= 0x40
    path.write_bytes(bytes(data))
    r = cli("verify", dataset, "--quiet")
    assert r.code == 1, r.out
    assert r.err.startswith("ringgnn verify: error: ") and m["files"][key]["path"] in r.err
    assert "Traceback" not in r.err


def test_verify_detects_a_byte_in_the_padding(cli, dataset):
    path = dataset / "indices.bin"
    data = bytearray(path.read_bytes())
    data[-1] = 1
    path.write_bytes(bytes(data))
    r = cli("verify", dataset, "--quiet")
    assert r.code == 1 and "indices.bin" in r.err


def test_truncated_file_is_reported_by_every_command(cli, dataset):
    path = dataset / "indices.bin"
    path.write_bytes(path.read_bytes()[:-4096] if path.stat().st_size > 4096 else b"")
    for cmd in ["verify", "info"]:
        r = cli(cmd, dataset)
        assert r.code == 1 and "indices.bin" in r.err, (cmd, r.err)


def test_damaged_manifest(cli, dataset):
    (dataset / "manifest.json").write_text("{ not json")
    r = cli("verify", dataset)
    assert r.code == 1 and "manifest.json" in r.err and "JSON" in r.err


def test_demo_in_a_directory(cli, tmp_path):
    out = tmp_path / "demo"
    r = cli("demo", out, "--quiet")
    assert r.code == 0, r.err
    assert "nodes     20,000" in r.out and "verify: ok" in r.out
    # Two sampling epochs over the 12,000 training seeds (60% of 20,000) in batches of 512.
    assert r.out.count(" 24 batches, ") == 2 and "SEPS" in r.out
    assert (out / "manifest.json").exists()
    # Then GraphSAGE trains on it, into DIR-run, and the accuracy reached is printed.
    metrics = json.loads((tmp_path / "demo-run" / "metrics.json").read_text())
    assert metrics["test_acc"] > 0.85 and len(metrics["epochs"]) == 5
    assert f"test acc {metrics['test_acc']:.4f}" in r.out
    r = cli("demo", out, "--quiet")
    assert r.code == 1 and "--overwrite" in r.err
    assert cli("demo", out, "--quiet", "--overwrite").code == 0


def test_demo_in_a_temporary_directory_cleans_up(tmp_path):
    # As the README runs it (`ringgnn demo`), here via `python -m ringgnn` with TMPDIR pointing
    # to a directory we can inspect.
    r = python_m("demo", env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "verify: ok" in r.stdout and "best val acc" in r.stdout and "Traceback" not in r.stderr
    # Only the demo's own directory: PyTorch and PyG keep caches in TMPDIR too (torchinductor,
    # generated message-passing modules).
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("ringgnn-demo-")] == []
