"""Negatives shared by every positive of an edge split (OGB's ``edge_neg`` of ogbl-collab, -ppa,
-ddi; ``docs/FORMAT.md`` "Edge splits"): ``convert(shared_negatives=...)`` stores them byte for
byte, ``verify`` checks them, ``Dataset.edge_shared_negatives`` reads them back, and link
evaluation (training's sampled and layer-wise scores, ``predict --edges``) ranks each positive
against all of them by OGB's rule, checked against a full-graph forward of the model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from conftest import crc32c, rewrite_payload
from ringgnn.inference import metrics
from ringgnn._core import CorruptDatasetError, InputError

from _sampling import edge_index, reference_scores

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
pytestmark = pytest.mark.timeout(300)

SHARED = np.array([[0, 5], [3, 1], [0, 5], [7, 7]])  # as given: a repeat and a self loop are kept


@pytest.fixture
def small(tmp_path):
    """A 10-node ring with chords as an (2, E) .npy, val/test held out as listed pairs."""
    e = np.array([[i, (i + 1) % 10] for i in range(10)] + [[0, 4], [2, 7], [5, 9]]).T
    np.save(tmp_path / "e.npy", e)
    np.save(tmp_path / "val.npy", np.array([[0, 4]]))
    np.save(tmp_path / "test.npy", np.array([[2, 7], [5, 9]]))
    np.save(tmp_path / "neg.npy", SHARED)
    return tmp_path


def build(d: Path, out="ds", **kw):
    opts = dict(link_split={"val": d / "val.npy", "test": d / "test.npy"}, link_negatives=2,
                shared_negatives={"test": d / "neg.npy"})
    opts.update(kw)
    return ringgnn.convert(d / "e.npy", d / out, **opts)


def test_stored_byte_for_byte_read_back_and_verified(small):
    m = build(small)
    # A split with shared negatives draws none per pair (its evaluation would never read them).
    assert m["edge_splits"]["test"] == {"edges": 2, "negatives": 0, "shared_negatives": 4}
    assert "edge_negatives.test" not in m["files"]
    assert m["edge_splits"]["val"] == {"edges": 1, "negatives": 2}  # no field when there are none
    f = m["files"]["edge_shared_negatives.test"]
    raw = (small / "ds" / f["path"]).read_bytes()
    payload = SHARED.astype("<i8").tobytes()  # row-major (src, dst) pairs, as given
    assert f["path"] == "edge_shared_negatives_test.bin" and f["payload_bytes"] == 64 == len(payload)
    assert raw == payload + bytes(4096 - 64) and f["bytes"] == 4096
    assert f["crc32c"] == f"{crc32c(raw):08x}"
    ds = ringgnn.Dataset.open(small / "ds")
    assert ds.edge_shared_negatives("test").tolist() == SHARED.T.tolist()  # (2, m), as edge_split
    assert ds.edge_shared_negatives("test", mmap=True).tolist() == SHARED.T.tolist()
    assert ds.edge_shared_negatives("val") is None and ds.edge_shared_negatives("train") is None
    with pytest.raises(InputError, match="no edge split 'nope'"):
        ds.edge_shared_negatives("nope")
    assert ringgnn.verify(small / "ds")["files_checked"] == len(m["files"])


def test_negatives_per_pair_are_checked_only_where_drawn(small):
    """More negatives per pair than nodes is refused only when some held-out split draws them."""
    np.save(small / "neg-val.npy", SHARED[:1])
    m = build(small, link_negatives=50, shared_negatives={"val": small / "neg-val.npy", "test": small / "neg.npy"})
    assert {s: i["negatives"] for s, i in m["edge_splits"].items()} == {"train": 0, "val": 0, "test": 0}
    assert not [k for k in m["files"] if k.startswith("edge_negatives.")]
    ringgnn.verify(small / "ds")
    with pytest.raises(InputError, match=r"--link-negatives 50 is not below the number of nodes \(10\)"):
        build(small, out="ds2", link_negatives=50)
    assert not (small / "ds2").exists()


def test_verify_finds_damage(small):
    build(small)
    bad = small / "bad"
    shutil.copytree(small / "ds", bad)
    rewrite_payload(bad, "edge_shared_negatives.test", np.array([3, 10], dtype="<i8").tobytes())
    with pytest.raises(CorruptDatasetError, match=r"destination of shared negative pair 0 is 10 but node ids must "
                                                  r"be in \[0, 10\)"):
        ringgnn.verify(bad)
    m = json.loads((bad / "manifest.json").read_text())
    del m["files"]["edge_shared_negatives.test"]
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CorruptDatasetError, match="edge_splits.test.shared_negatives is 4 but "
                                                  "files.edge_shared_negatives.test is missing"):
        ringgnn.Dataset.open(bad)


@pytest.mark.parametrize("shared,error,pattern", [
    ({"train": "neg.npy"}, InputError, "given for edge split 'train', which is not a held-out split"),
    ({"other": "neg.npy"}, InputError, "given for edge split 'other', which is not a held-out split"),
    ({"test": "missing.npy"}, FileNotFoundError, "shared negatives of edge split test not found"),
    ({"test": "flat.npy"}, InputError, r"flat.npy: shared negatives of edge split test must be a C-order int64 "
                                       r"array of shape \(m >= 1, 2\).*found shape \[4\]"),
    ({"test": "float.npy"}, InputError, "float.npy"),
    ({"test": "far.npy"}, InputError, r"far.npy: shared negative pair 1 of edge split test has destination 10, "
                                      r"but node ids are in \[0, 10\)"),
])
def test_bad_shared_negatives_are_refused_and_write_nothing(small, shared, error, pattern):
    np.save(small / "flat.npy", np.arange(4))
    np.save(small / "float.npy", SHARED.astype(np.float32))
    np.save(small / "far.npy", np.array([[0, 1], [2, 10]]))
    before = sorted(os.listdir(small))
    with pytest.raises(error, match=pattern):
        build(small, shared_negatives={k: small / v for k, v in shared.items()})
    assert sorted(os.listdir(small)) == before


# --- evaluation --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """A 300-node SBM with val/test held out (10% each) and 200 shared negative pairs for each,
    and a link run on it: fanouts above every degree, so sampled embeddings are the full graph's."""
    root = tmp_path_factory.mktemp("shared")
    ringgnn.generate_sbm(root / "g", nodes=300, classes=3, avg_degree=6, feature_dim=4, seed=2)
    g = ringgnn.Dataset.open(root / "g")
    np.save(root / "e.npy", edge_index(g))
    rng = np.random.default_rng(4)
    for s in ("val", "test"):
        np.save(root / f"{s}-neg.npy", rng.integers(0, 300, (200, 2)))
    np.save(root / "x.npy", np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32))
    ringgnn.convert(root / "e.npy", root / "ds", features=root / "x.npy", link_split="val=0.1,test=0.1",
                    link_negatives=3, seed=1, shared_negatives={s: root / f"{s}-neg.npy" for s in ("val", "test")})
    ds = ringgnn.Dataset.open(root / "ds")
    deg = np.diff(ds.indptr()).max()
    from ringgnn.training.loop import train

    m = train(ds, task="link", fanouts=[int(deg) + 1] * 2, batch_size=128, epochs=1, hidden=16, quiet=True,
              log=lambda s: None, out=str(root / "run"))
    return ds, root / "run", m


