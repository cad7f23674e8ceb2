"""The memory plan of layer-wise inference: from ``--memory``, the sizes of the grid's
blocks, pieces and finishing slices, when a unit runs by source partitions
(:func:`choose_scheme`), and which budgets are refused (docs/INFERENCE.md "Sizes from the budget")."""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _options
from .._core import InputError

#: Bytes a layer file or output is written between syncs (what it may hold in the page cache).
SYNC_BYTES = 16 << 20
#: Written pages not yet on disk: one writer at a time, synced every ``SYNC_BYTES``.
WRITE_BYTES = SYNC_BYTES
#: Bytes the block reader and the gatherer keep besides the block itself (read buffers).
FIXED_BYTES = 48 << 20
#: Library pages a layer touches again and again (``_options.code_bytes()``: less without PyTorch).
CODE_BYTES = _options.CODE_BYTES
#: The part of the rest of the budget left unplanned (allocator slack, small temporaries).
SLACK = 0.1
#: The most bytes of one piece of rows: larger ones do not make the coalesced reads faster.
PIECE_BYTES = 16 << 20
#: The most bytes of the finishing slices in flight together, and of GAT's starting slice.
FINISH_BYTES = 32 << 20
#: The most sweeps of a layer's input a budget may need: beyond, it is refused.
MAX_SWEEPS = 8
#: Bytes an in-edge takes while torch's sorted key is built (the Rust core's:
#: ``_core.aggregate_edge_bytes``).
KEY_PEAK = 16
#: Bytes a block's destination holds besides its accumulator row (the Rust core's bookkeeping).
DEST_BYTES = 28
#: The smallest piece and finishing slice, in rows or edges.
MIN_ROWS = 1024
#: Anonymous memory the command holds before it loads anything, without PyTorch (measured 20 MiB).
RUNTIME_BYTES = 16 << 20
#: The same with PyTorch and PyG imported (measured 435 MiB): a cgroup would kill the import
#: itself before any measured check could refuse the budget.
TORCH_RUNTIME_BYTES = 384 << 20


def check_runtime(budget: Optional[int], torch: bool = False) -> None:
    """Refuse at once a budget the runtime alone would exceed (PyTorch counted where
    ``torch``), naming the least that could run."""
    runtime = TORCH_RUNTIME_BYTES if torch else RUNTIME_BYTES
    least = runtime + (CODE_BYTES if torch else _options.CODE_BYTES_NO_TORCH) + FIXED_BYTES + WRITE_BYTES
    if budget is not None and budget < least:
        who = ("PyTorch and PyG alone hold about" if torch else "the runtime (Python, numpy, the core) holds about")
        raise InputError(
            f"--memory {budget:,} bytes is too small for layer-wise inference: {who} "
            f"{runtime >> 20} MiB once imported, and library code, read buffers and writes need "
            f"{(least - runtime) >> 20} MiB more before any block: give at least --memory {least:,} "
            f"({_mib(least)}); the exact minimum for this graph and model is named once they are loaded")


_LIBC: Optional[ctypes.CDLL] = None


def release_freed() -> None:
    """Give the heap's freed memory back to the system (glibc's ``malloc_trim``): the blocks'
    large buffers, once freed, would otherwise stay resident and counted by a cgroup."""
    global _LIBC
    try:
        if _LIBC is None:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _LIBC.malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim


@dataclass(frozen=True)
class LayerCost:
    """What one unit costs in bytes: per destination, piece unit, finishing row and in-edge."""

    per_node: int
    per_unit: int
    per_finish_row: int
    per_edge: int = KEY_PEAK
    #: Bytes a partitioned window's edge takes; 0: the layer cannot be split by source.
    per_window_edge: int = 0


@dataclass(frozen=True)
class LayerSizes:
    """The grid's sizes of one layer: block bytes, piece units, finishing rows, and its sweeps."""

    block_bytes: int
    piece_units: int
    finish_rows: int
    sweeps: int


def cut(indptr: np.ndarray, per_node: int, share: int, a: int = 0, per_edge: int = KEY_PEAK) -> int:
    """The largest ``b`` with ``(b - a) * per_node + (indptr[b] - indptr[a]) * per_edge``
    within ``share`` (at least ``a + 1``: a hub comes alone)."""
    n = len(indptr) - 1
    lo, hi = a + 1, n
    base = int(indptr[a])
    while lo < hi:
        mid = (lo + hi + 1) // 2
        cost = (mid - a) * per_node + (int(indptr[mid]) - base) * per_edge
        lo, hi = (mid, hi) if cost <= share else (lo, mid - 1)
    return lo


