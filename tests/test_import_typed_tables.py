"""Typed tables (python/ringgnn/importers/typed_tables.py): a heterogeneous dataset from one edge
table per relation whose columns name nodes by int64 (past 2^32, negative) or string ids, node
tables per type, each type's original ids stored (``node.TYPE.node_ids``) and given back by
``HeteroDataset.node_ids``, and written beside heterogeneous predict/embed outputs."""

from __future__ import annotations

import collections
import csv
from pathlib import Path

import numpy as np
import pytest
import ringgnn
from ringgnn import _core
from ringgnn.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from ringgnn.importers import _arrow, tables  # noqa: E402 (after the skip: the module needs pyarrow)
from ringgnn.importers.typed_tables import TypedNodes, TypedRelation, convert_typed_tables  # noqa: E402

U = [2**40 + 7, -5, 2**33, 2**63 - 1]  # users: int64 ids past 2^32, a negative one
ITEMS = ["b", "", "zoë", "a,b"]  # items: strings (empty in Parquet, unicode, a comma that CSV quotes)
BUYS = [(U[0], "b"), (U[1], "zoë"), (U[0], ""), (U[2], "b"), (U[0], "b"), (U[3], "a,b")]  # a duplicate
FOLLOWS = [(U[0], U[1]), (U[1], U[2]), (U[2], U[2]), (U[3], U[0])]  # a self loop
SIMILAR = [("b", "zoë"), ("a,b", "b"), ("zoë", "zoë")]  # (a CSV's empty field is a missing id: refused)
# user -> (feature, label, split)
USER_ROWS = {U[0]: (0.5, 1, "train"), U[1]: (1.5, None, None), U[2]: (2.5, 0, "val"), U[3]: (3.5, 2, "train")}


def write_tables(d: Path, buys=BUYS, follows=FOLLOWS, users=USER_ROWS, user_order=(2, 0, 3, 1)):
    s, t = zip(*buys)
    pq.write_table(pa.table({"uid": pa.array(s, pa.int64()), "iid": pa.array(t, pa.string())}), d / "buys.parquet",
                   row_group_size=2)
    s, t = zip(*follows)
    pq.write_table(pa.table({"a": pa.array(s, pa.int64()), "b": pa.array(t, pa.int64())}), d / "follows.parquet")
    with open(d / "similar.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["x", "y"])
        w.writerows(SIMILAR)
    ids = [list(users)[i] for i in user_order if i < len(users)]  # not the dense order
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                             "f": pa.array([users[k][0] for k in ids], pa.float32()),
                             "y": pa.array([users[k][1] for k in ids], pa.int64()),
                             "split": pa.array([users[k][2] for k in ids], pa.string())}), d / "users.parquet",
                   row_group_size=2)


def relations(d: Path):
    return [TypedRelation("user:buys:item", d / "buys.parquet", "uid", "iid"),
            TypedRelation("user:follows:user", d / "follows.parquet", "a", "b"),
            TypedRelation("item:similar:item", d / "similar.csv", "x", "y")]


def users(d: Path, **kw):
    return TypedNodes("user", d / "users.parquet", **{"node_id": "id", "feature_columns": ["f"], "label_column": "y",
                                                      "split_column": "split", **kw})


def in_neighbors(pairs):
    out = collections.defaultdict(list)
    for s, t in pairs:
        out[t].append(s)
    return {k: sorted(v) for k, v in out.items()}


def assert_round_trip(out: Path):
    """Every relation, read back through each end's original ids, is its table's edges; each
    type's ids are the distinct ids its relations name, once each."""
    ds = ringgnn.Dataset.open(out)
    assert ds.is_hetero
    users_ = ds.node_ids("user")
    items = ds.node_ids("item")
    assert users_.dtype == np.int64 and sorted(users_.tolist()) == sorted(U)
    assert sorted(items.tolist()) == sorted(ITEMS)
    ids = {"user": users_, "item": items}
    for name, pairs in (("user:buys:item", BUYS), ("user:follows:user", FOLLOWS), ("item:similar:item", SIMILAR)):
        s_type, _, d_type = name.split(":")
        rel = ds.relation(name)
        got = {}
        for v in range(rel.num_nodes):
            nb = rel.neighbors(v)
            if len(nb):
                got[ids[d_type][v]] = sorted(ids[s_type][nb].tolist())
        assert got == in_neighbors(pairs), name
    ringgnn.verify(out)
    return ds


