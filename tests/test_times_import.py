"""Times from the inputs people have (docs/FORMAT.md, Times): Parquet/CSV edge tables'
``--time-column`` and node tables' ``--node-time-column`` (integers, timestamps and dates as
int64 in their unit), one node set and typed tables; exact lists on tiny tables, read back in
the tables' own ids, and every bad time column failing cleanly (the file and column named,
nothing left behind)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn import _core
from ringgnn.data import build

from conftest import assert_nothing_left

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from ringgnn.importers import _arrow, tables  # noqa: E402 (after the skip: the modules need pyarrow)
from ringgnn.importers.tables import convert_table  # noqa: E402
from ringgnn.importers.typed_tables import TypedNodes, TypedRelation, convert_typed_tables  # noqa: E402

# (source, destination, time) in original ids: a duplicate pair at two times, a self loop, ties.
ROWS = [(40, 7, 5), (2**40, 7, 3), (-9, 7, 3), (7, 7, 9), (40, -9, -4), (40, 7, 1)]


def lists(out: Path, rel: str = None, src_type: str = None, dst_type: str = None):
    """Per destination (original id), its in-edges as (time, source original id) in stored order;
    the manifest."""
    m = json.loads((out / "manifest.json").read_text())
    f = m["files"]
    ds = ringgnn.Dataset.open(out)
    if rel is None:
        key = {k: f[k]["path"] for k in ("indptr", "indices", "edge_times")}
        n, e, entry = m["num_nodes"], m["num_edges"], m
        src_ids = dst_ids = ds.node_ids()
    else:
        key = {k: f[f"relation.{rel}.{k}"]["path"] for k in ("indptr", "indices", "edge_times")}
        n, e, entry = m["node_types"][dst_type]["num_nodes"], m["relations"][rel]["num_edges"], m["relations"][rel]
        src_ids, dst_ids = ds.node_ids(src_type), ds.node_ids(dst_type)
    indptr = np.fromfile(out / key["indptr"], dtype="<u8")[: n + 1]
    indices = np.fromfile(out / key["indices"], dtype={"u32": "<u4", "u64": "<u8"}[entry["graph"]["indices_dtype"]])[:e]
    times = np.fromfile(out / key["edge_times"], dtype="<i8")[:e]
    got = {}
    for v in range(n):
        a, b = int(indptr[v]), int(indptr[v + 1])
        if b > a:
            got[py(dst_ids[v])] = [(int(times[i]), py(src_ids[indices[i]])) for i in range(a, b)]
    return got, m


def py(x):
    """An original id as Python's int or str."""
    return x if isinstance(x, str) else int(x)


def reference(rows):
    """Per destination, (time, source) sorted by time; ties by source are by dense id, which
    follows the original ids' order within one bucket."""
    ref = {}
    for s, d, t in rows:
        ref.setdefault(d, []).append((t, s))
    return {d: sorted(v) for d, v in ref.items()}


def as_type(values, time_type):
    """int64 ``values`` as a column of ``time_type`` holding them (a date32's days)."""
    a = pa.array(values, pa.int64())
    return a.cast(pa.int32()).cast(time_type) if pa.types.is_date32(time_type) else a.cast(time_type)


def write_edges(path: Path, rows=ROWS, time_type=pa.int64()):
    s, d, t = zip(*rows)
    pq.write_table(pa.table({"src": pa.array(s, pa.int64()), "dst": pa.array(d, pa.int64()),
                             "t": as_type(t, time_type)}), path, row_group_size=2)
    return path


def test_a_parquet_time_column_is_each_edges_time(tmp_path, monkeypatch):
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 2)
    m = convert_table(write_edges(tmp_path / "e.parquet"), tmp_path / "out", src="src", dst="dst", time_column="t")
    got, man = lists(tmp_path / "out")
    assert man["version"] == 3 and man["edge_times"] == {"min": -4, "max": 9} and "node_times" not in man
    assert got == reference(ROWS) == {7: [(1, 40), (3, -9), (3, 2**40), (5, 40), (9, 7)], -9: [(-4, 40)]}
    assert m["edge_times"] == man["edge_times"]
    ringgnn.verify(tmp_path / "out")


