"""Edge and node times in the format (docs/FORMAT.md, Times): `convert --edge-time/--node-time`
on every edge-list input, `generate rmat|sbm --edge-time/--node-time`, `verify` and `info`;
exact lists on tiny graphs, and every bad input failing cleanly (exit 1, the file named, nothing
left behind).

`tests/fixtures/v3-times-tiny` (format version 3: edge and node times) was built on 2026-11-29
with:
    printf '2 1\n7 1\n0 1\n1 1\n3 0\n' > edges.txt
    ringgnn.data.build.convert('edges.txt', 'v3-times-tiny', edge_time='t.npy', node_time='n.npy')
with t = [5, 3, 3, 9, -4] and n = arange(10, 18) (int64). Never regenerate it: a new format
version gets a new fixture beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ringgnn

from conftest import assert_nothing_left, crc32c, write_bin, write_npy, write_text

# 4 edges into node 1 at times 5, 3, 3, 9 from sources 2, 7, 0, 1; one into node 0 at -4.
EDGES = [(2, 1), (7, 1), (0, 1), (1, 1), (3, 0)]
TIMES = [5, 3, 3, 9, -4]


def read(out: Path):
    """The manifest and, per node, its in-edges as (time, source) in stored order."""
    m = json.loads((out / "manifest.json").read_text())
    files = {k: out / f["path"] for k, f in m["files"].items()}
    indptr = np.fromfile(files["indptr"], dtype="<u8")[: m["num_nodes"] + 1]
    indices = np.fromfile(files["indices"], dtype="<u4")[: m["num_edges"]]
    times = np.fromfile(files["edge_times"], dtype="<i8")[: m["num_edges"]] if "edge_times" in files else None
    lists = [[(int(times[i]) if times is not None else None, int(indices[i])) for i in range(a, b)]
             for a, b in zip(indptr[:-1], indptr[1:])]
    return m, lists


def reference(edges, times, undirected=False, drop=False, dedup=False):
    n = max(max(e) for e in edges) + 1
    lists = [[] for _ in range(n)]
    for (s, d), t in zip(edges, times):
        if s == d and drop:
            continue
        lists[d].append((t, s))
        if undirected and s != d:
            lists[s].append((t, d))
    return [sorted(set(x)) if dedup else sorted(x) for x in lists]


def test_the_v3_fixture_reads_and_verifies(cli):
    out = Path(__file__).parent / "fixtures" / "v3-times-tiny"
    m, lists = read(out)
    assert (m["version"], m["num_nodes"], m["num_edges"]) == (3, 8, 5)
    assert lists[1] == [(3, 0), (3, 7), (5, 2), (9, 1)] and lists[0] == [(-4, 3)]
    assert np.fromfile(out / "node_times.bin", dtype="<i8")[:8].tolist() == list(range(10, 18))
    assert cli("verify", out, "-q").code == 0


@pytest.fixture
def times_npy(tmp_path):
    p = tmp_path / "t.npy"
    np.save(p, np.array(TIMES, dtype=np.int64))
    return p


@pytest.mark.parametrize("fmt", ["text", "npy", "bin32"])
def test_every_edge_list_input_takes_edge_times(cli, tmp_path, times_npy, fmt):
    src = {"text": lambda p: write_text(p / "e.tsv", EDGES), "npy": lambda p: write_npy(p / "e.npy", EDGES),
           "bin32": lambda p: write_bin(p / "e.bin32", EDGES, 32)}[fmt](tmp_path)
    out = tmp_path / "ds"
    r = cli("convert", src, out, "--edge-time", times_npy)
    assert r.code == 0, r.err
    assert "(edge times -4 to 9)" in r.out
    m, lists = read(out)
    assert m["version"] == 3 and m["edge_times"] == {"min": -4, "max": 9} and "node_times" not in m
    assert lists[1] == [(3, 0), (3, 7), (5, 2), (9, 1)]
    assert lists[0] == [(-4, 3)]
    assert m["source"]["edge_time"] == "t.npy"
    assert cli("verify", out, "-q").code == 0


def test_options_with_times_and_int32_times(cli, tmp_path):
    edges = [(0, 1), (0, 1), (1, 0), (2, 2), (3, 1)]
    times = [4, 4, 2, 7, 1]
    np.save(tmp_path / "t.npy", np.array(times, dtype=np.int32))
    src = write_text(tmp_path / "e.tsv", edges)
    out = tmp_path / "ds"
    r = cli("convert", src, out, "-q", "--edge-time", tmp_path / "t.npy", "--undirected", "--dedup",
            "--self-loops", "drop")
    assert r.code == 0, r.err
    _, lists = read(out)
    assert lists == reference(edges, times, undirected=True, drop=True, dedup=True)
    assert lists[1] == [(1, 3), (2, 0), (4, 0)]


def test_node_times(cli, tmp_path, times_npy):
    np.save(tmp_path / "n.npy", np.arange(10, 18, dtype=np.int64))
    out = tmp_path / "ds"
    src = write_text(tmp_path / "e.tsv", EDGES)
    r = cli("convert", src, out, "--edge-time", times_npy, "--node-time", tmp_path / "n.npy")
    assert r.code == 0, r.err
    assert "(edge times -4 to 9, node times 10 to 17)" in r.out
    m, _ = read(out)
    assert m["node_times"] == {"min": 10, "max": 17}
    assert np.fromfile(out / "node_times.bin", dtype="<i8")[:8].tolist() == list(range(10, 18))
    info = json.loads(cli("info", out, "--json").out)
    assert info["edge_times"] == {"min": -4, "max": 9} and info["node_times"] == {"min": 10, "max": 17}
    assert "times     edges -4 to 9; nodes 10 to 17" in cli("info", out).out
    # Node times alone: lists stay sorted by source, the dataset is version 3 all the same.
    r = cli("convert", src, tmp_path / "n_only", "-q", "--node-time", tmp_path / "n.npy")
    m, lists = read(tmp_path / "n_only")
    assert r.code == 0 and m["version"] == 3 and "edge_times" not in m
    assert [s for _, s in lists[1]] == [0, 1, 2, 7]


def test_without_times_nothing_changes(cli, tmp_path):
    src = write_text(tmp_path / "e.tsv", EDGES)
    assert cli("convert", src, tmp_path / "ds", "-q").code == 0
    m, _ = read(tmp_path / "ds")
    assert m["version"] == 2
    assert not {"edge_times", "node_times", "edge_time", "node_time"} & (set(m) | set(m["source"]))
    assert "\ntimes " not in cli("info", tmp_path / "ds").out


def convert_fails(cli, tmp_path, *flags, message=()):
    out = tmp_path / "ds"
    r = cli("convert", write_text(tmp_path / "e.tsv", EDGES), out, "--quiet", *flags)
    assert r.code == 1, (r.out, r.err)
    assert r.err.startswith("ringgnn convert: error: ") and "Traceback" not in r.err, r.err
    for fragment in [message] if isinstance(message, str) else message:
        assert fragment in r.err, f"{fragment!r} not in {r.err!r}"
    assert_nothing_left(out)


@pytest.mark.parametrize("n,edges_said", [(4, "has 4 times but the input has 5 edges"),
                                         (6, "has 6 times but the input has 5 edges")])
def test_edge_times_of_the_wrong_length(cli, tmp_path, n, edges_said):
    np.save(tmp_path / "t.npy", np.zeros(n, dtype=np.int64))
    convert_fails(cli, tmp_path, "--edge-time", tmp_path / "t.npy", message=["--edge-time", "t.npy", edges_said])


def test_edge_times_of_the_wrong_dtype_shape_or_missing(cli, tmp_path):
    np.save(tmp_path / "f.npy", np.zeros(5, dtype=np.float64))
    convert_fails(cli, tmp_path, "--edge-time", tmp_path / "f.npy",
                  message=["f.npy", "--edge-time must have dtype int64 or int32, found float64"])
    np.save(tmp_path / "u.npy", np.zeros(5, dtype=np.uint64))
    convert_fails(cli, tmp_path, "--edge-time", tmp_path / "u.npy", message=["u.npy", "found uint64"])
    np.save(tmp_path / "2d.npy", np.zeros((5, 1), dtype=np.int64))
    convert_fails(cli, tmp_path, "--edge-time", tmp_path / "2d.npy",
                  message=["2d.npy", "must be a 1-D array with one time per input edge, found shape [5, 1]"])
    convert_fails(cli, tmp_path, "--edge-time", tmp_path / "missing.npy",
                  message=["missing.npy", "--edge-time file not found"])


def test_node_times_of_the_wrong_length_or_dtype(cli, tmp_path):
    np.save(tmp_path / "n.npy", np.zeros(7, dtype=np.int64))
    convert_fails(cli, tmp_path, "--node-time", tmp_path / "n.npy",
                  message=["--node-time", "n.npy", "has 7 times but the graph has 8 nodes"])
    np.save(tmp_path / "f.npy", np.zeros(8, dtype=np.float32))
    convert_fails(cli, tmp_path, "--node-time", tmp_path / "f.npy", message=["f.npy", "found float32"])


def test_link_splits_with_edge_times_are_refused(cli, tmp_path, times_npy):
    convert_fails(cli, tmp_path, "--edge-time", times_npy, "--link-split", "val=0.2",
                  message="--link-split and --edge-time cannot be combined: a graph with edge times is split by time "
                  "(--link-split-time val=T1,test=T2)")


def test_times_are_refused_for_importer_inputs(cli, tmp_path, times_npy):
    r = cli("convert", tmp_path / "e.parquet", tmp_path / "ds", "-q", "--edge-time", times_npy)
    assert r.code == 1 and "--edge-time apply to an edge-list INPUT" in r.err and "table" in r.err, r.err
    assert_nothing_left(tmp_path / "ds")


def test_verify_finds_times_out_of_order(cli, tmp_path, times_npy):
    out = tmp_path / "ds"
    assert cli("convert", write_text(tmp_path / "e.tsv", EDGES), out, "-q", "--edge-time", times_npy).code == 0
    b = bytearray((out / "edge_times.bin").read_bytes())
    b[3 * 8:4 * 8] = np.int64(3).tobytes()  # node 1's (5, 2) becomes (3, 2): before (3, 7)
    (out / "edge_times.bin").write_bytes(bytes(b))
    r = cli("verify", out, "-q")
    assert r.code == 1 and "edge_times.bin" in r.err and "checksum" in r.err, r.err
    # With the checksum recorded again, the order itself is wrong.
    m = json.loads((out / "manifest.json").read_text())
    m["files"]["edge_times"]["crc32c"] = f"{crc32c(bytes(b)):08x}"
    (out / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    r = cli("verify", out, "-q")
    assert r.code == 1 and "edge_times.bin" in r.err and "must be ordered by time, then source" in r.err, r.err


def test_typed_builds_take_times_per_relation_and_type(cli, tmp_path):
    from ringgnn.data.build import NodeType, Relation, build_hetero, convert_one_type, read_manifest

    write_text(tmp_path / "buys.csv", [(0, 0), (1, 0), (1, 2)], sep=",")
    np.save(tmp_path / "et.npy", np.array([7, 2, 5], dtype=np.int64))
    np.save(tmp_path / "nt.npy", np.array([4, -1, 6], dtype=np.int32))
    rel = Relation("user:buys:item", tmp_path / "buys.csv", edge_time=tmp_path / "et.npy")
    types = [NodeType("user", 2), NodeType("item", 3, node_time=tmp_path / "nt.npy")]
    m = build_hetero(tmp_path / "h", types, [rel], add_reverse=True)
    assert m["version"] == 3
    assert m["relations"]["user:buys:item"]["edge_times"] == {"min": 2, "max": 7}
    assert m["relations"]["item:rev_buys:user"]["edge_times"] == {"min": 2, "max": 7}
    assert m["node_types"]["item"]["node_times"] == {"min": -1, "max": 6} and "node_times" not in m["node_types"]["user"]
    assert cli("verify", tmp_path / "h", "-q").code == 0
    # The one-type case is convert's dataset.
    one = Relation("item:sim:item", tmp_path / "buys.csv", edge_time=tmp_path / "et.npy")
    convert_one_type(tmp_path / "one", NodeType("item", 3, node_time=tmp_path / "nt.npy"), one)
    m, lists = read(tmp_path / "one")
    assert m["node_times"] == {"min": -1, "max": 6} and lists[0] == [(2, 1), (7, 0)]
    assert read_manifest(tmp_path / "one")["version"] == 3
    # A wrong length names the relation.
    np.save(tmp_path / "short.npy", np.array([1], dtype=np.int64))
    with pytest.raises(ringgnn.InputError, match="relation user:buys:item: --edge-time .*short.npy has 1 times"):
        build_hetero(tmp_path / "bad", types, [Relation("user:buys:item", tmp_path / "buys.csv",
                                                        edge_time=tmp_path / "short.npy")])
    assert_nothing_left(tmp_path / "bad")


# --- generators ----------------------------------------------------------------------------------


def test_generate_rmat_with_times_is_deterministic(cli, tmp_path):
    args = ["--scale", "8", "--seed", "3", "-q"]
    for name in ("a", "b"):
        assert cli("generate", "rmat", tmp_path / name, *args, "--edge-time", "uniform", "--time-range=-50,50",
                   "--node-time", "growth").code == 0
    a, b = (tmp_path / "a", tmp_path / "b")
    for f in ("indptr.bin", "indices.bin", "edge_times.bin", "node_times.bin"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    m, lists = read(a)
    assert m["version"] == 3 and -50 <= m["edge_times"]["min"] <= m["edge_times"]["max"] < 50
    assert m["node_times"] == {"min": 0, "max": 255}
    assert m["source"]["edge_time"] == {"uniform": [-50, 50]} and m["source"]["node_time"] == "growth"
    assert all(lst == sorted(lst) for lst in lists)
    assert cli("verify", a, "-q").code == 0
    # Growth: the edge's index in generation order, so E distinct times 0..E-1.
    assert cli("generate", "rmat", tmp_path / "g", *args, "--edge-time", "growth").code == 0
    m, lists = read(tmp_path / "g")
    assert sorted(t for lst in lists for t, _ in lst) == list(range(m["num_edges"]))
    # The same graph as without times, lists reordered.
    assert cli("generate", "rmat", tmp_path / "plain", *args).code == 0
    _, plain = read(tmp_path / "plain")
    assert [sorted(s for _, s in lst) for lst in lists] == [[s for _, s in lst] for lst in plain]


def test_generate_sbm_with_times(cli, tmp_path):
    out = tmp_path / "s"
    r = cli("generate", "sbm", out, "--nodes", 300, "--classes", 3, "--avg-degree", 4, "--feature-dim", 2,
            "--edge-time", "uniform", "--time-range", "0,10")
    assert r.code == 0, r.err
    m, lists = read(out)
    assert 0 <= m["edge_times"]["min"] and m["edge_times"]["max"] < 10
    # An undirected edge's two directions share its time.
    both = {(s, d, t) for d, lst in enumerate(lists) for t, s in lst}
    assert all((d, s, t) in both for s, d, t in both)
    assert cli("verify", out, "-q").code == 0


@pytest.mark.parametrize("flags,message", [
    (["--time-range", "5,5", "--edge-time", "uniform"], "--time-range 5,5 is empty"),
    (["--time-range", "0,5"], "--time-range applies to uniform times"),
    (["--time-range", "0,5", "--edge-time", "growth"], "--time-range applies to uniform times"),
    (["--time-range", "x"], "is not LO,HI"),
    (["--edge-time", "later"], "invalid choice"),
])
def test_generate_refuses_bad_time_options(cli, tmp_path, flags, message):
    r = cli("generate", "rmat", tmp_path / "r", "--scale", "4", "-q", *flags)
    assert r.code != 0 and message in r.err, r.err
    assert_nothing_left(tmp_path / "r")
