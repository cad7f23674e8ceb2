"""Finishing a destination block as a pipeline (``python/ringgnn/inference/finish.py``): the next
slice's rows read ahead while slices are computed on worker threads, the outputs written in
order. Its results are the sequential ones bit for bit (SAGE, GCN, GAT; the grid and the source
partitions; many slices); it holds no more slices than the memory plan counts; an error in a
read, a slice's arithmetic or the writer (a full disk), or Ctrl-C while finishing, ends it with
the error, nothing more written, no output left and no thread left running."""

from __future__ import annotations

import errno
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn.models.checkpoints import load_checkpoint
from ringgnn.inference.finish import MIN_SPLIT, map_slices, slices_in_flight, split_rows, workers
from ringgnn.inference.run import LayerwiseInference

from test_infer import full_batch, hubby, runs  # noqa: F401  (the fixtures are used by name)


def _finish_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith("ringgnn-finish")]


def _slow(s):
    time.sleep(random.Random(s).random() * 0.004)


@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_slices_are_written_in_order_whatever_order_they_finish_in(n_workers):
    """Computations that take random times finish out of order; the writes come in order, each
    with its own slice's result, and never more slices are alive (read, computed or being
    written) than ``slices_in_flight`` says."""
    alive, most, lock = set(), [0], threading.Lock()
    written = []

    def read(s):
        with lock:
            alive.add(s)
            most[0] = max(most[0], len(alive))
        _slow(s)
        return s * 10

    def compute(s, x):
        _slow(s + 1)
        return (s, x + 1, threading.current_thread().name)

    def write(s, out):
        assert out[:2] == (s, s * 10 + 1)
        written.append((s, out[2]))
        _slow(s + 2)
        with lock:
            alive.discard(s)

    map_slices(range(0, 120, 3), read, compute, write, n_workers)
    assert [s for s, _ in written] == list(range(0, 120, 3))
    assert {name.rsplit("_", 1)[0] for _, name in written} == {"ringgnn-finish"}
    assert len({name for _, name in written}) <= n_workers
    assert 1 < most[0] <= slices_in_flight(n_workers, True)
    assert _finish_threads() == []


def test_without_overlap_each_slice_is_done_on_the_calling_thread():
    seen = []
    map_slices([0, 5, 9], lambda s: s, lambda s, x: (x, threading.current_thread().name),
               lambda s, out: seen.append(out), workers=2, overlap=False)
    me = threading.current_thread().name
    assert seen == [(0, me), (5, me), (9, me)]
    assert slices_in_flight(2, False) == 1


def test_workers_one_per_core_and_one_on_a_gpu():
    assert 1 <= workers("cpu") <= 4
    assert workers("cuda") == 1


@pytest.mark.parametrize("where", ["read", "compute", "write"])
def test_an_error_in_a_slice_ends_the_pipeline_with_it(where):
    """An error at slice 7 (of 40) is raised in the calling thread; the slices before it were
    written in order and none after; the slices not started never run; no thread is left."""
    written, started = [], []

    def read(s):
        started.append(s)
        if where == "read" and s == 7:
            raise OSError(errno.EIO, "read failed")
        return s

    def compute(s, x):
        if where == "compute" and s == 7:
            raise ValueError("bad slice")
        time.sleep(0.001)
        return x

    def write(s, out):
        if where == "write" and s == 7:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(s)

    with pytest.raises((OSError, ValueError)):
        map_slices(range(40), read, compute, write, workers=2)
    assert written == list(range(7))
    assert max(started) <= 7 + slices_in_flight(2, True)  # nothing started past what was in flight
    assert _finish_threads() == []