def test_times_follow_their_edges_through_many_buckets(tmp_path, monkeypatch):
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 3)
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 5)
    rng = np.random.default_rng(3)
    rows = [(int(s), int(d), int(t)) for s, d, t in zip(rng.integers(-50, 50, 200), rng.integers(-50, 50, 200),
                                                         rng.integers(0, 20, 200))]
    convert_table(write_edges(tmp_path / "e.parquet", rows), tmp_path / "out", src="src", dst="dst", time_column="t")
    got, _ = lists(tmp_path / "out")
    # dense ids follow (bucket, value): compare each list's (time, source) multiset, and its times ascending
    assert {d: sorted(v) for d, v in got.items()} == reference(rows)
    assert all([t for t, _ in v] == sorted(t for t, _ in v) for v in got.values())
    ringgnn.verify(tmp_path / "out")


def test_undirected_and_dedup_keep_each_edges_time(tmp_path):
    rows = [(1, 2, 5), (1, 2, 5), (1, 2, 6), (3, 3, 1)]
    convert_table(write_edges(tmp_path / "e.parquet", rows), tmp_path / "out", src="src", dst="dst", time_column="t",
                  undirected=True, dedup=True, self_loops="drop")
    got, _ = lists(tmp_path / "out")
    assert got == {2: [(5, 1), (6, 1)], 1: [(5, 2), (6, 2)]}


@pytest.mark.parametrize("time_type,scale", [
    (pa.timestamp("ms", tz="UTC"), 1),  # a time zone changes nothing: UTC since the epoch
    (pa.timestamp("us"), 1),
    (pa.timestamp("s"), 1000),  # Parquet has no seconds: pyarrow writes timestamp[s] as [ms]
    (pa.date32(), 1),  # days
    (pa.int32(), 1),
    (pa.uint16(), None),
])
def test_timestamps_and_dates_are_int64_in_their_unit(tmp_path, time_type, scale):
    rows = ROWS if scale is not None else [(s, d, abs(t)) for s, d, t in ROWS]
    convert_table(write_edges(tmp_path / "e.parquet", rows, time_type), tmp_path / "out", src="src", dst="dst",
                  time_column="t")
    got, _ = lists(tmp_path / "out")
    assert got == reference([(s, d, t * (scale or 1)) for s, d, t in rows])


def test_a_csv_time_column_of_integers_or_dates(tmp_path):
    (tmp_path / "e.csv").write_text("src,dst,t,day\na,b,5,1970-01-06\nc,b,3,1970-01-04\na,c,-2,1969-12-31\n")
    convert_table(tmp_path / "e.csv", tmp_path / "i", src="src", dst="dst", time_column="t")
    convert_table(tmp_path / "e.csv", tmp_path / "d", src="src", dst="dst", time_column="day")
    for out in ("i", "d"):
        m = json.loads((tmp_path / out / "manifest.json").read_text())
        ds = ringgnn.Dataset.open(tmp_path / out)
        ids = ds.node_ids().tolist()
        times = np.fromfile(tmp_path / out / m["files"]["edge_times"]["path"], "<i8")[:3].tolist()
        nb = [ids[i] for v in range(3) for i in ds.neighbors(v)]
        assert sorted(zip(times, nb)) == [(-1 if out == "d" else -2, "a"), (3, "c"), (5, "a")]


def nodes_table(path: Path, ids, times, time_type=pa.int64()):
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "born": pa.array(times, pa.int64()).cast(time_type),
                             "y": pa.array([i % 2 for i in range(len(ids))], pa.int64())}), path)
    return path


