"""Link splits by time (docs/FORMAT.md, "Edge splits by time"): `convert --edge-time T.npy
--link-split-time val=T1,test=T2`, `ringgnn.convert(link_split_time=...)` and a typed build's
`Relation(link_split_time=...)`. Exact splits of a tiny event graph worked out by hand (which
events land where, their order and times, the graph without the held-out events, undirected),
negatives drawn at the pair's time, the same files whatever `--memory` and `--threads`, `verify`,
and every bad input failing cleanly (exit 1, the option named, nothing left behind)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn.data import build

from conftest import assert_nothing_left, crc32c

# (src, dst, time) events of 5 nodes; with val=5,test=7: train t <= 5, val 5 < t <= 7, test t > 7.
EVENTS = [(0, 1, 1), (1, 2, 2), (2, 3, 5), (0, 1, 6), (3, 0, 7), (1, 1, 8), (2, 0, 9), (0, 2, 9),
          (4, 0, 3), (0, 1, 6)]


def events_npy(tmp_path: Path, events=EVENTS):
    e = np.array([(s, d) for s, d, _ in events], dtype=np.int64)
    t = np.array([t for *_, t in events], dtype=np.int64)
    np.save(tmp_path / "e.npy", e)
    np.save(tmp_path / "t.npy", t)
    return tmp_path / "e.npy", tmp_path / "t.npy"


def splits(ds):
    """Per split: [(src, dst, time)] in stored order."""
    out = {}
    for name in ds.edge_split_names:
        pairs, times = ds.edge_split(name), ds.edge_split_times(name)
        out[name] = [(int(s), int(d), int(t)) for (s, d), t in zip(pairs.T, times)]
    return out


def lists(ds):
    """Per node, its in-edges as (time, source) in stored order."""
    m = ds.manifest
    files = {k: Path(ds.path) / f["path"] for k, f in m["files"].items()}
    indptr = np.fromfile(files["indptr"], dtype="<u8")[: m["num_nodes"] + 1]
    indices = np.fromfile(files["indices"], dtype="<u4")[: m["num_edges"]]
    times = np.fromfile(files["edge_times"], dtype="<i8")[: m["num_edges"]]
    return [[(int(times[i]), int(indices[i])) for i in range(a, b)] for a, b in zip(indptr[:-1], indptr[1:])]


def test_events_split_by_time_worked_by_hand(tmp_path, cli):
    e, t = events_npy(tmp_path)
    r = cli("convert", e, tmp_path / "ds", "-q", "--edge-time", t, "--link-split-time", "val=5,test=7",
            "--link-negatives", "0")
    assert r.code == 0, r.err
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    # By (time, src, dst); the repeated event (0, 1, 6) once; the self loop (1, 1, 8) in no split.
    assert splits(ds) == {
        "train": [(0, 1, 1), (1, 2, 2), (4, 0, 3), (2, 3, 5)],
        "val": [(0, 1, 6), (3, 0, 7)],
        "test": [(0, 2, 9), (2, 0, 9)],
    }
    # The graph: the train events and the self loop, which stays at its time 8.
    assert lists(ds) == [[(3, 4)], [(1, 0), (8, 1)], [(2, 1)], [(5, 2)], []]
    m = ds.manifest
    assert (m["version"], m["num_edges"], m["edge_times"]) == (3, 5, {"min": 1, "max": 8})
    assert m["edge_splits"] == {"train": {"edges": 4, "negatives": 0, "times": True},
                                "val": {"edges": 2, "negatives": 0, "times": True},
                                "test": {"edges": 2, "negatives": 0, "times": True}}
    assert m["source"]["link_split"] == {"times": {"val": 5, "test": 7}, "negatives": 0}
    assert {k for k in m["files"] if k.startswith("edge_split_times.")} == {
        "edge_split_times.train", "edge_split_times.val", "edge_split_times.test"}
    assert m["files"]["edge_split_times.val"]["path"] == "edge_split_times_val.bin"
    times = ds.edge_split_times("val")
    assert isinstance(times, np.memmap) and times.dtype == np.int64 and times.tolist() == [6, 7]
    assert cli("verify", tmp_path / "ds", "-q").code == 0


def test_undirected_events_leave_in_both_directions(tmp_path):
    e, t = events_npy(tmp_path)
    build.convert(e, tmp_path / "ds", edge_time=t, link_split_time="val=5,test=7", undirected=True,
                  link_negatives=0)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    # Each event once as (min, max); (2, 0, 9) and (0, 2, 9) are one undirected event.
    assert splits(ds) == {
        "train": [(0, 1, 1), (1, 2, 2), (0, 4, 3), (2, 3, 5)],
        "val": [(0, 1, 6), (0, 3, 7)],
        "test": [(0, 2, 9)],
    }
    assert lists(ds) == [[(1, 1), (3, 4)], [(1, 0), (2, 2), (8, 1)], [(2, 1), (5, 3)], [(5, 2)], [(3, 0)]]
    assert build.verify(tmp_path / "ds")["files_checked"] > 0


def test_without_test_and_with_equal_times(tmp_path):
    e, t = events_npy(tmp_path)
    build.convert(e, tmp_path / "a", edge_time=t, link_split_time={"val": 6}, link_negatives=0)
    a = splits(ringgnn.Dataset.open(tmp_path / "a"))
    assert set(a) == {"train", "val"}
    assert a["val"] == [(3, 0, 7), (0, 2, 9), (2, 0, 9)]
    assert a["train"][-1] == (0, 1, 6)
    # val=7,test=7: val holds nothing, every event after 7 is test.
    build.convert(e, tmp_path / "b", edge_time=t, link_split_time="val=7,test=7", link_negatives=0)
    b = splits(ringgnn.Dataset.open(tmp_path / "b"))
    assert b["val"] == [] and b["test"] == [(0, 2, 9), (2, 0, 9)]
    assert ringgnn.Dataset.open(tmp_path / "b").edge_split_times("val").shape == (0,)
    assert build.verify(tmp_path / "b")["files_checked"] > 0


def test_splits_after_the_last_event_are_empty(tmp_path):
    """The events are sorted once for every split and cut by time: splits that no event reaches
    still get their (empty) files."""
    e, t = events_npy(tmp_path)
    build.convert(e, tmp_path / "a", edge_time=t, link_split_time="val=7,test=9", link_negatives=0)
    a = splits(ringgnn.Dataset.open(tmp_path / "a"))
    assert a["val"] == [(0, 2, 9), (2, 0, 9)] and a["test"] == [] and len(a["train"]) == 6
    build.convert(e, tmp_path / "b", edge_time=t, link_split_time="val=9,test=12", link_negatives=0)
    b = splits(ringgnn.Dataset.open(tmp_path / "b"))
    assert b["val"] == b["test"] == [] and len(b["train"]) == 8
    for out in ("a", "b"):
        assert build.verify(tmp_path / out)["files_checked"] > 0


def test_negatives_are_drawn_at_the_pairs_time(tmp_path):
    e, t = events_npy(tmp_path)
    np.save(tmp_path / "n.npy", np.array([0, 0, 6, 7, 9], dtype=np.int64))
    build.convert(e, tmp_path / "ds", edge_time=t, node_time=tmp_path / "n.npy", link_split_time="val=5,test=7",
                  link_negatives=2, seed=3)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    val = ds.edge_negatives("val")
    # (0, 1) at 6: nodes of time <= 6 are 0, 1, 2; besides the destination 1 exactly 0 and 2.
    assert sorted(val[0].tolist()) == [0, 2]
    # (3, 0) at 7: two of 1, 2, 3 (4 is newer).
    assert set(val[1].tolist()) <= {1, 2, 3} and len(set(val[1].tolist())) == 2
    assert ds.edge_negatives("test").shape == (2, 2)
    assert build.verify(tmp_path / "ds")["files_checked"] > 0
    # Three negatives for (0, 1) at 6 are more than the two nodes there are: refused, naming the pair.
    with pytest.raises(ringgnn.InputError, match=r"pair 0 \(0, 1\) of edge split val, at time 6, has only 2 nodes"):
        build.convert(e, tmp_path / "ds3", edge_time=t, node_time=tmp_path / "n.npy",
                      link_split_time="val=5,test=7", link_negatives=3)
    assert_nothing_left(tmp_path / "ds3")


def random_events(rng, n=300, m=6000):
    s = rng.integers(0, n, m)
    d = rng.integers(0, n, m)
    t = rng.integers(0, 1000, m)
    return s, d, t


def test_negatives_property_and_the_same_files_whatever_memory_and_threads(tmp_path):
    rng = np.random.default_rng(7)
    s, d, t = random_events(rng)
    np.save(tmp_path / "e.npy", np.stack([s, d]))
    np.save(tmp_path / "t.npy", t)
    node_t = rng.integers(0, 700, 300)
    np.save(tmp_path / "n.npy", node_t)
    builds = []
    for i, (memory, threads) in enumerate([("128M", 1), ("1G", 2), ("300M", 3)]):
        out = tmp_path / f"ds{i}"
        build.convert(tmp_path / "e.npy", out, edge_time=tmp_path / "t.npy", node_time=tmp_path / "n.npy",
                      link_split_time="val=700,test=850", link_negatives=5, seed=11, memory=memory,
                      threads=threads)
        builds.append(out)
    manifests = [json.loads((b / "manifest.json").read_text()) for b in builds]
    for m, b in zip(manifests[1:], builds[1:]):
        assert m["files"] == manifests[0]["files"]
        for f in m["files"].values():
            assert (b / f["path"]).read_bytes() == (builds[0] / f["path"]).read_bytes()
    ds = ringgnn.Dataset.open(builds[0])
    # The splits are the events, by a reference computed here.
    want = {"train": set(), "val": set(), "test": set()}
    for a, b, x in zip(s.tolist(), d.tolist(), t.tolist()):
        if a != b:
            want["test" if x > 850 else "val" if x > 700 else "train"].add((a, b, x))
    got = splits(ds)
    for name in want:
        assert got[name] == sorted(want[name], key=lambda e: (e[2], e[0], e[1]))
    # Every negative is not newer than its pair, distinct in its row and not the destination.
    for name in ("val", "test"):
        pairs, times, neg = ds.edge_split(name), ds.edge_split_times(name), ds.edge_negatives(name)
        assert neg.shape == (len(times), 5)
        assert (node_t[neg] <= times[:, None]).all()
        assert (neg != pairs[1][:, None]).all()
        assert all(len(set(row)) == 5 for row in neg.tolist())
    assert build.verify(builds[0])["files_checked"] > 0


def test_typed_relation_split_by_time(tmp_path):
    from ringgnn.data.build import NodeType, Relation, build_hetero

    # user:buys:item events; the reverse item:rev_buys:user drops the held-out ones too.
    np.save(tmp_path / "buys.npy", np.array([[0, 0], [1, 0], [1, 2], [2, 1], [0, 2]], dtype=np.int64))
    np.save(tmp_path / "et.npy", np.array([7, 2, 5, 9, 1], dtype=np.int64))
    np.save(tmp_path / "it.npy", np.array([0, 3, 0], dtype=np.int64))
    rel = Relation("user:buys:item", tmp_path / "buys.npy", edge_time=tmp_path / "et.npy",
                   link_split_time="val=4,test=8", link_negatives=1)
    build_hetero(tmp_path / "h", [NodeType("user", 3), NodeType("item", 3, node_time=tmp_path / "it.npy")], [rel],
                 add_reverse=True, seed=2)
    h = ringgnn.Dataset.open(tmp_path / "h")
    r = h.relation("user:buys:item")
    assert splits(r) == {"train": [(0, 2, 1), (1, 0, 2)], "val": [(1, 2, 5), (0, 0, 7)], "test": [(2, 1, 9)]}
    # Items' times 0, 3, 0 are all <= 5: (1, 2) at 5 draws from items 0, 1; (0, 0) at 7 from 1, 2;
    # (2, 1) at 9 from 0, 2.
    assert r.edge_negatives("val").tolist() in ([[0], [1]], [[0], [2]], [[1], [1]], [[1], [2]])
    assert r.edge_negatives("test")[0, 0] in (0, 2)
    assert h.manifest["relations"]["user:buys:item"]["num_edges"] == 2
    assert h.manifest["relations"]["item:rev_buys:user"]["num_edges"] == 2
    assert "relation.user:buys:item.edge_split_times.val" in h.manifest["files"]
    assert h.manifest["source"] == {"link_split": {"user:buys:item": {"times": {"val": 4, "test": 8}, "negatives": 1}}}
    assert build.verify(tmp_path / "h")["files_checked"] > 0
    # The reverse's lists: user 0 from item 2 at 1, user 1 from item 0 at 2; a later time there is
    # a held-out event left in the graph.
    rewrite(tmp_path / "h", "relation.item:rev_buys:user.edge_times", [1, 6])
    with pytest.raises(ringgnn.CorruptDatasetError, match=r"entry 1, the edge \(0, 1\) at time 6, is after the time 4"):
        build.verify(tmp_path / "h")


def test_a_split_without_times_has_none(tmp_path):
    e, _ = events_npy(tmp_path)
    build.convert(e, tmp_path / "ds", link_split="val=0.3", link_negatives=0)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert ds.edge_split_times("val") is None and ds.edge_split_times("train") is None
    with pytest.raises(ringgnn.InputError, match="no edge split 'test'"):
        ds.edge_split_times("test")


@pytest.mark.parametrize("flags,message", [
    (["--link-split-time", "val=5,test=7"], "--link-split-time needs edge times: give --edge-time T.npy"),
    (["--edge-time", "T", "--link-split-time", "val=7,test=5"],
     "--link-split-time val=7,test=5: the times must not decrease"),
    (["--edge-time", "T", "--link-split-time", "val=5", "--link-split", "val=0.1"],
     "--link-split and --link-split-time cannot be combined"),
    (["--edge-time", "T", "--link-split-time", "val"], "--link-split-time 'val': 'val' is not NAME=TIME"),
    (["--edge-time", "T", "--link-split-time", "val=abc"], "--link-split-time val=abc: a split time must be an integer"),
    (["--edge-time", "T", "--link-split-time", "val=1.5"], "--link-split-time val=1.5: a split time must be an integer"),
    (["--edge-time", "T", "--link-split-time", "train=3"], "--link-split-time train=3: the training edges are"),
    (["--edge-time", "T", "--link-split-time", "val=3,val=4"], "--link-split-time names 'val' twice"),
    (["--edge-time", "T", "--link-split-time", "Val=3"], "--link-split-time: split name 'Val' is not allowed"),
    (["--edge-time", "T", "--link-split-time", ","], "--link-split-time ',' names no split"),
    (["--edge-time", "T", "--link-split", "val=0.1"], "--link-split and --edge-time cannot be combined"),
])
def test_bad_input_fails_cleanly(tmp_path, cli, flags, message):
    e, t = events_npy(tmp_path)
    out = tmp_path / "ds"
    r = cli("convert", e, out, "-q", *[str(t) if f == "T" else f for f in flags])
    assert r.code == 1, (r.out, r.err)
    assert r.err.startswith("ringgnn convert: error: ") and "Traceback" not in r.err, r.err
    assert message in r.err, r.err
    assert_nothing_left(out)


def test_typed_bad_input_names_the_relation(tmp_path):
    from ringgnn.data.build import NodeType, Relation, build_hetero

    np.save(tmp_path / "buys.npy", np.array([[0, 0], [1, 0]], dtype=np.int64))
    rel = Relation("user:buys:item", tmp_path / "buys.npy", link_split_time="val=4", link_split="val=0.5")
    with pytest.raises(ringgnn.InputError, match="relation user:buys:item: --link-split and --link-split-time"):
        build_hetero(tmp_path / "h", [NodeType("user", 2), NodeType("item", 1)], [rel])
    rel = Relation("user:buys:item", tmp_path / "buys.npy", link_split_time="val=4", link_negatives=0)
    with pytest.raises(ringgnn.InputError, match="relation user:buys:item: --link-split-time needs edge times"):
        build_hetero(tmp_path / "h", [NodeType("user", 2), NodeType("item", 1)], [rel])
    assert_nothing_left(tmp_path / "h")


def rewrite(out: Path, key: str, values, dtype="<i8"):
    """Overwrite the payload of file `key` with `values` and fix its checksum, so that verify
    reaches the structural check."""
    m = json.loads((out / "manifest.json").read_text())
    f = m["files"][key]
    b = bytearray((out / f["path"]).read_bytes())
    data = np.asarray(values, dtype=dtype).tobytes()
    b[: len(data)] = data
    (out / f["path"]).write_bytes(bytes(b))
    f["crc32c"] = f"{crc32c(bytes(b)):08x}"
    (out / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")


@pytest.mark.parametrize("key,values,message", [
    ("edge_split_times.val", [7, 6], "pair 1 (3, 0) at time 6 comes after (0, 1) at time 7, but pairs are ordered"),
    ("edge_split_times.val", [5, 7], "pair 0 (0, 1) has time 5, but this split holds the edges after 5"),
    ("edge_split_times.train", [1, 2, 3, 6], "pair 3 (2, 3) has time 6, but this split holds the edges up to 5"),
    ("edge_split_times.test", [7, 9], "pair 0 (0, 2) has time 7, but this split holds the edges after 7"),
    ("edge_times", [6], "entry 0, the edge (4, 0) at time 6, is after the time 5 of edge split val: a held-out edge"),
])
def test_verify_catches_a_corrupted_split_time_file(tmp_path, cli, key, values, message):
    e, t = events_npy(tmp_path)
    out = tmp_path / "ds"
    build.convert(e, out, edge_time=t, link_split_time="val=5,test=7", link_negatives=0)
    rewrite(out, key, values)
    r = cli("verify", out, "-q")
    assert r.code == 1 and message in r.err, r.err
