"""`ringgnn.Loader`: PyG `Data` batches that equal the sampler's output plus the feature rows
and labels read straight from the files."""

from __future__ import annotations

import numpy as np
import pytest
from _sampling import make_dataset, needs_sampler, sbm

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


@pytest.mark.parametrize("cache", [0, 64 << 10])
def test_batches_are_the_sampler_output_plus_the_files_rows(tmp_path, cache):
    ds = sbm(tmp_path)
    loader = ringgnn.Loader(ds, [10, 5], 256, split="train", seed=3, cache=cache)
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
    assert (st["cache_hits"] > 0) == (cache > 0)


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


def test_loaders_can_share_a_sampler_and_a_feature_store(tmp_path):
    ds = sbm(tmp_path, nodes=600)
    a = ringgnn.Loader(ds, [5], 64, split="train", seed=2)
    b = ringgnn.Loader(ds, [5], 64, split="val", sampler=a.sampler, features=a.features)
    assert b.sampler is a.sampler and b.features is a.features
    n = sum(len(d.n_id) for d in a) + sum(len(d.n_id) for d in b)
    assert a.stats()["rows_requested"] == b.stats()["rows_requested"] == n  # one reader counted both
    alone = ringgnn.Loader(ds, [5], 64, split="val", seed=2)
    assert all(torch.equal(x.n_id, y.n_id) for x, y in zip(alone, ringgnn.Loader(ds, [5], 64, split="val", sampler=a.sampler)))


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
