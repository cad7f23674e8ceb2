"""Fault injection for the importers (``python/ringgnn/importers/``: Parquet/CSV tables, OGB
directories, PyG objects): each class of bad input is refused with one message naming the
user's input (never a staged copy) and what to do, and nothing is left beside the output.

Classes (issue 34): a table column named twice; a CSV line of the wrong width, or with an empty
id; labels that would make absurd class counts; split names (``valid``/``validation`` are
``val``, an empty cell is no split) spelled one way for every source; errors about a staged copy
(a node twice in a split, an integer 0/1 mask) named by the input; the node count of OGB input
named by its file, not by an option it does not take; OS errors (a full disk, a file size
limit) naming the operation and the path."""

from __future__ import annotations

import gzip
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ringgnn
from conftest import assert_nothing_left, mount_tmpfs, unmount_below
from ringgnn import _core
from ringgnn.importers.ogb import convert_ogb

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from ringgnn.importers.tables import convert_table  # noqa: E402 (needs pyarrow)
from ringgnn.importers.typed_tables import TypedNodes, TypedRelation, convert_typed_tables  # noqa: E402

STAGED = re.compile(r"ringgnn-tmp|\d+-(split|labels|features|edges)[\w-]*\.npy")


def refused(call, message: str, out: Path) -> str:
    """``call()`` raises an InputError whose message is exactly ``message`` (``{d}`` = out's
    folder); no staged file is named and nothing is left beside ``out``."""
    with pytest.raises(_core.InputError) as e:
        call()
    text = str(e.value)
    assert text == message.format(d=out.parent), text
    assert not STAGED.search(text), text
    assert_nothing_left(out)
    return text


def gz(path: Path, lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.writelines(f"{x}\n" for x in lines)
    return path


def ogb_dir(root: Path, n=6, edges=((0, 1), (1, 2), (2, 0), (3, 4), (4, 5)), labels=(0, 1, 2, 1, 0, 2),
            splits=None) -> Path:
    gz(root / "raw" / "edge.csv.gz", [f"{s},{d}" for s, d in edges])
    gz(root / "raw" / "num-node-list.csv.gz", [n])
    if labels is not None:
        gz(root / "raw" / "node-label.csv.gz", labels)
    for name, ids in (splits or {"train": [0, 1, 2], "valid": [3], "test": [4, 5]}).items():
        gz(root / "split" / "time" / f"{name}.csv.gz", ids)
    return root


def pyg(n=4, **attrs):
    import torch
    from torch_geometric.data import Data

    ring = torch.tensor([list(range(n)), [(i + 1) % n for i in range(n)]])
    return Data(edge_index=ring, num_nodes=n, **attrs)


# --- a column named twice --------------------------------------------------------------------


def dup_parquet(path: Path) -> None:
    pq.write_table(pa.Table.from_arrays([pa.array([1, 2]), pa.array([2, 3]), pa.array([3, 1])],
                                        names=["a", "b", "a"]), path)


@pytest.mark.parametrize("name,write,kw,message", [
    ("e.csv", lambda p: p.write_text("a,a\n1,2\n"), {"src": "a", "dst": "a"},
     "the header names 2 columns 'a' (--src; columns 1, 2)"),
    ("e.csv", lambda p: p.write_text("a,b,b\n1,2,3\n"), {"src": "a", "dst": "b"},
     "the header names 2 columns 'b' (--dst; columns 2, 3)"),
    ("e.parquet", dup_parquet, {"src": "a", "dst": "b"}, "the header names 2 columns 'a' (--src; columns 1, 3)"),
], ids=["csv-src", "csv-dst", "parquet"])
def test_a_column_named_twice_is_refused_naming_file_and_column(tmp_path, name, write, kw, message):
    write(tmp_path / name)
    refused(lambda: convert_table(tmp_path / name, tmp_path / "out", **kw),
            f"{{d}}/{name}: {message}; give each column its own name", tmp_path / "out")


def test_a_node_table_column_named_twice_is_refused(tmp_path, cli):
    (tmp_path / "e.csv").write_text("a,b\n1,2\n2,3\n")
    (tmp_path / "n.csv").write_text("id,y,y\n1,0,1\n2,1,1\n3,0,0\n")
    out = tmp_path / "out"
    r = cli("convert", tmp_path / "e.csv", out, "--src", "a", "--dst", "b", "--node-table", tmp_path / "n.csv",
            "--node-id", "id", "--label-column", "y", "--quiet")
    assert (r.code, r.err) == (1, f"ringgnn convert: error: {tmp_path}/n.csv: the header names 2 columns 'y' "
                                  "(--label-column; columns 2, 3); give each column its own name\n")
    assert_nothing_left(out)
    # typed tables check their relation tables the same way
    refused(lambda: convert_typed_tables(out, [TypedRelation("u:r:u", tmp_path / "n.csv", "y", "id")]),
            "{d}/n.csv: the header names 2 columns 'y' (--src of u:r:u; columns 2, 3); give each column its own "
            "name", out)


# --- CSV lines: width and empty ids ----------------------------------------------------------


@pytest.mark.parametrize("text,message", [
    ("a,b\n1,2\n2,3,4\n3,1\n", "line 3 has 3 fields, and the header 2 ('2,3,4')"),
    ("a,b\n1,2\n2,3\n3,1\n4\n", "line 5 has 1 field, and the header 2 ('4')"),
    ("a,b\n" + "".join(f"{i},{i + 1}\n" for i in range(50_000)) + "x,y,z,w\n", "line 50002 has 4 fields, and the "
     "header 2 ('x,y,z,w')"),
], ids=["long", "short", "late"])
def test_a_ragged_csv_line_is_named_by_its_number(tmp_path, text, message):
    (tmp_path / "e.csv").write_text(text)
    refused(lambda: convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b"),
            f"{{d}}/e.csv: {message}; give every line the header's columns (quote a field that holds a comma)",
            tmp_path / "out")


def test_a_ragged_node_table_line_is_named(tmp_path):
    (tmp_path / "e.csv").write_text("a,b\n1,2\n")
    (tmp_path / "n.csv").write_text("id,y\n1,0\n2,1,5\n")
    refused(lambda: convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b", node_table=tmp_path /
                                  "n.csv", node_id="id", label_column="y"),
            "{d}/n.csv: line 3 has 3 fields, and the header 2 ('2,1,5'); give every line the header's columns "
            "(quote a field that holds a comma)", tmp_path / "out")


