"""``ringgnn.importers.tables``: Parquet and CSV edge tables with 64-bit and string ids, dense ids
assigned out of core (one bucket and several), checked edge by edge against the table in its own
ids; the original ids stored and read back (``Dataset.node_ids``); bad columns refused naming
the file and column, nothing written."""

from __future__ import annotations

import builtins
import collections
from pathlib import Path

import numpy as np
import pytest
import ringgnn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringgnn import _core
from ringgnn.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from ringgnn.importers import _arrow, tables  # noqa: E402 (after the skip: the module needs pyarrow)
from ringgnn.importers.tables import convert_table  # noqa: E402

BIG = [2**40 + 7, -5, 2**63 - 1, -(2**63), 99, 2**32]  # past 2^32, negative, both extremes


def in_neighbors_by_id(pairs):
    """Original id -> sorted original ids of its in-neighbors (duplicates kept)."""
    d = collections.defaultdict(list)
    for s, t in pairs:
        d[t].append(s)
    return {k: sorted(v) for k, v in d.items()}


def assert_same_graph(out, pairs):
    """The dataset, read back through node_ids, is the table's graph in its own ids."""
    ds = ringgnn.Dataset.open(out)
    ids = ds.node_ids()
    assert len(ids) == ds.num_nodes == len({x for p in pairs for x in p})
    assert len(set(ids.tolist())) == len(ids)  # each original id once
    got = {}
    for v in range(ds.num_nodes):
        nb = ids[ds.neighbors(v)].tolist()
        if nb:
            got[ids[v]] = sorted(nb)
    assert got == in_neighbors_by_id(pairs)
    ringgnn.verify(out)
    return ds


def write_parquet(path: Path, pairs, types=(pa.int64(), pa.int64()), **kw):
    s, d = zip(*pairs)
    pq.write_table(pa.table({"user": pa.array(s, types[0]), "item": pa.array(d, types[1]), **kw}), path,
                   row_group_size=3)  # several row groups: several record batches
    return path


PAIRS = [(BIG[0], BIG[1]), (BIG[1], BIG[2]), (BIG[0], BIG[3]), (BIG[3], BIG[1]), (BIG[4], BIG[5]),
         (BIG[0], BIG[1]), (BIG[5], BIG[5])]  # a duplicate edge and a self loop


def test_int64_ids_past_2_32(tmp_path, monkeypatch):
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 2)
    m = convert_table(write_parquet(tmp_path / "e.parquet", PAIRS), tmp_path / "out", src="user", dst="item")
    assert m["node_ids"] == {"dtype": "i64", "bytes": 0}
    ds = assert_same_graph(tmp_path / "out", PAIRS)
    # one bucket: dense ids follow the ids' order
    assert ds.node_ids().tolist() == sorted(set(BIG))
    assert ds.node_ids([3, 0]).tolist() == [sorted(BIG)[3], sorted(BIG)[0]]


def test_many_buckets_give_the_same_graph(tmp_path, monkeypatch):
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 2)
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 5)
    path = write_parquet(tmp_path / "e.parquet", PAIRS)
    convert_table(path, tmp_path / "a", src="user", dst="item")
    a = assert_same_graph(tmp_path / "a", PAIRS)
    convert_table(path, tmp_path / "b", src="user", dst="item")
    assert a.node_ids().tolist() == ringgnn.Dataset.open(tmp_path / "b").node_ids().tolist()  # deterministic


def test_uint64_ids_above_2_63(tmp_path):
    pairs = [(2**64 - 1, 2**63), (2**63, 5), (5, 2**64 - 1)]
    path = write_parquet(tmp_path / "e.parquet", pairs, types=(pa.uint64(), pa.uint64()))
    m = convert_table(path, tmp_path / "out", src="user", dst="item", undirected=True)
    assert m["node_ids"]["dtype"] == "u64"
    ds = assert_same_graph(tmp_path / "out", pairs + [(d, s) for s, d in pairs])
    assert ds.node_ids().dtype == np.uint64


