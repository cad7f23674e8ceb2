"""The layer-wise inference engine of homogeneous runs (:class:`LayerwiseInference`): every
node's output of each layer of a trained model, exact (full neighborhoods, no sampling), with
features and each layer's outputs on disk; ``ringgnn.inference.run`` is its API.

Each layer is computed on a **grid** (the default; ``docs/INFERENCE.md``): destination blocks
as large as the budget allows (``infer_plan``) hold their aggregates; each block's in-edges are
read sequentially from the neighbor file and folded in by the Rust core (``infer_graph``), a
piece of distinct sources at a time, their rows gathered with the project's coalesced page reads
in file order; the layer's own weights turn the aggregates into outputs (``infer_finish``),
which are appended to the next layer's file (``infer_rows``). A layer may instead run by source
partitions (``infer_partition``) where that reads and writes fewer bytes. The other strategy,
``blocks`` (``infer_blocks``), and the torch folds (``infer_torch``) are the second
implementations the tests hold to the same answers.

Semantics are those of a full-batch PyG forward over the whole graph in eval mode
(``net(x, edge_index)`` with ``edge_index`` every edge of the CSC): GraphSAGE averages over all
in-edges as stored (self loops and duplicates included); GCN and GAT drop stored self loops and
add one per node, as PyG's ``gcn_norm`` and ``GATConv`` do, and GCN normalises with
``1 / sqrt(deg(u) deg(v))`` over in-degrees counted that way. The intermediate files are deleted
at the end (``keep=True`` keeps them, renamed ``layer1.f32`` ...).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .. import _core, _options, _threads
from .._core import InputError
from .._files import keep_files, temporary
from ..data.dataset import Dataset
from ..models import dense as infer_dense
from ..models.checkpoints import Checkpoint
from ..progress import bar
from . import finish as infer_finish
from .blocks import BlocksStrategy
from .finish import LayerStep, finish_block, map_slices, slice_reader, split_rows
from .graph import NeighborFile, blocks, fold_windows
from .partition import partitioned_layer
from .plan import (DEST_BYTES, KEY_PEAK, InferencePlan, LayerCost, SchemeChoice, choose_scheme, cut, release_freed,
                   window_edge_bytes)
from .rows import PAGE, RowFileWriter, _layout
from .torch_folds import TorchFolds

MAX_BLOCK_EDGES = 1 << 22
#: The most rows finished at a time at the end of a destination block (the plan may take fewer:
#: ``infer_plan.FINISH_BYTES``). Sizes, the budget's split and its refusal are ``infer_plan``'s.
FINISH_ROWS = 1 << 16
#: How a layer is computed: ``grid`` (default) or ``blocks`` (see the module's docstring).
STRATEGIES = ("grid", "blocks")
#: Where the grid folds a block's in-neighbors' rows into its aggregates (sums, GCN's weighted
#: sums, maxima, GAT's online softmax): ``rust`` (default: ``FeatureReader.aggregate``, the Rust
#: core, on all threads; the layer's weights applied to each piece by torch through a callback)
#: or ``python`` (torch's ``index_add_``, the path before issue 24), also chosen by the
#: environment variable ``RINGGNN_INFER_AGGREGATE`` (benchmarks switch it).
AGGREGATORS = ("rust", "python")
AGGREGATE_ENV = "RINGGNN_INFER_AGGREGATE"
#: How the grid strategy aggregates a layer: ``auto`` (default: whichever of the two reads and
#: writes fewer bytes, ``infer_plan.choose_scheme``), ``grid`` (destination blocks) or
#: ``partitioned`` (source partitions, ``infer_partition``; the Rust folds only); also the environment
#: variable ``RINGGNN_INFER_SCHEME`` (benchmarks switch it).
SCHEMES = ("auto", "grid", "partitioned")
SCHEME_ENV = "RINGGNN_INFER_SCHEME"



class LayerwiseInference(BlocksStrategy, TorchFolds):
    """Every node's output of each layer of ``ckpt``'s model on ``ds``, layer by layer, within
    ``memory`` bytes; :meth:`run` hands the rows of the layer asked for to a callback."""

    def __init__(self, ds: Dataset, ckpt: Checkpoint, *, memory: Optional[int] = None, backend: str = "auto",
                 direct: bool = False, work_dir: Optional[str] = None, keep: bool = False, quiet: bool = False,
                 log: Callable[[str], None] = lambda s: None, block_edges: Optional[int] = None,
                 strategy: str = "grid", grid_nodes: Optional[int] = None, overlap: bool = True,
                 aggregate: Optional[str] = None, hidden_dtype: Optional[str] = None, device: Optional[str] = None,
                 scheme: Optional[str] = None, parts: Optional[int] = None):
        self.strategy = _options.choice(strategy, STRATEGIES, "strategy")
        #: Where the dense parts run (``--device``); blocks stay in host memory (see :meth:`_up`).
        self.device_name = _options.inference_device(device)
        #: How the hidden layers' rows are stored between layers (``--hidden-dtype``).
        self.hidden_dtype = _options.hidden_dtype(hidden_dtype)
        #: ``auto``, ``grid`` or ``partitioned`` (see ``SCHEMES``); ``parts`` forces the number
        #: of source partitions (tests).
        self.scheme = _options.choice(scheme or os.environ.get(SCHEME_ENV) or "auto", SCHEMES,
                                      f"scheme ({SCHEME_ENV})")
        self.parts = None if parts is None else max(1, int(parts))
        if aggregate is None:
            aggregate = os.environ.get(AGGREGATE_ENV) or "rust"
        aggregate = _options.choice(aggregate, AGGREGATORS, f"aggregate ({AGGREGATE_ENV})")
        #: ``rust``: the Rust core folds the in-neighbors' rows in (every model of ``MODELS``).
        self.aggregate = aggregate
        #: Read the next piece's rows while the current one is folded in (the grid).
        self.overlap = bool(overlap)
        self.ds, self.ckpt = ds, ckpt
        if self.device_name != "cpu":
            if self.strategy != "grid" or self.aggregate != "rust":
                raise InputError(f"--device {self.device_name}: runs the grid with the Rust folds (the default); "
                                 f"not strategy={self.strategy!r}, aggregate={self.aggregate!r}")
        #: The arrays of the dense parts (numpy on the CPU: no PyTorch; torch's on a GPU) and the
        #: model's weights on them (``ringgnn.models.dense``).
        self.xp = infer_dense.backend(self.device_name)
        self.dense = ckpt.dense(None if self.device_name == "cpu" else self.xp)
        self.backend, self.direct = _options.backend(backend), bool(direct)
        self.quiet, self.log, self.keep = quiet, log, keep
        self.work_dir = work_dir or os.path.dirname(os.path.abspath(ckpt.path))
        self.graph = NeighborFile(ds)
        self.stats: Dict[str, Any] = dict(layers=[], bytes_read_neighbors=0, bytes_read_rows=0, bytes_written=0)
        self._phases: Dict[str, float] = {}  # the current layer's (see :meth:`compute`)
        # GCN's normalisation: in-degree without stored self loops, plus the one added.
        self.dinv = self._gcn_dinv() if ckpt.kind == "gcn" else None
        widths = self.dense.widths
        self.widths = widths
        self.grid_nodes = grid_nodes
        # The budget's split and its refusal: infer_plan's (one owner). What the process holds
        # now (runtime, model, offset index, GCN's degrees) is measured there.
        costs = [self._layer_cost(k) for k in range(len(self.dense.layers))]
        #: Threads computing a block's finishing slices (``infer_finish``: with ``overlap``, the
        #: next slice's rows read ahead meanwhile).
        self.finish_workers = infer_finish.workers(self.device_name)
        self.memplan = InferencePlan(memory, self.graph.indptr, costs, in_flight=2 if self.overlap else 1,
                                     extra=self.graph.num_nodes // 4 + 16 if self.aggregate == "rust" else 0,
                                     finish_in_flight=infer_finish.slices_in_flight(self.finish_workers, self.overlap))
        budget, fixed, share = self.memplan.budget, self.memplan.fixed, self.memplan.share
        width = max(widths)
        per_edge = 8 * 4 + 4 * width * 3  # ids, local ids and edge_index; gathered rows and messages
        per_node = 4 * width * 4 + 64
        if block_edges is None:
            # The grid's budgets are refused by its plan (run, infer_plan); this is the blocks'.
            if self.strategy == "blocks" and share < 1024 * (per_edge + per_node):
                raise InputError(f"--memory {budget:,} bytes: the process already holds {fixed:,} (runtime, model, "
                                 f"offset index, read buffers); give at least {fixed + 1024 * (per_edge + per_node):,}")
            block_edges = int(min(MAX_BLOCK_EDGES, max(1, share // (per_edge + per_node))))
        self.block_edges = max(1, int(block_edges))
        self.block_nodes = max(1, int(share // per_node)) if share > per_node else self.block_edges
        #: Whether the grid's sizes come from the budget (else ``grid_nodes`` and
        #: ``block_edges`` were given: tests).
        self.planned = grid_nodes is None
        self.plan = dict(budget=budget, fixed=fixed, held=self.memplan.held, strategy=self.strategy,
                         hidden_dtype=self.hidden_dtype, device=self.device_name,
                         overlap=self.overlap, aggregate=self.aggregate, block_edges=self.block_edges,
                         block_nodes=self.block_nodes)

    @property
    def net(self) -> Any:
        """The PyG model (PyTorch and PyG imported): only ``strategy="blocks"`` and
        ``aggregate="python"`` use it; the grid's dense parts are :attr:`dense`."""
        return self.ckpt.module()

    # -- pieces ---------------------------------------------------------------------------------

    def _gcn_dinv(self) -> np.ndarray:
        g = self.graph
        deg = np.diff(g.indptr).astype(np.float64)
        # A million edges at a time (about 30 MB of temporaries): this runs before the plan's
        # check, on what the budget leaves besides the held memory.
        for blk in blocks(g.indptr, 1 << 20, 1 << 30):
            ids = g.edges(blk.lo, blk.hi)
            dst = self._dst_of(blk)
            selfs = np.bincount(dst[ids == dst] - blk.a, minlength=blk.b - blk.a) if len(ids) else 0
            deg[blk.a:blk.b] -= selfs
        self.stats["bytes_read_neighbors"] += g.bytes_read
        g.bytes_read = 0
        return (1.0 / np.sqrt(deg + 1.0)).astype(np.float32)

    def _after(self, k: int, out: Any) -> Any:
        """What BasicGNN applies between layers (eval mode: activation and norm; no dropout), on
        the dense parts' arrays."""
        return self.dense.after(k, out)

    def _bar(self, k: int) -> Any:
        """The progress bar of layer ``k`` (nodes done)."""
        return bar(self.graph.num_nodes, f"layer {k + 1}/{len(self.dense.layers)}", "node", disable=self.quiet,
                   leave=False, unit_scale=True)

    def compute(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                wanted: Optional[np.ndarray] = None, activate: bool = True) -> None:
        """Layer ``k`` with the chosen strategy (see :meth:`layer` and :meth:`grid_layer`), and
        its counters in ``stats``."""
        g = self.graph
        t0, cpu0 = time.perf_counter(), time.process_time()
        rows_before = reader.stats()["bytes_read"]
        self._phases: Dict[str, float] = {}
        extra: Dict[str, Any] = {}
        if self.strategy == "grid":
            choice = self.choose(k, wanted)
            extra = dict(scheme=choice.scheme, plan=choice.text())
            if choice.scheme == "partitioned":
                share, piece_rows, finish_rows = self._part_sizes(k)
                extra.update(partitioned_layer(self.step(k), reader, writer, wanted, activate, choice.parts,
                                               choice.window_edges, share, piece_rows, finish_rows))
            else:
                extra.update(self.grid_layer(k, reader, writer, wanted, activate, choice))
        else:
            self.layer(k, reader, writer, wanted, activate)
        rows = reader.stats()["bytes_read"] - rows_before
        # ``phases``: seconds of the grid's parts (``start``: GAT's destination logits and self
        # loops; the Rust aggregation's own phases, see FeatureReader.aggregate; ``finish``).
        self.stats["layers"].append(dict(layer=k + 1, seconds=time.perf_counter() - t0,
                                         cpu_seconds=time.process_time() - cpu0, neighbor_bytes=g.bytes_read,
                                         row_bytes=rows, phases={p: round(v, 3) for p, v in self._phases.items()},
                                         **extra))
        self.stats["bytes_read_neighbors"] += g.bytes_read
        self.stats["bytes_read_rows"] += rows
        g.bytes_read = 0

    # -- the grid --------------------------------------------------------------------------------

    def _splits(self, k: int) -> bool:
        """Whether layer ``k``'s aggregation can be split by source partitions: every Rust fold
        (sums, GCN, maxima, GAT's online softmax: their partials merge exactly), not torch's."""
        return self.aggregate == "rust"

    def _part_acc_bytes(self, k: int) -> int:
        """Bytes of a partial aggregate's row in the partitioned scheme: the fold's accumulator
        row (GAT's: messages, running maxima, sums of exponentials, and the destination logits
        gathered for a window's destinations)."""
        layer = self.dense.layers[k]
        if self.ckpt.kind == "gat":
            return 4 * (layer.heads * layer.channels + 3 * layer.heads)
        return 4 * self._acc_width(k)

    def _part_sizes(self, k: int) -> Tuple[int, int, int]:
        """(share of a window or merge block in bytes, rows of a piece, rows of a finishing
        slice) of layer ``k`` in the partitioned scheme: the grid's block share and pieces."""
        block, piece_rows, finish_rows = self._sizes(k)
        if not self.planned:  # sizes given (tests): windows and merge blocks of grid_nodes
            block = self.grid_nodes * (4 * self._acc_width(k) + 64)
        return block, piece_rows, finish_rows

    def choose(self, k: int, wanted: Optional[np.ndarray] = None) -> SchemeChoice:
        """Layer ``k``'s scheme (``infer_plan.choose_scheme``): the grid's sweeps under the plan
        against the source partitions' bytes. Layers computed for some nodes only (``wanted``)
        stay on the grid, which skips the blocks without them. The grid's blocks, sweeps and
        ``W x`` once are those it will run (:meth:`_grid_run`, for ``wanted``), which
        :meth:`grid_layer` then runs as chosen."""
        g = self.graph
        force = None if self.scheme == "auto" else self.scheme
        # Layer 1 reads the feature file (taken as float32 rows), later ones the hidden layers'
        # files as stored (``hidden_dtype``: 2 bytes a value for bf16/f16).
        row, per_page = _layout(self.widths[k], 4 if k == 0 or self.hidden_dtype == "f32" else 2)
        input_bytes = g.num_nodes * row if per_page == 0 else -(-g.num_nodes // per_page) * PAGE
        block = self._part_sizes(k)[0]
        if self.planned and force != "grid" and self.memplan.must_partition(k):
            force = "partitioned"  # the grid would sweep more than MAX_SWEEPS times (the plan's check)
        if force == "partitioned":  # no grid to run: its cost for the comparison only, by the plan
            blocks: Tuple[Tuple[int, int], ...] = ()
            sweeps = (self.memplan.sizes(k).sweeps if self.planned
                      else -(-g.num_nodes // max(1, self.grid_nodes)))
            pretransform = False
        else:
            blocks, sweeps, pretransform = self._grid_run(k, wanted)
        splits = self._splits(k) and (wanted is None or force == "partitioned")
        extra = 0
        if self.ckpt.kind == "gat":  # its destination logits: a pass over the input, a file of them
            extra = input_bytes + 2 * 4 * self.dense.layers[k].heads * g.num_nodes
        once, sweep = 0, None
        if pretransform:  # the input once, its W x rows written, then swept
            wrow, wper = _layout(self._acc_width(k))
            sweep = -(-g.num_nodes // wper) * PAGE if wper else g.num_nodes * wrow
            once = input_bytes + sweep
        c = choose_scheme(g.indptr, sweeps=sweeps, share=block, input_bytes=input_bytes,
                          acc_bytes=self._part_acc_bytes(k), id_bytes=np.dtype(g.dtype).itemsize,
                          splits=splits, force=force, parts=self.parts, extra_bytes=extra,
                          once_bytes=once, sweep_bytes=sweep)
        return replace(c, blocks=blocks, pretransform=pretransform)

    def _grid_run(self, k: int, wanted: Optional[np.ndarray]) -> Tuple[Tuple[Tuple[int, int], ...], int, bool]:
        """(the destination blocks the grid runs for ``wanted`` nodes, their sweeps of the input,
        whether they sum the layer's ``W x`` rows computed once): decided here only, from the
        blocks that will run (:meth:`choose` costs them, :meth:`grid_layer` runs them). Planned,
        a block sweeps once per window (as ``infer_plan.sweeps`` counts them); with sizes given
        (tests), once per block."""
        blocks = tuple(self._grid_blocks(k, wanted))
        sweeps = sum(len(range(*self._window_span(k, a, b))) if self.planned else 1 for a, b in blocks)
        return blocks, sweeps, self._pretransforms(k, len(blocks))

    def _layer_cost(self, k: int) -> LayerCost:
        """What layer ``k`` costs on the grid (``infer_plan`` sizes the blocks from it): bytes
        per destination node (accumulators; ``DEST_BYTES`` of bookkeeping: the Rust core's offsets,
        cursors and next positions), per piece unit (a distinct source row as the Rust core holds it, or an edge of
        torch's piece: its row, message and indices), per row of a finishing slice (its input
        row, the aggregate's slice and the layer's temporaries, the writer's copies)."""
        layer, d_in, d_out = self.dense.layers[k], self.widths[k], self.widths[k + 1]
        rust = self.aggregate == "rust"
        if self.ckpt.kind == "gat":
            hc = layer.heads * layer.channels
            acc = hc + 3 * layer.heads  # messages, running max, running sum, and a_dst
            # Rust: a distinct source's id, row and its messages and logits (twice: the product's
            # and the transform's output); torch: an edge's row, message, logits and indices.
            piece = 8 + 4 * (d_in + 2 * (hc + layer.heads)) if rust else 4 * (d_in + 2 * hc + 4 * layer.heads) + 48
            finish = 4 * (d_in + 6 * hc + 8 * layer.heads + 4 * d_out) + 64
        else:
            acc = self._acc_width(k)
            if rust:  # a distinct source's id and row, and its W x where the layer narrows (twice)
                piece = 8 + 4 * (d_in + (2 * acc if self._narrow(k) else 0))
            else:
                piece = 4 * (2 * d_in + acc) + 48
            finish = 4 * (d_in + acc + 6 * d_out) + 64
        # A block's own input rows are read a slice at a time when it is finished (GAT's when it
        # starts, its self loops folded in then), so they cost nothing per node. An in-edge: the
        # Rust core's source position (4 bytes where ids fit in 32 bits; the distinct sources are
        # a bitmap's bits, the plan's ``extra``), or torch's sorted key at its peak.
        per_edge = _core.aggregate_edge_bytes(self.graph.num_nodes) if rust else KEY_PEAK
        window = window_edge_bytes(self._part_acc_bytes(k)) if self._splits(k) else 0
        return LayerCost(4 * acc + DEST_BYTES, piece, finish, per_edge, window)

    def _sizes(self, k: int) -> Tuple[int, int, int]:
        """(bytes of a destination block, units of a piece, rows of a finishing slice) of layer
        ``k``: the plan's, or, with ``grid_nodes`` given (tests), pieces of ``block_edges``."""
        if not self.planned:
            return 0, self.block_edges, FINISH_ROWS
        sz = self.memplan.sizes(k)
        return sz.block_bytes, sz.piece_units, min(FINISH_ROWS, sz.finish_rows)

    def _narrow(self, k: int) -> bool:
        """Whether GraphSAGE/GCN layer ``k`` aggregates its sources after their weights: when its
        output is narrower than its input, the sum of ``W x`` is the smaller aggregate (the
        weights are linear, so the result is the same; a maximum is not linear, so not for
        ``aggr="max"``)."""
        return (self.ckpt.kind in ("sage", "gcn") and self._aggr(k) != "max"
                and self.widths[k + 1] < self.widths[k])

    def _aggr(self, k: int) -> str:
        """Layer ``k``'s neighbor aggregation: ``mean`` or ``max`` for GraphSAGE (ringgnn's
        models use ``mean``; a ``SAGEConv(aggr="max")`` of another model runs too), else ``sum``
        (GCN) or ``softmax`` (GAT)."""
        kind = self.ckpt.kind
        if kind != "sage":
            return "sum" if kind == "gcn" else "softmax"
        aggr = self.dense.layers[k].aggr
        if aggr not in ("mean", "max"):
            raise InputError(f"{self.ckpt.path}: SAGEConv with projection or aggregation "
                             f"{aggr} is not supported by the grid (mean and max are); use strategy='blocks'")
        return aggr

    def _acc_width(self, k: int) -> int:
        return self.widths[k + 1] if self._narrow(k) else self.widths[k]

    def _grid_blocks(self, k: int, wanted: Optional[np.ndarray]) -> Iterator[Tuple[int, int]]:
        """Destination blocks ``a..b``: accumulators, rows and sorted edge keys within the grid's
        share (a node whose edges alone exceed it comes alone; its edges go in windows)."""
        indptr, n = self.graph.indptr, self.graph.num_nodes
        cost, share = self._layer_cost(k), self._sizes(k)[0]
        a = 0
        while a < n:
            b = min(n, a + self.grid_nodes) if not self.planned else cut(indptr, cost.per_node, share, a, cost.per_edge)
            if wanted is None or wanted[a:b].any():
                yield a, b
            a = b

    def _windows(self, k: int, a: int, b: int) -> Iterator[Tuple[int, int]]:
        """Edge ranges of block ``a..b`` whose edges (the layer's ``per_edge`` bytes each) fit what the block's
        nodes leave of the share: one range, but for hubs."""
        lo, hi, step = self._window_span(k, a, b)
        for s0 in range(lo, hi, step):
            yield s0, min(int(self.graph.indptr[b]), s0 + step)

    def _window_span(self, k: int, a: int, b: int) -> Tuple[int, int, int]:
        """(first edge, end, step) of block ``a..b``'s windows (:meth:`_windows`): a block
        without edges is one window (:meth:`choose` counts them as sweeps)."""
        lo, hi = int(self.graph.indptr[a]), int(self.graph.indptr[b])
        if not self.planned:  # sizes given (tests): windows of 4 pieces
            step = 4 * self.block_edges
        else:
            cost = self._layer_cost(k)
            step = max(1024, (self._sizes(k)[0] - (b - a) * cost.per_node) // cost.per_edge)
        return lo, max(hi, lo + 1), step

    def grid_layer(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                   wanted: Optional[np.ndarray] = None, activate: bool = True,
                   choice: Optional[SchemeChoice] = None) -> Dict[str, int]:
        """Layer ``k`` on the grid: for each destination block, its in-edges sorted by source,
        swept in pieces in file order (each piece's source rows gathered once, so a block reads
        the input file at most once, in order), aggregated into the block's accumulators; then
        the layer's own weights turn the aggregates into outputs. Where the layer narrows and
        several blocks sweep its input, the blocks sweep its ``W x`` rows instead, computed once
        (:meth:`_pretransform`). ``choice``: the grid's blocks and that decision, as
        :meth:`choose` made them (default: made now for ``wanted``). Returns the bytes written to
        and read from that temporary file (``temp_written``, ``temp_read``)."""
        _, piece_edges, finish_rows = self._sizes(k)
        if choice is None or choice.scheme != "grid":
            blocks, sweeps, pretransform = self._grid_run(k, wanted)
        else:
            blocks, pretransform = choice.blocks, choice.pretransform
        grid = list(blocks)
        io = dict(temp_written=0, temp_read=0)
        scratch = wx = None
        if pretransform:
            scratch = temporary(self.work_dir, f"ringgnn-infer-wx{k + 1}", directory=True)
        try:
            if scratch is not None:
                t = time.perf_counter()
                wx = self._pretransform(k, reader, os.path.join(scratch.path, f"layer{k + 1}.wx.f32"))
                io["temp_written"] = os.path.getsize(wx[1])
                self._phase("pretransform", t)
                if self.planned:  # the pieces' planned bytes hold more of the narrower rows, unwidened
                    piece_edges = piece_edges * self._layer_cost(k).per_unit // (8 + 4 * self._acc_width(k))
            self._grid_sweep(k, reader, writer, grid, wx[0] if wx else None, piece_edges, finish_rows, activate)
            if wx is not None:
                io["temp_read"] = wx[0].stats()["bytes_read"]
        finally:
            del wx  # the reader of the temporary file, before it is removed
            if scratch is not None:
                scratch.close()
        return io

    def _pretransforms(self, k: int, blocks: int) -> bool:
        """Whether layer ``k``'s blocks sweep its ``W x`` rows, computed once, rather than its
        input rows, each block applying ``W`` to every source again: where the Rust core sums a
        narrowing layer (GraphSAGE's mean, GCN) in more than one block. The rows, float32 and
        narrower than the input, are the same values the blocks would compute (``W x`` of each
        row, no bias), so the results are those of the per-piece transform; ``blocks - 1``
        products over the sources are saved, each sweep reads fewer bytes (:meth:`choose` counts
        them the same way), and the narrower pieces are fewer, with no callback into Python for
        each. With one block it would save no product and move the file's bytes on top (measured
        on the 1M-node graph after one BLAS thread: 2.8-2.9 CPU seconds against 2.8-3.5, 0.5 GB
        more; ``docs/benchmarks.md``), so it is not done there."""
        return self.aggregate == "rust" and self._narrow(k) and blocks > 1

    def _pretransform(self, k: int, reader: Any, path: str) -> Tuple[Any, str]:
        """Every node's ``W x`` (layer ``k``'s weight on its input rows, no bias) to ``path``,
        float32 rows in the feature-file layout, read in order a finishing slice at a time;
        returns a reader of it and the path."""
        n, width, rows = self.graph.num_nodes, self.widths[k + 1], self._sizes(k)[2]
        transform = self.dense.transform(k)  # the very product the pieces would get
        w = RowFileWriter(path, width, "f32")
        try:
            # Read ahead and computed on all cores, written in order (``infer_finish``).
            map_slices(range(0, n, rows), slice_reader(reader, n, rows),
                       lambda r0, x: transform(x), lambda r0, out: w.append(out), self.finish_workers, self.overlap)
            w.finish()
        except BaseException:
            w.abort()
            raise
        return _core.FeatureReader.matrix(path, n, width, backend=self.backend, direct=self.direct,
                                          dtype="f32"), path

    def _grid_sweep(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                    grid: List[Tuple[int, int]], wx: Any, piece_edges: int, finish_rows: int,
                    activate: bool) -> None:
        """The blocks of :meth:`grid_layer`; ``wx``: a reader of the layer's ``W x`` rows, which
        the blocks then sum (None: its input rows, transformed piece by piece)."""
        with self._bar(k) as bar:
            for a, b in grid:
                t = time.perf_counter()
                state = self._grid_start(k, a, b, reader)
                self._phase("start", t)
                if self.aggregate == "rust":
                    self._rust_add(k, state, a, b, reader if wx is None else wx, piece_edges,
                                   transformed=wx is not None)
                for lo, hi in ([] if self.aggregate == "rust" else self._windows(k, a, b)):
                    keys, n_d = self._sorted_keys(a, b, lo, hi)

                    def prepare(p0: int, keys=keys, n_d=n_d) -> Tuple[Any, ...]:
                        import torch

                        piece = keys[p0:p0 + piece_edges]
                        src = (piece // np.uint64(n_d)).view(np.int64)  # ids < 2**63: the same bits
                        dl = (piece % np.uint64(n_d)).view(np.int64)
                        starts = np.flatnonzero(np.diff(src, prepend=-1))
                        u = src[starts]
                        inv = np.repeat(np.arange(len(u)), np.diff(np.append(starts, len(src))))
                        rows = torch.from_numpy(reader.gather(u))  # the GIL is released while it reads
                        return torch.from_numpy(u), rows, torch.from_numpy(inv), torch.from_numpy(dl)

                    for u, rows, inv, dl in self._pieces(prepare, range(0, len(keys), piece_edges)):
                        self._grid_add(k, state, a, u, rows, inv, dl)
                        del u, rows, inv, dl
                # The outputs a slice of rows at a time (the finishing arithmetic's temporaries
                # stay small next to the block's state), read ahead and computed on all cores
                # (``infer_finish``). GAT's self loops are in the state already: no rows read.
                t = time.perf_counter()
                finish_block(self.step(k), a, b, reader, writer, finish_rows, activate,
                             lambda r0, r1, _x, state=state, a=a: {key: self._up(v[r0 - a:r1 - a])
                                                                   for key, v in state.items()},
                             read_rows=self.ckpt.kind != "gat")
                del state
                release_freed()  # the block's buffers, freed, would stay resident otherwise
                self._phase("finish", t)
                bar.update(b - a)

    def _rust_add(self, k: int, st: Dict[str, Any], a: int, b: int, reader: Any, piece_rows: int,
                  transformed: bool = False) -> None:
        """Block ``a..b``'s aggregates by the Rust core (``FeatureReader.aggregate``: the
        neighbor lists read, the distinct sources read in file order ``piece_rows`` at a time with
        the next piece read ahead, folded in on all threads, the GIL released but while the
        layer's weight is applied to a piece), a window of in-edges at a time (one but for hubs).
        The folds are those of :meth:`_grid_add`: sums of the rows (or of ``W x`` where the layer
        narrows), GCN's weighted sums, maxima, GAT's online softmax over ``lin(x)``."""
        kw = self.fold_args(k, transformed)
        if kw["fold"] == "softmax":
            kw["a_dst"] = st["a_dst"]
        # A piece's product on all cores (the Rust core waits for it; ``infer_finish.split_rows``).
        with split_rows(kw.get("transform"), self.finish_workers if "transform" in kw else 1) as fn:
            if fn is not None:
                kw["transform"] = fn
            fold_windows(reader, self.graph, st["acc"], a, b, self._windows(k, a, b), piece_rows, self._phases, **kw)

    def fold_args(self, k: int, transformed: bool = False) -> Dict[str, Any]:
        """Layer ``k``'s fold as the Rust core takes it (``FeatureReader.aggregate`` and
        ``partials``): ``fold`` (``sum`` for GraphSAGE's mean, ``gcn``, ``max``, ``softmax``),
        GCN's ``dinv``; where a GraphSAGE or GCN layer narrows, ``W x`` of each piece (unless
        ``transformed``: the rows are ``W x`` already); for GAT, ``lin(x)`` and the source logits
        of each piece (its destination logits are the caller's)."""
        layer, aggr = self.dense.layers[k], self._aggr(k)
        kw: Dict[str, Any] = dict(fold={"mean": "sum", "sum": "gcn"}.get(aggr, aggr))
        if aggr == "sum":  # GCN's
            kw["dinv"] = self.dinv
        if self._narrow(k) and not transformed:
            kw.update(width=self.widths[k + 1], transform=self.dense.transform(k))
        elif aggr == "softmax":
            kw.update(width=layer.heads * layer.channels + layer.heads, transform=self.dense.messages(k),
                      negative_slope=float(layer.slope))
        return kw

    def step(self, k: int) -> LayerStep:
        """Layer ``k`` as finishing a block and the source partitions take it
        (``infer_finish.LayerStep``); its phases are the layer's (:meth:`compute`)."""
        layer = self.dense.layers[k]
        acc = layer.heads * layer.channels + 2 * layer.heads if self.ckpt.kind == "gat" else self._acc_width(k)
        return LayerStep(k, self.ckpt.kind, self.dense, self.graph, self.work_dir, acc, self.fold_args(k),
                         lambda st, a, b, x: self._grid_finish(k, st, a, b, x), lambda out: self._after(k, out),
                         self._up, self._down, self.finish_workers, self.overlap, self._phases)

    def _phase(self, name: str, since: float) -> None:
        """Count the seconds since ``since`` to phase ``name`` of the layer (``stats``)."""
        self._phases[name] = self._phases.get(name, 0.0) + time.perf_counter() - since

    def _grid_start(self, k: int, a: int, b: int, reader: Any) -> Dict[str, Any]:
        """The accumulators of destinations ``a..b``. For GAT also their destination logits,
        from their rows read a slice at a time, and the self loop each node gets, folded in
        first (a softmax does not depend on the order of its terms: the loop's logit starts the
        running maximum, with weight 1), so that finishing the block needs neither its rows
        again nor their transform."""
        layer, n = self.dense.layers[k], b - a
        if self.ckpt.kind == "gat":
            H, C = layer.heads, layer.channels
            # The Rust fold's accumulator rows: weighted sums, running maxima, sums of exponentials
            # (``ringgnn_features::fold``; the torch fold uses the same layout); the state's arrays
            # are views of it.
            acc = np.empty((n, H * C + 2 * H), dtype=np.float32)
            st = dict(acc=acc, msg=acc[:, :H * C], m=acc[:, H * C:H * C + H], z=acc[:, H * C + H:],
                      a_dst=np.empty((n, H), dtype=np.float32))
            rows = self._sizes(k)[2]

            def start(r0: int, x: np.ndarray) -> Tuple[np.ndarray, ...]:
                return tuple(self._down(v) for v in self.dense.gat_start(k, self._up(x)))

            def put(r0: int, got: Tuple[np.ndarray, ...]) -> None:
                sl = slice(r0 - a, min(b, r0 + rows) - a)
                st["a_dst"][sl], st["m"][sl], st["z"][sl] = got[0], got[1], 1.0
                st["msg"][sl] = got[2].reshape(len(got[0]), H * C)

            # A slice at a time, read ahead and computed on all cores as finishing is (``infer_finish``).
            map_slices(range(a, b, rows), slice_reader(reader, b, rows),
                       start, put, self.finish_workers, self.overlap)
            return st
        if self._aggr(k) == "max":
            return dict(acc=np.full((n, self._acc_width(k)), -np.inf, dtype=np.float32))
        return dict(acc=np.zeros((n, self._acc_width(k)), dtype=np.float32))

    def _up(self, a: np.ndarray) -> Any:
        """Host rows on the device of the dense parts (``--device``; ``infer_dense``): for a GPU,
        copied from a page-locked copy (asynchronous DMA; the result's first use waits for it); on
        the CPU the array itself (numpy: no PyTorch in the process)."""
        return self.xp.up(a)

    def _down(self, x: Any) -> np.ndarray:
        """Rows of the dense parts back in host memory (for the Rust folds and the writers)."""
        return self.xp.down(x)

    def _grid_finish(self, k: int, st: Dict[str, Any], a: int, b: int, x_dst: Any) -> Any:
        """The layer's outputs of destinations ``a..b`` from their aggregates (on the dense
        parts' arrays): the same arithmetic as the PyG layer's forward
        (:meth:`ringgnn.models.dense.DenseNet.finish`; tests check it against PyG)."""
        kind = self.ckpt.kind
        deg = np.diff(self.graph.indptr[a:b + 1]) if kind == "sage" else None
        dinv = self.dinv[a:b] if kind == "gcn" else None
        return self.dense.finish(k, st, deg, dinv, x_dst, self._narrow(k))

    # -- a layer in blocks of destinations (their sources gathered per block) --------------------

    def run(self, upto: Optional[int] = None, wanted: Optional[np.ndarray] = None,
            emit: Optional[Callable[[int, np.ndarray], None]] = None, activate_last: bool = False) -> None:
        """Layers ``1..upto`` (default: all). Layers before ``upto`` are written to temporary
        files; layer ``upto``'s rows go to ``emit(first_node, rows)`` (only the blocks holding
        ``wanted`` nodes); ``activate_last`` applies the between-layer activation to them."""
        L = len(self.dense.layers)
        upto = L if upto is None else upto
        if not 1 <= upto <= L:
            raise InputError(f"layer {upto}: the model has layers 1..{L}")
        if self.strategy == "grid" and self.planned:  # before anything is read or written
            self.memplan.check(range(upto), grid_only=self.scheme == "grid" or not self._splits(0))
            self.plan.update(grid=self.memplan.describe(range(upto)))
        if self.strategy == "grid":
            self.plan.update(schemes=[self.choose(k, wanted if k == upto - 1 else None).text() for k in range(upto)])
        # PyTorch only where it is used (the blocks, the torch folds, a GPU's dense parts, or a
        # model given as a PyG module): the CPU's grid runs without it.
        torch = None
        if self.strategy != "grid" or self.aggregate != "rust" or self.device_name != "cpu" or "torch" in sys.modules:
            import torch
        reader = _core.FeatureReader(self.ds.path, backend=self.backend, direct=self.direct)
        scratch = temporary(self.work_dir, "ringgnn-infer", directory=True)
        tmpdir = scratch.path
        files: List[str] = []
        grad = torch is not None and torch.is_grad_enabled()
        if torch is not None:
            torch.set_grad_enabled(False)
        # numpy's products on one thread: small calls, one per piece (``ringgnn._threads``).
        with _threads.one_blas_thread():
            try:
                for k in range(upto):
                    if k == upto - 1:
                        self.compute(k, reader, emit, wanted, activate=activate_last)
                        break
                    w = RowFileWriter(os.path.join(tmpdir, f"layer{k + 1}.{self.hidden_dtype}"), self.widths[k + 1],
                                      self.hidden_dtype)
                    expect = [0]

                    def append(a: int, rows: np.ndarray, w=w, expect=expect) -> None:
                        assert a == expect[0], "blocks come in node order"
                        w.append(rows)
                        expect[0] = a + len(rows)

                    try:
                        self.compute(k, reader, append)
                        path = w.finish()
                    except BaseException:
                        w.abort()
                        raise
                    self.stats["bytes_written"] += os.path.getsize(path)
                    files.append(path)
                    reader = _core.FeatureReader.matrix(path, self.ds.num_nodes, self.widths[k + 1],
                                                        backend=self.backend, direct=self.direct,
                                                        dtype=self.hidden_dtype)
                    self.log(f"layer {k + 1}: {self.stats['layers'][-1]['seconds']:.1f} s")
                if self.keep:
                    keep_files(files, self.work_dir, "layer file")
            finally:
                if torch is not None:
                    torch.set_grad_enabled(grad)
                scratch.close()