def test_a_node_time_column_is_each_nodes_time(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 3)
    ids = [7, 2**40, -9, 40]
    nodes_table(tmp_path / "n.parquet", ids, [70, 10, -90, 40])
    m = convert_table(write_edges(tmp_path / "e.parquet"), tmp_path / "out", src="src", dst="dst",
                      node_table=tmp_path / "n.parquet", node_id="id", node_time_column="born")
    assert m["node_times"] == {"min": -90, "max": 70} and "edge_times" not in m
    ds = ringgnn.Dataset.open(tmp_path / "out")
    born = np.fromfile(tmp_path / "out" / m["files"]["node_times"]["path"], "<i8")[:4]
    assert dict(zip(ds.node_ids().tolist(), born.tolist())) == {7: 70, 2**40: 10, -9: -90, 40: 40}
    ringgnn.verify(tmp_path / "out")


def test_typed_tables_take_times_per_relation_and_node_type(tmp_path):
    pq.write_table(pa.table({"u": [1, 2, 1], "i": ["x", "y", "y"], "when": pa.array([30, 10, 20], pa.int64())}),
                   tmp_path / "buys.parquet")
    pq.write_table(pa.table({"a": [1], "b": [2]}), tmp_path / "knows.parquet")
    pq.write_table(pa.table({"id": ["y", "x"], "t": pa.array([5, 6], pa.int64())}), tmp_path / "items.parquet")
    m = convert_typed_tables(tmp_path / "out", [TypedRelation("user:buys:item", tmp_path / "buys.parquet", "u", "i",
                                                              "when"),
                                                TypedRelation("user:knows:user", tmp_path / "knows.parquet", "a", "b")],
                             [TypedNodes("item", tmp_path / "items.parquet", "id", node_time_column="t")],
                             add_reverse=True)
    assert m["relations"]["user:buys:item"]["edge_times"] == {"min": 10, "max": 30}
    assert m["relations"]["item:rev_buys:user"]["edge_times"] == {"min": 10, "max": 30}
    assert "edge_times" not in m["relations"]["user:knows:user"]
    assert m["node_types"]["item"]["node_times"] == {"min": 5, "max": 6} and "node_times" not in m["node_types"]["user"]
    got, _ = lists(tmp_path / "out", "user:buys:item", "user", "item")
    assert got == {"x": [(30, 1)], "y": [(10, 2), (20, 1)]}
    got, _ = lists(tmp_path / "out", "item:rev_buys:user", "item", "user")
    assert got == {1: [(20, "y"), (30, "x")], 2: [(10, "y")]}
    ringgnn.verify(tmp_path / "out")


def test_cli_time_columns(cli, tmp_path):
    write_edges(tmp_path / "e.parquet")
    nodes_table(tmp_path / "n.parquet", [7, 2**40, -9, 40], [70, 10, -90, 40])
    r = cli("convert", tmp_path / "e.parquet", tmp_path / "out", "--src", "src", "--dst", "dst", "--time-column", "t",
            "--node-table", tmp_path / "n.parquet", "--node-id", "id", "--node-time-column", "born")
    assert r.code == 0, r.err
    assert "(edge times -4 to 9, node times -90 to 70)" in r.out
    got, _ = lists(tmp_path / "out")
    assert got == reference(ROWS)
    # typed tables: per relation, or one column for every relation
    r = cli("convert", f"a:r:b={tmp_path / 'e.parquet'}", tmp_path / "typed", "--relation",
            f"b:s:a={tmp_path / 'e.parquet'}", "--src", "src", "--dst", "dst", "--time-column", "a:r:b=t", "-q")
    assert r.code == 0, r.err
    m = json.loads((tmp_path / "typed" / "manifest.json").read_text())
    assert "edge_times" in m["relations"]["a:r:b"] and "edge_times" not in m["relations"]["b:s:a"]
    nodes_table(tmp_path / "b.parquet", [7, -9], [70, -90])  # type b: the destinations
    r = cli("convert", f"a:r:b={tmp_path / 'e.parquet'}", tmp_path / "typed2", "--src", "src", "--dst", "dst",
            "--time-column", "t", "--node-table", f"b={tmp_path / 'b.parquet'}", "--node-id", "id",
            "--node-time-column", "b=born", "-q")
    assert r.code == 0, r.err
    m = json.loads((tmp_path / "typed2" / "manifest.json").read_text())
    assert m["relations"]["a:r:b"]["edge_times"] == {"min": -4, "max": 9}
    assert m["node_types"]["b"]["node_times"] == {"min": -90, "max": 70} and "node_times" not in m["node_types"]["a"]


