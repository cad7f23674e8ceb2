"""The memory plan of layer-wise inference (python/ringgnn/inference/plan.py): the greedy cut of the
offset index into destination blocks, the least block share for a number of sweeps, the budget's
split and the refusal of a budget that would sweep a layer's input more than MAX_SWEEPS times
(with the least budget named, and that budget accepted), and the refusal before PyTorch is
imported of a budget the runtime alone exceeds."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringgnn._core import InputError
from ringgnn.inference.plan import (KEY_PEAK, MAX_SWEEPS, InferencePlan, LayerCost, check_runtime, cut,
                                least_block_bytes, sweeps)


def test_the_cut_by_hand():
    # degrees 2, 0, 3, 1; 10 bytes a node, 16 an edge
    indptr = np.array([0, 2, 2, 5, 6])
    assert cut(indptr, 10, 42) == 1  # node 0: 10 + 2*16 = 42
    assert cut(indptr, 10, 51) == 1  # nodes 0-1: 20 + 32 = 52 > 51
    assert cut(indptr, 10, 52) == 2
    assert cut(indptr, 10, 130) == 3  # nodes 0-2: 30 + 80 = 110; 0-3: 40 + 96 = 136
    assert cut(indptr, 10, 136) == 4
    assert cut(indptr, 10, 1, a=2) == 3  # a node alone, whatever the share
    # sweeps at 52: [0,2) 52, [2,3) 58 > 52: alone, its 3 edges in windows of (52 - 10) // 16 = 2 -> 2,
    # then [3,4) 26: 4 in all
    assert sweeps(indptr, 10, 52, 100) == 4
    assert sweeps(indptr, 10, 136, 100) == 1
    # nodes without edges that fill the share exactly: one sweep (hypothesis found it counted 2)
    assert sweeps(np.array([0, 0, 0]), 16, 32, 1) == 1 and least_block_bytes(np.array([0, 0, 0]), 16, 1) == 32


def test_the_bytes_an_edge_takes_are_the_layers():
    """The Rust core holds one 4-byte id an edge where node ids fit in 32 bits (read straight
    into its source positions, whatever the neighbor file's width; the distinct sources are the
    bits of a bitmap, in the plan's fixed part), 8-byte ids else; torch's sorted keys take
    KEY_PEAK. The cut and the sweeps count what the layer's cost says, so a block of the same
    share holds more edges with narrow ids."""
    from ringgnn import _core

    assert _core.aggregate_edge_bytes(1000) == 4
    assert _core.aggregate_edge_bytes(2**32 - 2) == 4
    assert _core.aggregate_edge_bytes(2**32 - 1) == 8  # 2**32 - 1 marks a dropped edge
    assert _core.aggregate_edge_bytes(2**40) == 8
    indptr = np.array([0, 2, 2, 5, 6])  # degrees 2, 0, 3, 1
    assert cut(indptr, 10, 52, per_edge=8) == 2  # nodes 0-2: 30 + 5 * 8 = 70 > 52
    assert cut(indptr, 10, 70, per_edge=8) == 3 and cut(indptr, 10, 70) == 2
    assert sweeps(indptr, 10, 70, 100, per_edge=8) == 2 and sweeps(indptr, 10, 70, 100) == 3
    # At 4 bytes an edge all four nodes take 40 + 6 * 4 = 64: one sweep, where 8 bytes an edge
    # (the core before: the ids read beside their positions, then their distinct copy) take 88.
    assert cut(indptr, 10, 64, per_edge=4) == 4 and cut(indptr, 10, 63, per_edge=4) == 3
    assert sweeps(indptr, 10, 64, 100, per_edge=4) == 1 and sweeps(indptr, 10, 64, 100, per_edge=8) == 2
    assert least_block_bytes(indptr, 10, 1, per_edge=4) == 64 and least_block_bytes(indptr, 10, 1, per_edge=8) == 88
    rust = LayerCost(4 * 128 + 24, 4 * 128, 4 * (128 + 128 + 6 * 64) + 64, per_edge=8)
    torch = LayerCost(4 * 128 + 24, 4 * 128, 4 * (128 + 128 + 6 * 64) + 64)
    n, degree = 100_000, 30
    indptr = np.arange(n + 1, dtype=np.int64) * degree
    narrow = InferencePlan(None, indptr, [rust], in_flight=2, held=400 << 20).least_budget([0])
    wide = InferencePlan(None, indptr, [torch], in_flight=2, held=400 << 20).least_budget([0])
    # The blocks' least share: per node 536 + 30 edges, at 8 and 16 bytes, over MAX_SWEEPS sweeps.
    assert narrow < wide
    assert (wide - narrow) * 0.9 == pytest.approx(n * degree * 8 / MAX_SWEEPS, rel=0.01)


def test_sweeps_drop_with_the_bytes_an_edge_takes():
    """100,000 nodes of 20 in-edges, 540 bytes a node: the blocks' bytes are 54 MB of nodes and
    2M edges, at 8 bytes (the Rust core before: 16 MB) or 4 (8 MB). Under a share of 10,000,000
    bytes, a block holds ``10e6 // (540 + 20 * 8) = 14,285`` nodes at 8 bytes an edge: 8 sweeps
    (7 full blocks and a last of 5 nodes), and ``10e6 // (540 + 20 * 4) = 16,129`` at 4: 7
    sweeps (6 full and a last of 3,226). The least budgets named for 8 sweeps differ by an
    eighth of the 8 MB the edges take less (over the plan's 90%)."""
    n, degree = 100_000, 20
    indptr = np.arange(n + 1, dtype=np.int64) * degree
    assert (cut(indptr, 540, 10_000_000, per_edge=8), cut(indptr, 540, 10_000_000, per_edge=4)) == (14_285, 16_129)
    assert sweeps(indptr, 540, 10_000_000, 100, 8) == 8 and sweeps(indptr, 540, 10_000_000, 100, 4) == 7
    old, new = (LayerCost(540, 4 * 128, 4 * (128 + 128 + 6 * 64) + 64, per_edge=e) for e in (8, 4))
    least = [InferencePlan(None, indptr, [c], in_flight=2, held=400 << 20).least_budget([0]) for c in (old, new)]
    assert (least[0] - least[1]) * 0.9 == pytest.approx(n * degree * 4 / MAX_SWEEPS, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=80), st.integers(1, 300), st.integers(1, 9),
       st.sampled_from([16, 8, 4]))
def test_the_cut_is_the_largest_block_within_the_share(degrees, per_node, limit, per_edge):
    """Whatever the degrees and the bytes an edge, a block's nodes and edges fit the least share
    for ``limit`` sweeps and one node more would not (but for a node alone)."""
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    n = len(degrees)
    share = least_block_bytes(indptr, per_node, limit, per_edge)
    assert sweeps(indptr, per_node, share, limit, per_edge) <= limit
    a = 0
    while a < n:
        b = cut(indptr, per_node, share, a, per_edge)
        assert (b - a) * per_node + int(indptr[b] - indptr[a]) * per_edge <= share or b == a + 1
        if b < n:
            assert (b + 1 - a) * per_node + int(indptr[b + 1] - indptr[a]) * per_edge > share
        a = b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=80), st.integers(1, 300), st.integers(1, 9))