@pytest.mark.parametrize("text,message", [
    ("a,b\n1,2\n,3\n", "column 'a': line 3 is empty; every row needs its id (--src)"),
    ("a,b\n1,2\n2,3\n3,\n", "column 'b': line 4 is empty; every row needs its id (--dst)"),
    ('a,b\n1,2\n"",3\n', "column 'a': line 3 is empty; every row needs its id (--src)"),
], ids=["src", "dst", "quoted"])
def test_an_empty_csv_id_is_refused_naming_file_and_line(tmp_path, text, message):
    (tmp_path / "e.csv").write_text(text)
    refused(lambda: convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b"), f"{{d}}/e.csv: {message}",
            tmp_path / "out")


def test_empty_ids_of_node_tables_and_relations_are_refused_but_parquet_keeps_empty_strings(tmp_path):
    (tmp_path / "e.csv").write_text("a,b\nx,y\n")
    (tmp_path / "n.csv").write_text("id,y\nx,0\n,1\n")
    out = tmp_path / "out"
    refused(lambda: convert_table(tmp_path / "e.csv", out, src="a", dst="b", node_table=tmp_path / "n.csv",
                                  node_id="id", label_column="y"),
            "{d}/n.csv: column 'id': line 3 is empty; every row needs its id (--node-id)", out)
    (tmp_path / "r.csv").write_text("s,t\nx,y\ny,\n")
    refused(lambda: convert_typed_tables(out, [TypedRelation("u:r:u", tmp_path / "r.csv", "s", "t")]),
            "{d}/r.csv: column 't': line 3 is empty; every row needs its id (--dst of u:r:u)", out)
    # Parquet has nulls: its empty string is an id like any other, its null a missing one
    pq.write_table(pa.table({"a": ["", "x"], "b": ["x", ""]}), tmp_path / "e.parquet")
    convert_table(tmp_path / "e.parquet", out, src="a", dst="b")
    assert sorted(ringgnn.Dataset.open(out).node_ids().tolist()) == ["", "x"]
    pq.write_table(pa.table({"a": ["", None], "b": ["x", "y"]}), tmp_path / "e.parquet")
    refused(lambda: convert_table(tmp_path / "e.parquet", tmp_path / "o2", src="a", dst="b"),
            "{d}/e.parquet: column 'a': row 1 is empty (null); every row needs its id (--src)", tmp_path / "o2")