def test_cli_refuses_time_columns_off_tables(cli, tmp_path):
    (tmp_path / "e.tsv").write_text("0\t1\n")
    out = tmp_path / "out"
    r = cli("convert", tmp_path / "e.tsv", out, "--time-column", "t")
    assert r.code == 1 and "--time-column: options of a table INPUT" in r.err
    r = cli("convert", tmp_path / "e.tsv", out, "--node-time-column", "t")
    assert r.code == 1 and "--node-time-column: options of a table INPUT" in r.err
    write_edges(tmp_path / "e.parquet")
    r = cli("convert", tmp_path / "e.parquet", out, "--src", "src", "--dst", "dst", "--node-time-column", "t")
    assert r.code == 1 and "--node-time-column name columns of a --node-table; give it" in r.err
    assert_nothing_left(out)


def bad_edges(p: Path, t) -> None:
    pq.write_table(pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "t": t}), p)


BAD = [
    (lambda p: bad_edges(p, pa.array([1.0, 2.5, 3.0])),
     r"e.parquet: column 't' \(--time-column\) holds double \(row 1 is 2.5\); times must be integers, timestamps or "
     "dates"),
    (lambda p: bad_edges(p, pa.array(["1", "2", "3"])),
     r"e.parquet: column 't' \(--time-column\) holds string; times must be"),
    (lambda p: bad_edges(p, pa.array([1, None, 3], pa.int64())),
     r"e.parquet: column 't' \(--time-column\): row 1 has no time \(null\); every row needs its time"),
    (lambda p: bad_edges(p, pa.array([1, 2**63, 3], pa.uint64())),
     r"e.parquet: column 't' \(--time-column\): row 1 is 9223372036854775808, past the largest time"),
    (lambda p: bad_edges(p, pa.array([1, 2, 3])), None),  # no such column: "tt"
]


