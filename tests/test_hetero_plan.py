"""The heterogeneous memory plan (`ringgnn.sampling.plan`): expected reads worked out by hand, the
greedy choice of neighbor files, feature files and cache rows by bytes saved per byte held, explicit
choices and their errors, and the loader and sampler opened as the plan says."""

from __future__ import annotations

import numpy as np
import pytest

import ringgnn
from ringgnn import HeteroLoader, HeteroNeighborSampler
from ringgnn import _core
from ringgnn.sampling.plan import expected_reads, plan_hetero, relation_bytes
from test_hetero_cache import typed  # noqa: F401  (the fixture)

RELS = ["author:writes:paper", "paper:cites:paper", "paper:published:venue", "venue:has:paper"]
# Neighbor files (u32 ids): writes 6 edges = 24 bytes, cites 28, published 12, has 12. Offset
# indexes: 4 bytes per destination + 1 (every relation under 2^32 edges): paper 24 three times,
# venue 12: 84. Feature files: one page each (4096 bytes).
INDEX = 84


def _memory(room):
    """The budget whose room (half of it, less the offset indexes, the process holding 0) is `room`."""
    return 2 * (room + INDEX)


def test_expected_reads_worked_out_by_hand(typed):  # noqa: F811
    """Two paper seeds, one hop of fanout 2: each relation into paper reads a page per frontier
    node, at most its file (24, 28, 12 bytes); average in-degrees writes 6/5, cites 7/5, has 3/5
    reach 2 * 1.2 authors, 2 * 1.4 papers and 2 * 0.6 venues; published (into venue) is not read."""
    ds = ringgnn.Dataset.open(typed)
    reads, rows = expected_reads(ds, {r: [2] for r in RELS}, "paper", 2)
    assert reads == {"author:writes:paper": 24, "paper:cites:paper": 28, "paper:published:venue": 0,
                     "venue:has:paper": 12}
    assert rows == pytest.approx({"paper": 4.8, "author": 2.4, "venue": 1.2})
    # Dense (a sampler alone): every relation's whole file at each hop.
    reads, _ = expected_reads(ds, {r: [2, 2] for r in RELS})
    assert reads == {"author:writes:paper": 48, "paper:cites:paper": 56, "paper:published:venue": 24,
                     "venue:has:paper": 24}


def test_the_plan_counts_the_offset_indexes_the_graph_holds(typed):  # noqa: F811
    """What the plan counts for the offset indexes is what the opened graph holds (no neighbor
    file in memory with ``pread``); over 2^32 edges a u64 base per 65,536 entries is added."""
    ds = ringgnn.Dataset.open(typed)
    assert relation_bytes(ds)[0] == INDEX == _core.HeteroGraph(ds.path, backend="pread").bytes
    assert _core.offset_index_bytes(5, (1 << 32) - 1) == 24
    assert _core.offset_index_bytes(5, 1 << 32) == 24 + 8
    assert _core.offset_index_bytes(65535, 1 << 32) == 4 * 65536 + 8
    assert _core.offset_index_bytes(65536, 1 << 32) == 4 * 65537 + 16


def test_sampler_alone_holds_the_files_worth_most_per_byte(typed):  # noqa: F811
    ds = ringgnn.Dataset.open(typed)
    fan = {r: [2, 2] for r in RELS}
    # Equal value per byte (two hops each): larger first, cites (28) then writes (24).
    p = plan_hetero(ds, fan, memory=_memory(52), process=0)
    assert p.placement() == ("auto", ["author:writes:paper", "paper:cites:paper"])
    assert p.relations["venue:has:paper"].why == "does not fit the 0 B left"
    assert plan_hetero(ds, fan, memory=_memory(76), process=0).placement() == ("memory", [])
    # A relation never read is never held, whatever the room.
    fan["paper:published:venue"] = [0, 0]
    p = plan_hetero(ds, fan, memory=_memory(1000), process=0)
    assert p.placement() == ("auto", ["author:writes:paper", "paper:cites:paper", "venue:has:paper"])
    assert "never read" in p.relations["paper:published:venue"].why
    assert plan_hetero(ds, fan, backend="pread", memory=_memory(1000), process=0).placement() == ("pread", [])


