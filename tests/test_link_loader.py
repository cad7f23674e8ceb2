"""`ringgnn.sampling.links.LinkLoader` (issue 21, part 2): link batches through the Rust loader are exactly
LinkSampler's, whatever the backend, hyperbatch size, window or selection; no held-out pair is
ever sampled; fixed negatives; bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn._core import InputError
from ringgnn.sampling.links import LinkLoader, LinkSampler, NegativeSampling, edge_pairs
from ringgnn.pyg import RingFeatureStore
from ringgnn.sampling.sampler import NeighborSampler

from _sampling import make_link_dataset, uring_available


@pytest.fixture(scope="module")
def link_ds(tmp_path_factory) -> ringgnn.Dataset:
    return make_link_dataset(tmp_path_factory.mktemp("links"))


def reference(ds, loader: LinkLoader, ns, epoch: int, b: int, fixed=None):
    """Batch `b` of `loader`'s epoch `epoch` as LinkSampler makes it, one batch on its own."""
    pos = loader.batch_positions(epoch, b)
    ls = LinkSampler(NeighborSampler(ds, loader.fanouts, seed=loader.pairs.seed), ns)
    return pos, ls.sample(loader.edges[0, pos], loader.edges[1, pos], epoch=epoch, batch=b,
                          fixed=None if fixed is None else fixed[pos])


def assert_same(data, pos, ref) -> None:
    assert data.input_id.tolist() == pos.tolist()
    assert data.n_id.tolist() == ref.sample.node.tolist()
    assert data.edge_index[0].tolist() == ref.sample.row.tolist()
    assert data.edge_index[1].tolist() == ref.sample.col.tolist()
    assert data.batch_size == ref.sample.num_sampled_nodes[0]
    if ref.edge_label_index is not None:
        assert data.edge_label_index.tolist() == ref.edge_label_index.tolist()
        if ref.edge_label is None:  # no negatives, no labels given: none, as PyG
            assert "edge_label" not in data
        else:
            assert data.edge_label.tolist() == ref.edge_label.tolist()
    else:
        assert data.src_index.tolist() == ref.src_index.tolist()
        assert data.dst_pos_index.tolist() == ref.dst_pos_index.tolist()
        assert data.dst_neg_index.tolist() == ref.dst_neg_index.tolist()


@pytest.mark.parametrize("backend", ["memory", "pread", "uring"])
@pytest.mark.parametrize("hyperbatch", [1, "auto"])
@pytest.mark.parametrize("ns", [NegativeSampling("binary", 1.5), NegativeSampling("triplet", 2, weight="degree"),
                                None], ids=["binary", "triplet", "none"])
