"""Learned embedding tables kept in files (:class:`FileTable`) where a featureless
type's table and its SparseAdam state do not fit the memory plan: rows gathered and stepped in
place, copied beside each checkpoint (:func:`save_tables`, :func:`load_tables`)."""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from .._core import InputError
from .._files import allocated_memmap, os_errors, replacing

#: The arrays of a table: the weights and SparseAdam's two moments.
PARTS = ("weight", "exp_avg", "exp_avg_sq")
#: Rows copied or initialized at a time (64 MiB of float32 rows of 64 values).
BLOCK_ROWS = 1 << 18


class FileTable:
    """One featureless type's table in files (see the module docs); ``directory`` holds
    ``TYPE.weight.npy``, ``TYPE.exp_avg.npy`` and ``TYPE.exp_avg_sq.npy``."""

    def __init__(self, directory: str, node_type: str, num_nodes: int, dim: int, *, create: bool = False,
                 lr: float = 0.01, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.directory, self.node_type = directory, node_type
        self.num_nodes, self.dim = int(num_nodes), int(dim)
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.steps = 0
        self.arrays: Dict[str, np.memmap] = {}
        try:
            for part in PARTS:
                path = self.path(part)
                if create:
                    with os_errors("creating the embedding table file", path):
                        os.makedirs(directory, exist_ok=True)
                        self.arrays[part] = allocated_memmap(path, np.float32, (self.num_nodes, self.dim))
                else:
                    with os_errors("opening the embedding table file", path):
                        self.arrays[part] = _open(path, (self.num_nodes, self.dim), "r+")
        except BaseException:
            made = list(self.arrays) if create else []
            self.arrays.clear()  # unmapped before the files it made are removed
            for part in made:
                with contextlib.suppress(OSError):
                    os.remove(self.path(part))
            raise
        if create:
            import torch

            w = self.arrays["weight"]
            for lo in range(0, self.num_nodes, BLOCK_ROWS):  # nn.Embedding's init: N(0, 1)
                hi = min(self.num_nodes, lo + BLOCK_ROWS)
                w[lo:hi] = torch.randn(hi - lo, self.dim).numpy()
            for part in PARTS[1:]:
                self.arrays[part][:] = 0
            self.flush()

    def path(self, part: str) -> str:
        return os.path.join(self.directory, f"{self.node_type}.{part}.npy")

    def gather(self, ids: np.ndarray) -> Any:
        """The rows of ``ids`` as a float32 leaf tensor that requires a gradient."""
        import torch

        rows = torch.from_numpy(np.asarray(self.arrays["weight"][np.asarray(ids, dtype=np.int64)]))
        return rows.requires_grad_(True)

    def step(self, ids: np.ndarray, grad: Optional[Any]) -> None:
        """SparseAdam on rows ``ids`` with gradient ``grad`` (repeated ids summed; None
        or no ids still counts the step, as ``torch.optim.SparseAdam`` does)."""
        import torch

        self.steps += 1
        ids = np.asarray(ids, dtype=np.int64)
        if grad is None or not len(ids):
            return
        u, inv = np.unique(ids, return_inverse=True)
        g = torch.zeros(len(u), self.dim).index_add_(0, torch.from_numpy(inv.reshape(-1)), grad.detach().float())
        b1, b2 = self.betas
        m_old = torch.from_numpy(np.asarray(self.arrays["exp_avg"][u]))
        v_old = torch.from_numpy(np.asarray(self.arrays["exp_avg_sq"][u]))
        m_upd = g.sub(m_old).mul_(1 - b1)
        v_upd = g.pow(2).sub_(v_old).mul_(1 - b2)
        m_new = m_upd.add_(m_old)
        v_new = v_upd.add_(v_old)
        denom = v_new.sqrt().add_(self.eps)
        step_size = self.lr * math.sqrt(1 - b2 ** self.steps) / (1 - b1 ** self.steps)
        w = torch.from_numpy(np.asarray(self.arrays["weight"][u]))
        w.add_(m_new.div(denom).mul_(-step_size))
        self.arrays["exp_avg"][u] = m_new.numpy()
        self.arrays["exp_avg_sq"][u] = v_new.numpy()
        self.arrays["weight"][u] = w.numpy()

    def flush(self) -> None:
        for a in self.arrays.values():
            a.flush()

    def reader(self) -> "TableReader":
        """The live weights read as a checkpoint's are (evaluation during training)."""
        r = TableReader.__new__(TableReader)
        r.path, r.weight, r.dim, r.bytes_read = self.path("weight"), self.arrays["weight"], self.dim, 0
        return r

    def state(self) -> Dict[str, Any]:
        return {"num_nodes": self.num_nodes, "dim": self.dim, "steps": self.steps, "lr": self.lr,
                "betas": list(self.betas), "eps": self.eps}


def _open(path: str, shape: Tuple[int, int], mode: str) -> np.memmap:
    """A table file as a memory map, checked: float32 of ``shape``."""
    a = np.load(path, mmap_mode=mode)
    if a.dtype != np.float32 or tuple(a.shape) != tuple(shape):
        raise InputError(f"{path}: an embedding table of {a.dtype} {tuple(a.shape)}, expected float32 {tuple(shape)}; "
                         "the run directory's table files do not match its checkpoint")
    return a


def _copy(src: str, dst: str, operation: str) -> None:
    """``src`` (a ``.npy``) to ``dst``, in blocks, whole or not at all."""
    a = np.load(src, mmap_mode="r")
    with replacing(dst, operation) as tmp:
        out = allocated_memmap(tmp, a.dtype, a.shape)
        _copy_rows(a, out)
        out.flush()
        del out


def _copy_rows(src: np.ndarray, dst: np.ndarray) -> None:
    """``src``'s rows into ``dst``, :data:`BLOCK_ROWS` at a time."""
    for lo in range(0, src.shape[0], BLOCK_ROWS):
        dst[lo:lo + BLOCK_ROWS] = src[lo:lo + BLOCK_ROWS]


def save_tables(tables: Mapping[str, FileTable], checkpoint: str, tag: Optional[str] = None) -> Dict[str, Any]:
    """Copy every table's files beside ``checkpoint`` (``RUN/last.TAG.TYPE.PART.npy``),
    each written whole; returns what the checkpoint records of them."""
    out = {}
    base = os.path.splitext(os.path.basename(checkpoint))[0] + (f".{tag}" if tag else "")
    folder = os.path.dirname(os.path.abspath(checkpoint))
    for t, table in tables.items():
        table.flush()
        files = {}
        for part in PARTS:
            name = f"{base}.{t}.{part}.npy"
            _copy(table.path(part), os.path.join(folder, name), "writing the embedding table")
            files[part] = name
        out[t] = dict(table.state(), files=files)
    return out


def prune_tables(checkpoint: str, records: Mapping[str, Any]) -> None:
    """Remove the table files of earlier versions of ``checkpoint`` that ``records`` does not name."""
    base = os.path.splitext(os.path.basename(checkpoint))[0] + "."
    folder = os.path.dirname(os.path.abspath(checkpoint))
    keep = {f for rec in records.values() for f in rec["files"].values()}
    parts = tuple(f".{t}.{p}.npy" for t in records for p in PARTS)
    for name in os.listdir(folder):
        if name.startswith(base) and name.endswith(parts) and name not in keep:
            with os_errors("removing an old embedding table copy", os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))


