"""PyG objects in and out: :func:`from_pyg` builds a dataset from a ``Data`` or ``HeteroData``,
:func:`to_pyg` loads one that fits in memory back. A ``Data`` is the case of one node type and
one relation."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from .. import _core
from .._core import InputError
from .._files import os_errors
from .._options import default_memory, size
from ..data import build
from ..data.schema import HOMOGENEOUS_RELATION, HOMOGENEOUS_TYPE, edge_type_str, parse_edge_type
from ._stage import SPLIT_ALIASES, LabelWriter, PathLike, Staging, check_ids, split_names, unambiguous_edges

_SPLITS = ("train", "val", "test")
_PREFIXES = [(s, s) for s in _SPLITS] + list(SPLIT_ALIASES.items())
#: What from_pyg reads of a store; anything else is reported as skipped.
_READ = {"edge_index", "x", "y", "num_nodes", "time", "edge_time"} | \
    {f"{p}_{k}" for p, _ in _PREFIXES for k in ("mask", "idx", "index")}

log = logging.getLogger(__name__)


def _skipped(data: Any) -> None:
    stores = [(None, data)] if not hasattr(data, "node_types") else \
        [(t, data[t]) for t in data.node_types] + [(et, data[et]) for et in data.edge_types]
    for where, store in stores:
        extra = sorted(k for k in store.keys() if k not in _READ)
        if extra:
            log.warning("from_pyg: not converted%s: %s (ringgnn stores a graph, x, y, splits and times)",
                        "" if where is None else f" of {where}", ", ".join(extra))


def _numpy(t: Any, where: str) -> np.ndarray:
    import torch

    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    if isinstance(t, np.ndarray):
        return t
    raise InputError(f"{where}: a {type(t).__name__}, not a tensor; give a torch.Tensor")


class _Stager:
    def __init__(self, stage: Staging):
        self.stage = stage

    def edges(self, store: Any, where: str, n_src: int, n_dst: int) -> str:
        e = getattr(store, "edge_index", None)
        if e is None:
            adj = " (it has adj_t: give edge_index, e.g. with torch_geometric.transforms.ToSparseTensor's inverse)" \
                if getattr(store, "adj_t", None) is not None else ""
            raise InputError(f"{where}: no edge_index{adj}; give the edges as a (2, E) tensor")
        a = _numpy(e, f"{where}.edge_index")
        if a.ndim != 2 or a.shape[0] != 2 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"{where}.edge_index: {a.dtype} of shape {tuple(a.shape)}; "
                             "give integer ids of shape (2, E)")
        a = a.astype(np.int64, copy=False)
        for row, n, end in ((0, n_src, "source"), (1, n_dst, "destination")):
            check_ids(a[row], n, lambda i: f"{where}.edge_index[{row}, {i}]", end, "set num_nodes or fix the ids")
        return unambiguous_edges(self.stage.save(a, "edges", f"{where}.edge_index"), self.stage)

    def times(self, store: Any, where: str, attrs: Tuple[str, ...], n: int, what: str) -> Optional[str]:
        """The one of ``attrs`` the store has (None if none) as a staged int64 ``.npy``."""
        given = [a for a in attrs if getattr(store, a, None) is not None]
        if not given:
            return None
        if len(given) > 1:
            raise InputError(f"{where}.{given[0]} and {where}.{given[1]} both give the {what}s' times; give one")
        at = f"{where}.{given[0]}"
        a = _numpy(getattr(store, given[0]), at)
        if a.ndim == 2 and a.shape[1:] == (1,):
            a = a[:, 0]
        if a.ndim != 1 or a.shape[0] != n or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"{at}: {a.dtype} of shape {tuple(a.shape)}; give one integer time per {what} ({n}) "
                             "(cast float times to int64 in one unit)")
        if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
            i = int(np.argmax(a))
            raise InputError(f"{at}[{i}] = {a[i]}: past the largest time (2^63 - 1)")
        return self.stage.save(a.astype(np.int64, copy=False), "times", at)

    def features(self, store: Any, where: str, n: int) -> Tuple[Optional[str], Optional[str]]:
        import torch

        x = getattr(store, "x", None)
        if x is None:
            return None, None
        dtype = "bf16" if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 else None
        a = _numpy(x, f"{where}.x")
        if a.ndim == 1:
            a = a.reshape(-1, 1)
        if a.ndim != 2 or a.shape[0] != n or a.dtype not in (np.float16, np.float32, np.float64):
            raise InputError(f"{where}.x: {a.dtype} of shape {tuple(a.shape)}; give float features of shape ({n}, D) "
                             "(cast integer features with x.float())")
        return self.stage.save(a, "features", f"{where}.x"), dtype

    def labels(self, store: Any, where: str, n: int) -> Optional[str]:
        y = getattr(store, "y", None)
        if y is None:
            return None
        a = _numpy(y, f"{where}.y")
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.ndim != 1 or a.shape[0] != n:
            raise InputError(f"{where}.y: shape {tuple(a.shape)}; give one class per node ({n}) (multi-label targets "
                             "are not supported)")
        if a.dtype.kind == "f":
            nan = np.isnan(a)
            bad = np.flatnonzero(~nan & (a != np.floor(a)))
            if bad.size:
                raise InputError(f"{where}.y[{bad[0]}] = {a[bad[0]]}: not a class; give integer classes "
                                 "(regression targets are not supported)")
            a = np.where(nan, -1, a)
        elif a.dtype.kind not in "iub":
            raise InputError(f"{where}.y: {a.dtype}; give integer classes")
        with LabelWriter(self.stage.path("labels", f"{where}.y"), f"{where}.y") as w:
            w.write(a.astype(np.int64), lambda i, v: f"{where}.y[{i}] = {v}")
            return w.close()

    def split(self, store: Any, where: str, n: int, given: Any) -> Any:
        if isinstance(given, str):
            return given  # fractions or files: the builder's own split forms
        if isinstance(given, Mapping) and all(isinstance(v, (int, float, str, os.PathLike)) for v in given.values()):
            return {name: given[k] for k, name in split_names(given, "split").items()}
        found: Dict[str, Any] = {}
        if given is not None:
            if not isinstance(given, Mapping):
                raise InputError(f"split: a {type(given).__name__}; give a spec string or a dict of masks or ids")
            found = {name: (given[k], f"split['{k}']") for k, name in split_names(given, "split").items()}
        else:
            for prefix, s in _PREFIXES:
                for attr in (f"{prefix}_mask", f"{prefix}_idx", f"{prefix}_index"):
                    v = getattr(store, attr, None)
                    if v is not None:
                        if s in found:
                            raise InputError(f"{found[s][1]} and {where}.{attr} both give split '{s}'; give one")
                        found[s] = (v, f"{where}.{attr}")
                        break
        out = {}
        for name, (v, at) in found.items():
            a = _numpy(v, at)
            _not_a_mask(a, at, n)
            if a.dtype == np.bool_:
                if a.shape != (n,):
                    raise InputError(f"{at}: a mask of shape {tuple(a.shape)}; give one boolean per node ({n})"
                                     + (" (several splits in columns: pass split={'train': mask[:, i], ...})"
                                        if a.ndim == 2 else ""))
                a = np.flatnonzero(a)
            elif a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise InputError(f"{at}: {a.dtype} of shape {tuple(a.shape)}; give a boolean mask or node ids")
            a = a.astype(np.int64)
            check_ids(a, n, lambda i: f"{at}[{i}]", "node", "")
            out[name] = self.stage.save(a, f"split-{name}", at)
        return out or None


def _not_a_mask(a: np.ndarray, at: str, n: int) -> None:
    """Refuse a mask of integers, which would be taken for node ids: one named ``*_mask``, or
    ``n`` ids of only 0 and 1 that repeat one."""
    if a.dtype.kind not in "iu" or a.ndim != 1:
        return
    named = at.endswith("_mask")
    if named or (a.shape[0] == n and n > 1 and np.all((a == 0) | (a == 1)) and not (n == 2 and a[0] != a[1])):
        raise InputError(f"{at}: a mask of {a.dtype}{' 0/1' if not named else ''} values would be read as node ids; "
                         "pass a boolean mask (mask.bool()), or the node ids (mask.nonzero().flatten())")


def from_pyg(
    data: Any,
    out: PathLike,
    *,
    split: Any = None,
    undirected: bool = False,
    add_reverse: bool = False,
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a ringgnn dataset at ``out`` from a PyG ``Data`` or ``HeteroData``; returns the
    manifest. ``undirected`` (``Data``) adds the reverse of every edge; ``add_reverse``
    (``HeteroData``) adds ``D:rev_R:S`` per relation. ``split``: a spec or a dict of masks or ids
    (of a ``HeteroData``: per node type), by default the stores' ``*_mask``/``*_idx`` attributes."""
    from torch_geometric.data import Data, HeteroData

    if not isinstance(data, (Data, HeteroData)):
        raise InputError(f"from_pyg takes a torch_geometric.data.Data or HeteroData, not a {type(data).__name__}")
    hetero = isinstance(data, HeteroData)
    if hetero and undirected:
        raise InputError("from_pyg: undirected applies to a Data; for a HeteroData pass add_reverse=True")
    if not hetero and add_reverse:
        raise InputError("from_pyg: add_reverse applies to a HeteroData; for a Data pass undirected=True")
    common = dict(seed=seed, memory=memory, overwrite=overwrite, threads=threads, progress=progress)
    _skipped(data)
    with Staging(out, overwrite) as stage:
        s = _Stager(stage)
        if hetero and split is not None and not isinstance(split, Mapping):
            raise InputError("from_pyg: a HeteroData's split is a dict node type -> split spec")
        stores = {t: (data[t], f"data['{t}']") for t in data.node_types} if hetero else \
            {HOMOGENEOUS_TYPE: (data, "data")}
        counts = {t: _num_nodes(store, where) for t, (store, where) in stores.items()}
        edges = {et: (data[et], f"data[{et!r}]") for et in data.edge_types} if hetero else \
            {parse_edge_type(HOMOGENEOUS_RELATION): (data, "data")}
        rels = [build.Relation(edge_type_str(et), s.edges(store, where, counts[et[0]], counts[et[2]]), "npy",
                               edge_time=s.times(store, where, _edge_times(store, counts[et[2]], hetero),
                                                 _num_edges(store), "edge"))
                for et, (store, where) in edges.items()]
        types = []
        for t, (store, where) in stores.items():
            n = counts[t]
            feats, dtype = s.features(store, where, n)
            types.append(build.NodeType(t, n, features=feats, feature_dtype=feature_dtype or dtype,
                                        labels=s.labels(store, where, n),
                                        split=s.split(store, where, n, (split or {}).get(t) if hetero else split),
                                        node_time=s.times(store, where, _node_times(store, n, hetero), n, "node")))
        if hetero:
            return build.build_hetero(out, types, rels, add_reverse=add_reverse,
                                      source={"command": "from_pyg", "class": "HeteroData"}, **common)
        (t,), (r,) = types, rels
        return build.convert_one_type(out, t, r, undirected=undirected, **common)


