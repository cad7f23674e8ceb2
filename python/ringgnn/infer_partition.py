"""The source-partitioned scheme of layer-wise inference (issue 24; ``docs/INFERENCE.md``, "The
other scheme: source partitions"): one layer of sums (GraphSAGE's mean, GCN) computed by cutting
the *sources* into partitions instead of the destinations into blocks, so that the layer's input
file is read once rather than once per destination block. ``infer_plan.choose_scheme`` decides
when it is used (when it reads and writes fewer bytes than the grid) and how many partitions.

1. **Bucketing**: one pass over the neighbor file; each edge ``u -> v`` is appended to its source
   partition's bucket (``u`` and ``v`` in two files). Destinations come in increasing order, so
   every bucket is sorted by destination. GCN's stored self loops are dropped here.
2. **Partial sums**: a partition's bucket is taken in windows of at most ``window_edges`` edges;
   each window is one call of the Rust aggregation (``FeatureReader.aggregate``, ``fold="sum"``)
   over its own neighbor list (the bucket's sources) with the destinations it reaches numbered
   compactly, so the partition's rows are read once, in file order, on all cores. GCN's source
   weight ``dinv[u]`` is applied to the piece's rows by the transform (the pieces are the
   window's distinct sources in increasing order, ``piece_rows`` at a time); its destination
   weight ``dinv[v]`` at the merge. Each window's partial sums and their destination ids are
   appended to one spill file pair.
3. **Merge**: per destination block, every window's partials of the block's destinations (found
   by offsets noted when they were spilled) are added up (``index_add_``: a destination split
   between two windows of a partition comes twice); the block is then finished as on the grid
   (``LayerwiseInference._grid_finish``).

Everything goes to files under the run's temporary directory (``_files.temporary``), removed at
the end of the layer. Memory: a window's accumulators and edges (``infer_plan.PART_NODE``,
``PART_EDGE``), a bucketing chunk, and a merge block with one slice of partials, all within the
plan's share."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

import numpy as np

from ._files import os_errors, temporary
from .infer_plan import release_freed

if TYPE_CHECKING:
    from .inference import LayerwiseInference


def _read(path: str, dtype: Any, start: int, count: int, width: int = 1) -> np.ndarray:
    """Rows ``start..start + count`` of a spill or bucket file (``width`` values each)."""
    with os_errors("reading the temporary", path):
        out = np.fromfile(path, dtype=dtype, count=count * width, offset=start * width * np.dtype(dtype).itemsize)
    if len(out) != count * width:
        raise OSError(5, "the temporary ends early", path)
    return out.reshape(count, width) if width > 1 else out


def partitioned_layer(run: "LayerwiseInference", k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                      wanted: Optional[np.ndarray], activate: bool, parts: int, window_edges: int, share: int,
                      piece_rows: int, finish_rows: int) -> Dict[str, int]:
    """Layer ``k`` by source partitions (the module's docstring); rows go to ``writer`` in node
    order (only the merge blocks holding ``wanted`` nodes). Returns the bytes written to and read
    from the temporaries."""
    g, n = run.graph, run.graph.num_nodes
    gcn = run.ckpt.kind == "gcn"
    acc_w = run._acc_width(k)
    bounds = np.linspace(0, n, parts + 1).astype(np.int64)
    # Merge blocks: the block's sums and one slice of partials as large (and ids), within the share.
    merge_rows = max(1, min(n, share // (2 * 4 * acc_w + 16)))
    merge = np.append(np.arange(0, n, merge_rows, dtype=np.int64), n)
    io = dict(temp_written=0, temp_read=0)
    scratch = temporary(run.work_dir, f"ringgnn-infer-parts{k + 1}", directory=True)
    try:
        d = scratch.path
        src_f = [os.path.join(d, f"p{p}.src") for p in range(parts)]
        dst_f = [os.path.join(d, f"p{p}.dst") for p in range(parts)]
        # 1. Bucketing, a chunk of destinations at a time: an edge's ids, partition, order and
        # their reordered copies (about 64 bytes) within the share.
        from .inference import blocks

        chunk = max(1024, share // 80)
        handles: List[Any] = []
        try:
            with os_errors("writing the partition buckets in", d):
                for f in src_f + dst_f:
                    handles.append(open(f, "wb", buffering=0))  # errors come at write()
                for blk in blocks(g.indptr, chunk, 1 << 62):
                    ids = g.edges(blk.lo, blk.hi)
                    dst = run._dst_of(blk)
                    if gcn:  # GCN drops stored self loops (its own is added when finishing)
                        keep = ids != dst
                        ids, dst = ids[keep], dst[keep]
                    p = np.searchsorted(bounds, ids, side="right") - 1
                    order = np.argsort(p, kind="stable")  # each bucket keeps destinations in order
                    ids, dst, p = ids[order], dst[order], p[order]
                    cuts = np.searchsorted(p, np.arange(parts + 1))
                    for q in np.flatnonzero(np.diff(cuts)):
                        s0, s1 = cuts[q], cuts[q + 1]
                        handles[q].write(ids[s0:s1].tobytes())
                        handles[parts + q].write(dst[s0:s1].tobytes())
                    io["temp_written"] += 16 * len(ids)
                    del ids, dst, p, order
        finally:
            for h in handles:
                h.close()
        # 2. Partial sums, a window of a partition's bucket at a time, spilled.
        ids_path, rows_path = os.path.join(d, "partials.ids"), os.path.join(d, "partials.f32")
        marks: List[np.ndarray] = []  # per window: the spill offsets of the merge blocks' bounds
        spilled = 0
        kw: Dict[str, Any] = dict(fold="sum")
        weight = run.dense.transform(k) if run._narrow(k) else None
        with open(ids_path, "wb", buffering=0) as ids_out, open(rows_path, "wb", buffering=0) as rows_out:
            for p in range(parts):
                with os_errors("reading the partition bucket", dst_f[p]):
                    total = os.path.getsize(dst_f[p]) // 8
                for e0 in range(0, total, window_edges):
                    e1 = min(total, e0 + window_edges)
                    dst = _read(dst_f[p], np.int64, e0, e1 - e0)
                    io["temp_read"] += 8 * (e1 - e0)
                    first = np.flatnonzero(np.diff(dst, prepend=-1))
                    reach = dst[first]
                    indptr = np.append(first, e1 - e0).astype(np.int64) + e0
                    del dst, first
                    if gcn or weight is not None:
                        kw.update(width=acc_w,
                                  transform=_transform(run, src_f[p], e0, e1, gcn and run.dinv, weight, io))
                    acc = np.zeros((len(reach), acc_w), dtype=np.float32)
                    got = reader.aggregate(acc, 0, indptr, e0, e1, src_f[p], 8, piece_rows=piece_rows, **kw)
                    io["temp_read"] += got["neighbor_bytes"]
                    kw.pop("transform", None)
                    with os_errors("writing the partial sums", rows_path):
                        ids_out.write(reach.tobytes())
                        rows_out.write(acc.tobytes())
                    io["temp_written"] += reach.nbytes + acc.nbytes
                    marks.append(spilled + np.searchsorted(reach, merge))
                    spilled += len(reach)
                    del acc, reach, indptr
                    release_freed()
                with os_errors("removing the partition bucket", src_f[p]):
                    os.remove(src_f[p])
                    os.remove(dst_f[p])
        # 3. Merge, a destination block at a time, finished as on the grid.
        starts = np.array(marks, dtype=np.int64).reshape(len(marks), len(merge))
        del marks
        slice_rows = merge_rows
        for j in range(len(merge) - 1):
            a, b = int(merge[j]), int(merge[j + 1])
            if wanted is not None and not wanted[a:b].any():
                continue
            acc = np.zeros((b - a, acc_w), dtype=np.float32)
            for w in range(len(starts)):
                for s0 in range(int(starts[w, j]), int(starts[w, j + 1]), slice_rows):
                    s1 = min(int(starts[w, j + 1]), s0 + slice_rows)
                    ids = _read(ids_path, np.int64, s0, s1 - s0)
                    rows = _read(rows_path, np.float32, s0, s1 - s0, acc_w)
                    io["temp_read"] += ids.nbytes + rows.nbytes
                    acc[ids - a] += rows  # a window's destinations are distinct
                    del ids, rows
            if gcn:  # the destination's weight of dinv[u] * dinv[v]
                acc *= run.dinv[a:b][:, None]
            for r0 in range(a, b, finish_rows):
                r1 = min(b, r0 + finish_rows)
                # The dense parts on the run's device (``--device``), as the grid finishes.
                x_dst = run._up(reader.gather(np.arange(r0, r1, dtype=np.int64)))
                out = run._grid_finish(k, {"acc": run._up(acc[r0 - a:r1 - a])}, r0, r1, x_dst)
                if activate:
                    out = run._after(k, out)
                writer(r0, run._down(out))
                del out, x_dst
            del acc
            release_freed()
    finally:
        scratch.close()
    return io


def _transform(run: "LayerwiseInference", src_path: str, e0: int, e1: int, dinv: Any, weight: Any,
               io: Dict[str, int]) -> Callable:
    """The transform of a window's pieces of rows: ``W x`` where the layer narrows (``weight``:
    the dense parts' transform), times GCN's ``dinv[u]``. The Rust core hands the window's
    distinct sources in increasing order, ``piece_rows`` at a time, so the ``i``-th call's rows
    are the next ones of ``np.unique``."""
    scale = None
    if dinv is not None and dinv is not False:
        u = np.unique(_read(src_path, np.int64, e0, e1 - e0))
        io["temp_read"] += 8 * (e1 - e0)
        scale = dinv[u]
    seen = [0]

    def apply(x: np.ndarray) -> np.ndarray:
        t = weight(x) if weight is not None else x
        if scale is not None:
            t = t * scale[seen[0]:seen[0] + len(x), None]
        seen[0] += len(x)
        return np.ascontiguousarray(t, dtype=np.float32)

    return apply


