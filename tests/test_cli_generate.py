"""`ringgnn generate rmat|sbm`: sizes, determinism by seed, the graph options, and the planted
structure of sbm (labels, splits, homophily)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from conftest import assert_nothing_left


def csc(path: Path):
    """(indptr, indices) of a dataset, read with numpy from the files FORMAT.md describes."""
    m = json.loads((path / "manifest.json").read_text())
    n, e = m["num_nodes"], m["num_edges"]
    indptr = np.fromfile(path / m["files"]["indptr"]["path"], dtype="<u8", count=n + 1).astype(np.int64)
    width = {"u32": "<u4", "u64": "<u8"}[m["graph"]["indices_dtype"]]
    indices = np.fromfile(path / m["files"]["indices"]["path"], dtype=width, count=e).astype(np.int64)
    return indptr, indices


def edge_pairs(path: Path) -> np.ndarray:
    """Edges as (src, dst) rows, sorted."""
    indptr, indices = csc(path)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    pairs = np.stack([indices, dst], axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def is_symmetric(path: Path) -> bool:
    pairs = edge_pairs(path)
    rev = pairs[:, ::-1]
    return np.array_equal(pairs, rev[np.lexsort((rev[:, 1], rev[:, 0]))])


def crcs(path: Path):
    return {k: f["crc32c"] for k, f in json.loads((path / "manifest.json").read_text())["files"].items()}


# --- rmat ------------------------------------------------------------------------------------


def test_rmat_sizes_and_summary(cli, tmp_path):
    out = tmp_path / "rmat"
    r = cli("generate", "rmat", out, "--scale", 10, "--edge-factor", 8, "--seed", 1)
    assert r.code == 0, r.err
    assert "1,024 nodes, 8,192 edges" in r.out and str(out) in r.out
    ds = ringgnn.Dataset.open(out)
    assert (ds.num_nodes, ds.num_edges) == (1024, 8192)
    indptr, indices = csc(out)
    assert indptr[-1] == 8192 and indices.max() < 1024
    # R-MAT is skewed: the biggest in-degree is far above the mean of 8.
    assert np.diff(indptr).max() > 8 * 8


def test_rmat_is_deterministic_by_seed(cli, tmp_path):
    for name, seed in [("a", 5), ("b", 5), ("c", 6)]:
        assert (
            cli("generate", "rmat", tmp_path / name, "--scale", 9, "--edge-factor", 4, "--seed", seed, "-q").code == 0
        )
    assert crcs(tmp_path / "a") == crcs(tmp_path / "b")
    assert crcs(tmp_path / "a") != crcs(tmp_path / "c")


def test_rmat_same_output_whatever_threads(cli, tmp_path):
    for name, threads in [("a", 1), ("b", 2)]:
        flags = ["--scale", 10, "--edge-factor", 4, "--threads", threads, "--undirected", "-q"]
        assert cli("generate", "rmat", tmp_path / name, *flags).code == 0
    assert crcs(tmp_path / "a") == crcs(tmp_path / "b")


def test_rmat_graph_options(cli, tmp_path):
    base, und = tmp_path / "base", tmp_path / "und"
    flags = ["--scale", 9, "--edge-factor", 4, "--seed", 2, "-q"]
    assert cli("generate", "rmat", base, *flags).code == 0
    assert cli("generate", "rmat", und, *flags, "--undirected", "--self-loops", "drop", "--dedup").code == 0
    pairs = edge_pairs(base)
    loops = pairs[:, 0] == pairs[:, 1]
    assert loops.any()  # R-MAT makes self loops; the options below must remove them
    # The processed graph is exactly the base graph, symmetrized, without loops, deduplicated.
    p = pairs[~loops]
    expected = np.unique(np.concatenate([p, p[:, ::-1]]), axis=0)
    assert np.array_equal(edge_pairs(und), expected)
    assert is_symmetric(und)


def test_rmat_existing_output(cli, tmp_path):
    out = tmp_path / "rmat"
    assert cli("generate", "rmat", out, "--scale", 4, "-q").code == 0
    r = cli("generate", "rmat", out, "--scale", 4, "-q")
    assert r.code == 1 and r.err.startswith("ringgnn generate rmat: error: ") and "--overwrite" in r.err
    assert cli("generate", "rmat", out, "--scale", 5, "-q", "--overwrite").code == 0
    assert ringgnn.Dataset.open(out).num_nodes == 32


@pytest.mark.parametrize("flags", [[], ["--scale", "x"], ["--scale", "-3"], ["--scale", 4, "--memory", "1Q"]])
def test_rmat_usage_errors(cli, tmp_path, flags):
    r = cli("generate", "rmat", tmp_path / "rmat", *flags)
    assert r.code == 2 and "usage:" in r.err
    assert_nothing_left(tmp_path / "rmat")


# --- sbm -------------------------------------------------------------------------------------

SBM = ["--nodes", 3000, "--classes", 4, "--avg-degree", 8, "--feature-dim", 16]


@pytest.fixture(scope="module")
def sbm(tmp_path_factory):
    from ringgnn.cli import main

    out = tmp_path_factory.mktemp("sbm") / "sbm"
    assert main([*map(str, ["generate", "sbm", out, *SBM, "--seed", 3, "--quiet"])]) == 0
    return out


def test_sbm_contents(sbm):
    ds = ringgnn.Dataset.open(sbm)
    assert ds.num_nodes == 3000
    assert (ds.feature_dim, ds.feature_dtype, ds.num_classes) == (16, "f32", 4)
    labels = ds.labels
    assert labels.shape == (3000,) and labels.min() >= 0 and labels.max() == 3
    assert np.bincount(labels).min() > 3000 / 4 / 3  # every class is well represented
    assert ds.split_names == ["test", "train", "val"]
    splits = {n: ds.split(n) for n in ds.split_names}
    all_ids = np.concatenate(list(splits.values()))
    assert len(np.unique(all_ids)) == len(all_ids) and all_ids.min() >= 0 and all_ids.max() < 3000
    assert abs(len(splits["train"]) - 0.6 * 3000) <= 3000 * 0.02


def test_sbm_graph_is_undirected_loop_free_and_homophilous(sbm):
    ds = ringgnn.Dataset.open(sbm)
    assert is_symmetric(sbm)
    pairs = edge_pairs(sbm)
    assert not (pairs[:, 0] == pairs[:, 1]).any()
    # Mean in-degree is the requested --avg-degree (statistically: within 15%).
    assert abs(ds.num_edges / ds.num_nodes - 8) < 8 * 0.15
    # Planted partition: most edges stay inside a class (chance would be 1/4).
    same = ds.labels[pairs[:, 0]] == ds.labels[pairs[:, 1]]
    assert same.mean() > 0.5


def test_sbm_is_deterministic_and_dtype_option(cli, sbm, tmp_path):
    again = tmp_path / "again"
    assert cli("generate", "sbm", again, *SBM, "--seed", 3, "-q").code == 0
    assert crcs(again) == crcs(sbm)
    half = tmp_path / "half"
    assert cli("generate", "sbm", half, *SBM, "--seed", 3, "--feature-dtype", "bf16", "-q").code == 0
    ds = ringgnn.Dataset.open(half)
    assert ds.feature_dtype == "bf16" and ds.manifest["features"]["row_bytes"] == 32
    assert crcs(half)["indices"] == crcs(sbm)["indices"]  # same graph, other feature type


def test_sbm_custom_split(cli, tmp_path):
    out = tmp_path / "sbm"
    r = cli("generate", "sbm", out, *SBM, "--split", "train=0.1,test=0.5", "-q")
    assert r.code == 0, r.err
    assert ringgnn.Dataset.open(out).split_names == ["test", "train"]


@pytest.mark.parametrize(
    "flags,code,fragment",
    [
        (["--split", "train=0.9,val=0.9"], 1, "more than 1"),
        (["--split", "train=t.npy"], 1, "fractions"),
        (["--classes", 0], 2, "--classes"),
        (["--nodes", "many"], 2, "--nodes"),
    ],
)
def test_sbm_bad_arguments(cli, tmp_path, flags, code, fragment):
    out = tmp_path / "sbm"
    r = cli("generate", "sbm", out, *SBM, *flags, "-q")
    assert r.code == code and fragment in r.err, r.err
    if code == 1:
        assert r.err.startswith("ringgnn generate sbm: error: ")
    assert_nothing_left(out)