def _num_edges(store: Any) -> int:
    return int(store.edge_index.shape[1])


def _node_times(store: Any, n: int, hetero: bool) -> Tuple[str, ...]:
    """The attribute holding a node store's times: ``time``, unless a ``Data``'s is per edge."""
    shape = tuple(getattr(getattr(store, "time", None), "shape", ()))
    if hetero or not shape:
        return ("time",)
    return ("time",) if shape[0] == n or shape[0] != _num_edges(store) else ()


def _edge_times(store: Any, n: int, hetero: bool) -> Tuple[str, ...]:
    """The attributes that may hold an edge store's times."""
    return ("time", "edge_time") if hetero or not _node_times(store, n, hetero) else ("edge_time",)


def _num_nodes(store: Any, where: str) -> int:
    n = store.num_nodes
    if n is None:
        raise InputError(f"{where}: the number of nodes is unknown (no x, no num_nodes); set {where}.num_nodes")
    return int(n)


def _graph(ds: Any) -> np.ndarray:
    """The CSC of (a part) ``ds`` as a (2, E) edge_index, sorted by destination then source."""
    indptr = ds.indptr()
    e = int(indptr[-1])
    dtype = "<u4" if ds.manifest["graph"]["indices_dtype"] == "u32" else "<u8"
    path = os.path.join(ds.path, ds.manifest["files"]["indices"]["path"])
    with os_errors("reading", path):
        src = np.fromfile(path, dtype=dtype, count=e).astype(np.int64) if e else np.zeros(0, np.int64)
    dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    return np.stack([src, dst])