@pytest.mark.parametrize("n", [0, 5, 2047, 2048, 5000, 12345])
@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_a_piece_split_among_threads_gives_the_rows_of_the_whole(n, n_workers):
    """``split_rows``: each part on its own thread (the first on the caller's), put together in
    order; a row-wise function gives exactly its rows of the whole piece."""
    threads, parts = set(), []

    def fn(x):
        threads.add(threading.current_thread().name)
        parts.append(len(x))
        return np.stack([x[:, 0] * 2 + 1, x[:, 1] - x[:, 0]], axis=1)

    x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
    with split_rows(fn, n_workers) as f:
        got = f(x)
    want_parts = min(n_workers, n // MIN_SPLIT) if n >= 2 * MIN_SPLIT else 1
    assert len(parts) == want_parts and sum(parts) == n and min(parts) >= min(n, MIN_SPLIT)
    assert threading.current_thread().name in threads and len(threads) <= want_parts
    np.testing.assert_array_equal(got, fn(x))
    assert not [t for t in threading.enumerate() if t.name.startswith("ringgnn-split")]


def test_a_split_piece_that_fails_waits_for_its_other_parts():
    """An error in one part is raised once every part has ended: the rows belong to the caller
    (the Rust core's buffer), no thread may read them after the call."""
    running = []

    def fn(x):
        if x[0, 0] == 0:
            raise ValueError("part 0")
        running.append(1)
        time.sleep(0.05)
        running.pop()
        return x

    x = np.arange(4096, dtype=np.float32).reshape(-1, 1)
    with split_rows(fn, 2) as f:
        with pytest.raises(ValueError, match="part 0"):
            f(x)
        assert running == []


def _layer_rows(ds, ckpt, overlap, **kw):
    li = LayerwiseInference(ds, ckpt, overlap=overlap, hidden_dtype="f32", **kw)
    li.finish_workers = 3  # more workers than this machine may have cores: slices finish out of order
    rows = {}
    names = set()
    orig = li._grid_finish

    def finish(*a):
        names.add(threading.current_thread().name.rsplit("_", 1)[0])
        return orig(*a)

    li._grid_finish = finish
    li.run(None, None, lambda a, r: rows.__setitem__(a, r.copy()))
    return np.concatenate([rows[a] for a in sorted(rows)]), names


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("scheme", ["grid", "partitioned"])
def test_pipelined_finishing_equals_the_sequential_one(hubby, runs, model, scheme, monkeypatch):
    """Slices of 7 rows (215 per layer), on 3 workers with the rows read ahead, against one
    slice after the other on the calling thread: the same outputs, bit for bit, and PyG's."""
    monkeypatch.setattr("ringgnn.inference.engine.FINISH_ROWS", 7)
    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs[model][1]), ds)
    kw = dict(grid_nodes=400, block_edges=50, scheme=scheme, parts=3 if scheme == "partitioned" else None)
    piped, names = _layer_rows(ds, ckpt, True, **kw)
    seq, seq_names = _layer_rows(ds, ckpt, False, **kw)
    assert names == {"ringgnn-finish"} and seq_names == {"MainThread"}
    np.testing.assert_array_equal(piped, seq)
    np.testing.assert_allclose(piped, full_batch(ds, ckpt.net), rtol=1e-4, atol=1e-4)


def test_the_plan_counts_the_slices_in_flight(hubby, runs):
    """The finishing bytes are split among the slices in flight: with the pipeline, each slice
    gets a share of them; the least budget counts the least slices of all of them."""
    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs["sage"][1]), ds)
    on = LayerwiseInference(ds, ckpt, memory=200 << 20)
    off = LayerwiseInference(ds, ckpt, memory=200 << 20, overlap=False)
    n = slices_in_flight(on.finish_workers, True)
    assert on.memplan.finish_in_flight == n and off.memplan.finish_in_flight == 1
    cost = on.memplan.costs[0].per_finish_row
    assert on.memplan.sizes(0).finish_rows == max(1024, on.memplan.finish // n // cost)
    assert on.memplan._least_finish() == n * off.memplan._least_finish()


def test_a_writer_that_fails_mid_block_stops_the_run(hubby, runs, monkeypatch, tmp_path):
    """The writer fails (a full disk) at the 5th slice of the last layer: the error comes out of
    ``run``, nothing is written after it, the layer files are removed, no thread is left."""
    monkeypatch.setattr("ringgnn.inference.engine.FINISH_ROWS", 11)
    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs["gcn"][1]), ds)
    li = LayerwiseInference(ds, ckpt, grid_nodes=500, block_edges=64, work_dir=str(tmp_path))
    li.finish_workers = 2
    calls = []

    def emit(a, rows):
        calls.append(a)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        li.run(None, None, emit)
    assert calls == [0, 11, 22, 33, 44]
    assert _finish_threads() == []
    assert list(tmp_path.iterdir()) == []


