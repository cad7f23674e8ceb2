"""`ringgnn.convert` from Python: a property test over random small graphs and every format, and
the Python-side argument handling (sizes, splits, errors)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringgnn
from conftest import assert_csc, reference_csc, write_bin, write_npy, write_text
from ringgnn._options import parse_size, parse_split

MAX_ID = 40

edge_lists = st.lists(st.tuples(st.integers(0, MAX_ID), st.integers(0, MAX_ID)), max_size=60)
# Duplicates and self loops are common on purpose: draw from a few nodes sometimes.
few_nodes = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=20)
options = st.fixed_dictionaries(
    {
        "undirected": st.booleans(),
        "self_loops": st.sampled_from(["keep", "drop"]),
        "dedup": st.booleans(),
        "extra_nodes": st.one_of(st.none(), st.integers(0, 5)),
        "fmt": st.sampled_from(["tsv", "csv", "gz", "bin32", "bin64", "npy-E2", "npy-2E"]),
    }
)


def _write(dir: Path, edges, fmt: str) -> Path:
    if fmt == "tsv":
        return write_text(dir / "e.tsv", edges, "\t")
    if fmt == "csv":
        return write_text(dir / "e.csv", edges, ",")
    if fmt == "gz":
        return write_text(dir / "e.txt.gz", edges, " ", header=["# random"])
    if fmt in ("bin32", "bin64"):
        return write_bin(dir / f"e.{fmt}", edges, int(fmt[3:]))
    return write_npy(dir / "e.npy", edges, "int64", fmt.split("-")[1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=st.one_of(edge_lists, few_nodes), opts=options)
def test_random_graphs_match_reference(edges, opts):
    max_id = max((max(e) for e in edges), default=-1)
    num_nodes = None if opts["extra_nodes"] is None else max_id + 1 + opts["extra_nodes"]
    # 128M, the builder's minimum budget: small buffers keep each example quick.
    graph = dict(undirected=opts["undirected"], self_loops=opts["self_loops"], dedup=opts["dedup"], memory="128M")
    with tempfile.TemporaryDirectory() as d:
        src = _write(Path(d), edges, opts["fmt"])
        out = Path(d) / "ds"
        if not edges and num_nodes is None:
            with pytest.raises(ringgnn.InputError, match="no edges"):
                ringgnn.convert(src, out, num_nodes=num_nodes, **graph)
            assert not out.exists()
            return
        manifest = ringgnn.convert(src, out, num_nodes=num_nodes, **graph)
        if opts["fmt"] == "npy-2E" and len(edges) == 2:
            # Shape (2, 2) is ambiguous; FORMAT.md reads it as (E, 2), one edge per row.
            (s0, d0), (s1, d1) = edges
            edges = [(s0, s1), (d0, d1)]
        expected = reference_csc(
            edges,
            num_nodes=num_nodes,
            undirected=opts["undirected"],
            self_loops=opts["self_loops"],
            dedup=opts["dedup"],
        )
        assert manifest["num_nodes"] == len(expected)
        assert_csc(out, expected)
        degrees = [len(x) for x in expected] or [0]
        assert manifest["degree"]["max"] == max(degrees) and manifest["degree"]["min"] == min(degrees)
        assert manifest["degree"]["zero"] == [len(x) for x in expected].count(0)


def test_convert_returns_manifest_and_accepts_paths(tmp_path, small_tsv):
    m = ringgnn.convert(small_tsv, tmp_path / "ds", memory="128M", threads=1)
    assert m == ringgnn.read_manifest(tmp_path / "ds")
    assert m["format"] == "ringgnn-dataset" and m["num_edges"] == 10


def test_convert_errors_are_typed(tmp_path, small_tsv):
    ringgnn.convert(small_tsv, tmp_path / "ds")
    with pytest.raises(ringgnn.DatasetExistsError) as e:
        ringgnn.convert(small_tsv, tmp_path / "ds")
    assert isinstance(e.value, FileExistsError) and isinstance(e.value, ringgnn.RingGnnError)
    with pytest.raises(FileNotFoundError) as e:
        ringgnn.convert(tmp_path / "missing.tsv", tmp_path / "ds2")
    assert e.value.filename == str(tmp_path / "missing.tsv")
    with pytest.raises(ringgnn.InputError):
        ringgnn.convert(small_tsv, tmp_path / "ds3", self_loops="sometimes")
    with pytest.raises(ringgnn.InputError, match="--format"):
        ringgnn.convert(small_tsv, tmp_path / "ds3", format="parquet")
    with pytest.raises(ringgnn.InputError):
        ringgnn.convert(small_tsv, tmp_path / "ds3", threads=0)
    with pytest.raises(ValueError):  # InputError is a ValueError
        ringgnn.convert(small_tsv, tmp_path / "ds3", memory="a lot")


def test_split_mapping(tmp_path, small_tsv):
    m = ringgnn.convert(small_tsv, tmp_path / "ds", split={"train": 0.5, "test": 0.5}, seed=1)
    assert sorted(m["splits"]) == ["test", "train"] and sum(m["splits"].values()) == 6


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", 0),
        ("4096", 4096),
        ("512M", 512 << 20),
        ("1G", 1 << 30),
        ("64k", 64 << 10),
        ("2T", 2 << 40),
        ("3GiB", 3 << 30),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "1.5G", "-1", "12X", "1 G B"])
def test_parse_size_rejects(text):
    with pytest.raises(ringgnn.InputError, match="not a size"):
        parse_size(text)


def test_parse_split():
    assert parse_split("train=0.5, val=0.1,test=0.4") == [("train", 0.5), ("val", 0.1), ("test", 0.4)]
    assert parse_split("train=a.npy,val=dir/b.npy") == [("train", "a.npy"), ("val", "dir/b.npy")]
    assert parse_split({"train": 1}) == [("train", 1.0)]
    for bad, msg in [("", "names no split"), ("train=0.5,train=0.2", "more than once"), ("=0.5", "NAME=VALUE")]:
        with pytest.raises(ringgnn.InputError, match=msg):
            parse_split(bad)


def test_uint64_npy_input_gives_int64_neighbors(tmp_path):
    edges = np.array([[0, 1], [1, 0]], dtype=np.uint64)
    np.save(tmp_path / "e.npy", edges)
    ringgnn.convert(tmp_path / "e.npy", tmp_path / "ds")
    assert ringgnn.Dataset.open(tmp_path / "ds").neighbors(0).dtype == np.int64