def test_string_ids_from_csv_with_a_header(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 3)
    # (an empty CSV field is a missing id, refused: tests/faults/test_importers.py)
    rows = [("alice", "bob"), ("bob", "zoë"), ("zoë", "alice"), ("carol", "carol"), ("bob", "zoë")]
    (tmp_path / "e.csv").write_text("src,dst,weight\n" + "".join(f"{s},{d},1.5\n" for s, d in rows),
                                    encoding="utf-8")
    m = convert_table(tmp_path / "e.csv", tmp_path / "out", src="src", dst="dst")
    assert m["node_ids"] == {"dtype": "str", "bytes": len("alicebobzoëcarol".encode())}
    ds = assert_same_graph(tmp_path / "out", rows)
    assert set(ds.node_ids().tolist()) == {"alice", "bob", "zoë", "carol"}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.text(max_size=4), st.text(max_size=4)), min_size=1, max_size=20),
       st.integers(1, 4))
def test_string_tables_round_trip(tmp_path_factory, pairs, buckets):
    """Any strings (empty, unicode, commas), any bucket count: the same graph in the same ids."""
    tmp = tmp_path_factory.mktemp("t")
    s, d = zip(*pairs)
    pq.write_table(pa.table({"a": pa.array(s, pa.string()), "b": pa.array(d, pa.string())}), tmp / "e.parquet")
    old = tables.bucket_count
    tables.bucket_count = lambda rows, per_id, budget: buckets
    try:
        convert_table(tmp / "e.parquet", tmp / "out", src="a", dst="b")
    finally:
        tables.bucket_count = old
    assert_same_graph(tmp / "out", pairs)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=6), max_size=30), st.integers(1, 8), st.integers(0, 3))
def test_string_hash_in_slices_is_the_whole_hash(strings, slice_bytes, offset):
    """Hashed a few bytes at a time (and from a sliced array), every string gets the hash it
    gets in one piece: the dense order does not depend on how much is hashed at once."""
    arr = pa.array(["pad"] * offset + strings, pa.string()).slice(offset)
    whole = _arrow.string_hash(arr)
    real = _arrow.HASH_BYTES
    try:
        _arrow.HASH_BYTES = slice_bytes
        assert _arrow.string_hash(arr).tolist() == whole.tolist()
    finally:
        _arrow.HASH_BYTES = real
    assert len(set(whole.tolist())) == len(set(strings))


def test_string_hash_depends_on_every_byte():
    h = _arrow.string_hash(pa.array(["", "a", "b", "ab", "ba", "a\0", "aa", "", "ab"]))
    assert h[0] == h[7] and h[3] == h[8]
    assert len({int(x) for x in h[:7]}) == 7


# --- bad input ---------------------------------------------------------------------------------


def assert_nothing_left(out: Path):
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


BAD = [
    (lambda p: write_parquet(p, PAIRS), {"src": "usr"}, r"e.parquet: no column 'usr' \(--src\); it has: user, item"),
    (lambda p: pq.write_table(pa.table({"user": [1.5], "item": [2.0]}), p), {},
     r"column 'user' \(--src\) holds double; node ids must be integers or strings"),
    (lambda p: pq.write_table(pa.table({"user": pa.array([1, None, 3]), "item": [2, 3, 4]}), p), {},
     r"column 'user': row 1 is empty \(null\)"),
    (lambda p: pq.write_table(pa.table({"user": ["a"], "item": [2]}), p), {},
     r"column 'user' holds strings and 'item' integers"),
    (lambda p: pq.write_table(pa.table({"user": pa.array([-1], pa.int64()), "item": pa.array([2], pa.uint64())}), p),
     {}, r"column 'user' row 0 is -1, negative, while the other column is unsigned"),
    (lambda p: p.write_bytes(b"PAR1 not really"), {}, r"e.parquet: not a Parquet file"),
]


