"""`ringgnn sample`: per-epoch text and JSON reports that agree with the Python API, and clear
errors (exit 1) for bad input."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from ringgnn import NeighborSampler
from _sampling import as_tuple, make_dataset, needs_sampler, path_graph, sbm

JSON_FIELDS = {
    "epoch", "seconds", "batches", "sampled_edges", "seps", "reads", "bytes_read",
    "backend", "threads", "direct", "sampled_nodes", "hyperbatch", "sequential_bytes", "random_bytes",
    "spilled_bytes",
}  # fmt: skip


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return sbm(tmp_path_factory.mktemp("sbm"), nodes=2000)


@needs_sampler
def test_json_per_epoch_matches_python_api(cli, graph):
    r = cli("sample", graph.path, "--fanouts", "5,3", "--batch-size", "100", "--epochs", "2", "--seed", "3",
            "--backend", "pread", "--threads", "2", "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert r.err == ""  # no progress bar with --json
    lines = [json.loads(line) for line in r.out.splitlines()]
    assert [x["epoch"] for x in lines] == [0, 1]
    s = NeighborSampler(graph, [5, 3], seed=3, backend="pread")
    for rec in lines:
        assert JSON_FIELDS <= rec.keys()
        subs = list(s.epoch("train", 100, epoch=rec["epoch"]))
        assert rec["batches"] == len(subs) == -(-len(graph.split("train")) // 100)
        assert rec["sampled_edges"] == sum(x.num_edges for x in subs)
        assert rec["sampled_nodes"] == sum(x.num_nodes for x in subs)
        assert rec["seps"] == pytest.approx(rec["sampled_edges"] / rec["seconds"])
        assert rec["backend"] == "pread" and rec["direct"] is False and rec["threads"] == 2
        assert rec["reads"] > 0 and rec["bytes_read"] > 0


@needs_sampler
def test_hyperbatches_give_the_same_batches_with_fewer_reads(cli, graph):
    # Issue 9's acceptance: `--hyperbatch auto` and `--hyperbatch 1` give the same batches.
    recs = {}
    for h in ("1", "3", "auto"):
        r = cli("sample", graph.path, "--fanouts", "5,3", "--batch-size", "64", "--epochs", "1", "--seed", "3",
                "--backend", "pread", "--hyperbatch", h, "--json")  # fmt: skip
        assert r.code == 0, r.err
        recs[h] = json.loads(r.out.splitlines()[-1])
    one, three, auto = recs["1"], recs["3"], recs["auto"]
    for k in ("batches", "sampled_edges", "sampled_nodes"):
        assert one[k] == three[k] == auto[k], k
    assert one["hyperbatch"] == 1 and one["sequential_bytes"] == one["random_bytes"] == 0
    assert three["hyperbatch"] == pytest.approx(one["batches"] / -(-one["batches"] // 3))
    assert auto["hyperbatch"] > 3
    assert auto["bytes_read"] < three["bytes_read"] < one["bytes_read"]
    assert auto["sequential_bytes"] + auto["random_bytes"] == auto["bytes_read"]
    # And batch by batch, from the Python API.
    ref = list(NeighborSampler(graph, [5, 3], seed=3, backend="pread", hyperbatch=1).epoch("train", 64))
    for h in (2, 7, "auto"):
        got = list(NeighborSampler(graph, [5, 3], seed=3, backend="pread", hyperbatch=h).epoch("train", 64))
        assert [as_tuple(x) for x in got] == [as_tuple(x) for x in ref], h
    r = cli("sample", graph.path, "--hyperbatch", "0")
    assert r.code == 1 and "hyperbatch \"0\" is not valid" in r.err


@needs_sampler
def test_spilled_hyperbatches_give_the_same_batches(cli, graph, tmp_path):
    # Samples spilled to disk as each is finished, and read back in batch order: the same batches
    # as kept ones and as per-batch sampling; the spill file is gone from its directory.
    recs = {}
    for spill in ("off", "on"):
        r = cli("sample", graph.path, "--fanouts", "5,3", "--batch-size", "64", "--seed", "3", "--backend", "pread",
                "--hyperbatch", "4", "--spill", spill, "--spill-dir", str(tmp_path), "--json")  # fmt: skip
        assert r.code == 0, r.err
        recs[spill] = json.loads(r.out.splitlines()[-1])
    for k in ("batches", "sampled_edges", "sampled_nodes", "bytes_read"):
        assert recs["off"][k] == recs["on"][k], k
    assert recs["off"]["spilled_bytes"] == 0
    assert recs["on"]["spilled_bytes"] >= 4096 * recs["on"]["batches"]
    assert list(tmp_path.iterdir()) == []
    r = cli("sample", graph.path, "--fanouts", "5,3", "--batch-size", "64", "--backend", "pread", "--hyperbatch", "4",
            "--spill", "on", "--spill-dir", str(tmp_path))  # fmt: skip
    assert r.code == 0 and "of samples spilled" in r.out, r.out + r.err
    ref = list(NeighborSampler(graph, [5, 3], seed=3, backend="pread", hyperbatch=1).epoch("train", 64))
    got = list(NeighborSampler(graph, [5, 3], seed=3, backend="pread", hyperbatch=3, spill="on",
                               spill_dir=tmp_path).epoch("train", 64))  # fmt: skip
    assert [as_tuple(x) for x in got] == [as_tuple(x) for x in ref]
    # Bad input: an unknown policy, and a directory the spill file cannot be made in.
    r = cli("sample", graph.path, "--spill", "yes")
    assert r.code == 1 and "spill \"yes\" is not valid: use \"auto\", \"on\" or \"off\"" in r.err, r.err
    with pytest.raises(Exception, match="spill") as e:
        NeighborSampler(graph, [5, 3], backend="pread", spill="sometimes").plan()
    assert "\"sometimes\" is not valid" in str(e.value)
    r = cli("sample", graph.path, "--backend", "pread", "--hyperbatch", "4", "--spill", "on",
            "--spill-dir", str(tmp_path / "missing"))  # fmt: skip
    assert r.code == 1 and "missing" in r.err and "spill" in r.err, r.err


@needs_sampler
def test_text_report(cli, graph):
    r = cli("sample", graph.path, "--fanouts", "5,3", "--batch-size", "256", "--backend", "memory")
    assert r.code == 0, r.err
    head, epoch = r.out.splitlines()
    assert head.startswith(f"sampling {graph.path}: {len(graph.split('train')):,} seeds, fanouts 5,3, batch 256")
    assert "backend memory" in head
    assert epoch.startswith("epoch 0: ") and "SEPS" in epoch and "reads 0, 0 B read" in epoch
    assert epoch.endswith("neighbor file in memory (backend memory)")
    assert "epoch 0" in r.err  # the progress bar
    r = cli("sample", graph.path, "--fanouts", "5", "--backend", "pread", "--quiet")
    assert r.err == "" and r.out.splitlines()[-1].endswith(", page cache used (backend pread)")
    assert int(re.search(r"reads ([\d,]+), ", r.out).group(1).replace(",", "")) > 0


@needs_sampler
def test_direct_reports_page_cache_bypass(cli, graph):
    r = cli("sample", graph.path, "--fanouts", "5,3", "--backend", "uring", "--direct", "--json")
    if r.code == 1 and "io_uring is not available" in r.err:
        pytest.skip(r.err.strip())
    assert r.code == 0, r.err
    rec = json.loads(r.out)
    if rec["backend"] == "uring":
        pytest.skip("the filesystem of the test dataset refuses O_DIRECT (tmpfs?)")
    assert rec["backend"] == "uring-direct" and rec["direct"] is True and rec["bytes_read"] > 0
    text = cli("sample", graph.path, "--fanouts", "5,3", "--backend", "uring", "--direct", "--quiet").out
    assert "page cache bypassed (O_DIRECT) (backend uring-direct)" in text


@needs_sampler
def test_seed_choices(cli, graph, tmp_path):
    ids = np.array([1, 2, 3, 1999], dtype=np.int64)
    np.save(tmp_path / "seeds.npy", ids)
    for spec, n in [(str(tmp_path / "seeds.npy"), 4), ("all", 2000), ("val", len(graph.split("val")))]:
        r = cli("sample", graph.path, "--fanouts", "2", "--seeds", spec, "--batch-size", "3", "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["batches"] == -(-n // 3)
    # without a train split the default is all nodes
    ds = path_graph(tmp_path)
    r = cli("sample", ds.path, "--fanouts", "1", "--batch-size", "2", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["batches"] == 3 and json.loads(r.out)["sampled_edges"] == 4


@pytest.mark.parametrize(
    "args,message",
    [
        (["--fanouts", "10,0"], "fanout 0 at hop 1 is not valid"),
        (["--fanouts", "10,x"], "'x' is not an integer"),
        (["--seeds", "nope"], "no split 'nope' (it has: test, train, val)"),
        (["--seeds", "missing.npy"], "missing.npy: No such file or directory"),
        (["--seeds", "BAD"], "not a .npy array"),
        (["--seeds", "2D"], "must be a 1-D array of node ids"),
        (["--seeds", "RANGE"], "seed node 5000 is out of range"),
    ],
)
def test_bad_input(cli, graph, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.npy").write_text("not numpy\n")
    np.save(tmp_path / "2d.npy", np.zeros((2, 2), dtype=np.int64))
    np.save(tmp_path / "range.npy", np.array([1, 5000]))
    names = {"BAD": "bad.npy", "2D": "2d.npy", "RANGE": "range.npy"}
    args = [names.get(a, a) for a in args]
    r = cli("sample", graph.path, *args)
    assert r.code == 1 and r.out == ""
    assert r.err.startswith("ringgnn sample: error: ") and message in r.err, r.err


def test_missing_dataset_and_usage(cli, tmp_path):
    r = cli("sample", tmp_path / "nothing")
    assert r.code == 1 and r.err.startswith("ringgnn sample: error: ")
    ds = make_dataset(tmp_path, "d", [(0, 1)])
    assert cli("sample", ds.path, "--batch-size", "0").code == 2
    assert cli("sample", ds.path, "--backend", "disk").code == 2
