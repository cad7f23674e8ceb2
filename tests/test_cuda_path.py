"""The CUDA data path (python/ringgnn/sampling/cuda.py): pinning of the loader's reused buffers, the GPU
tier of the hot-row cache and the batches put together on the device. The logic runs on CPU
here (a recording pinner, ``device="cpu"``); the tests marked ``cuda`` need a GPU and are
skipped, with the reason, without one."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
import torch

import ringgnn
from ringgnn.sampling.cuda import DeviceLoader, DeviceRowCache, count_accesses, pin, rows_that_fit

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: run on a machine with a GPU")


@pytest.fixture(scope="module")
def sbm(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cuda") / "sbm"
    ringgnn.generate_sbm(out, nodes=3000, classes=4, avg_degree=8, feature_dim=12, seed=2)
    return out


class Recorder:
    def __init__(self):
        self.pins, self.unpins = [], []

    def pin(self, addr, nbytes):
        self.pins.append((addr, nbytes))

    def unpin(self, addr):
        self.unpins.append(addr)


def loader(sbm, **kw):
    opts = dict(seed=1, backend="memory", threads=2, prefetch=2)
    opts.update(kw)
    return ringgnn.Loader(sbm, [5, 3], 64, **opts)


def test_buffers_are_pinned_once_each_and_unpinned_when_the_loader_goes(sbm):
    rec = Recorder()
    ld = loader(sbm)
    assert pin(ld, (rec.pin, rec.unpin)) is True
    assert pin(ld, (rec.pin, rec.unpin)) is False, "pinned once"
    addrs, largest = set(), 0
    for epoch in range(3):
        for batch in ld:
            addrs.add(batch.x.data_ptr())
            largest = max(largest, batch.x.numel() * 4)
            del batch
    pinned = {a for a, _ in rec.pins}
    assert len(rec.pins) == len(pinned), "each buffer registered once, however many batches it carries"
    assert addrs <= pinned, "every batch's x lies in a pinned buffer"
    assert 1 <= len(pinned) <= 2 + 2 + 1  # prefetch + hold + the one being filled
    # The whole capacity (the plan's largest batch), the same for every buffer, not one batch's rows.
    assert len({n for _, n in rec.pins}) == 1 and rec.pins[0][1] > largest
    assert ld._core.pinned_buffers == len(pinned) - len(rec.unpins)
    del ld
    gc.collect()
    assert sorted(rec.unpins) == sorted(pinned), "every registration is undone"


def test_a_pinner_that_fails_leaves_the_loader_working(sbm, monkeypatch):
    def bad_pin(addr, nbytes):
        raise RuntimeError("no driver")

    reported = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: reported.append(str(u.exc_value)))
    ld = loader(sbm)
    pin(ld, (bad_pin, lambda addr: None))
    plain = loader(sbm)
    got = [b.x.clone() for b in ld]
    assert reported and all(r == "no driver" for r in reported), "reported as unraisable, not raised"
    want = [b.x.clone() for b in plain]
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_rows_that_fit():
    assert rows_that_fit(4 * 12 * 100, 12, 1000) == 100
    assert rows_that_fit(10**12, 12, 1000) == 1000
    assert rows_that_fit(10, 12, 1000) == 0


def test_look_ahead_counts_are_the_sampled_nodes(sbm):
    ld = loader(sbm)
    counts = count_accesses(ld, batches=3, seed=1)
    want = np.zeros(ld.dataset.num_nodes, dtype=np.int64)
    for i, batch in enumerate(ld):
        if i == 3:
            break
        np.add.at(want, batch.n_id.numpy(), 1)
    assert np.array_equal(counts, want)


def test_the_device_tier_leaves_its_rows_out_of_x_and_the_batches_are_unchanged(sbm):
    plain = loader(sbm)
    ld = loader(sbm)
    nbytes = 200 * 12 * 4
    cache = DeviceRowCache.for_loader(ld, nbytes, "cpu", seed=1)
    assert len(cache) == 200 and ld._core.device_rows == 200 and cache.nbytes == nbytes
    # The hottest rows: no node outside the tier was touched more often in the look-ahead.
    counts = count_accesses(plain, 64, seed=1)
    assert counts[cache.ids].min() >= np.delete(counts, cache.ids).max()
    expected = DeviceRowCache(plain.dataset, cache.ids, "cpu").rows
    assert torch.equal(cache.rows, expected)

    for epoch in (0, 1):
        plain.set_epoch(epoch)
        ld.set_epoch(epoch)
        raw = list(ld)  # the loader alone: x holds only the rows the device lacks
        for b in raw:
            lacks = ~np.isin(b.n_id.numpy(), cache.ids)
            assert b.x.shape[0] == lacks.sum() < len(b.n_id)
        ld.set_epoch(epoch)
        dev = DeviceLoader(ld, "cpu", cache)
        n = 0
        for a, b in zip(dev, plain):
            assert torch.equal(a.x, b.x) and torch.equal(a.n_id, b.n_id)
            assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.y, b.y)
            n += 1
        assert n == len(plain)


def test_device_rows_errors(sbm):
    ld = loader(sbm)
    with pytest.raises(ringgnn.InputError, match="device row 3000 is not a node: the dataset has 3000 nodes"):
        ld._core.set_device_rows(np.array([3000], dtype=np.int64))
    with pytest.raises(ringgnn.InputError, match="device row -1 is not a node id"):
        ld._core.set_device_rows(np.array([-1], dtype=np.int64))
    ld._core.set_device_rows(np.array([1, 2], dtype=np.int64))
    with pytest.raises(ringgnn.InputError, match="already set"):
        ld._core.set_device_rows(np.array([3], dtype=np.int64))
    with pytest.raises(ringgnn.InputError, match="leaves device rows out of x"):
        next(iter(DeviceLoader(ld, "cpu")))
    other = DeviceRowCache(ld.dataset, np.array([5]), "cpu")
    with pytest.raises(ringgnn.InputError, match="not this cache's"):
        DeviceLoader(ld, "cpu", other)


def test_gpu_cache_needs_cuda(cli, sbm, tmp_path):
    r = cli("train", sbm, "--gpu-cache", "1M", "--out", tmp_path / "a", "--quiet")
    assert r.code == 1 and "--gpu-cache holds feature rows on a GPU: it needs --device cuda" in r.err


# --- on a GPU ----------------------------------------------------------------------------------


@cuda
def test_cuda_batches_equal_the_host_batches_with_pinned_buffers_and_a_gpu_tier(sbm):
    plain = loader(sbm)
    ld = loader(sbm)
    assert pin(ld)
    cache = DeviceRowCache.for_loader(ld, 300 * 12 * 4, "cuda", seed=1)
    for a, b in zip(DeviceLoader(ld, "cuda", cache), plain):
        assert a.x.is_cuda and torch.equal(a.x.cpu(), b.x)
        assert torch.equal(a.edge_index.cpu(), b.edge_index)
    assert ld._core.pinned_buffers >= 1


@cuda
def test_train_on_cuda_with_a_gpu_cache(cli, sbm, tmp_path):
    r = cli("train", sbm, "--device", "cuda", "--gpu-cache", "64K", "--epochs", "2", "--out", tmp_path / "run",
            "--batch-size", "128")
    assert r.code == 0, r.err
    assert "batch buffers pinned" in r.out and "GPU tier" in r.out
