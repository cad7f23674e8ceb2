"""``ringgnn embed RUN --attach DS --name NAME`` (python/ringgnn/inference/attach.py): the embeddings as the
features of a copy of DS, beside it. Round trip (the copy's features are the embeddings `embed
--out` writes, its graph, labels and splits DS's, hard-linked), its checksum verified by
``ringgnn verify``, ``ringgnn train NAME`` trains on it; bad input (a name clash, a dataset of
another node count, --out or --nodes with --attach, a bad name) refused with nothing written;
an interrupted run leaves nothing."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ringgnn
from ringgnn.training.loop import train

FAST = dict(batch_size=128, epochs=1, lr=0.01, quiet=True, log=lambda s: None)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("attach")
    rng = np.random.default_rng(0)
    n, dim = 600, 12
    edges = rng.integers(0, n, (4000, 2)).astype(np.int64)
    np.save(root / "edges.npy", edges)
    y = rng.integers(0, 3, n)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x[np.arange(n), y] += 1.0
    np.save(root / "x.npy", x)
    np.save(root / "y.npy", y.astype(np.int64))
    ringgnn.convert(root / "edges.npy", root / "ds", features=root / "x.npy", labels=root / "y.npy",
                    split="train=0.6,val=0.2,test=0.2", seed=1)
    np.save(root / "e2.npy", edges[:100] % 500)
    ringgnn.convert(root / "e2.npy", root / "small", num_nodes=500)
    train(root / "ds", model="sage", hidden=16, out=str(root / "run"), eval_mode="sampled", **FAST)
    return root


def test_round_trip_verify_and_train_on_the_copy(setup, cli):
    root = setup
    r = cli("embed", root / "run", "--out", root / "emb.npy", "--quiet")
    assert r.code == 0, r.err
    want = np.load(root / "emb.npy")
    r = cli("embed", root / "run", "--attach", root / "ds", "--name", "ds-emb", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    dest = root / "ds-emb"
    assert s["dataset"] == str(dest) and s["rows"] == 600 and s["dim"] == 16
    new, old = ringgnn.Dataset.open(dest), ringgnn.Dataset.open(root / "ds")
    assert (new.num_nodes, new.num_edges, new.feature_dim) == (600, old.num_edges, 16)
    from ringgnn.pyg import RingFeatureStore

    got = RingFeatureStore(new).reader().gather(np.arange(600))
    np.testing.assert_array_equal(got, want)  # the same float32 rows as `embed --out`
    np.testing.assert_array_equal(new.indptr(), old.indptr())
    np.testing.assert_array_equal(new.labels, old.labels)
    np.testing.assert_array_equal(new.split("test"), old.split("test"))
    assert os.path.samefile(dest / "indices.bin", root / "ds" / "indices.bin")  # hard-linked
    m = json.loads((dest / "manifest.json").read_text())
    assert m["source"]["command"] == "embed --attach" and m["source"]["layer"] == 1
    assert m["files"]["features"]["bytes"] == os.path.getsize(dest / "features.bin")
    r = cli("verify", dest)
    assert r.code == 0, r.err
    # A downstream model trains on the embeddings as they are.
    m2 = train(dest, model="sage", hidden=8, out=str(root / "run2"), eval_mode="sampled", **FAST)
    assert m2["best_val_acc"] > 0
    # The checksum is the file's: a changed byte is caught.
    with open(dest / "features.bin", "r+b") as f:
        f.seek(5)
        b = f.read(1)
        f.seek(5)
        f.write(bytes([b[0] ^ 1]))
    r = cli("verify", dest)
    assert r.code != 0 and "features" in r.err


def test_f16_features_and_bad_input(setup, cli):
    root = setup
    r = cli("embed", root / "run", "--attach", root / "ds", "--name", "ds-f16", "--dtype", "f16", "--quiet")
    assert r.code == 0, r.err
    assert ringgnn.Dataset.open(root / "ds-f16").manifest["features"]["dtype"] == "f16"
    assert cli("verify", root / "ds-f16").code == 0
    before = sorted(os.listdir(root))
    cases = [
        (("--attach", root / "ds", "--name", "ds-f16"), "already exists"),
        (("--attach", root / "small", "--name", "small-emb"), "500 nodes, but the embeddings have one row per"),
        (("--attach", root / "ds", "--name", "x", "--out", root / "e.npy"), "--out"),
        (("--attach", root / "ds", "--name", "x", "--nodes", "test"), "--nodes"),
        (("--attach", root / "ds"), "--name NAME go together"),
        (("--attach", root / "ds", "--name", "../up"), "plain directory name"),
        (("--attach", root / "nowhere", "--name", "x"), "nowhere"),
    ]
    for args, msg in cases:
        r = cli("embed", root / "run", *args)
        assert r.code == 1 and msg in r.err, (args, r.err)
    assert sorted(os.listdir(root)) == before  # nothing written, nothing left


def test_an_interrupted_attach_leaves_nothing(setup, monkeypatch):
    root = setup
    from ringgnn.inference import rows
    from ringgnn.inference.attach import attach_embeddings

    def boom(self, rows):
        raise KeyboardInterrupt

    monkeypatch.setattr(rows.RowFileWriter, "append", boom)
    before = sorted(os.listdir(root))
    with pytest.raises(KeyboardInterrupt):
        attach_embeddings(str(root / "run"), str(root / "ds"), "ds-int")
    assert sorted(os.listdir(root)) == before


@pytest.fixture(scope="module")
def typed_run(tmp_path_factory):
    """A typed dataset (papers with 3 features, labels and splits; authors without features)
    and a one-epoch R-GCN run on it (embeddings of width 8 for the authors, hidden 16)."""
    from ringgnn import NodeType, Relation
    from ringgnn.training.loop import train

    d = tmp_path_factory.mktemp("attach-typed")
    rng = np.random.default_rng(2)
    np.save(d / "x.npy", rng.standard_normal((50, 3)).astype(np.float32))
    np.save(d / "y.npy", rng.integers(0, 2, 50))
    writes = np.stack([rng.integers(0, 20, 120), rng.integers(0, 50, 120)], 1)
    np.savetxt(d / "w.csv", writes, fmt="%d", delimiter=",")
    np.savetxt(d / "wb.csv", writes[:, ::-1], fmt="%d", delimiter=",")
    ringgnn.build_hetero(d / "ds", [NodeType("paper", 50, features=d / "x.npy", labels=d / "y.npy",
                                             split="train=0.6,val=0.2,test=0.2"), NodeType("author", 20)],
                         [Relation("author:writes:paper", d / "w.csv"), Relation("paper:written_by:author", d / "wb.csv")])
    train(d / "ds", target="paper", model="rgcn", hidden=16, embed_dim=8, layers=2, batch_size=64,
                 out=str(d / "run"), epochs=1, quiet=True, log=lambda s: None)
    return d


def test_a_typed_runs_embeddings_become_a_types_features(typed_run, cli):
    """As the homogeneous round trip: the copy's rows of the type are `embed --type`'s output file,
    its other files DS's, hard-linked; a featureless type gets a feature file."""
    from ringgnn.pyg import RingFeatureStore

    root = typed_run
    old = ringgnn.Dataset.open(root / "ds")
    for t, name in (("paper", "ds-paper"), ("author", "ds-author")):
        r = cli("embed", root / "run", "--type", t, "--out", root / f"{t}.npy", "--quiet")
        assert r.code == 0, r.err
        want = np.load(root / f"{t}.npy")
        r = cli("embed", root / "run", "--attach", root / "ds", "--name", name, "--type", t, "--json")
        assert r.code == 0, r.err
        s = json.loads(r.out)
        assert (s["type"], s["rows"], s["dim"], s["layer"]) == (t, old.num_nodes_dict[t], want.shape[1], 1)
        new = ringgnn.Dataset.open(root / name)
        assert new.feature_dims()[t] == want.shape[1] and new.num_nodes_dict == old.num_nodes_dict
        got = RingFeatureStore(new).reader(t).gather(np.arange(old.num_nodes_dict[t]))
        np.testing.assert_array_equal(got, want)  # the same float32 rows as `embed --out`
        other = "author" if t == "paper" else "paper"
        assert new.feature_dims()[other] == old.feature_dims()[other]
        m = json.loads((root / name / "manifest.json").read_text())
        assert m["source"]["command"] == "embed --attach" and m["source"]["type"] == t
        linked = [e["path"] for k, e in m["files"].items() if k != f"node.{t}.features"]
        assert linked and all(os.path.samefile(root / name / p, root / "ds" / p) for p in linked)
        assert cli("verify", root / name).code == 0
    # The default type is the run's target; the text names it.
    r = cli("embed", root / "run", "--attach", root / "ds", "--name", "ds-default")
    assert r.code == 0 and "embeddings of 50 paper nodes" in r.out, r.err
    # A dataset without the type, or of another count, is refused and nothing is left.
    before = sorted(os.listdir(root))
    for args, msg in (((root / "ds", "--type", "venue"), "not a node type of the run"),
                      ((root / "run" / ".." / "ds-paper", "--name", "../x"), "plain directory name")):
        r = cli("embed", root / "run", "--attach", *args, *(() if "--name" in args else ("--name", "x")))
        assert r.code == 1 and msg in r.err, (args, r.err)
    assert sorted(os.listdir(root)) == before
