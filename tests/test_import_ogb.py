"""``ringgnn.importers.ogb`` and ``.mag240m``: OGB directories written by OGB's own
``DatasetSaver`` (skipped without the ``ogb`` package) and by hand after OGB's documentation,
converted and checked against the same arrays loaded with numpy; every bad input is an error
naming its file and leaves nothing behind."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
import ringgnn
import torch
from ringgnn import _core
from ringgnn.inference import metrics
from ringgnn.cli import main
from ringgnn.importers import _ogb_io as ogb_io
from ringgnn.importers import _stage, detect
from ringgnn.importers.mag240m import convert_mag240m
from ringgnn.importers.ogb import convert_ogb

EDGES = np.array([[0, 1, 2, 3, 4, 4], [1, 2, 0, 0, 0, 3]])  # (2, E), node 5 isolated
N = 6
FEAT = (np.arange(N * 3, dtype=np.float32).reshape(N, 3) - 4) / 8
LABELS = np.array([2, 0, np.nan, 1, 2, np.nan])  # NaN: unlabeled
SPLITS = {"train": [0, 1, 3], "valid": [4], "test": [5, 2]}


def csc(edges, n):
    lists = [[] for _ in range(n)]
    for s, d in zip(*edges):
        lists[d].append(int(s))
    return [sorted(x) for x in lists]


def neighbors(ds):
    return [ds.neighbors(v).tolist() for v in range(ds.num_nodes)]


def features(out, part=None):
    ds = ringgnn.Dataset.open_part(out, part) if part else ringgnn.Dataset.open(out)
    return _core.FeatureReader(os.fspath(out), part=part).gather(np.arange(ds.num_nodes, dtype=np.int64))


def expected_labels(labels):
    return np.where(np.isnan(labels), -1, np.nan_to_num(labels)).astype(np.int64)


def assert_nothing_left(out: Path):
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


def gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(",".join("" if isinstance(x, float) and np.isnan(x) else str(x) for x in np.atleast_1d(r)) + "\n")


def csv_dir(root: Path, edges=EDGES, n=N, feat=FEAT, labels=LABELS, splits=SPLITS, scheme="time") -> Path:
    """An ogbn directory as OGB's downloads lay it out (https://ogb.stanford.edu/docs/nodeprop/:
    raw/*.csv.gz without headers, split/SCHEME/*.csv.gz)."""
    gz(root / "raw" / "edge.csv.gz", edges.T)
    gz(root / "raw" / "num-node-list.csv.gz", [n])
    gz(root / "raw" / "num-edge-list.csv.gz", [edges.shape[1]])
    if feat is not None:
        gz(root / "raw" / "node-feat.csv.gz", [[repr(float(x)) for x in row] for row in feat])
    if labels is not None:
        gz(root / "raw" / "node-label.csv.gz", [[x] for x in labels])
    for k, ids in splits.items():
        gz(root / "split" / scheme / f"{k}.csv.gz", ids)
    return root


def import_ogb_io():
    """``ogb.io``, or a skip. Importing ``ogb`` starts a thread that asks PyPI whether ogb is
    outdated (the ``outdated`` package); without a network the test process would wait for it at
    exit: a missing ``outdated`` turns the check off."""
    import sys

    sys.modules.setdefault("outdated", None)
    return pytest.importorskip("ogb.io")


def saver_dir(tmp_path: Path, edges=EDGES, feat=FEAT, labels=LABELS, splits=SPLITS) -> Path:
    """An ogbn directory written by OGB's own DatasetSaver (raw/data.npz, node-label.npz,
    split/SCHEME/split_dict.pt)."""
    saver_mod = import_ogb_io()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        saver = saver_mod.DatasetSaver("ogbn-toy", is_hetero=False, version=1, root="sub")
        graph = {"edge_index": edges, "num_nodes": N}
        if feat is not None:
            graph["node_feat"] = feat
        saver.save_graph_list([graph])
        saver.save_target_labels(labels.reshape(-1, 1))
        saver.save_task_info("multiclass classification", "acc", num_classes=3)
        saver.save_split({k: np.array(v) for k, v in splits.items()}, "random")
    finally:
        os.chdir(cwd)
    return tmp_path / "sub_ogbn_toy" / "toy"


def assert_converted(out: Path, undirected=False):
    ds = ringgnn.Dataset.open(out)
    edges = EDGES if not undirected else np.concatenate([EDGES, EDGES[::-1]], axis=1)
    assert neighbors(ds) == csc(edges, N)
    np.testing.assert_array_equal(features(out), FEAT)
    np.testing.assert_array_equal(ds.labels, expected_labels(LABELS))
    assert ds.split_names == ["test", "train", "val"]
    for k, ids in SPLITS.items():
        assert ds.split("val" if k == "valid" else k).tolist() == ids
    return ds


def test_dataset_saver_layout_converts_exactly(tmp_path):
    root = saver_dir(tmp_path)
    assert detect(root) == "ogb"
    m = convert_ogb(root, tmp_path / "out", memory="160M")
    assert m["num_nodes"] == N and m["features"]["dtype"] == "f32"
    assert_converted(tmp_path / "out")


def test_csv_layout_converts_exactly_in_small_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(ogb_io, "CSV_LINES", 2)  # every CSV is read in several chunks
    monkeypatch.setattr(_stage, "CHUNK_BYTES", 16)
    root = csv_dir(tmp_path / "ogbn_toy")
    convert_ogb(root, tmp_path / "out", undirected=True)
    assert_converted(tmp_path / "out", undirected=True)


def test_data_npz_streamed_in_chunks_and_fortran_order(tmp_path, monkeypatch):
    # papers100M's data.npz, written by hand: edge_index stored Fortran-ordered, int32 ids;
    # node-label.npz's labels float with NaN; splits as csv.
    monkeypatch.setattr(_stage, "CHUNK_BYTES", 24)
    root = csv_dir(tmp_path / "p", feat=None, labels=None)
    os.remove(root / "raw" / "edge.csv.gz")
    os.remove(root / "raw" / "num-node-list.csv.gz")
    np.savez_compressed(root / "raw" / "data.npz", edge_index=np.asfortranarray(EDGES.astype(np.int32)),
                        num_nodes_list=np.array([N]), num_edges_list=np.array([EDGES.shape[1]]),
                        node_feat=FEAT.astype(np.float16))
    np.savez_compressed(root / "raw" / "node-label.npz", node_label=LABELS.astype(np.float32).reshape(-1, 1))
    m = convert_ogb(root, tmp_path / "out")
    assert m["features"]["dtype"] == "f16"
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert neighbors(ds) == csc(EDGES, N)
    np.testing.assert_array_equal(features(tmp_path / "out"), FEAT.astype(np.float16))
    np.testing.assert_array_equal(ds.labels, expected_labels(LABELS))


def test_two_edges_are_two_edges(tmp_path):
    # A (2, 2) edge_index is two edges (0->1, 1->2), not the builder's one-edge-per-row reading.
    root = tmp_path / "t"
    (root / "raw").mkdir(parents=True)
    np.savez(root / "raw" / "data.npz", edge_index=np.array([[0, 1], [1, 2]]), num_nodes_list=np.array([3]))
    convert_ogb(root, tmp_path / "out")
    assert neighbors(ringgnn.Dataset.open(tmp_path / "out")) == [[], [0], [1]]


# --- bad input ---------------------------------------------------------------------------------


def _npz(root, **arrays):
    np.savez(root / "raw" / "data.npz", **arrays)


def _no_raw(root):
    import shutil
    shutil.rmtree(root / "raw")


BAD = [
    (_no_raw, _core.InputError, r"no raw/ directory, so not an OGB dataset"),
    (lambda r: os.remove(r / "raw" / "edge.csv.gz"), FileNotFoundError, r"neither edge.csv.gz nor data.npz"),
    (lambda r: os.remove(r / "raw" / "num-node-list.csv.gz"), FileNotFoundError, r"number of nodes"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), _npz(r, num_nodes_list=np.array([N]))), _core.InputError,
     r"data.npz: no array 'edge_index' \(it has: num_nodes_list\)"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), _npz(r, edge_index=np.array([[0, 6, 1], [1, 2, 3]]),
                                                           num_nodes_list=np.array([N]))),
     _core.InputError, r"edge_index\[src, 1\]: node id 6 is out of range \(6 nodes\)"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), _npz(r, edge_index=EDGES.astype(np.float32),
                                                           num_nodes_list=np.array([N]))),
     _core.InputError, r"edge_index: float32 of shape \(2, 6\)"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), _npz(r, edge_index=EDGES, num_nodes_list=np.array([3, 3]))),
     _core.InputError, r"num_nodes_list: 2 graphs; ringgnn converts one graph"),
    (lambda r: gz(r / "raw" / "node-feat.csv.gz", FEAT[:5]), _core.InputError,
     r"node-feat.csv.gz: 5 rows, but the graph has 6 nodes"),
    (lambda r: gz(r / "raw" / "node-feat.csv.gz", [["1", "x"]] * N), _core.InputError,
     r"node-feat.csv.gz: line 1, column 2 is not a number \(not quoted: the dataset named this file, not you\)"),
    (lambda r: gz(r / "raw" / "node-label.csv.gz", [0.5] * N), _core.InputError,
     r"node-label.csv.gz: label 0.5 of node 0 is not a class"),
    (lambda r: gz(r / "raw" / "node-label.csv.gz", [[0, 1]] * N), _core.InputError,
     r"node-label.csv.gz: line 1 has 2 columns \(a multi-task dataset"),
    (lambda r: gz(r / "split" / "time" / "valid.csv.gz", [4, 9]), _core.InputError,
     r"valid.csv.gz: line 2: node id 9 is out of range"),
    (lambda r: os.remove(r / "split" / "time" / "test.csv.gz"), FileNotFoundError, r"needs train, valid and test"),
    (lambda r: gz(r / "split" / "other" / "train.csv.gz", [0]), _core.InputError,
     r"several split schemes \(other, time\); name one with --split-scheme"),
    (lambda r: torch.save({"edge": torch.zeros(2, 2)}, r / "split" / "time" / "train.pt"), FileNotFoundError,
     r"needs train, valid, test \(.pt dictionaries of edges\)"),
    (lambda r: np.savez(r / "raw" / "edge_index_dict.npz", a=np.zeros(1)), FileNotFoundError,
     r"OGB's binary heterogeneous layout has the node count of each type \(num_nodes_dict.npz\) there"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), (r / "raw" / "data.npz").write_bytes(b"not a zip")),
     _core.InputError, r"data.npz: not an .npz archive"),
    (lambda r: (os.remove(r / "raw" / "edge.csv.gz"), gz(r / "raw" / "edge.csv.gz", [[0, 7]])),  # the builder's
     _core.InputError, r"edge.csv.gz"),
]


@pytest.mark.parametrize("mutate,error,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_names_the_file_and_leaves_nothing(tmp_path, mutate, error, pattern):
    root = csv_dir(tmp_path / "ogbn")
    mutate(root)
    out = tmp_path / "out"
    with pytest.raises(error, match=pattern):
        convert_ogb(root, out)
    assert_nothing_left(out)


def test_bad_split_dict_is_refused_without_running_it(tmp_path):
    root = csv_dir(tmp_path / "ogbn")
    for s in ("train", "valid", "test"):
        os.remove(root / "split" / "time" / f"{s}.csv.gz")

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + os.fspath(tmp_path / "ran"),))

    torch.save({"train": Evil()}, root / "split" / "time" / "split_dict.pt")
    with pytest.raises(_core.InputError, match=r"split_dict.pt: not a file saved with torch.save that holds only"):
        convert_ogb(root, tmp_path / "out")
    assert not (tmp_path / "ran").exists()
    assert_nothing_left(tmp_path / "out")


def test_existing_output_is_kept(tmp_path):
    root = csv_dir(tmp_path / "ogbn")
    (tmp_path / "out").mkdir()
    with pytest.raises(ringgnn.DatasetExistsError):
        convert_ogb(root, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


# --- MAG240M -----------------------------------------------------------------------------------

MAG = {"paper": 4, "author": 3, "institution": 2, "num_classes": 3}
MAG_RELS = {"paper___cites___paper": [[0, 1, 2, 3], [1, 2, 0, 0]],
            "author___writes___paper": [[0, 1, 1, 2, 2], [0, 0, 2, 3, 1]],
            "author___affiliated_with___institution": [[0, 2], [1, 1]]}  # (2, 2): two edges
PAPER_FEAT = (np.arange(4 * 5, dtype=np.float16).reshape(4, 5) - 3) / 4
PAPER_LABEL = np.array([2, np.nan, 0, 1], dtype=np.float32)
MAG_SPLIT = {"train": np.array([0, 3]), "valid": np.array([2]), "test-dev": np.array([1]),
             "test-challenge": np.array([], dtype=np.int64)}


def mag_dir(tmp_path: Path) -> Path:
    """MAG240M's processed layout as ogb.lsc.MAG240MDataset reads it (ogb/lsc/mag240m.py)."""
    root = tmp_path / "dataset" / "mag240m_kddcup2021"
    for name, e in MAG_RELS.items():
        (root / "processed" / name).mkdir(parents=True)
        np.save(root / "processed" / name / "edge_index.npy", np.array(e, dtype=np.int64))
    (root / "processed" / "paper").mkdir()
    np.save(root / "processed" / "paper" / "node_feat.npy", PAPER_FEAT)
    np.save(root / "processed" / "paper" / "node_label.npy", PAPER_LABEL)
    np.save(root / "processed" / "paper" / "node_year.npy", np.arange(4, dtype=np.int64) + 2000)
    torch.save(MAG, root / "meta.pt")
    torch.save(MAG_SPLIT, root / "split_dict.pt")
    return root


def test_mag240m_converts_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(_stage, "CHUNK_BYTES", 16)  # labels in several chunks
    mag_dir(tmp_path)
    assert detect(tmp_path / "dataset") == "mag240m"
    m = convert_mag240m(tmp_path / "dataset", tmp_path / "out", add_reverse=True, memory="160M")
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.num_nodes_dict == {"author": 3, "institution": 2, "paper": 4}
    assert m["source"]["from"] == "mag240m"
    for name, e in MAG_RELS.items():
        s, r, d = name.split("___")
        assert neighbors(ds.relation(f"{s}:{r}:{d}")) == csc(np.array(e), MAG[d]), name
        assert neighbors(ds.relation(f"{d}:rev_{r}:{s}")) == csc(np.array(e)[::-1], MAG[s]), name
    paper = ds.node_type("paper")
    np.testing.assert_array_equal(features(tmp_path / "out", "node/paper"), PAPER_FEAT)
    assert paper.feature_dtype == "f16"
    np.testing.assert_array_equal(paper.labels, expected_labels(PAPER_LABEL))
    assert paper.split_names == ["test_challenge", "test_dev", "train", "val"]
    assert paper.split("val").tolist() == [2] and paper.split("test_dev").tolist() == [1]
    assert ds.node_type("author").feature_dim is None


MAG_BAD = [
    (lambda r: os.remove(r / "meta.pt"), FileNotFoundError, r"node counts"),
    (lambda r: torch.save({"paper": 4, "author": 3}, r / "meta.pt"), _core.InputError,
     r"meta.pt: no node count for 'institution'"),
    (lambda r: np.save(r / "processed" / "paper" / "node_feat.npy", PAPER_FEAT[:3]), _core.InputError,
     r"node_feat.npy: float16 of shape \(3, 5\), but meta.pt has 4 papers"),
    (lambda r: np.save(r / "processed" / "paper" / "node_label.npy", np.array([0, 3, 1, 1.0])), _core.InputError,
     r"node_label.npy: label 3.0 of paper 1 is not a class; .* below num_classes 3"),
    (lambda r: torch.save({"train": np.array([4])}, r / "split_dict.pt"), _core.InputError,
     r"split_dict.pt: 'train'\[0\]: paper id 4 is out of range"),
    (lambda r: os.remove(r / "processed" / "author___writes___paper" / "edge_index.npy"), FileNotFoundError,
     r"edges of author___writes___paper"),
    (lambda r: np.save(r / "processed" / "paper___cites___paper" / "edge_index.npy", np.array([[0], [9]])),
     _core.InputError, r"paper___cites___paper/edge_index.npy: .*out of range"),  # found by the builder
]


@pytest.mark.parametrize("mutate,error,pattern", MAG_BAD, ids=[str(i) for i in range(len(MAG_BAD))])
def test_mag240m_bad_input_names_the_file_and_leaves_nothing(tmp_path, mutate, error, pattern):
    root = mag_dir(tmp_path)
    mutate(root)
    with pytest.raises(error, match=pattern):
        convert_mag240m(root, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


# --- command line ------------------------------------------------------------------------------


def test_cli_detects_and_forces_each_source(tmp_path, capsys):
    csv_dir(tmp_path / "ogbn")
    mag_dir(tmp_path)
    assert main(["convert", str(tmp_path / "ogbn"), str(tmp_path / "a"), "-q"]) == 0
    assert_converted(tmp_path / "a")
    assert main(["convert", str(tmp_path / "dataset"), str(tmp_path / "b"), "--add-reverse", "-q"]) == 0
    assert len(ringgnn.Dataset.open(tmp_path / "b").relations) == 6
    assert main(["convert", str(tmp_path / "ogbn"), str(tmp_path / "c"), "--from", "mag240m"]) == 1
    assert "not MAG240M's layout" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "ogbn"), str(tmp_path / "c"), "--features", "x.npy", "--dedup"]) == 1
    assert "--features: not options of an OGB directory" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "dataset"), str(tmp_path / "c"), "--undirected"]) == 1
    assert "--undirected: not options of MAG240M's processed layout" in capsys.readouterr().err
    (tmp_path / "e.csv").write_text("0,1\n")
    assert main(["convert", str(tmp_path / "e.csv"), str(tmp_path / "c"), "--split-scheme", "time"]) == 1
    assert "--split-scheme applies to an OGB directory INPUT" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "e.csv"), str(tmp_path / "c"), "--from", "ogb"]) == 1
    assert "no raw/ directory" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_split_dict_of_tensors_and_numpy_without_torch(tmp_path):
    root = csv_dir(tmp_path / "ogbn")
    for s in ("train", "valid", "test"):
        os.remove(root / "split" / "time" / f"{s}.csv.gz")
    torch.save({k: torch.tensor(v) for k, v in SPLITS.items()}, root / "split" / "time" / "split_dict.pt")
    convert_ogb(root, tmp_path / "out")  # tensors: loaded by torch's safe unpickler
    assert_converted(tmp_path / "out")
    # numpy arrays (what OGB's DatasetSaver and MAG240M write) are read without importing torch,
    # which would take a few hundred MB of the build's memory budget
    torch.save({k: np.array(v) for k, v in SPLITS.items()}, root / "split" / "time" / "split_dict.pt")
    code = ("import sys; from ringgnn.importers._ogb_io import load_split_dict; "
            f"d = load_split_dict({str(root / 'split' / 'time' / 'split_dict.pt')!r}); "
            "print(sorted(d), d['valid'].tolist(), 'torch' in sys.modules)")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.split("\n")[0] == "['test', 'train', 'valid'] [4] False"


# --- link property prediction (ogbl) --------------------------------------------------------------

TRAIN_E = np.array([[0, 1], [1, 2], [2, 3], [4, 0], [3, 5]])  # raw/edge.csv.gz: the training graph
VALID_E = np.array([[0, 2], [5, 1]])
TEST_E = np.array([[1, 4]])


def ogbl_dir(root: Path, style="edge") -> Path:
    gz(root / "raw" / "edge.csv.gz", TRAIN_E)
    gz(root / "raw" / "num-node-list.csv.gz", [N])
    gz(root / "raw" / "node-feat.csv.gz", [[repr(float(x)) for x in row] for row in FEAT])
    d = root / "split" / "sales"
    d.mkdir(parents=True)
    for name, e in (("train", TRAIN_E), ("valid", VALID_E), ("test", TEST_E)):
        if style == "edge":  # ogbl-collab/ppa/ddi
            split = {"edge": torch.tensor(e)}
            if name != "train":  # shared by all the split's positives, stored as given (a repeat included)
                split["edge_neg"] = torch.tensor([[0, 5], [3, 1], [0, 5]] if name == "valid" else [[2, 4]])
        else:  # ogbl-citation2
            split = {"source_node": torch.tensor(e[:, 0]), "target_node": torch.tensor(e[:, 1])}
            if name != "train":  # row i: src_i + 1 .. src_i + 4 (mod N), to see the rows follow their pairs
                split["target_node_neg"] = torch.tensor((e[:, :1] + np.arange(1, 5)) % N)
        torch.save(split, d / f"{name}.pt")
    return root


def undirected_pairs(e):
    return sorted({(min(a, b), max(a, b)) for a, b in e.tolist()})


@pytest.mark.parametrize("style", ["edge", "citation2"])
def test_ogbl_positives_become_edge_splits(tmp_path, style, caplog):
    root = ogbl_dir(tmp_path / "ogbl", style)
    m = convert_ogb(root, tmp_path / "out", link_negatives=3, undirected=style == "edge", seed=1)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.edge_split_names == ["test", "train", "val"]
    if style == "edge":  # undirected: pairs once as (min, max); the graph holds both directions
        assert sorted(map(tuple, ds.edge_split("val").T.tolist())) == undirected_pairs(VALID_E)
        assert sorted(map(tuple, ds.edge_split("train").T.tolist())) == undirected_pairs(TRAIN_E)
        both = np.concatenate([TRAIN_E, TRAIN_E[:, ::-1]])
        assert neighbors(ds) == csc(both.T, N)
        assert m["edge_splits"]["val"] == {"edges": 2, "negatives": 0, "shared_negatives": 3}
        assert ds.edge_shared_negatives("val").T.tolist() == [[0, 5], [3, 1], [0, 5]]
        assert ds.edge_shared_negatives("test", mmap=True).T.tolist() == [[2, 4]]
        assert ds.edge_shared_negatives("train") is None
        assert "edge_negatives.val" not in m["files"]  # none per pair: OGB's evaluation ranks the shared ones
        assert ringgnn.verify(tmp_path / "out")["files_checked"] == len(m["files"])
    else:
        assert ds.edge_split("val").T.tolist() == sorted(VALID_E.tolist(), key=lambda p: (p[1], p[0]))
        assert ds.edge_split("test").T.tolist() == [[1, 4]]
        assert neighbors(ds) == csc(TRAIN_E.T, N)  # the held-out positives are not in the graph
        assert m["edge_splits"]["val"] == {"edges": 2, "negatives": 4, "given_negatives": True}  # OGB's own
        assert ds.edge_shared_negatives("val") is None
        for (s, _), row in zip(ds.edge_split("val").T.tolist(), ds.edge_negatives("val").tolist()):
            assert row == [(s + k) % N for k in range(1, 5)]
    np.testing.assert_array_equal(features(tmp_path / "out"), FEAT)


def test_ogbl_citation2_undirected_keeps_its_own_negatives(tmp_path, caplog):
    """With --undirected a split of given negatives keeps each pair as listed ((5, 1) is not
    turned into (1, 5)): its negatives replace the listed destination, as OGB evaluates them."""
    root = ogbl_dir(tmp_path / "ogbl", "citation2")
    m = convert_ogb(root, tmp_path / "out", link_negatives=3, undirected=True, seed=1)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.edge_split("val").T.tolist() == [[5, 1], [0, 2]]  # as listed, in (dst, src) order
    assert ds.edge_split("test").T.tolist() == [[1, 4]]
    assert sorted(map(tuple, ds.edge_split("train").T.tolist())) == undirected_pairs(TRAIN_E)  # (min, max)
    assert neighbors(ds) == csc(np.concatenate([TRAIN_E, TRAIN_E[:, ::-1]]).T, N)  # neither direction held out
    assert m["edge_splits"]["val"] == {"edges": 2, "negatives": 4, "given_negatives": True}
    for (s, _), row in zip(ds.edge_split("val").T.tolist(), ds.edge_negatives("val").tolist()):
        assert row == [(s + k) % N for k in range(1, 5)]  # OGB's row of that positive
    assert ringgnn.verify(tmp_path / "out")["files_checked"] == len(m["files"])
    assert "draws" not in caplog.text


def test_undirected_keeps_the_direction_only_of_given_negative_splits(tmp_path):
    """In one --undirected build: the split with given negatives keeps (7, 3) as listed, the
    split whose negatives are drawn stores (8, 2) as (2, 8)."""
    np.save(tmp_path / "e.npy", np.array([[i, (i + 1) % 10] for i in range(10)]))
    np.save(tmp_path / "val.npy", np.array([[7, 3]]))
    np.save(tmp_path / "test.npy", np.array([[8, 2]]))
    np.save(tmp_path / "neg.npy", np.array([[0, 1]]))
    m = ringgnn.convert(tmp_path / "e.npy", tmp_path / "out", undirected=True, absent_ok=True, link_negatives=2,
                        link_split={"val": tmp_path / "val.npy", "test": tmp_path / "test.npy"},
                        given_negatives={"val": tmp_path / "neg.npy"})
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.edge_split("val").T.tolist() == [[7, 3]] and ds.edge_negatives("val").tolist() == [[0, 1]]
    assert ds.edge_split("test").T.tolist() == [[2, 8]] and m["edge_splits"]["test"]["negatives"] == 2
    assert ringgnn.verify(tmp_path / "out")["files_checked"] == len(m["files"])


def test_knowledge_graph_splits_are_refused_by_name(tmp_path):
    """ogbl-wikikg2 (homogeneous raw/, head/relation/tail splits) and ogbl-biokg (OGB's
    heterogeneous CSV raw/, typed triples) are refused naming the split and why; nothing written."""
    wiki = ogbl_dir(tmp_path / "wikikg2")
    triples = {"head": torch.tensor([0, 1]), "relation": torch.tensor([0, 2]), "tail": torch.tensor([2, 3])}
    for name in ("train", "valid", "test"):
        torch.save(triples, wiki / "split" / "sales" / f"{name}.pt")
    with pytest.raises(_core.InputError, match=r"train.pt: a knowledge-graph completion split \(head/relation/tail"):
        convert_ogb(wiki, tmp_path / "out")
    bio = tmp_path / "biokg"
    gz(bio / "raw" / "triplet-type-list.csv.gz", [["drug", "treats", "disease"]])
    (bio / "split" / "random").mkdir(parents=True)
    torch.save({**triples, "head_type": ["drug"] * 2, "tail_type": ["disease"] * 2}, bio / "split" / "random" / "train.pt")
    with pytest.raises(_core.InputError, match=r"random: a knowledge-graph completion split"):
        convert_ogb(bio, tmp_path / "out", add_reverse=True)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_ogbl_written_by_dataset_saver(tmp_path):
    saver_mod = import_ogb_io()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        saver = saver_mod.DatasetSaver("ogbl-toy", is_hetero=False, version=1, root="sub")
        saver.save_graph_list([{"edge_index": TRAIN_E.T.copy(), "num_nodes": N}])
        saver.save_task_info("link prediction", "hits@10")
        saver.save_split({"train": {"edge": TRAIN_E},
                          "valid": {"edge": VALID_E, "edge_neg": np.array([[0, 5], [3, 4], [1, 3]])},
                          "test": {"edge": TEST_E, "edge_neg": np.array([[0, 5]])}}, "random")
    finally:
        os.chdir(cwd)
    convert_ogb(tmp_path / "sub_ogbl_toy" / "toy", tmp_path / "out", link_negatives=2)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert sorted(map(tuple, ds.edge_split("val").T.tolist())) == sorted(map(tuple, VALID_E.tolist()))
    assert neighbors(ds) == csc(TRAIN_E.T, N)
    assert ds.edge_shared_negatives("val").T.tolist() == [[0, 5], [3, 4], [1, 3]]
    assert ds.edge_shared_negatives("test").T.tolist() == [[0, 5]]
    # OGB's rule on scores src * dst: positives (5, 1) -> 5 and (0, 2) -> 0 (stored by (dst, src)),
    # shared negatives 0, 12, 3. Hits@1: above 12: none; @2: above 3: {5}; @3: above 0 (strictly):
    # {5}; @4: fewer than 4 negatives, all. Ranks (ties half): 5 -> 2, 0 -> 0.5 * (2 + 3) + 1 = 3.5.
    # AUC: 5 beats 0 and 3, 0 ties 0 -> 2.5 / 6.
    p, h = ds.edge_split("val"), ds.edge_shared_negatives("val")
    assert (p[0] * p[1]).tolist() == [5, 0]
    got = metrics.shared_link_scores((p[0] * p[1]).astype(float), (h[0] * h[1]).astype(float), ks=(1, 2, 3, 4))
    assert got["hits"] == {1: 0.0, 2: 0.5, 3: 0.5, 4: 1.0}
    assert got["mrr"] == pytest.approx((1 / 2 + 1 / 3.5) / 2) and got["auc"] == pytest.approx(2.5 / 6)


OGBL_BAD = [
    (lambda d: torch.save({"edges": torch.tensor(VALID_E)}, d / "valid.pt"), _core.InputError,
     r"valid.pt: no 'edge' and no 'source_node'/'target_node' \(it has: edges\)"),
    (lambda d: torch.save({"edge": torch.tensor([[0, 9]])}, d / "test.pt"), _core.InputError,
     r"test.pt: pair 0: node id 9 is out of range"),
    (lambda d: torch.save({"edge": torch.tensor([[0.5, 1.0]])}, d / "test.pt"), _core.InputError,
     r"test.pt: 'edge' is float32 of shape \(1, 2\)"),
    (lambda d: os.remove(d / "test.pt"), FileNotFoundError, r"needs train, valid, test"),
    (lambda d: torch.save({"edge": torch.tensor([[0, 2]])}, d / "test.pt"), _core.InputError,
     r"test.pt: pair 0 \(0, 2\) is also in .*valid.pt; a pair belongs to one split"),
    (lambda d: torch.save({"edge": torch.tensor([[1, 4], [3, 3]])}, d / "test.pt"), _core.InputError,
     r"test.pt: pair 1 is the self loop \(3, 3\)"),
    (lambda d: torch.save({"edge": torch.tensor([[1, 4], [1, 4]])}, d / "test.pt"), _core.InputError,
     r"test.pt: pairs 0 and 1 are both \(1, 4\); list each pair once"),
    (lambda d: torch.save({"edge": torch.tensor(TEST_E), "edge_neg": torch.tensor([[0, 6]])}, d / "test.pt"),
     _core.InputError, r"test.pt: edge_neg\[0\]: node id 6 is out of range"),
    (lambda d: torch.save({"edge": torch.tensor(TEST_E), "edge_neg": torch.tensor([0, 5])}, d / "test.pt"),
     _core.InputError, r"test.pt: 'edge_neg' is int64 of shape \(2,\); OGB's negative edges are \(m >= 1, 2\)"),
    (lambda d: torch.save({"edge": torch.tensor(TEST_E), "edge_neg": torch.zeros((0, 2), dtype=torch.long)},
                          d / "test.pt"), _core.InputError, r"test.pt: 'edge_neg' is int64 of shape \(0, 2\)"),
]


@pytest.mark.parametrize("mutate,error,pattern", OGBL_BAD, ids=[str(i) for i in range(len(OGBL_BAD))])
def test_ogbl_bad_input_names_the_file_and_leaves_nothing(tmp_path, mutate, error, pattern):
    root = ogbl_dir(tmp_path / "ogbl")
    mutate(root / "split" / "sales")
    with pytest.raises(error, match=pattern):
        convert_ogb(root, tmp_path / "out", link_negatives=2)
    assert_nothing_left(tmp_path / "out")


def test_ogbl_held_out_pair_that_is_also_a_training_edge_leaves_the_graph(tmp_path):
    # ogbl-collab repeats collaborations across years: a valid pair may also be a training edge;
    # every copy of a held-out pair leaves the graph (docs: ARCHITECTURE.md, "Importers").
    root = ogbl_dir(tmp_path / "ogbl")
    torch.save({"edge": torch.tensor([[1, 2]])}, root / "split" / "sales" / "test.pt")
    convert_ogb(root, tmp_path / "out", link_negatives=0)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.edge_split("test").T.tolist() == [[1, 2]]
    assert 1 not in ds.neighbors(2).tolist() and (1, 2) not in map(tuple, ds.edge_split("train").T.tolist())


# --- heterogeneous CSV layout (ogbn-mag) ----------------------------------------------------------

MAG_N = {"author": 3, "field_of_study": 2, "institution": 1, "paper": 4}
MAG_E = {("author", "writes", "paper"): [(0, 0), (1, 0), (2, 3)], ("paper", "cites", "paper"): [(0, 1), (1, 2)],
         ("author", "affiliated_with", "institution"): [(0, 0), (2, 0)],
         ("paper", "has_topic", "field_of_study"): [(0, 1), (3, 0), (3, 1)]}
MAG_FEAT = np.arange(8, dtype=np.float32).reshape(4, 2) / 4
MAG_LABEL = [3, 0, float("nan"), 1]


def header_gz(path: Path, table: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(",".join(table) + "\n" + ",".join(str(v) for v in table.values()) + "\n")


def ogbn_mag_dir(root: Path) -> Path:
    """ogbn-mag's CSV layout, as OGB's read_csv_heterograph_raw and read_node_label_hetero read it."""
    raw = root / "raw"
    header_gz(raw / "num-node-dict.csv.gz", MAG_N)
    gz(raw / "triplet-type-list.csv.gz", [list(t) for t in MAG_E])
    for t, e in MAG_E.items():
        gz(raw / "relations" / "___".join(t) / "edge.csv.gz", e)
        gz(raw / "relations" / "___".join(t) / "num-edge-list.csv.gz", [len(e)])
    gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", [[repr(float(x)) for x in row] for row in MAG_FEAT])
    header_gz(raw / "nodetype-has-label.csv.gz", {t: t == "paper" for t in MAG_N})
    gz(raw / "node-label" / "paper" / "node-label.csv.gz", [[x] for x in MAG_LABEL])
    d = root / "split" / "time"
    header_gz(d / "nodetype-has-split.csv.gz", {t: t == "paper" for t in MAG_N})
    for s, ids in (("train", [0, 3]), ("valid", [1]), ("test", [2])):
        gz(d / "paper" / f"{s}.csv.gz", ids)
    return root


def test_ogbn_mag_csv_layout_converts_exactly(tmp_path):
    root = ogbn_mag_dir(tmp_path / "ogbn_mag")
    m = convert_ogb(root, tmp_path / "out", add_reverse=True)
    ds = ringgnn.Dataset.open(tmp_path / "out")
    assert ds.num_nodes_dict == MAG_N and m["source"]["from"] == "ogb"
    for (h, r, t), e in MAG_E.items():
        arr = np.array(e).T
        assert neighbors(ds.relation(f"{h}:{r}:{t}")) == csc(arr, MAG_N[t])
        assert neighbors(ds.relation(f"{t}:rev_{r}:{h}")) == csc(arr[::-1], MAG_N[h])
    paper = ds.node_type("paper")
    np.testing.assert_array_equal(features(tmp_path / "out", "node/paper"), MAG_FEAT)
    assert paper.labels.tolist() == [3, 0, -1, 1]
    assert paper.split("train").tolist() == [0, 3] and paper.split("val").tolist() == [1]
    assert ds.node_type("author").labels is None and ds.node_type("author").split_names == []


MAG_CSV_BAD = [
    (lambda r: os.remove(r / "raw" / "num-node-dict.csv.gz"), FileNotFoundError, r"num-node-dict.csv.gz"),
    (lambda r: gz(r / "raw" / "triplet-type-list.csv.gz", [["author", "writes", "venue"]]), _core.InputError,
     r"triplet-type-list.csv.gz: line 1, column 3 names a node type that num-node-dict.csv.gz does not have "
     r"\(it has 'author', 'field_of_study', 'institution', 'paper'; not quoted: the dataset named this file, not you\)"),
    (lambda r: os.remove(r / "raw" / "relations" / "paper___cites___paper" / "edge.csv.gz"), FileNotFoundError,
     r"the edges of paper___cites___paper"),
    (lambda r: gz(r / "raw" / "node-feat" / "paper" / "node-feat.csv.gz", MAG_FEAT[:3]), _core.InputError,
     r"node-feat.csv.gz: 3 rows, but num-node-dict.csv.gz has 4 'paper' nodes"),
    (lambda r: gz(r / "split" / "time" / "paper" / "test.csv.gz", [4]), _core.InputError,
     r"test.csv.gz: line 1: 'paper' id 4 is out of range"),
    (lambda r: gz(r / "raw" / "relations" / "author___writes___paper" / "edge.csv.gz", [(3, 0)]), _core.InputError,
     r"author___writes___paper/edge.csv.gz.*out of range"),  # found by the builder, naming the file
]


@pytest.mark.parametrize("mutate,error,pattern", MAG_CSV_BAD, ids=[str(i) for i in range(len(MAG_CSV_BAD))])
def test_ogbn_mag_bad_input_names_the_file_and_leaves_nothing(tmp_path, mutate, error, pattern):
    root = ogbn_mag_dir(tmp_path / "ogbn_mag")
    mutate(root)
    with pytest.raises(error, match=pattern):
        convert_ogb(root, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")


def test_ogbn_mag_cli_and_option_checks(tmp_path, capsys):
    ogbn_mag_dir(tmp_path / "ogbn_mag")
    assert main(["convert", str(tmp_path / "ogbn_mag"), str(tmp_path / "a"), "--add-reverse", "-q"]) == 0
    assert len(ringgnn.Dataset.open(tmp_path / "a").relations) == 8
    assert main(["convert", str(tmp_path / "ogbn_mag"), str(tmp_path / "b"), "--undirected"]) == 1
    assert "takes add_reverse (--add-reverse), not undirected" in capsys.readouterr().err
    csv_dir(tmp_path / "ogbn")
    assert main(["convert", str(tmp_path / "ogbn"), str(tmp_path / "b"), "--add-reverse"]) == 1
    assert "adds reverse edges with undirected (--undirected)" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
