"""Every way times enter ringgnn (issue 36), each with bad input: a clear error naming the file,
column or field and what to do, and nothing left behind. The table says, per input path and kind
of bad input, which test covers it (``-``: does not apply).

Kinds: *unsorted* (a stored list out of time order), *length* (misaligned or wrong length),
*dtype* (float, int32/unsigned, object), *null*, *empty*, *missing* (no such file), *range*
(a time outside int64).

=========================================  ==========================================================================
path                                       bad input -> test
=========================================  ==========================================================================
``convert --edge-time T.npy``              length: test_times_format::test_edge_times_of_the_wrong_length;
                                           dtype (float64, uint64, 2-D), missing: ``..._wrong_dtype_shape_or_missing``
                                           (int32 is taken: ``test_options_with_times_and_int32_times``);
                                           object, empty, not an .npy (each naming the option), big-endian:
                                           test_convert_time_files_that_are_not_int_arrays; unsorted: - (input order
                                           is free; each list is sorted when stored); null, range: - (int arrays)
``convert --node-time N.npy``              length, float: test_times_format::test_node_times_of_the_wrong_length_or_dtype;
                                           object, 2-D, missing, not an .npy:
                                           test_convert_time_files_that_are_not_int_arrays
typed builds (``Relation(edge_time=)``,    length: test_times_format::test_typed_builds_take_times_per_relation_and_type
``NodeType(node_time=)``)                  (names the relation)
Parquet/CSV ``--time-column``              float, string, null, uint64 past int64, no such column:
                                           test_times_import::test_bad_time_columns_name_the_file_and_column_and_leave_nothing;
                                           CSV empty field, CSV float:
                                           ``test_a_csv_time_column_with_an_empty_field_names_its_line``;
                                           CSV integer outside int64 (its line and value), empty table:
                                           test_csv_times_outside_int64_and_empty_tables; past uint64, with
                                           --node-time-column, a Parquet float past int64:
                                           test_times_import::test_a_csv_time_past_int64_names_its_line_and_value,
                                           ``test_a_parquet_float_time_past_int64_names_its_row``;
                                           two units: ``test_time_columns_of_two_units_are_refused``
Parquet ``--node-time-column``             null, float: test_times_import::test_bad_node_time_columns;
                                           uint64 past int64, bool, string: test_node_time_columns_of_other_types
``from_pyg`` (``time``, ``edge_time``,     float, length, both given, bool, per type and relation:
per type/relation)                         test_times_import::test_bad_pyg_times_name_the_attribute_and_leave_nothing;
                                           a per-type node time of another length: test_pyg_typed_node_times_of_another_length
GraphBolt timestamp features               float, length, unknown type, bad domain:
                                           test_times_import::test_bad_graphbolt_times_name_the_field_and_leave_nothing;
                                           CSV edges: ``test_graphbolt_edge_times_of_a_csv_of_another_length``
``--seed-time FILE.npy``                   length, float, 2-D, not an .npy, object, .npz, no times:
                                           test_temporal_train::test_seed_time_file_and_its_errors
``input_time=`` (samplers, loaders)        float, length, 2-D, strategy: test_temporal_sampler::test_bad_times_are_refused,
                                           test_temporal_loader::test_refusals; object, bool, string, empty, outside
                                           int64 (list or uint64): test_input_times_of_other_types_or_outside_int64
``--task-table T.parquet``                 null, float, string, out of range, empty, missing column, two units, missing
                                           file: test_task_table::test_bad_tables, ``test_bad_csv_and_specs``
``--link-split-time val=T1,test=T2``       decreasing, not NAME=TIME, not an integer, names twice, with --link-split, no
                                           edge times: test_link_split_time::test_bad_input_fails_cleanly; outside
                                           int64: test_link_split_times_outside_int64
``Sample``/``Predict`` with a time         both given, length, not integers, no times:
                                           test_serve_times::test_times_refused_naming_the_field and the typed tests there
``predict``/``embed --at T``               not an integer, float, bool, outside int64, no times:
                                           test_infer_at::test_bad_times_are_refused_and_leave_nothing
``verify`` of time files                   unsorted: test_times_format::test_verify_finds_times_out_of_order, Rust
                                           ``verify::times::tests``; length (files.*.bytes and payload): Rust
                                           ``verify::times::tests``, test_a_time_file_shorter_than_its_counts_is_named_where_it_is_read
opening a dataset with times (samplers,    length (file and manifest agree, counts do not), missing, not a regular file:
loaders, servers)                          test_a_time_file_shorter_than_its_counts_is_named_where_it_is_read,
                                           test_missing_or_odd_time_files_fail_at_open; unreadable:
                                           test_an_unreadable_time_file_fails_at_open; a file gone mid-epoch: Rust
                                           ``ringgnn-sampler/tests/open_early.rs``
=========================================  ==========================================================================
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn.data import build

from conftest import assert_nothing_left

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: Enough nodes and edges that a time file cut to one page (4096 bytes) is shorter than its
#: payload (4800 and 24000 bytes), with the manifest agreeing with the cut file.
NODES, EDGES = 600, 3000


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """The same graph with edge and node times, homogeneous (``ds``) and typed (``h``)."""
    d = tmp_path_factory.mktemp("graphs")
    rng = np.random.default_rng(0)
    np.save(d / "e.npy", rng.integers(0, NODES, (EDGES, 2)).astype(np.int64))
    np.save(d / "et.npy", rng.integers(0, 100, EDGES).astype(np.int64))
    np.save(d / "nt.npy", rng.integers(0, 100, NODES).astype(np.int64))
    build.convert(d / "e.npy", d / "ds", edge_time=d / "et.npy", node_time=d / "nt.npy", num_nodes=NODES)
    build.build_hetero(d / "h", [build.NodeType("paper", NODES, node_time=d / "nt.npy")],
                       [build.Relation("paper:cites:paper", d / "e.npy", edge_time=d / "et.npy")])
    return d


#: (dataset, manifest key of its node times, of its edge times, its node type)
KINDS = {"homogeneous": ("ds", "node_times", "edge_times", "node"),
         "typed": ("h", "node.paper.node_times", "relation.paper:cites:paper.edge_times", "paper")}


def copy_of(graphs: Path, kind: str, to: Path) -> Path:
    shutil.copytree(graphs / KINDS[kind][0], to)
    return to


def cut(ds: Path, key: str, size: int = 4096) -> Path:
    """Cut the file of manifest entry ``key`` of ``ds`` to ``size`` bytes, recording that size in
    the manifest (so only the counts disagree with it); returns the file."""
    m = json.loads((ds / "manifest.json").read_text())
    p = ds / m["files"][key]["path"]
    with open(p, "r+b") as f:
        f.truncate(size)
    m["files"][key]["bytes"] = size
    (ds / "manifest.json").write_text(json.dumps(m))
    return p


def short_message(path: Path, ds: Path, which: str) -> str:
    n, payload, padded = (NODES, 4800, 8192) if which == "node" else (EDGES, 24000, 24576)
    return re.escape(f"{path}: 4096 bytes, but {n} {which} times (one int64 per {which}) need {payload} bytes "
                     f"(padded to {padded}); the dataset is damaged: run `ringgnn verify {ds}` and rebuild it")


def server(ds, **kw):
    pytest.importorskip("grpc")
    from ringgnn.serving.server import Server

    return Server(ds, listen="127.0.0.1:0", **{"threads": 1, "fanouts": [2], **kw}).start()


CASES = [(kind, which) for kind in KINDS for which in ("node", "edge")]


@pytest.mark.parametrize("kind,which", CASES, ids=[f"{k}-{w}" for k, w in CASES])
def test_a_time_file_shorter_than_its_counts_is_named_where_it_is_read(graphs, tmp_path, kind, which):
    """A time file whose size the manifest records but whose counts need more (it read as
    "failed to fill whole buffer"): the dataset opens (a run without times never reads it), and
    whatever reads it, before reading, names the file, both sizes and `ringgnn verify`: a
    sampler at times (from memory and from disk), a loader at times, the server's own opening
    of the dataset (typed, and the homogeneous one's times; its error, not the request's, an
    InputError); verify names the file. Without times the sampler and the server work."""
    ds = copy_of(graphs, kind, tmp_path / "ds")
    _, node_key, edge_key, node_type = KINDS[kind]
    path = cut(ds, node_key if which == "node" else edge_key)
    message = short_message(path, ds, which)
    opened = ringgnn.Dataset.open(ds)
    for backend in ("memory", "pread"):
        with pytest.raises(ringgnn.CorruptDatasetError, match=message):
            ringgnn.HeteroNeighborSampler(opened, [2], backend=backend).sample([0, 1], node_type, input_time=50)
        without = ringgnn.HeteroNeighborSampler(opened, [2], backend=backend, times=False)
        assert without.sample([0, 1], node_type).node[node_type][:2].tolist() == [0, 1]
    with pytest.raises(ringgnn.CorruptDatasetError, match=message):
        batches = ringgnn.HeteroLoader(ds, [2], node_type, seeds=[0, 1], batch_size=2, input_time=[50, 50])
        next(iter(batches))
    with pytest.raises(ringgnn.CorruptDatasetError, match=re.escape(f"{path}: files.") + ".*payload of"):
        build.verify(ds)
    with pytest.raises(ringgnn.RingGnnError, match=message) as e:
        server(ds).stop(0)
    assert not isinstance(e.value, ringgnn.InputError), type(e.value)
    server(ds, ignore_time=True).stop(0)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_or_odd_time_files_fail_at_open(graphs, tmp_path, kind):
    """A time file gone, or a directory in its place: refused when the dataset is opened (a
    sampler, loader or server of its path), naming the file, not at the first read."""
    ds = copy_of(graphs, kind, tmp_path / "ds")
    _, node_key, edge_key, node_type = KINDS[kind]
    m = json.loads((ds / "manifest.json").read_text())
    edge_file, node_file = ds / m["files"][edge_key]["path"], ds / m["files"][node_key]["path"]
    edge_file.unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(str(edge_file))):
        ringgnn.Dataset.open(ds)
    with pytest.raises(FileNotFoundError, match=re.escape(str(edge_file))):
        ringgnn.HeteroNeighborSampler(ds, [2], backend="pread")
    with pytest.raises(FileNotFoundError, match=re.escape(str(edge_file))):
        ringgnn.HeteroLoader(ds, [2], node_type, seeds=[0, 1], batch_size=2, input_time=[50, 50], backend="pread")
    shutil.copy(graphs / KINDS[kind][0] / edge_file.name, edge_file)
    node_file.unlink()
    node_file.mkdir()
    with pytest.raises(ringgnn.CorruptDatasetError, match=re.escape(f"{node_file}: not a regular file (the manifest "
                                                                    f"lists it as files.node_times)")):
        ringgnn.Dataset.open(ds)
    with pytest.raises(ringgnn.CorruptDatasetError, match=re.escape(f"{node_file}: not a regular file")):
        server(ds).stop(0)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_an_unreadable_time_file_fails_at_open(graphs, tmp_path):
    ds = copy_of(graphs, "typed", tmp_path / "ds")
    m = json.loads((ds / "manifest.json").read_text())
    p = ds / m["files"][KINDS["typed"][2]]["path"]
    p.chmod(0)
    with pytest.raises(PermissionError, match=re.escape(str(p))):
        ringgnn.HeteroNeighborSampler(ds, [2], backend="pread")


def test_convert_time_files_that_are_not_int_arrays(cli, tmp_path):
    (tmp_path / "e.tsv").write_text("2 1\n7 1\n0 1\n1 1\n3 0\n")
    out = tmp_path / "ds"

    def fails(flag, path, *words):
        r = cli("convert", tmp_path / "e.tsv", out, "-q", flag, path)
        assert r.code == 1 and r.err.startswith("ringgnn convert: error: ") and "Traceback" not in r.err, r.err
        for w in (path.name, *words):
            assert w in r.err, (w, r.err)
        assert_nothing_left(out)

    np.save(tmp_path / "obj.npy", np.array([1, 2, 3, 4, 5], dtype=object), allow_pickle=True)
    np.save(tmp_path / "empty.npy", np.zeros(0, np.int64))
    np.save(tmp_path / "n2d.npy", np.zeros((8, 2), np.int64))
    np.save(tmp_path / "be.npy", np.arange(5, dtype=">i8"))
    (tmp_path / "junk.npy").write_text("junk")
    for flag in ("--edge-time", "--node-time"):
        # the option is named, as the checks of dtype, shape and length name it
        fails(flag, tmp_path / "obj.npy",
              f"{flag} {tmp_path / 'obj.npy'}: not a valid .npy file: unsupported dtype '|O'")
        fails(flag, tmp_path / "junk.npy", f"{flag} {tmp_path / 'junk.npy'}: not a valid .npy file")
        fails(flag, tmp_path / "missing.npy", f"{flag} file not found")
    fails("--edge-time", tmp_path / "empty.npy", "has 0 times but the input has 5 edges")
    fails("--node-time", tmp_path / "n2d.npy", "--node-time must be a 1-D array", "shape [8, 2]")
    fails("--edge-time", tmp_path / "be.npy", "big-endian")


def test_link_split_times_outside_int64(cli, tmp_path):
    (tmp_path / "e.tsv").write_text("2 1\n7 1\n0 1\n1 1\n3 0\n")
    np.save(tmp_path / "t.npy", np.array([5, 3, 3, 9, -4], np.int64))
    out = tmp_path / "ds"
    for spec in (f"val={1 << 63}", f"val=-{(1 << 63) + 1}"):
        r = cli("convert", tmp_path / "e.tsv", out, "-q", "--edge-time", tmp_path / "t.npy", "--link-split-time", spec)
        assert r.code == 1 and f"--link-split-time {spec}: a split time must fit int64" in r.err, r.err
        assert_nothing_left(out)


def test_csv_times_outside_int64_and_empty_tables(tmp_path):
    from ringgnn.importers.tables import convert_table

    out = tmp_path / "out"
    for t in (1 << 63, -(1 << 63) - 1):
        (tmp_path / "e.csv").write_text(f"src,dst,t\n1,2,5\n2,3,{t}\n")
        past = "past the largest time, 2\\^63 - 1" if t > 0 else "before the smallest time, -2\\^63"
        with pytest.raises(ringgnn.InputError, match=rf"e.csv: column 't' \(--time-column\) holds double \(line 3 is "
                           rf"{t}, {past}\); times must be integers"):
            convert_table(tmp_path / "e.csv", out, src="src", dst="dst", time_column="t")
        assert_nothing_left(out)
    empty = pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64()), "t": pa.array([], pa.int64())})
    pq.write_table(empty, tmp_path / "empty.parquet")
    with pytest.raises(ringgnn.InputError, match=r"empty.parquet: no rows; the table has no edges"):
        convert_table(tmp_path / "empty.parquet", out, src="src", dst="dst", time_column="t")
    assert_nothing_left(out)


@pytest.mark.parametrize("t,words", [
    (pa.array([1, 1 << 63, 3], pa.uint64()), r"of id 2 \(row 1\) is 9223372036854775808, past the largest time"),
    (pa.array([True, False, True]), "holds bool; times must be integers, timestamps or dates"),
    (pa.array(["", "", ""]), "holds string; times must be integers"),
])
def test_node_time_columns_of_other_types(tmp_path, t, words):
    from ringgnn.importers.tables import convert_table

    pq.write_table(pa.table({"src": [1, 2, 3], "dst": [2, 3, 1]}), tmp_path / "e.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "t": t}), tmp_path / "n.parquet")
    with pytest.raises(ringgnn.InputError, match=r"n.parquet: column 't' \(--node-time-column\) " + words):
        convert_table(tmp_path / "e.parquet", tmp_path / "out", src="src", dst="dst", node_table=tmp_path / "n.parquet",
                      node_id="id", node_time_column="t")
    assert_nothing_left(tmp_path / "out")


def test_pyg_typed_node_times_of_another_length(tmp_path):
    torch = pytest.importorskip("torch")
    tg = pytest.importorskip("torch_geometric.data")
    h = tg.HeteroData()
    h["a"].num_nodes = 2
    h["a"].time = torch.tensor([1, 2, 3])
    h["a", "r", "a"].edge_index = torch.tensor([[0], [1]])
    with pytest.raises(ringgnn.InputError, match=re.escape("data['a'].time: int64 of shape (3,); give one integer time "
                                                           "per node (2)")):
        ringgnn.from_pyg(h, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


@pytest.mark.parametrize("times,words", [
    (np.array([1, 2], dtype=object), "must be integer times .*got dtype object"),
    ([True, False], "must be integer times .*got dtype bool"),
    (["1", "2"], "must be integer times .*got dtype <U1"),
    ([float("nan"), 1.0], "must be integer times .*got dtype float64"),
    ([], "has 0 times for 2 seeds"),
    ([1 << 63, 1], re.escape("[0] = 9223372036854775808: outside the times int64 holds (-2^63 to 2^63 - 1)")),
    ([1, -(1 << 63) - 1], re.escape("[1] = -9223372036854775809: outside the times int64 holds")),
    (np.array([1, 1 << 63], np.uint64), re.escape("[1] = 9223372036854775808: outside the times int64 holds")),
    (np.uint64(1 << 63), re.escape(" = 9223372036854775808: outside the times int64 holds")),
])
def test_input_times_of_other_types_or_outside_int64(graphs, times, words):
    """Seed times that are not integers or do not fit int64 are refused naming input_time (a
    uint64 time past int64 was wrapped to a negative one); int32 and uint64 that fit are taken."""
    ds = ringgnn.Dataset.open(graphs / "ds")
    s = ringgnn.HeteroNeighborSampler(ds, [2])
    with pytest.raises(ringgnn.InputError, match="input_time.*" + words):
        s.sample([0, 1], "node", input_time=times)
    with pytest.raises(ringgnn.InputError, match="input_time.*" + words):
        ringgnn.NeighborSampler(ds, [2]).sample([0, 1], input_time=times)
    want = s.sample([0, 1], "node", input_time=[50, 50]).node["node"].tolist()
    for ok in (np.array([50, 50], np.int32), np.array([50, 50], np.uint64), np.uint64(50)):
        assert s.sample([0, 1], "node", input_time=ok).node["node"].tolist() == want
