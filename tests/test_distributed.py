"""Data-parallel training (python/ringgnn/training/distributed.py, ``torchrun -m ringgnn train``): the
per-rank shares of an epoch, the collectives on a real two-rank gloo group, a two-rank run
against a single process, rank 0's outputs, resume, and ranks that die or hang."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

import ringgnn
from ringgnn.training.distributed import PeerFailedError, Ranks, shard
from ringgnn.training.loop import train

from _sampling import make_link_dataset

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
TRAIN = ["--lr", "0.01", "--quiet"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, port: int, world: int = 2) -> Dict[str, str]:
    """What torchrun sets for a rank of a one-machine job."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
               LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    return env


@pytest.fixture(scope="module")
def sbm(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "sbm"
    ringgnn.generate_sbm(out, nodes=8000, classes=4, avg_degree=10, feature_dim=16, seed=1)
    return out


# --- shares of an epoch ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10, 11])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shards_are_disjoint_equal_and_cover_the_epoch(n, world):
    padded = [shard(n, r, world) for r in range(world)]
    exact = [shard(n, r, world, pad=False) for r in range(world)]
    # Without padding: a partition of the epoch's batches, rank r taking r, r + W, ...
    assert sorted(b for s in exact for b in s) == list(range(n))
    assert all(s == list(range(r, n, world)) for r, s in enumerate(exact))
    # With padding: the same number on every rank; the extra ones repeat the first batches.
    per = -(-n // world) if n else 0
    assert all(len(s) == per for s in padded)
    for r in range(world):
        assert padded[r][: len(exact[r])] == exact[r]
    extra = [b for r in range(world) for b in padded[r][len(exact[r]):]]
    # As DistributedSampler pads: the epoch again from its start (round and round if needed).
    assert sorted(extra) == sorted(i % n for i in range(world * per - n))


def test_shard_rejects_a_rank_outside_the_world():
    with pytest.raises(ringgnn.InputError, match="rank 2 is not a rank of a world of 2"):
        shard(10, 2, 2)
    with pytest.raises(ringgnn.InputError):
        shard(10, 0, 0)


def test_ranks_see_disjoint_seeds_whose_union_is_the_epoch_and_the_single_process_batches(sbm):
    """Each rank's batches are the single-process epoch's batches at the rank's indices."""
    opts = dict(seed=3, backend="memory", threads=1)
    whole = ringgnn.Loader(sbm, [5, 3], 128, **opts)
    whole.set_epoch(2)
    every = {i: b for i, b in enumerate(whole)}
    seen: List[np.ndarray] = []
    for rank in range(2):
        mine = shard(len(whole), rank, 2, pad=False)
        part = ringgnn.Loader(sbm, [5, 3], 128, batches=mine, **opts)
        part.set_epoch(2)
        for i, b in zip(mine, part):
            assert np.array_equal(b.n_id.numpy(), every[i].n_id.numpy())
            assert np.array_equal(b.edge_index.numpy(), every[i].edge_index.numpy())
            seen.append(b.n_id[: b.batch_size].numpy())
    seeds = np.concatenate(seen)
    assert len(np.unique(seeds)) == len(seeds), "no seed on two ranks"
    assert np.array_equal(np.sort(seeds), np.sort(ringgnn.Dataset.open(sbm).split("train")))


def test_local_ranks_share_the_default_budget(sbm):
    """`processes=2` halves the default budget beyond the reserve (each of two local ranks
    takes its half of half the available memory)."""
    one = ringgnn.Loader(sbm, [5, 3], 128, reserve=0, processes=1).plan()
    two = ringgnn.Loader(sbm, [5, 3], 128, reserve=0, processes=2).plan()
    assert two["budget"] == pytest.approx(one["budget"] / 2, rel=0.1)
    with pytest.raises(ringgnn.InputError, match="processes"):
        ringgnn.Loader(sbm, [5, 3], 128, processes=0)


# --- the collectives on a real gloo group -----------------------------------------------------

COLLECTIVES = textwrap.dedent("""
    import json, sys
    from ringgnn.training import distributed
    from ringgnn import InputError
    ranks = distributed.join("cpu", timeout=30)
    out = {"ranks": [ranks.rank, ranks.world_size, ranks.local_rank, ranks.local_world_size, ranks.owned]}
    out["sums"] = distributed.sums(ranks, [1, ranks.rank, 0.5])
    out["leader"] = distributed.from_leader(ranks, lambda: {"from": ranks.rank})
    out["gathered"] = distributed.gather(ranks, {"rank": ranks.rank})
    def refuse():
        raise InputError("rank 0 says no")
    try:
        distributed.from_leader(ranks, refuse)
    except InputError as e:
        out["error"] = str(e)
    distributed.leave(ranks)
    print(json.dumps(out))
""")


def test_collectives_on_two_gloo_ranks():
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", COLLECTIVES], env=rank_env(r, port), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    got = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    for r, g in enumerate(got):
        assert g["ranks"] == [r, 2, r, 2, True]
        assert g["sums"] == [2.0, 1.0, 1.0]
        assert g["leader"] == {"from": 0}, "rank 0's result, on every rank"
        assert g["error"] == "rank 0 says no", "rank 0's input error is raised on every rank"
        assert g["gathered"] == [{"rank": 0}, {"rank": 1}]


def test_a_lone_process_joins_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ranks = ringgnn.training.distributed.join("cpu")
    assert ranks == Ranks() and not ranks.active and ranks.leader and ranks.tag() == ""


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "2"}, "RANK is None: launch the ranks with torchrun"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR and MASTER_PORT not set"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
])
def test_a_bad_launch_environment_is_a_clear_error(monkeypatch, env, message):
    for k in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ringgnn.InputError, match=message):
        ringgnn.training.distributed.join("cpu")


