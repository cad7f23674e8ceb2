"""``ringgnn.importers.ogb_hetero_npz``: OGB's binary heterogeneous layout (``edge_index_dict.npz``
and friends), written by hand after OGB's ``read_binary_heterograph_raw`` and by OGB's own
``DatasetSaver`` (skipped without the ``ogb`` package), converted and checked against the arrays;
every bad input is an error naming its file and array, and leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import ringgnn
import torch
from ringgnn import _core
from ringgnn.importers.ogb import convert_ogb

from test_import_ogb import MAG_E, MAG_FEAT, MAG_LABEL, MAG_N, assert_nothing_left, csc, features, import_ogb_io, \
    neighbors

SPLIT = {"train": {"paper": np.array([0, 3])}, "valid": {"paper": np.array([1])}, "test": {"paper": np.array([2])}}


def npz_dir(root: Path, fortran: bool = False) -> Path:
    """The binary layout as DatasetSaver writes it (one graph): per-type counts, (2, E) int64
    edges per HEAD___REL___TAIL, per-type features and labels, split_dict.pt of type -> ids."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    np.savez_compressed(raw / "num_nodes_dict.npz", **{t: np.array([n]) for t, n in MAG_N.items()})
    edges = {"___".join(t): np.array(e, dtype=np.int64).T for t, e in MAG_E.items()}
    if fortran:  # a (2, E) array stored column-major streams as its transpose
        edges = {k: np.asfortranarray(v) for k, v in edges.items()}
    np.savez_compressed(raw / "edge_index_dict.npz", **edges)
    np.savez_compressed(raw / "node_feat_dict.npz", paper=MAG_FEAT)
    np.savez_compressed(raw / "node-label.npz", paper=np.array(MAG_LABEL).reshape(-1, 1))
    (root / "split" / "time").mkdir(parents=True)
    torch.save(SPLIT, root / "split" / "time" / "split_dict.pt")
    return root


def assert_mag(out: Path, m):
    ds = ringgnn.Dataset.open(out)
    assert ds.num_nodes_dict == MAG_N and m["source"]["from"] == "ogb"
    for (h, r, t), e in MAG_E.items():
        arr = np.array(e).T
        assert neighbors(ds.relation(f"{h}:{r}:{t}")) == csc(arr, MAG_N[t])
        assert neighbors(ds.relation(f"{t}:rev_{r}:{h}")) == csc(arr[::-1], MAG_N[h])
    paper = ds.node_type("paper")
    np.testing.assert_array_equal(features(out, "node/paper"), MAG_FEAT)
    assert paper.labels.tolist() == [3, 0, -1, 1]
    assert paper.split("train").tolist() == [0, 3] and paper.split("val").tolist() == [1]
    assert paper.split("test").tolist() == [2]
    assert ds.node_type("author").labels is None and ds.node_type("author").split_names == []
    assert ringgnn.verify(out)["files_checked"] > 0


@pytest.mark.parametrize("fortran", [False, True])
def test_binary_layout_converts_exactly(tmp_path, fortran):
    root = npz_dir(tmp_path / "ogbn_mag", fortran)
    assert_mag(tmp_path / "out", convert_ogb(root, tmp_path / "out", add_reverse=True))


def test_binary_layout_written_by_dataset_saver(tmp_path):
    saver_mod = import_ogb_io()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        saver = saver_mod.DatasetSaver("ogbn-toymag", is_hetero=True, version=1, root="sub")
        saver.save_graph_list([{"edge_index_dict": {t: np.array(e, dtype=np.int64).T for t, e in MAG_E.items()},
                                "num_nodes_dict": dict(MAG_N), "node_feat_dict": {"paper": MAG_FEAT},
                                "edge_feat_dict": None}])
        saver.save_task_info("multiclass classification", "acc", num_classes=4)
        saver.save_target_labels({"paper": np.array(MAG_LABEL).reshape(-1, 1)})
        saver.save_split(SPLIT, "time")
    finally:
        os.chdir(cwd)
    root = tmp_path / "sub_ogbn_toymag" / "toymag"
    assert (root / "raw" / "edge_index_dict.npz").is_file()
    assert_mag(tmp_path / "out", convert_ogb(root, tmp_path / "out", add_reverse=True))


def _edges(root: Path, **replace):
    e = {"___".join(t): np.array(v, dtype=np.int64).T for t, v in MAG_E.items()}
    e.update(replace)
    np.savez_compressed(root / "raw" / "edge_index_dict.npz", **e)


NPZ_BAD = [
    (lambda r: os.remove(r / "raw" / "num_nodes_dict.npz"), FileNotFoundError, r"num_nodes_dict.npz"),
    (lambda r: np.savez(r / "raw" / "num_nodes_dict.npz", paper=np.array([4, 5])), _core.InputError,
     r"num_nodes_dict.npz: 'paper' is int64 \[4, 5\]; give one node count per type"),
    (lambda r: _edges(r, author___writes___venue=np.zeros((2, 1), np.int64)), _core.InputError,
     r"edge_index_dict.npz: array 'author___writes___venue' is not HEAD___REL___TAIL of node types"),
    (lambda r: _edges(r, paper___cites___paper=np.array([[0, 1], [1, 4]])), _core.InputError,
     r"edge_index_dict.npz: paper___cites___paper\[dst, 1\]: 'paper' id 4 is out of range"),
    (lambda r: _edges(r, author___writes___paper=np.array([[3], [0]])), _core.InputError,
     r"edge_index_dict.npz: author___writes___paper\[src, 0\]: 'author' id 3 is out of range"),
    (lambda r: _edges(r, paper___cites___paper=np.zeros((3, 1), np.int64)), _core.InputError,
     r"paper___cites___paper: int64 of shape \(3, 1\); OGB's edge_index is integers of shape \(2, E\)"),
    (lambda r: np.savez(r / "raw" / "node_feat_dict.npz", paper=MAG_FEAT[:3]), _core.InputError,
     r"node_feat_dict.npz: 'paper' is float32 of shape \(3, 2\); give numbers of shape \(4, D\)"),
    (lambda r: np.savez(r / "raw" / "node-label.npz", paper=np.zeros((3, 1))), _core.InputError,
     r"node-label.npz: 3 labels of 'paper', but num_nodes_dict.npz has 4"),
    (lambda r: torch.save({**SPLIT, "test": {"venue": np.array([0])}}, r / "split" / "time" / "split_dict.pt"),
     _core.InputError, r"split_dict.pt: 'test' names node type 'venue', which num_nodes_dict.npz does not have"),
    (lambda r: torch.save({**SPLIT, "test": {"paper": np.array([2, 4])}}, r / "split" / "time" / "split_dict.pt"),
     _core.InputError, r"split_dict.pt: 'test' of 'paper', entry 1: 'paper' id 4 is out of range"),
    (lambda r: os.remove(r / "split" / "time" / "split_dict.pt"), FileNotFoundError, r"split_dict.pt"),
]


@pytest.mark.parametrize("mutate,error,pattern", NPZ_BAD, ids=[str(i) for i in range(len(NPZ_BAD))])
def test_bad_binary_layout_names_the_file_and_leaves_nothing(tmp_path, mutate, error, pattern):
    root = npz_dir(tmp_path / "ogbn_mag")
    mutate(root)
    with pytest.raises(error, match=pattern):
        convert_ogb(root, tmp_path / "out")
    assert_nothing_left(tmp_path / "out")
