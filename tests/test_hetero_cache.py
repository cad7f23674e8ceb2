"""The heterogeneous loader's hot-row cache: rows counted out of core, ranked across node types by
hits per byte (worked out by hand), hits counted, batches identical with and without it."""

from __future__ import annotations

import numpy as np
import pytest

import ringgnn
from ringgnn import HeteroLoader, NodeType, Relation
from ringgnn.sampling.features import choose_cache_rows, ranked_groups, row_bytes, source_hits

WRITES = [(0, 0), (1, 0), (1, 1), (1, 2), (2, 3), (2, 4)]  # author -> paper: out-degrees 1, 3, 2, 0
CITES = [(0, 1), (0, 2), (2, 3), (3, 0), (3, 1), (3, 4), (4, 0)]  # paper -> paper: 2, 0, 1, 3, 1
PUBLISHED = [(0, 0), (1, 0), (3, 1)]  # paper -> venue: 1, 1, 0, 1, 0
HAS = [(0, 0), (1, 3), (1, 4)]  # venue -> paper (venues have no features)
ALL = ["author:writes:paper", "paper:cites:paper", "paper:published:venue", "venue:has:paper"]


def _edges(path, pairs):
    with open(path, "w") as f:
        f.writelines(f"{s},{d}\n" for s, d in pairs)
    return path


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    return build_typed(tmp_path_factory.mktemp("hcache"))


def build_typed(d):
    """In `d`: five papers (4 float32 features: rows of 16 bytes), four authors (2 float16
    features: 4 bytes), two venues without features; the dataset's path."""
    np.save(d / "px.npy", np.arange(20, dtype=np.float32).reshape(5, 4))
    np.save(d / "ax.npy", (np.arange(8, dtype=np.float16) / 4).reshape(4, 2))
    np.save(d / "y.npy", np.array([0, 1, 0, 1, 1]))
    np.save(d / "train.npy", np.array([0, 1, 2, 3, 4]))
    ringgnn.build_hetero(
        d / "ds",
        [NodeType("paper", 5, features=d / "px.npy", labels=d / "y.npy", split={"train": str(d / "train.npy")}),
         NodeType("author", 4, features=d / "ax.npy", feature_dtype="f16"), NodeType("venue", 2)],
        [Relation("author:writes:paper", _edges(d / "w.csv", WRITES)),
         Relation("paper:cites:paper", _edges(d / "c.csv", CITES)),
         Relation("paper:published:venue", _edges(d / "p.csv", PUBLISHED)),
         Relation("venue:has:paper", _edges(d / "h.csv", HAS))],
    )
    return d / "ds"


def test_hits_are_out_degrees_in_the_relations_read(typed):
    ds = ringgnn.Dataset.open(typed)
    assert list(source_hits(ds, "author", ALL)) == [1, 3, 2, 0]
    assert list(source_hits(ds, "paper", ALL)) == [3, 1, 1, 4, 1]
    # A relation never read (fanout 0 at every hop) does not count; chunks do not change counts.
    assert list(source_hits(ds, "paper", ["paper:cites:paper"], chunk=2)) == [2, 0, 1, 3, 1]
    assert list(source_hits(ds, "venue", ALL)) == [1, 2]


def test_rows_are_the_top_ones_by_hits_per_byte_across_types(typed):
    """Costs: paper 16 + 8 = 24 bytes, author 4 + 8 = 12. Hits per byte: a1 3/12, then a2 2/12
    and p3 4/24 (equal: author first by name), p0 3/24, a0 1/12, p1 p2 p4 1/24; a3 never."""
    ds = ringgnn.Dataset.open(typed)
    assert row_bytes(ds) == {"author": 4, "paper": 16}
    hits = {t: source_hits(ds, t, ALL) for t in ("author", "paper")}
    assert ranked_groups(hits, row_bytes(ds)) == [("author", 3, 1), ("author", 2, 1), ("paper", 4, 1),
                                                  ("paper", 3, 1), ("author", 1, 1), ("paper", 1, 3)]

    def rows(budget):
        c = choose_cache_rows(hits, row_bytes(ds), budget)
        assert c.total <= budget
        assert c.total == 12 * len(c.ids["author"]) + 24 * len(c.ids["paper"])
        return {t: list(v) for t, v in c.ids.items()}

    assert rows(0) == {"author": [], "paper": []}
    assert rows(11) == {"author": [], "paper": []}
    assert rows(12) == {"author": [1], "paper": []}
    assert rows(47) == {"author": [1, 2], "paper": []}  # p3 (24 bytes) does not fit: the prefix ends
    assert rows(48) == {"author": [1, 2], "paper": [3]}
    assert rows(83) == {"author": [1, 2], "paper": [0, 3]}
    assert rows(84) == {"author": [0, 1, 2], "paper": [0, 3]}
    assert rows(84 + 24) == {"author": [0, 1, 2], "paper": [0, 1, 3]}  # ties: smaller ids first
    assert rows(84 + 48) == {"author": [0, 1, 2], "paper": [0, 1, 2, 3]}
    assert rows(1 << 30) == {"author": [0, 1, 2], "paper": [0, 1, 2, 3, 4]}  # author 3: never sampled