SCRIPT = """
import os, resource, signal, sys
import ringgnn.inference.engine as I
I.FINISH_ROWS = 9
how = sys.argv.pop(1)
if how == "full":  # a layer file larger than 20 kB cannot be written: a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
else:  # Ctrl-C while the 30th slice is computed
    orig, seen = I.LayerwiseInference._grid_finish, []
    def finish(self, *a):
        seen.append(1)
        if len(seen) == 30:
            os.kill(os.getpid(), signal.SIGINT)
        return orig(self, *a)
    I.LayerwiseInference._grid_finish = finish
from ringgnn.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("model, how", [("sage", "full"), ("gat", "full"), ("gcn", "interrupt")])
def test_a_full_disk_or_ctrl_c_while_finishing_leaves_nothing(hubby, runs, tmp_path, model, how):
    """``ringgnn predict`` with slices of 9 rows: the hidden layer's file hits the size limit
    (or SIGINT arrives) in the middle of a block's finishing. The command ends (no thread keeps it
    alive: the timeout), with the error, and leaves no output and no temporary."""
    _, run = runs[model]
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, "-c", SCRIPT, how, "predict", str(run), "--out", str(out / "p.npy"),
                        "--quiet"], capture_output=True, text=True, timeout=120)
    if how == "full":
        assert r.returncode != 0 and "File too large" in r.stderr, r.stderr
    else:
        assert r.returncode == 130, r.stderr
    assert list(out.iterdir()) == []
    assert not [p for p in Path(run).iterdir() if p.name.startswith(".ringgnn-infer")]


@pytest.mark.parametrize("model", ["sage", "gat"])
@pytest.mark.parametrize("scheme", ["grid", "partitioned"])
def test_pieces_transformed_on_several_threads_give_pyg_s_answers(hubby, runs, model, scheme, monkeypatch):
    """The Rust aggregation's per-piece products (a narrowing layer's ``W x``, GAT's messages)
    split among 3 threads (parts of at least 8 rows here): PyG's outputs, and the unsplit run's
    within float32 rounding (a product over fewer rows may add in another order)."""
    monkeypatch.setattr("ringgnn.inference.finish.MIN_SPLIT", 8)
    ds = ringgnn.Dataset.open(hubby)
    ckpt = load_checkpoint(str(runs[model][1]), ds)
    got = {}
    for n_workers in (1, 3):
        # One destination block on the grid: with several, a narrowing layer's W x is computed once instead.
        li = LayerwiseInference(ds, ckpt, hidden_dtype="f32", grid_nodes=1500, block_edges=400, scheme=scheme,
                                parts=2 if scheme == "partitioned" else None)
        li.finish_workers = n_workers
        names = set()
        for what in ("transform", "messages"):
            orig = getattr(li.dense, what)

            def wrap(k, orig=orig):
                fn = orig(k)
                return lambda x: (names.add(threading.current_thread().name.rsplit("_", 1)[0]), fn(x))[1]

            monkeypatch.setattr(li.dense, what, wrap)
        rows = {}
        li.run(None, None, lambda a, r: rows.__setitem__(a, r.copy()))
        got[n_workers] = np.concatenate([rows[a] for a in sorted(rows)])
        assert ("ringgnn-split" in names) == (n_workers > 1), names
    np.testing.assert_allclose(got[3], got[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], full_batch(ds, ckpt.net), rtol=1e-4, atol=1e-4)