def test_link_loader_batches_are_link_sampler_batches(link_ds, backend, hyperbatch, ns):
    if backend == "uring" and not uring_available(link_ds):
        pytest.skip("io_uring is not available here")
    loader = LinkLoader(link_ds, [3, 2], 50, neg_sampling=ns, seed=5, backend=backend, hyperbatch=hyperbatch,
                        window=4)
    loader.set_epoch(1)
    rows = RingFeatureStore(link_ds).reader()
    seen = []
    for b, data in enumerate(loader):
        pos, ref = reference(link_ds, loader, ns, 1, b)
        assert_same(data, pos, ref)
        assert np.array_equal(data.x.numpy(), rows.gather(data.n_id.numpy()))
        seen.append(pos)
    assert len(seen) == len(loader) == -(-link_ds.edge_split("train").shape[1] // 50)
    # Every training pair once per epoch, in an order of (seed, epoch).
    assert sorted(np.concatenate(seen).tolist()) == list(range(link_ds.edge_split("train").shape[1]))
    train = link_ds.edge_split("train")
    assert [sorted(zip(*train[:, p].tolist())) for p in seen[:2]] == [
        sorted(zip(*loader.edges[:, p].tolist())) for p in seen[:2]]
    loader.set_epoch(2)
    again = np.concatenate([d.input_id.numpy() for d in loader])
    assert not np.array_equal(again, np.concatenate(seen))


def test_fixed_negatives_and_a_selection_of_batches(link_ds):
    negs = link_ds.edge_negatives("test")
    loader = LinkLoader(link_ds, [2], 9, edges="test", negatives=negs, shuffle=False, batches=[3, 0, 3], window=2)
    got = list(loader)
    assert len(got) == len(loader) == 3
    for data, b in zip(got, [3, 0, 3]):
        pos, ref = reference(link_ds, loader, None, 0, b, fixed=negs)
        assert pos.tolist() == list(range(9 * b, 9 * b + 9))  # no shuffle: the split's order
        assert_same(data, pos, ref)
        n_id = data.n_id.numpy()
        test = link_ds.edge_split("test")
        assert n_id[data.src_index.numpy()].tolist() == test[0, pos].tolist()
        assert n_id[data.dst_pos_index.numpy()].tolist() == test[1, pos].tolist()
        assert n_id[data.dst_neg_index.numpy()].tolist() == negs[pos].tolist()


def test_no_held_out_pair_is_ever_sampled(link_ds):
    held = {tuple(p) for s in ("val", "test") for p in link_ds.edge_split(s).T.tolist()}
    assert held
    # Every in-neighbor of every endpoint (fanout -1), two hops, several epochs.
    loader = LinkLoader(link_ds, [-1, -1], 64, neg_sampling=NegativeSampling("binary", 1), backend="pread")
    sampled = 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for data in loader:
            n_id = data.n_id.numpy()
            pairs = zip(n_id[data.edge_index[0].numpy()].tolist(), n_id[data.edge_index[1].numpy()].tolist())
            bad = [p for p in pairs if p in held]
            assert not bad, bad[:5]
            sampled += data.edge_index.shape[1]
    assert sampled > link_ds.num_edges  # the whole training graph was seen


def test_edge_pairs_and_bad_input(link_ds, tmp_path):
    n = link_ds.num_nodes
    assert edge_pairs(link_ds, np.array([[0, 1], [2, 3], [4, 5]])).tolist() == [[0, 2, 4], [1, 3, 5]]
    assert edge_pairs(link_ds, np.array([[0, 1], [2, 3]])).tolist() == [[0, 1], [2, 3]]  # (2, n) first
    np.save(tmp_path / "p.npy", np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32))
    assert edge_pairs(link_ds, str(tmp_path / "p.npy")).tolist() == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(InputError, match="not an edge split of .* \\(it has: test, train, val\\)"):
        edge_pairs(link_ds, "valid")
    with pytest.raises(InputError, match="shape \\(2, n\\) or \\(n, 2\\), got \\(3, 3\\)"):
        edge_pairs(link_ds, np.zeros((3, 3), np.int64))
    with pytest.raises(InputError, match="node ids must be integers, got float64"):
        edge_pairs(link_ds, np.zeros((2, 3)))
    with pytest.raises(InputError, match=f"node {n} is not a node"):
        edge_pairs(link_ds, np.array([[0], [n]]))
    np.save(tmp_path / "bad.npy", np.zeros((2, 2, 2), np.int64))
    with pytest.raises(InputError, match="bad.npy: pairs need shape"):
        edge_pairs(link_ds, str(tmp_path / "bad.npy"))
    with pytest.raises(InputError, match="negatives need one row per pair"):
        LinkLoader(link_ds, [2], 8, edges="test", negatives=np.zeros((3, 2), np.int64))
    with pytest.raises(InputError, match="not both"):
        LinkLoader(link_ds, [2], 8, edges="test", negatives=link_ds.edge_negatives("test"),
                   neg_sampling=NegativeSampling())
    with pytest.raises(InputError, match="edge_label needs one value per pair"):
        LinkLoader(link_ds, [2], 8, edges="test", edge_label=[1.0])
    with pytest.raises(InputError, match="fixed negative is not a node"):
        list(LinkLoader(link_ds, [2], 8, edges="test", negatives=np.full_like(link_ds.edge_negatives("test"), n)))


def test_a_shared_engine_gives_the_same_batches(link_ds):
    train = LinkLoader(link_ds, [3], 40, neg_sampling=NegativeSampling("binary", 1), seed=3)
    test = LinkLoader(link_ds, [3], 5, edges="test", negatives=link_ds.edge_negatives("test"), shuffle=False,
                      share=train, seed=99)
    assert test._core is train._core and test.pairs.seed == 3  # one engine, one sampling stream
    alone = LinkLoader(link_ds, [3], 5, edges="test", negatives=link_ds.edge_negatives("test"), shuffle=False,
                       seed=3)
    for a, b in zip(test, alone):
        assert a.n_id.tolist() == b.n_id.tolist() and a.edge_index.tolist() == b.edge_index.tolist()
    with pytest.raises(InputError, match="same dataset and fanouts"):
        LinkLoader(link_ds, [4], 5, share=train)


def test_windows_do_not_change_batches(link_ds):
    def epoch(window):
        loader = LinkLoader(link_ds, [2, 2], 30, neg_sampling=NegativeSampling("binary", 1), window=window)
        return [(d.n_id.tolist(), d.edge_label_index.tolist()) for d in loader]

    assert epoch(1) == epoch(3) == epoch(1000)