# --- labels: class counts -------------------------------------------------------------------


def test_a_stray_label_is_refused_from_every_source(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "e.csv").write_text("a,b\n1,2\n2,3\n")
    (tmp_path / "n.csv").write_text("id,y\n1,0\n2,1000000000\n3,1\n")
    refused(lambda: convert_table(tmp_path / "e.csv", out, src="a", dst="b", node_table=tmp_path / "n.csv",
                                  node_id="id", label_column="y"),
            "{d}/n.csv: column 'y' (--label-column): label 1000000000 makes 1,000,000,001 classes (the largest "
            "label + 1), but only 3 nodes are labeled; number the classes 0 .. C-1 (numpy.unique(y, "
            "return_inverse=True)), or fix the wrong value", out)
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "y": [0.0, 7e10, None]}), tmp_path / "n.parquet")
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64()), "b": pa.array([2, 3], pa.int64())}),
                   tmp_path / "e.parquet")
    refused(lambda: convert_table(tmp_path / "e.parquet", out, src="a", dst="b", node_table=tmp_path / "n.parquet",
                                  node_id="id", label_column="y"),
            "{d}/n.parquet: column 'y' (--label-column): label 70000000000 makes 70,000,000,001 classes (the largest "
            "label + 1), but only 2 nodes are labeled; number the classes 0 .. C-1 (numpy.unique(y, "
            "return_inverse=True)), or fix the wrong value", out)
    refused(lambda: convert_typed_tables(out, [TypedRelation("u:r:u", tmp_path / "e.csv", "a", "b")],
                                         [TypedNodes("u", tmp_path / "n.csv", "id", label_column="y")]),
            "{d}/n.csv: column 'y' (--label-column): label 1000000000 makes 1,000,000,001 classes (the largest "
            "label + 1), but only 3 nodes are labeled; number the classes 0 .. C-1 (numpy.unique(y, "
            "return_inverse=True)), or fix the wrong value", out)
    root = ogb_dir(tmp_path / "ogbn", labels=(0, 1, "", 1e9, 0, 2))
    refused(lambda: convert_ogb(root, out),
            f"{root}/raw/node-label.csv.gz: label 1000000000 makes 1,000,000,001 classes (the largest label + 1), "
            "but only 5 nodes are labeled; number the classes 0 .. C-1 (numpy.unique(y, return_inverse=True)), or "
            "fix the wrong value", out)
    import torch

    refused(lambda: ringgnn.from_pyg(pyg(y=torch.tensor([0, 1, 2**40, -1])), out),
            "data.y: label 1099511627776 makes 1,099,511,627,777 classes (the largest label + 1), but only 3 nodes "
            "are labeled; number the classes 0 .. C-1 (numpy.unique(y, return_inverse=True)), or fix the wrong "
            "value", out)