def table_file(checkpoint: str, record: Mapping[str, Any], part: str = "weight") -> str:
    """The path of a checkpoint's table file ``part``."""
    return os.path.join(os.path.dirname(os.path.abspath(checkpoint)), record["files"][part])


def load_tables(tables: Mapping[str, FileTable], checkpoint: str, records: Mapping[str, Any]) -> None:
    """Copy a checkpoint's table files into the live ``tables`` (``--resume``) with their step counts."""
    for t, table in tables.items():
        rec = records.get(t)
        if rec is None or rec["num_nodes"] != table.num_nodes or rec["dim"] != table.dim:
            raise InputError(f"--resume: {checkpoint} has no embedding table file for node type '{t}' of "
                             f"{table.num_nodes:,} x {table.dim}; start over with --overwrite")
        for part in PARTS:
            src = table_file(checkpoint, rec, part)
            _copy_rows(_open(src, (table.num_nodes, table.dim), "r"), table.arrays[part])
        table.steps = int(rec["steps"])
        table.flush()


class TableReader:
    """A checkpoint's table weights read as feature rows are (``gather``, ``dim``, ``stats``)."""

    def __init__(self, path: str, num_nodes: int, dim: int):
        self.path = path
        with os_errors("reading the embedding table", path):
            self.weight = _open(path, (int(num_nodes), int(dim)), "r")
        self.dim = int(dim)
        self.bytes_read = 0

    def gather(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        self.bytes_read += len(ids) * self.dim * 4
        return np.ascontiguousarray(self.weight[ids], dtype=np.float32)

    def stats(self) -> Dict[str, int]:
        return {"bytes_read": self.bytes_read}


__all__ = ("FileTable", "PARTS", "TableReader", "load_tables", "prune_tables", "save_tables", "table_file")