def test_the_loader_reports_its_epoch(link_ds, tmp_path: Path):
    loader = LinkLoader(link_ds, [2], 100, neg_sampling=NegativeSampling("binary", 1))
    assert len(list(loader)) == len(loader)
    assert loader.last_epoch["batches"] == len(loader)
    assert loader.stats()["batches"] >= len(loader)
    assert "text" in loader.plan()
    assert "LinkLoader(" in repr(loader)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 1000, 4097])
def test_shuffle_is_a_permutation_keyed_by_its_key(n):
    from ringgnn.sampling.links import Shuffle

    order = Shuffle(n, [0, 1])(np.arange(n))
    assert sorted(order.tolist()) == list(range(n))
    assert np.array_equal(Shuffle(n, [0, 1])(np.arange(n)), order), "reproducible"
    # Piecewise (a batch at a time) is the same as whole.
    assert np.concatenate([Shuffle(n, [0, 1])(np.arange(a, min(n, a + 7))) for a in range(0, n, 7)]).tolist() \
        == order.tolist()
    if n >= 64:
        assert not np.array_equal(Shuffle(n, [0, 2])(np.arange(n)), order), "another key, another order"
        assert not np.array_equal(order, np.arange(n))


def test_shuffle_positions_are_uniform():
    from ringgnn.sampling.links import Shuffle

    # Where element 0..9 of a 1000-long order lands, over 2000 keys: uniform over 10 bins of 100
    # positions each (20,000 draws, 2,000 per bin, sd 42; 5 sd allowed).
    n = 1000
    landed = np.concatenate([Shuffle(n, [k])(np.arange(10)) for k in range(2000)])
    counts = np.bincount(landed // 100, minlength=10)
    assert (np.abs(counts - 2000) < 5 * 42).all(), counts
    # Consecutive positions are not correlated: the gap between the first two is spread out.
    gaps = np.array([np.diff(Shuffle(n, [k])(np.arange(2)))[0] for k in range(2000)])
    assert np.abs(gaps).mean() == pytest.approx(n / 3, rel=0.1)


@pytest.mark.parametrize("backend,hyperbatch", [("memory", 1), ("pread", "auto"), ("pread", 1)])
def test_link_sampler_epochs_are_its_batches(link_ds, backend, hyperbatch):
    ns = NegativeSampling("binary", 1)
    pairs = LinkSampler(NeighborSampler(link_ds, [3, 2]), ns).most_seeds(40)
    ls = LinkSampler(NeighborSampler(link_ds, [3, 2], seed=4, backend=backend, hyperbatch=hyperbatch,
                                     batch_size=pairs), ns)
    ref = LinkSampler(NeighborSampler(link_ds, [3, 2], seed=4), ns)
    got = list(ls.epoch("train", 40, epoch=3, window=3, batches=[5, 1, 2, 9]))
    assert [b for b, _ in got] == [5, 1, 2, 9]
    train = link_ds.edge_split("train")
    lb = LinkLoader(link_ds, [3, 2], 40, neg_sampling=ns, seed=4)
    for b, batch in got:
        pos = lb.batch_positions(3, b)
        want = ref.sample(train[0, pos], train[1, pos], epoch=3, batch=b)
        assert batch.sample.node.tolist() == want.sample.node.tolist()
        assert batch.sample.row.tolist() == want.sample.row.tolist()
        assert batch.edge_label_index.tolist() == want.edge_label_index.tolist()
        assert batch.edge_label.tolist() == want.edge_label.tolist()
    fixed = LinkSampler(ls.sampler)  # fixed candidates instead of drawn negatives
    n = 0
    for b, batch in fixed.epoch("test", 50, shuffle=False, negatives=link_ds.edge_negatives("test")):
        assert batch.dst_neg_index.shape == (min(50, link_ds.edge_split("test").shape[1] - 50 * b), 7)
        n += 1
    assert n == -(-link_ds.edge_split("test").shape[1] // 50)
    with pytest.raises(InputError, match="not both"):
        next(ls.epoch("test", 50, negatives=link_ds.edge_negatives("test")))


def test_a_gpu_tier_look_ahead_counts_a_link_loaders_rows(link_ds):
    from ringgnn.sampling.cuda import count_accesses

    loader = LinkLoader(link_ds, [3, 2], 20, neg_sampling=NegativeSampling("binary", 1))
    first = np.unique(link_ds.edge_split("train")[:, np.sort(loader.positions(0, 0, 64 * 20))])
    assert loader.seeds.tolist() == first.tolist()
    counts = count_accesses(loader, 8)
    # 8 batches of 20 of those seeds (shuffled as the loader shuffles), each counted once at least.
    assert counts.shape == (link_ds.num_nodes,) and np.count_nonzero(counts[first]) >= 8 * 20
