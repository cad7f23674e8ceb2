"""Hyperbatches of heterogeneous sampling: ``HeteroNeighborSampler.sample_many`` gives each batch
exactly its sample alone (hypothesis over hyperbatch sizes, seeds, fanouts and backends) while
reading each relation's pages once per hop for all batches; ``HeteroLoader(hyperbatch=)`` hands
out the same batches for every H and thread count; the choice of H (``ringgnn.sampling.hyper``)
worked out by hand; bad input."""

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
from ringgnn.sampling import hyper as hetero_hyper
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


def test_auto_is_one_when_every_neighbor_file_is_in_memory(mag):
    loader = HeteroLoader(mag, [4, 3], "paper", backend="memory")
    assert loader.hyperbatch_size() == (1, "1 (auto: every neighbor file is in memory, nothing to share)")


def test_auto_fits_the_sampled_batches_measured_in_the_batches_share(mag):
    loader = HeteroLoader(mag, [4, 3], "paper", backend="pread", threads=2, prefetch=2, batch_size=64)
    sampler = loader.sampler
    seeds = loader.batch_seeds(0)[:hetero_hyper.PROBE_BATCHES]
    probes = loader._core_loader().probe([[("paper", ids)] for ids in seeds])
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
    per = hetero_hyper.measured_bytes(probes)
    assert per == int(1.5 * max(p["state"] + p["batch"] for p in probes))
    # The papers' rows are held: nothing staged.
    assert all(p["staging"] == 0 for p in probes) and hetero_hyper.measured_staging(probes) == 0
    assert loader.probe_batch_bytes() == per
    rows = hetero_hyper.measured_rows(probes)
    assert rows == int(1.1 * max(p["rows"] for p in probes))
    core = loader._core_loader()
    # The relations read from disk with pread: each worker's sampler read buffer, 8 MiB, and its spill
    # file's 4 write buffers and read buffer, 1 MiB each (the plan holds the papers' features in memory:
    # no buffer for them); the labels held as int16.
    assert loader.plan.features["paper"].held
    assert core.worker_bytes() == (8 + 5) << 20 and core.held_bytes() == 2 * 4000
    sample = hetero_hyper.measured_sample(probes)
    assert sample == int(1.5 * max(p["sample"] for p in probes))
    scratch = hetero_hyper.measured_scratch(probes)
    assert scratch == int(1.5 * probes[0]["scratch"]) and len({p["scratch"] for p in probes}) == 1
    # Rows and samples of the 2 ahead and the consumer's; each worker's buffers, dedup maps and the sample it
    # spills.
    fixed = 3 * (rows + sample) + 2 * (core.worker_bytes() + scratch + sample) + core.held_bytes()
    sizes = loader.sizes()
    h, why = loader.hyperbatch_size()
    assert (h, why) == (sizes.hyperbatch, sizes.why) and (sizes.prefetch, sizes.workers) == (2, 2)
    share = loader.plan.batch_memory  # the batches' whole part: everything an epoch holds is counted
    # Each of the 2 workers holds H samples; the rows of 3 batches and the buffers whatever H.
    assert fixed + 2 * h * per <= share
    if h < -(-len(loader) // 2):
        assert fixed + 2 * (h + 1) * per > share
    assert why.startswith(f"{h} (auto: 2 threads") and "measured on 3 probe batches" in why


MB = 10**6


def test_choose_by_hand(caplog):
    kw = dict(threads=2, prefetch=None, batches=40)
    none = dict(rows=0, buffers=0, held=0)
    assert hetero_hyper.choose(5, in_memory=False, share=0, per_batch=10**9, **none, **kw) == \
        hetero_hyper.Sizes(5, 2, 2, "5 (as given)")
    assert hetero_hyper.choose(99, in_memory=True, share=0, per_batch=1, **none, **kw).hyperbatch == 40
    assert hetero_hyper.choose(None, in_memory=True, share=10**12, per_batch=1, **none, **kw) == \
        hetero_hyper.Sizes(1, 2, 2, "1 (auto: every neighbor file is in memory, nothing to share)")
    # 2 threads: jobs of H, 2 in flight (3 for H = 1) plus the one being handed out.
    assert [hetero_hyper.jobs_in_flight(h, 2, 2) for h in (1, 2, 3)] == [3, 2, 2]
    # Capped so that every thread has a job: 40 batches, 2 threads.
    assert hetero_hyper.choose(None, in_memory=False, share=10**15, per_batch=1, **none, **kw).hyperbatch == 20
    # Rows of 5 MB a batch (3 held: 2 ahead and the consumer's), 2 MB of read buffers a worker,
    # 1 MB of labels: 20 MB whatever H; 2 workers hold H sampled batches of 4 MB each:
    # 20 + 2 * H * 4 <= 100 gives H = 10.
    measured = dict(per_batch=4 * MB, rows=5 * MB, buffers=2 * MB, held=MB)
    s = hetero_hyper.choose(None, in_memory=False, share=100 * MB, **measured, **kw)
    assert s == hetero_hyper.Sizes(10, 2, 2, (
        "10 (auto: 2 threads, 3.8 MiB per sampled batch (measured on 3 probe batches, x1.5) and 19.1 MiB whatever H "
        "(rows gathered for the next 2 and the consumer's, read buffers, labels); 95.4 MiB held fit in the "
        "batches' 95.4 MiB)"))
    # Staging's buffers (16 MB a worker) and row ids (1 MB a batch): 3 * 5 + 2 * (2 + 16) + 1 =
    # 52 MB whatever H, 2 * H * 5 more: H = 4 fits 100 MB, and the rows are staged.
    s = hetero_hyper.choose(None, in_memory=False, share=100 * MB, staging_per_batch=MB, staging_buffers=16 * MB,
                            **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers, s.staging) == (4, 2, 2, True)
    assert s.why.endswith("; rows staged where a pass over a feature file pays (its buffers and row ids counted)")
    # In 65 MB staging leaves room for one batch at a time only: dropped, H = 5 without it.
    s = hetero_hyper.choose(None, in_memory=False, share=65 * MB, staging_per_batch=MB, staging_buffers=16 * MB,
                            **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers, s.staging) == (5, 2, 2, False)
    assert s.why.endswith("; rows not staged: with staging's buffers only one batch at a time would fit")
    # One batch at a time needs 28 MB with 2 ahead; with 1 ahead 23 MB (2 * 5 + 2 * 2 + 1 + 2 * 4).
    s = hetero_hyper.choose(None, in_memory=False, share=25 * MB, **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers) == (1, 1, 2)
    assert s.why.endswith("; 1 batch ahead instead of 2: with them even one batch at a time would exceed the "
                          "batches' memory")
    # Two ahead asked: one worker instead (3 * 5 + 2 + 1 + 4 = 22 MB).
    s = hetero_hyper.choose(None, in_memory=False, share=25 * MB, **measured, **dict(kw, prefetch=2))
    assert (s.hyperbatch, s.prefetch, s.workers) == (1, 2, 1)
    assert s.why.startswith("1 (auto: 1 threads") and "; 1 worker instead of 2: " in s.why
    # Not enough for 1 ahead and 1 worker (2 * 5 + 2 + 1 + 4 = 17 MB): as asked, one at a time, with
    # a warning naming every part.
    with caplog.at_level(logging.WARNING, logger="ringgnn"):
        s = hetero_hyper.choose(None, in_memory=False, share=10 * MB, **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers) == (1, 2, 2)
    assert "26.7 MiB held exceed, even one batch at a time, the batches' 9.5 MiB" in s.why
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "the memory budget is too small for these batches: the plan leaves the batches 9.5 MiB, and even one batch "
        "at a time, with 1 ahead and 1 worker, needs 16.2 MiB: 2 batches' rows (4.8 MiB each, measured on 3 probe "
        "batches), a sampled batch (3.8 MiB), read buffers (1.9 MiB) and labels (976.6 KiB); they run as asked, one "
        "batch at a time, beyond the budget: give a larger memory budget (--memory), a smaller batch size or smaller "
        "fanouts"]



