"""The layer-wise inference engine, one for every graph (:class:`Engine`): each layer's
exact output of every node (full neighborhoods), computed as units (a layer's rows of one
destination type) on the grid or by source partitions. A homogeneous run
(:class:`LayerwiseInference`) is the one-type case of a typed one
(:class:`ringgnn.inference.hetero.HeteroLayerwise`). docs/INFERENCE.md."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

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
from .graph import NeighborFile, newer_than
from .layers import GnnLayers
from .partition import partitioned_layer
from .plan import MIN_ROWS, InferencePlan, SchemeChoice, choose_scheme, cut
from .rows import RowFileWriter
from .torch_folds import TorchFolds

MAX_BLOCK_EDGES = 1 << 22
#: The most rows finished at a time at the end of a destination block.
FINISH_ROWS = 1 << 16
#: How a layer is computed: ``grid`` (default) or ``blocks`` (see the module's docstring).
STRATEGIES = ("grid", "blocks")
#: Who folds a block's in-neighbors' rows: ``rust`` (default, ``FeatureReader.aggregate``) or
#: ``python`` (torch's folds; numpy's sums for a typed run); also ``RINGGNN_INFER_AGGREGATE``.
AGGREGATORS = ("rust", "python")
AGGREGATE_ENV = "RINGGNN_INFER_AGGREGATE"
#: How a unit aggregates: ``auto`` (the fewer bytes, ``plan.choose_scheme``), ``grid`` or
#: ``partitioned`` (the Rust folds only); also ``RINGGNN_INFER_SCHEME``.
SCHEMES = ("auto", "grid", "partitioned")
SCHEME_ENV = "RINGGNN_INFER_SCHEME"


class Engine:
    """What every layer-wise run shares: options, units, blocks and windows, schemes, layer files
    and counters. A kind sets :attr:`units`, :attr:`memplan` and the sizes, and computes a unit."""

    units: List[Tuple[int, Optional[str]]]
    memplan: InferencePlan

    def _options(self, backend: str, direct: bool, work_dir: str, keep: bool, quiet: bool,
                 log: Callable[[str], None], aggregate: Optional[str], scheme: Optional[str], parts: Optional[int],
                 overlap: bool, device: str) -> None:
        self.aggregate = _options.choice(aggregate or os.environ.get(AGGREGATE_ENV) or "rust", AGGREGATORS,
                                         f"aggregate ({AGGREGATE_ENV})")
        #: ``auto``, ``grid`` or ``partitioned``; ``parts`` forces the partitions' number (tests).
        self.scheme = _options.choice(scheme or os.environ.get(SCHEME_ENV) or "auto", SCHEMES,
                                      f"scheme ({SCHEME_ENV})")
        self.parts = None if parts is None else max(1, int(parts))
        self.backend, self.direct = _options.backend(backend), bool(direct)
        self.work_dir, self.keep, self.quiet, self.log = work_dir, keep, quiet, log
        #: Read the next piece's (or finishing slice's) rows while the current one is used.
        self.overlap = bool(overlap)
        self.finish_workers = infer_finish.workers(device)
        self.stats: Dict[str, Any] = dict(layers=[], bytes_read_neighbors=0, bytes_read_rows=0, bytes_written=0,
                                          blocks=0)
        self._phases: Dict[str, float] = {}  # the current unit's (see :meth:`compute`)
        #: Which graph the outputs are of, on a dataset with times (:meth:`_as_of`).
        self.times: Dict[str, Any] = {}
        self._as_of_dir: Any = None

    # -- the graph as of a time ---------------------------------------------------------------------

    def _as_of(self, ds: Any, graphs: Dict[Any, NeighborFile], at: Any) -> Dict[Any, NeighborFile]:
        """``graphs`` as of time ``at`` (None: as they are), in a directory :meth:`close` removes."""
        self.times = {"at": None} if ds.has_times else {}
        if at is None:
            return graphs
        at = _options.time(at)
        if not ds.has_times:
            raise InputError(f"--at {at}: {ds.path} has no edge or node times, so its graph is the same at any time; "
                             "build it with --edge-time (and --node-time) to infer as of a time, or leave --at out")
        t0 = time.perf_counter()
        newer = {t: newer_than(ds.node_type(t), at) for t in ds.node_types}
        self._as_of_dir = temporary(self.work_dir, "ringgnn-as-of", directory=True)
        views = {}
        try:
            for k, (key, g) in enumerate(graphs.items()):
                bits = newer[g.source_type]
                views[key] = g.as_of(at, None if bits is None else bits[0],
                                     os.path.join(self._as_of_dir.path, f"{k}.ids"))
        except BaseException:
            self.close()
            raise
        written = [v for key, v in views.items() if v is not graphs[key]]
        self.times = dict(at=at, as_of=dict(
            edges=sum(int(v.indptr[-1]) for v in views.values()),
            edges_total=sum(int(g.indptr[-1]) for g in graphs.values()),
            newer_nodes=sum(c for _, c in filter(None, newer.values())),
            bytes_read=sum(g.bytes_read for g in graphs.values()),
            bytes_written=sum(int(v.indptr[-1]) * v.id_bytes for v in written), seconds=time.perf_counter() - t0))
        return views

    def close(self) -> None:
        """Remove the graph as of a time (:meth:`_as_of`), if any."""
        if self._as_of_dir is not None:
            self._as_of_dir.close()
            self._as_of_dir = None

    # -- sizes, blocks and windows of a unit -----------------------------------------------------

    def _sizes(self, i: int) -> Tuple[int, int, int]:
        """(block bytes, piece units, finishing rows) of unit ``i``: the plan's, or the given sizes."""
        if not self.planned:
            return 0, self.given_piece, FINISH_ROWS
        sz = self.memplan.sizes(i)
        return sz.block_bytes, sz.piece_units, min(FINISH_ROWS, sz.finish_rows)

    def _blocks(self, i: int, wanted: Optional[np.ndarray]) -> Iterator[Tuple[int, int]]:
        """Unit ``i``'s destination blocks ``a..b`` holding ``wanted`` nodes (None: all)."""
        indptr, cost = self.memplan.indptrs[i], self.memplan.costs[i]
        n, share = len(indptr) - 1, self._sizes(i)[0]
        a = 0
        while a < n:
            b = (min(n, a + self.given_nodes) if not self.planned
                 else cut(indptr, cost.per_node, share, a, cost.per_edge))
            if wanted is None or wanted[a:b].any():
                yield a, b
            a = b

    def _windows(self, i: int, indptr: np.ndarray, a: int, b: int) -> Iterator[Tuple[int, int]]:
        """Edge ranges of block ``a..b`` within the share: one range, but for hubs."""
        lo, hi, step = self._window_span(i, indptr, a, b)
        for s0 in range(lo, hi, step):
            yield s0, min(int(indptr[b]), s0 + step)

    def _window_span(self, i: int, indptr: np.ndarray, a: int, b: int) -> Tuple[int, int, int]:
        """(first edge, end, step) of block ``a..b``'s windows."""
        lo, hi = int(indptr[a]), int(indptr[b])
        cost = self.memplan.costs[i]
        if not self.planned:
            step = self.given_window
        elif cost.per_edge:
            step = max(MIN_ROWS, (self._sizes(i)[0] - (b - a) * cost.per_node) // cost.per_edge)
        else:
            step = max(1, hi - lo)
        return lo, max(hi, lo + 1), step

    # -- the scheme of a unit ---------------------------------------------------------------------

    def choose(self, i: int, wanted: Optional[np.ndarray] = None) -> SchemeChoice:
        """Unit ``i``'s scheme (``plan.choose_scheme``); units for ``wanted`` nodes only stay on
        the grid."""
        indptr = self.memplan.indptrs[i]
        force = self._forced(i)
        if self.planned and force != "grid" and self.memplan.must_partition(i):
            force = "partitioned"  # the grid would sweep more than MAX_SWEEPS times (the plan's check)
        if force == "partitioned":  # no grid to run: its cost for the comparison only, by the plan
            blocks: Tuple[Tuple[int, int], ...] = ()
            sweeps = self.memplan.sizes(i).sweeps if self.planned else -(-(len(indptr) - 1) // self.given_nodes)
            pretransform = False
        else:
            blocks, sweeps, pretransform = self._grid_run(i, wanted)
        splits = self._splits(i) and (wanted is None or force == "partitioned")
        c = choose_scheme(indptr, sweeps=sweeps, share=self._part_sizes(i)[0], splits=splits, force=force,
                          parts=self.parts, **self._scheme_bytes(i, pretransform))
        return replace(c, blocks=blocks, pretransform=pretransform)

    def _forced(self, i: int) -> Optional[str]:
        """The scheme the options force on unit ``i`` (None: ``auto``)."""
        return None if self.scheme == "auto" else self.scheme

    def _grid_run(self, i: int, wanted: Optional[np.ndarray]) -> Tuple[Tuple[Tuple[int, int], ...], int, bool]:
        """(the grid's blocks for ``wanted`` nodes, their sweeps, whether they sum ``W x`` computed once)."""
        indptr = self.memplan.indptrs[i]
        blocks = tuple(self._blocks(i, wanted))
        sweeps = sum(len(range(*self._window_span(i, indptr, a, b))) if self.planned else 1 for a, b in blocks)
        return blocks, sweeps, self._pretransforms(i, len(blocks))

    def _pretransforms(self, i: int, blocks: int) -> bool:
        """Whether unit ``i``'s blocks sum its ``W x`` rows computed once (``infer_layers``)."""
        return False

    def _splits(self, i: int) -> bool:
        """Whether unit ``i`` can run by source partitions: the Rust folds only."""
        return self.aggregate == "rust"

    def _part_sizes(self, i: int) -> Tuple[int, int, int]:
        """(window or merge block bytes, piece rows, finishing rows) of unit ``i`` by source partitions."""
        block, piece_rows, finish_rows = self._sizes(i)
        if not self.planned:
            block = self.given_nodes * self._given_node_bytes(i)
        return block, piece_rows, finish_rows

    # -- running units ------------------------------------------------------------------------------

    def check(self, upto: int, units: Sequence[int], wanted: Optional[np.ndarray]) -> None:
        """Refuse, before anything is read or written, a budget too small for some of ``units``;
        put the plan and each unit's scheme in :attr:`plan`."""
        if self.planned:
            self.memplan.check(units, grid_only=self.scheme == "grid" or not all(self._splits(i) for i in units))
            grid = self.memplan.describe(units)
            for g, i in zip(grid["layers"], units):
                g.update(layer=self.units[i][0], **({} if self.units[i][1] is None else dict(type=self.units[i][1])))
            self.plan.update(grid=grid)
        self.plan.update(schemes=[self.choose(i, wanted if self.units[i][0] == upto else None).text() for i in units])

    def _run_units(self, upto: int, units: Sequence[int], prev: Dict[Optional[str], Any], scratch: str,
                   emit: Callable[[int, np.ndarray], None], wanted: Optional[np.ndarray], activate_last: bool) -> None:
        """Layers ``1..upto`` of ``units`` from the input readers ``prev`` (per
        type): each layer before ``upto`` written to a layer file in ``scratch`` (``keep``: kept);
        layer ``upto``'s rows go to ``emit(first_node, rows)`` (blocks holding ``wanted`` nodes),
        activated where ``activate_last``."""
        files: List[str] = []
        for layer in range(1, upto + 1):
            cur: Dict[Optional[str], Any] = {}
            for i in (u for u in units if self.units[u][0] == layer):
                t = self.units[i][1]
                if layer == upto:
                    self.compute(i, prev, emit, wanted, activate_last)
                    continue
                width, n = self._width(i), self._count(i)
                name = f"layer{layer}." + ("" if t is None else f"{t}.") + self.hidden_dtype
                path = RowFileWriter(os.path.join(scratch, name), width, self.hidden_dtype).fill(
                    lambda put: self.compute(i, prev, put))
                self.stats["bytes_written"] += os.path.getsize(path)
                files.append(path)
                cur[t] = _core.FeatureReader.matrix(path, n, width, backend=self.backend, direct=self.direct,
                                                    dtype=self.hidden_dtype)
            prev = cur
        if self.keep:
            keep_files(files, self.work_dir, "layer file")

    def compute(self, i: int, prev: Dict[Optional[str], Any], writer: Callable[[int, np.ndarray], None],
                wanted: Optional[np.ndarray] = None, activate: bool = True) -> None:
        """Unit ``i`` from the readers ``prev``, its times and bytes counted in ``stats``."""
        layer, t = self.units[i]
        t0, cpu0 = time.perf_counter(), time.process_time()
        rows_before = sum(r.stats()["bytes_read"] for r in prev.values())
        self._phases = {}
        with self._bar(i) as self._progress:
            extra = self._compute(i, prev, writer, wanted, activate)
        graphs = self._graphs(i)
        neighbors = sum(g.bytes_read for g in graphs)
        rows = sum(r.stats()["bytes_read"] for r in prev.values()) - rows_before
        seconds = time.perf_counter() - t0
        self.stats["layers"].append(dict(layer=layer, **({} if t is None else dict(type=t)), seconds=seconds,
                                         cpu_seconds=time.process_time() - cpu0, neighbor_bytes=neighbors,
                                         row_bytes=rows, phases={p: round(v, 3) for p, v in self._phases.items()},
                                         **extra))
        self.stats["bytes_read_neighbors"] += neighbors
        self.stats["bytes_read_rows"] += rows
        for g in graphs:
            g.bytes_read = 0
        self.log(f"layer {layer}{'' if t is None else ' ' + t}: {seconds:.1f} s")

    def _phase(self, name: str, since: float) -> None:
        """Count the seconds since ``since`` to phase ``name`` of the unit (``stats``)."""
        self._phases[name] = self._phases.get(name, 0.0) + time.perf_counter() - since

    def _done(self, a: int, b: int) -> None:
        """Count destination block ``a..b`` as finished (``stats``, progress bar)."""
        self.stats["blocks"] += 1
        self._progress.update(b - a)

    def _bar(self, i: int) -> Any:
        """The progress bar of unit ``i`` (nodes done)."""
        layer, t = self.units[i]
        return bar(self._count(i), f"layer {layer}/{self.num_layers}" + ("" if t is None else f" {t}"), "node",
                   disable=self.quiet, leave=False, unit_scale=True)


class LayerwiseInference(GnnLayers, BlocksStrategy, TorchFolds, Engine):
    """Each layer's output of ``ckpt``'s model on ``ds`` within ``memory`` bytes;
    :meth:`run` hands rows to a callback, :meth:`close` removes what ``at`` wrote."""

    def __init__(self, ds: Dataset, ckpt: Checkpoint, *, memory: Optional[int] = None, backend: str = "auto",
                 direct: bool = False, work_dir: Optional[str] = None, keep: bool = False, quiet: bool = False,
                 log: Callable[[str], None] = lambda s: None, block_edges: Optional[int] = None,
                 strategy: str = "grid", grid_nodes: Optional[int] = None, overlap: bool = True,
                 aggregate: Optional[str] = None, hidden_dtype: Optional[str] = None, device: Optional[str] = None,
                 scheme: Optional[str] = None, parts: Optional[int] = None, at: Optional[int] = None):
        self.strategy = _options.choice(strategy, STRATEGIES, "strategy")
        #: Where the dense parts run (``--device``); blocks stay in host memory (``models.dense.Torch`` copies them up).
        self.device_name = _options.inference_device(device)
        #: How the hidden layers' rows are stored between layers (``--hidden-dtype``).
        self.hidden_dtype = _options.hidden_dtype(hidden_dtype)
        self._options(backend, direct, work_dir or os.path.dirname(os.path.abspath(ckpt.path)), keep, quiet, log,
                      aggregate, scheme, parts, overlap, self.device_name)
        self.ds, self.ckpt = ds, ckpt
        if self.device_name != "cpu":
            if self.strategy != "grid" or self.aggregate != "rust":
                raise InputError(f"--device {self.device_name}: runs the grid with the Rust folds (the default); "
                                 f"not strategy={self.strategy!r}, aggregate={self.aggregate!r}")
        #: The dense parts' arrays: numpy on the CPU (no PyTorch), torch's on a GPU.
        self.xp = infer_dense.backend(self.device_name)
        self.dense = ckpt.dense(None if self.device_name == "cpu" else self.xp)
        self.graph = self._as_of(ds, {None: NeighborFile(ds)}, at)[None]
        # GCN's normalisation: in-degree without stored self loops, plus the one added.
        self.dinv = self._gcn_dinv() if ckpt.kind == "gcn" else None
        self.widths = widths = self.dense.widths
        self.num_layers = len(self.dense.layers)
        self.units = [(k + 1, None) for k in range(self.num_layers)]
        costs = [self._layer_cost(k) for k in range(self.num_layers)]
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
        #: Whether sizes come from the budget (else tests gave ``grid_nodes`` and ``block_edges``).
        self.planned = grid_nodes is None
        self.grid_nodes = grid_nodes
        self.given_nodes, self.given_piece, self.given_window = grid_nodes, self.block_edges, 4 * self.block_edges
        self.plan = dict(budget=budget, fixed=fixed, held=self.memplan.held, strategy=self.strategy,
                         hidden_dtype=self.hidden_dtype, device=self.device_name,
                         overlap=self.overlap, aggregate=self.aggregate, block_edges=self.block_edges,
                         block_nodes=self.block_nodes)

    @property
    def net(self) -> Any:
        """The PyG model (imports PyTorch): for ``strategy="blocks"`` and ``aggregate="python"``."""
        return self.ckpt.module()

    def _width(self, k: int) -> int:
        return self.widths[k + 1]

    def _count(self, k: int) -> int:
        return self.graph.num_nodes

    def _graphs(self, k: int) -> List[NeighborFile]:
        return [self.graph]

    def _compute(self, k: int, prev: Dict[Optional[str], Any], writer: Callable[[int, np.ndarray], None],
                 wanted: Optional[np.ndarray], activate: bool) -> Dict[str, Any]:
        """Layer ``k`` with the chosen strategy and scheme (:meth:`choose`)."""
        reader = prev[None]
        if self.strategy != "grid":
            self.layer(k, reader, writer, wanted, activate)
            return {}
        choice = self.choose(k, wanted)
        extra: Dict[str, Any] = dict(scheme=choice.scheme, plan=choice.text())
        if choice.scheme == "partitioned":
            share, piece_rows, finish_rows = self._part_sizes(k)
            extra.update(partitioned_layer(self.step(k), reader, writer, wanted, activate, choice.parts,
                                           choice.window_edges, share, piece_rows, finish_rows))
        else:
            extra.update(self.grid_layer(k, reader, writer, wanted, activate, choice))
        return extra

    def run(self, upto: Optional[int] = None, wanted: Optional[np.ndarray] = None,
            emit: Optional[Callable[[int, np.ndarray], None]] = None, activate_last: bool = False) -> None:
        """Layers ``1..upto`` (default: all); layer ``upto``'s rows go to ``emit(first, rows)``
        (blocks holding ``wanted`` nodes), activated where ``activate_last``."""
        L = self.num_layers
        upto = L if upto is None else upto
        if not 1 <= upto <= L:
            raise InputError(f"layer {upto}: the model has layers 1..{L}")
        if self.strategy == "grid":
            self.check(upto, range(upto), wanted)  # before anything is read or written
        # PyTorch only where it is used: the CPU's grid runs without it.
        torch = None
        if self.strategy != "grid" or self.aggregate != "rust" or self.device_name != "cpu" or "torch" in sys.modules:
            import torch
        grad = torch is not None and torch.is_grad_enabled()
        if torch is not None:
            torch.set_grad_enabled(False)
        # numpy's products on one thread: small calls, one per piece (``ringgnn._threads``).
        with _threads.one_blas_thread(), temporary(self.work_dir, "ringgnn-infer", directory=True) as scratch:
            try:
                reader = _core.FeatureReader(self.ds.path, backend=self.backend, direct=self.direct)
                self._run_units(upto, range(upto), {None: reader}, scratch.path, emit, wanted, activate_last)
            finally:
                if torch is not None:
                    torch.set_grad_enabled(grad)
