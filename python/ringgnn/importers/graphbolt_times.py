"""GraphBolt's ``graph.feature_data`` entries named ``timestamp`` (``time_feature``) as node and
edge times (docs/USAGE.md, "Heterogeneous graphs").
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._excerpt import quoted

Key = Tuple[str, Optional[str]]  # (domain "node" or "edge", node or edge type; None: homogeneous)


def key(r: Any, item: dict, at: str, nodes: Dict[Optional[str], int], edge_types: List[Optional[str]]) -> Key:
    """(domain, type) of a ``graph.feature_data`` entry of the times (``r``: the yaml's reader)."""
    domain = r.get(item, "domain", at, str)
    t = r.get(item, "type", at, str, required=False)
    if domain == "node":
        return domain, r.node_type(t, at, nodes)
    if domain != "edge":
        raise r.error(f"{at}.domain", f"{quoted(domain)} is not a domain of times", "use node or edge")
    if t not in edge_types:
        if edge_types == [None]:
            raise r.error(f"{at}.type", f"{quoted(t)} given, but graph.edges has no types", "leave it out")
        raise r.error(f"{at}.type", "missing" if t is None else f"{quoted(t)} is not an edge type of graph.edges",
                      f"use one of {', '.join(map(str, edge_types))}")
    return domain, t


def stage(meta: Any, staging: Any, load: Callable[[Any, Any], np.ndarray]) -> Dict[Key, str]:
    """Each entry of ``meta.times`` as an ``.npy`` the builder reads (``staging``: the import's
    staging directory; ``load``: how the importer reads a described file)."""
    out = {}
    for (domain, t), f in meta.times.items():
        if domain == "node":
            n: Optional[int] = meta.nodes[t]
        else:
            edges = next(e for u, e in meta.edges if u == t)
            n = None if edges.format == "csv" else int(load(meta, edges).shape[1])
        a = load(meta, f)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.ndim != 1 or (n is not None and a.shape[0] != n) or (a.size and a.dtype.kind not in "iu"):
            raise staging.r.error(f.field, f"{f.path} holds {a.dtype} of shape {a.shape}",
                                  f"give one integer time per {domain}" + (f" ({n})" if n is not None else ""))
        if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
            raise staging.r.error(f.field, f"{f.path} holds a time past 2^63 - 1", "give int64 times")
        if f.format == "numpy" and a.dtype in (np.int64, np.int32) and a.dtype.byteorder in "=<|":
            out[domain, t] = f.path
        else:
            out[domain, t] = staging.copy(np.asarray(a, dtype=np.int64), f.field)
    return out
