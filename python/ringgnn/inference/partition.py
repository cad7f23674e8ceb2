"""The source-partitioned scheme: a unit computed by cutting the sources into
partitions (bucketing, partials per window, merge per destination block; ``_core.SourcePartitions``),
so the input is read once rather than once per block. docs/INFERENCE.md "The other scheme:
source partitions"."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core, _threads
from .._files import allocated_memmap, os_errors, temporary
from .finish import LayerStep, finish_block, map_slices, slice_reader, split_rows
from .graph import PHASES
from .plan import release_freed

#: Bytes an edge of a bucketing chunk takes in the Rust core.
CHUNK_EDGE = 24


def merge_blocks(n: int, share: int, width: int, rows: Optional[int] = None) -> Tuple[np.ndarray, int]:
    """(merge block bounds over ``n`` destinations, a thread's slice rows) within ``share`` bytes."""
    rows = max(1, min(n, rows or share // (2 * 4 * width + 16)))
    return np.append(np.arange(0, n, rows, dtype=np.int64), n), max(1, rows // _threads.cores())


def spill_partials(reader: Any, g: Any, sources: int, d: str, parts: int, merge: np.ndarray, width: int,
                   kw: Dict[str, Any],
                   window_edges: int, piece_rows: int, share: int, drop_self_loops: bool,
                   phases: Dict[str, float]) -> Any:
    """Bucket relation ``g``'s edges into ``parts`` source partitions under ``d``
    and spill each window's partials (``FeatureReader.partials`` with ``kw``); returns the
    ``_core.SourcePartitions`` ready to merge."""
    bounds = np.linspace(0, sources, parts + 1).astype(np.int64)
    with os_errors("writing the partition buckets in", d):
        sp = _core.SourcePartitions(d, bounds, merge, g.num_nodes, g.id_bytes, width)
        t = time.perf_counter()
        sp.bucket(g.path, g.indptr, drop_self_loops=drop_self_loops, chunk_edges=max(1024, share // CHUNK_EDGE))
        phases["bucket"] = phases.get("bucket", 0.0) + time.perf_counter() - t
    for q in range(sp.parts):
        total = sp.edges(q)
        for e0 in range(0, total, window_edges):
            with os_errors("spilling the partial aggregates in", d):
                got = reader.partials(sp, q, e0, min(total, e0 + window_edges), piece_rows=piece_rows, **kw)
            for p in PHASES:
                phases[p] = phases.get(p, 0.0) + got[p]
            release_freed()
        with os_errors("removing the partition bucket in", d):
            sp.remove_bucket(q)
    return sp


def spilled_io(sp: Any, g: Any, io: Dict[str, int]) -> None:
    """Count ``sp``'s temporaries' bytes in ``io`` and its neighbor bytes in ``g.bytes_read``."""
    got = sp.io
    g.bytes_read += got["neighbor_bytes"]
    io["temp_written"] += got["temp_written"]
    io["temp_read"] += got["temp_read"]


def spill_relations(step: LayerStep, relations: Sequence[Tuple[Any, ...]], d: str, parts: int, merge: np.ndarray,
                    window_edges: int, piece_rows: int, share: int) -> List[Tuple[Any, Any, int, str]]:
    """:func:`spill_partials` for each of a unit's ``relations``, each in its own directory;
    per relation (``SourcePartitions``, graph, width, fold)."""
    spilled = []
    for r, (src, g, sources, width, kw, drop) in enumerate(relations):
        sub = os.path.join(d, str(r))
        os.mkdir(sub)
        spilled.append((spill_partials(src, g, sources, sub, parts, merge, width, kw, window_edges, piece_rows,
                                       share, drop, step.phases), g, width, kw["fold"]))
    return spilled


def merge_and_finish(step: LayerStep, spilled: Sequence[Tuple[Any, Any, int, str]], d: str,
                     merge: Tuple[np.ndarray, int], reader: Any, writer: Callable[[int, np.ndarray], None],
                     wanted: Optional[np.ndarray], activate: bool, finish_rows: int,
                     state: Callable[[int, int, Iterator[np.ndarray]], Callable[..., Any]], io: Dict[str, int],
                     heads: int = 0) -> None:
    """Per merge block holding ``wanted`` nodes, each relation's merged partials
    handed to ``state(a, b, accs)`` and the block finished; the temporaries' bytes go to ``io``."""
    bounds, slice_rows = merge

    def accs(j: int, a: int, b: int) -> Iterator[np.ndarray]:
        for sp, _, width, fold in spilled:
            acc = np.empty((b - a, width), dtype=np.float32)
            t = time.perf_counter()
            with os_errors("merging the partial aggregates in", d):
                sp.merge(j, acc, fold, heads=heads, slice_rows=slice_rows)
            step.phase("merge", t)
            yield acc

    for j in range(len(bounds) - 1):
        a, b = int(bounds[j]), int(bounds[j + 1])
        if wanted is not None and not wanted[a:b].any():
            continue
        st = state(a, b, accs(j, a, b))
        t = time.perf_counter()
        finish_block(step, a, b, reader, writer, finish_rows, activate, st)
        del st
        release_freed()
        step.phase("finish", t)
    for sp, g, _, _ in spilled:
        spilled_io(sp, g, io)


def partitioned_layer(step: LayerStep, reader: Any, writer: Callable[[int, np.ndarray], None],
                      wanted: Optional[np.ndarray], activate: bool, parts: int, window_edges: int, share: int,
                      piece_rows: int, finish_rows: int) -> Dict[str, int]:
    """Layer ``step.k`` of a homogeneous model by source partitions; rows go to
    ``writer`` in node order. Returns the temporaries' bytes written and read."""
    k, g = step.k, step.graph
    gat = step.kind == "gat"
    scratch = temporary(step.work_dir, f"ringgnn-infer-parts{k + 1}", directory=True)
    io = dict(temp_written=0, temp_read=0)
    try:
        d = scratch.path
        kw = dict(step.fold)
        if gat:
            t = time.perf_counter()
            kw["a_dst"] = _destination_logits(step, reader, os.path.join(d, "a_dst.npy"), finish_rows)
            io["temp_written"] += kw["a_dst"].nbytes
            step.phase("start", t)
        merge = merge_blocks(g.num_nodes, share, step.acc_width)
        # A piece's product on all cores (``infer_finish.split_rows``), as on the grid.
        with split_rows(kw.get("transform"), step.workers if "transform" in kw else 1) as fn:
            if fn is not None:
                kw["transform"] = fn
            spilled = spill_relations(step, [(reader, g, g.num_nodes, step.acc_width, kw, step.kind in ("gcn", "gat"))],
                                      d, parts, merge[0], window_edges, piece_rows, share)
        if gat:
            io["temp_read"] += kw["a_dst"].nbytes
        del kw  # GAT's destination logits: read by the spill only

        def state(a: int, b: int, accs: Iterator[np.ndarray]) -> Callable[[int, int, Any], Dict[str, Any]]:
            acc = next(accs)  # GAT's self loop is folded in here, as the grid folds it in at the start
            return lambda r0, r1, x: (_with_self_loop(step, acc[r0 - a:r1 - a], x) if gat
                                      else {"acc": step.up(acc[r0 - a:r1 - a])})

        merge_and_finish(step, spilled, d, merge, reader, writer, wanted, activate, finish_rows, state, io,
                         heads=step.dense.layers[k].heads if gat else 0)
        del spilled
    finally:
        scratch.close()
    return io


def _destination_logits(step: LayerStep, reader: Any, path: str, rows: int) -> np.ndarray:
    """GAT's destination logits ``[n, heads]`` in file ``path``, read back as a memory map."""
    n, heads = step.graph.num_nodes, step.dense.layers[step.k].heads
    with os_errors("writing GAT's destination logits to", path):
        out = allocated_memmap(path, np.float32, (n, heads))

        def put(r0: int, got: np.ndarray, out: np.ndarray = out) -> None:
            out[r0:r0 + len(got)] = got

        # Read ahead and computed on all cores, as finishing is (``infer_finish``).
        map_slices(range(0, n, rows), slice_reader(reader, n, rows),
                   lambda r0, x: step.down(step.dense.gat_start(step.k, step.up(x))[0]), put,
                   step.workers, step.overlap)
        out.flush()
        del out, put
    return np.load(path, mmap_mode="r")


def _with_self_loop(step: LayerStep, acc: np.ndarray, x: Any) -> Dict[str, Any]:
    """GAT's merged aggregates ``acc`` with each node's self loop folded in."""
    layer = step.dense.layers[step.k]
    H, C = layer.heads, layer.channels
    _, e, xs = step.dense.gat_start(step.k, x)
    e, xs = step.down(e), step.down(xs).reshape(-1, H, C)
    n = len(acc)
    msg, m, z = acc[:, :H * C].reshape(n, H, C), acc[:, H * C:H * C + H], acc[:, H * C + H:]
    top = np.maximum(m, e)  # finite: the self loop's logit is
    scale, own = np.exp(m - top), np.exp(e - top)  # exp(-inf) = 0 where no in-edges
    msg = msg * scale[:, :, None] + xs * own[:, :, None]
    return dict(msg=step.up(np.ascontiguousarray(msg.reshape(n, H * C), dtype=np.float32)),
                z=step.up(np.ascontiguousarray(z * scale + own, dtype=np.float32)))