def test_loader_plan_splits_the_room_among_cache_and_files(typed):  # noqa: F811
    """One hop of fanout 2, batches of 2 of the 5 training papers (3 per epoch). Per epoch on
    disk: each feature file 3 pages (12288 bytes, 3 per byte held), writes/cites/has their file 3
    times (3 per byte). Hits: authors 1 3 2 0 (6), papers 3 1 1 4 1 (10), so a hit saves 2048
    bytes of author reads, 1228.8 of paper reads, and cached rows (12 and 24 bytes) are worth
    512, 341, 205, 154, 171 and 51 bytes per byte in the cache's ranking a1 a2 p3 p0 a0 (p1 p2
    p4): far more than any file."""
    ds = ringgnn.Dataset.open(typed)
    fan = {r: [2] for r in RELS}
    kw = dict(target="paper", batch_size=2, seeds=5, feature_backend="auto", process=0)
    # Room 100: a1 a2 p3 p0 a0 (84 bytes); (p1 p2 p4) does not fit the 16 left: the cache ends.
    # Authors' file: every sampled row cached, worth nothing more. Papers': 7 of its 10 hits
    # cached, its net value 0.9 per byte; has (12) fits the 16 left, cites and writes do not.
    p = plan_hetero(ds, fan, memory=_memory(100), **kw)
    assert p.batches == 3
    assert {t: list(v) for t, v in p.cache.ids.items()} == {"author": [0, 1, 2], "paper": [0, 3]}
    assert p.cache.total == 84
    assert p.placement() == ("auto", ["venue:has:paper"])
    assert p.feature_backends() == {"author": "auto", "paper": "auto"}
    assert p.features["author"].why == "its sampled rows are all in the cache"
    assert p.features["paper"].why == "does not fit the 52 B left"
    assert p.cache_saved == pytest.approx(2048 * 6 + 1228.8 * 7)
    assert p.held_bytes() == 84 + 12 <= p.room
    # Room 208: every row with hits cached (156 bytes), then cites and writes.
    p = plan_hetero(ds, fan, memory=_memory(208), **kw)
    assert p.cache.total == 156 and p.cache.rows() == {"author": 3, "paper": 5}
    assert p.held_relations == ["author:writes:paper", "paper:cites:paper"]
    # Everything fits: every file read held (published, into venues, is never read with one
    # hop from papers), no cache (nothing counted).
    p = plan_hetero(ds, fan, memory=_memory(2 * 4096 + 76), **kw)
    assert p.cache is None
    assert p.placement() == ("auto", ["author:writes:paper", "paper:cites:paper", "venue:has:paper"])
    assert p.feature_backends() == {"author": "memory", "paper": "memory"}
    text = p.text()
    assert text.startswith("memory plan by relation and node type: budget ")
    assert "features paper: in memory, fits the room left; on disk it would read about 12.0 KiB more per epoch" in text
    assert "relation paper:published:venue: on disk, never read" in text


def test_explicit_choices_and_their_errors(typed):  # noqa: F811
    ds = ringgnn.Dataset.open(typed)
    fan = {r: [2] for r in RELS}
    kw = dict(target="paper", batch_size=2, seeds=5, process=0)
    # An explicit cache is taken first, split across types by hits per byte; files share the rest.
    p = plan_hetero(ds, fan, memory=_memory(48 + 28), feature_backend="auto", cache=48, **kw)
    assert {t: list(v) for t, v in p.cache.ids.items()} == {"author": [1, 2], "paper": [3]}
    assert p.placement() == ("auto", ["paper:cites:paper"])
    p = plan_hetero(ds, fan, memory=_memory(1 << 20), feature_backend="auto", cache=0, **kw)
    assert p.cache is None and p.feature_backends() == {"author": "memory", "paper": "memory"}
    with pytest.raises(ringgnn.InputError, match="cache 1,000 bytes: the memory plan has 76 bytes of room"):
        plan_hetero(ds, fan, memory=_memory(76), feature_backend="auto", cache=1000, **kw)
    with pytest.raises(ringgnn.InputError, match="the batches half of what is left.*more than the budget"):
        plan_hetero(ds, fan, memory=_memory(40), backend="memory", **kw)
    with pytest.raises(ringgnn.InputError, match="the batches half of what is left.*more than the budget"):
        plan_hetero(ds, fan, memory=_memory(4096), feature_backend="memory", **kw)
    p = plan_hetero(ds, fan, memory=_memory(1 << 20), feature_backend="pread", **kw)
    assert p.feature_backends() == {"author": "pread", "paper": "pread"}
    assert p.cache.rows() == {"author": 3, "paper": 5}  # the room left goes to the cache


