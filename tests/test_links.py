"""Link batches (issue 21): positives plus negatives, the node sample of their endpoints, and
PyG's LinkLoader driving RingNeighborSampler.sample_from_edges."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ringgnn
from ringgnn._core import InputError
from ringgnn.sampling.links import LinkSampler, NegativeSampling
from ringgnn.sampling.sampler import NeighborSampler


@pytest.fixture
def tiny(tmp_path):
    # In-neighbor lists: 0: [4], 1: [3], 2: [0, 1], 3: [], 4: [].
    (tmp_path / "e.tsv").write_text("0\t2\n1\t2\n3\t1\n4\t0\n")
    ringgnn.convert(tmp_path / "e.tsv", tmp_path / "ds")
    return ringgnn.Dataset.open(tmp_path / "ds")


def edges_of(s):
    node = np.asarray(s.node)
    return sorted(zip(node[np.asarray(s.row)].tolist(), node[np.asarray(s.col)].tolist()))


def test_a_positive_pair_worked_by_hand(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [5]))
    b = ls.sample([0], [2])
    # Seeds: unique(cat([0], [2])) = [0, 2]; their in-neighbors (all of them, fanout 5 > degree).
    assert b.sample.node[:2].tolist() == [0, 2]
    assert sorted(b.sample.node[2:].tolist()) == [1, 4]
    assert edges_of(b.sample) == [(0, 2), (1, 2), (4, 0)]
    assert b.edge_label_index.tolist() == [[0], [1]]
    assert b.edge_label is None and b.num_pos == 1
    # Exactly the node sample of the seeds, same (seed, epoch, batch).
    ref = NeighborSampler(tiny, [5]).sample([0, 2])
    assert b.sample.node.tolist() == ref.node.tolist()
    assert b.sample.row.tolist() == ref.row.tolist() and b.sample.col.tolist() == ref.col.tolist()


def test_seeds_are_sorted_unique_endpoints_and_indices_point_back(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [2, 2]))
    src, dst = np.array([4, 2, 4]), np.array([0, 1, 2])
    b = ls.sample(src, dst, edge_label=[1, 0, 1])
    assert b.sample.node[:4].tolist() == [0, 1, 2, 4]
    node = b.sample.node
    assert node[b.edge_label_index[0]].tolist() == src.tolist()
    assert node[b.edge_label_index[1]].tolist() == dst.tolist()
    assert b.edge_label.tolist() == [1, 0, 1]


def test_binary_negatives(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [2], seed=3), NegativeSampling("binary", 2.5))
    src, dst = np.array([0, 1]), np.array([2, 2])
    b = ls.sample(src, dst, epoch=1, batch=4)
    m = 2 + 5  # ceil(2 * 2.5) negatives
    assert b.edge_label_index.shape == (2, m)
    assert b.edge_label.tolist() == [1, 1, 0, 0, 0, 0, 0]
    node = b.sample.node
    assert node[b.edge_label_index[:, :2]].tolist() == [[0, 1], [2, 2]]
    neg = node[b.edge_label_index[:, 2:]]
    assert ((neg >= 0) & (neg < 5)).all()
    # Seeded by (seed, epoch, batch): again the same, another batch different.
    again = ls.sample(src, dst, epoch=1, batch=4)
    assert node[again.edge_label_index].tolist() == node[b.edge_label_index].tolist()
    others = {tuple(ls.sample(src, dst, epoch=1, batch=k).sample.node.tolist()) for k in range(8)}
    assert len(others) > 1


def test_triplet_negatives(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [2]), NegativeSampling("triplet", 3))
    b = ls.sample([0, 1], [2, 2], batch=2)
    node = b.sample.node
    assert node[b.src_index].tolist() == [0, 1]
    assert node[b.dst_pos_index].tolist() == [2, 2]
    assert b.dst_neg_index.shape == (2, 3)
    one = LinkSampler(NeighborSampler(tiny, [2]), NegativeSampling("triplet", 1)).sample([0, 1], [2, 2])
    assert one.dst_neg_index.shape == (2,)  # squeezed, as PyG does


def test_uniform_negatives_are_uniform(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [1]), NegativeSampling("binary", 1))
    rng = ls.rng(0, 0)
    counts = np.bincount(ls.negatives(50000, rng), minlength=5)
    # Each count is binomial(50000, 1/5): sd 89; allow 5 sd.
    assert (np.abs(counts - 10000) < 450).all(), counts


def test_degree_negatives_follow_degree_to_the_075(tmp_path):
    # In-degrees 0, 1, 4, 16 (nodes 0..3): weights 0, 1, 2.83, 8.
    edges = [(0, 1)] + [(0, 2)] * 4 + [(0, 3)] * 16
    np.save(tmp_path / "e.npy", np.array(edges, dtype=np.int64))
    ringgnn.convert(tmp_path / "e.npy", tmp_path / "ds")
    ls = LinkSampler(NeighborSampler(tmp_path / "ds", [1]), NegativeSampling("binary", 1, weight="degree"))
    counts = np.bincount(ls.negatives(60000, ls.rng(0, 0)), minlength=4)
    w = np.array([0, 1, 4, 16], dtype=float) ** 0.75
    p = w / w.sum()
    assert counts[0] == 0
    sd = np.sqrt(60000 * p * (1 - p))
    assert (np.abs(counts - 60000 * p) < 5 * sd + 1).all(), (counts, 60000 * p)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: NegativeSampling("triplet", 1.5), "whole number of negatives"),
        (lambda: NegativeSampling("both", 1), "mode 'both' is not one of binary, triplet"),
        (lambda: NegativeSampling("binary", 0), "amount must be positive"),
        (lambda: NegativeSampling("binary", 1, weight="pagerank"), "weight 'pagerank' is not one of"),
    ],
)
def test_bad_negative_sampling(make, message):
    with pytest.raises(InputError, match=message):
        make()


def test_bad_link_batches(tiny):
    ls = LinkSampler(NeighborSampler(tiny, [1]))
    with pytest.raises(InputError, match="as many sources as destinations"):
        ls.sample([0, 1], [2])
    with pytest.raises(InputError, match="destination 9 is not a node: the dataset has 5 nodes"):
        ls.sample([0], [9])
    with pytest.raises(InputError, match="triplet negative sampling takes no edge labels"):
        LinkSampler(NeighborSampler(tiny, [1]), NegativeSampling("triplet", 1)).sample([0], [2], edge_label=[1])


def test_pyg_link_loader_runs_on_ringgnn(tmp_path):
    from torch_geometric.loader import LinkLoader
    from torch_geometric.sampler import NegativeSampling as PygNegatives

    from ringgnn.pyg import EDGE_TYPE, RingNeighborSampler, ring_stores

    ringgnn.generate_sbm(tmp_path / "sbm", nodes=300, classes=3, avg_degree=6, feature_dim=4, seed=1)
    ds = ringgnn.Dataset.open(tmp_path / "sbm")
    rng = np.random.default_rng(0)
    dst = rng.integers(0, 300, 40)
    src = np.array([ds.neighbors(v)[0] if len(ds.neighbors(v)) else v for v in dst])
    pairs = torch.from_numpy(np.stack([src, dst]))
    for mode, amount in (("binary", 1), ("triplet", 2)):
        loader = LinkLoader(
            data=ring_stores(ds),
            link_sampler=RingNeighborSampler(ds, [3, 2]),
            edge_label_index=(EDGE_TYPE, pairs),
            neg_sampling=PygNegatives(mode, amount),
            batch_size=16,
        )
        seen = 0
        for batch in loader:
            ids = batch.input_id
            want = pairs[:, ids]
            assert batch.x.shape == (batch.num_nodes, 4)
            assert batch.edge_index.max() < batch.num_nodes
            if mode == "binary":
                pos = batch.edge_label == 1
                assert int(pos.sum()) == len(ids) and batch.edge_label.numel() == 2 * len(ids)
                assert torch.equal(batch.n_id[batch.edge_label_index[:, pos]], want)
            else:
                assert torch.equal(batch.n_id[batch.src_index], want[0])
                assert torch.equal(batch.n_id[batch.dst_pos_index], want[1])
                assert batch.dst_neg_index.shape == (len(ids), 2)
            seen += len(ids)
        assert seen == 40