def test_the_least_block_share_is_the_least_with_that_many_sweeps(degrees, per_node, limit):
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    least = least_block_bytes(indptr, per_node, limit)
    assert sweeps(indptr, per_node, least, limit) <= limit
    if least > per_node + KEY_PEAK:
        assert sweeps(indptr, per_node, least - 1, limit) > limit
    # blocks cover every node once, in order
    a, n = 0, len(degrees)
    while a < n:
        b = cut(indptr, per_node, least, a)
        assert a < b <= n
        a = b


def _plan(budget, n=100_000, degree=10, held=400 << 20, layers=2):
    indptr = np.arange(n + 1, dtype=np.int64) * degree
    costs = [LayerCost(4 * 128 + 24, 4 * 128, 4 * (128 + 128 + 6 * 64) + 64)] * layers
    return InferencePlan(budget, indptr, costs, in_flight=2, held=held)


def test_a_budget_is_refused_below_the_least_named_and_accepted_from_it():
    least = _plan(1 << 30).least_budget(range(2))
    at = _plan(least)
    at.check(range(2))
    assert all(at.sizes(k).sweeps <= MAX_SWEEPS for k in range(2))
    below = _plan(least - 1)
    with pytest.raises(InputError, match=f"give at least --memory {least:,}"):
        below.check(range(2))
    assert below.sizes(0).sweeps > MAX_SWEEPS or below.block_bytes < at.block_bytes


