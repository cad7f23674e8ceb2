"""Layer-wise inference of a heterogeneous run: every node's output of a trained
:class:`~ringgnn.hetero_models.HeteroModel`, exact (every relation's full in-neighbor lists, no
sampling), out of core; what ``ringgnn predict RUN`` and ``ringgnn embed RUN`` run on a run of
``ringgnn train DS --target TYPE``.

The arithmetic is the model's own forward over the whole graph in eval mode (dropout off), one
layer and one destination type at a time. For a destination block ``a..b`` of type ``d`` and
each of the layer's relations ``(s, rel, d)``, the block's in-edges are read from the relation's
neighbor file in pieces (only its offset index is in memory), each piece's distinct sources'
rows of the previous layer are gathered (in id order, with the project's coalesced page reads),
and summed into the block's accumulator (by the Rust core, or numpy for an embedding table's
rows); the mean (an empty one is 0) then goes through the relation's own weights
(``SAGEConv.lin_l``/``lin_r``, R-GCN's relation weight) and the relations are combined as the
model combines them (mean for ``sage``, root term plus sum for ``rgcn``; a type no relation
enters gets its root ``Linear``), then ReLU between layers. Mean aggregation is linear, so
summing in pieces is the same mean as PyG's up to float rounding. The dense parts are numpy
arrays (``ringgnn.hetero_dense``; the checkpoint read without PyTorch, ``ringgnn.torchfile``):
on the CPU nothing here imports PyTorch.

Layer ``l`` computes only the types the requested output needs (within ``upto - l`` hops of
the output type). A type's input rows are its feature file (``node/TYPE``) or, featureless, the
rows of its learned embedding table (held by the model, or the checkpoint's table file read as
a memory map when the run kept it in files, ``ringgnn.hetero_tables``); a layer's rows of each type go to a
file in the feature-file layout (``layerL.TYPE.f32``, :class:`ringgnn.inference.RowFileWriter`)
under a locked temporary directory beside the output (else beside the checkpoint), removed at the
end (``keep=True`` keeps them, moved there). The output is a ``.npy`` written in blocks under a
temporary name and renamed when complete, as ``ringgnn predict`` writes it.

**Memory** (``memory``: the process's budget, as for homogeneous runs). Held throughout: the
runtime, the model (with its embedding tables), every relation's offset index (8 bytes per
destination node), with ``nodes`` the output type's ``wanted`` mask (a byte per node) and, for
accuracy, the target's labels and val/test masks (10 bytes per node), plus
:data:`ringgnn.inference.FIXED_BYTES` of read buffers. What is left, less
:data:`~ringgnn.inference.SLACK`, is split in two: half for a destination block's node state
(its own input rows, one relation's accumulator, the relation's term, the running combination
and the output rows: :data:`NODE_FLOATS` floats of the widest layer per node, and
:data:`~ringgnn.infer_plan.DEST_BYTES`), half for one piece of in-edges (what the sums hold an edge:
:meth:`HeteroLayerwise.edge_bytes`). Block and piece sizes come from those halves.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core, _options
from ._core import InputError
from ._files import keep_files, os_errors, temporary
from .checkpoints import read_checkpoint
from .dataset import HeteroDataset
from .hetero import open_hetero
from .hetero_dense import HeteroDense, dense_of
from .hetero_schema import edge_type_str, target_distances
from .hetero_tables import TableReader, table_file
from .infer_dense import Numpy
from .infer_plan import DEST_BYTES
from .inference import AGGREGATE_ENV, AGGREGATORS, FIXED_BYTES, SLACK, OutputRows, RowFileWriter

#: Floats of the widest layer a destination node of a block holds: its input row, the
#: accumulator (then the mean), the relation's term, its root term, the running combination and
#: the output row.
NODE_FLOATS = 6
#: Bytes an in-edge of a piece summed in Python (numpy: ``aggregate="python"``, and the rows of
#: an embedding table) holds besides its gathered rows (its distinct source's row and its own
#: copy): the file's id, the id as int64, its distinct-source inverse, its local destination, the
#: sort's temporaries. The Rust sums hold ``_core.aggregate_edge_bytes`` an edge instead
#: (:meth:`HeteroLayerwise.edge_bytes`).
PYTHON_EDGE_BYTES = 48
#: The smallest block and piece the budget must allow (smaller ones only add overhead).
MIN_NODES, MIN_EDGES = 256, 1024
#: The outputs a run can write (those of ``ringgnn.inference.infer``).
OUTPUTS = ("logits", "probabilities", "predictions", "embeddings")


def is_hetero_run(read: Tuple[str, Mapping[str, Any]]) -> bool:
    """Whether a checkpoint (what :func:`ringgnn.checkpoints.read_checkpoint` returns) is of a
    heterogeneous run (``args["hetero"]``, the model's config; ``checkpoints.is_hetero_run``)."""
    from .checkpoints import is_hetero_run as hetero

    return hetero(read)  # type: ignore[arg-type]


class _RelationFile:
    """One relation's in-neighbor lists: the offset index in memory, the neighbor file read in
    ranges (sequential reads of the block's entries)."""

    def __init__(self, ds: HeteroDataset, name: str):
        part = ds.relation(name)
        self.name, self.num_edges = name, part.num_edges
        self.indptr = part.indptr().astype(np.int64, copy=False)
        self.dtype = np.uint32 if part.manifest["graph"]["indices_dtype"] == "u32" else np.uint64
        entry = part.manifest["files"].get("indices")
        self.path = None if entry is None else os.path.join(ds.path, entry["path"])
        self.bytes_read = 0

    def edges(self, lo: int, hi: int) -> np.ndarray:
        """Entries ``lo..hi`` of the neighbor file (source ids) as int64."""
        n = hi - lo
        if n <= 0:
            return np.empty(0, dtype=np.int64)
        size = np.dtype(self.dtype).itemsize
        with os_errors("reading the neighbor file of relation " + self.name, self.path):
            out = np.fromfile(self.path, dtype=self.dtype, count=n, offset=lo * size)
        if len(out) != n:
            raise InputError(f"{self.path}: ends before entry {hi}; run `ringgnn verify` on the dataset")
        self.bytes_read += n * size
        return out.astype(np.int64)


class _TableRows:
    """A featureless type's input rows: its embedding table (held by the model, an array), read
    as a feature reader is."""

    def __init__(self, weight: np.ndarray):
        self.weight = weight
        self.dim = int(self.weight.shape[1])

    def gather(self, ids: np.ndarray) -> np.ndarray:
        return self.weight[np.asarray(ids, dtype=np.int64)]

    def stats(self) -> Dict[str, int]:
        return {"bytes_read": 0}


def load_hetero_run(run_dir: str, dataset: Any = None,
                    read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Tuple[HeteroDataset, Any, str]:
    """(dataset, ``HeteroModel`` in eval mode on the CPU, checkpoint path) of a heterogeneous run
    directory (serving's sampled forward; this imports PyTorch); ``dataset`` defaults to the one
    the run was trained on. Errors say what does not fit."""
    from .hetero_models import HeteroModel

    path, state = read if read is not None else read_checkpoint(run_dir, "RUN_DIR")
    ds, cfg = _open_run(run_dir, path, state, dataset)
    try:
        net = HeteroModel.from_config(cfg)
    except (ValueError, TypeError) as e:
        raise InputError(f"{path}: not a readable heterogeneous model ({e})") from None
    _check_fits(ds, net, path)
    try:
        net.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as e:
        raise InputError(f"{path}: the model's weights do not fit its config ({e})") from None
    _attach_tables(net, path, state)
    return ds, net.eval(), path


def load_hetero_dense(run_dir: str, dataset: Any = None,
                      read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Tuple[HeteroDataset, HeteroDense, str]:
    """(dataset, the model's dense parts, checkpoint path) of a heterogeneous run directory, read
    without PyTorch (``ringgnn.torchfile``; ``read``: the checkpoint so read): what layer-wise
    inference runs on. Errors as :func:`load_hetero_run`'s."""
    path, state = read if read is not None else read_checkpoint(run_dir, "RUN_DIR", arrays=True)
    ds, cfg = _open_run(run_dir, path, state, dataset)
    net = HeteroDense.from_state(cfg, state.get("model") or {}, path, "the model's config")
    _check_fits(ds, net, path)
    _attach_tables(net, path, state)
    return ds, net, path


def _open_run(run_dir: str, path: str, state: Mapping[str, Any], dataset: Any) -> Tuple[HeteroDataset, Any]:
    """(dataset, model config) of a heterogeneous run's checkpoint ``state``."""
    cfg = (state.get("args") or {}).get("hetero")
    if not cfg:
        raise InputError(f"{path}: a homogeneous run; use `ringgnn predict`/`ringgnn embed` without --type "
                         "(ringgnn.infer)")
    if dataset is None:
        dataset = (state.get("metrics") or {}).get("dataset")
        if dataset is None:
            raise InputError(f"{path} does not say which dataset it was trained on: give --dataset")
    return open_hetero(dataset, "heterogeneous layer-wise inference"), cfg


def _attach_tables(net: Any, path: str, state: Mapping[str, Any]) -> None:
    """Readers of the tables ``net`` keeps in files: the checkpoint's copies, read out of core."""
    for t in net.external:  # tables kept in files: read from the checkpoint's copy, out of core
        rec = (state.get("tables") or {}).get(t)
        if rec is None:
            raise InputError(f"{path}: node type '{t}' has its embedding table in a file, but the checkpoint names "
                             "none; the run directory is incomplete")
        net.tables[t] = TableReader(table_file(path, rec), net.num_nodes[t], net.embed_dim or net.hidden)


def _check_fits(ds: HeteroDataset, net: Any, path: str) -> None:
    """Refuse a model whose types, counts, feature widths, relations or classes differ from
    ``ds``'s: it was trained on another dataset."""
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
    labels = ds.manifest["node_types"][net.target].get("labels")
    if labels is not None and labels["num_classes"] != net.out_dim:
        raise InputError(f"{path} has {net.out_dim} classes, node type '{net.target}' of {ds.path} has "
                         f"{labels['num_classes']}; {fix}")


class HeteroLayerwise:
    """Layer-wise inference of a heterogeneous model (its dense parts, a
    :class:`~ringgnn.hetero_dense.HeteroDense`, or a live ``HeteroModel``, whose weights it takes)
    over a :class:`HeteroDataset` within ``memory`` bytes (see the module's docstring); :meth:`run`
    hands the rows of one type at one layer to a callback. ``block_nodes``/``piece_edges`` fix
    the sizes (tests)."""

    def __init__(self, ds: HeteroDataset, net: Any, *, memory: Optional[int] = None, backend: str = "auto",
                 direct: bool = False, work_dir: str = ".", keep: bool = False, quiet: bool = True,
                 log: Callable[[str], None] = lambda s: None, block_nodes: Optional[int] = None,
                 piece_edges: Optional[int] = None, aggregate: Optional[str] = None):
        self.ds, self.net, self.num_nodes = ds, dense_of(net), ds.num_nodes_dict
        net = self.net
        #: Who sums a relation's in-neighbors' rows read from a file: ``rust`` (default,
        #: ``FeatureReader.aggregate`` on all threads) or ``python`` (numpy), as for homogeneous
        #: runs (``ringgnn.inference.AGGREGATORS``, ``RINGGNN_INFER_AGGREGATE``). Rows of an
        #: embedding table are summed by numpy either way.
        self.aggregate = _options.choice(aggregate or os.environ.get(AGGREGATE_ENV) or "rust", AGGREGATORS,
                                         f"aggregate ({AGGREGATE_ENV})")
        self.backend, self.direct = _options.backend(backend), bool(direct)
        self.work_dir, self.keep, self.quiet, self.log = work_dir, keep, quiet, log
        used = {edge_type_str(et) for conv in net.convs for et in conv.edge_types}
        self.graph = {r: _RelationFile(ds, r) for r in sorted(used)}
        width = net.embed_dim or net.hidden
        self.widths = [{t: (width if net.in_dims[t] is None else net.in_dims[t]) for t in net.node_types}]
        for layer in range(1, net.layers + 1):
            self.widths.append(dict.fromkeys(net.node_types, net.out_dim if layer == net.layers else net.hidden))
        self.stats: Dict[str, Any] = dict(layers=[], bytes_read_neighbors=0, bytes_read_rows=0, bytes_written=0,
                                          blocks=0)
        w = max(max(d.values()) for d in self.widths)
        per_node, per_edge = 4 * NODE_FLOATS * w + DEST_BYTES, self.edge_bytes()
        # What the process holds now (its anonymous memory: runtime, model and its tables, offset
        # indexes), the library code it keeps touching and the readers' buffers; the rest of the
        # budget is the blocks'.
        fixed = _options.held_memory() + _options.code_bytes() + FIXED_BYTES
        budget = memory if memory is not None else _options.default_memory(cap=1 << 30, held=fixed)
        share = int((budget - fixed) * (1 - SLACK))
        least = MIN_NODES * per_node + MIN_EDGES * per_edge
        if (block_nodes is None or piece_edges is None) and share < least:
            raise InputError(f"--memory {budget:,} bytes: the process already holds {fixed:,} (runtime, model, offset "
                             f"indexes, read buffers); give at least {fixed + int(least / (1 - SLACK)) + 1:,}")
        self.block_nodes = max(1, int(block_nodes if block_nodes is not None else share // 2 // per_node))
        self.piece_edges = max(1, int(piece_edges if piece_edges is not None else share // 2 // per_edge))
        self.plan = dict(budget=budget, fixed=fixed, block_nodes=self.block_nodes, piece_edges=self.piece_edges,
                         aggregate=self.aggregate, per_node=per_node, per_edge=per_edge)

    def edge_bytes(self) -> int:
        """The most bytes an in-edge of a piece holds, over the layers' relations: where the Rust
        core sums it (a relation whose source rows are a file), the core's id
        (``_core.aggregate_edge_bytes``, the one owner of that number) and at most one distinct
        source's row and its id; where numpy does (``aggregate="python"``, an embedding table's
        rows), :data:`PYTHON_EDGE_BYTES` and the row twice (the distinct source's, the edge's)."""
        net, most = self.net, 0
        for layer, conv in enumerate(net.convs, start=1):
            for s, _, _ in conv.edge_types:
                w = self.widths[layer - 1][s]
                table = layer == 1 and net.in_dims[s] is None
                if self.aggregate == "rust" and not table:
                    cost = _core.aggregate_edge_bytes(self.num_nodes[s]) + 8 + 4 * w
                else:
                    cost = PYTHON_EDGE_BYTES + 8 * w
                most = max(most, cost)
        return most

    # -- readers --------------------------------------------------------------------------------

    def _input(self, t: str) -> Any:
        """Layer 0's rows of type ``t``: its feature file, or its embedding table."""
        if self.net.in_dims[t] is None:
            if t in self.net.external:
                return self.net.tables[t]  # its checkpoint's file, read as feature rows are
            return _TableRows(self.net.embeddings[t])
        return _core.FeatureReader(self.ds.path, backend=self.backend, direct=self.direct, part=f"node/{t}")

    # -- one destination block ------------------------------------------------------------------

    def _sums(self, rel: _RelationFile, a: int, b: int, reader: Any) -> Tuple[np.ndarray, np.ndarray]:
        """(the sums of each destination ``a..b``'s in-neighbors' rows by ``rel``, their
        in-degrees), summed a piece of edges at a time."""
        ip = rel.indptr[a:b + 1]
        acc = np.zeros((b - a, reader.dim), np.float32)
        rust = self.aggregate == "rust" and isinstance(reader, _core.FeatureReader)
        for p0 in range(int(ip[0]), int(ip[-1]), self.piece_edges):
            p1 = min(int(ip[-1]), p0 + self.piece_edges)
            if rust:  # the same piece of edges, its distinct sources read in file order, summed on all threads
                got = reader.aggregate(acc, a, ip, p0, p1, rel.path, np.dtype(rel.dtype).itemsize,
                                       piece_rows=self.piece_edges)
                rel.bytes_read += got["neighbor_bytes"]
                continue
            ids = rel.edges(p0, p1)
            counts = np.maximum(np.minimum(ip[1:], p1) - np.maximum(ip[:-1], p0), 0)
            u, inv = np.unique(ids, return_inverse=True)  # sources in id order: reads in file order
            rows = reader.gather(u)[inv.reshape(-1)]
            has = counts > 0  # the piece's edges are grouped by destination (CSC), in order
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[has]
            acc[has] += np.add.reduceat(rows, starts, axis=0)
            del ids, u, inv, rows
        return acc, np.diff(ip)

    def _block(self, layer: int, d: str, a: int, b: int, prev: Mapping[str, Any]) -> np.ndarray:
        """Layer ``layer``'s outputs (before the activation) of type ``d``'s nodes ``a..b``: the
        arithmetic of the model's ``_Layer.forward`` with the block's full neighborhoods
        (``HeteroDense.block``)."""
        conv = self.net.convs[layer - 1]
        x_d = prev[d].gather(np.arange(a, b, dtype=np.int64))
        sums = [(et, *self._sums(self.graph[edge_type_str(et)], a, b, prev[et[0]])) for et in conv.edge_types
                if et[2] == d]
        return self.net.block(layer, d, x_d, sums)

    # -- layers ---------------------------------------------------------------------------------

    def needed(self, upto: int, node_type: str) -> List[List[str]]:
        """Per layer ``0..upto``, the types computed there that ``node_type``'s rows at layer
        ``upto`` depend on (those within ``upto - l`` hops of it)."""
        net = self.net
        dist = target_distances(net.node_types, net.edge_types, node_type)
        return [[t for t in net.computed[k] if dist.get(t, upto + 1) <= upto - k] for k in range(upto + 1)]

    def run(self, upto: int, node_type: str, emit: Callable[[int, np.ndarray], None],
            wanted: Optional[np.ndarray] = None, activate_last: bool = False) -> None:
        """Layers ``1..upto`` for the types ``node_type``'s rows at layer ``upto`` need (layer
        ``upto`` only for ``node_type``, which it must compute); its rows go to ``emit(first,
        rows)`` in node order, for the blocks holding ``wanted`` nodes (None: all).
        ``activate_last``: apply the between-layer ReLU to them (not to layer 0 or the last)."""
        L = self.net.layers
        if node_type not in self.net.computed[upto]:
            raise InputError(f"node type '{node_type}': layer {upto} does not compute it (layers that do: "
                             f"{', '.join(map(str, self.layers_of(node_type)))})")
        need = self.needed(upto, node_type)
        prev = {t: self._input(t) for t in need[0]}
        if upto == 0:
            self._sweep(0, node_type, lambda a, b: prev[node_type].gather(np.arange(a, b, dtype=np.int64)),
                        emit, wanted, False, prev)
            return
        scratch = temporary(self.work_dir, "ringgnn-infer", directory=True)
        files: List[str] = []
        try:
            for layer in range(1, upto + 1):
                cur: Dict[str, Any] = {}
                for d in need[layer]:
                    def block(a: int, b: int, layer=layer, d=d) -> Any:
                        return self._block(layer, d, a, b, prev)

                    if layer == upto:
                        self._sweep(layer, d, block, emit, wanted, activate_last and layer < L, prev)
                        continue
                    path = os.path.join(scratch.path, f"layer{layer}.{d}.f32")
                    w = RowFileWriter(path, self.widths[layer][d])
                    try:
                        self._sweep(layer, d, block, lambda a, rows, w=w: w.append(rows), None, True, prev)
                        w.finish()
                    except BaseException:
                        w.abort()
                        raise
                    self.stats["bytes_written"] += os.path.getsize(path)
                    files.append(path)
                    cur[d] = _core.FeatureReader.matrix(path, self.num_nodes[d], self.widths[layer][d],
                                                        backend=self.backend, direct=self.direct)
                prev = cur
            if self.keep:
                keep_files(files, self.work_dir, "layer file")
        finally:
            scratch.close()

    def layers_of(self, t: str) -> List[int]:
        """The layers (0: the inputs) that compute type ``t``."""
        return [k for k, types in enumerate(self.net.computed) if t in types]

    def _sweep(self, layer: int, d: str, block: Callable[[int, int], Any], emit: Callable[[int, np.ndarray], None],
               wanted: Optional[np.ndarray], activate: bool, prev: Mapping[str, Any]) -> None:
        """``block(a, b)`` for each destination block of type ``d`` in node order (those holding
        ``wanted`` nodes), activated, to ``emit``; the layer's counters in ``stats``."""
        from .progress import bar

        t0 = time.perf_counter()
        rows_before = sum(r.stats()["bytes_read"] for r in prev.values())
        n, step = self.num_nodes[d], self.block_nodes
        with bar(n, f"layer {layer}/{self.net.layers} {d}", "node", disable=self.quiet, leave=False,
                 unit_scale=True) as progress:
            for a in range(0, n, step):
                b = min(n, a + step)
                if wanted is not None and not wanted[a:b].any():
                    continue
                out = np.ascontiguousarray(block(a, b), dtype=np.float32)
                if activate:
                    out = Numpy.relu(out)
                emit(a, out)
                self.stats["blocks"] += 1
                progress.update(b - a)
        neighbors = sum(g.bytes_read for g in self.graph.values())
        rows = sum(r.stats()["bytes_read"] for r in prev.values()) - rows_before
        seconds = time.perf_counter() - t0
        self.stats["layers"].append(dict(layer=layer, type=d, seconds=seconds, neighbor_bytes=neighbors,
                                         row_bytes=rows))
        self.stats["bytes_read_neighbors"] += neighbors
        self.stats["bytes_read_rows"] += rows
        for g in self.graph.values():
            g.bytes_read = 0
        if layer:
            self.log(f"layer {layer} {d}: {seconds:.1f} s")


def infer_hetero(run_dir: str, dataset: Any = None, *, layer: Optional[int] = None, node_type: Optional[str] = None,
                 output: Optional[str] = None, nodes: Any = None, memory: Union[None, int, str] = None,
                 backend: str = "auto", direct: bool = False, out: Optional[str] = None, dtype: str = "f32",
                 keep: bool = False, quiet: bool = True, log: Callable[[str], None] = lambda s: None,
                 block_nodes: Optional[int] = None, piece_edges: Optional[int] = None,
                 read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """Exact layer-wise inference of a heterogeneous run (see the module's docstring); returns a
    summary dict.

    ``node_type``: whose rows (default the run's target). ``output``: ``"logits"`` (the last
    layer: the target only), ``"probabilities"``, ``"predictions"`` (argmax, int64) or
    ``"embeddings"`` (layer ``layer``'s rows, activated as the next layer sees them; ``0``: the
    input rows, features or embedding table); by default ``"logits"``, or ``"embeddings"`` when
    ``layer`` or another type than the target is given, whose default layer is the last hidden
    layer that computes the type. ``nodes``: None/``"all"``, a split name of the type, a ``.npy``
    file or an array of its ids (rows come in that order). With ``out`` (a ``.npy``) the rows are
    written there (``summary["out"]``), else returned as ``summary["array"]``. For the target's
    logits, ``summary["accuracy"]`` holds the accuracy on its ``val`` and ``test`` splits (also as
    ``val_acc``/``test_acc``). ``memory``: the process's budget (bytes or ``"2G"``).
    ``read``: the checkpoint already read without PyTorch
    (:func:`ringgnn.checkpoints.read_checkpoint` with ``arrays=True``)."""
    ds, net, path = load_hetero_dense(run_dir, dataset, read)
    L = net.layers
    node_type = net.target if node_type is None else node_type
    if node_type not in net.node_types:
        raise InputError(f"--type {node_type}: not a node type of the run (it has: {', '.join(net.node_types)})")
    if output is None:
        output = "logits" if layer is None and node_type == net.target else "embeddings"
    if output not in OUTPUTS:
        raise InputError(f"output {output!r}: use {', '.join(OUTPUTS)}")
    if dtype not in ("f32", "f16"):
        raise InputError(f"--dtype {dtype}: use f32 or f16")
    layers_of = [k for k, types in enumerate(net.computed) if node_type in types]
    if not layers_of:
        raise InputError(f"--type {node_type}: the model never uses node type '{node_type}' (more than {L} hops from "
                         f"the target '{net.target}')")
    if output == "embeddings":
        upto = layer if layer is not None else max(k for k in layers_of if k < L)
        if not 0 <= upto <= L:
            raise InputError(f"--layer {upto}: the model has layers 0..{L} (0: the input rows)")
        if upto not in layers_of:
            raise InputError(f"--layer {upto}: layer {upto} of the model does not compute node type '{node_type}' "
                             f"(layers that do: {', '.join(map(str, layers_of))}); give one of them")
    else:
        if layer is not None:
            raise InputError("--layer selects an embedding layer: it goes with embeddings only")
        if node_type != net.target:
            raise InputError(f"--type {node_type}: only the target type '{net.target}' has {output}; use "
                             "`ringgnn embed` for the rows of other types")
        upto = L
    if out is not None and not str(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")

    part = ds.node_type(node_type)
    n = part.num_nodes
    ids = None if nodes is None or (isinstance(nodes, str) and nodes == "all") else _options.seeds(part, nodes,
                                                                                                    "--nodes")
    if ids is not None and len(ids) and (ids.min() < 0 or ids.max() >= n):
        bad = ids[(ids < 0) | (ids >= n)][0]
        raise InputError(f"--nodes: {int(bad)} is not a node of type '{node_type}' (ids 0..{n - 1})")
    scored = upto == L and node_type == net.target
    splits = [s for s in ("val", "test") if scored and s in part.split_names]
    labels = part.labels if splits else None
    masks = {}
    for s in splits if labels is not None else ():
        masks[s] = np.zeros(n, dtype=bool)
        masks[s][part.split(s)] = True
    wanted = None
    if ids is not None:
        wanted = np.zeros(n, dtype=bool)
        wanted[ids] = True
        for m in masks.values():
            wanted |= m

    work_dir = os.path.dirname(os.path.abspath(out)) if out else os.path.dirname(os.path.abspath(path))
    run = HeteroLayerwise(ds, net, memory=_options.size(memory, "memory"), backend=backend, direct=direct,
                          work_dir=work_dir, keep=keep, quiet=quiet, log=log, block_nodes=block_nodes,
                          piece_edges=piece_edges)
    width = run.widths[upto][node_type]
    count = n if ids is None else len(ids)
    right = dict.fromkeys(masks, 0)
    t0 = time.perf_counter()
    rows = OutputRows(output, count, width, dtype, ids, out)

    def emit(a: int, block: np.ndarray) -> None:
        if masks:
            b = a + len(block)
            pred = block.argmax(axis=1)
            for s, m in masks.items():
                sel = m[a:b] & (labels[a:b] >= 0)
                right[s] += int((pred[sel] == labels[a:b][sel]).sum())
        rows.put(a, block)

    try:
        run.run(upto, node_type, emit, wanted, activate_last=output == "embeddings")
        written = rows.finish()
    except BaseException:
        rows.abort()
        raise
    result, np_dtype = rows.result, rows.dtype
    accuracy = {}
    for s, m in masks.items():
        total = int((m & (labels >= 0)).sum())
        accuracy[s] = right[s] / total if total else None
    summary: Dict[str, Any] = dict(
        checkpoint=path, dataset=os.path.abspath(ds.path), heterogeneous=True, target=net.target, type=node_type,
        output=output, layer=upto, rows=count, dim=None if output == "predictions" else width, dtype=str(np_dtype),
        seconds=time.perf_counter() - t0, plan=run.plan, **run.stats)
    if scored:
        summary.update(accuracy=accuracy, val_acc=accuracy.get("val"), test_acc=accuracy.get("test"))
    if written is not None:
        summary["out"] = written
        if part.has_node_ids:  # a type converted from tables: its rows' original ids beside them
            from .node_ids import write_beside

            summary["node_ids"] = write_beside(part, ids, written)
    else:
        summary["array"] = result
    return summary
