"""Helpers of the sampling tests: tiny datasets with known neighbor lists, and the structural
checks that every sample must pass (the SamplerOutput layout of issue 3)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import pytest

import ringgnn
from ringgnn import _core

REPO_README = Path(__file__).resolve().parent.parent / "README.md"

#: Tests that run the Rust sampler skip until the extension provides it.
needs_sampler = pytest.mark.skipif(
    not hasattr(_core, "Sampler"),
    reason="ringgnn._core.Sampler is not built; run `pip install --no-build-isolation .`",
)


def uring_available(ds: ringgnn.Dataset) -> bool:
    """Whether io_uring works in this process (asking for it explicitly fails where it does not)."""
    try:
        return ringgnn.NeighborSampler(ds, [1], backend="uring").backend.startswith("uring")
    except ringgnn.InputError:
        return False


def make_dataset(tmp_path: Path, name: str, edges: Sequence[Tuple[int, int]], **kwargs) -> ringgnn.Dataset:
    """Convert `edges` (src, dst) into a dataset named `name` under tmp_path."""
    src = tmp_path / f"{name}.npy"
    np.save(src, np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    ringgnn.convert(src, tmp_path / name, **kwargs)
    return ringgnn.Dataset.open(tmp_path / name)


def path_graph(tmp_path: Path, n: int = 5) -> ringgnn.Dataset:
    """0 -> 1 -> ... -> n-1: neighbors(v) = [v - 1], neighbors(0) = []."""
    return make_dataset(tmp_path, "path", [(i, i + 1) for i in range(n - 1)])


def star_graph(tmp_path: Path, leaves: int = 5) -> ringgnn.Dataset:
    """Undirected star: neighbors(0) = [1..leaves], neighbors(i) = [0]."""
    return make_dataset(tmp_path, "star", [(i, 0) for i in range(1, leaves + 1)], undirected=True)


def sbm(tmp_path: Path, nodes: int = 2000, **kwargs) -> ringgnn.Dataset:
    out = tmp_path / "sbm"
    opts = dict(nodes=nodes, classes=4, avg_degree=10, feature_dim=16, seed=1)
    opts.update(kwargs)
    ringgnn.generate_sbm(out, **opts)
    return ringgnn.Dataset.open(out)


def edges_by_hop(sub) -> List[set]:
    """For each hop, the multiset of (global source, global target) pairs."""
    out, start = [], 0
    for n in sub.num_sampled_edges:
        r, c = sub.row[start : start + n], sub.col[start : start + n]
        out.append(Counter(zip(sub.node[r].tolist(), sub.node[c].tolist())))
        start += n
    return out


def check_sample(ds: ringgnn.Dataset, sub, seeds, fanouts: Sequence[int], replace: bool = False) -> None:
    """Everything issue 3 promises about one sample, checked against the dataset itself."""
    node, row, col = sub.node, sub.row, sub.col
    for a in (node, row, col):
        assert isinstance(a, np.ndarray) and a.dtype == np.int64
    uniq_seeds = list(dict.fromkeys(np.asarray(seeds).tolist()))
    assert sub.batch_size == len(uniq_seeds)
    assert node[: len(uniq_seeds)].tolist() == uniq_seeds, "seeds come first, in order, once each"
    assert len(set(node.tolist())) == len(node), "no node twice"
    assert len(sub.num_sampled_nodes) == len(fanouts) + 1 and len(sub.num_sampled_edges) == len(fanouts)
    assert sum(sub.num_sampled_nodes) == len(node) and sum(sub.num_sampled_edges) == len(row) == len(col)

    bounds = np.concatenate([[0], np.cumsum(sub.num_sampled_nodes)])
    start = 0
    for hop, (f, n_e) in enumerate(zip(fanouts, sub.num_sampled_edges)):
        r, c = row[start : start + n_e], col[start : start + n_e]
        start += n_e
        # hop k expands exactly the nodes first reached at hop k-1, and reaches nodes up to hop k
        assert ((c >= bounds[hop]) & (c < bounds[hop + 1])).all(), f"hop {hop}: col outside the expanded layer"
        assert (r < bounds[hop + 2]).all(), f"hop {hop}: row beyond this hop's nodes"
        # new nodes of this hop are listed in the order they are first reached
        new = [x for x in dict.fromkeys(r.tolist()) if x >= bounds[hop + 1]]
        assert new == list(range(bounds[hop + 1], bounds[hop + 2])), f"hop {hop}: discovery order"
        per_target = Counter(c.tolist())
        for li in range(bounds[hop], bounds[hop + 1]):
            nbrs = ds.neighbors(int(node[li]))
            want = len(nbrs) if f == -1 else (min(f, len(nbrs)) if not replace else (f if len(nbrs) else 0))
            assert per_target.get(li, 0) == want, f"hop {hop}: node {node[li]} got {per_target.get(li, 0)} != {want}"
            got = Counter(node[r[c == li]].tolist())
            have = Counter(nbrs.tolist())
            for u, k in got.items():
                assert u in have, f"sampled edge {u}->{node[li]} is not in the graph"
                if not replace:
                    assert k <= have[u], f"{u}->{node[li]} drawn {k} times, exists {have[u]} times"


def as_tuple(sub) -> tuple:
    return (sub.node.tolist(), sub.row.tolist(), sub.col.tolist(), sub.num_sampled_nodes, sub.num_sampled_edges)


def edge_index(ds: ringgnn.Dataset) -> np.ndarray:
    """Every edge of ``ds``'s graph as a (2, E) int64 array: sources over destinations, in CSC
    order (destination, then source)."""
    dst = np.repeat(np.arange(ds.num_nodes), ds.degrees())
    src = np.concatenate([ds.neighbors(v) for v in range(ds.num_nodes)]) if ds.num_nodes else dst
    return np.stack([src, dst]).astype(np.int64)


def make_link_dataset(tmp: Path, nodes: int = 600, negatives: int = 7, seed: int = 2, classes: int = 3,
                      avg_degree: int = 8, feature_dim: int = 4,
                      link_split: str = "val=0.05,test=0.1") -> ringgnn.Dataset:
    """An SBM's edges (community structure: links are predictable) with ``feature_dim`` random
    features per node, ``link_split`` held out with ``negatives`` fixed negatives each; in
    ``tmp/ds`` (the labeled SBM itself is ``tmp/g``)."""
    ringgnn.generate_sbm(tmp / "g", nodes=nodes, classes=classes, avg_degree=avg_degree, feature_dim=feature_dim,
                         seed=seed)
    g = ringgnn.Dataset.open(tmp / "g")
    np.save(tmp / "e.npy", edge_index(g))
    np.save(tmp / "x.npy", np.random.default_rng(0).normal(size=(g.num_nodes, feature_dim)).astype(np.float32))
    ringgnn.convert(tmp / "e.npy", tmp / "ds", features=tmp / "x.npy", link_split=link_split,
                    link_negatives=negatives, seed=1)
    return ringgnn.Dataset.open(tmp / "ds")


def full_graph(ds: ringgnn.Dataset, net, layer=None) -> np.ndarray:
    """Encoder ``net`` over the whole graph in memory (PyG's own forward): its output, or with
    ``layer`` that layer's output as the next layer sees it (a hook on layer + 1)."""
    import torch

    from ringgnn.pyg import RingFeatureStore

    x = torch.from_numpy(RingFeatureStore(ds).reader().gather(np.arange(ds.num_nodes, dtype=np.int64)))
    seen = []
    hook = net.convs[layer].register_forward_pre_hook(lambda _m, inp: seen.append(inp[0])) if layer else None
    try:
        with torch.no_grad():
            out = net(x, torch.from_numpy(edge_index(ds)))
    finally:
        if hook:
            hook.remove()
    return (seen[0] if layer else out).numpy()


def reference_scores(ds: ringgnn.Dataset, run, pairs, negs=None):
    """(scores of ``pairs`` (2, n), scores of ``negs`` (n, K) or None) of link run ``run``'s
    checkpoint from a full-graph forward of its encoder, then its decoder: what layer-wise
    inference must reproduce."""
    import torch

    from ringgnn.models.checkpoints import load_checkpoint

    ckpt = load_checkpoint(str(run), ds)
    z = torch.from_numpy(full_graph(ds, ckpt.net))
    with torch.no_grad():
        pos = ckpt.decoder(z[pairs[0]], z[pairs[1]]).numpy()
        neg = None if negs is None else ckpt.decoder(z[pairs[0]].unsqueeze(1), z[negs]).numpy()
    return pos, neg
