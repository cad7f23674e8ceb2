"""`ringgnn.Loader`: PyG `Data` batches that equal the sampler's output plus the feature rows
and labels read straight from the files; reused buffers, the memory plan, early exits, errors
and forks."""

from __future__ import annotations

import _thread
import gc
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest
from _sampling import make_dataset, needs_sampler, sbm, uring_available

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import ringgnn  # noqa: E402

pytestmark = needs_sampler


def rows_from_file(ds: ringgnn.Dataset, ids: np.ndarray) -> np.ndarray:
    """Feature rows read with the padding rule of docs/FORMAT.md, independently of the reader."""
    f = ds.manifest["features"]
    assert f["dtype"] == "f32"
    raw = np.fromfile(f"{ds.path}/{ds.manifest['files']['features']['path']}", dtype=np.uint8)
    rpp, rb = f["rows_per_page"], f["row_bytes"]
    offs = (ids // rpp) * 4096 + (ids % rpp) * rb
    return np.stack([raw[o : o + rb].view("<f4") for o in offs])


@pytest.mark.parametrize("backend,cache", [("pread", 0), ("pread", 64 << 10), ("auto", None), ("uring", "64K")])
def test_batches_are_the_sampler_output_plus_the_files_rows(tmp_path, backend, cache):
    ds = sbm(tmp_path)
    if backend == "uring" and not uring_available(ds):
        pytest.skip("io_uring is not available here")
    loader = ringgnn.Loader(ds, [10, 5], 256, split="train", seed=3, cache=cache, backend=backend)
    sampler = ringgnn.NeighborSampler(ds, [10, 5], seed=3)
    want = list(sampler.epoch("train", 256, shuffle=True, epoch=0))
    got = list(loader)
    assert len(got) == len(want) == len(loader) == -(-len(ds.split("train")) // 256)
    train = ds.split("train")
    for d, w in zip(got, want):
        assert d.n_id.numpy().tolist() == w.node.tolist()
        assert torch.equal(d.edge_index, torch.from_numpy(np.stack([w.row, w.col])))
        assert d.batch_size == w.batch_size
        assert list(d.num_sampled_nodes) == w.num_sampled_nodes
        assert list(d.num_sampled_edges) == w.num_sampled_edges
        assert np.array_equal(d.x.numpy(), rows_from_file(ds, w.node))
        assert np.array_equal(d.y.numpy(), ds.labels[w.node])
        assert np.array_equal(train[d.input_id.numpy()], w.node[: w.batch_size])
    st = loader.stats()
    assert st["rows_requested"] == sum(len(w.node) for w in want)
    assert st["batches"] == len(want)
    cached = backend != "auto" and cache not in (0, None)
    assert (st["cache_hits"] > 0) == cached
    assert st["feature_backend"] == ("memory" if backend == "auto" else backend)
    assert loader.last_epoch["batches"] == len(want)


def test_epochs_advance_and_set_epoch_replays(tmp_path):
    ds = sbm(tmp_path, nodes=600)
    loader = ringgnn.Loader(ds, [5], 100, seed=1)
    e0 = [d.n_id.clone() for d in loader]
    e1 = [d.n_id.clone() for d in loader]
    assert any(not torch.equal(a, b) for a, b in zip(e0, e1))  # a new shuffle and new samples
    loader.set_epoch(0)
    assert all(torch.equal(a, b.n_id) for a, b in zip(e0, loader))


def test_leaving_early_then_iterating_again(tmp_path):
    ds = sbm(tmp_path, nodes=600)
    loader = ringgnn.Loader(ds, [5, 5], 32, seed=0)
    for _ in loader:
        break  # the sampler's threads stop and are joined; nothing hangs
    assert sum(1 for _ in loader) == len(loader)


def test_loaders_can_share_one_engine(tmp_path):
    ds = sbm(tmp_path, nodes=600)
    a = ringgnn.Loader(ds, [5], 64, split="train", seed=2, backend="pread", cache="4K")
    b = ringgnn.Loader(ds, [5], 64, split="val", share=a)
    n = sum(len(d.n_id) for d in a) + sum(len(d.n_id) for d in b)
    assert a.stats()["rows_requested"] == b.stats()["rows_requested"] == n  # one engine counted both
    alone = ringgnn.Loader(ds, [5], 64, split="val", seed=2)
    assert all(torch.equal(x.n_id, y.n_id) for x, y in zip(alone, ringgnn.Loader(ds, [5], 64, split="val", share=a)))
    # A larger batch than the shared engine was planned for: accepted while its plan still fits.
    wider = ringgnn.Loader(ds, [5], 600, split="val", share=a)
    assert [len(d.n_id) > d.batch_size for d in wider] == [True]
    assert a.plan()["buffers"] > 0
    # (One batch at a time: a hyperbatch share would shrink to make room.)
    fixed = ringgnn.Loader(ds, [5], 64, backend="pread", cache=0, prefetch=1, reserve=0, hyperbatch=1)
    p = fixed.plan()
    tight = ringgnn.Loader(ds, [5], 64, backend="pread", cache=0, prefetch=1, reserve=0, hyperbatch=1,
                           memory=(p["total"] - p["slack"]) * 32 // 31 + 64)
    with pytest.raises(ringgnn.InputError, match="too small for batches this large"):
        list(ringgnn.Loader(ds, [5], 600, split="val", share=tight))
    with pytest.raises(ringgnn.InputError, match="same dataset and fanouts"):
        ringgnn.Loader(ds, [4], 64, split="val", share=a)


def test_feature_buffers_are_reused_without_copies(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 64, seed=0, backend="pread", cache=0, prefetch=1)
    ptrs = set()
    for d in loader:
        ptrs.add(d.x.data_ptr())
        assert d.x.dtype == torch.float32 and d.x.is_contiguous()
    # One buffer ahead, the one being used and the one not yet released: never more.
    assert len(loader) > 6 and len(ptrs) <= 3
    # A batch kept alive keeps its rows: the buffer is reused only once it is released.
    kept = [d for d in loader]
    assert len({d.x.data_ptr() for d in kept}) == len(kept)
    first = next(iter(Loader_replay(loader, 1)))
    assert torch.equal(kept[0].x, first.x)


def Loader_replay(loader, epoch):
    loader.set_epoch(epoch)
    return loader


def test_exceptions_in_the_training_loop_do_not_hang(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 16, seed=0, backend="pread", cache=0)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="boom"):
            for _d in loader:
                raise RuntimeError("boom")
    gc.collect()
    assert sum(1 for _ in loader) == len(loader)


def test_ctrl_c_during_an_epoch_stops_it_cleanly(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 16, seed=0, backend="pread", cache=0)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for _ in loader:
                time.sleep(0.001)
    timer.join()
    gc.collect()
    assert sum(1 for _ in loader) == len(loader)


def test_a_read_error_in_a_worker_names_the_file(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 64, seed=0, backend="pread", cache=0)
    os.truncate(os.path.join(ds.path, "features.bin"), 4096)
    with pytest.raises(OSError, match="features.bin"):
        for _ in loader:
            pass


def test_the_memory_plan_is_reported_and_a_small_budget_refused(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 64, backend="pread", memory="64M", reserve=0)
    p = loader.plan()
    assert p["budget"] == 64 << 20 and p["total"] == sum(
        p[k] for k in ("slack", "reserve", "sampler", "neighbor_file", "labels", "gather", "buffers", "features", "cache",
                       "hyperbatch"))
    assert p["cache"] > 0 and not p["features_in_memory"] and "hot-row cache" in p["text"]
    # With the graph on disk, hyperbatches (auto) share what is left with the cache.
    assert p["hyperbatch"] > 0 and p["hyperbatch_size"] == 0 and "hyperbatch state" in p["text"]
    assert loader.stats()["cached_rows"] == 2000  # all rows fit, and no more is allocated
    with pytest.raises(ringgnn.InputError, match="memory=1.0 MiB is too small"):
        ringgnn.Loader(ds, [5, 5], 64, memory="1M", reserve=0)
    with pytest.raises(ringgnn.InputError, match="cache_policy"):
        ringgnn.Loader(ds, [5, 5], 64, cache_policy="lru")
    # Features in memory, graph from disk.
    mixed = ringgnn.Loader(ds, [5, 5], 64, backend="pread", feature_backend="memory")
    assert (mixed.backend, mixed.feature_backend) == ("pread", "memory") and mixed.plan()["features_in_memory"]
    with pytest.raises(ringgnn.InputError, match="feature_backend 'ssd'"):
        ringgnn.Loader(ds, [5, 5], 64, feature_backend="ssd")


def _count_in_child(loader, q):
    q.put(sum(len(d.n_id) for d in loader))


def test_a_loader_made_before_a_fork_works_in_the_child(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    loader = ringgnn.Loader(ds, [5, 5], 64, seed=0, backend="auto", cache=0)
    want = sum(len(d.n_id) for d in loader)
    loader.set_epoch(0)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_count_in_child, args=(loader, q))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0 and got == want


def test_drop_last_and_all_nodes(tmp_path):
    ds = sbm(tmp_path, nodes=600)
    loader = ringgnn.Loader(ds, [3], 256, split=None, drop_last=True)
    batches = list(loader)
    assert len(batches) == len(loader) == 600 // 256
    assert all(b.batch_size == 256 for b in batches)


def test_needs_features_and_a_sane_batch_size(tmp_path):
    plain = make_dataset(tmp_path, "plain", [(0, 1), (1, 2)])
    with pytest.raises(ringgnn.InputError, match="no node features"):
        ringgnn.Loader(plain, [2], 4, split=None)
    ds = sbm(tmp_path, nodes=600)
    with pytest.raises(ringgnn.InputError, match="batch_size"):
        ringgnn.Loader(ds, [2], 0)


def test_auto_never_refuses_a_budget_an_explicit_backend_accepts(tmp_path):
    # Issue 8's failure: on a 200k-node, 4M-edge sbm, Loader(ds, [10, 5], 4096, memory=M,
    # reserve=0, cache=0, threads=1) with the default backend="auto" raised "the neighbor file
    # does not fit ... use a disk backend" at budgets where backend="uring" (or "pread") opened:
    # the budget had two owners. One plan: auto opens whenever an explicit backend does.
    ringgnn.generate_sbm(tmp_path / "sbm200k", nodes=200_000, classes=8, avg_degree=20, feature_dim=12, seed=0)
    ds = ringgnn.Dataset.open(tmp_path / "sbm200k")
    assert ds.num_edges > 3_900_000
    backends = ["memory", "pread"] + (["uring"] if uring_available(ds) else [])
    opened = {b: 0 for b in ["auto"] + backends}
    for mib in range(120, 152, 2):
        ok = {}
        for b in ["auto"] + backends:
            try:
                loader = ringgnn.Loader(ds, [10, 5], 4096, memory=mib << 20, reserve=0, cache=0, threads=1, backend=b)
            except ringgnn.InputError as e:
                assert "too small" in str(e) or "does not fit" in str(e), e
                ok[b] = False
                continue
            p = loader.plan()
            assert p["total"] <= p["budget"] == mib << 20, p["text"]
            ok[b] = True
            opened[b] += 1
        assert ok["auto"] or not any(ok.values()), (mib, ok)
    # the range has budgets where only the disk plans fit, and budgets where memory fits too
    assert opened["auto"] >= opened["pread"] > opened["memory"] > 0, opened


def test_a_rank_s_share_of_an_epoch_is_the_same_batches(tmp_path):
    # A batch depends only on (seed, epoch, global batch index): the batches a rank selects are
    # those a single process gives at the same indices.
    ds = sbm(tmp_path, nodes=2000)
    whole = list(ringgnn.Loader(ds, [5, 3], 64, seed=4, backend="pread"))
    for rank in range(2):
        mine = list(range(rank, len(whole), 2))
        shard = ringgnn.Loader(ds, [5, 3], 64, seed=4, backend="memory", threads=1, batches=mine)
        assert len(shard) == len(mine)
        got = list(shard)
        assert [d.n_id.tolist() for d in got] == [whole[i].n_id.tolist() for i in mine]
        assert all(torch.equal(d.x, whole[i].x) for d, i in zip(got, mine))
    sampler = ringgnn.NeighborSampler(ds, [5, 3], seed=4)
    full = list(sampler.epoch("train", 64, epoch=1))
    part = list(sampler.epoch("train", 64, epoch=1, batches=[3, 0]))
    assert [p.node.tolist() for p in part] == [full[3].node.tolist(), full[0].node.tolist()]


def test_hyperbatches_give_the_same_batches(tmp_path):
    ds = sbm(tmp_path, nodes=2000)
    runs = {h: list(ringgnn.Loader(ds, [5, 3], 64, seed=1, backend="pread", cache=0, hyperbatch=h)) for h in (1, 3, "auto")}
    ref = runs[1]
    for h, got in runs.items():
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index), h
            assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y), h
    loader = ringgnn.Loader(ds, [5, 3], 64, seed=1, backend="pread", cache=0, hyperbatch=3)
    list(loader)
    st = loader.stats()
    assert st["sampler_hyperbatch_batches"] == len(ref) and st["sampler_hyperbatches"] == -(-len(ref) // 3)
    with pytest.raises(ringgnn.InputError, match="hyperbatch"):
        ringgnn.Loader(ds, [5], 64, hyperbatch="lots")


def test_spilled_hyperbatches_give_the_same_batches_and_leave_no_file(tmp_path):
    # Loading hyperbatches that spill their samples keep only the row ids staging reads; the
    # batches are those of one batch at a time, and the spill file goes to staging_dir,
    # unlinked at once.
    ds = sbm(tmp_path, nodes=2000)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ref = list(ringgnn.Loader(ds, [5, 3], 64, seed=1, backend="pread", cache=0, hyperbatch=1))
    for spill in ("on", "off", "auto"):
        loader = ringgnn.Loader(ds, [5, 3], 64, seed=1, backend="pread", cache=0, hyperbatch=5, spill=spill,
                                staging_dir=scratch)
        got = list(loader)
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index), spill
            assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y), spill
        st = loader.stats()
        assert st["sampler_hyperbatches"] == -(-len(ref) // 5)
        if spill == "on":
            assert st["sampler_spilled_bytes"] >= len(ref) * 4096
        if spill == "off":
            assert st["sampler_spilled_bytes"] == 0
        # Each hyperbatch staged or not, once; the first never staged.
        assert st["staged_hyperbatches"] + st["unstaged_hyperbatches"] == st["sampler_hyperbatches"]
        assert st["staged_hyperbatches"] < st["sampler_hyperbatches"]
        # Where the gather seconds went: the passes (their reads and writes within them), the
        # staged batches (their reads back within them) and the batches read batch by batch.
        assert st["staging_load_seconds"] + st["staging_write_seconds"] <= st["staging_seconds"] + 1e-6
        assert st["staged_read_seconds"] <= st["staged_gather_seconds"] + 1e-6
        assert (st["staging_seconds"] > 0) == (st["staged_hyperbatches"] > 0)
        assert (st["staged_gather_seconds"] > 0) == (st["staged_hyperbatches"] > 0)
        assert st["random_gather_seconds"] > 0  # the first hyperbatch
        parts = st["staging_seconds"] + st["staged_gather_seconds"] + st["random_gather_seconds"]
        assert parts == pytest.approx(st["gather_seconds"], abs=1e-3)
        assert 0 < st["staging_needed_bytes"] <= st["staging_pass_bytes"] or st["staged_hyperbatches"] == 0
        assert list(scratch.iterdir()) == []
    with pytest.raises(ringgnn.InputError, match="spill"):
        ringgnn.Loader(ds, [5], 64, spill="sometimes")
    # A spill directory that cannot be written is named, with what to do.
    missing = tmp_path / "missing"
    with pytest.raises(ringgnn.InputError, match=f"{missing}.*staging_dir"):
        list(ringgnn.Loader(ds, [5, 3], 64, backend="pread", hyperbatch=5, spill="on", staging_dir=missing))
