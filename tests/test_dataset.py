"""`ringgnn.Dataset`: properties, arrays, errors, and use from threads and forked children."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import ringgnn
from conftest import SMALL_EDGES, reference_csc


@pytest.fixture
def full(tmp_path, small_tsv):
    """The small graph with f16 features, labels and split files."""
    np.save(tmp_path / "x.npy", np.arange(24, dtype=np.float64).reshape(6, 4))
    np.save(tmp_path / "y.npy", np.array([3, 0, -1, 1, 0, 2], dtype=np.int32))
    np.save(tmp_path / "tr.npy", np.array([5, 0, 3]))
    np.save(tmp_path / "va.npy", np.array([1]))
    ringgnn.convert(
        small_tsv,
        tmp_path / "ds",
        features=tmp_path / "x.npy",
        labels=tmp_path / "y.npy",
        split={"train": tmp_path / "tr.npy", "val": tmp_path / "va.npy"},
        feature_dtype="f16",
    )
    return ringgnn.Dataset.open(tmp_path / "ds")


@pytest.fixture
def bare(tmp_path, small_tsv):
    ringgnn.convert(small_tsv, tmp_path / "bare")
    return ringgnn.Dataset.open(str(tmp_path / "bare"))


def test_properties(full):
    assert (full.num_nodes, full.num_edges) == (6, len(SMALL_EDGES))
    assert (full.feature_dim, full.feature_dtype, full.num_classes) == (4, "f16", 4)
    assert full.split_names == ["train", "val"]
    assert full.manifest["format"] == "ringgnn-dataset"
    r = repr(full)
    assert r.startswith("Dataset(") and "num_nodes=6" in r and "features=4xf16" in r and "train/val" in r


def test_arrays(full):
    assert full.split("train").dtype == np.int64 and full.split("train").tolist() == [5, 0, 3]
    assert full.split("val").tolist() == [1]
    assert full.labels.dtype == np.int64 and full.labels.tolist() == [3, 0, -1, 1, 0, 2]
    assert full.labels is full.labels  # read once, cached
    expected = reference_csc(SMALL_EDGES)
    assert [full.neighbors(v).tolist() for v in range(6)] == expected
    assert full.indptr().tolist() == np.cumsum([0] + [len(x) for x in expected]).tolist()
    assert full.degrees().tolist() == [len(x) for x in expected]


def test_without_features_labels_splits(bare):
    assert bare.feature_dim is None and bare.feature_dtype is None and bare.num_classes is None
    assert bare.labels is None and bare.split_names == []
    assert "features=" not in repr(bare)


def test_errors(full, bare, tmp_path):
    with pytest.raises(ringgnn.InputError, match="has no split 'test'.*train, val"):
        full.split("test")
    with pytest.raises(ringgnn.InputError, match="none"):
        bare.split("train")
    for v in [6, -1, 10**12]:
        with pytest.raises(IndexError, match="out of range"):
            full.neighbors(v)
    with pytest.raises(TypeError):
        full.neighbors(1.5)
    assert full.neighbors(np.int64(2)).tolist() == reference_csc(SMALL_EDGES)[2]
    with pytest.raises(FileNotFoundError):
        ringgnn.Dataset.open(tmp_path / "nothing")


def test_open_checks_file_sizes(bare):
    path = os.path.join(bare.path, "indices.bin")
    with open(path, "ab") as f:
        f.write(b"\0" * 4096)
    with pytest.raises(ringgnn.CorruptDatasetError, match="indices.bin") as e:
        ringgnn.Dataset.open(bare.path)
    assert isinstance(e.value, ValueError) and isinstance(e.value, ringgnn.RingGnnError)


def test_exception_hierarchy():
    assert issubclass(ringgnn.InputError, ringgnn.RingGnnError) and issubclass(ringgnn.InputError, ValueError)
    assert issubclass(ringgnn.CorruptDatasetError, ValueError)
    assert issubclass(ringgnn.DatasetExistsError, FileExistsError)
    assert issubclass(ringgnn.RingGnnError, Exception) and not issubclass(ringgnn.RingGnnError, OSError)
    assert ringgnn.InputError.__module__ == "ringgnn" and ringgnn.RingGnnError.__module__ == "ringgnn"


def test_concurrent_reads_from_threads(full):
    expected = reference_csc(SMALL_EDGES)
    errors = []

    def work():
        try:
            for _ in range(200):
                for v in range(6):
                    assert full.neighbors(v).tolist() == expected[v]
        except Exception as e:  # collected and re-raised in the test thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_use_after_fork(full):
    """DataLoader workers fork: a dataset opened in the parent must read correctly in the child."""
    expected = reference_csc(SMALL_EDGES)
    full.neighbors(0)  # used before the fork
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        try:
            ok = all(full.neighbors(v).tolist() == expected[v] for v in range(6)) and full.labels is not None
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    result = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert result == b"1"


def test_homogeneous_is_the_one_type_case(full, bare):
    """A homogeneous dataset answers the typed API: node type ``node``, relation ``node:to:node``,
    each the dataset itself."""
    assert (full.node_types, full.relations, full.edge_types) == (["node"], ["node:to:node"], [("node", "to", "node")])
    assert full.num_nodes_dict == {"node": 6} and full.num_edges_dict == {"node:to:node": len(SMALL_EDGES)}
    assert full.feature_dims() == {"node": 4} and bare.feature_dims() == {"node": None}
    assert full.node_type("node") is full and full.relation(("node", "to", "node")) is full
    assert full.check_type("node") == "node" and full.check_relation("node:to:node") == "node:to:node"
    assert ringgnn.Dataset.opened(full) is full
    with pytest.raises(ringgnn.InputError, match=r"no node type 'paper' \(it has: node\)"):
        full.node_type("paper")
    with pytest.raises(ringgnn.InputError, match=r"no relation 'a:b:c' \(it has: node:to:node\)"):
        full.relation(("a", "b", "c"))