@pytest.mark.parametrize("make,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_time_columns_name_the_file_and_column_and_leave_nothing(tmp_path, make, pattern):
    make(tmp_path / "e.parquet")
    col = "t" if pattern is not None else "tt"
    pattern = pattern or r"e.parquet: no column 'tt' \(--time-column\); it has: src, dst, t"
    with pytest.raises(_core.InputError, match=pattern):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", time_column=col)
    assert_nothing_left(tmp_path / "out")


def test_a_csv_time_column_with_an_empty_field_names_its_line(tmp_path):
    (tmp_path / "e.csv").write_text("src,dst,t\n1,2,5\n2,3,\n")
    with pytest.raises(_core.InputError, match=r"e.csv: column 't' \(--time-column\): line 3 has no time \(null\)"):
        convert_table(tmp_path / "e.csv", tmp_path / "out", src="src", dst="dst", time_column="t")
    assert_nothing_left(tmp_path / "out")
    (tmp_path / "f.csv").write_text("src,dst,t\n1,2,5\n2,3,5.5\n")
    with pytest.raises(_core.InputError, match=r"f.csv: column 't' \(--time-column\) holds double \(line 3 is 5.5\); "
                       "times must be integers"):
        convert_table(tmp_path / "f.csv", tmp_path / "out", src="src", dst="dst", time_column="t")
    assert_nothing_left(tmp_path / "out")


@pytest.mark.parametrize("value,words", [
    ("99999999999999999999", "99999999999999999999, past the largest time, 2^63 - 1"),  # past uint64 too
    ("-9223372036854775809", "-9223372036854775809, before the smallest time, -2^63"),
    ("1e3", "1e3"),
])
def test_a_csv_time_past_int64_names_its_line_and_value(tmp_path, value, words):
    # pyarrow reads such a column as double: the error quotes the file's text, not the float
    (tmp_path / "e.csv").write_text(f"src,dst,t\n1,2,5\n2,3,9223372036854775807\n3,1,{value}\n")
    with pytest.raises(_core.InputError, match=rf"e.csv: column 't' \(--time-column\) holds double \(line 4 is "
                       f"{re.escape(words)}\\); times must be integers"):
        convert_table(tmp_path / "e.csv", tmp_path / "out", src="src", dst="dst", time_column="t")
    assert_nothing_left(tmp_path / "out")
    write_edges(tmp_path / "e.parquet")
    (tmp_path / "n.csv").write_text(f"id,born\n7,1\n{2**40},2\n-9,{value}\n40,4\n")
    with pytest.raises(_core.InputError, match=rf"n.csv: column 'born' \(--node-time-column\) holds double \(line "
                       f"4 is {re.escape(words)}\\); times must be integers"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", node_table=tmp_path / "n.csv",
                      node_id="id", node_time_column="born")
    assert_nothing_left(tmp_path / "out")


def test_a_parquet_float_time_past_int64_names_its_row(tmp_path):
    bad_edges(tmp_path / "e.parquet", pa.array([1.0, 2.0, 1e20]))
    with pytest.raises(_core.InputError, match=r"e.parquet: column 't' \(--time-column\) holds double \(row 2 is "
                       r"1e\+20, past the largest time, 2\^63 - 1\); times must be integers"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", time_column="t")
    bad_edges(tmp_path / "e.parquet", pa.array([1.0, 2.0, 3.0]))  # whole numbers, still a float column
    with pytest.raises(_core.InputError, match=r"e.parquet: column 't' \(--time-column\) holds double; times must"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", time_column="t")
    assert_nothing_left(tmp_path / "out")


def test_bad_node_time_columns(tmp_path):
    write_edges(tmp_path / "e.parquet")
    ids = [7, 2**40, -9, 40]
    for t, pattern in (
            (pa.array([1, None, 3, 4], pa.int64()), r"n.parquet: column 'born' \(--node-time-column\) of id "
             r"\d+ \(row 1\) has no time \(null\); every node needs its time"),
            (pa.array([1.5, 2, 3, 4]), r"n.parquet: column 'born' \(--node-time-column\) holds double")):
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "born": t}), tmp_path / "n.parquet")
        with pytest.raises(_core.InputError, match=pattern):
            convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst",
                          node_table=tmp_path / "n.parquet", node_id="id", node_time_column="born")
        assert_nothing_left(tmp_path / "out")


def test_time_columns_of_two_units_are_refused(tmp_path):
    write_edges(tmp_path / "e.parquet", time_type=pa.timestamp("ms"))
    nodes_table(tmp_path / "n.parquet", [7, 2**40, -9, 40], [1, 2, 3, 4], pa.timestamp("us"))
    with pytest.raises(_core.InputError, match=r"e.parquet: column 't' holds times in ms and .*n.parquet: column "
                       r"'born' in us; a dataset's times share one unit"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", time_column="t",
                      node_table=tmp_path / "n.parquet", node_id="id", node_time_column="born")
    assert_nothing_left(tmp_path / "out")


# --- PyG objects ---------------------------------------------------------------------------------

# 5 nodes; edges (src, dst, time): 0->1 twice at two times, a self loop, ties at time 3
PYG_EDGES = [(2, 1, 5), (4, 1, 3), (0, 1, 3), (1, 1, 9), (3, 0, -4), (2, 1, 1)]
PYG_NODE_TIMES = [10, 11, 12, 13, 14]


def pyg_lists(edge_index, times):
    """Per destination, (time, source) in the given order."""
    out = {}
    for (s, d), t in zip(edge_index.T.tolist(), times.tolist()):
        out.setdefault(d, []).append((t, s))
    return out