@pytest.mark.parametrize("make,kw,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_tables_name_the_column_and_leave_nothing(tmp_path, make, kw, pattern):
    make(tmp_path / "e.parquet")
    args = {"src": "user", "dst": "item", **kw}
    with pytest.raises(_core.InputError, match=pattern):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", **args)
    assert_nothing_left(tmp_path / "out")


def test_without_pyarrow_the_error_names_the_extra(tmp_path, monkeypatch):
    real = builtins.__import__

    def no_pyarrow(name, *a, **kw):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(_core.InputError, match=r"needs pyarrow; install it with pip install 'ringgnn\[parquet\]'"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="a", dst="b")


def test_cli(tmp_path, capsys):
    write_parquet(tmp_path / "e.parquet", PAIRS)
    assert main(["convert", str(tmp_path / "e.parquet"), str(tmp_path / "a"), "--src", "user", "--dst", "item",
                 "-q"]) == 0
    assert_same_graph(tmp_path / "a", PAIRS)
    assert main(["convert", str(tmp_path / "e.parquet"), str(tmp_path / "b")]) == 1
    assert "needs --src COL and --dst COL" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "e.parquet"), str(tmp_path / "b"), "--src", "user", "--dst", "item",
                 "--features", "x.npy"]) == 1
    assert "--features: not options of an edge table" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    (tmp_path / "e.csv").write_text("from,to\nx,y\n")
    assert main(["convert", str(tmp_path / "e.csv"), str(tmp_path / "c"), "--src", "from", "--dst", "to", "-q"]) == 0
    assert ringgnn.Dataset.open(tmp_path / "c").node_ids().tolist() == ["x", "y"]
    assert ringgnn.Dataset.open(tmp_path / "a").has_node_ids


def test_default_budget_counts_what_the_process_holds(tmp_path, monkeypatch):
    """By default an import's budget is what the process holds plus the build's default growth,
    so a process already holding 1 GiB (torch and a model in a notebook) still builds; an
    explicit --memory is the whole process's, and one the process already exceeds is refused."""
    from ringgnn import _options

    real = _options.process_rss
    monkeypatch.setattr(_options, "process_rss", lambda: real() + (1 << 30))
    monkeypatch.setattr(tables, "process_rss", lambda: real() + (1 << 30))
    convert_table(write_parquet(tmp_path / "e.parquet", PAIRS), tmp_path / "out", src="user", dst="item")
    assert_same_graph(tmp_path / "out", PAIRS)
    with pytest.raises(_core.InputError, match=r"--memory 512 MiB is the whole process's budget, and the process "
                                               r"already holds \d+ MiB after the id map"):
        convert_table(tmp_path / "e.parquet", tmp_path / "out2", src="user", dst="item", memory="512M")
    assert_nothing_left(tmp_path / "out2")