def _batches(loader):
    out = []
    for b in loader:
        out.append({t: (b[t].n_id.numpy().copy(), b[t].x.numpy().copy() if "x" in b[t] else None)
                    for t in b.node_types})
    return out


@pytest.mark.parametrize("backend", ["pread", "auto"])
def test_batches_are_identical_and_hits_are_counted(typed, backend, monkeypatch):
    from ringgnn import _options

    monkeypatch.setattr(_options, "held_memory", lambda: 0)  # what every plan takes off as held
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    ds = ringgnn.Dataset.open(typed)
    # Memory: the offset indexes (84 bytes), the cache and 30 bytes: feature files stay on disk.
    kw = dict(seeds="train", batch_size=2, shuffle=True, seed=3, threads=2, feature_backend=backend,
              memory=2 * (84 + 48 + 30))
    plain = HeteroLoader(typed, [2, 2], "paper", cache=0, **kw)
    cached = HeteroLoader(typed, [2, 2], "paper", cache=48, **kw)
    assert cached.features.cached_rows() == {"author": 2, "paper": 1}
    assert cached.features.cache_bytes() == 48
    assert plain.features.cached_rows() == {"author": 0, "paper": 0}
    a, b = _batches(plain), _batches(cached)
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for t in x:
            assert np.array_equal(x[t][0], y[t][0])
            assert (x[t][1] is None and y[t][1] is None) or np.array_equal(x[t][1], y[t][1])
    # The file's rows, whatever the cache (authors stored as float16 and widened).
    px = np.arange(20, dtype=np.float32).reshape(5, 4)
    ax = (np.arange(8, dtype=np.float16) / 4).reshape(4, 2).astype(np.float32)
    for batch in b:
        assert np.array_equal(batch["paper"][1], px[batch["paper"][0]])
        if "author" in batch:
            assert np.array_equal(batch["author"][1], ax[batch["author"][0]])
    cachedset = {"author": {1, 2}, "paper": {3}}
    st = cached.feature_stats()
    for t in ("author", "paper"):
        want = sum(len(set(batch[t][0].tolist()) & cachedset[t]) for batch in b if t in batch)
        assert st[t]["cache_hits"] == want
        assert st[t]["rows_requested"] == sum(len(batch[t][0]) for batch in b if t in batch)
        assert plain.feature_stats()[t]["cache_hits"] == 0
    assert sum(st[t]["cache_hits"] for t in st) > 0
    # A second loader sharing the first's readers holds the cache once and reads the same rows.
    evals = HeteroLoader(typed, [2, 2], "paper", features=cached.features, **kw)
    assert evals.features is cached.features
    for x, y in zip(_batches(evals), b):
        assert all(np.array_equal(x[t][0], y[t][0]) for t in x)
    with pytest.raises(ringgnn.InputError, match="cache must be >= 0 bytes"):
        HeteroLoader(typed, [2, 2], "paper", cache=-1)
    with pytest.raises(ringgnn.InputError, match="is not a size"):
        HeteroLoader(typed, [2, 2], "paper", cache="lots")
    assert ds.node_types == ["author", "paper", "venue"]


def test_memory_backend_holds_files_and_no_cache(typed):
    loader = HeteroLoader(typed, [2, 2], "paper", batch_size=5, feature_backend="memory", cache=1 << 20)
    assert loader.features.cached_rows() == {"author": 0, "paper": 0}
    b = next(iter(loader))
    assert np.array_equal(b["paper"].x.numpy(), np.arange(20, dtype=np.float32).reshape(5, 4)[b["paper"].n_id])