def _times(ds: Any, key: str, n: int) -> Optional[Any]:
    """``ds``'s times file ``key`` as a tensor; None when it has none."""
    import torch

    entry = ds.manifest["files"].get(key)
    if entry is None:
        return None
    path = os.path.join(ds.path, entry["path"])
    with os_errors("reading", path):
        return torch.from_numpy(np.fromfile(path, dtype="<i8", count=n).astype(np.int64))


def _node_store(ds: Any) -> Dict[str, Any]:
    import torch

    out: Dict[str, Any] = {"num_nodes": ds.num_nodes}
    time = _times(ds, "node_times", ds.num_nodes)
    if time is not None:
        out["time"] = time
    if ds.feature_dim is not None:
        reader = _core.FeatureReader(ds.path, part=ds.part) if ds.part else _core.FeatureReader(ds.path)
        out["x"] = torch.from_numpy(reader.gather(np.arange(ds.num_nodes, dtype=np.int64)))
    if ds.labels is not None:
        out["y"] = torch.from_numpy(ds.labels)
    for name in ds.split_names:
        mask = torch.zeros(ds.num_nodes, dtype=torch.bool)
        mask[torch.from_numpy(ds.split(name))] = True
        out[f"{name}_mask"] = mask
    return out


def to_pyg(ds: Any, memory: Union[None, int, str] = None) -> Any:
    """``ds`` as a PyG ``Data`` or ``HeteroData`` in memory; refused when its arrays need more
    than ``memory`` bytes (default: what the machine or its memory cgroup leaves)."""
    from torch_geometric.data import Data, HeteroData

    limit = size(memory, "memory") if memory is not None else default_memory(held=0)
    parts = {t: ds.node_type(t) for t in ds.node_types}  # a homogeneous dataset is its one type
    dims = sum(part.num_nodes * (part.feature_dim or 0) for part in parts.values())
    timed = sum(ds.relation(r).num_edges for r in ds.relations if "edge_times" in ds.relation(r).manifest) + \
        sum(part.num_nodes for part in parts.values() if "node_times" in part.manifest)
    # edge_index int64, x float32, y int64 and masks, times int64
    need = 16 * ds.num_edges + 4 * dims + 16 * ds.num_nodes + 8 * timed
    if need > limit:
        raise InputError(f"{ds.path}: needs about {need / 2**30:.1f} GiB in memory as a PyG object, more than "
                         f"{limit / 2**30:.1f} GiB; sample it with ringgnn's loaders instead (or pass a larger memory)")
    import torch

    stores = {t: _node_store(part) for t, part in parts.items()}
    graphs = {}
    for r in ds.relations:
        rel = ds.relation(r)
        graphs[parse_edge_type(r)] = g = {"edge_index": torch.from_numpy(_graph(rel))}
        time = _times(rel, "edge_times", g["edge_index"].shape[1])
        if time is not None:
            g["time" if ds.is_hetero else "edge_time"] = time  # a Data's one store has the nodes' time
    if not ds.is_hetero:
        return Data(**graphs[parse_edge_type(HOMOGENEOUS_RELATION)], **stores[HOMOGENEOUS_TYPE])
    return HeteroData({**stores, **graphs})
