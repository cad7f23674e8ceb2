"""Edge splits of one relation of a heterogeneous dataset (docs/FORMAT.md "Edge splits of a
relation"): built from Python and by ``ringgnn generate hetero --link-split``, read back through
``HeteroDataset.relation(r)``, reported by ``info``, checked by ``verify``; the reverse relation
drops the held-out pairs; every bad input refused with nothing written."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import ringgnn
from ringgnn import _core
from ringgnn.data import build
from ringgnn.data.generate import generate_hetero

WRITES, REV = "author:writes:paper", "paper:rev_writes:author"
M64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    """SplitMix64's finalizer (crates/ringgnn-store/src/rng.rs), as FORMAT.md defines the hash."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _pairs(ds, name):
    return [tuple(p) for p in ds.edge_split(name).T.tolist()]


def _edges(rel):
    """All (src, dst) pairs of a relation's CSC."""
    return {(int(s), v) for v in range(rel.num_nodes) for s in rel.neighbors(v)}


@pytest.fixture
def tiny(tmp_path):
    """Every (author, paper) pair of 5 authors and 4 papers, written as a CSV."""
    pairs = [(a, p) for p in range(4) for a in range(5)]
    path = tmp_path / "w.csv"
    path.write_text("".join(f"{a},{p}\n" for a, p in pairs))
    return tmp_path, pairs, path


def test_fractions_follow_the_hash_and_nothing_leaks_through_the_reverse(tiny):
    d, pairs, path = tiny
    m = build.build_hetero(
        d / "out", [build.NodeType("author", 5), build.NodeType("paper", 4)],
        [build.Relation(WRITES, path, link_split="val=0.3,test=0.3", link_negatives=3)],
        add_reverse=True, seed=11, source={"by": "test"})
    base = _mix64(11 ^ _mix64(0x6C73706C6974))
    want = {"val": [], "test": [], "train": []}
    for a, p in pairs:  # (dst, src) order
        h = _mix64((_mix64(base ^ a) + p) & M64)
        want["val" if h < int(0.3 * 2**64) else "test" if h < int((0.3 + 0.3) * 2**64) else "train"].append((a, p))
    ds = ringgnn.Dataset.open(d / "out")
    rel, rev = ds.relation(WRITES), ds.relation(REV)
    for name, expected in want.items():
        assert _pairs(rel, name) == expected, name
    assert sorted(rel.edge_split_names) == ["test", "train", "val"]
    assert rev.edge_split_names == []
    assert _edges(rel) == set(want["train"])
    assert _edges(rev) == {(p, a) for a, p in want["train"]}
    neg = rel.edge_negatives("test")
    assert neg.shape == (len(want["test"]), 3)
    for row, (_, p) in zip(neg, want["test"]):  # 3 of the 3 other papers
        assert sorted(row.tolist()) == [x for x in range(4) if x != p]
    assert m["source"] == {"by": "test", "link_split": {WRITES: {"fractions": {"val": 0.3, "test": 0.3},
                                                                 "negatives": 3}}}
    build.verify(d / "out")


def test_given_lists_name_pairs_of_each_end(tiny):
    d, pairs, path = tiny
    np.save(d / "val.npy", np.array([[4, 3], [1, 1]], dtype=np.int64))  # (n, 2); (1, 1) joins two types
    m = build.build_hetero(
        d / "out", [build.NodeType("author", 5), build.NodeType("paper", 4)],
        [build.Relation(WRITES, path, link_split={"val": d / "val.npy"}, link_negatives=0)], add_reverse=True)
    rel = ringgnn.Dataset.open(d / "out").relation(WRITES)
    assert _pairs(rel, "val") == [(1, 1), (4, 3)]
    assert m["relations"][WRITES]["edge_splits"]["val"] == {"edges": 2, "negatives": 0}
    assert len(_pairs(rel, "train")) == 18


def test_generate_hetero_link_split_cli_info_and_verify(tmp_path, cli):
    out = tmp_path / "g"
    r = cli("generate", "hetero", out, "--papers", 300, "--authors", 120, "--institutions", 10,
            "--link-split", "val=0.1,test=0.1", "--link-relation", WRITES, "--link-negatives", 7, "-q")
    assert r.code == 0, r.err
    ds = ringgnn.Dataset.open(out)
    rel, rev = ds.relation(WRITES), ds.relation(REV)
    held = {p for s in ("val", "test") for p in _pairs(rel, s)}
    assert held and not held & _edges(rel)
    assert not {(p, a) for a, p in held} & _edges(rev)
    assert _edges(rel) == set(_pairs(rel, "train"))
    assert ds.relation("paper:cites:paper").edge_split_names == []
    assert ds.manifest["source"]["link_split"][WRITES]["negatives"] == 7
    info = cli("info", out, "--json")
    splits = json.loads(info.out)["relations"][WRITES]["edge_splits"]
    assert splits["val"] == {"edges": len(_pairs(rel, "val")), "negatives": 7}
    assert "edge splits test" in cli("info", out).out
    assert cli("verify", out).code == 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(link_split="val=0.1"), "link_relation (--link-relation): missing"),
    (dict(link_split="val=0.1", link_relation="paper:rev_cites:paper"), "is not a relation of the generator"),
    (dict(link_relation=WRITES), "given without link_split"),
    (dict(link_split="val=v.npy", link_relation=WRITES), "generated datasets take fractions"),
    (dict(link_split="val=0.6,test=0.5", link_relation=WRITES), "fractions add up to 1.1"),
    (dict(link_split="val=0.1", link_relation="paper:cites:paper", link_negatives=40),
     "relation paper:cites:paper: --link-negatives 40 is not below the number of nodes (40)"),
])
def test_generate_hetero_bad_link_options(tmp_path, kwargs, message):
    with pytest.raises(_core.InputError, match=re.escape(message)):
        generate_hetero(tmp_path / "g", papers=40, authors=20, institutions=3, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_bad_relation_link_split_is_refused(tiny):
    d, _, path = tiny
    np.save(d / "far.npy", np.array([[0, 4]], dtype=np.int64))
    for rel, message in [
        (build.Relation(WRITES, path, link_split="val=0.1", link_negatives=4), "is not below the number of nodes (4)"),
        (build.Relation(WRITES, path, link_split="val=far.npy", link_negatives=1), "not found"),
        (build.Relation(WRITES, path, link_split={"val": d / "far.npy"}, link_negatives=1),
         "destination id 4, but its node type has 4 nodes"),
        (build.Relation(WRITES, path, link_split="val=0.1", link_negatives=-1), "link_negatives"),
    ]:
        with pytest.raises((_core.InputError, FileNotFoundError), match=re.escape(message)):
            build.build_hetero(d / "out", [build.NodeType("author", 5), build.NodeType("paper", 4)], [rel])
        assert not (d / "out").exists()
