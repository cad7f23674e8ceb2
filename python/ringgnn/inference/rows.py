"""The files layer-wise inference writes, for both kinds of runs: rows in the feature-file
layout stored as f32, f16 or bf16 (:class:`RowFileWriter`), ``.npy`` outputs written in blocks and
renamed when complete (:class:`MemmapNpyWriter`), output rows converted to what was asked
(:class:`OutputRows`), and what a run does around them (:func:`node_selection`,
:func:`write_output`). A failure leaves no partial file; writers sync every
``plan.SYNC_BYTES`` so that a memory cap does not count their dirty pages."""

from __future__ import annotations

import mmap
import os
import time
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from .. import _options
from .._core import InputError
from .._files import allocated_memmap, os_errors, temporary
from .node_ids import write_beside
from .plan import SYNC_BYTES

PAGE = 4096
#: The outputs layer-wise inference writes (``ringgnn.inference.run.infer``, ``infer_hetero``).
OUTPUTS = ("logits", "probabilities", "predictions", "embeddings")


def check_output(output: Optional[str], dtype: str) -> None:
    """Refuse an ``output`` (None: not asked) or ``dtype`` that inference does not write."""
    if output is not None and output not in OUTPUTS:
        raise InputError(f"output {output!r}: use logits, probabilities, predictions or embeddings")
    if dtype not in ("f32", "f16"):
        raise InputError(f"--dtype {dtype}: use f32 or f16")


def link_outputs(run_dir: Any, output: Optional[str]) -> None:
    """Refuse ``predictions``/``probabilities`` of a link run's nodes: it scores pairs."""
    if output in ("predictions", "probabilities"):
        raise InputError(f"RUN_DIR {run_dir}: a link model scores pairs, it has no {output} of nodes: give --edges "
                         "(a .npy of pairs, or a held-out edge split: val, test), or use `ringgnn embed`")


def trained_on(read: Tuple[str, Mapping[str, Any]], dataset: Any = None) -> Any:
    """``dataset``, else the one the checkpoint ``read`` (path, state) was trained on."""
    if dataset is None:
        dataset = (read[1].get("metrics") or {}).get("dataset")
        if dataset is None:
            raise InputError(f"{read[0]} does not say which dataset it was trained on: give --dataset")
    return dataset


def only_embeddings(layer: Optional[int]) -> None:
    """Refuse ``--layer`` with an output other than embeddings."""
    if layer is not None:
        raise InputError("--layer selects an embedding layer: it goes with embeddings only")


def node_selection(part: Any, nodes: Any, of: Optional[str] = None) -> Optional[np.ndarray]:
    """None for all nodes (``nodes`` None or ``"all"``), else the ids of a split
    name, a ``.npy`` file or an array, checked against ``part`` (node type ``of`` of a typed one)."""
    if nodes is None or (isinstance(nodes, str) and nodes == "all"):
        return None
    ids = _options.seeds(part, nodes, "--nodes")
    bad = ids[(ids < 0) | (ids >= part.num_nodes)]
    if len(bad):
        what = f"{int(bad[0])} is not a node of " + (f"type '{of}'" if of else f"{part.path}")
        raise InputError(f"--nodes: {'' if of else 'node '}{what} (ids 0..{part.num_nodes - 1})")
    return ids


def wanted_mask(n: int, ids: Optional[np.ndarray], also: Iterable[np.ndarray] = ()) -> Optional[np.ndarray]:
    """The nodes (of ``n``) whose rows a run computes: ``ids`` and the masks ``also`` (None: all)."""
    if ids is None:
        return None
    wanted = np.zeros(n, dtype=bool)
    wanted[ids] = True
    for m in also:
        wanted |= m
    return wanted