def test_a_sparse_label_range_is_refused_and_a_dense_one_of_many_classes_kept(tmp_path):
    import torch

    n = 100_000
    y = torch.zeros(n, dtype=torch.long)
    y[7] = n - 1  # 100,000 classes, 2 of them used
    refused(lambda: ringgnn.from_pyg(pyg(n, y=y), tmp_path / "out"),
            "data.y: label 99999 makes 100,000 classes (the largest label + 1), but only 2 of those class ids are "
            "used; number the classes 0 .. C-1 (numpy.unique(y, return_inverse=True)), or fix the wrong value",
            tmp_path / "out")
    y = torch.arange(n) % 70_000  # 70,000 classes, every one used
    ringgnn.from_pyg(pyg(n, y=y), tmp_path / "many")
    assert ringgnn.Dataset.open(tmp_path / "many").manifest["labels"]["num_classes"] == 70_000
    # up to 65,536 classes any values are taken (small graphs with fixed class ids)
    ringgnn.from_pyg(pyg(3, y=torch.tensor([0, 65_535, -1])), tmp_path / "few")
    assert ringgnn.Dataset.open(tmp_path / "few").manifest["labels"]["num_classes"] == 65_536
    refused(lambda: ringgnn.from_pyg(pyg(3, y=torch.tensor([0, 65_536, -1])), tmp_path / "out"),
            "data.y: label 65536 makes 65,537 classes (the largest label + 1), but only 2 nodes are labeled; number "
            "the classes 0 .. C-1 (numpy.unique(y, return_inverse=True)), or fix the wrong value", tmp_path / "out")


# --- split names: one spelling for every source ---------------------------------------------


def test_split_names_of_tables_are_ringgnns_and_empty_cells_are_no_split(tmp_path):
    (tmp_path / "e.csv").write_text("a,b\n1,2\n2,3\n3,4\n4,5\n5,6\n6,1\n")
    (tmp_path / "n.csv").write_text("id,s\n1,train\n2,valid\n3,validation\n4,\n5,Test\n6, Val \n")
    out = tmp_path / "csv"
    convert_table(tmp_path / "e.csv", out, src="a", dst="b", node_table=tmp_path / "n.csv", node_id="id",
                  split_column="s")
    ds = ringgnn.Dataset.open(out)
    assert ds.split_names == ["test", "train", "val"]
    assert {s: sorted(ds.node_ids(ds.split(s)).tolist()) for s in ds.split_names} == \
        {"train": ["1"], "val": ["2", "3", "6"], "test": ["5"]}
    pq.write_table(pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": pa.array([2, 3, 1], pa.int64())}),
                   tmp_path / "e.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["VALID", None, ""]}),
                   tmp_path / "n.parquet")
    convert_table(tmp_path / "e.parquet", tmp_path / "pq", src="a", dst="b", node_table=tmp_path / "n.parquet",
                  node_id="id", split_column="s")
    ds = ringgnn.Dataset.open(tmp_path / "pq")
    assert ds.split_names == ["val"] and ds.node_ids(ds.split("val")).tolist() == [1]
    (tmp_path / "n.csv").write_text("id,s\n1,train\n2,val/2\n3,\n4,\n5,\n6,\n")
    refused(lambda: convert_table(tmp_path / "e.csv", tmp_path / "out", src="a", dst="b",
                                  node_table=tmp_path / "n.csv", node_id="id", split_column="s"),
            "{d}/n.csv: split 'val/2' (--split-column 's') is not a split name; use letters a-z, digits and _ "
            "(train, val, test)", tmp_path / "out")


def test_split_names_of_ogb_and_pyg_are_the_same(tmp_path):
    import torch

    root = ogb_dir(tmp_path / "ogbn")
    for s in ("train", "valid", "test"):
        os.remove(root / "split" / "time" / f"{s}.csv.gz")
    torch.save({"train": np.array([0, 1]), "validation": np.array([2]), "Test": np.array([3])},
               root / "split" / "time" / "split_dict.pt")
    convert_ogb(root, tmp_path / "ogb")
    assert ringgnn.Dataset.open(tmp_path / "ogb").split_names == ["test", "train", "val"]
    torch.save({"train": np.array([0, 1]), "valid": np.array([2]), "val": np.array([3])},
               root / "split" / "time" / "split_dict.pt")
    refused(lambda: convert_ogb(root, tmp_path / "out"),
            f"{root}/split/time/split_dict.pt: splits 'valid' and 'val' are both split 'val'; give one of them",
            tmp_path / "out")
    mask = torch.tensor([False, True, True, False])
    ringgnn.from_pyg(pyg(valid_mask=mask, train_idx=torch.tensor([0])), tmp_path / "attrs")
    ds = ringgnn.Dataset.open(tmp_path / "attrs")
    assert ds.split_names == ["train", "val"] and ds.split("val").tolist() == [1, 2]
    ringgnn.from_pyg(pyg(), tmp_path / "dict", split={"Validation": mask, "train": torch.tensor([0])})
    assert ringgnn.Dataset.open(tmp_path / "dict").split("val").tolist() == [1, 2]
    refused(lambda: ringgnn.from_pyg(pyg(val_mask=mask, valid_idx=torch.tensor([0])), tmp_path / "out"),
            "data.val_mask and data.valid_idx both give split 'val'; give one", tmp_path / "out")


