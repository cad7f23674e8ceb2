"""The temporal graphs of the tests at times (sampler, loaders, training, serving), built in one
place: docs/FORMAT.md's example (:func:`example`), an SBM with uniform times (:func:`timed_sbm`)
and the planted graph whose labels only edges after a node's time reveal (:func:`planted`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ringgnn.data import build

#: docs/FORMAT.md's example: edges 2->1, 7->1, 0->1, 1->1, 3->0 at times 5, 3, 3, 9, -4, so node
#: 1's list is (3, 0), (3, 7), (5, 2), (9, 1) and node 0's (-4, 3).
EXAMPLE_EDGES = "2 1\n7 1\n0 1\n1 1\n3 0\n"
EXAMPLE_TIMES = [5, 3, 3, 9, -4]


def example(d: Path) -> Path:
    """docs/FORMAT.md's example in ``d``: its edges ``e.txt``, their times ``t.npy``, and the dataset
    ``d / "ds"`` built from them; returns ``d``."""
    (d / "e.txt").write_text(EXAMPLE_EDGES)
    np.save(d / "t.npy", np.array(EXAMPLE_TIMES, dtype=np.int64))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "t.npy")
    return d


def timed_sbm(d: Path, nodes: int, feature_dim: int) -> Path:
    """An SBM of ``nodes`` nodes (4 classes, degree 10) with uniform edge and node times in
    [0, 1000), at ``d``."""
    build.generate_sbm(d, nodes=nodes, classes=4, avg_degree=10, feature_dim=feature_dim, edge_time="uniform",
                       node_time="uniform", time_range=(0, 1000))
    return d


def planted(d: Path, n: int, k: int) -> Path:
    """A graph where only edges after a node's time reveal its label. Each node has a label
    (0/1), a group (0/1, independent of the label) whose one-hot is its feature (so a node's own
    features say nothing of its label) and a time uniform in [100, 1000). Into each node ``v``:
    ``k`` edges from nodes whose group is ``v``'s label, all after ``v``'s time (the leak), and
    ``k`` edges from random nodes, all before it. At ``v``'s time only the random ones exist.

    Writes to ``d`` the edges (``e.txt``, ``e.npy``), features ``x.npy``, labels ``y.npy``, edge
    and node times ``et.npy``, ``nt.npy``, and the dataset ``d / "ds"`` with both times, split
    train=0.6,val=0.2,test=0.2 by seed 1 (:data:`PLANTED_SPLIT`); returns ``d``."""
    rng = np.random.default_rng(7)
    label, group = rng.integers(0, 2, n), rng.integers(0, 2, n)
    t = rng.integers(100, 1000, n)
    by_group = [np.flatnonzero(group == g) for g in (0, 1)]
    src, dst, et = [], [], []
    for v in range(n):
        src += list(rng.choice(by_group[label[v]], k)) + list(rng.integers(0, n, k))
        dst += [v] * 2 * k
        et += list(rng.integers(t[v] + 1, 1100, k)) + list(rng.integers(0, t[v], k))
    d.mkdir(parents=True, exist_ok=True)
    np.savetxt(d / "e.txt", np.stack([src, dst], 1), fmt="%d")
    np.save(d / "e.npy", np.stack([src, dst], 1).astype(np.int64))
    np.save(d / "x.npy", np.eye(2, dtype=np.float32)[group])
    np.save(d / "y.npy", label.astype(np.int64))
    np.save(d / "et.npy", np.array(et, dtype=np.int64))
    np.save(d / "nt.npy", t.astype(np.int64))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "et.npy", node_time=d / "nt.npy", **planted_options(d))
    return d


#: The node split of :func:`planted`'s datasets.
PLANTED_SPLIT = "train=0.6,val=0.2,test=0.2"


def planted_options(d: Path) -> dict:
    """The features, labels and split of a homogeneous dataset of :func:`planted`'s graph in ``d``."""
    return dict(features=d / "x.npy", labels=d / "y.npy", split=PLANTED_SPLIT, seed=1)