def test_loader_and_sampler_open_as_the_plan_says(typed, monkeypatch):  # noqa: F811
    from ringgnn import _options

    monkeypatch.setattr(_options, "held_memory", lambda: 0)  # what every plan takes off as held
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)
    kw = dict(seeds="train", batch_size=2, shuffle=True, seed=3, threads=2)
    ref = HeteroLoader(typed, [2], "paper", memory=1 << 30, **kw)
    assert ref.sampler.placement() == ref.plan.placement() == ("auto", [r for r in RELS if "published" not in r])
    assert ref.features.backends == {"author": "memory", "paper": "memory"}
    capped = HeteroLoader(typed, [2], "paper", memory=_memory(100), **kw)
    assert capped.sampler.plan() is capped.plan
    assert capped.sampler.placement() == ("auto", ["venue:has:paper"])
    assert capped.features.cached_rows() == {"author": 3, "paper": 2}
    assert "hot-row cache: 84 B" in capped.plan.text()
    a = [(b["paper"].n_id.numpy(), b["paper"].x.numpy()) for b in ref]
    b = [(b["paper"].n_id.numpy(), b["paper"].x.numpy()) for b in capped]
    assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))
    # A loader given a sampler plans its features within what the sampler's placement leaves.
    s = HeteroNeighborSampler(typed, [2], memory=_memory(40))
    assert s.placement() == ("auto", ["paper:cites:paper", "paper:published:venue"])  # dense: the largest first
    loader = HeteroLoader(typed, [2], "paper", sampler=s, memory=_memory(40), **kw)
    assert loader.plan.relations["paper:cites:paper"].why == "as the sampler given to the loader placed it"
    assert loader.plan.held_bytes() <= loader.plan.room


def test_measured_batches_take_their_bytes_and_the_rest_is_room(typed):  # noqa: F811
    ds = ringgnn.Dataset.open(typed)
    fan = {r: [2] for r in RELS}
    kw = dict(target="paper", batch_size=2, seeds=5, process=0, feature_backend="auto")
    p = plan_hetero(ds, fan, memory=1000 + INDEX + 100, batch_bytes=1000, **kw)
    assert p.room == 100 and p.batch_bytes == 1000
    assert p.cache.total == 84  # as with room 100 under the half rule
    p = plan_hetero(ds, fan, memory=1000 + INDEX + 100, batch_bytes=1000, reserve=60, **kw)
    assert p.room == 40 and p.process == 60
    with pytest.raises(ringgnn.InputError, match="the batches 2,000 at their peak.*give a larger --memory"):
        plan_hetero(ds, fan, memory=1000 + INDEX + 100, batch_bytes=2000, **kw)


def test_the_batches_take_the_room_the_files_and_cache_leave_unused(typed):  # noqa: F811
    ds = ringgnn.Dataset.open(typed)
    fan = {r: [2] for r in RELS}
    kw = dict(target="paper", batch_size=2, seeds=5, process=0)
    # Room 100 (batches 184): cache 84 and venue:has:paper (12) held, 4 unused.
    p = plan_hetero(ds, fan, memory=_memory(100), feature_backend="auto", **kw)
    assert (p.batch_bytes, p.room, p.held_bytes()) == (184, 100, 96)
    assert p.batch_memory == 184 + 4
    # Every file read from disk and no cache: the batches take the whole of what is left.
    p = plan_hetero(ds, fan, memory=_memory(100), backend="pread", feature_backend="pread", cache=0, **kw)
    assert p.held_bytes() == 0 and p.batch_memory == 184 + 100 == _memory(100) - INDEX
    # Measured batches: their bytes, and the room left unused.
    p = plan_hetero(ds, fan, memory=1000 + INDEX + 100, batch_bytes=1000, backend="pread", feature_backend="pread",
                    cache=0, **kw)
    assert p.batch_memory == 1100


def test_a_probe_batch_is_measured(typed):  # noqa: F811
    from ringgnn.sampling.plan import PROBE_MARGIN, probe_batch_bytes

    loader = HeteroLoader(typed, [2], "paper", batch_size=2, backend="pread", feature_backend="pread", cache=0)
    grown = []

    def step(batch):
        grown.append(np.ones(64 << 20, dtype=np.uint8))  # 64 MiB touched at the step's peak
        grown.pop()

    got = probe_batch_bytes(loader, step, 3)
    # Other memory comes and goes meanwhile (the batch, the collector): within 10% of 64 MiB, times the margin.
    assert PROBE_MARGIN * (58 << 20) <= got <= PROBE_MARGIN * (70 << 20)

