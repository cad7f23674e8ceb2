"""Hyperbatches of heterogeneous sampling: ``HeteroNeighborSampler.sample_many`` gives each batch
exactly its sample alone (hypothesis over hyperbatch sizes, seeds, fanouts and backends) while
reading each relation's pages once per hop for all batches; ``HeteroLoader(hyperbatch=)`` hands
out the same batches for every H and thread count; the choice of H sized from what the probe
measured (worked out by hand in ``crates/ringgnn-loader/src/budget/typed/tests.rs``); bad input."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringgnn
from ringgnn import HeteroLoader, HeteroNeighborSampler
from ringgnn.data.dataset import Dataset
from ringgnn.data.generate import generate_hetero

BACKENDS = [dict(backend="memory"), dict(backend="pread"), dict(backend="auto"), dict(backend="auto", direct=True)]


@pytest.fixture(scope="module")
def mag(tmp_path_factory):
    out = tmp_path_factory.mktemp("hyper") / "mag"
    generate_hetero(out, papers=4000, authors=3000, institutions=60)
    return Dataset.open(out)


def same(a, b) -> bool:
    arrays = lambda s: [s.node, s.row, s.col] + ([s.edge] if s.edge is not None else [])  # noqa: E731
    return (a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges
            and a.seed_types == b.seed_types
            and all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
                    for x, y in zip(arrays(a), arrays(b))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=st.integers(1, 6), fanout=st.sampled_from([[3, 2], [-1], [5, 1, 2], {"paper:cites:paper": [4, 1]}]),
       replace=st.booleans(), data=st.data(), backend=st.sampled_from(BACKENDS))
def test_sample_many_equals_each_batch_alone(mag, h, fanout, replace, data, backend):
    if isinstance(fanout, dict):  # one relation sampled, the others left out
        fanout = {r: fanout.get(r, [0, 0]) for r in mag.relations}
    counts = mag.num_nodes_dict
    seeds = []
    for _ in range(h):
        types = data.draw(st.lists(st.sampled_from(sorted(counts)), min_size=1, max_size=3, unique=True))
        seeds.append({t: data.draw(st.lists(st.integers(0, counts[t] - 1), max_size=30)) for t in types})
    batches = data.draw(st.lists(st.integers(0, 1000), min_size=h, max_size=h))
    alone = HeteroNeighborSampler(mag, fanout, backend="memory", replace=replace, seed=4, with_edge_ids=True)
    sampler = HeteroNeighborSampler(mag, fanout, replace=replace, seed=4, with_edge_ids=True, **backend)
    outs = sampler.sample_many(seeds, batches, epoch=3)
    assert len(outs) == h
    for s, b, out in zip(seeds, batches, outs):
        assert same(out, alone.sample_typed(s, epoch=3, batch=b))


def test_sample_many_reads_a_shared_page_once(mag):
    """pread: the bytes a hyperbatch reads are at most those of its batches alone, and fewer when
    their pages overlap (2000 papers of 4000 in 8 batches touch the same pages of every file)."""
    fan = [10, 5]
    ids = np.random.default_rng(0).permutation(4000)[:2000]
    seeds = [{"paper": ids[i * 250:(i + 1) * 250]} for i in range(8)]
    hyper = HeteroNeighborSampler(mag, fan, backend="pread", seed=1)
    outs = hyper.sample_many(seeds, list(range(8)))
    together = hyper.io_stats()["bytes"]
    alone = HeteroNeighborSampler(mag, fan, backend="pread", seed=1)
    for b, (s, out) in enumerate(zip(seeds, outs)):
        assert same(out, alone.sample_typed(s, batch=b))
    apart = alone.io_stats()["bytes"]
    assert 0 < together < apart / 2, (together, apart)


def batches_of(loader):
    return [(d["paper"].n_id.tolist(), d["paper"].x.numpy().copy(), d["paper"].y.tolist(),
             {et: d[et].edge_index.tolist() for et in d.edge_types}, d["paper"].input_id.tolist(),
             d["paper"].batch_size) for d in loader]


def test_loader_batches_are_the_same_for_every_hyperbatch_and_thread_count(mag, caplog):
    common = dict(seeds="train", batch_size=300, backend="pread", seed=2)
    want = batches_of(HeteroLoader(mag, [4, 3], "paper", hyperbatch=1, threads=1, **common))
    assert len(want) == 8  # 2400 training papers
    for h, threads in ((2, 1), (3, 2), (5, 2), (9, 2), ("auto", 2)):
        loader = HeteroLoader(mag, [4, 3], "paper", hyperbatch=h, threads=threads, **common)
        with caplog.at_level(logging.INFO, logger="ringgnn"):
            got = batches_of(loader)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g[0] == w[0] and np.array_equal(g[1], w[1]) and g[2:] == w[2:]
        chosen = loader.hyperbatch_size()
        assert chosen[0] == (min(h, 8) if h != "auto" else chosen[0]) and chosen[0] >= 1
    assert any("hyperbatch: " in r.getMessage() for r in caplog.records)
    # A rank's share (torchrun): the same batches at the same indices.
    loader = HeteroLoader(mag, [4, 3], "paper", hyperbatch=2, threads=2, **common)
    loader.batches = [1, 4, 5, 7]
    got = batches_of(loader)
    assert [g[0] for g in got] == [want[i][0] for i in (1, 4, 5, 7)]


def test_staged_rows_give_the_same_batches(mag, tmp_path, monkeypatch):
    """Rows read from disk, staged where the cost model says so (random reads priced at one a
    second: every hyperbatch but the epoch's first), are the rows read batch by batch; the
    staging file is left nowhere."""
    common = dict(seeds="train", batch_size=300, backend="pread", feature_backend="pread", cache=0, seed=2)
    want = batches_of(HeteroLoader(mag, [4, 3], "paper", hyperbatch=1, threads=1, **common))
    monkeypatch.setenv("RINGGNN_DEVICE", "1,1000")
    loader = HeteroLoader(mag, [4, 3], "paper", hyperbatch=3, threads=2, staging_dir=tmp_path, staging_cap="64M",
                          **common)
    got = batches_of(loader)
    assert len(got) == len(want) == 8
    for g, w in zip(got, want):
        assert g[0] == w[0] and np.array_equal(g[1], w[1]) and g[2:] == w[2:]
    # Jobs of 3, 3 and 2 batches: the two after the first are staged (papers: the only features).
    assert loader.staged_hyperbatches() == {"author": 0, "institution": 0, "paper": 2}
    assert list(tmp_path.iterdir()) == []
    # staging_cap=0 never stages.
    off = HeteroLoader(mag, [4, 3], "paper", hyperbatch=3, threads=2, staging_cap=0, **common)
    assert batches_of(off)[3][0] == want[3][0] and off.staged_hyperbatches()["paper"] == 0
    with pytest.raises(ringgnn.InputError, match="'lots' is not a size"):
        HeteroLoader(mag, [4, 3], "paper", staging_cap="lots", **common)


def test_an_epoch_is_cut_into_even_hyperbatches_from_the_budget_and_as_asked_otherwise(mag, monkeypatch):
    """H from the budget (auto): as few hyperbatches as H allows, of even sizes (the homogeneous
    loader's rule: 82 batches with room for 75 are 41 + 41); a size asked for is kept as given."""
    cut = ringgnn._core.TypedLoader.job_sizes
    assert cut(82, 75, True) == [41, 41] and cut(41, 39, True) == [21, 20] and cut(8, 3, True) == [3, 3, 2]
    assert cut(41, 39, False) == [39, 2] and cut(8, 8, True) == [8] and cut(0, 5, True) == []
    with pytest.raises(ringgnn.InputError, match="hyperbatch must be at least 1"):
        cut(4, 0, True)
    common = dict(seeds="train", batch_size=300, backend="pread", threads=2, seed=2)
    want = batches_of(HeteroLoader(mag, [4, 3], "paper", hyperbatch=1, **{**common, "threads": 1}))
    for asked, jobs in (("auto", [4, 4]), (5, [5, 3])):
        loader = HeteroLoader(mag, [4, 3], "paper", hyperbatch=asked, **common)
        loader.sizes().hyperbatch = 5  # as if the budget (or the caller) made room for 5 of the 8
        core, seen = loader._core_loader(), []

        class Spy:
            def __getattr__(self, name):
                return getattr(core, name)

            def epoch(self, epoch, jobs, *rest):
                seen.append([len(j) for j in jobs])
                return core.epoch(epoch, jobs, *rest)

        monkeypatch.setattr(loader, "_core_loader", Spy)
        got = batches_of(loader)
        assert seen == [jobs]
        for g, w in zip(got, want):
            assert g[0] == w[0] and np.array_equal(g[1], w[1]) and g[2:] == w[2:]


def test_auto_is_one_when_every_neighbor_file_is_in_memory(mag):
    loader = HeteroLoader(mag, [4, 3], "paper", backend="memory")
    assert loader.hyperbatch_size() == (1, "1 (auto: every neighbor file is in memory, nothing to share)")


def test_auto_fits_the_sampled_batches_measured_in_the_batches_share(mag):
    loader = HeteroLoader(mag, [4, 3], "paper", backend="pread", threads=2, prefetch=2, batch_size=64)
    sampler = loader.sampler
    seeds = loader.batch_seeds(0)[:ringgnn._core.TypedLoader.PROBE_BATCHES]
    # Sampled with both threads, as the drivers that sizes() probes for (each thread its own dedup maps).
    probes = loader._core_loader().probe([[("paper", ids)] for ids in seeds], threads=2)
    assert len(probes) == 3
    bound = sampler.bound({"paper": 64})
    for i, (ids, p) in enumerate(zip(seeds, probes)):
        # By hand: probe batch i is batch i of the probe epoch, its sample's ids 8 B each.
        s = sampler.sample(ids, "paper", epoch=2**64 - 3, batch=i)
        assert p["sample"] == 8 * (sum(len(v) for v in s.node.values()) + 2 * sum(len(v) for v in s.row.values()))
        # Read from disk, hyperbatches spill: while sampled, it holds its nodes but its last hop's new ones and its
        # rows but its last hop's, both in 32 bits (4 B each: ids of types of at most 2^32 nodes, local ids); not
        # its cols (made when it is finished).
        nodes = sum(len(v) for v in s.node.values()) - sum(v[-1] for v in s.num_sampled_nodes.values())
        early = sum(len(v) for v in s.row.values()) - sum(v[-1] for v in s.num_sampled_edges.values())
        assert p["batch"] == 4 * nodes + 4 * early
        assert p["edges"] == sum(len(v) for v in s.row.values())
        assert p["state"] > 0
        # Gathering it: each paper's 64 float32 features, 48 B of gather scratch, its int64 label.
        assert p["rows"] == len(s.node["paper"]) * (256 + 48 + 8)
        # Measured is below the bound (the reason to measure: bounds leave H at 1 under a cap).
        assert p["state"] + p["batch"] <= bound["state_bytes"]
    assert len({p["state"] for p in probes}) == 1  # the workspaces, shared evenly
    # What "auto" sized from (the core's probe of the same batches): the largest of each, with its margin.
    sizes = loader.sizes()
    per = int(1.5 * max(p["state"] + p["batch"] for p in probes))
    # The papers' rows are held: nothing staged.
    assert all(p["staging"] == 0 for p in probes) and sizes.staging_per_batch == 0 == sizes.staging_buffers
    assert sizes.per_batch == per
    rows = int(1.1 * max(p["rows"] for p in probes))
    core = loader._core_loader()
    # The relations read from disk with pread: each worker's sampler read buffer, 8 MiB, and its spill
    # file's 4 write buffers and read buffer, 1 MiB each (the plan holds the papers' features in memory:
    # no buffer for them); the labels held as int16.
    assert loader.plan.features["paper"].held
    assert core.worker_bytes() == (8 + 5) << 20 and core.held_bytes() == 2 * 4000
    sample = int(1.5 * max(p["sample"] for p in probes))
    scratch = int(1.5 * probes[0]["scratch"])
    assert len({p["scratch"] for p in probes}) == 1
    # The probe sampled with 2 threads: the second opened a reader of each relation read from disk, their read
    # buffers splitting one of 8 MiB as the first thread's do; counted as they are, with no margin.
    readers = probes[0]["readers"]
    assert len({p["readers"] for p in probes}) == 1 and 0 < readers <= 8 << 20 and readers % 4096 == 0
    # A gathered batch holds its rows and its sample; a worker its buffers, dedup maps and the sample it spills.
    assert sizes.rows == rows + sample and sizes.buffers == core.worker_bytes() + readers + scratch + sample
    assert sizes.held == core.held_bytes()
    assert sizes.sample == sample
    # Rows and samples of the 2 ahead and the consumer's; each driver's buffers, dedup maps, the sample it spills
    # and one more its second sampling thread may spill.
    fixed = 3 * (rows + sample) + 2 * (core.worker_bytes() + readers + scratch + 2 * sample) + core.held_bytes()
    h, why = loader.hyperbatch_size()
    assert (h, why) == (sizes.hyperbatch, sizes.why) and (sizes.prefetch, sizes.workers) == (2, 2)
    # Read from disk with rows to gather: two drivers (one gathers while the next is sampled), each sampling its
    # hyperbatch with both threads, a hyperbatch each ahead of the consumer.
    assert (sizes.drivers, sizes.threads, sizes.window) == (True, 2, 2 * h) and h >= 2
    share = loader.plan.batch_memory  # the batches' whole part: everything an epoch holds is counted
    # Each of the 2 drivers holds H samples; the rows of 3 batches and the buffers whatever H.
    assert fixed + 2 * h * per <= share
    if h < -(-len(loader) // 2):
        assert fixed + 2 * (h + 1) * per > share
    assert why.startswith(f"{h} (auto: 2 hyperbatches at a time read from disk (one gathers its rows while the next "
                          "is sampled), each sampled with 2 threads, ") and "measured on 3 probe batches" in why


def test_bad_input(mag):
    for bad in (0, -2, "x", "2.5"):
        with pytest.raises(ringgnn.InputError, match="hyperbatch .* is not valid"):
            HeteroLoader(mag, [2], "paper", hyperbatch=bad)
    s = HeteroNeighborSampler(mag, [2], backend="memory")
    with pytest.raises(ringgnn.InputError, match="2 seed sets but 1 batch indices"):
        s.sample_many([{"paper": [0]}, {"paper": [1]}], [0])
    with pytest.raises(ringgnn.InputError, match="seed node 4000 of node type paper is out of range"):
        s.sample_many([{"paper": [0]}, {"paper": [4000]}], [0, 1])
    with pytest.raises(ringgnn.InputError, match="no node type 'venue'"):
        s.bound({"venue": 3})
    assert s.sample_many([], []) == []


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ringgnn.__file__)))  # the ringgnn imported here
    return subprocess.run([sys.executable, "-m", "ringgnn", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_train_hyperbatch_trains_on_the_same_batches(mag, tmp_path):
    """`ringgnn train DS --target paper --hyperbatch N` on a heterogeneous dataset: the choice is
    reported, and the losses are those of one batch at a time (the same batches, in order)."""
    losses = []
    for h in ("1", "3"):
        r = _cli("train", str(mag.path), "--target", "paper", "--fanouts", "4,3", "--epochs", "1", "--batch-size",
                 "512", "--backend", "pread", "--threads", "2", "--eval", "sampled", "--hyperbatch", h, "--out",
                 str(tmp_path / f"run{h}"))
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"hyperbatch: {h} (as given)" in r.stdout
        m = json.loads((tmp_path / f"run{h}" / "metrics.json").read_text())
        losses.append((m["epochs"][0]["loss"], m["epochs"][0]["val_acc"]))
    assert losses[0] == losses[1]
    r = _cli("train", str(mag.path), "--target", "paper", "--hyperbatch", "0", "--out", str(tmp_path / "bad"))
    assert r.returncode != 0 and "hyperbatch '0' is not valid" in r.stderr
