"""Original node id files for the id checks' benchmarks (`build_ids_bench.py`, `verify_ids_bench.py`):
n distinct ids in a shuffled order, with `dup` node n-1 repeating node 3's."""
from pathlib import Path
from typing import Optional, Tuple

import numpy as np


def write_ids(ids: Path, data: Path, kind: str, n: int, dup: bool) -> Tuple[str, Path, Optional[Path]]:
    """``(dtype, ids, data)`` as ``ringgnn.convert(node_ids=...)`` takes them: ``kind`` "int", i64
    ids in ``ids``; else strings, u64 offsets in ``ids`` into their bytes in ``data``."""
    perm = np.random.default_rng(0).permutation(n)
    if kind == "int":
        v = perm.astype(np.int64) * 1_000_003 - 7_000_000_000
        if dup:
            v[n - 1] = v[3]
        v.tofile(ids)
        return ("i64", ids, None)
    offsets, total = [np.zeros(1, np.uint64)], 0
    with open(data, "wb") as f:
        for lo in range(0, n, 1 << 22):
            b = [f"user-{x:x}@example.org".encode() for x in perm[lo:lo + (1 << 22)]]
            if dup and lo + (1 << 22) >= n:
                b[-1] = f"user-{perm[3]:x}@example.org".encode()
            lens = np.fromiter((len(s) for s in b), np.uint64, len(b))
            offsets.append(total + np.cumsum(lens))
            total += int(lens.sum())
            f.write(b"".join(b))
    np.concatenate(offsets).astype("<u8").tofile(ids)
    return ("str", ids, data)