@pytest.mark.parametrize("attr", ["edge_time", "time"])
def test_from_pyg_data_takes_node_and_edge_times_and_to_pyg_gives_them_back(tmp_path, attr):
    torch = pytest.importorskip("torch")
    Data = pytest.importorskip("torch_geometric.data").Data
    s, d, t = zip(*PYG_EDGES)
    data = Data(edge_index=torch.tensor([s, d]), num_nodes=5)
    setattr(data, attr, torch.tensor(t))  # a Data's `time` of one value per edge (not per node) is per edge
    if attr == "edge_time":
        data.time = torch.tensor(PYG_NODE_TIMES, dtype=torch.int32)
    m = ringgnn.from_pyg(data, tmp_path / "out")
    assert m["edge_times"] == {"min": -4, "max": 9}
    assert ("node_times" in m) == (attr == "edge_time")
    back = ringgnn.Dataset.open(tmp_path / "out").to_pyg()
    assert back.edge_time.dtype == torch.int64
    assert pyg_lists(back.edge_index, back.edge_time) == {1: [(1, 2), (3, 0), (3, 4), (5, 2), (9, 1)], 0: [(-4, 3)]}
    if attr == "edge_time":
        assert back.time.tolist() == PYG_NODE_TIMES
    else:
        assert "time" not in back
    ringgnn.verify(tmp_path / "out")


def test_from_pyg_heterodata_takes_times_per_type_and_relation(tmp_path):
    torch = pytest.importorskip("torch")
    HeteroData = pytest.importorskip("torch_geometric.data").HeteroData
    data = HeteroData()
    data["user"].num_nodes, data["item"].num_nodes = 2, 3
    data["user"].time = torch.tensor([7, 8])
    data["user", "buys", "item"].edge_index = torch.tensor([[0, 1, 0], [2, 2, 1]])
    data["user", "buys", "item"].time = torch.tensor([30, 10, 20])
    data["user", "knows", "user"].edge_index = torch.tensor([[0], [1]])
    m = ringgnn.from_pyg(data, tmp_path / "out", add_reverse=True)
    assert m["node_types"]["user"]["node_times"] == {"min": 7, "max": 8} and "node_times" not in m["node_types"]["item"]
    assert m["relations"]["item:rev_buys:user"]["edge_times"] == {"min": 10, "max": 30}
    assert "edge_times" not in m["relations"]["user:knows:user"]
    back = ringgnn.Dataset.open(tmp_path / "out").to_pyg()
    assert back["user"].time.tolist() == [7, 8] and "time" not in back["item"]
    buys = back["user", "buys", "item"]
    assert pyg_lists(buys.edge_index, buys.time) == {1: [(20, 0)], 2: [(10, 1), (30, 0)]}
    rev = back["item", "rev_buys", "user"]
    assert pyg_lists(rev.edge_index, rev.time) == {0: [(20, 1), (30, 2)], 1: [(10, 2)]}
    assert "time" not in back["user", "knows", "user"]
    ringgnn.verify(tmp_path / "out")


def test_bad_pyg_times_name_the_attribute_and_leave_nothing(tmp_path):
    torch = pytest.importorskip("torch")
    tg = pytest.importorskip("torch_geometric.data")
    s, d, t = zip(*PYG_EDGES)
    ei = torch.tensor([s, d])
    out = tmp_path / "out"
    for kw, pattern in (
            ({"edge_time": torch.tensor(t, dtype=torch.float32)}, r"data.edge_time: float32 of shape \(6,\); give one "
             r"integer time per edge \(6\) \(cast float times to int64"),
            ({"edge_time": torch.tensor(t[:5])}, r"data.edge_time: int64 of shape \(5,\); give one integer time per "
             r"edge \(6\)"),
            ({"time": torch.tensor([1, 2, 3])}, r"data.time: int64 of shape \(3,\); give one integer time per node "
             r"\(5\)"),
            ({"time": torch.tensor(t), "edge_time": torch.tensor(t)}, r"data.time and data.edge_time both give the "
             r"edges' times; give one"),
            ({"time": torch.tensor([True] * 5)}, r"data.time: bool of shape \(5,\)")):
        with pytest.raises(_core.InputError, match=pattern):
            ringgnn.from_pyg(tg.Data(edge_index=ei, num_nodes=5, **kw), out)
        assert_nothing_left(out)
    h = tg.HeteroData()
    h["a"].num_nodes = 2
    h["a", "r", "a"].edge_index = torch.tensor([[0], [1]])
    h["a", "r", "a"].time = torch.tensor([1.5])
    with pytest.raises(_core.InputError, match=r"data\[\('a', 'r', 'a'\)\].time: float32 of shape \(1,\)"):
        ringgnn.from_pyg(h, out)
    assert_nothing_left(out)


