"""GraphBolt link-prediction tasks (``ringgnn.importers.graphbolt_links``): datasets written by hand after
DGL's OnDiskDataset layouts (``seeds``/``labels``/``indexes``, and the older
``node_pairs``/``negative_dsts``) convert to a relation's edge splits exactly; every bad input
names its yaml field and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ringgnn
import yaml
from ringgnn import _core
from ringgnn.data import build
from ringgnn.importers.graphbolt import convert_graphbolt

LIKE = [(0, 0), (0, 1), (1, 1), (1, 2), (2, 3), (3, 4), (2, 0), (3, 2)]  # user:like:item
FOLLOW = [(0, 1), (1, 2), (2, 3)]  # user:follow:user
REL, REV = "user:like:item", "item:rev_like:user"


def _save(root: Path, rel: str, a) -> str:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    np.save(root / rel, np.asarray(a))
    return rel


def _entry(root: Path, name: str, **arrays) -> dict:
    return {"type": REL, "data": [{"name": k, "format": "numpy", "path": _save(root, f"set/{name}-{k}.npy", v)}
                                  for k, v in arrays.items()]}


def seeds_meta(root: Path) -> dict:
    """A user/item dataset with a link-prediction task in GraphBolt's seeds/labels/indexes layout:
    validation negatives (src repeated) grouped by index; a test positive (0, 4) the graph lacks."""
    (root / "e").mkdir(parents=True, exist_ok=True)
    (root / "e/like.csv").write_text("".join(f"{s},{d}\n" for s, d in LIKE))
    (root / "e/follow.csv").write_text("".join(f"{s},{d}\n" for s, d in FOLLOW))
    return {
        "dataset_name": "lp",
        "graph": {"nodes": [{"type": "user", "num": 4}, {"type": "item", "num": 5}],
                  "edges": [{"type": REL, "format": "csv", "path": "e/like.csv"},
                            {"type": "user:follow:user", "format": "csv", "path": "e/follow.csv"}]},
        "feature_data": [{"domain": "node", "type": "item", "name": "feat", "format": "numpy",
                          "path": _save(root, "n/item.npy", np.eye(5, dtype=np.float32))}],
        "tasks": [{"name": "link_prediction", "num_classes": 2,
                   "train_set": [_entry(root, "train", seeds=np.array([(0, 0), (1, 1), (2, 3)]))],
                   "validation_set": [_entry(
                       root, "val", seeds=np.array([(3, 4), (0, 1), (0, 2), (3, 0), (0, 3), (3, 1)]),
                       labels=np.array([1, 1, 0, 0, 0, 0]), indexes=np.array([1, 0, 0, 1, 0, 1]))],
                   "test_set": [_entry(root, "test", seeds=np.array([(1, 2), (0, 4), (1, 0), (0, 0)]),
                                       labels=np.array([1.0, 1.0, 0.0, 0.0]), indexes=np.array([0, 1, 0, 1]))]}],
    }


def write_meta(root: Path, meta: dict) -> Path:
    path = root / "metadata.yaml"
    path.write_text(yaml.safe_dump(meta, sort_keys=False))
    return path


def _pairs(rel, name):
    return [tuple(p) for p in rel.edge_split(name).T.tolist()]


def _edges(rel):
    return {(int(s), v) for v in range(rel.num_nodes) for s in rel.neighbors(v)}


def test_seeds_labels_indexes_become_the_relations_edge_splits(tmp_path):
    src = tmp_path / "gb"
    write_meta(src, seeds_meta(src))
    m = convert_graphbolt(src, tmp_path / "out", add_reverse=True, threads=1)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    rel, rev = ds.relation(REL), ds.relation(REV)
    # Stored by (dst, src); negatives follow their positives (val: (0,1) has 2, 3; (3,4) has 0, 1).
    assert _pairs(rel, "val") == [(0, 1), (3, 4)]
    np.testing.assert_array_equal(rel.edge_negatives("val"), [[2, 3], [0, 1]])
    assert _pairs(rel, "test") == [(1, 2), (0, 4)]  # (0, 4) is not an edge: stored all the same
    np.testing.assert_array_equal(rel.edge_negatives("test"), [[0], [0]])
    assert _pairs(rel, "train") == [(0, 0), (1, 1), (2, 3)]
    assert _edges(rel) == {(0, 0), (1, 1), (2, 3), (2, 0), (3, 2)}
    assert _edges(rev) == {(d, s) for s, d in _edges(rel)}
    info = m["relations"][REL]["edge_splits"]
    assert info["val"] == {"edges": 2, "negatives": 2, "given_negatives": True}
    assert m["source"]["link_task"] == "link_prediction" and m["source"]["task"] is None
    assert ds.relation("user:follow:user").edge_split_names == []
    build.verify(tmp_path / "out")


def test_node_pairs_negative_dsts_layout_and_cli(tmp_path, cli):
    src = tmp_path / "gb"
    meta = seeds_meta(src)
    task = meta["tasks"][0]
    task["train_set"] = [_entry(src, "tr", node_pairs=np.array([(2, 3)]))]
    # Given negatives may repeat and hit the positive (GraphBolt draws them at random).
    task["validation_set"] = [_entry(src, "v", node_pairs=np.array([(0, 1), (3, 4)]),
                                     negative_dsts=np.array([[1, 1, 2], [4, 0, 0]]))]
    task["test_set"] = [_entry(src, "t", node_pairs=np.array([(1, 2)]))]  # no negatives: drawn
    write_meta(src, meta)
    r = cli("convert", src / "metadata.yaml", tmp_path / "out", "--link-negatives", 3, "-q")
    assert r.code == 0, r.err
    rel = ringgnn.Dataset.open(tmp_path / "out").relation(REL)
    np.testing.assert_array_equal(rel.edge_negatives("val"), [[1, 1, 2], [4, 0, 0]])
    neg = rel.edge_negatives("test")
    assert neg.shape == (1, 3) and 2 not in neg[0] and len(set(neg[0])) == 3
    assert _pairs(rel, "train") == [(2, 3)]
    assert cli("verify", tmp_path / "out").code == 0


def _set(meta, key):
    return meta["tasks"][0][key][0]


def _data(meta, key, name):
    return next(d for d in _set(meta, key)["data"] if d["name"] == name)


def _node_type(m, root):
    _set(m, "validation_set")["type"] = "item"


def _labels_only(m, root):
    _set(m, "validation_set")["data"] = [d for d in _set(m, "validation_set")["data"] if d["name"] != "indexes"]


def _other_source(m, root):
    _data(m, "validation_set", "seeds")["path"] = _save(
        root, "set/x.npy", np.array([(3, 4), (0, 1), (1, 2), (3, 0), (0, 3), (3, 1)]))


def _uneven(m, root):
    _data(m, "validation_set", "indexes")["path"] = _save(root, "set/i.npy", np.array([1, 0, 0, 0, 0, 1]))


def _orphan(m, root):
    _data(m, "validation_set", "indexes")["path"] = _save(root, "set/i.npy", np.array([1, 0, 0, 7, 0, 1]))


def _shape(m, root):
    _data(m, "train_set", "seeds")["path"] = _save(root, "set/s.npy", np.zeros((3, 3), dtype=np.int64))


def _range(m, root):
    _data(m, "train_set", "seeds")["path"] = _save(root, "set/s.npy", np.array([(0, 5)]))


def _train_not_edge(m, root):
    _data(m, "train_set", "seeds")["path"] = _save(root, "set/s.npy", np.array([(3, 3)]))


def _no_heldout(m, root):
    del m["tasks"][0]["validation_set"], m["tasks"][0]["test_set"]


def _negative_srcs(m, root):
    _set(m, "test_set")["data"] = [{"name": "node_pairs", "format": "numpy", "path": _save(root, "set/p.npy", [(1, 2)])},
                                   {"name": "negative_srcs", "format": "numpy", "path": _save(root, "set/n.npy", [[0]])}]


def _bad_label(m, root):
    _data(m, "validation_set", "labels")["path"] = _save(root, "set/l.npy", np.array([1, 1, 0, 2, 0, 0]))


BAD = [
    (_node_type, [r"tasks\[0\]\.validation_set\[0\]\.type", "'item' is not an edge type"]),
    (_labels_only, [r"validation_set\[0\]\.data", "'labels' without 'indexes'"]),
    (_other_source, [r"validation_set\[0\]\.data", "negative row 2 has source 1, its positive 0"]),
    (_uneven, [r"validation_set\[0\]\.data", "has 3 negatives", "same number of negatives"]),
    (_orphan, [r"validation_set\[0\]\.data", "negative row 3 has index 7, which no positive has"]),
    (_shape, [r"train_set\[0\]\.data\[0\]", r"shape \(3, 3\)"]),
    (_range, [r"train_set\[0\]\.data\[0\]", "destination 5 \\(entry 0\\)", "has 5 nodes"]),
    (_train_not_edge, [r"metadata\.yaml: tasks\[0\]\.train_set\[0\]", "training edge \\(3, 3\\)", "not in the graph"]),
    (_no_heldout, [r"no validation_set or test_set for 'user:like:item'"]),
    (_negative_srcs, [r"test_set\[0\]\.data\[1\]", "negative sources are not supported"]),
    (_bad_label, [r"validation_set\[0\]\.data\[1\]", "label 2 \\(entry 3\\)"]),
]


@pytest.mark.parametrize("mutate,patterns", BAD, ids=[b[0].__name__.strip("_") for b in BAD])
def test_bad_link_tasks_name_the_field_and_leave_nothing(tmp_path, mutate, patterns):
    src = tmp_path / "gb"
    meta = seeds_meta(src)
    mutate(meta, src)
    write_meta(src, meta)
    with pytest.raises(_core.InputError) as e:
        convert_graphbolt(src, tmp_path / "out", threads=1, task="link_prediction")
    for p in patterns:
        assert __import__("re").search(p, str(e.value)), f"{p!r} not in {e.value}"
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