@pytest.mark.parametrize("buckets", [1, 3])
def test_round_trip_of_typed_ids_and_node_table(tmp_path, monkeypatch, buckets):
    monkeypatch.setattr(_arrow, "BATCH_ROWS", 2)
    real = tables.bucket_counts
    monkeypatch.setattr(tables, "bucket_counts",
                        lambda *a: {t: buckets for t in real(*a)})
    write_tables(tmp_path)
    m = convert_typed_tables(tmp_path / "out", relations(tmp_path), [users(tmp_path)])
    assert m["node_types"]["user"]["node_ids"] == {"dtype": "i64", "bytes": 0}
    assert m["node_types"]["item"]["node_ids"] == {"dtype": "str", "bytes": len("bzoëa,b".encode())}
    ds = assert_round_trip(tmp_path / "out")
    if buckets == 1:  # one bucket: dense ids follow the ids' order
        assert ds.node_ids("user").tolist() == sorted(U)
        assert ds.node_ids("item").tolist() == sorted(ITEMS)
    # the node table follows the user ids
    ids = ds.node_ids("user").tolist()
    part = ds.node_type("user")
    x = _core.FeatureReader(str(tmp_path / "out"), part="node/user").gather(np.arange(4, dtype=np.int64))
    np.testing.assert_array_equal(x[:, 0], [USER_ROWS[k][0] for k in ids])
    assert part.labels.tolist() == [-1 if USER_ROWS[k][1] is None else USER_ROWS[k][1] for k in ids]
    assert sorted(part.split_names) == ["train", "val"]
    assert sorted(ds.node_ids("user", part.split("train")).tolist()) == [U[0], U[3]]
    assert ds.node_ids("user", part.split("val")).tolist() == [U[2]]
    assert ds.node_ids("user", [1, 1]).tolist() == [ids[1], ids[1]]
    # the same tables give the same dataset
    convert_typed_tables(tmp_path / "again", relations(tmp_path), [users(tmp_path)])
    again = ringgnn.Dataset.open(tmp_path / "again")
    assert again.node_ids("item").tolist() == ds.node_ids("item").tolist()
    assert again.node_ids("user").tolist() == ids


def test_add_reverse_and_uint_with_signed_columns(tmp_path):
    """An unsigned column and a signed one without negative ids name one type (as u64);
    --add-reverse adds rev_ relations in the same ids."""
    pq.write_table(pa.table({"s": pa.array([2**64 - 1, 7], pa.uint64()), "d": pa.array([1, 2], pa.int64())}),
                   tmp_path / "e.parquet")
    pq.write_table(pa.table({"s": pa.array([7], pa.int64()), "d": pa.array([2**63], pa.uint64())}),
                   tmp_path / "f.parquet")
    m = convert_typed_tables(tmp_path / "out", [TypedRelation("a:to:b", tmp_path / "e.parquet", "s", "d"),
                                                TypedRelation("a:likes:a", tmp_path / "f.parquet", "s", "d")],
                             add_reverse=True)
    assert sorted(m["relations"]) == ["a:likes:a", "a:rev_likes:a", "a:to:b", "b:rev_to:a"]
    ds = ringgnn.Dataset.open(tmp_path / "out")
    a, b = ds.node_ids("a"), ds.node_ids("b")
    assert a.dtype == np.uint64 and a.tolist() == sorted([2**64 - 1, 7, 2**63])
    assert b.dtype == np.int64 and b.tolist() == [1, 2]
    rev = ds.relation("b:rev_to:a")
    got = {int(a[v]): sorted(b[rev.neighbors(v)].tolist()) for v in range(rev.num_nodes) if len(rev.neighbors(v))}
    assert got == {2**64 - 1: [1], 7: [2]}
    ringgnn.verify(tmp_path / "out")


def test_types_without_tables_and_homogeneous_datasets_store_no_ids(tmp_path):
    np.save(tmp_path / "e.npy", np.array([[0, 1]]))
    ringgnn.build_hetero(tmp_path / "h", [ringgnn.NodeType("a", 2)], [ringgnn.Relation("a:r:a", tmp_path / "e.npy")])
    ds = ringgnn.Dataset.open(tmp_path / "h")
    assert ds.node_ids("a") is None and not ds.node_type("a").has_node_ids
    assert "node_ids" not in (tmp_path / "h" / "manifest.json").read_text()  # old manifests unchanged


# --- bad input ---------------------------------------------------------------------------------


def assert_nothing_left(out: Path):
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


def _missing_user(d):  # a user of the relations without a row in the node table
    write_tables(d, user_order=(2, 0, 1))


def _duplicate_user(d):
    write_tables(d, user_order=(2, 0, 3, 1, 0))