# --- GraphBolt ---------------------------------------------------------------------------------


def gb_dataset(root: Path, graph_features, homogeneous=False):
    """A GraphBolt dataset: 3 users and 2 items, buys (csv) and knows (numpy (2, E)), with
    ``graph_features`` (name, domain, type, array, format) as ``graph.feature_data``."""
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    (root / "buys.csv").write_text("0,1\n1,1\n2,0\n0,1\n")
    np.save(root / "knows.npy", np.array([[0, 1], [1, 2]]))
    feats = []
    for i, (name, domain, t, a, fmt) in enumerate(graph_features):
        path = f"f{i}.{'pt' if fmt == 'torch' else 'npy'}"
        if fmt == "torch":
            import torch

            torch.save(torch.as_tensor(np.asarray(a)), root / path)
        else:
            np.save(root / path, np.asarray(a))
        feats.append({"domain": domain, "name": name, "format": fmt, "path": path, **({"type": t} if t else {})})
    if homogeneous:
        graph = {"nodes": [{"num": 3}], "edges": [{"format": "numpy", "path": "knows.npy"}]}
    else:
        graph = {"nodes": [{"type": "user", "num": 3}, {"type": "item", "num": 2}],
                 "edges": [{"type": "user:buys:item", "format": "csv", "path": "buys.csv"},
                           {"type": "user:knows:user", "format": "numpy", "path": "knows.npy"}]}
    graph["feature_data"] = feats
    (root / "metadata.yaml").write_text(yaml.safe_dump({"dataset_name": "t", "graph": graph}, sort_keys=False))
    return root / "metadata.yaml"


def test_graphbolt_timestamp_features_are_node_and_edge_times(tmp_path, caplog):
    from ringgnn.importers.graphbolt import convert_graphbolt

    meta = gb_dataset(tmp_path / "gb", [
        ("timestamp", "edge", "user:buys:item", [40, 10, 30, 20], "numpy"),
        ("timestamp", "node", "item", np.array([[5], [6]], dtype=np.int32), "torch"),
        ("weight", "edge", "user:knows:user", [1.0, 2.0], "numpy"),
    ])
    with caplog.at_level("WARNING"):
        m = convert_graphbolt(meta, tmp_path / "out", add_reverse=True)
    assert "graph.feature_data[2] (edge feature 'weight' of the graph structure)" in caplog.text
    assert "feature_data[0]" not in caplog.text and "feature_data[1]" not in caplog.text
    assert m["relations"]["user:buys:item"]["edge_times"] == {"min": 10, "max": 40}
    assert m["relations"]["item:rev_buys:user"]["edge_times"] == {"min": 10, "max": 40}
    assert "edge_times" not in m["relations"]["user:knows:user"]
    assert m["node_types"]["item"]["node_times"] == {"min": 5, "max": 6} and "node_times" not in m["node_types"]["user"]
    out = tmp_path / "out"
    man = json.loads((out / "manifest.json").read_text())
    f = man["files"]
    indptr = np.fromfile(out / f["relation.user:buys:item.indptr"]["path"], "<u8")[:3]
    indices = np.fromfile(out / f["relation.user:buys:item.indices"]["path"], "<u4")[:4]
    times = np.fromfile(out / f["relation.user:buys:item.edge_times"]["path"], "<i8")[:4]
    assert indptr.tolist() == [0, 1, 4] and list(zip(times.tolist(), indices.tolist())) == [
        (30, 2), (10, 1), (20, 0), (40, 0)]
    assert np.fromfile(out / f["node.item.node_times"]["path"], "<i8")[:2].tolist() == [5, 6]
    ringgnn.verify(out)