# --- torchrun -m ringgnn train ---------------------------------------------------------------


def torchrun_train(sbm, out, *args, timeout=300) -> subprocess.CompletedProcess:
    cmd = TORCHRUN + ["-m", "ringgnn", "train", str(sbm), "--out", str(out), *TRAIN, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))


@pytest.fixture(scope="module")
def two_ranks(sbm, tmp_path_factory):
    """A two-rank run: batches of 128 per rank, the global batch of the single process's 256."""
    out = tmp_path_factory.mktemp("ddp") / "run"
    r = torchrun_train(sbm, out, "--epochs", "5", "--batch-size", "128")
    assert r.returncode == 0, r.stderr[-3000:]
    return r, out


def test_two_ranks_reach_the_single_process_accuracy(sbm, two_ranks, tmp_path):
    r, out = two_ranks
    ddp = json.loads((out / "metrics.json").read_text())
    single = train(sbm, out=str(tmp_path / "single"), batch_size=256, epochs=5, lr=0.01, quiet=True,
                   log=lambda s: None)
    assert single["world_size"] == 1 and ddp["world_size"] == 2
    assert ddp["test_acc"] >= single["test_acc"] - 0.01, (ddp["test_acc"], single["test_acc"])
    assert ddp["test_acc"] > 0.8


def test_rank_zero_writes_the_outputs_and_every_rank_prints_its_plan(two_ranks):
    r, out = two_ranks
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "curves.png", "last.pt", "metrics.json"]
    m = json.loads((out / "metrics.json").read_text())
    assert m["args"]["world_size"] == 2 and len(m["epochs"]) == 5
    for e in m["epochs"]:  # every rank's stage times, rank 0's also in the epoch's own columns
        assert len(e["ranks"]) == 2 and e["ranks"][0]["train_seconds"] == e["train_seconds"]
        assert all(r["train_epoch_seconds"] > 0 for r in e["ranks"])
    # 4800 training seeds, 128 per batch: 38 batches, 19 per rank.
    assert "19 batches per epoch per rank, 2 ranks (batch 128 per rank)" in r.stdout
    for rank in range(2):
        assert f"[rank {rank}/2] loader: " in r.stdout and "memory budget" in r.stdout
    assert r.stdout.count("epoch 4: loss") == 1, "epoch lines come from rank 0 alone"