def test_choose_by_time():
    """With the probe's times, "auto" takes the configuration predicted fastest among those that
    fit: here a pass shared by 7 batches on one worker beats each batch's own reads on two."""
    t = hetero_hyper.Times(sample=0.1, read=1.0, scan=1.0, back=0.05)
    # By hand: read-bound on 2 workers, max(1.0, (0.1 + 1.0) / 2) = 1.0 a batch whatever H; staged
    # in hyperbatches of 7 on one worker, 1 / 7 + 0.05 of reads and 0.1 of sampling, 0.2929 a
    # batch, after a first hyperbatch of 7 read batch by batch (1.1 each): 40 batches average 0.4341.
    assert t.per_batch(5, 2, False, 40) == 1.0
    assert t.per_batch(7, 1, True, 40) == pytest.approx((7 * 1.1 + 33 * (1 / 7 + 0.15)) / 40)
    # A pass dearer than the batch's own reads is not taken (the loader chooses per hyperbatch).
    assert t.per_batch(1, 2, True, 40) == t.per_batch(1, 2, False, 40) == 1.0
    kw = dict(threads=2, prefetch=None, batches=40, staging_per_batch=MB, staging_buffers=16 * MB)
    measured = dict(per_batch=4 * MB, rows=5 * MB, buffers=2 * MB, held=MB)
    # In 65 MB: unstaged, 2 ahead and 2 workers fit H = 5 (20 + 2 * 4 H); staged, 2 workers fit
    # only H = 1 (52 + 2 * 5 H, 47 + 2 * 5 H with 1 ahead), one worker with 1 ahead H = 7
    # (10 + 18 + 1 + 5 H).
    s = hetero_hyper.choose(None, in_memory=False, share=65 * MB, times=t, **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers, s.staging) == (7, 1, 1, True)
    assert s.why.startswith("7 (auto: 1 threads")
    assert s.why.endswith(
        "; rows staged where a pass over a feature file pays and 1 batch ahead and 1 worker: the fastest that fits, "
        "predicted 0.43 s a batch (rows read 1.00 s a batch, a pass 1.00 s, sampling 0.10 s, estimated on the probe "
        "batches), against 1.00 s for the largest H unstaged (5 on 2 threads)")
    # Where sampling dominates, two workers unstaged win (max(0.1, 1.1 / 2) = 0.55 a batch, where
    # one worker staged takes at least the 1.0 of its sampling): the choice without times.
    t = hetero_hyper.Times(sample=1.0, read=0.1, scan=1.0, back=0.05)
    s = hetero_hyper.choose(None, in_memory=False, share=65 * MB, times=t, **measured, **kw)
    assert (s.hyperbatch, s.prefetch, s.workers, s.staging) == (5, 2, 2, False)
    assert s.why.endswith("; rows not staged: the fastest that fits, predicted 0.55 s a batch (rows read 0.10 s a "
                          "batch, a pass 1.00 s, sampling 1.00 s, estimated on the probe batches)")
    # Without staging's buffers (nothing may be staged) or without estimates, times are not used.
    assert hetero_hyper.choose(None, in_memory=False, share=65 * MB, times=t, **measured,
                               **dict(kw, staging_buffers=0)) == \
        hetero_hyper.choose(None, in_memory=False, share=65 * MB, **measured, **dict(kw, staging_buffers=0))
    no_reads = hetero_hyper.Times(sample=1.0)
    assert hetero_hyper.choose(None, in_memory=False, share=65 * MB, times=no_reads, **measured, **kw) == \
        hetero_hyper.choose(None, in_memory=False, share=65 * MB, **measured, **kw)
    # The probe's figures: means per batch, the one pass as measured.
    probes = [dict(sample_s=0.2, read_s=1.0, pass_s=3.0, back_s=0.1), dict(sample_s=0.4, read_s=2.0, pass_s=3.0,
                                                                          back_s=0.3)]
    got = hetero_hyper.measured_times(probes)
    assert (got.sample, got.read, got.scan, got.back) == pytest.approx((0.3, 1.5, 3.0, 0.2))
    assert hetero_hyper.measured_times([]) == hetero_hyper.Times()

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