def want(ds, run, split):
    pos, _ = reference_scores(ds, run, ds.edge_split(split))
    neg, _ = reference_scores(ds, run, ds.edge_shared_negatives(split))
    return pos, neg, metrics.shared_link_scores(pos, neg)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_training_scores_rank_against_the_shared_negatives(linked):
    ds, run, m = linked
    for split in ("val", "test"):
        *_, w = want(ds, run, split)
        for got in (m["epochs"][-1], m["layerwise"]):  # sampled (all neighbors) and layer-wise: exact
            close(got[f"{split}_auc"], w["auc"])
            close(got[f"{split}_mrr"], w["mrr"])
            assert got[f"{split}_hits"] == pytest.approx({str(k): v for k, v in w["hits"].items()}, abs=1e-9)
        # No per-pair negatives are stored beside shared ones: nothing else could be ranked.
        assert ds.manifest["edge_splits"][split]["negatives"] == 0
        assert f"edge_negatives.{split}" not in ds.manifest["files"]


def test_predict_writes_positives_then_shared_negatives(linked, cli, tmp_path):
    ds, run, _ = linked
    pos, neg, w = want(ds, run, "test")
    r = cli("predict", run, "--edges", "test", "--out", tmp_path / "t.npy", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    table = np.load(tmp_path / "t.npy")
    assert table.shape == (len(pos) + 200,) == tuple(s["shape"])
    close(table[:len(pos)], pos)
    close(table[len(pos):], neg)
    assert (s["pairs"], s["negatives"], s["shared_negatives"]) == (len(pos), 0, 200)
    got = metrics.shared_link_scores(table[:len(pos)], table[len(pos):])
    assert s["metrics"] == dict(auc=got["auc"], mrr=got["mrr"], hits={str(k): v for k, v in got["hits"].items()})
    close(s["metrics"]["mrr"], w["mrr"])
    r = cli("predict", run, "--edges", "test", "--quiet")
    assert r.code == 0, r.err
    assert f"scores (logits) of {len(pos)} test pairs and the 200 negative pairs they share" in r.out
    assert f"test: AUC {s['metrics']['auc']:.4f}, MRR {s['metrics']['mrr']:.4f}" in r.out
