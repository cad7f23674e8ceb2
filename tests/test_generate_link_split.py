"""Link splits of the generators: `ringgnn generate rmat|sbm --link-split val=F,test=F` and
`--edge-time ... --link-split-time val=T1,test=T2 [--link-negatives K]`, through convert's builder
code. Each split of a tiny generated graph is checked exactly against the same graph generated
without a split (the edges and times depend only on the seed): every held-out event is after its
boundary and gone from the graph, the rest stay; `verify` passes; bad input fails cleanly."""

from __future__ import annotations

import numpy as np
import pytest

import ringgnn
from ringgnn.data import build

from conftest import assert_nothing_left
from test_link_split_time import lists, splits

RMAT = ["rmat", "--scale", 6, "--edge-factor", 4]
SBM = ["sbm", "--nodes", 200, "--classes", 3, "--avg-degree", 4, "--feature-dim", 4]


def events(ds):
    """The graph's edge events (src, dst, time), distinct, ordered by (time, src, dst)."""
    return sorted({(s, d, t) for d, lst in enumerate(lists(ds)) for t, s in lst}, key=lambda e: (e[2], e[0], e[1]))


@pytest.mark.parametrize("generator,times", [
    (RMAT, ["--edge-time", "growth"]),
    (RMAT, ["--edge-time", "uniform", "--time-range", "0,100", "--undirected"]),
    (SBM, ["--edge-time", "uniform", "--time-range", "0,100", "--node-time", "uniform"]),
])
def test_split_by_time_holds_out_exactly_the_later_events(tmp_path, cli, generator, times):
    assert cli("generate", *generator, tmp_path / "all", "-q", *times).code == 0
    full = events(ringgnn.Dataset.open(tmp_path / "all"))
    t1, t2 = np.quantile([t for *_, t in full], [0.6, 0.8]).astype(int).tolist()
    r = cli("generate", *generator, tmp_path / "ds", "-q", *times, "--link-split-time", f"val={t1},test={t2}",
            "--link-negatives", 3)
    assert r.code == 0, r.err
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    # A self loop is no pair: it stays in the graph. An undirected event is stored once, as (min, max).
    undirected = generator is SBM or "--undirected" in times
    pairs = sorted({(min(s, d), max(s, d), t) if undirected else (s, d, t) for s, d, t in full if s != d},
                   key=lambda e: (e[2], e[0], e[1]))
    assert splits(ds) == {"train": [e for e in pairs if e[2] <= t1],
                          "val": [e for e in pairs if t1 < e[2] <= t2],
                          "test": [e for e in pairs if e[2] > t2]}
    assert min(len(v) for v in splits(ds).values()) > 0
    assert events(ds) == [e for e in full if e[2] <= t1 or e[0] == e[1]]
    m = ds.manifest
    assert m["source"]["link_split"] == {"times": {"val": t1, "test": t2}, "negatives": 3}
    assert {k: (v["negatives"], v["times"]) for k, v in m["edge_splits"].items()} == {
        "train": (0, True), "val": (3, True), "test": (3, True)}
    assert cli("verify", tmp_path / "ds", "-q").code == 0


def test_split_by_time_draws_negatives_among_nodes_not_newer(tmp_path):
    build.generate_sbm(tmp_path / "ds", nodes=200, classes=3, avg_degree=4, feature_dim=4, edge_time="uniform",
                       node_time="uniform", time_range=(0, 100), link_split_time={"val": 50}, link_negatives=4)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    node_time = np.asarray(ds.node_times())
    negatives, times = np.asarray(ds.edge_negatives("val")), np.asarray(ds.edge_split_times("val"))
    assert negatives.shape == (ds.manifest["edge_splits"]["val"]["edges"], 4)
    assert (node_time[negatives] <= times[:, None]).all()


@pytest.mark.parametrize("generator", [RMAT, SBM])
def test_split_by_fraction_as_convert(tmp_path, cli, generator):
    assert cli("generate", *generator, tmp_path / "all", "-q").code == 0
    full = ringgnn.Dataset.open(tmp_path / "all")
    r = cli("generate", *generator, tmp_path / "ds", "-q", "--link-split", "val=0.2,test=0.1", "--link-negatives", 2)
    assert r.code == 0, r.err
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    held = {(int(s), int(d)) for name in ("val", "test") for s, d in np.asarray(ds.edge_split(name)).T}
    kept = {(s, d) for d, lst in enumerate(lists_of(ds)) for s in lst}
    every = {(s, d) for d, lst in enumerate(lists_of(full)) for s in lst}
    undirected = generator is SBM
    gone = held | ({(d, s) for s, d in held} if undirected else set())
    assert held and kept == every - gone and gone <= every
    assert ds.manifest["source"]["link_split"] == {"fractions": {"val": 0.2, "test": 0.1}, "negatives": 2}
    assert cli("verify", tmp_path / "ds", "-q").code == 0


def lists_of(ds):
    """Per node, its in-neighbors in stored order (a graph without times)."""
    return [np.asarray(ds.neighbors(v)).tolist() for v in range(ds.num_nodes)]


@pytest.mark.parametrize("generator,flags,message", [
    (RMAT, ["--link-split-time", "val=5,test=7"],
     "--link-split-time needs edge times: give --edge-time uniform or --edge-time growth"),
    (SBM, ["--link-split-time", "val=5"], "--link-split-time needs edge times"),
    (RMAT, ["--edge-time", "growth", "--link-split-time", "val=7,test=5"],
     "--link-split-time val=7,test=5: the times must not decrease"),
    (SBM, ["--edge-time", "growth", "--link-split-time", "Val=5"],
     "--link-split-time: split name 'Val' is not allowed"),
    (RMAT, ["--edge-time", "growth", "--link-split-time", "val=x"],
     "--link-split-time val=x: a split time must be an integer"),
    (RMAT, ["--edge-time", "growth", "--link-split-time", "val=5", "--link-split", "val=0.1"],
     "--link-split and --link-split-time cannot be combined"),
    (SBM, ["--edge-time", "growth", "--link-split", "val=0.1"], "--link-split and --edge-time cannot be combined"),
    (SBM, ["--link-split", "val=v.npy"], "generated datasets take fractions, e.g. val=0.05,test=0.1"),
    (RMAT, ["--link-split", "val=0.1", "--link-negatives", 64], "--link-negatives 64 is not below the number of nodes"),
])
def test_bad_input_fails_cleanly(tmp_path, cli, generator, flags, message):
    out = tmp_path / "ds"
    r = cli("generate", *generator, out, "-q", "--link-negatives", 3, *flags)
    assert r.code == 1, (r.out, r.err)
    assert r.err.startswith(f"ringgnn generate {generator[0]}: error: ") and "Traceback" not in r.err, r.err
    assert message in r.err, r.err
    assert_nothing_left(out)
