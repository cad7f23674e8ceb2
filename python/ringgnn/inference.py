"""Layer-wise inference out of core: every node's output of a trained model, exact (full
neighborhoods, no sampling), with features and each layer's outputs on disk.

Each layer is computed on a **grid** (the default; ``docs/INFERENCE.md``): destination blocks
as large as the budget allows hold their aggregates; each block's in-edges are read
sequentially from the neighbor file, sorted by source, and swept in pieces, each piece's source
rows gathered with the project's coalesced page reads, so a block reads the input rows file at
most once and in file order; the layer's own weights turn the aggregates into outputs, which are
appended to the next layer's file. The other strategy, ``blocks``, gathers all sources of
edge-bounded destination blocks at once and calls the PyG layer on them (hubs in chunks,
combined exactly); it reads far more on graphs without locality and is kept as a second,
independent implementation that the tests hold to the same answers.

Semantics are those of a full-batch PyG forward over the whole graph in eval mode
(``net(x, edge_index)`` with ``edge_index`` every edge of the CSC): GraphSAGE averages over all
in-edges as stored (self loops and duplicates included); GCN and GAT drop stored self loops and
add one per node, as PyG's ``gcn_norm`` and ``GATConv`` do, and GCN normalises with
``1 / sqrt(deg(u) deg(v))`` over in-degrees counted that way.

The intermediate files use the layout of a dataset's feature file (whole float32 rows packed per
4 KiB page, ``docs/FORMAT.md``), are written under a temporary name beside the outputs and
deleted at the end (``keep=True`` keeps them, renamed ``layer1.f32`` ...). Outputs are ``.npy``
files written in blocks to a temporary name and renamed when complete: a failure (disk full,
Ctrl-C) leaves no partial output.

Inference takes a model and a graph (:class:`LayerwiseInference`, :func:`run_inference`: a
loaded :class:`~ringgnn.checkpoints.Checkpoint` and a :class:`~ringgnn.dataset.Dataset`);
:func:`infer` first loads a run directory's checkpoint. What the outputs are scored against is the
task's (``ringgnn.tasks``); this module knows nothing of training.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, _options, _threads, infer_dense, infer_finish
from ._files import allocated_memmap, keep_files, os_errors, temporary
from .infer_finish import finish_block, map_slices, slice_reader, split_rows
from .infer_graph import Block, NeighborFile, blocks, fold_windows
from .infer_plan import (DEST_BYTES, KEY_PEAK, SYNC_BYTES, InferencePlan, LayerCost, SchemeChoice,
                         choose_scheme, cut, release_freed, window_edge_bytes)
from ._core import InputError
from .checkpoints import Checkpoint, load_checkpoint, read_checkpoint
from .dataset import Dataset, open_homogeneous

PAGE = 4096
#: The most edges of one block of the ``blocks`` strategy, whatever the budget.
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


# --- files -------------------------------------------------------------------------------------


def _layout(dim: int, itemsize: int = 4) -> Tuple[int, int]:
    """(row bytes, rows per page; 0 when a row is larger than a page) of rows of ``dim`` values
    of ``itemsize`` bytes."""
    row = itemsize * dim
    return row, (PAGE // row if row <= PAGE else 0)


#: numpy's storage type of each row dtype (bf16 is stored as its 16 bits).
_STORED = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2")}


def encode_rows(rows: np.ndarray, dtype: str) -> np.ndarray:
    """float32 rows as stored in a ``dtype`` rows file: f32 as they are, f16 by numpy's rounding
    (to nearest even), bf16 as the high 16 bits of the float32 rounded to nearest even (what
    PyTorch's ``.to(torch.bfloat16)`` gives; NaN stays a quiet NaN, overflow gives infinity)."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if dtype == "f32":
        return rows
    if dtype == "f16":
        return rows.astype("<f2")
    bits = rows.view(np.uint32)
    out = ((bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)).astype("<u2")
    nan = np.isnan(rows)
    if nan.any():
        out[nan] = (bits[nan] >> np.uint32(16)).astype("<u2") | np.uint16(0x0040)
    return out


class RowFileWriter:
    """Appends float32 rows, stored as ``dtype`` (f32, f16 or bf16: :func:`encode_rows`), to a
    file in the feature-file layout (whole rows per 4 KiB page), under a locked temporary name
    (``ringgnn._files``); :meth:`finish` pads to a page, syncs and renames. OS errors name the
    file and what was being done."""

    def __init__(self, path: str, dim: int, dtype: str = "f32"):
        self.path, self.dim, self.dtype = path, dim, dtype
        self.stored = _STORED[dtype]
        self.row, self.per_page = _layout(dim, self.stored.itemsize)
        self.temp = temporary(os.path.dirname(os.path.abspath(path)), os.path.basename(path))
        self.tmp = self.temp.path
        try:
            with os_errors("writing", path):
                self.f = open(self.tmp, "wb")
        except BaseException:
            self.temp.close()
            raise
        self.pending = np.empty((0, dim), dtype=self.stored)
        self.unsynced = 0

    def append(self, rows: np.ndarray) -> None:
        rows = encode_rows(np.asarray(rows).reshape(-1, self.dim), self.dtype)
        if self.per_page == 0:
            self._write(rows.tobytes())
            return
        if len(self.pending):
            rows = np.concatenate([self.pending, rows])
        whole = len(rows) // self.per_page * self.per_page
        if whole:
            pages = rows[:whole].view(np.uint8).reshape(-1, self.per_page * self.row)
            pad = PAGE - self.per_page * self.row
            if pad:
                pages = np.concatenate([pages, np.zeros((len(pages), pad), dtype=np.uint8)], axis=1)
            self._write(pages.tobytes())
        self.pending = rows[whole:].copy()

    def _write(self, data: bytes) -> None:
        """Write, and every ``SYNC_BYTES`` push the file to disk and drop it from the page cache,
        so that a layer file never holds more than that of this process's memory (a memory cap
        counts dirty and cached pages)."""
        with os_errors("writing", self.path):
            self.f.write(data)
            self.unsynced += len(data)
            if self.unsynced >= SYNC_BYTES:
                self.f.flush()
                os.fdatasync(self.f.fileno())
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(self.f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                self.unsynced = 0

    def finish(self) -> str:
        with os_errors("writing", self.path):
            if len(self.pending):
                self.f.write(self.pending.tobytes())
            size = self.f.tell()
            if size % PAGE:
                self.f.write(b"\0" * (PAGE - size % PAGE))
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
            self.temp.commit(self.path)
        return self.path

    def abort(self) -> None:
        try:
            if not self.f.closed:
                self.f.close()
        except OSError:
            pass  # the error being handled is the one to report
        self.temp.close()


class NpyWriter:
    """A ``.npy`` array written in blocks of rows at given positions, under a temporary name,
    renamed when :meth:`finish` is called (never left half-written)."""

    def __init__(self, path: str, shape: Tuple[int, ...], dtype: Any):
        self.path = path
        self.array = None
        self.unsynced = 0
        self.temp = temporary(os.path.dirname(os.path.abspath(path)), os.path.basename(path))
        self.tmp = self.temp.path
        try:
            with os_errors("writing", path):
                self.array = allocated_memmap(self.tmp, dtype, shape)
        except BaseException:
            self.abort()
            raise

    def put(self, positions: np.ndarray, rows: np.ndarray) -> None:
        self.array[positions] = rows
        self.unsynced += rows.nbytes
        if self.unsynced >= SYNC_BYTES:
            self._sync()

    def _sync(self) -> None:
        """Push the rows put so far to disk and drop them from this process's mapping and the
        page cache: a memory cap counts a mapped output's dirty and cached pages, so the output
        holds at most ``SYNC_BYTES`` of them (``infer_plan.WRITE_BYTES``)."""
        import mmap

        with os_errors("writing", self.path):
            self.array.flush()
            m = getattr(self.array, "_mmap", None)
            if m is not None and hasattr(m, "madvise"):
                m.madvise(mmap.MADV_DONTNEED)  # a shared file mapping: the data stays in the file
            if hasattr(os, "posix_fadvise"):
                fd = os.open(self.tmp, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        self.unsynced = 0

    def finish(self) -> str:
        with os_errors("writing", self.path):
            self.array.flush()
            self.array = None
            with open(self.tmp, "rb+") as f:
                os.fsync(f.fileno())
            self.temp.commit(self.path)
        return self.path

    def abort(self) -> None:
        self.array = None
        self.temp.close()


class OutputRows:
    """Where layer-wise inference's output rows of one node type go: each block of computed
    rows converted to ``output`` (``logits``/``embeddings`` as ``dtype`` f32 or f16,
    ``probabilities``, ``predictions``), each computed node's row at its position in ``ids``
    (None: all nodes, at its id), into a ``.npy`` written in blocks (``out``, see
    :class:`NpyWriter`) or an array in memory. Shared by the homogeneous and heterogeneous
    inference."""

    def __init__(self, output: str, count: int, width: int, dtype: str, ids: Optional[np.ndarray],
                 out: Optional[str]):
        self.output = output
        if output == "predictions":
            self.shape, self.dtype = (count,), np.dtype(np.int64)
        else:
            self.shape, self.dtype = (count, width), np.dtype(np.float16 if dtype == "f16" else np.float32)
        self.ids = ids
        if ids is not None:
            self.order = np.argsort(ids, kind="stable")
            self.sorted_ids = ids[self.order]
        self.sink = NpyWriter(str(out), self.shape, self.dtype) if out else None
        self.result = None if out else np.empty(self.shape, dtype=self.dtype)

    def convert(self, rows: np.ndarray) -> np.ndarray:
        if self.output == "predictions":
            return rows.argmax(axis=1).astype(np.int64)
        if self.output == "probabilities":
            z = rows - rows.max(axis=1, keepdims=True)
            e = np.exp(z)
            rows = e / e.sum(axis=1, keepdims=True)
        return rows.astype(self.dtype, copy=False)

    def put(self, a: int, rows: np.ndarray) -> None:
        """The rows of nodes ``a .. a + len(rows)``."""
        b = a + len(rows)
        if self.ids is None:
            pos, vals = np.arange(a, b), self.convert(rows)
        else:
            lo, hi = np.searchsorted(self.sorted_ids, [a, b])
            if lo == hi:
                return
            pos, vals = self.order[lo:hi], self.convert(rows[self.sorted_ids[lo:hi] - a])
        if self.sink is not None:
            self.sink.put(pos, vals)
        else:
            self.result[pos] = vals

    def finish(self) -> Optional[str]:
        """The ``.npy`` written (None when the rows are in :attr:`result`)."""
        return self.sink.finish() if self.sink is not None else None

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.abort()


# --- one layer on one block ------------------------------------------------------------------------


def _local(block: Block, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The block's source nodes, its destination nodes first (so that local id ``i`` is the same
    node as source and destination for ``i < b - a``), and each edge's source as a local id."""
    a, b = block.a, block.b
    inside = (ids >= a) & (ids < b)
    others = np.unique(ids[~inside])
    nodes = np.concatenate([np.arange(a, b, dtype=np.int64), others])
    local = np.where(inside, ids - a, (b - a) + np.searchsorted(others, ids))
    return nodes, local.astype(np.int64)


class LayerwiseInference:
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
        #: model's weights on them (``ringgnn.infer_dense``).
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

    def _dst_of(self, blk: Block) -> np.ndarray:
        if blk.parts > 1:
            return np.full(blk.hi - blk.lo, blk.a, dtype=np.int64)
        deg = np.diff(self.graph.indptr[blk.a:blk.b + 1])
        return np.repeat(np.arange(blk.a, blk.b, dtype=np.int64), deg)

    def _conv(self, k: int, blk: Block, x_nodes: Any, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray) -> Any:
        """Layer ``k`` on one block: outputs of its destination nodes (for a hub chunk, the
        chunk's part, combined by :meth:`_combine`)."""
        import torch

        conv, kind = self.net.convs[k], self.ckpt.kind
        n_dst = blk.b - blk.a
        ei = torch.from_numpy(np.stack([src, dst - blk.a]))
        if kind == "sage":
            return conv((x_nodes, x_nodes[:n_dst]), ei)
        keep = src != (dst - blk.a)  # stored self loops out; one per node is added below
        if kind == "gcn":
            s, d = src[keep], dst[keep] - blk.a
            loops = np.arange(n_dst, dtype=np.int64) if blk.part == 0 else np.empty(0, np.int64)
            s, d = np.concatenate([s, loops]), np.concatenate([d, loops])
            w = self.dinv[nodes[s]] * self.dinv[nodes[d]]
            normalize = conv.normalize
            conv.normalize = False
            try:
                out = conv(x_nodes, torch.from_numpy(np.stack([s, d])), torch.from_numpy(w))[:n_dst]
            finally:
                conv.normalize = normalize
            return out if blk.parts == 1 else out - (conv.bias if conv.bias is not None else 0)
        # GAT
        if blk.parts == 1:
            return conv((x_nodes, x_nodes[:n_dst]), torch.from_numpy(np.stack([src[keep], dst[keep] - blk.a])))
        return self._gat_chunk(conv, blk, x_nodes, src[keep])

    def _gat_chunk(self, conv, blk: Block, x_nodes, src):
        """A hub's chunk of GAT attention: (log-sum-exp per head, softmax-weighted sum of the
        chunk's messages per head), combined across chunks by :meth:`_combine`."""
        import torch
        import torch.nn.functional as F

        H, C = conv.heads, conv.out_channels
        lin = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_src
        lin_dst = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_dst
        xs = lin(x_nodes).view(-1, H, C)
        xd = lin_dst(x_nodes[:1]).view(-1, H, C)
        a_src = (xs * conv.att_src).sum(-1)  # [n, H]
        a_dst = (xd * conv.att_dst).sum(-1)  # [1, H]
        idx = torch.from_numpy(src)
        if blk.part == 0:  # the self loop, once
            idx = torch.cat([idx, torch.zeros(1, dtype=torch.int64)])
        e = F.leaky_relu(a_src[idx] + a_dst, conv.negative_slope)  # [m, H]
        lse = torch.logsumexp(e, dim=0)  # [H]
        w = torch.exp(e - lse)  # [m, H]
        msg = (w.unsqueeze(-1) * xs[idx]).sum(0)  # [H, C]
        return lse, msg

    def _combine(self, k: int, parts: List[Any], blk: Block) -> Any:
        """A hub's output from its chunks' parts."""
        import torch

        conv, kind = self.net.convs[k], self.ckpt.kind
        if kind == "sage" and str(getattr(conv, "aggr", "mean")) != "mean":
            raise InputError(f"{self.ckpt.path}: SAGEConv(aggr={conv.aggr!r}) on a node with more in-edges than a "
                             "block is not supported by strategy='blocks'; use the grid")
        if kind == "sage":  # chunk means weighted by their sizes (the root term weighs 1 in all)
            deg = sum(n for _, n in parts)
            return sum(out * (n / deg) for out, n in parts)
        if kind == "gcn":
            out = sum(p for p in parts)
            return out + (conv.bias if conv.bias is not None else 0)
        lses = torch.stack([p[0] for p in parts])  # [parts, H]
        total = torch.logsumexp(lses, dim=0)
        msg = sum(torch.exp(l - total).unsqueeze(-1) * m for l, m in parts)  # [H, C]
        out = msg.reshape(1, -1) if conv.concat else msg.mean(0, keepdim=True)
        if conv.bias is not None:
            out = out + conv.bias
        return out

    def _after(self, k: int, out: Any) -> Any:
        """What BasicGNN applies between layers (eval mode: activation and norm; no dropout), on
        the dense parts' arrays."""
        return self.dense.after(k, out)

    def _bar(self, k: int) -> Any:
        """The progress bar of layer ``k`` (nodes done)."""
        from .progress import bar

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
                from .infer_partition import partitioned_layer

                share, piece_rows, finish_rows = self._part_sizes(k)
                extra.update(partitioned_layer(self, k, reader, writer, wanted, activate, choice.parts,
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
                finish_block(self, k, a, b, reader, writer, finish_rows, activate,
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
        g = self.graph
        layer, aggr = self.dense.layers[k], self._aggr(k)
        acc = st["acc"]  # the aggregates land in it
        kw: Dict[str, Any] = dict(fold={"mean": "sum", "sum": "gcn"}.get(aggr, aggr))
        if aggr == "sum":  # GCN's
            kw["dinv"] = self.dinv
        if self._narrow(k) and not transformed:  # (``transformed``: the rows are ``W x`` already)
            kw.update(width=self.widths[k + 1], transform=self.dense.transform(k))
        elif aggr == "softmax":
            H, C = layer.heads, layer.channels
            kw.update(width=H * C + H, transform=self.dense.messages(k), a_dst=st["a_dst"],
                      negative_slope=float(layer.slope))
        # A piece's product on all cores (the Rust core waits for it; ``infer_finish.split_rows``).
        with split_rows(kw.get("transform"), self.finish_workers if "transform" in kw else 1) as fn:
            if fn is not None:
                kw["transform"] = fn
            fold_windows(reader, g, acc, a, b, self._windows(k, a, b), piece_rows, self._phases, **kw)

    def _phase(self, name: str, since: float) -> None:
        """Count the seconds since ``since`` to phase ``name`` of the layer (``stats``)."""
        self._phases[name] = self._phases.get(name, 0.0) + time.perf_counter() - since

    def _pieces(self, prepare: Callable[[int], Tuple[Any, ...]], starts: Sequence[int]) -> Iterator[Tuple[Any, ...]]:
        """``prepare(p)`` for each piece start, in order; with ``overlap``, piece ``i + 1`` is
        prepared (its rows read) on a second thread while piece ``i`` is folded in."""
        if not self.overlap:
            for p in starts:
                yield prepare(p)
            return
        from concurrent.futures import ThreadPoolExecutor

        starts = list(starts)
        with ThreadPoolExecutor(1, thread_name_prefix="ringgnn-infer-read") as pool:
            ahead = pool.submit(prepare, starts[0]) if starts else None
            for i in range(len(starts)):
                got = ahead.result()
                ahead = pool.submit(prepare, starts[i + 1]) if i + 1 < len(starts) else None
                yield got
                del got

    def _sorted_keys(self, a: int, b: int, lo: int, hi: int) -> Tuple[np.ndarray, int]:
        """In-edges ``lo..hi`` of block ``a..b`` as ``source * n + local destination`` keys,
        sorted (GCN and GAT: stored self loops dropped). Built in place: at most 16 bytes an
        edge at the peak (the file's ids, the keys, 4-byte destinations), 8 after."""
        g = self.graph
        n_d = b - a
        if g.num_nodes * n_d >= 1 << 63:
            raise InputError("the graph is too large for 64-bit edge keys in one block; give less --memory")
        keys = g.edges(lo, hi, np.uint64)
        ip = g.indptr[a:b + 1]
        counts = np.maximum(np.minimum(ip[1:], hi) - np.maximum(ip[:-1], lo), 0)
        dl = np.repeat(np.arange(n_d, dtype=np.uint32), counts)
        loops = np.empty(0, dtype=np.int64)
        if self.ckpt.kind in ("gcn", "gat"):  # found a million edges at a time: no large temporaries
            step = 1 << 20
            loops = np.concatenate([loops] + [
                np.flatnonzero(keys[c:c + step] == dl[c:c + step] + np.uint64(a)) + c for c in range(0, len(keys), step)])
        keys *= np.uint64(n_d)
        keys += dl
        del dl
        keys[loops] = np.iinfo(np.uint64).max  # sorted to the end, then cut off
        keys.sort()
        return keys[: len(keys) - len(loops)], n_d

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

    def _grid_add(self, k: int, host: Dict[str, np.ndarray], a: int, u: Any, rows: Any, inv: Any, dl: Any) -> None:
        """One piece, by torch (``aggregate="python"``): sources ``u`` with their ``rows``; edge
        ``i`` goes from ``u[inv[i]]`` to local destination ``dl[i]``; the block's state ``host``
        (numpy) is updated in place through torch views of it."""
        import torch
        import torch.nn.functional as F

        st = {key: torch.from_numpy(v) for key, v in host.items()}
        kind = self.ckpt.kind
        if kind in ("sage", "gcn") and self._narrow(k):
            conv = self.net.convs[k]
            rows = F.linear(rows, (conv.lin_l if kind == "sage" else conv.lin).weight)  # W x, no bias
        if kind == "sage" and self._aggr(k) == "max":
            st["acc"].scatter_reduce_(0, dl.unsqueeze(-1).expand(-1, rows.shape[1]), rows[inv], reduce="amax")
        elif kind == "sage":
            st["acc"].index_add_(0, dl, rows[inv])
        elif kind == "gcn":
            w = torch.from_numpy(self.dinv)[u][inv] * torch.from_numpy(self.dinv[a:a + len(st["acc"])])[dl]
            st["acc"].index_add_(0, dl, rows[inv] * w.unsqueeze(-1))
        else:
            conv = self.net.convs[k]
            H, C = conv.heads, conv.out_channels
            lin_src = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_src
            xs = lin_src(rows).view(-1, H, C)
            a_src = (xs * conv.att_src).sum(-1)
            e = F.leaky_relu(a_src[inv] + st["a_dst"][dl], conv.negative_slope)
            st["msg"] = st["msg"].view(-1, H, C)
            self._softmax_add(st, dl, e, xs[inv])

    @staticmethod
    def _softmax_add(st: Dict[str, Any], dl: Any, e: Any, xs: Any) -> None:
        """Online softmax: fold logits ``e`` [E, H] of messages ``xs`` [E, H, C] into each
        destination's running max, sum of exponentials and weighted sum."""
        import torch

        m_piece = torch.full_like(st["m"], float("-inf")).scatter_reduce_(0, dl.unsqueeze(-1).expand_as(e), e,
                                                                         reduce="amax")
        m_new = torch.maximum(st["m"], m_piece)
        finite = torch.isfinite(m_new)
        scale = torch.where(finite, torch.exp(st["m"] - torch.where(finite, m_new, 0.0)), torch.zeros_like(m_new))
        p = torch.exp(e - m_new[dl])
        st["z"].copy_(st["z"] * scale + torch.zeros_like(st["z"]).index_add_(0, dl, p))
        st["msg"].copy_(st["msg"] * scale.unsqueeze(-1)
                        + torch.zeros_like(st["msg"]).index_add_(0, dl, p.unsqueeze(-1) * xs))
        st["m"].copy_(m_new)

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
        (:meth:`ringgnn.infer_dense.DenseNet.finish`; tests check it against PyG)."""
        kind = self.ckpt.kind
        deg = np.diff(self.graph.indptr[a:b + 1]) if kind == "sage" else None
        dinv = self.dinv[a:b] if kind == "gcn" else None
        return self.dense.finish(k, st, deg, dinv, x_dst, self._narrow(k))

    # -- a layer in blocks of destinations (their sources gathered per block) --------------------

    def layer(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
              wanted: Optional[np.ndarray] = None, activate: bool = True) -> None:
        """Layer ``k`` for every node (or the blocks holding ``wanted`` nodes); ``writer(a, rows)``
        receives rows ``a..`` in node order."""
        import torch

        g = self.graph
        hub_parts: List[Any] = []
        with self._bar(k) as bar:
            for blk in blocks(g.indptr, self.block_edges, self.block_nodes, wanted):
                ids = g.edges(blk.lo, blk.hi)
                dst = self._dst_of(blk)
                nodes, src = _local(blk, ids)
                x_nodes = torch.from_numpy(reader.gather(nodes))
                out = self._conv(k, blk, x_nodes, nodes, src, dst)
                if blk.parts > 1:
                    hub_parts.append((out, blk.hi - blk.lo) if self.ckpt.kind == "sage" else out)
                    if blk.part < blk.parts - 1:
                        continue
                    out = self._combine(k, hub_parts, blk)
                    hub_parts = []
                out = out.numpy()
                if activate:
                    out = self._after(k, out)
                writer(blk.a, out)
                bar.update(blk.b - blk.a)

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


# --- the API and the commands ------------------------------------------------------------------------


def node_selection(ds: Dataset, nodes: Union[None, str, Any]) -> Optional[np.ndarray]:
    """``None`` for all nodes, else the node ids of a split name, a ``.npy`` file or an array,
    checked against the graph."""
    if nodes is None or (isinstance(nodes, str) and nodes == "all"):
        return None
    ids = _options.seeds(ds, nodes, "--nodes")
    bad = ids[(ids < 0) | (ids >= ds.num_nodes)]
    if len(bad):
        raise InputError(f"--nodes: node {int(bad[0])} is not a node of {ds.path} (ids 0..{ds.num_nodes - 1})")
    return ids


def infer(run_dir: str, *, dataset: Union[None, str, Dataset] = None, nodes: Union[None, str, Any] = None,
          layer: Optional[int] = None, output: str = "logits", out: Optional[str] = None, dtype: str = "f32",
          memory: Union[None, int, str] = None, backend: str = "auto", direct: bool = False, keep: bool = False,
          quiet: bool = True, log: Callable[[str], None] = lambda s: None,
          block_edges: Optional[int] = None, strategy: str = "grid",
          grid_nodes: Optional[int] = None, aggregate: Optional[str] = None,
          hidden_dtype: Optional[str] = None, device: Optional[str] = None, scheme: Optional[str] = None,
          parts: Optional[int] = None) -> Union[np.ndarray, Dict[str, Any]]:
    """Exact layer-wise inference of the model of a ``ringgnn train`` run.

    ``output``: ``"logits"`` (the last layer), ``"probabilities"`` (their softmax),
    ``"predictions"`` (argmax, int64) or ``"embeddings"`` (layer ``layer``'s output, activated as
    the next layer sees it; by default the last hidden layer of a node run, and the last layer of a
    link run: the embeddings its decoder scores). A link run's model scores pairs, not nodes: it
    refuses ``"predictions"`` and ``"probabilities"`` (``ringgnn.scoring`` scores its pairs).
    ``nodes``: ``"all"``/None, a split name, a ``.npy`` file or an array of node ids: rows come
    in that order. With ``out`` the result is written there as ``.npy`` (in blocks, renamed when
    complete) and a summary dict is returned; else the array is returned. ``dataset`` defaults to the run's. ``memory`` is
    the process's budget (the blocks are sized from what is left of it). ``hidden_dtype``: how the
    hidden layers' rows are stored between layers, ``bf16`` (default), ``f16`` or ``f32``; the
    outputs are computed in float32 whatever it is."""
    ds, ckpt = open_run(run_dir, dataset, arrays=True)
    if ckpt.task == "link" and output in ("predictions", "probabilities"):
        raise InputError(f"RUN_DIR {run_dir}: a link model scores pairs, it has no {output} of nodes: give --edges "
                         "(a .npy of pairs, or a held-out edge split: val, test), or use `ringgnn embed`")
    return run_inference(ds, ckpt, node_selection(ds, nodes), layer=layer, output=output, out=out, dtype=dtype,
                         memory=_options.size(memory, "memory"), backend=backend, direct=direct, keep=keep,
                         quiet=quiet, log=log, block_edges=block_edges, strategy=strategy, grid_nodes=grid_nodes,
                         aggregate=aggregate, hidden_dtype=hidden_dtype, device=device, scheme=scheme, parts=parts)


def embedding_layer(ckpt: Checkpoint, layer: Optional[int]) -> int:
    """The layer whose output ``embed`` writes: ``layer``, checked, else a node run's last hidden
    layer (its last layer gives class logits) or a link run's last (the embeddings themselves)."""
    L = ckpt.layers
    upto = layer if layer is not None else (L if ckpt.task == "link" else max(1, L - 1))
    if not 1 <= upto <= L:
        raise InputError(f"--layer {upto}: the model has layers 1..{L}")
    return upto


def open_run(run_dir: str, dataset: Union[None, str, Dataset] = None,
             arrays: bool = False) -> Tuple[Dataset, Checkpoint]:
    """The dataset (``dataset``, else the one the run was trained on) and the loaded model of
    a ``ringgnn train`` run directory; ``arrays``: read without PyTorch (the model's dense parts
    only: what layer-wise inference on the CPU needs, ``Checkpoint.module`` builds the rest)."""
    read = read_checkpoint(run_dir, "RUN_DIR", arrays=arrays)
    if dataset is None:
        dataset = (read[1].get("metrics") or {}).get("dataset")
        if dataset is None:
            raise InputError(f"{read[0]} does not say which dataset it was trained on: give --dataset")
    ds = open_homogeneous(dataset, "layer-wise inference")
    return ds, load_checkpoint(run_dir, ds, "RUN_DIR", read)


def run_inference(ds: Dataset, ckpt: Checkpoint, ids: Optional[np.ndarray], *, layer: Optional[int] = None,
                  output: str = "logits", out: Optional[str] = None, dtype: str = "f32", memory: Optional[int] = None,
                  backend: str = "auto", direct: bool = False, keep: bool = False, quiet: bool = True,
                  log: Callable[[str], None] = lambda s: None, block_edges: Optional[int] = None,
                  strategy: str = "grid", grid_nodes: Optional[int] = None, work_dir: Optional[str] = None,
                  stats: Optional[Dict[str, Any]] = None, aggregate: Optional[str] = None,
                  hidden_dtype: Optional[str] = None,
                  device: Optional[str] = None, scheme: Optional[str] = None,
          parts: Optional[int] = None) -> Union[np.ndarray, Dict[str, Any]]:
    """:func:`infer` for a loaded model and node ids (None: all). ``work_dir``: where the
    intermediate layers are written (default: beside ``out``, else beside the checkpoint);
    ``stats``, a dict, receives the summary also when the array is returned."""
    L = ckpt.layers
    if output not in ("logits", "probabilities", "predictions", "embeddings"):
        raise InputError(f"output {output!r}: use logits, probabilities, predictions or embeddings")
    if dtype not in ("f32", "f16"):
        raise InputError(f"--dtype {dtype}: use f32 or f16")
    if output == "embeddings":
        upto = embedding_layer(ckpt, layer)
    elif layer is not None:
        raise InputError("--layer selects an embedding layer: it goes with embeddings only")
    else:
        upto = L
    n = ds.num_nodes
    wanted = None
    if ids is not None:
        wanted = np.zeros(n, dtype=bool)
        wanted[ids] = True
    run = LayerwiseInference(ds, ckpt, memory=memory, backend=backend, direct=direct,
                             work_dir=work_dir or (os.path.dirname(os.path.abspath(out)) if out else None), keep=keep,
                             quiet=quiet,
                             log=log, block_edges=block_edges, strategy=strategy, grid_nodes=grid_nodes,
                             aggregate=aggregate, hidden_dtype=hidden_dtype, device=device, scheme=scheme, parts=parts)
    width = run.widths[upto]
    count = n if ids is None else len(ids)
    t0 = time.perf_counter()
    rows = OutputRows(output, count, width, dtype, ids, out)
    try:
        run.run(upto, wanted, rows.put, activate_last=output == "embeddings")
        path = rows.finish()
    except BaseException:
        rows.abort()
        raise
    result, np_dtype = rows.result, rows.dtype
    summary = dict(checkpoint=ckpt.path, dataset=os.path.abspath(ds.path), output=output,
                   layer=upto, rows=count, dim=None if output == "predictions" else width, dtype=str(np.dtype(np_dtype)),
                   seconds=time.perf_counter() - t0, plan=run.plan, **{k: v for k, v in run.stats.items()})
    if stats is not None:
        stats.update(summary)
    if path is not None:
        summary["out"] = path
        if ds.has_node_ids:  # a dataset converted from a table: its rows' original ids beside them
            from .node_ids import write_beside

            summary["node_ids"] = write_beside(ds, ids, path)
        return summary
    return result
