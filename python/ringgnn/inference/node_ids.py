"""The original ids beside an output: ``OUT.node_ids.npy`` next to ``OUT.npy`` for
datasets with original ids (``docs/FORMAT.md`` "Original node ids"): int64, uint64 or fixed-width
unicode, written in blocks, whole or not at all."""

from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from .._files import NpyWriter, replacing

#: Nodes per block read and written.
BLOCK = 1 << 20


def path_beside(out: str) -> str:
    """``preds.npy`` -> ``preds.node_ids.npy``."""
    stem = out[:-4] if out.endswith(".npy") else out
    return stem + ".node_ids.npy"


def write_beside(ds: Any, nodes: Optional[np.ndarray], out: str) -> str:
    """Write the original ids of ``nodes`` (dense ids, None: all, in order) beside ``out``;
    returns the path."""
    n = ds.num_nodes if nodes is None else len(nodes)
    dtype = ds.manifest["node_ids"]["dtype"]
    if dtype == "str":
        longest = 0
        for a in range(0, n, BLOCK):
            block = ds.node_ids(_block(nodes, a, min(n, a + BLOCK)))
            longest = max(longest, max((len(s) for s in block), default=0))
        np_dtype = np.dtype(f"<U{max(1, longest)}")
    else:
        np_dtype = np.dtype("<i8" if dtype == "i64" else "<u8")
    path = path_beside(out)
    with replacing(path) as tmp:
        with NpyWriter(tmp, np_dtype) as w:
            for a in range(0, n, BLOCK):
                w.write(np.asarray(ds.node_ids(_block(nodes, a, min(n, a + BLOCK))), dtype=np_dtype))
            w.close()
    return os.fspath(path)


def _block(nodes: Optional[np.ndarray], a: int, b: int) -> np.ndarray:
    return np.arange(a, b, dtype=np.int64) if nodes is None else np.asarray(nodes[a:b], dtype=np.int64)
