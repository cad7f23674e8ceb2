"""Embedding tables in files (`ringgnn.models.tables`): SparseAdam on the rows of each batch gives
what torch's SparseAdam gives an in-memory sparse Embedding; checkpoint copies round-trip; bad
files are refused."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ringgnn
from ringgnn.models.tables import FileTable, TableReader, load_tables, save_tables


def test_file_table_equals_an_in_memory_table_with_sparse_adam(tmp_path):
    torch.manual_seed(0)
    n, dim = 50, 8
    emb = torch.nn.Embedding(n, dim, sparse=True)
    table = FileTable(str(tmp_path), "author", n, dim, create=True, lr=0.05)
    table.arrays["weight"][:] = emb.weight.detach().numpy()
    w0 = emb.weight.detach().numpy().copy()
    seen = []
    opt = torch.optim.SparseAdam(emb.parameters(), lr=0.05)
    head = torch.nn.Linear(dim, 3)
    rng = np.random.default_rng(0)
    for step in range(8):
        ids = rng.integers(0, n, 12)
        if step % 2:
            ids = np.unique(ids)  # a batch's n_id: distinct; even steps repeat ids
        if step == 5:
            ids = ids[:0]  # a batch without this type: still a step
        seen.append(ids)
        y = torch.from_numpy(rng.integers(0, 3, len(ids)))
        loss = torch.nn.functional.cross_entropy(head(emb(torch.from_numpy(ids))), y, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        rows = table.gather(ids)
        assert rows.is_leaf and rows.requires_grad
        loss = torch.nn.functional.cross_entropy(head(rows), y, reduction="sum")
        loss.backward()
        table.step(ids, rows.grad)
        assert np.allclose(table.arrays["weight"], emb.weight.detach().numpy(), atol=1e-6), step
    st = opt.state[emb.weight]
    assert np.allclose(table.arrays["exp_avg"], st["exp_avg"].to_dense().numpy(), atol=1e-7)
    assert np.allclose(table.arrays["exp_avg_sq"], st["exp_avg_sq"].to_dense().numpy(), atol=1e-7)
    assert table.steps == int(st["step"])
    # Rows never gathered were never touched.
    unseen = np.setdiff1d(np.arange(n), np.concatenate(seen))
    assert len(unseen) and np.array_equal(table.arrays["weight"][unseen], w0[unseen])


def test_checkpoint_copies_round_trip_and_bad_files_are_refused(tmp_path):
    torch.manual_seed(1)
    live = FileTable(str(tmp_path / "live"), "author", 10, 4, create=True)
    live.step(np.array([1, 3]), torch.ones(2, 4))
    ckpt = str(tmp_path / "last.pt")
    rec = save_tables({"author": live}, ckpt)
    assert rec["author"]["files"]["weight"] == "last.author.weight.npy" and rec["author"]["steps"] == 1
    saved = np.load(tmp_path / "last.author.weight.npy").copy()
    assert np.array_equal(saved, live.arrays["weight"])
    live.step(np.array([1]), torch.ones(1, 4))
    assert not np.array_equal(saved, live.arrays["weight"])
    load_tables({"author": live}, ckpt, rec)
    assert np.array_equal(live.arrays["weight"], saved) and live.steps == 1
    r = TableReader(str(tmp_path / "last.author.weight.npy"), 10, 4)
    assert np.array_equal(r.gather(np.array([3, 1])), saved[[3, 1]])
    with pytest.raises(ringgnn.InputError, match=r"float32 \(10, 4\), expected float32 \(10, 5\)"):
        TableReader(str(tmp_path / "last.author.weight.npy"), 10, 5)
    with pytest.raises(ringgnn.InputError, match="no embedding table file for node type 'author'"):
        load_tables({"author": live}, ckpt, {})
    with pytest.raises(FileNotFoundError, match="reading the embedding table"):
        TableReader(str(tmp_path / "missing.npy"), 10, 4)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from ringgnn.data.generate import generate_hetero

    out = tmp_path_factory.mktemp("planted") / "mag"
    generate_hetero(out, papers=600, authors=400, institutions=20, seed=0)
    return out


def test_training_with_tables_in_files_resumes_and_infers_exactly(planted, tmp_path):
    """`--embed-tables file`: the featureless types' tables live in RUN/tables, each checkpoint
    copies them beside itself; resume continues from the copies; exact layer-wise inference and
    a full-batch forward of the checkpoint (rows read from its table file) agree."""
    from ringgnn.inference.hetero import infer_hetero, load_hetero_run
    from ringgnn.training.loop import train

    kw = dict(target="paper", fanouts=[4, 3], epochs=2, hidden=16, embed_dim=8, batch_size=128, quiet=True,
              log=lambda s: None, eval_mode="sampled", threads=1)
    run = str(tmp_path / "run")
    m = train(planted, out=run, embed_tables="file", **kw)
    assert len(m["epochs"]) == 2
    state = torch.load(os.path.join(run, "last.pt"), weights_only=True)
    assert state["args"]["hetero"]["external"] == ["author", "institution"]
    assert not any(k.startswith("embeddings.") for k in state["model"])
    rec = state["tables"]["author"]
    assert rec["files"]["weight"] == "last.e1.author.weight.npy" and rec["steps"] > 0
    names = sorted(os.listdir(run))
    assert "last.e0.author.weight.npy" not in names  # older copies pruned once last.pt named new ones
    live = np.load(os.path.join(run, "tables", "author.weight.npy"))
    assert np.array_equal(np.load(os.path.join(run, rec["files"]["weight"])), live)
    # Resume: one more epoch from the copies equals a run of three epochs straight through.
    m3 = train(planted, out=run, embed_tables="file", resume=True, **dict(kw, epochs=3))
    straight = str(tmp_path / "straight")
    s3 = train(planted, out=straight, embed_tables="file", **dict(kw, epochs=3))
    assert [e["loss"] for e in m3["epochs"]] == pytest.approx([e["loss"] for e in s3["epochs"]], rel=1e-5)
    a = np.load(os.path.join(run, torch.load(os.path.join(run, "last.pt"), weights_only=True)["tables"]["author"]
                             ["files"]["weight"]))
    b = np.load(os.path.join(straight, torch.load(os.path.join(straight, "last.pt"), weights_only=True)["tables"]
                             ["author"]["files"]["weight"]))
    assert np.allclose(a, b, atol=1e-5)
    # Exact inference equals the full-batch forward of the same checkpoint.
    ds, net, path = load_hetero_run(run)
    assert set(net.tables) == {"author", "institution"}
    r = infer_hetero(run, output="logits", block_nodes=100, piece_edges=500)
    x = {"paper": torch.from_numpy(ringgnn._core.FeatureReader(ds.path, part="node/paper").gather(
        np.arange(ds.num_nodes_dict["paper"])))}
    n_id = {t: torch.arange(n) for t, n in ds.num_nodes_dict.items()}
    edges = {}
    for rname in ds.relations:
        rel = ds.relation(rname)
        ptr = rel.indptr()
        src = np.concatenate([rel.neighbors(v) for v in range(rel.num_nodes)] + [np.zeros(0, np.int64)])
        edges[rname] = torch.from_numpy(np.stack([src, np.repeat(np.arange(rel.num_nodes), np.diff(ptr))]))
    with torch.no_grad():
        full = net(x, edges, n_id).numpy()
    assert np.allclose(r["array"], full, atol=1e-4)
    # The command reads the tables from the checkpoint's files without PyTorch: the same predictions.
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"rc = main(['predict', {run!r}, '--quiet', '--out', {str(tmp_path / 'p.npy')!r}])\n"
            "print('torch' in sys.modules, rc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split()[-2:] == ["False", "0"], out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), full.argmax(1))
    # Serving reads the table file too: a sampled batch's logits equal the forward with the
    # authors' and institutions' rows taken from the checkpoint's copies by hand.
    from ringgnn.models.checkpoints import read_checkpoint
    from ringgnn.serving.model import HeteroModelRun

    served = HeteroModelRun(run, ds, read_checkpoint(run))
    s = ringgnn.HeteroNeighborSampler(ds, [4, 3]).sample([0, 5, 7], "paper")
    feats = {"paper": ringgnn._core.FeatureReader(ds.path, part="node/paper").gather(s.node["paper"])}
    logits, _ = served.run(s, feats)
    state = torch.load(path, weights_only=True)
    x = {"paper": torch.from_numpy(feats["paper"])}
    for t in ("author", "institution"):
        w = np.load(os.path.join(run, state["tables"][t]["files"]["weight"]))
        x[t] = torch.from_numpy(w[s.node[t]])
    edges = {r: torch.from_numpy(s.edge_index(r)) for r in s.row}
    with torch.no_grad():
        want = net(x, edges, {t: torch.from_numpy(v) for t, v in s.node.items()})
    assert np.allclose(logits.numpy(), want.numpy(), atol=1e-6)
    # A held table trains as before: no table files.
    held = str(tmp_path / "held")
    train(planted, out=held, embed_tables="memory", **dict(kw, epochs=1))
    assert not os.path.exists(os.path.join(held, "tables"))
    assert "external" not in torch.load(os.path.join(held, "last.pt"), weights_only=True)["args"]["hetero"]