def test_many_buckets_under_a_low_open_files_limit(tmp_path):
    """A pass writes to 2 P bucket files at once: with the soft limit on open files below that
    (a common default is 1024), the import raises it to the hard limit; when the hard one is too
    low, the error says what to do. In a subprocess: limits are per process."""
    import subprocess
    import sys

    pairs = [(i * 7919, i * 7919 + 1) for i in range(2000)]  # ids in most of the 300 buckets
    write_parquet(tmp_path / "e.parquet", pairs)
    code = f"""
import resource
from ringgnn.importers import tables
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
tables.bucket_count = lambda rows, per_id, budget: 300
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
tables.convert_table({str(tmp_path / 'e.parquet')!r}, {str(tmp_path / 'a')!r}, src="user", dst="item")
print("ok", resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 600)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 300))
try:
    tables.convert_table({str(tmp_path / 'e.parquet')!r}, {str(tmp_path / 'b')!r}, src="user", dst="item")
except Exception as e:
    print(type(e).__name__, e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "ok True"
    assert lines[1].startswith("InputError the import writes 600 bucket files at once, and this process may open "
                               "300 files; raise the limit (ulimit -n 856)"), lines[1]
    assert_same_graph(tmp_path / "a", pairs)
    assert_nothing_left(tmp_path / "b")


def test_datasets_without_original_ids(tmp_path):
    (tmp_path / "e.csv").write_text("0,1\n")
    ringgnn.convert(tmp_path / "e.csv", tmp_path / "out")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.node_ids() is None and not ds.has_node_ids
    assert "node_ids" not in (tmp_path / "out" / "manifest.json").read_text()  # old manifests unchanged


# --- node tables -------------------------------------------------------------------------------

NODE_ROWS = {BIG[i]: (float(i) / 2, 10 * i, [0, None, 2, 1, -1, 3][i]) for i in range(6)}


def features_of(out):
    ds = ringgnn.Dataset.open(out)
    return _core.FeatureReader(str(out)).gather(np.arange(ds.num_nodes, dtype=np.int64))


def write_nodes(path: Path, rows=NODE_ROWS, order=(3, 0, 5, 1, 4, 2)):
    ids = [BIG[i] for i in order]  # not the dense order
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                             "f": pa.array([rows[k][0] for k in ids], pa.float32()),
                             "g": pa.array([rows[k][1] for k in ids], pa.int32()),
                             "y": pa.array([rows[k][2] for k in ids], pa.int64())}), path, row_group_size=2)
    return path


@pytest.mark.parametrize("buckets", [1, 4])
def test_node_table_features_and_labels_follow_the_ids(tmp_path, monkeypatch, buckets):
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: buckets)
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 2)
    convert_table(write_parquet(tmp_path / "e.parquet", PAIRS), tmp_path / "out", src="user", dst="item",
                  node_table=write_nodes(tmp_path / "n.parquet"), node_id="id", feature_columns=["f", "g"],
                  label_column="y")
    ds = assert_same_graph(tmp_path / "out", PAIRS)
    ids = ds.node_ids().tolist()
    np.testing.assert_array_equal(features_of(tmp_path / "out"),
                                  np.array([[NODE_ROWS[k][0], NODE_ROWS[k][1]] for k in ids], dtype=np.float32))
    assert ds.labels.tolist() == [-1 if NODE_ROWS[k][2] is None else NODE_ROWS[k][2] for k in ids]
    assert ds.num_classes == 4


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_column_named_twice_is_read_once_and_given_twice(tmp_path, suffix):
    """Both ends named by one column (every edge a self loop), and a node-table column that is a
    feature and the label: each is read once and serves both (was an IndexError)."""
    pairs = [(BIG[0], BIG[0]), (BIG[1], BIG[1]), (BIG[0], BIG[0])]
    edges = tmp_path / f"e.{suffix}"
    if suffix == "parquet":
        write_parquet(edges, pairs)
    else:
        edges.write_text("user,item\n" + "".join(f"{s},{d}\n" for s, d in pairs))
    nodes = tmp_path / "n.parquet"
    node_ids = [BIG[1], BIG[0]] if suffix == "parquet" else [str(BIG[1]), str(BIG[0])]
    pq.write_table(pa.table({"id": pa.array(node_ids),
                             "y": pa.array([2, 1], pa.int64())}), nodes)
    convert_table(edges, tmp_path / "out", src="user", dst="user", node_table=nodes, node_id="id",
                  feature_columns=["y"], label_column="y")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    ids = ds.node_ids().tolist()
    assert sorted(ids) == sorted({str(BIG[0]), str(BIG[1])} if suffix == "csv" else {BIG[0], BIG[1]})
    assert ds.num_edges == 3 and all(ds.neighbors(v).tolist() == [v] * len(ds.neighbors(v)) for v in range(2))
    y = {BIG[1]: 2, BIG[0]: 1}
    want = [y[int(k)] for k in ids]
    assert ds.labels.tolist() == want
    np.testing.assert_array_equal(features_of(tmp_path / "out")[:, 0], np.array(want, dtype=np.float32))


def test_node_table_vector_column_and_csv_string_ids(tmp_path):
    (tmp_path / "e.csv").write_text("a,b\nx,y\ny,z\nz,x\n")
    emb = pa.array([[3.0, 0.5], [1.0, 0.5], [2.0, 0.5]], pa.list_(pa.float16()))
    pq.write_table(pa.table({"name": ["z", "x", "y"], "emb": emb}), tmp_path / "n.parquet")
    m = convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b", node_table=tmp_path / "n.parquet",
                      node_id="name", feature_columns=["emb"])
    assert m["features"]["dtype"] == "f16"
    np.testing.assert_array_equal(features_of(tmp_path / "out"), [[1.0, 0.5], [2.0, 0.5], [3.0, 0.5]])
    (tmp_path / "n.csv").write_text("name,label\nz,2\nx,0\ny,\n")
    convert_table(tmp_path / "e.csv", tmp_path / "out2", src="a", dst="b", node_table=tmp_path / "n.csv",
                  node_id="name", label_column="label")
    assert ringgnn.Dataset.open(tmp_path / "out2").labels.tolist() == [0, -1, 2]


NODE_BAD = [
    (lambda p: write_nodes(p, {**NODE_ROWS, 12345: (0.0, 0, 0)}, order=(0, 1, 2, 3, 4, 5)) and pq.write_table(
        pa.table({"id": pa.array(BIG + [12345], pa.int64()), "f": [0.0] * 7, "g": [0] * 7, "y": [0] * 7}), p),
     {}, r"n.parquet: id 12345 \(row 6\) is named by no edge; remove its row, or add its edges"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG[:5], pa.int64()), "f": [0.0] * 5, "g": [0] * 5,
                                        "y": [0] * 5}), p),
     {}, rf"n.parquet: id {BIG[5]} of the edges has no row; every node needs one"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG + [BIG[2]], pa.int64()), "f": [0.0] * 7, "g": [0] * 7,
                                        "y": [0] * 7}), p),
     {}, rf"n.parquet: id {BIG[2]} has 2 rows; give each node one row"),
    (lambda p: write_nodes(p), {"feature_columns": ["f", "h"]}, r"no column 'h' \(--feature-columns\); it has: id"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG, pa.int64()), "y": ["a"] * 6}), p),
     {"feature_columns": [], "label_column": "y"}, r"column 'y' \(--label-column\) holds string; labels must be"),
    (lambda p: pq.write_table(pa.table({"id": [str(b) for b in BIG], "f": [0.0] * 6}), p),
     {"feature_columns": ["f"], "label_column": None}, r"column 'id' \(--node-id\) holds strings but the edge"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG, pa.int64()),
                                        "v": [[1.0], [1.0, 2.0]] + [[0.0]] * 4}), p),
     {"feature_columns": ["v"], "label_column": None}, r"vectors of column 'v' have 1 to 2 values"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG, pa.int64()), "f": [1.0, None] + [0.0] * 4}), p),
     {"feature_columns": ["f"], "label_column": None}, r"column 'f' has empty \(null\) values"),
    (lambda p: pq.write_table(pa.table({"id": pa.array(BIG, pa.int64()), "y": [0.5] * 6}), p),
     {"feature_columns": [], "label_column": "y"}, r"label 0.5 \(--label-column 'y'\) is not a class id"),
    (lambda p: write_nodes(p), {"node_id": None}, r"n.parquet: name its id column \(--node-id COL\)"),
    (lambda p: write_nodes(p), {"feature_columns": [], "label_column": None},
     r"needs --feature-columns, --label-column or --split-column"),
]


@pytest.mark.parametrize("make,kw,pattern", NODE_BAD, ids=[str(i) for i in range(len(NODE_BAD))])
def test_bad_node_tables_name_the_id_and_leave_nothing(tmp_path, monkeypatch, make, kw, pattern):
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 3)
    write_parquet(tmp_path / "e.parquet", PAIRS)
    make(tmp_path / "n.parquet")
    args = {"node_table": tmp_path / "n.parquet", "node_id": "id", "feature_columns": ["f", "g"],
            "label_column": "y", **kw}
    with pytest.raises(_core.InputError, match=pattern):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="user", dst="item", **args)
    assert_nothing_left(tmp_path / "out")


def test_cli_node_table(tmp_path, capsys):
    write_parquet(tmp_path / "e.parquet", PAIRS)
    write_nodes(tmp_path / "n.parquet")
    assert main(["convert", str(tmp_path / "e.parquet"), str(tmp_path / "a"), "--src", "user", "--dst", "item",
                 "--node-table", str(tmp_path / "n.parquet"), "--node-id", "id", "--feature-columns", "f, g",
                 "--label-column", "y", "--feature-dtype", "f16", "-q"]) == 0
    ds = ringgnn.Dataset.open(tmp_path / "a")
    assert ds.feature_dim == 2 and ds.feature_dtype == "f16" and ds.num_classes == 4
    (tmp_path / "e.csv").write_text("0,1\n")
    assert main(["convert", str(tmp_path / "e.csv"), str(tmp_path / "b"), "--node-table", "n.parquet"]) == 1
    assert "--node-table: options of a table INPUT" in capsys.readouterr().err


def test_no_pandas_import(tmp_path):
    """pyarrow imports pandas (seconds, tens of MB of the budget) for np.asarray/to_numpy/pa.array
    of its arrays when pandas is installed; the importer converts without them."""
    import subprocess
    import sys

    write_parquet(tmp_path / "e.parquet", PAIRS)
    write_nodes(tmp_path / "n.parquet")
    code = ("import sys; from ringgnn.importers.tables import convert_table; "
            f"convert_table({str(tmp_path / 'e.parquet')!r}, {str(tmp_path / 'out')!r}, src='user', dst='item', "
            f"node_table={str(tmp_path / 'n.parquet')!r}, node_id='id', feature_columns=['f'], label_column='y'); "
            "print('pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == "False"


def test_a_pass_over_many_row_groups_holds_about_one(tmp_path):
    """A pass reads the table in record batches and keeps no more than about one row group's
    pages: pyarrow's pre-buffering reader kept every row group it had read until it closed
    (1.9 GB for a 100M-edge table under --memory 512M: OOM-killed). 40 row groups of 1 MiB."""
    rng = np.random.default_rng(0)
    path = tmp_path / "e.parquet"
    with pq.ParquetWriter(path, pa.schema([("s", pa.int64()), ("d", pa.int64())])) as w:
        for _ in range(40):
            w.write_table(pa.table({"s": rng.integers(0, 1 << 62, 65536), "d": rng.integers(0, 1 << 62, 65536)}))
    t = _arrow.Table(str(path), id_columns=("s", "d"))
    base, peak, rows = pa.total_allocated_bytes(), 0, 0
    for b in t.batches(["s", "d"]):
        rows += b.num_rows
        peak = max(peak, pa.total_allocated_bytes() - base)
    assert rows == 40 * 65536
    assert peak < 12 << 20, f"{peak >> 20} MiB of Arrow memory held while reading 40 MiB"


def test_predict_and_embed_write_the_original_ids_beside(tmp_path):
    """A model trained on a table's dataset: predict and embed write OUT.node_ids.npy, row i the
    original id of output row i (strings: fixed-width unicode, no pickle)."""
    from ringgnn.training.loop import train

    rng = np.random.default_rng(0)
    names = [f"user-{i:03d}" + "é" * (i % 3) for i in range(60)]
    s, d = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
    pq.write_table(pa.table({"a": [names[i] for i in s], "b": [names[i] for i in d]}), tmp_path / "e.parquet")
    pq.write_table(pa.table({"id": names, "x": rng.standard_normal(60).astype(np.float32),
                             "y": pa.array(np.arange(60) % 2)}), tmp_path / "n.parquet")
    convert_table(tmp_path / "e.parquet", tmp_path / "ds", src="a", dst="b", node_table=tmp_path / "n.parquet",
                  node_id="id", feature_columns=["x"], label_column="y", split="train=0.5,val=0.25,test=0.25")
    train(str(tmp_path / "ds"), out=str(tmp_path / "run"), epochs=1, batch_size=16, quiet=True, log=lambda s: None)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert main(["predict", str(tmp_path / "run"), "--nodes", "test", "--out", str(tmp_path / "p.npy"),
                 "--quiet"]) == 0
    ids = np.load(tmp_path / "p.node_ids.npy")
    assert ids.dtype.kind == "U" and ids.tolist() == ds.node_ids(ds.split("test")).tolist()
    assert len(ids) == len(np.load(tmp_path / "p.npy"))
    assert main(["embed", str(tmp_path / "run"), "--out", str(tmp_path / "e.npy"), "--quiet"]) == 0
    assert np.load(tmp_path / "e.node_ids.npy").tolist() == ds.node_ids().tolist()


def test_info_reports_original_ids(tmp_path, capsys):
    write_parquet(tmp_path / "e.parquet", PAIRS)
    convert_table(tmp_path / "e.parquet", tmp_path / "out", src="user", dst="item")
    assert main(["info", str(tmp_path / "out")]) == 0
    assert "node ids  original ids of the input (i64): Dataset.node_ids()" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "out"), "--json"]) == 0
    assert '"node_ids": "i64"' in capsys.readouterr().out


def test_csv_ids_are_text(tmp_path):
    """CSV has no types: 007 and 7 are different nodes (different text), as are 1e3 and 1000."""
    (tmp_path / "e.csv").write_text("a,b\n007,7\n7,1e3\n1000,007\n")
    m = convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b")
    assert m["node_ids"]["dtype"] == "str"
    assert_same_graph(tmp_path / "out", [("007", "7"), ("7", "1e3"), ("1000", "007")])
    assert sorted(ringgnn.Dataset.open(tmp_path / "out").node_ids().tolist()) == ["007", "1000", "1e3", "7"]


def test_node_table_split_column(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "bucket_count", lambda rows, per_id, budget: 3)
    write_parquet(tmp_path / "e.parquet", PAIRS)
    split_of = {BIG[0]: "train", BIG[1]: "test", BIG[2]: None, BIG[3]: "train", BIG[4]: "val", BIG[5]: "train"}
    pq.write_table(pa.table({"id": pa.array(list(split_of), pa.int64()), "s": list(split_of.values())}),
                   tmp_path / "n.parquet")
    convert_table(tmp_path / "e.parquet", tmp_path / "out", src="user", dst="item", node_table=tmp_path / "n.parquet",
                  node_id="id", split_column="s")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.split_names == ["test", "train", "val"] and ds.feature_dim is None and ds.labels is None
    for name in ("train", "val", "test"):
        got = ds.split(name)
        assert got.tolist() == sorted(got.tolist())  # ascending dense ids
        assert sorted(ds.node_ids(got).tolist()) == sorted(k for k, v in split_of.items() if v == name)
    # a bad split name is named (Train is train: tests/faults/test_importers.py); id files cannot name dense ids
    pq.write_table(pa.table({"id": pa.array(list(split_of), pa.int64()), "s": ["train/2"] * 6}),
                   tmp_path / "n2.parquet")
    with pytest.raises(_core.InputError, match=r"split 'train/2' \(--split-column 's'\) is not a split name"):
        convert_table(tmp_path / "e.parquet", tmp_path / "x", src="user", dst="item",
                      node_table=tmp_path / "n2.parquet", node_id="id", split_column="s")
    with pytest.raises(_core.InputError, match=r"a table's splits are fractions"):
        convert_table(tmp_path / "e.parquet", tmp_path / "x", src="user", dst="item", split="train=ids.npy")
    assert_nothing_left(tmp_path / "x")