def write_output(run: Any, part: Any, ids: Optional[np.ndarray], output: str, upto: int, width: int, dtype: str,
                 out: Optional[str], fill: Callable[[Callable[[int, np.ndarray], None]], None],
                 head: Dict[str, Any]) -> Dict[str, Any]:
    """Layer ``upto``'s ``output`` rows of nodes ``ids`` of ``part``, from ``fill(put)``: written
    to ``out`` (original ids beside it) or returned; the summary."""
    count = part.num_nodes if ids is None else len(ids)
    t0 = time.perf_counter()
    rows = OutputRows(output, count, width, dtype, ids, out)
    written = rows.fill(fill)
    summary = dict(head, output=output, layer=upto, rows=count, dim=None if output == "predictions" else width,
                   dtype=str(np.dtype(rows.dtype)), seconds=time.perf_counter() - t0, plan=run.plan, **run.stats)
    if written is not None:
        summary["out"] = written
        if part.has_node_ids:  # converted from tables: the rows' original ids beside them
            summary["node_ids"] = write_beside(part, ids, written)
    else:
        summary["array"] = rows.result
    return summary


def _layout(dim: int, itemsize: int = 4) -> Tuple[int, int]:
    """(row bytes, rows per page; 0 when a row is larger than a page) of ``dim`` values."""
    row = itemsize * dim
    return row, (PAGE // row if row <= PAGE else 0)


#: numpy's storage type of each row dtype (bf16 is stored as its 16 bits).
_STORED = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2")}


def rows_bytes(n: int, dim: int, dtype: str = "f32") -> int:
    """Bytes of ``n`` rows of ``dim`` values stored as ``dtype`` in the feature-file layout."""
    row, per_page = _layout(dim, _STORED[dtype].itemsize)
    return n * row if per_page == 0 else -(-n // per_page) * PAGE


def encode_rows(rows: np.ndarray, dtype: str) -> np.ndarray:
    """float32 rows as stored in a ``dtype`` rows file: f32 as they are, f16 by numpy,
    bf16 rounded to nearest even as PyTorch does (NaN stays NaN)."""
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


def sync_and_drop(f: Any) -> None:
    """Push the open file ``f`` to disk and drop its pages from the page cache."""
    f.flush()
    os.fdatasync(f.fileno())
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


class _Sink:
    def fill(self, run: Callable[[Callable[[int, np.ndarray], None]], None]) -> Any:
        """``run(self.put)``, then :meth:`finish`; an error anywhere removes the output (``abort``)."""
        try:
            run(self.put)
            return self.finish()
        except BaseException:
            self.abort()
            raise


class RowFileWriter(_Sink):
    """Appends float32 rows, stored as ``dtype``, to a file in the feature-file layout under a
    locked temporary name; :meth:`finish` pads, syncs and renames. OS errors name the file."""

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
        self.unsynced = self.next = 0

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
        """Write, syncing and dropping the page cache every ``SYNC_BYTES``."""
        with os_errors("writing", self.path):
            self.f.write(data)
            self.unsynced += len(data)
            if self.unsynced >= SYNC_BYTES:
                sync_and_drop(self.f)
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

    def put(self, a: int, rows: np.ndarray) -> None:
        """Append the rows of nodes ``a ..`` (they come in node order)."""
        assert a == self.next, "blocks come in node order"
        self.append(rows)
        self.next = a + len(rows)

    def abort(self) -> None:
        try:
            if not self.f.closed:
                self.f.close()
        except OSError:
            pass  # the error being handled is the one to report
        self.temp.close()


class MemmapNpyWriter:
    """A ``.npy`` array of a known shape written through a memory map, in blocks of rows at any
    positions, under a temporary name, renamed when :meth:`finish` is called (never left
    half-written); ``_files.NpyWriter`` is the one that appends rows of an unknown count."""

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
        """Push the rows so far to disk and drop them from the mapping and the page cache."""
        with os_errors("writing", self.path):
            self.array.flush()
            m = getattr(self.array, "_mmap", None)
            if m is not None and hasattr(m, "madvise"):
                m.madvise(mmap.MADV_DONTNEED)  # a shared file mapping: the data stays in the file
            with open(self.tmp, "rb") as f:
                sync_and_drop(f)
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


class OutputRows(_Sink):
    """Where a run's output rows of one node type go: each block converted to ``output``, each
    row at its position in ``ids`` (None: at its id), into a ``.npy`` (``out``) or an array."""

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
        self.sink = MemmapNpyWriter(str(out), self.shape, self.dtype) if out else None
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
