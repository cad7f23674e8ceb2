"""``ringgnn.importers.graphbolt``: GraphBolt ``OnDiskDataset`` directories written by hand after DGL's
specification, converted, and read back exactly; every bad input names its field or file and
leaves nothing behind."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ringgnn
import torch
import yaml
from ringgnn import _core
from ringgnn.data import build
from ringgnn.importers.graphbolt import convert_graphbolt, find_metadata

REPO = Path(__file__).resolve().parent.parent

NUM = {"author": 4, "paper": 5, "venue": 2}
WRITES = [(0, 0), (0, 1), (1, 1), (3, 4), (3, 4), (2, 0)]  # csv; a duplicate kept
CITES = [(0, 1), (1, 2), (2, 0), (4, 4), (3, 1)]  # numpy (2, E)
PUBLISHED = [(0, 1), (4, 1)]  # numpy (2, 2): GraphBolt's layout, not one edge per row
PAPER_FEAT = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
AUTHOR_FEAT = -np.arange(8, dtype=np.float32).reshape(4, 2)  # torch
VENUE_EMB = np.array([[1.5], [2.5]], dtype=np.float64)  # the type's only feature, not named feat
# node_classification on paper (train/validation/test) and author (train only)
PAPER_SETS = {"train": ([0, 1], [0, 2]), "val": ([2], [1]), "test": ([3, 4], [0, 2])}
AUTHOR_TRAIN = ([3, 1], [1, 1])


def _save(root: Path, rel: str, a, fmt: str = "numpy") -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "torch":
        torch.save(torch.as_tensor(np.asarray(a)), path)
    else:
        np.save(path, np.asarray(a))
    return rel


def _set(root: Path, name: str, t, seeds, labels, fmt="numpy", seed_name="seeds"):
    ext = "pt" if fmt == "torch" else "npy"
    return {"type": t, "data": [
        {"name": seed_name, "format": fmt, "path": _save(root, f"set/{name}-seeds.{ext}", np.array(seeds), fmt)},
        {"name": "labels", "format": fmt, "path": _save(root, f"set/{name}-labels.{ext}", np.array(labels), fmt)},
    ]}


def hetero_meta(root: Path) -> dict:
    """Writes the data files of a 3-type GraphBolt dataset under ``root``; returns its metadata."""
    (root / "edge_data").mkdir(parents=True, exist_ok=True)
    (root / "edge_data/writes.csv").write_text("".join(f"{s},{d}\n" for s, d in WRITES))
    p = PAPER_SETS
    return {
        "dataset_name": "tiny_hetero",
        "graph": {
            "nodes": [{"type": t, "num": n} for t, n in NUM.items()],
            "edges": [
                {"type": "author:writes:paper", "format": "csv", "path": "edge_data/writes.csv"},
                {"type": "paper:cites:paper", "format": "numpy",
                 "path": _save(root, "edge_data/cites.npy", np.array(CITES).T)},
                {"type": "paper:published_in:venue", "format": "numpy",
                 "path": _save(root, "edge_data/published.npy", np.array(PUBLISHED).T)},
            ],
        },
        "feature_data": [
            {"domain": "node", "type": "paper", "name": "feat", "format": "numpy", "in_memory": False,
             "path": _save(root, "node_data/paper-feat.npy", PAPER_FEAT)},
            {"domain": "node", "type": "paper", "name": "year", "format": "numpy",
             "path": _save(root, "node_data/paper-year.npy", np.arange(5.0))},
            {"domain": "node", "type": "author", "name": "feat", "format": "torch",
             "path": _save(root, "node_data/author-feat.pt", AUTHOR_FEAT, "torch")},
            {"domain": "node", "type": "venue", "name": "emb", "format": "numpy",
             "path": _save(root, "node_data/venue-emb.npy", VENUE_EMB)},
            {"domain": "edge", "type": "author:writes:paper", "name": "weight", "format": "numpy",
             "path": _save(root, "edge_data/writes-weight.npy", np.ones(len(WRITES)))},
        ],
        "tasks": [{
            "name": "node_classification",
            "num_classes": 3,
            "train_set": [_set(root, "paper-train", "paper", *p["train"]),
                          _set(root, "author-train", "author", *AUTHOR_TRAIN, seed_name="seed_nodes")],
            "validation_set": [_set(root, "paper-val", "paper", *p["val"])],
            "test_set": [_set(root, "paper-test", "paper", *p["test"], fmt="torch")],
        }],
    }


def write_meta(root: Path, meta: dict) -> Path:
    path = root / "metadata.yaml"
    path.write_text(yaml.safe_dump(meta, sort_keys=False))
    return path


def csc(edges, num_dst):
    """Per destination, the sorted sources."""
    lists = [[] for _ in range(num_dst)]
    for s, d in edges:
        lists[d].append(s)
    return [sorted(x) for x in lists]


def assert_relation(ds, name, edges, num_dst):
    rel = ds.relation(name)
    assert [rel.neighbors(v).tolist() for v in range(num_dst)] == csc(edges, num_dst), name


def assert_nothing_left(tmp_path: Path, out: Path):
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


def features_of(out, part=None):
    reader = _core.FeatureReader(os.fspath(out), part=part)
    n = ringgnn.Dataset.open_part(out, part).num_nodes if part else ringgnn.Dataset.open(out).num_nodes
    return reader.gather(np.arange(n, dtype=np.int64))


# --- heterogeneous ----------------------------------------------------------------------------


def test_hetero_converts_exactly(tmp_path, caplog):
    src = tmp_path / "gb"
    yaml_path = write_meta(src, hetero_meta(src))
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="ringgnn.importers.graphbolt"):
        manifest = convert_graphbolt(yaml_path, out, threads=1)
    assert "edge feature 'weight' of author:writes:paper" in caplog.text  # skipped, and said so
    assert "node type 'venue' has no node feature 'feat'; using its only one, 'emb'" in caplog.text

    ds = ringgnn.Dataset.open(out)
    assert isinstance(ds, ringgnn.data.dataset.HeteroDataset)
    assert ds.num_nodes_dict == NUM
    assert ds.relations == ["author:writes:paper", "paper:cites:paper", "paper:published_in:venue"]
    assert_relation(ds, "author:writes:paper", WRITES, NUM["paper"])
    assert_relation(ds, "paper:cites:paper", CITES, NUM["paper"])
    assert_relation(ds, "paper:published_in:venue", PUBLISHED, NUM["venue"])

    np.testing.assert_array_equal(features_of(out, "node/paper"), PAPER_FEAT)
    np.testing.assert_array_equal(features_of(out, "node/author"), AUTHOR_FEAT)
    np.testing.assert_array_equal(features_of(out, "node/venue"), VENUE_EMB.astype(np.float32))

    paper = ds.node_type("paper")
    expected = np.full(NUM["paper"], -1)
    for ids, labels in PAPER_SETS.values():
        expected[ids] = labels
    np.testing.assert_array_equal(paper.labels, expected)
    assert paper.split_names == ["test", "train", "val"]
    for name, (ids, _) in PAPER_SETS.items():
        assert sorted(paper.split(name).tolist()) == sorted(ids)
    author = ds.node_type("author")
    np.testing.assert_array_equal(author.labels, [-1, 1, -1, 1])
    assert sorted(author.split("train").tolist()) == [1, 3] and author.split_names == ["train"]
    venue = ds.node_type("venue")
    assert venue.labels is None and venue.split_names == []

    assert manifest["source"] == {"command": "convert", "from": "graphbolt", "yaml": "metadata.yaml",
                                  "dataset_name": "tiny_hetero", "task": "node_classification"}
    build.verify(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gb", "out"]  # the temporary directory is gone


def test_add_reverse_adds_the_transposes(tmp_path):
    src = tmp_path / "gb"
    write_meta(src, hetero_meta(src))
    out = tmp_path / "out"
    convert_graphbolt(src, out, add_reverse=True, threads=1)  # the directory names its metadata.yaml
    ds = ringgnn.Dataset.open(out)
    assert len(ds.relations) == 6
    for name, edges in [("author:writes:paper", WRITES), ("paper:cites:paper", CITES),
                        ("paper:published_in:venue", PUBLISHED)]:
        s, r, d = name.split(":")
        assert_relation(ds, name, edges, NUM[d])
        assert_relation(ds, f"{d}:rev_{r}:{s}", [(b, a) for a, b in edges], NUM[s])
    build.verify(out)


def test_feature_and_task_choice(tmp_path):
    src = tmp_path / "gb"
    meta = hetero_meta(src)
    link = {"name": "link_prediction", "train_set": [{"type": "paper:cites:paper", "data": [
        {"name": "seeds", "format": "numpy", "path": _save(src, "set/pairs.npy", np.array(CITES))}]}]}
    meta["tasks"].insert(0, link)  # skipped: the first node-classification task is used
    write_meta(src, meta)
    out = tmp_path / "out"
    manifest = convert_graphbolt(src, out, feature="year", threads=1)
    assert manifest["source"]["task"] == "node_classification"
    np.testing.assert_array_equal(features_of(out, "node/paper"), np.arange(5.0, dtype=np.float32)[:, None])
    with pytest.raises(_core.InputError, match=r"tasks\[0\] \('link_prediction'\): a link-prediction task with no "
                       r"validation_set or test_set"):
        convert_graphbolt(src, tmp_path / "out2", task="link_prediction")
    with pytest.raises(_core.InputError, match="no task named 'nc'"):
        convert_graphbolt(src, tmp_path / "out2", task="nc")
    assert_nothing_left(tmp_path, tmp_path / "out2")


# --- homogeneous ------------------------------------------------------------------------------


def test_homogeneous_equals_a_plain_convert(tmp_path):
    src = tmp_path / "gb"
    src.mkdir()
    edges = [(0, 1), (1, 2), (2, 0), (3, 3), (4, 0), (0, 1)]
    (src / "edges.csv").write_text("".join(f"{s},{d}\n" for s, d in edges))
    feat = np.random.default_rng(0).random((6, 4), dtype=np.float32)
    meta = {
        "dataset_name": "homo",
        "graph": {"nodes": [{"num": 6}], "edges": [{"format": "csv", "path": "edges.csv"}]},
        "feature_data": [{"domain": "node", "name": "feat", "format": "torch",
                          "path": _save(src, "feat.pt", feat, "torch")}],
        "tasks": [{"name": "nc", "num_classes": 2,
                   "train_set": [_set(src, "train", None, [0, 1, 2], [0, 1, 1])],
                   "test_set": [_set(src, "test", None, [4], [0])]}],
    }
    write_meta(src, meta)
    np.save(tmp_path / "f.npy", feat)
    np.save(tmp_path / "y.npy", np.array([0, 1, 1, -1, 0, -1]))
    np.save(tmp_path / "tr.npy", np.array([0, 1, 2]))
    np.save(tmp_path / "te.npy", np.array([4]))
    for reverse in (False, True):
        out, plain = tmp_path / f"out{reverse}", tmp_path / f"plain{reverse}"
        convert_graphbolt(src / "metadata.yaml", out, add_reverse=reverse, threads=1)
        build.convert(src / "edges.csv", plain, format="csv", num_nodes=6, undirected=reverse,
                      features=tmp_path / "f.npy", labels=tmp_path / "y.npy",
                      split={"train": tmp_path / "tr.npy", "test": tmp_path / "te.npy"}, threads=1)
        a, b = ringgnn.Dataset.open(out), ringgnn.Dataset.open(plain)
        assert not a.is_hetero and a.num_nodes == 6 and a.num_edges == b.num_edges
        np.testing.assert_array_equal(a.indptr(), b.indptr())
        assert [a.neighbors(v).tolist() for v in range(6)] == [b.neighbors(v).tolist() for v in range(6)]
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.split_names == b.split_names == ["test", "train"]
        for s in a.split_names:
            np.testing.assert_array_equal(a.split(s), b.split(s))
        np.testing.assert_array_equal(features_of(out), feat)
        build.verify(out)


# --- bad inputs -------------------------------------------------------------------------------


def _drop_num(m, root):
    del m["graph"]["nodes"][0]["num"]


def _edge_format_type(m, root):
    m["graph"]["edges"][1]["format"] = 3


def _edge_format_unknown(m, root):
    m["graph"]["edges"][1]["format"] = "parquet"


def _unknown_node_type(m, root):
    m["graph"]["edges"][0]["type"] = "author:writes:book"


def _feature_rows(m, root):
    _save(root, "node_data/paper-feat.npy", np.zeros((4, 3), np.float32))


def _seed_type(m, root):
    m["tasks"][0]["train_set"][1]["type"] = "institution"


def _seed_range(m, root):
    _save(root, "set/paper-val-seeds.npy", np.array([5]))


def _label_clash(m, root):
    _save(root, "set/paper-val-seeds.npy", np.array([1]))  # labeled 2 in train, 1 here


def _mixed_types(m, root):
    del m["graph"]["edges"][2]["type"]


def _edge_out_of_range(m, root):  # found by the core, while building: still nothing left
    (root / "edge_data/writes.csv").write_text("0,0\n7,1\n")


def _preprocessed(m, root):
    m["graph_topology"] = {"type": "FusedCSCSamplingGraph", "path": "graph.pt"}
    del m["graph"]


def _link_only(m, root):
    m["tasks"][0]["train_set"][0]["data"][0]["name"] = "node_pairs"


BAD = [
    (_drop_num, _core.InputError, [r"graph\.nodes\[0\]\.num: missing"]),
    (_edge_format_type, _core.InputError, [r"graph\.edges\[1\]\.format: must be a non-empty string, not 3"]),
    (_edge_format_unknown, _core.InputError, [r"graph\.edges\[1\]\.format: 'parquet'", "csv or numpy or torch"]),
    (_unknown_node_type, _core.InputError, [r"graph\.edges\[0\]\.type", "node type 'book'"]),
    (_feature_rows, _core.InputError, [r"feature_data\[0\]", r"shape \(4, 3\)", "'paper' has 5 nodes"]),
    (_seed_type, _core.InputError, [r"tasks\[0\]\.train_set\[1\]\.type: 'institution' is not a node type"]),
    (_seed_range, _core.InputError, [r"tasks\[0\]\.validation_set\[0\]\.data\[0\]", "seed 5", "paper-val-seeds.npy"]),
    (_label_clash, _core.InputError, [r"tasks\[0\]\.validation_set\[0\]", "node 1 has label 1 here and 2"]),
    (_mixed_types, _core.InputError, [r"graph\.edges\[2\]\.type: typed and untyped"]),
    (_edge_out_of_range, _core.InputError, ["7"]),
    (_preprocessed, _core.InputError, ["graph_topology", "original metadata.yaml"]),
    (_link_only, _core.InputError, [r"tasks\[0\]\.train_set\[0\]\.type: tasks\[0\] \('node_classification'\) is a "
                                    "link-prediction task", "'paper' is not an edge type"]),
]


@pytest.mark.parametrize("mutate,error,patterns", BAD, ids=[b[0].__name__.strip("_") for b in BAD])
def test_bad_input_names_the_field_and_leaves_nothing(tmp_path, mutate, error, patterns):
    src = tmp_path / "gb"
    meta = hetero_meta(src)
    mutate(meta, src)
    path = write_meta(src, meta)
    out = tmp_path / "out"
    with pytest.raises(error) as e:
        convert_graphbolt(path, out, threads=1)
    text = str(e.value)
    if mutate is not _edge_out_of_range:
        assert str(path) in text
    for p in patterns:
        assert re.search(p, text), (p, text)
    assert_nothing_left(tmp_path, out)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "metadata.yaml"
    path.write_text("dataset_name: x\ngraph:\n  nodes: [\n  - num: 3\n  edges: {\n")
    with pytest.raises(_core.InputError, match=r"metadata\.yaml: line \d+, column \d+: not valid YAML"):
        convert_graphbolt(path, tmp_path / "out")
    assert_nothing_left(tmp_path, tmp_path / "out")


def test_missing_file_names_the_field(tmp_path):
    src = tmp_path / "gb"
    meta = hetero_meta(src)
    os.remove(src / "edge_data/cites.npy")
    write_meta(src, meta)
    with pytest.raises(FileNotFoundError, match=r"graph\.edges\[1\]\.path") as e:
        convert_graphbolt(src, tmp_path / "out")
    assert e.value.filename == str(src / "edge_data/cites.npy")
    assert_nothing_left(tmp_path, tmp_path / "out")


def test_existing_output_is_kept(tmp_path):
    src = tmp_path / "gb"
    write_meta(src, hetero_meta(src))
    (tmp_path / "out").mkdir()
    with pytest.raises(_core.DatasetExistsError, match="--overwrite"):
        convert_graphbolt(src, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_find_metadata(tmp_path):
    assert find_metadata("x/meta.yml") == "x/meta.yml"
    assert find_metadata(tmp_path) is None
    (tmp_path / "metadata.yaml").write_text("{}")
    assert find_metadata(tmp_path) == os.path.join(tmp_path, "metadata.yaml")
    assert find_metadata(tmp_path / "edges.csv") is None


# --- command line -----------------------------------------------------------------------------


def _cli(*argv, cwd):
    # The ringgnn this test imported (installed, or a working tree on PYTHONPATH).
    env = dict(os.environ, PYTHONPATH=str(Path(ringgnn.__file__).parent.parent))
    return subprocess.run([sys.executable, "-m", "ringgnn", "convert", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_converts_a_metadata_yaml(tmp_path):
    src = tmp_path / "gb"
    write_meta(src, hetero_meta(src))
    r = _cli("gb/metadata.yaml", "out", "--add-reverse", "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "converted 11 nodes in 3 types, 26 edges in 6 relations in" in r.stdout
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert len(ds.relations) == 6 and ds.node_type("paper").split_names == ["test", "train", "val"]
    r = _cli("gb", "out2", "--undirected", "--features", "x.npy", cwd=tmp_path)
    assert r.returncode == 1
    assert "--undirected, --features apply to an edge-list INPUT" in r.stderr and "--add-reverse" in r.stderr
    assert not (tmp_path / "out2").exists()


def test_cli_refuses_graphbolt_options_for_an_edge_list(tmp_path, capsys):
    from ringgnn.cli import main

    (tmp_path / "e.csv").write_text("0,1\n")
    assert main(["convert", str(tmp_path / "e.csv"), str(tmp_path / "out"), "--task", "nc", "--add-reverse"]) == 1
    assert "--add-reverse, --task apply to a GraphBolt metadata.yaml INPUT" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