def sweeps(indptr: np.ndarray, per_node: int, share: int, limit: int, per_edge: int = KEY_PEAK) -> int:
    """How many blocks (a hub's windows one each) the greedy cut makes within ``share``; stops past ``limit``."""
    n = len(indptr) - 1
    a, count = 0, 0
    while a < n and count <= limit:
        b = cut(indptr, per_node, share, a, per_edge)
        room = share - (b - a) * per_node
        edges = int(indptr[b]) - int(indptr[a])
        # A block without edges is one sweep even when its nodes fill the share exactly.
        count += 1 if edges == 0 else max(1, -(-edges * per_edge // room)) if room > 0 else limit + 1
        a = b
    return count


def least_block_bytes(indptr: np.ndarray, per_node: int, limit: int = MAX_SWEEPS, per_edge: int = KEY_PEAK) -> int:
    """The smallest block share whose greedy cut makes at most ``limit`` sweeps."""
    n = len(indptr) - 1
    if n == 0:
        return 0
    lo = per_node + per_edge
    hi = max(lo, n * per_node + int(indptr[-1]) * per_edge)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if sweeps(indptr, per_node, mid, limit, per_edge) <= limit else (mid + 1, hi)
    return lo


class InferencePlan:
    """The budget split of one run: ``costs`` a :class:`LayerCost` per unit, ``indptr`` one
    offset index or one per unit; ``in_flight`` pieces and ``finish_in_flight`` slices at once."""

    def __init__(self, budget: Optional[int], indptr: Union[np.ndarray, Sequence[np.ndarray]],
                 costs: Sequence[LayerCost], in_flight: int, held: Optional[int] = None, extra: int = 0,
                 finish_in_flight: int = 1):
        if held is None:
            release_freed()  # what loading freed is not held
        self.held = _options.held_memory() if held is None else int(held)
        #: Taken off the budget first (``extra``: the Rust path's bitmap of a block's sources).
        self.fixed = self.held + _options.code_bytes() + FIXED_BYTES + WRITE_BYTES + int(extra)
        self.budget = (budget if budget is not None
                       else _options.default_memory(cap=1 << 30, held=self.fixed))
        #: The budget is the default one (no ``--memory``): a memory cgroup may bound it.
        self.defaulted = budget is None
        self.costs, self.in_flight = list(costs), max(1, in_flight)
        self.indptrs = [indptr] * len(self.costs) if isinstance(indptr, np.ndarray) else list(indptr)
        self.finish_in_flight = max(1, int(finish_in_flight))
        self._sizes: Dict[int, LayerSizes] = {}
        #: What the budget leaves for blocks, pieces and finishing slices.
        self.share = max(0, int((self.budget - self.fixed) * (1 - SLACK)))
        # Blocks first, within MAX_SWEEPS; pieces and finishing slices their least, then up to their
        # preferred sizes from what is left; the blocks get the rest.
        least_p, least_f = self._least_pieces(), self._least_finish()
        need = max([least_block_bytes(ip, c.per_node, per_edge=c.per_edge)
                    for ip, c in zip(self.indptrs, self.costs)] or [0])
        if self.share < need + least_p + least_f:  # some layer must run by partitions: their need
            need = max([self._least_block(k) for k in range(len(self.costs))] or [0])
        spare = max(0, self.share - need - least_p - least_f)
        pref_p = min(self.in_flight * PIECE_BYTES, self.share // 5)
        pref_f = min(FINISH_BYTES, self.share // 10)
        self.pieces = least_p + min(max(0, pref_p - least_p), spare // 2)
        self.finish = least_f + min(max(0, pref_f - least_f), spare // 4)
        self.block_bytes = self.share - self.pieces - self.finish

    def _least_pieces(self) -> int:
        return max([self.in_flight * MIN_ROWS * c.per_unit for c in self.costs] or [0])

    def _least_finish(self) -> int:
        return max([self.finish_in_flight * MIN_ROWS * c.per_finish_row for c in self.costs] or [0])

    def least_partition_block(self, k: int) -> Optional[int]:
        """The least block share under which unit ``k`` runs by
        source partitions (at most :data:`MAX_PARTS` windows); None: it cannot be split."""
        c = self.costs[k]
        if c.per_window_edge <= 0:
            return None
        edges = int(self.indptrs[k][-1]) if len(self.indptrs[k]) else 0
        return max(c.per_node + c.per_edge, -(-edges // MAX_PARTS) * c.per_window_edge)

    def _least_block(self, k: int, grid_only: bool = False) -> int:
        """The least block share that runs layer ``k`` on the grid or (unless ``grid_only``) partitioned."""
        grid = least_block_bytes(self.indptrs[k], self.costs[k].per_node, per_edge=self.costs[k].per_edge)
        part = None if grid_only else self.least_partition_block(k)
        return grid if part is None else min(grid, part)

    def least_budget(self, layers: Sequence[int], grid_only: bool = False) -> int:
        """The smallest budget under which each of ``layers`` runs on the
        grid within :data:`MAX_SWEEPS` sweeps or (unless ``grid_only``) by source partitions."""
        need = max([self._least_block(k, grid_only) for k in layers] or [0])
        need += self._least_pieces() + self._least_finish()  # as __init__ takes them off
        return self.fixed + int(need / (1 - SLACK)) + 2  # share = (budget - fixed) * (1 - SLACK)

    def must_partition(self, k: int) -> bool:
        """Whether unit ``k`` would sweep its input more than :data:`MAX_SWEEPS` times."""
        return self.sizes(k).sweeps > MAX_SWEEPS

    def check(self, layers: Sequence[int], grid_only: bool = False) -> None:
        """Refuse, naming the smallest budget that runs, a budget under which some
        of ``layers`` runs neither on the grid nor (unless ``grid_only``) by source partitions."""
        least = self.least_budget(layers, grid_only)
        if self.budget < least:
            if self.defaulted:  # a memory cgroup too small: named, with the least limit that runs
                _options.check_default(self.budget, least, held=self.fixed)
            how = "" if grid_only else f", and its source partitions would need more than {MAX_PARTS} windows"
            raise InputError(
                f"--memory {self.budget:,} bytes is too small for layer-wise inference of this graph: the process "
                f"holds {self.held:,} bytes (runtime, model, offset index) and needs "
                f"{self.fixed - self.held:,} for library code, read buffers and writes; its destination blocks "
                f"would then sweep a layer's input more than {MAX_SWEEPS} times{how}: give at least "
                f"--memory {least:,} ({_mib(least)})")

    def sizes(self, k: int) -> LayerSizes:
        """The grid's sizes of layer ``k`` under this budget (counted once)."""
        if k in self._sizes:
            return self._sizes[k]
        c = self.costs[k]
        units = max(MIN_ROWS, self.pieces // self.in_flight // max(1, c.per_unit))
        rows = max(MIN_ROWS, self.finish // self.finish_in_flight // max(1, c.per_finish_row))
        block = max(self.block_bytes, c.per_node + c.per_edge)
        got = self._sizes[k] = LayerSizes(block, units, rows, sweeps(self.indptrs[k], c.per_node, block, 1 << 30,
                                                                     c.per_edge))
        return got

    def describe(self, layers: Sequence[int]) -> dict:
        """The plan as numbers (the command's ``plan`` summary)."""
        return dict(budget=self.budget, held=self.held, fixed=self.fixed, share=self.share,
                    block_bytes=self.block_bytes, piece_bytes=self.pieces, finish_bytes=self.finish,
                    layers=[dict(layer=k + 1, **self.sizes(k).__dict__) for k in layers])


def _mib(n: int) -> str:
    return f"{-(-n // (1 << 20))}M"


# --- the scheme of a layer: the grid or source partitions (issue 24) --------------------------------

#: The most source partitions of the partitioned scheme (its bucket files: two open per partition).
MAX_PARTS = 128
#: Bytes a partitioned window's edge takes: its bucketed destination id, then its source position.
PART_EDGE = 8
#: Bytes a destination a window reaches takes besides its accumulator row.
PART_NODE = 36


def window_edge_bytes(acc_bytes: int) -> int:
    """Bytes a partitioned window's edge takes with its destination's
    ``acc_bytes`` accumulator row (an edge reaches at most one destination)."""
    return acc_bytes + PART_NODE + PART_EDGE


def bucket_edge_bytes(id_bytes: int) -> int:
    """Bytes an edge costs on disk in the partitioned scheme: its source and destination ids
    bucketed (as wide as the neighbor file's), written once and read once."""
    return 4 * id_bytes


@dataclass(frozen=True)
class SchemeChoice:
    """How unit ``k`` aggregates (``grid`` or ``partitioned``), both costs in bytes moved
    (None: not possible, ``why``), and the grid's blocks, sweeps and ``pretransform``."""

    scheme: str
    grid_bytes: int
    partitioned_bytes: Optional[int]
    parts: int
    window_edges: int
    why: str
    sweeps: int = 0
    blocks: Tuple[Tuple[int, int], ...] = ()
    pretransform: bool = False

    def text(self) -> str:
        other = "partitioned" if self.scheme == "grid" else "grid"
        cost = self.partitioned_bytes if other == "partitioned" else self.grid_bytes
        mine = self.grid_bytes if self.scheme == "grid" else self.partitioned_bytes
        alt = f"{other} would move {_mb(cost)}" if cost is not None else f"{other}: {self.why}"
        parts = f", {self.parts} source partitions" if self.scheme == "partitioned" else ""
        if self.scheme == "grid" and self.blocks:
            parts = (f", {len(self.blocks)} block{'s' * (len(self.blocks) != 1)}, {self.sweeps} "
                     f"sweep{'s' * (self.sweeps != 1)}" + (", W x computed once" if self.pretransform else ""))
        return f"{self.scheme} ({_mb(mine)} read+written{parts}); {alt}"


def _mb(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / 1e6:,.0f} MB"


def reached(degree_counts: np.ndarray, fraction: float) -> float:
    """Expected destinations with an in-edge from a source partition holding ``fraction``
    of the nodes, sources spread at random: ``sum_v 1 - (1 - fraction) ** deg(v)``."""
    d = np.arange(len(degree_counts), dtype=np.float64)
    return float(np.sum(degree_counts * (1.0 - (1.0 - fraction) ** d)))


def choose_scheme(indptr: np.ndarray, *, sweeps: int, share: int, input_bytes: int, acc_bytes: int,
                  id_bytes: int, splits: bool, force: Optional[str] = None, parts: Optional[int] = None,
                  degree_counts: Optional[np.ndarray] = None, extra_bytes: int = 0, once_bytes: int = 0,
                  sweep_bytes: Optional[int] = None) -> SchemeChoice:
    """The scheme of one unit that reads and writes fewer bytes (ties: the grid).

    - grid: the input once per destination block (or ``once_bytes`` and ``sweep_bytes`` per block
      where it sweeps ``W x`` rows), plus the neighbor file;
    - partitioned: the input and neighbor file once, every edge bucketed
      (:func:`bucket_edge_bytes`), every window's partials written and read back, ``extra_bytes``;
      windows of at most ``share // window_edge_bytes(acc_bytes)`` edges, at most
      :data:`MAX_PARTS` partitions.

    ``splits``: whether the fold can be split by source. ``force`` and ``parts`` override."""
    edges = int(indptr[-1]) if len(indptr) else 0
    grid = once_bytes + sweeps * (input_bytes if sweep_bytes is None else sweep_bytes) + edges * id_bytes
    window = max(1, share // window_edge_bytes(acc_bytes))
    why = ""
    if not splits:
        why = "not for this aggregation (only the Rust folds are split by source)"
    elif edges == 0:
        why = "no edges"
    p = parts if parts is not None else min(MAX_PARTS, max(1, -(-edges // window)))
    if why == "" and parts is None and -(-edges // window) > MAX_PARTS:
        why = f"more than {MAX_PARTS} partitions"
    if why:
        if force == "partitioned":
            raise InputError(f"the partitioned scheme cannot run this layer: {why}")
        return SchemeChoice("grid", grid, None, 0, window, why, sweeps)
    if degree_counts is None:
        degree_counts = np.bincount(np.diff(indptr))
    spilled = p * reached(degree_counts, 1.0 / p)
    windows_per_part = max(1, -(-edges // (p * window)))
    part = (windows_per_part * input_bytes + edges * (id_bytes + bucket_edge_bytes(id_bytes))
            + int(2 * spilled * (acc_bytes + 8)) + int(extra_bytes))
    scheme = force or ("partitioned" if part < grid else "grid")
    return SchemeChoice(scheme, grid, part, p, window, "", sweeps)
