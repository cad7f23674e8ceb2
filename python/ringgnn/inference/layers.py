"""The layers of a homogeneous run on the engine: GraphSAGE (mean or max), GCN and GAT as
the grid folds and finishes them (:class:`GnnLayers`, a part of
:class:`ringgnn.inference.engine.LayerwiseInference`; a unit here is a layer ``k``, from 0)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .. import _core
from .._core import InputError
from .._files import temporary
from .finish import LayerStep, finish_block, map_slices, slice_reader, split_rows
from .graph import blocks, fold_windows
from .plan import DEST_BYTES, KEY_PEAK, LayerCost, SchemeChoice, release_freed, window_edge_bytes
from .rows import RowFileWriter, rows_bytes


class GnnLayers:
    """The GraphSAGE, GCN and GAT layers of the engine (see the module's docstring)."""

    def _gcn_dinv(self) -> np.ndarray:
        g = self.graph
        deg = np.diff(g.indptr).astype(np.float64)
        # A million edges at a time: this runs before the plan's check.
        for blk in blocks(g.indptr, 1 << 20, 1 << 30):
            ids = g.edges(blk.lo, blk.hi)
            dst = self._dst_of(blk)
            selfs = np.bincount(dst[ids == dst] - blk.a, minlength=blk.b - blk.a) if len(ids) else 0
            deg[blk.a:blk.b] -= selfs
        self.stats["bytes_read_neighbors"] += g.bytes_read
        g.bytes_read = 0
        return (1.0 / np.sqrt(deg + 1.0)).astype(np.float32)

    def _layer_cost(self, k: int) -> LayerCost:
        """What layer ``k`` costs on the grid (:class:`~ringgnn.inference.plan.LayerCost`)."""
        layer, d_in, d_out = self.dense.layers[k], self.widths[k], self.widths[k + 1]
        rust = self.aggregate == "rust"
        if self.ckpt.kind == "gat":
            hc = layer.heads * layer.channels
            acc = hc + 3 * layer.heads  # messages, running max, running sum, and a_dst
            # Rust: a distinct source's id, row, messages and logits (twice); torch: an edge's.
            piece = 8 + 4 * (d_in + 2 * (hc + layer.heads)) if rust else 4 * (d_in + 2 * hc + 4 * layer.heads) + 48
            finish = 4 * (d_in + 6 * hc + 8 * layer.heads + 4 * d_out) + 64
        else:
            acc = self._acc_width(k)
            if rust:  # a distinct source's id and row, and its W x where the layer narrows (twice)
                piece = 8 + 4 * (d_in + (2 * acc if self._narrow(k) else 0))
            else:
                piece = 4 * (2 * d_in + acc) + 48
            finish = 4 * (d_in + acc + 6 * d_out) + 64
        # A block's own rows are read a slice at a time, so they cost nothing per node.
        per_edge = _core.aggregate_edge_bytes(self.graph.num_nodes) if rust else KEY_PEAK
        window = window_edge_bytes(self._part_acc_bytes(k)) if self._splits(k) else 0
        return LayerCost(4 * acc + DEST_BYTES, piece, finish, per_edge, window)

    def _narrow(self, k: int) -> bool:
        """Whether GraphSAGE/GCN layer ``k`` sums ``W x``: narrower output, linear aggregation."""
        return (self.ckpt.kind in ("sage", "gcn") and self._aggr(k) != "max"
                and self.widths[k + 1] < self.widths[k])

    def _aggr(self, k: int) -> str:
        """Layer ``k``'s aggregation: ``mean`` or ``max`` (GraphSAGE), ``sum`` (GCN)
        or ``softmax`` (GAT); another GraphSAGE aggregation is an :class:`InputError`."""
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

    def _part_acc_bytes(self, k: int) -> int:
        """Bytes of a partial aggregate's row by source partitions."""
        layer = self.dense.layers[k]
        if self.ckpt.kind == "gat":
            return 4 * (layer.heads * layer.channels + 3 * layer.heads)
        return 4 * self._acc_width(k)

    def _given_node_bytes(self, k: int) -> int:
        """Bytes a destination of a window or merge block takes with sizes given (tests)."""
        return 4 * self._acc_width(k) + 64

    def _scheme_bytes(self, k: int, pretransform: bool) -> Dict[str, Any]:
        """Layer ``k``'s bytes as ``plan.choose_scheme`` weighs them."""
        n = self.graph.num_nodes
        input_bytes = rows_bytes(n, self.widths[k], "f32" if k == 0 else self.hidden_dtype)
        extra = 0
        if self.ckpt.kind == "gat":
            extra = input_bytes + 2 * 4 * self.dense.layers[k].heads * n
        once, sweep = 0, None
        if pretransform:
            sweep = rows_bytes(n, self._acc_width(k))
            once = input_bytes + sweep
        return dict(input_bytes=input_bytes, acc_bytes=self._part_acc_bytes(k), id_bytes=self.graph.id_bytes,
                    extra_bytes=extra, once_bytes=once, sweep_bytes=sweep)

    # -- the grid --------------------------------------------------------------------------------

    def grid_layer(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                   wanted: Optional[np.ndarray] = None, activate: bool = True,
                   choice: Optional[SchemeChoice] = None) -> Dict[str, int]:
        """Layer ``k`` on the grid: each destination block's in-edges swept in
        pieces in file order into its accumulators, then finished by the layer's weights (a narrowing
        layer's blocks sweep its ``W x`` rows computed once where :meth:`choose` said so). Returns the
        bytes written to and read from that temporary file."""
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
        """Whether layer ``k``'s blocks sweep ``W x`` rows computed once: a narrowing
        layer summed by Rust in more than one block (one block would only move more bytes)."""
        return self.aggregate == "rust" and self._narrow(k) and blocks > 1

    def _pretransform(self, k: int, reader: Any, path: str) -> Tuple[Any, str]:
        """Every node's ``W x`` (no bias) as float32 rows at ``path``; (its reader, the path)."""
        n, width, rows = self.graph.num_nodes, self.widths[k + 1], self._sizes(k)[2]
        transform = self.dense.transform(k)  # the very product the pieces would get
        # Read ahead and computed on all cores, written in order (``infer_finish``).
        RowFileWriter(path, width, "f32").fill(lambda put: map_slices(
            range(0, n, rows), slice_reader(reader, n, rows), lambda r0, x: transform(x), put, self.finish_workers,
            self.overlap))
        return _core.FeatureReader.matrix(path, n, width, backend=self.backend, direct=self.direct,
                                          dtype="f32"), path

    def _grid_sweep(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                    grid: List[Tuple[int, int]], wx: Any, piece_edges: int, finish_rows: int,
                    activate: bool) -> None:
        """The blocks of :meth:`grid_layer`, summing ``wx``'s rows where given."""
        for a, b in grid:
            t = time.perf_counter()
            state = self._grid_start(k, a, b, reader)
            self._phase("start", t)
            if self.aggregate == "rust":
                self._rust_add(k, state, a, b, reader if wx is None else wx, piece_edges,
                               transformed=wx is not None)
            for lo, hi in ([] if self.aggregate == "rust" else self._windows(k, self.graph.indptr, a, b)):
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
            # GAT's self loops are in the state already: no rows read.
            t = time.perf_counter()
            finish_block(self.step(k), a, b, reader, writer, finish_rows, activate,
                         lambda r0, r1, _x, state=state, a=a: {key: self.xp.up(v[r0 - a:r1 - a])
                                                               for key, v in state.items()},
                         read_rows=self.ckpt.kind != "gat")
            del state
            release_freed()  # the block's buffers, freed, would stay resident otherwise
            self._phase("finish", t)

    def _rust_add(self, k: int, st: Dict[str, Any], a: int, b: int, reader: Any, piece_rows: int,
                  transformed: bool = False) -> None:
        """Block ``a..b``'s aggregates by the Rust core, a piece's product on all cores."""
        kw = self.fold_args(k, transformed)
        if kw["fold"] == "softmax":
            kw["a_dst"] = st["a_dst"]
        # A piece's product on all cores (the Rust core waits for it; ``infer_finish.split_rows``).
        with split_rows(kw.get("transform"), self.finish_workers if "transform" in kw else 1) as fn:
            if fn is not None:
                kw["transform"] = fn
            fold_windows(reader, self.graph, st["acc"], a, b, self._windows(k, self.graph.indptr, a, b), piece_rows,
                         self._phases, **kw)

    def fold_args(self, k: int, transformed: bool = False) -> Dict[str, Any]:
        """Layer ``k``'s fold as the Rust core takes it: ``fold``, GCN's ``dinv``, ``W x`` of
        each piece (unless ``transformed``), GAT's ``lin(x)`` and source logits."""
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
        """Layer ``k`` as finishing a block and the source partitions take it."""
        layer = self.dense.layers[k]
        acc = layer.heads * layer.channels + 2 * layer.heads if self.ckpt.kind == "gat" else self._acc_width(k)
        return LayerStep(k, self.ckpt.kind, self.dense, self.graph, self.work_dir, acc, self.fold_args(k),
                         lambda st, a, b, x: self._grid_finish(k, st, a, b, x), lambda out: self.dense.after(k, out),
                         self.xp.up, self.xp.down, self.finish_workers, self.overlap, self._phases, self._done)

    def _grid_start(self, k: int, a: int, b: int, reader: Any) -> Dict[str, Any]:
        """The accumulators of destinations ``a..b``; for GAT also their
        destination logits and their self loops folded in first (a softmax does not depend on the
        order of its terms), so that finishing needs neither their rows again nor their transform."""
        layer, n = self.dense.layers[k], b - a
        if self.ckpt.kind == "gat":
            H, C = layer.heads, layer.channels
            # The Rust fold's accumulator layout (the torch fold's too); the state's arrays are views.
            acc = np.empty((n, H * C + 2 * H), dtype=np.float32)
            st = dict(acc=acc, msg=acc[:, :H * C], m=acc[:, H * C:H * C + H], z=acc[:, H * C + H:],
                      a_dst=np.empty((n, H), dtype=np.float32))
            rows = self._sizes(k)[2]

            def start(r0: int, x: np.ndarray) -> Tuple[np.ndarray, ...]:
                return tuple(self.xp.down(v) for v in self.dense.gat_start(k, self.xp.up(x)))

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

    def _grid_finish(self, k: int, st: Dict[str, Any], a: int, b: int, x_dst: Any) -> Any:
        """The outputs of destinations ``a..b`` from their aggregates (``DenseNet.finish``)."""
        kind = self.ckpt.kind
        deg = np.diff(self.graph.indptr[a:b + 1]) if kind == "sage" else None
        dinv = self.dinv[a:b] if kind == "gcn" else None
        return self.dense.finish(k, st, deg, dinv, x_dst, self._narrow(k))
