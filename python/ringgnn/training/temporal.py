"""Whether a training run samples at times: each target node's seed time (:func:`seed_times`)
and whether a link run samples each pair at its time minus one (:func:`pairs_at_times`)."""

from __future__ import annotations

import logging
import os
from typing import Any, Optional, Sequence

import numpy as np

from .._core import InputError
from ..data.dataset import warn_without_times

logger = logging.getLogger("ringgnn")


def seed_times(ds: Any, target: str, task: str, seed_time: Any = None, ignore_time: bool = False
               ) -> Optional[np.ndarray]:
    """The time of every node of type ``target`` (int64) when the run samples at times: its node
    time or ``seed_time`` (a ``.npy``); None without times or with ``ignore_time`` (which warns)."""
    if ignore_time:
        if seed_time is not None:
            raise InputError("--seed-time samples each seed at a time and --ignore-time samples without times: "
                             "give one of them")
        if ds.has_times:
            warn_without_times(ds, f"--ignore-time: {ds.path} has times, but this run samples every edge whatever "
                                   "its time, so a seed's neighborhood may hold its future (a leak)")
        return None
    if not ds.has_times:
        if seed_time is not None:
            raise InputError(f"--seed-time {seed_time}: {ds.path} has no edge or node times to sample at; build it "
                             "with --edge-time (and --node-time), or leave --seed-time out")
        return None
    part = ds.node_type(target)
    if seed_time is not None:
        return _read(seed_time, part.num_nodes, target)
    times = part.node_times()
    if times is None:
        raise InputError(f"{ds.path} has edge times but node type '{target}' has no node times, so its seeds have no "
                         f"time to be sampled at: give --seed-time FILE.npy (one int64 time per node of '{target}'), "
                         "or --ignore-time to sample without times")
    return times


def pairs_at_times(ds: Any, part: Any, splits: Sequence[str], seed_time: Any = None,
                   ignore_time: bool = False) -> bool:
    """Whether a link run on ``part`` (a dataset or relation) samples its edge ``splits``' pairs
    at their times; refused where a split has no times (unless ``ignore_time``)."""
    if seed_time is not None:
        raise InputError(f"--seed-time {seed_time}: node times for --task node; a link run samples each pair at "
                         "its own time (its edge split's times)")
    if ignore_time:
        seed_times(ds, "", "link", None, True)  # its warning, as a node run gives it
        return False
    if not ds.has_times:
        return False
    missing = [s for s in splits if part.edge_split_times(s) is None]
    if missing:
        have = "splits have" if len(missing) > 1 else "split has"
        raise InputError(f"{ds.path} has times, but its {'/'.join(missing)} edge {have} "
                         "no pair times to sample at: build the splits by time (convert --link-split-time "
                         "val=T1,test=T2), or give --ignore-time to train on every edge whatever its time")
    return True


def _read(path: Any, n: int, target: str) -> np.ndarray:
    path = os.fspath(path)
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"--seed-time {path}: not a readable .npy array ({e})") from None
    if not isinstance(a, np.ndarray):  # np.load opens an .npz archive whatever the file's name
        a.close()
        raise InputError(f"--seed-time {path}: an .npz archive of arrays, not a .npy array; save the times with "
                         "np.save")
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.signedinteger):
        raise InputError(f"--seed-time {path}: must be a 1-D array of integer times (int64, the unit of the "
                         f"dataset's times), got shape {a.shape} of {a.dtype}")
    if len(a) != n:
        raise InputError(f"--seed-time {path}: {len(a):,} times but node type '{target}' has {n:,} nodes; give one "
                         "time per node")
    return np.ascontiguousarray(a, dtype=np.int64)