BAD = [
    (_missing_user, {}, rf"users.parquet: id {U[3]} of the edges has no row; every node needs one"),
    (_duplicate_user, {}, rf"users.parquet: id {U[0]} has 2 rows; give each node one row"),
    (lambda d: write_tables(d, users={**USER_ROWS, 99: (0.0, 0, None)}, user_order=(0, 1, 2, 3, 4)), {},
     r"users.parquet: id 99 \(row 4\) is named by no edge; remove its row"),
    (write_tables, {"relations": lambda d: [TypedRelation("user:buys:item", d / "buys.parquet", "user", "iid")]},
     r"buys.parquet: no column 'user' \(--src of user:buys:item\); it has: uid, iid"),
    (write_tables, {"nodes": lambda d: [users(d, feature_columns=["f", "g"])]},
     r"users.parquet: no column 'g' \(--feature-columns\); it has: id, f, y, split"),
    (write_tables, {"relations": lambda d: relations(d) + [TypedRelation("user:in:user", d / "similar.csv", "x", "y")]},
     r"node type 'user': .*similar.csv: column 'x' holds strings but .*buys.parquet: column 'uid' holds integers"),
    (write_tables, {"nodes": lambda d: [TypedNodes("shop", d / "users.parquet", "id", ["f"])]},
     r"users.parquet: node type 'shop' is in no relation"),
    (lambda d: write_tables(d) or pq.write_table(pa.table({"a": pa.array([-1], pa.int64()),
                                                            "b": pa.array([2**63], pa.uint64())}),
                                                  d / "follows.parquet"), {"nodes": lambda d: []},
     r"buys.parquet: column 'uid' row 1 is -5, negative, while other columns naming node type 'user' are unsigned"),
    (write_tables, {"relations": lambda d: relations(d)[:1] * 2}, r"relation user:buys:item is given twice"),
    (write_tables, {"relations": lambda d: [TypedRelation("user:buys", d / "buys.parquet", "uid", "iid")]},
     r"relation 'user:buys' must be SRC:REL:DST"),
]


@pytest.mark.parametrize("make,kw,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_typed_tables_name_the_file_and_leave_nothing(tmp_path, make, kw, pattern):
    make(tmp_path)
    rels = kw.get("relations", relations)(tmp_path)
    nodes = kw.get("nodes", lambda d: [users(d)])(tmp_path)
    with pytest.raises(_core.InputError, match=pattern):
        convert_typed_tables(tmp_path / "out", rels, nodes)
    assert_nothing_left(tmp_path / "out")


# --- the command line --------------------------------------------------------------------------


def test_cli(tmp_path, capsys):
    write_tables(tmp_path)
    d = str(tmp_path)
    args = ["convert", f"user:buys:item={d}/buys.parquet", f"{d}/a", "--src", "user:buys:item=uid", "--dst",
            "user:buys:item=iid", "--relation", f"user:follows:user={d}/follows.parquet", "--src", "a", "--dst", "b",
            "--relation", f"item:similar:item={d}/similar.csv", "--src", "item:similar:item=x", "--dst",
            "item:similar:item=y", "--node-table", f"user={d}/users.parquet", "--node-id", "id",
            "--feature-columns", "user=f", "--label-column", "user=y", "--split-column", "split", "-q"]
    assert main(args) == 0
    ds = assert_round_trip(tmp_path / "a")
    assert ds.node_type("user").num_classes == 3
    capsys.readouterr()
    assert main(["info", f"{d}/a"]) == 0
    out = capsys.readouterr().out
    assert "original ids (i64): node_ids('user')" in out and "original ids (str): node_ids('item')" in out
    assert main(args[:2] + [f"{d}/b"] + args[3:] + ["--undirected"]) == 1
    assert "--undirected: not options of typed tables" in capsys.readouterr().err
    assert main(args[:2] + [f"{d}/b"] + args[3:] + ["--label-column", "item=y"]) == 1
    assert "--label-column item=y: 'item' is not a node type of the tables (they have: user)" in \
        capsys.readouterr().err
    assert main(["convert", f"user:buys:item={d}/buys.parquet", f"{d}/b", "--src", "uid"]) == 1
    assert "relation user:buys:item" in (err := capsys.readouterr().err) and "--dst user:buys:item=COL" in err
    assert main(["convert", f"{d}/buys.parquet", f"{d}/b", "--src", "uid", "--dst", "iid", "--relation",
                 f"user:follows:user={d}/follows.parquet"]) == 1
    assert "INPUT is a relation's table too: SRC:REL:DST=FILE" in capsys.readouterr().err
    assert main(["convert", f"{d}/buys.parquet", f"{d}/b", "--src", "uid", "--src", "x", "--dst", "iid"]) == 1
    assert "--src is given 2 times" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


# --- original ids beside heterogeneous outputs -------------------------------------------------


def test_predict_and_embed_write_each_types_original_ids(tmp_path):
    from ringgnn.inference.hetero import infer_hetero
    from ringgnn.training.loop import train

    write_tables(tmp_path)
    convert_typed_tables(tmp_path / "ds", relations(tmp_path), [users(tmp_path)], add_reverse=True)
    run = tmp_path / "run"
    train(tmp_path / "ds", target="user", model="sage", hidden=8, layers=2, batch_size=4, out=str(run),
                 epochs=1, quiet=True, log=lambda s: None)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    s = infer_hetero(str(run), out=str(tmp_path / "pred.npy"), output="predictions", nodes=np.array([3, 0]))
    assert s["node_ids"] == str(tmp_path / "pred.node_ids.npy")
    assert np.load(tmp_path / "pred.node_ids.npy").tolist() == ds.node_ids("user", [3, 0]).tolist()
    s = infer_hetero(str(run), out=str(tmp_path / "emb.npy"), node_type="item", output="embeddings", layer=1)
    got = np.load(tmp_path / "emb.node_ids.npy")
    assert got.dtype.kind == "U" and got.tolist() == ds.node_ids("item").tolist()
    assert np.load(tmp_path / "emb.npy").shape[0] == len(got)
