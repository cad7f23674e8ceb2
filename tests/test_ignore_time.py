"""Sampling without times on a dataset with times opens no time file: ``ignore_time=True`` (and a
seed type without node times, sampled without times by default) opens the typed graph without
the dataset's edge and node times. Its plan counts no times, its graph holds none, and its batches
are those of the same dataset built without times; a sampler opened without times refuses
``input_time``."""

from __future__ import annotations

import json
import logging
import os
import shutil

import numpy as np
import pytest

import ringgnn
from ringgnn import InputError
from ringgnn.data.build import NodeType, Relation, build_hetero

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

BUYS, REV = "user:buys:item", "item:rev_buys:user"
USERS, ITEMS, EDGES = 40, 60, 300


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(a typed dataset with edge times on both relations and node times on ``user``, a copy of it
    with its time files removed): 40 users, 60 items, 300 random purchases, features on both
    types, labels on users."""
    d = tmp_path_factory.mktemp("ignore_time")
    rng = np.random.default_rng(3)
    edges = np.stack([rng.integers(0, USERS, EDGES), rng.integers(0, ITEMS, EDGES)], 1)
    np.savetxt(d / "buys.csv", edges, fmt="%d", delimiter=",")
    np.save(d / "et.npy", rng.integers(0, 1000, EDGES).astype(np.int64))
    np.save(d / "nt.npy", rng.integers(0, 1000, USERS).astype(np.int64))
    np.save(d / "ux.npy", rng.standard_normal((USERS, 4)).astype(np.float32))
    np.save(d / "ix.npy", rng.standard_normal((ITEMS, 3)).astype(np.float32))
    np.save(d / "uy.npy", rng.integers(0, 3, USERS))
    build_hetero(d / "timed",
                 [NodeType("user", USERS, features=d / "ux.npy", labels=d / "uy.npy", split="train=1.0",
                           node_time=d / "nt.npy"),
                  NodeType("item", ITEMS, features=d / "ix.npy")],
                 [Relation(BUYS, d / "buys.csv", edge_time=d / "et.npy")], add_reverse=True)
    return ringgnn.Dataset.open(d / "timed"), ringgnn.Dataset.open(_without_times(d / "timed", d / "plain"))


def _without_times(src, dst):
    """A copy of the dataset ``src`` at ``dst`` with its time files removed (and the manifest's
    entries of them): the same neighbor files, in the same (time, source) order."""
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    for t in m["node_types"].values():
        t.pop("node_times", None)
    for r in m["relations"].values():
        r.pop("edge_times", None)
    for key in [k for k in m["files"] if k.endswith((".edge_times", ".edge_time_keys", ".node_times"))]:
        os.remove(dst / m["files"].pop(key)["path"])
    (dst / "manifest.json").write_text(json.dumps(m, indent=2))
    return dst


def _loader(ds, target="user", **kw):
    return ringgnn.HeteroLoader(ds, [3, 2], target, seeds=None, batch_size=8, shuffle=True, seed=5, threads=1,
                                backend="memory", feature_backend="memory", **kw)


def _batches(loader):
    out = []
    for b in loader:
        types = {t: (b[t].n_id.tolist(), b[t].x.tolist()) for t in b.node_types}
        rels = {r: b[r].edge_index.tolist() for r in b.edge_types}
        out.append((types, rels, "seed_time" in b["user"]))
    return out


def test_ignore_time_opens_no_times(pair, caplog):
    timed, plain = pair
    assert timed.has_times and not plain.has_times
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        off = _loader(timed, ignore_time=True)
    assert "ignore_time=True samples without times" in caplog.text
    ref, at = _loader(plain), _loader(timed)
    assert off.seed_time is None and at.seed_time is not None
    # The plan counts 4 bytes an edge (u32 ids), not 12 (with the edge times).
    assert not off.plan.times and at.plan.times
    for r in (BUYS, REV):
        assert off.plan.relations[r].bytes == ref.plan.relations[r].bytes == 4 * EDGES
        assert at.plan.relations[r].bytes == 12 * EDGES
    # The graph holds what the dataset without times holds: the edge times of both relations and
    # the users' node times are not loaded.
    held = off.sampler.graph().bytes
    assert held == ref.sampler.graph().bytes
    assert at.sampler.graph().bytes == held + 8 * 2 * EDGES + 8 * USERS
    # The batches are those of the dataset without times.
    got = _batches(off)
    assert got == _batches(ref) and len(got) == USERS // 8
    assert not any(seed_time for _, _, seed_time in got)


def test_from_disk_no_time_file_is_opened(pair):
    """Relations read from disk: a sampler without times keeps no edge-time file open."""
    timed, _ = pair

    def open_files():
        names = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                names.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        return [n for n in names if n.startswith(str(timed.path))]

    def sample(times):
        s = ringgnn.HeteroNeighborSampler(timed, [3, 2], backend="pread", times=times)
        s.sample([0, 1], "user")
        return s, open_files()

    s_on, with_times = sample(True)
    assert any("edge_times" in n for n in with_times), with_times
    del s_on
    s_off, without = sample(False)
    assert without and not any("times" in os.path.basename(n) for n in without), without


def test_a_sampler_without_times_refuses_input_time(pair):
    timed, _ = pair
    s = ringgnn.HeteroNeighborSampler(timed, [2], times=False)
    assert not s.times and not s.plan().times
    with pytest.raises(InputError, match="opened without the dataset's times"):
        s.sample([0], "user", input_time=[5])
    with pytest.raises(InputError, match="opened without the dataset's times"):
        ringgnn.HeteroLoader(timed, [2], "user", seeds=None, sampler=s)  # at the users' node times
    # Without input_time it samples (every edge), and a loader that ignores time takes it.
    assert len(s.sample([0], "user").node["user"]) >= 1
    assert _loader(timed, sampler=s, ignore_time=True).seed_time is None
    with pytest.raises(InputError, match="times=True, but the plan given was made without"):
        ringgnn.HeteroNeighborSampler(timed, [2], plan=s.plan(), times=True)
    assert not ringgnn.HeteroNeighborSampler(timed, [2], share=s).times


def test_default_times(pair, caplog):
    """docs/USAGE.md: without ``input_time`` a loader samples at its seeds' node times where their
    type has them; a type without node times on a dataset with times warns and samples without
    times (and so opens none)."""
    timed, _ = pair
    users = _loader(timed)
    np.testing.assert_array_equal(users.seed_time, timed.node_type("user").node_times()[users.seeds])
    assert users.plan.times
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        items = _loader(timed, target="item")
    assert "node type 'item' has no node times: its batches are sampled without times" in caplog.text
    assert items.seed_time is None and not items.plan.times and not items.sampler.times