# --- errors about staged copies name the input -----------------------------------------------


def test_a_node_twice_in_a_split_names_the_input(tmp_path):
    import torch
    from torch_geometric.data import HeteroData

    root = ogb_dir(tmp_path / "ogbn", splits={"train": [0, 1, 1], "valid": [3], "test": [4]})
    out = tmp_path / "out"
    refused(lambda: convert_ogb(root, out),
            f"{root}/split/time/train.csv.gz: node 1 appears more than once in split 'train' (again at entry 2); "
            "list each node once, e.g. with np.unique", out)
    for s in ("train", "valid", "test"):
        os.remove(root / "split" / "time" / f"{s}.csv.gz")
    torch.save({"train": np.array([0]), "valid": np.array([2, 5, 2]), "test": np.array([3])},
               root / "split" / "time" / "split_dict.pt")
    refused(lambda: convert_ogb(root, out),
            f"{root}/split/time/split_dict.pt: 'valid': node 2 appears more than once in split 'val' (again at entry "
            "2); list each node once, e.g. with np.unique", out)
    refused(lambda: ringgnn.from_pyg(pyg(train_idx=torch.tensor([3, 0, 3])), out),
            "data.train_idx: node 3 appears more than once in split 'train' (again at entry 2); list each node once, "
            "e.g. with np.unique", out)
    refused(lambda: ringgnn.from_pyg(pyg(), out, split={"test": np.array([2, 2])}),
            "split['test']: node 2 appears more than once in split 'test' (again at entry 1); list each node once, "
            "e.g. with np.unique", out)
    h = HeteroData()
    h["paper"].num_nodes = 3
    h["paper"].train_idx = torch.tensor([1, 1])
    h["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 2]])
    refused(lambda: ringgnn.from_pyg(h, out),
            "node type 'paper': data['paper'].train_idx: node 1 appears more than once in split 'train' (again at entry 1); list each "
            "node once, e.g. with np.unique", out)


@pytest.mark.parametrize("attrs,split,message", [
    ({"train_mask": [1, 0, 1, 0]}, None, "data.train_mask: a mask of int64 values"),
    ({"test_mask": [0, 0, 0, 1]}, None, "data.test_mask: a mask of int64 values"),
    ({"train_idx": [0, 1, 1, 0]}, None, "data.train_idx: a mask of int64 0/1 values"),
    ({}, {"val": [1, 0, 0, 0]}, "split['val']: a mask of int64 0/1 values"),
    ({}, {"train": [0, 0, 0, 0]}, "split['train']: a mask of int64 0/1 values"),
], ids=["train_mask", "test_mask", "idx", "dict", "zeros"])
def test_an_integer_mask_is_refused_with_the_fix(tmp_path, attrs, split, message):
    import torch

    t = {k: torch.tensor(v) for k, v in attrs.items()}
    s = None if split is None else {k: torch.tensor(v) for k, v in split.items()}
    refused(lambda: ringgnn.from_pyg(pyg(**t), tmp_path / "out", split=s),
            f"{message} would be read as node ids; pass a boolean mask (mask.bool()), or the node ids "
            "(mask.nonzero().flatten())", tmp_path / "out")


def test_integer_ids_that_look_like_bits_but_are_ids_are_kept(tmp_path):
    import torch

    ringgnn.from_pyg(pyg(train_idx=torch.tensor([0, 1]), val_mask=torch.tensor([False, False, True, True])),
                     tmp_path / "a")
    ds = ringgnn.Dataset.open(tmp_path / "a")
    assert ds.split("train").tolist() == [0, 1] and ds.split("val").tolist() == [2, 3]
    ringgnn.from_pyg(pyg(2, train_idx=torch.tensor([1, 0])), tmp_path / "b")  # two nodes: ids, not a mask
    assert ringgnn.Dataset.open(tmp_path / "b").split("train").tolist() == [1, 0]


def test_ogb_input_names_its_node_count_not_an_option(tmp_path, cli):
    root = ogb_dir(tmp_path / "ogbn", edges=((0, 1), (1, 7)))
    out = tmp_path / "out"
    message = (f"{root}/raw/edge.csv.gz line 2: node id 7 is >= the node count 6 ({root}/raw/num-node-list.csv.gz); "
               "fix the ids, or the count there")
    refused(lambda: convert_ogb(root, out), message, out)
    r = cli("convert", root, out, "--quiet")
    assert (r.code, r.err) == (1, f"ringgnn convert: error: {message}\n")
    assert "--num-nodes" not in r.err
    assert_nothing_left(out)


# --- OS errors name the operation and the path -----------------------------------------------


def _inputs(d: Path) -> dict:
    """A Parquet table, a CSV table and an OGB directory whose staged files take a few MB."""
    n = 150_000
    ids = (np.arange(n, dtype=np.int64) * 7919) % 1_000_003
    pq.write_table(pa.table({"a": ids, "b": np.roll(ids, 1)}), d / "e.parquet")
    with open(d / "e.csv", "w") as f:
        f.write("a,b\n")
        f.writelines(f"u{i},u{(i + 1) % n}\n" for i in range(n))
    root = d / "ogbn"
    (root / "raw").mkdir(parents=True)
    np.savez(root / "raw" / "data.npz", edge_index=np.stack([np.arange(n), np.roll(np.arange(n), 1)]),
             num_nodes_list=np.array([n]))
    return {"parquet": [d / "e.parquet", "--src", "a", "--dst", "b"], "csv": [d / "e.csv", "--src", "a", "--dst", "b"],
            "ogb": [root]}


def _convert_in(args, out: Path, limit_bytes=None) -> subprocess.CompletedProcess:
    def limit():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    return subprocess.run([sys.executable, "-m", "ringgnn", "convert", *map(str, args), str(out), "--quiet"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, preexec_fn=limit)


ERROR = re.compile(r"ringgnn convert: error: (writing|reading|importing, in the staging directory|writing the "
                   r"original ids in) (/\S+): (.*) \[Errno (\d+)\]\n")


def _assert_os_error(r: subprocess.CompletedProcess, out: Path, errno_: int, reason: str) -> None:
    assert r.returncode == 1, r.stderr
    m = ERROR.fullmatch(r.stderr)
    assert m, r.stderr
    assert (int(m.group(4)), m.group(3)) == (errno_, reason), r.stderr
    assert m.group(2).startswith(str(out.parent)), r.stderr  # the file that failed, beside OUT
    assert_nothing_left(out)


@pytest.mark.parametrize("source", ["parquet", "csv", "ogb"])
def test_a_file_size_limit_is_an_error_naming_the_file(tmp_path, source):
    args = _inputs(tmp_path)[source]
    out = tmp_path / "out"
    r = _convert_in(args, out, limit_bytes=256 << 10)
    _assert_os_error(r, out, 27, "File too large")


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    """A 2 MiB tmpfs (skipped where mounting is not allowed)."""
    d = tmp_path_factory.mktemp("disk")
    mnt = mount_tmpfs(d / "mnt", "2M")
    try:
        yield d, mnt
    finally:
        unmount_below(d)


@pytest.mark.parametrize("source", ["parquet", "csv", "ogb"])
def test_a_full_disk_is_an_error_naming_the_file(full_disk, source):
    d, mnt = full_disk
    args = _inputs(d / source if (d / source).exists() else (d / source).mkdir() or d / source)[source]
    out = mnt / "out"
    r = _convert_in(args, out)
    _assert_os_error(r, out, 28, "No space left on device")
    assert os.listdir(mnt) == []