def test_more_budget_fewer_sweeps_and_the_split_adds_up():
    prev = None
    for mib in (700, 800, 1000, 1500, 3000):
        p = _plan(mib << 20)
        p.check(range(2))
        assert p.pieces + p.finish + p.block_bytes == p.share
        assert p.share == int(((mib << 20) - p.fixed) * 0.9)
        s = p.sizes(0).sweeps
        assert prev is None or s <= prev
        prev = s
    assert prev == 1  # 3G holds the whole graph's block


def test_the_plan_takes_off_the_anonymous_memory_held():
    from ringgnn._options import held_memory, process_rss

    import torch  # noqa: F401  (maps large libraries: resident, not anonymous)

    assert 0 < held_memory() < process_rss()
    p = _plan(1 << 30, held=None)
    assert abs(p.held - held_memory()) < 16 << 20


def test_the_runtime_check_refuses_before_anything_is_loaded(tmp_path):
    from ringgnn._options import CODE_BYTES_NO_TORCH
    from ringgnn.inference.plan import FIXED_BYTES, RUNTIME_BYTES, TORCH_RUNTIME_BYTES, WRITE_BYTES

    least = RUNTIME_BYTES + CODE_BYTES_NO_TORCH + FIXED_BYTES + WRITE_BYTES
    with pytest.raises(InputError, match=f"runtime .* give at least --memory {least:,}"):
        check_runtime(least - 1)
    check_runtime(least)
    with pytest.raises(InputError, match="PyTorch and PyG alone hold about .* give at least --memory"):
        check_runtime(300 << 20, torch=True)
    check_runtime(TORCH_RUNTIME_BYTES + (256 << 20), torch=True)
    check_runtime(None)
    check_runtime(4 << 30)
    code = ("import sys\nfrom ringgnn.cli import main\n"
            f"rc = main(['embed', {str(tmp_path)!r}, '--memory', '64M', '--out', {str(tmp_path / 'e.npy')!r}])\n"
            "print('torch' in sys.modules, rc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["False", "1"], r.stderr
    assert "give at least --memory" in r.stderr and "the runtime (Python, numpy, the core)" in r.stderr
    assert not (tmp_path / "e.npy").exists()


def _split_plan(budget, n=100_000, degree=2, held=400 << 20, window=(4 * 128 + 56)):
    """A graph of few in-edges a node whose layers can also run by source partitions (windows
    of ``share // window`` edges each)."""
    indptr = np.arange(n + 1, dtype=np.int64) * degree
    costs = [LayerCost(4 * 128 + 24, 4 * 128, 4 * (128 + 128 + 6 * 64) + 64, per_window_edge=window)] * 2
    return InferencePlan(budget, indptr, costs, in_flight=2, held=held)


def test_partitions_run_where_the_grid_would_sweep_too_often_and_the_least_is_the_smaller():
    """Between the least budget of the partitions and the grid's, the plan accepts the budget and
    says that the layers run by partitions; under both, it refuses naming the partitions' least;
    with the grid forced (or a layer that cannot be split) it names the grid's."""
    from ringgnn.inference.plan import MAX_PARTS

    probe = _split_plan(1 << 30)
    grid_least = probe.least_budget(range(2), grid_only=True)
    part_least = probe.least_budget(range(2))
    # Worked by hand: 200,000 edges in at most 128 windows of (512 + 56)-byte edges.
    need = -(-200_000 // MAX_PARTS) * (4 * 128 + 56) + probe._least_pieces() + probe._least_finish()
    assert part_least == probe.fixed + int(need / 0.9) + 2
    assert part_least < grid_least
    mid = _split_plan((part_least + grid_least) // 2)
    mid.check(range(2))  # accepted
    assert all(mid.sizes(k).sweeps > MAX_SWEEPS and mid.must_partition(k) for k in range(2))
    assert mid.block_bytes >= mid.least_partition_block(0)
    with pytest.raises(InputError, match=f"give at least --memory {grid_least:,}"):
        mid.check(range(2), grid_only=True)
    at = _split_plan(part_least)
    at.check(range(2))
    below = _split_plan(part_least - 1)
    with pytest.raises(InputError, match=f"more than {MAX_PARTS} windows: give at least --memory {part_least:,}"):
        below.check(range(2))
    # A budget the grid runs within MAX_SWEEPS needs no partitions.
    big = _split_plan(grid_least)
    assert not any(big.must_partition(k) for k in range(2))
    # A layer that cannot be split (the torch aggregation): the grid's least.
    assert _split_plan(1 << 30, window=0).least_budget(range(2)) == grid_least
    assert _split_plan(1 << 30, window=0).least_partition_block(0) is None
