"""Layer-wise inference of a typed run (:func:`infer_hetero`, the engine's kind
:class:`HeteroLayerwise`): a ``HeteroModel``'s or a link run's towers' outputs, exact and out of
core, on numpy dense parts (no PyTorch). A homogeneous dataset's run at times is its one-type
case. docs/INFERENCE.md "Heterogeneous runs"."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from .._files import temporary
from ..data.dataset import Dataset, HeteroDataset
from ..data.schema import EdgeType, edge_type_str, parse_edge_type, target_distances
from ..models.checkpoints import is_hetero_link_run, read_checkpoint
from ..models.dense import Numpy
from ..models.hetero_dense import HeteroDense, dense_of
from ..models.tables import TableReader, table_file
from .engine import Engine
from .graph import NeighborFile, fold_windows, numpy_sums
from .finish import LayerStep, finish_block
from .partition import merge_and_finish, merge_blocks, spill_relations
from .plan import DEST_BYTES, MIN_ROWS, InferencePlan, LayerCost, window_edge_bytes
from .rows import (RowFileWriter, check_output, link_outputs, node_selection, only_embeddings,
                   rows_bytes, trained_on, wanted_mask, write_output)

#: Floats of the widest row a destination holds: input, accumulator, relation term, root term,
#: running combination, output.
NODE_FLOATS = 6
#: Bytes an in-edge of numpy's piece holds besides its rows (ids, inverse, destination, sort).
PYTHON_EDGE_BYTES = 48
#: Rows of an embedding table copied to its layer-0 file at a time (and of layer 0's output).
TABLE_ROWS = 1 << 16


def load_hetero_run(run_dir: str, dataset: Any = None,
                    read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Tuple[HeteroDataset, Any, str]:
    """(dataset, ``HeteroModel`` in eval mode on the CPU, checkpoint path) of a
    typed run directory (imports PyTorch); ``dataset`` defaults to the run's."""
    return _load(run_dir, dataset, read, torch=True)