def test_graphbolt_homogeneous_times_as_a_plain_convert(tmp_path):
    from ringgnn.importers.graphbolt import convert_graphbolt

    meta = gb_dataset(tmp_path / "gb", [("timestamp", "edge", None, [7, 3], "numpy"),
                                        ("timestamp", "node", None, [1, 2, 3], "numpy")], homogeneous=True)
    m = convert_graphbolt(meta, tmp_path / "out")
    assert m["edge_times"] == {"min": 3, "max": 7} and m["node_times"] == {"min": 1, "max": 3}
    np.save(tmp_path / "t.npy", np.array([7, 3]))
    np.save(tmp_path / "n.npy", np.array([1, 2, 3]))
    plain = build.convert(tmp_path / "gb" / "knows.npy", tmp_path / "plain", num_nodes=3, edge_time=tmp_path / "t.npy",
                          node_time=tmp_path / "n.npy")
    for k in ("indptr", "indices", "edge_times", "node_times"):
        assert m["files"][k]["crc32c"] == plain["files"][k]["crc32c"], k


@pytest.mark.parametrize("feature,pattern", [
    (("timestamp", "edge", "user:buys:item", [1.5, 2, 3, 4], "numpy"),
     r"graph.feature_data\[0\]: .*f0.npy holds float64 of shape \(4,\); give one integer time per edge"),
    (("timestamp", "edge", "user:knows:user", [1, 2, 3], "numpy"),
     r"graph.feature_data\[0\]: .*f0.npy holds int64 of shape \(3,\); give one integer time per edge \(2\)"),
    (("timestamp", "node", "user", [1, 2], "torch"),
     r"graph.feature_data\[0\]: .*f0.pt holds int64 of shape \(2,\); give one integer time per node \(3\)"),
    (("timestamp", "edge", "user:sells:item", [1], "numpy"),
     r"graph.feature_data\[0\].type: 'user:sells:item' is not an edge type of graph.edges"),
    (("timestamp", "graph", None, [1], "numpy"), r"graph.feature_data\[0\].domain: 'graph' is not a domain of times"),
])
def test_bad_graphbolt_times_name_the_field_and_leave_nothing(tmp_path, feature, pattern):
    from ringgnn.importers.graphbolt import convert_graphbolt

    meta = gb_dataset(tmp_path / "gb", [feature])
    with pytest.raises(_core.InputError, match=pattern):
        convert_graphbolt(meta, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


def test_graphbolt_edge_times_of_a_csv_of_another_length(tmp_path):
    from ringgnn.importers.graphbolt import convert_graphbolt

    meta = gb_dataset(tmp_path / "gb", [("timestamp", "edge", "user:buys:item", [1, 2, 3], "numpy")])
    with pytest.raises(_core.InputError, match=r"3 .*4|4 .*3"):
        convert_graphbolt(meta, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


def test_graphbolt_times_and_a_link_task_on_one_edge_type_are_refused(tmp_path):
    import yaml
    from ringgnn.importers.graphbolt import convert_graphbolt

    meta_path = gb_dataset(tmp_path / "gb", [("timestamp", "edge", "user:buys:item", [1, 2, 3, 4], "numpy")])
    meta = yaml.safe_load(meta_path.read_text())
    for name, a in (("pairs", [[0, 1], [2, 0]]), ("test", [[1, 1], [1, 0]]), ("labels", [1, 0]), ("indexes", [0, 0])):
        np.save(tmp_path / "gb" / f"{name}.npy", np.array(a))
    meta["tasks"] = [{"name": "lp", "train_set": [{"type": "user:buys:item", "data": [
        {"name": "seeds", "format": "numpy", "path": "pairs.npy"}]}],
        "test_set": [{"type": "user:buys:item", "data": [
            {"name": n, "format": "numpy", "path": f"{p}.npy"} for n, p in (("seeds", "test"), ("labels", "labels"),
                                                                           ("indexes", "indexes"))]}]}]
    meta_path.write_text(yaml.safe_dump(meta, sort_keys=False))
    with pytest.raises(_core.InputError, match=r"graph.feature_data\[0\]: edge type 'user:buys:item' has times and "
                       r"link-prediction task tasks\[0\] \('lp'\) splits it; edge splits of edges with times"):
        convert_graphbolt(meta_path, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")