def test_resume_with_the_same_world_size_and_a_clear_error_otherwise(sbm, two_ranks, cli, tmp_path):
    _, out = two_ranks
    run = tmp_path / "resumed"
    run.mkdir()
    for f in out.iterdir():
        (run / f.name).write_bytes(f.read_bytes())
    r = cli("train", sbm, "--out", run, "--epochs", "6", "--batch-size", "128", "--resume", *TRAIN)
    assert r.code == 1
    assert "world_size=2 (now 1)" in r.err and "torchrun --nproc-per-node" in r.err
    r = torchrun_train(sbm, run, "--epochs", "6", "--batch-size", "128", "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((run / "metrics.json").read_text())
    assert [e["epoch"] for e in m["epochs"]] == list(range(6))
    assert "epoch 5: loss" in r.stdout and "epoch 4: loss" not in r.stdout


def test_an_existing_run_stops_every_rank_with_rank_zeros_message(sbm, two_ranks):
    _, out = two_ranks
    r = torchrun_train(sbm, out, "--epochs", "1", timeout=120)
    assert r.returncode != 0
    assert r.stderr.count("already holds a run (last.pt)") == 2, r.stderr[-3000:]


# --- failures --------------------------------------------------------------------------------


def children(pid: int) -> List[int]:
    kids: List[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def wait_for(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    for stream in (p.stdout, p.stderr):
        if stream is not None:
            stream.close()
    p.wait()


LONG = ["--epochs", "10000", "--batch-size", "32"]


def test_killing_one_rank_under_torchrun_ends_the_run_with_an_error(sbm, tmp_path):
    cmd = TORCHRUN + ["-m", "ringgnn", "train", str(sbm), "--out", str(tmp_path / "run"), *TRAIN, *LONG]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout is not None
        for line in p.stdout:  # training has started when rank 0 reports an epoch
            if line.startswith("epoch 0:"):
                break
        ranks = children(p.pid)
        assert len(ranks) == 2
        os.kill(ranks[1], signal.SIGKILL)
        t0 = time.monotonic()
        rest = p.communicate(timeout=60)[0]
        assert p.returncode != 0
        assert time.monotonic() - t0 < 60
        assert "SIGKILL" in rest or "Signal 9" in rest
        assert not any(Path(f"/proc/{k}").exists() for k in ranks), "no rank is left behind"
    finally:
        stop(p)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_a_rank_that_dies_or_hangs_stops_the_other_with_a_clear_error(sbm, tmp_path, sig):
    """Without torchrun's agent to stop the others: a dead rank's connections close at once; a
    hung one is given up after --dist-timeout."""
    port = free_port()
    cmd = [sys.executable, "-m", "ringgnn", "train", str(sbm), "--out", str(tmp_path / "run"), *TRAIN, *LONG,
           "--dist-timeout", "5"]
    procs = [subprocess.Popen(cmd, env=rank_env(r, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    try:
        assert procs[0].stdout is not None
        for line in procs[0].stdout:
            if line.startswith("epoch 0:"):
                break
        os.kill(procs[1].pid, sig)
        t0 = time.monotonic()
        _, err = procs[0].communicate(timeout=60)
        assert procs[0].returncode == 1
        assert time.monotonic() - t0 < 30
        assert "ringgnn train: error: rank 0: training epoch" in err or "rank 0: all_reduce failed" in err, err[-2000:]
        assert "another rank failed or the connection to it was lost" in err
    finally:
        for p in procs:
            stop(p)


def test_peer_failed_error_is_a_ringgnn_error():
    assert issubclass(PeerFailedError, ringgnn.RingGnnError)


def test_a_link_task_trains_on_two_ranks(tmp_path):
    """--task link under torchrun: each rank its share of the link batches, the model's whole
    step (encoder and decoder) under DDP, sampled scores summed over the ranks, rank 0's files."""
    ds = make_link_dataset(tmp_path)
    out = tmp_path / "run"
    cmd = TORCHRUN + ["-m", "ringgnn", "train", ds.path, "--out", str(out), "--task", "link", "--fanouts", "5,5",
                      "--batch-size", "64", "--epochs", "2", "--hidden", "32", *TRAIN]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["world_size"] == 2 and m["args"]["task"] == "link" and len(m["epochs"]) == 2
    n = ds.edge_split("train").shape[1]
    per_rank = -(-(-(-n // 64)) // 2)
    assert f"{per_rank} batches per epoch per rank, 2 ranks" in r.stdout
    assert m["layerwise"]["test_auc"] > 0.55, m["layerwise"]
    assert 0 < m["test_mrr"] <= 1 and set(m["test_hits"]) == {"1", "3", "10", "20", "50", "100"}


# --- at times ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def timed_sbm(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "timed"
    ringgnn.generate_sbm(out, nodes=3000, classes=4, avg_degree=8, feature_dim=16, seed=1, edge_time="uniform",
                         node_time="uniform", time_range=(0, 1000))
    return out


def test_ranks_at_times_take_their_seeds_with_their_times(timed_sbm):
    """A rank's batches at times are the single process's batches at the rank's indices, each
    seed at its own node time (the times follow the seeds through the shuffle and the shares)."""
    opts = dict(seed=3, backend="memory", threads=1, batch_size=128)
    ds = ringgnn.Dataset.open(timed_sbm)
    node_times = np.asarray(ds.node_times())
    whole = ringgnn.HeteroLoader(timed_sbm, [5, 3], "node", **opts)
    whole.set_epoch(2)
    every = {i: b for i, b in enumerate(whole)}
    seen: List[np.ndarray] = []
    for rank in range(2):
        part = ringgnn.HeteroLoader(timed_sbm, [5, 3], "node", **opts)
        part.batches = shard(len(part), rank, 2, pad=False)
        part.set_epoch(2)
        for i, b in zip(part.batches, part):
            seeds = b["node"].n_id[: b["node"].batch_size].numpy()
            assert np.array_equal(b["node"].n_id.numpy(), every[i]["node"].n_id.numpy())
            # seed_time: each node's seed's time, the seeds first
            assert np.array_equal(b["node"].seed_time[: len(seeds)].numpy(), node_times[seeds])
            seen.append(seeds)
    seeds = np.concatenate(seen)
    assert np.array_equal(np.sort(seeds), np.sort(ds.split("train")))


def test_a_run_at_times_trains_on_two_ranks(timed_sbm, tmp_path):
    """torchrun on a dataset with times: a temporal run (sampled evaluation) on two ranks."""
    out = tmp_path / "run"
    r = torchrun_train(timed_sbm, out, "--epochs", "2", "--batch-size", "128")
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["world_size"] == 2 and m["temporal"] is True and len(m["epochs"]) == 2
    assert "temporal: each seed is sampled at its time" in r.stdout
    assert 0.3 < m["test_acc"] <= 1