def load_hetero_dense(run_dir: str, dataset: Any = None,
                      read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Tuple[HeteroDataset, HeteroDense, str]:
    """(dataset, the model's dense parts, checkpoint path) of a typed run
    directory, read without PyTorch (``read``: the checkpoint so read)."""
    return _load(run_dir, dataset, read, torch=False)


def _load(run_dir: str, dataset: Any, read: Optional[Tuple[str, Mapping[str, Any]]],
          torch: bool) -> Tuple[HeteroDataset, Any, str]:
    """The checkpoint read, its dataset opened, the model built, checked and its tables attached."""
    path, state = read if read is not None else read_checkpoint(run_dir, "RUN_DIR", arrays=not torch)
    cfg = (state.get("args") or {}).get("hetero")
    if not cfg:
        raise InputError(f"{path}: a homogeneous run; use `ringgnn predict`/`ringgnn embed` without --type "
                         "(ringgnn.infer)")
    # A homogeneous dataset is the one-type case: the model of a run at times.
    ds = Dataset.opened(trained_on((path, state), dataset))
    if getattr(ds, "part", None) is not None:
        raise InputError(f"{ds.path}: {ds.part} is one part of a heterogeneous dataset; give the whole dataset")
    if torch:
        from ..models.hetero import HeteroModel  # PyTorch: only the sampled forward needs it

        try:
            net = HeteroModel.from_config(cfg)
        except (ValueError, TypeError) as e:
            raise InputError(f"{path}: not a readable heterogeneous model ({e})") from None
    else:
        net = HeteroDense.from_state(cfg, state.get("model") or {}, path, "the model's config")
    _check_fits(ds, net, path)
    if torch:
        try:
            net.load_state_dict(state["model"])
        except (RuntimeError, KeyError) as e:
            raise InputError(f"{path}: the model's weights do not fit its config ({e})") from None
        net.eval()
    attach_tables(net, path, state)
    return ds, net, path


def link_towers(read: Tuple[str, Mapping[str, Any]],
                dataset: Any = None) -> Tuple[HeteroDataset, str, Dict[str, HeteroDense], str]:
    """(dataset, relation ``S:R:D``, towers by side, checkpoint path) of a typed link run read
    without PyTorch; ``dst`` is absent when ``S = D``."""
    path, state = read
    cfg = state["args"]["hetero_link"]
    ds = Dataset.opened(trained_on(read, dataset))
    relation = ds.check_relation(cfg["relation"])
    fits = f"{ds.path}; give the dataset it was trained on"
    model = state.get("model") or {}
    towers = {side: HeteroDense.from_state(cfg[side], model, path, fits, f"encoders.{side}.")
              for side in ("src", "dst") if cfg.get(side) is not None}
    for side, tower in towers.items():
        attach_tables(tower, path, state, f"{side}.")
    unexpected = [k for k in model if not k.startswith(("decoder.", *(f"encoders.{t}." for t in towers)))]
    if unexpected:
        raise InputError(f"{path} does not fit the dataset ({fits}): unexpected {', '.join(unexpected)}")
    return ds, relation, towers, path


def link_tower(read: Tuple[str, Mapping[str, Any]], dataset: Any,
               node_type: Optional[str]) -> Tuple[HeteroDataset, HeteroDense, str, str]:
    """(dataset, the tower encoding ``node_type``, checkpoint path, relation) of a link
    run; ``node_type`` may be left out when ``S = D``."""
    ds, relation, towers, path = link_towers(read, dataset)
    s, _, d = parse_edge_type(relation)
    ends = s if s == d else f"{s} or --type {d}"
    if node_type is None and s != d:
        raise InputError(f"--type: {path} is a link run on {relation}, whose encoders give rows of node types '{s}' "
                         f"(sources) and '{d}' (destinations): give --type {ends}")
    node_type = s if node_type is None else node_type
    if node_type not in (s, d):
        raise InputError(f"--type {node_type}: a link run on {relation} encodes its ends' node types only: give "
                         f"--type {ends}")
    return ds, towers["src"] if node_type == s else towers["dst"], path, relation


def attach_tables(net: Any, path: str, state: Mapping[str, Any], prefix: str = "") -> None:
    """Readers of the tables ``net`` keeps in files, from the checkpoint's copies
    (named ``prefix + TYPE``)."""
    for t in net.external:  # tables kept in files: read from the checkpoint's copy, out of core
        rec = (state.get("tables") or {}).get(prefix + t)
        if rec is None:
            raise InputError(f"{path}: node type '{t}' has its embedding table in a file, but the checkpoint names "
                             "none; the run directory is incomplete")
        net.tables[t] = TableReader(table_file(path, rec), net.num_nodes[t], net.width)


def _check_fits(ds: HeteroDataset, net: Any, path: str) -> None:
    """Refuse a model whose types, counts, widths, relations or classes differ from ``ds``'s."""
    fix = "use the dataset the model was trained on"
    if sorted(net.node_types) != ds.node_types:
        raise InputError(f"{path} was trained with node types {sorted(net.node_types)}, {ds.path} has "
                         f"{ds.node_types}; {fix}")
    have, dims = ds.num_nodes_dict, ds.feature_dims()
    for t in ds.node_types:
        if net.num_nodes.get(t, have[t]) != have[t] or net.in_dims[t] != dims[t]:
            raise InputError(f"{path}: node type '{t}' had {net.num_nodes.get(t, have[t]):,} nodes and "
                             f"features {net.in_dims[t]}, {ds.path} has {have[t]:,} and {dims[t]}; {fix}")
    rels = sorted(edge_type_str(et) for et in net.edge_types)
    if rels != ds.relations:
        raise InputError(f"{path} was trained with relations {rels}, {ds.path} has {ds.relations}; {fix}")
    labels = ds.node_type(net.target).manifest.get("labels")
    if labels is not None and labels["num_classes"] != net.out_dim:
        raise InputError(f"{path} has {net.out_dim} classes, node type '{net.target}' of {ds.path} has "
                         f"{labels['num_classes']}; {fix}")


class HeteroLayerwise(Engine):
    """Layer-wise inference of a typed model (a
    :class:`~ringgnn.models.hetero_dense.HeteroDense` or a live ``HeteroModel``) within ``memory``
    bytes; :meth:`run` hands one type's rows at one layer to a callback. ``block_nodes`` and
    ``piece_edges`` fix the sizes (tests); ``scheme``, ``parts``, ``at``: the engine's."""

    def __init__(self, ds: HeteroDataset, net: Any, *, memory: Optional[int] = None, backend: str = "auto",
                 direct: bool = False, work_dir: str = ".", keep: bool = False, quiet: bool = True,
                 log: Callable[[str], None] = lambda s: None, block_nodes: Optional[int] = None,
                 piece_edges: Optional[int] = None, aggregate: Optional[str] = None, scheme: Optional[str] = None,
                 parts: Optional[int] = None, hidden_dtype: Optional[str] = None, at: Optional[int] = None):
        self.ds, self.net, self.num_nodes = ds, dense_of(net), ds.num_nodes_dict
        net = self.net
        self._options(backend, direct, work_dir, keep, quiet, log, aggregate, scheme, parts, True, "cpu")
        #: f32 unless given: a typed run's outputs stay what they were.
        self.hidden_dtype = _options.hidden_dtype(hidden_dtype or "f32")
        self.num_layers = net.layers
        used = {edge_type_str(et) for conv in net.convs for et in conv.edge_types}
        self.graph = self._as_of(ds, {r: NeighborFile(ds, r) for r in sorted(used)}, at)
        self.widths = [{t: (net.width if net.in_dims[t] is None else net.in_dims[t]) for t in net.node_types}]
        for layer in range(1, net.layers + 1):
            self.widths.append(dict.fromkeys(net.node_types, net.out_dim if layer == net.layers else net.hidden))
        #: The plan's units: each (layer, destination type) computed.
        self.units = [(k, d) for k in range(1, net.layers + 1) for d in net.computed[k]]
        indptrs, costs = zip(*(self._cost(k, d) for k, d in self.units)) if self.units else ((), ())
        rust = self.aggregate == "rust"
        most = max((self.num_nodes[parse_edge_type(r)[0]] for r in used), default=0)
        # The Rust core reads a piece ahead and marks a block's sources in a bitmap, as on the grid.
        self.memplan = InferencePlan(memory, list(indptrs), list(costs), in_flight=2 if rust else 1,
                                     extra=most // 4 + 16 if rust else 0)
        #: Whether the sizes come from the budget (else ``block_nodes``/``piece_edges``: tests).
        self.planned = block_nodes is None and piece_edges is None
        self.given_nodes = max(1, int(block_nodes or MIN_ROWS))
        self.given_piece = self.given_window = max(1, int(piece_edges or MIN_ROWS))
        self.plan: Dict[str, Any] = dict(budget=self.memplan.budget, fixed=self.memplan.fixed,
                                         held=self.memplan.held, aggregate=self.aggregate,
                                         hidden_dtype=self.hidden_dtype)

    def _relations(self, k: int, d: str) -> List[Tuple[EdgeType, NeighborFile]]:
        """Layer ``k``'s relations into type ``d`` (in the layer's order) with their CSCs."""
        return [(et, self.graph[edge_type_str(et)]) for et in self.net.convs[k - 1].edge_types if et[2] == d]

    def _cost(self, k: int, d: str) -> Tuple[np.ndarray, LayerCost]:
        """(unit ``(k, d)``'s offset index: in-degrees summed over the relations into ``d``;
        its :class:`~ringgnn.inference.plan.LayerCost`); blocks are finished whole."""
        rels = self._relations(k, d)
        ip = np.zeros(self.num_nodes[d] + 1, dtype=np.int64)
        for _, g in rels:
            ip += g.indptr
        srcs = [et[0] for et, _ in rels]
        w_src = max((self.widths[k - 1][s] for s in srcs), default=0)
        w = max([self.widths[k - 1][d], self.widths[k][d], w_src])
        if self.aggregate == "rust":
            unit, window = 8 + 4 * w_src, window_edge_bytes(4 * w_src)
            edge = max((_core.aggregate_edge_bytes(self.num_nodes[s]) for s in srcs), default=0)
        else:
            unit, edge, window = PYTHON_EDGE_BYTES + 8 * w_src, 0, 0
        return ip, LayerCost(4 * NODE_FLOATS * w + DEST_BYTES, unit, 0, edge, window)

    # -- the engine's view of a unit ----------------------------------------------------------------

    def _width(self, i: int) -> int:
        k, d = self.units[i]
        return self.widths[k][d]

    def _count(self, i: int) -> int:
        return self.num_nodes[self.units[i][1]]

    def _graphs(self, i: int) -> List[NeighborFile]:
        return list(self.graph.values())

    def _given_node_bytes(self, i: int) -> int:
        return self.memplan.costs[i].per_node + 64

    def _scheme_bytes(self, i: int, pretransform: bool) -> Dict[str, Any]:
        """Unit ``i``'s bytes as ``plan.choose_scheme`` weighs them:
        each relation's source rows as stored, an accumulator row of the widest source."""
        k, d = self.units[i]
        rels = self._relations(k, d)
        input_bytes = 0
        for (s, _, _), _g in rels:
            input_bytes += rows_bytes(self.num_nodes[s], self.widths[k - 1][s], "f32" if k == 1 else self.hidden_dtype)
        acc = 4 * max((self.widths[k - 1][et[0]] for et, _ in rels), default=1)
        return dict(input_bytes=input_bytes, acc_bytes=acc,
                    id_bytes=max((g.id_bytes for _, g in rels), default=4))

    def _forced(self, i: int) -> Optional[str]:
        """A type no relation enters has its root term only: the grid, whatever the scheme."""
        return super()._forced(i) if self._relations(*self.units[i]) else "grid"

    # -- one unit ---------------------------------------------------------------------------------

    def _input(self, t: str, scratch: str) -> Any:
        """Layer 0's rows of type ``t``: its feature file, or its table copied to ``scratch``."""
        if self.net.in_dims[t] is not None:
            return _core.FeatureReader(self.ds.path, backend=self.backend, direct=self.direct, part=f"node/{t}")
        n, dim = self.num_nodes[t], self.widths[0][t]
        table = self.net.tables.get(t) if t in self.net.external else None
        path = os.path.join(scratch, f"layer0.{t}.f32")

        def copy(put: Callable[[int, np.ndarray], None]) -> None:
            for r0 in range(0, n, TABLE_ROWS):
                r1 = min(n, r0 + TABLE_ROWS)
                put(r0, self.net.embeddings[t][r0:r1] if table is None
                    else table.gather(np.arange(r0, r1, dtype=np.int64)))

        RowFileWriter(path, dim).fill(copy)
        return _core.FeatureReader.matrix(path, n, dim, backend=self.backend, direct=self.direct)

    def _sums(self, i: int, g: NeighborFile, a: int, b: int, reader: Any) -> np.ndarray:
        """The sums of destinations ``a..b``'s in-neighbors' rows by relation ``g``."""
        acc = np.zeros((b - a, reader.dim), np.float32)
        piece = self._sizes(i)[1]
        if self.aggregate == "rust":
            fold_windows(reader, g, acc, a, b, self._windows(i, g.indptr, a, b), piece, self._phases, fold="sum")
        else:
            numpy_sums(reader, g, acc, a, b, self._windows(i, g.indptr, a, b), piece)
        return acc

    def _compute(self, i: int, prev: Mapping[str, Any], writer: Callable[[int, np.ndarray], None],
                 wanted: Optional[np.ndarray], activate: bool) -> Dict[str, Any]:
        """Unit ``i``'s rows in node order (blocks holding ``wanted`` nodes):
        ``HeteroDense.block`` on each relation's sums, from the grid or merged from source partitions."""
        k, d = self.units[i]
        choice = self.choose(i, wanted)
        rels = self._relations(k, d)
        step = LayerStep(k, "typed", self.net, None, self.work_dir, 0, dict(fold="sum"),
                         lambda sums, a, b, x: self.net.block(k, d, x, sums), Numpy.relu, lambda x: x,
                         lambda out: np.ascontiguousarray(out, dtype=np.float32), 1, False, self._phases,
                         self._done)
        activate = activate and k < self.num_layers
        io = dict(temp_written=0, temp_read=0)

        def state(a: int, b: int, accs: Iterator[np.ndarray]) -> Callable[..., Iterator[Tuple[Any, ...]]]:
            return lambda r0, r1, x: ((et, acc, np.diff(g.indptr[a:b + 1])) for (et, g), acc in zip(rels, accs))

        if choice.scheme == "partitioned":
            share, piece_rows, _ = self._part_sizes(i)
            merge = merge_blocks(self.num_nodes[d], share, max(self.widths[k - 1][et[0]] for et, _ in rels),
                                 None if self.planned else self.given_nodes)
            with temporary(self.work_dir, f"ringgnn-infer-parts{k}.{d}", directory=True) as scratch:
                spilled = spill_relations(step, [(prev[et[0]], g, self.num_nodes[et[0]], self.widths[k - 1][et[0]],
                                                  dict(fold="sum"), False) for et, g in rels], scratch.path,
                                          choice.parts, merge[0], choice.window_edges, piece_rows, share)
                merge_and_finish(step, spilled, scratch.path, merge, prev[d], writer, wanted, activate,
                                 max(1, self.num_nodes[d]), state, io)
        else:
            for a, b in choice.blocks:
                finish_block(step, a, b, prev[d], writer, b - a, activate,
                             state(a, b, (self._sums(i, g, a, b, prev[et[0]]) for et, g in rels)))
        return dict(scheme=choice.scheme, plan=choice.text(), **io)

    # -- layers ---------------------------------------------------------------------------------

    def needed(self, upto: int, node_type: str) -> List[List[str]]:
        """Per layer ``0..upto``, the types there that ``node_type``'s rows at ``upto`` need."""
        net = self.net
        dist = target_distances(net.node_types, net.edge_types, node_type)
        return [[t for t in net.computed[k] if dist.get(t, upto + 1) <= upto - k] for k in range(upto + 1)]

    def run(self, upto: int, node_type: str, emit: Callable[[int, np.ndarray], None],
            wanted: Optional[np.ndarray] = None, activate_last: bool = False) -> None:
        """Layers ``1..upto`` for the types ``node_type``'s rows at ``upto`` need;
        those rows go to ``emit(first, rows)`` in node order (blocks holding ``wanted`` nodes), with the
        ReLU where ``activate_last``. A budget too small is refused first."""
        if node_type not in self.net.computed[upto]:
            raise InputError(f"node type '{node_type}': layer {upto} does not compute it (layers that do: "
                             f"{', '.join(map(str, self.net.layers_of(node_type)))})")
        need = self.needed(upto, node_type)
        units = [i for i, (k, d) in enumerate(self.units) if k <= upto and d in need[k]]
        self.check(upto, units, wanted)  # before anything is read or written
        with temporary(self.work_dir, "ringgnn-infer", directory=True) as scratch:
            prev = {t: self._input(t, scratch.path) for t in need[0]}
            if upto == 0:  # the input rows, copied
                n = self.num_nodes[node_type]
                for a in range(0, n, TABLE_ROWS):
                    b = min(n, a + TABLE_ROWS)
                    if wanted is None or wanted[a:b].any():
                        emit(a, prev[node_type].gather(np.arange(a, b, dtype=np.int64)))
                        self.stats["blocks"] += 1
                return
            self._run_units(upto, units, prev, scratch.path, emit, wanted, activate_last)


def infer_hetero(run_dir: str, dataset: Any = None, *, layer: Optional[int] = None, node_type: Optional[str] = None,
                 output: Optional[str] = None, nodes: Any = None, memory: Union[None, int, str] = None,
                 backend: str = "auto", direct: bool = False, out: Optional[str] = None, dtype: str = "f32",
                 keep: bool = False, quiet: bool = True, log: Callable[[str], None] = lambda s: None,
                 block_nodes: Optional[int] = None, piece_edges: Optional[int] = None,
                 read: Optional[Tuple[str, Mapping[str, Any]]] = None,
                 hidden_dtype: Optional[str] = None, at: Optional[int] = None) -> Dict[str, Any]:
    """Exact layer-wise inference of a typed run (or a homogeneous dataset's run at
    times); returns a summary dict. Of a link run on ``S:R:D``: the rows of ``node_type``'s tower,
    by default its last layer; no ``predictions`` nor ``probabilities``.

    ``node_type``: whose rows (default the target). ``output``: ``"logits"`` (the target only),
    ``"probabilities"``, ``"predictions"`` or ``"embeddings"`` (layer ``layer``'s rows; ``0``: the
    input rows); default ``"logits"``, or ``"embeddings"`` (of the last hidden layer computing the
    type) when ``layer`` or another type is given. ``nodes``, ``memory``, ``at``: as
    :func:`ringgnn.infer`'s. With ``out`` (a ``.npy``) the rows are written there, else returned as
    ``summary["array"]``. The target's logits add ``accuracy`` on ``val`` and ``test`` (and
    ``val_acc``/``test_acc``). ``read``: the checkpoint already read as arrays. ``hidden_dtype``:
    ``f32`` (default), ``bf16`` or ``f16``."""
    read = read if read is not None else read_checkpoint(run_dir, "RUN_DIR", arrays=True)
    link = is_hetero_link_run(read)
    extra: Dict[str, Any] = {}
    if link:
        check_output(output, dtype)
        link_outputs(run_dir, output)
        ds, net, path, extra["relation"] = link_tower(read, dataset, node_type)
    else:
        ds, net, path = load_hetero_dense(run_dir, dataset, read)
    L = net.layers
    node_type = net.target if node_type is None else node_type
    if node_type not in net.node_types:
        raise InputError(f"--type {node_type}: not a node type of the run (it has: {', '.join(net.node_types)})")
    if output is None:
        output = "logits" if layer is None and node_type == net.target and not link else "embeddings"
    check_output(output, dtype)
    layers_of = net.layers_of(node_type)
    if not layers_of:
        raise InputError(f"--type {node_type}: the model never uses node type '{node_type}' (more than {L} hops from "
                         f"the target '{net.target}')")
    if output == "embeddings":
        # A link run's encoder output is its last layer's; a node run's last hidden layer's.
        upto = layer if layer is not None else L if link else max(k for k in layers_of if k < L)
        if not 0 <= upto <= L:
            raise InputError(f"--layer {upto}: the model has layers 0..{L} (0: the input rows)")
        if upto not in layers_of:
            raise InputError(f"--layer {upto}: layer {upto} of the model does not compute node type '{node_type}' "
                             f"(layers that do: {', '.join(map(str, layers_of))}); give one of them")
    else:
        only_embeddings(layer)
        if node_type != net.target:
            raise InputError(f"--type {node_type}: only the target type '{net.target}' has {output}; use "
                             "`ringgnn embed` for the rows of other types")
        upto = L
    if out is not None and not str(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")

    part = ds.node_type(node_type)
    n = part.num_nodes
    ids = node_selection(part, nodes, of=node_type)
    scored = upto == L and node_type == net.target and not link
    splits = [s for s in ("val", "test") if scored and s in part.split_names]
    labels = part.labels if splits else None
    masks = {}
    for s in splits if labels is not None else ():
        masks[s] = np.zeros(n, dtype=bool)
        masks[s][part.split(s)] = True
    wanted = wanted_mask(n, ids, masks.values())
    work_dir = os.path.dirname(os.path.abspath(out)) if out else os.path.dirname(os.path.abspath(path))
    run = HeteroLayerwise(ds, net, memory=_options.size(memory, "memory"), backend=backend, direct=direct,
                          work_dir=work_dir, keep=keep, quiet=quiet, log=log, block_nodes=block_nodes,
                          piece_edges=piece_edges, hidden_dtype=hidden_dtype, at=at)
    right = dict.fromkeys(masks, 0)

    def fill(put: Callable[[int, np.ndarray], None]) -> None:
        def emit(a: int, block: np.ndarray) -> None:
            if masks:
                b = a + len(block)
                pred = block.argmax(axis=1)
                for s, m in masks.items():
                    sel = m[a:b] & (labels[a:b] >= 0)
                    right[s] += int((pred[sel] == labels[a:b][sel]).sum())
            put(a, block)

        run.run(upto, node_type, emit, wanted, activate_last=output == "embeddings")

    try:
        summary = write_output(run, part, ids, output, upto, run.widths[upto][node_type], dtype, out, fill,
                               dict(checkpoint=path, dataset=os.path.abspath(ds.path), heterogeneous=True,
                                    target=net.target, type=node_type, **extra, **run.times))
    finally:
        run.close()
    if scored:
        accuracy = {}
        for s, m in masks.items():
            total = int((m & (labels >= 0)).sum())
            accuracy[s] = right[s] / total if total else None
        summary.update(accuracy=accuracy, val_acc=accuracy.get("val"), test_acc=accuracy.get("test"))
    return summary
