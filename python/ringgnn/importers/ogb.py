"""Importing an Open Graph Benchmark node property prediction directory (``ogbn-*``, as OGB's
downloads and its ``ogb.io.DatasetSaver`` lay it out) into a homogeneous ringgnn dataset:
:func:`convert_ogb`, called by ``ringgnn convert DIR OUT`` (``--from ogb`` forces it).

What becomes what (``DIR`` is the dataset directory, the one holding ``raw/`` and ``split/``):

* the graph: ``raw/edge.csv.gz`` ("src,dst" lines) with ``raw/num-node-list.csv.gz``, or
  ``raw/data.npz`` (``edge_index`` (2, E), ``num_nodes_list``, as papers100M ships it and
  ``DatasetSaver`` writes it); one graph only;
* features: ``raw/node-feat.csv.gz`` or ``node_feat`` of ``data.npz`` (optional);
* labels: ``raw/node-label.csv.gz`` or ``raw/node-label.npz`` (one column; NaN = unlabeled,
  stored -1; the values must be whole classes >= 0) (optional);
* splits: ``split/SCHEME/{train,valid,test}.csv.gz`` or ``split/SCHEME/split_dict.pt``;
  ``valid`` becomes ``val``, other names are lower-cased with ``-`` made ``_``
  (:func:`._stage.split_name`, every importer's). ``SCHEME`` is the only directory under
  ``split/``, or the one named.

OGB stores an undirected graph (products, proteins) with each edge once and adds the reverse when
loading: convert such a dataset with ``undirected=True``. A link prediction directory
(``ogbl-*``: ``split/*/*.pt`` edge dictionaries) becomes a dataset with edge splits
(:mod:`.ogbl`); the heterogeneous CSV layout (``ogbn-mag``) a heterogeneous dataset
(:mod:`.ogb_hetero`), and so does the binary heterogeneous layout (``edge_index_dict.npz``, as
``DatasetSaver`` writes it: :mod:`.ogb_hetero_npz`). Multi-task labels are refused with a clear
error (not supported yet).

Memory: ``edge.csv.gz`` goes to the builder as it is; the arrays of an ``.npz`` and every CSV
are read in chunks and staged as ``.npy`` in a locked temporary directory beside ``out``
(removed at the end), their ids and lengths checked on the way; ``split_dict.pt`` is loaded
(split ids are small). Every problem is an :class:`ringgnn.InputError` naming the file (and the
array or line) and what to do; nothing is written.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._core import InputError
from .._files import NpyWriter
from ..data import build
from . import ogb_hetero, ogb_hetero_npz, ogbl
from ._ogb_io import Npz, csv_column, csv_floats, load_split_dict, write_labels
from ._stage import LabelWriter, PathLike, Staging, check_ids, split_name, split_names, unambiguous_edges

SPLIT_NAMES = ("train", "valid", "test")


def _missing(path: str, why: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, f"no such file: {why}", path)


# --- the layout, checked -------------------------------------------------------------------------


class _Layout:
    """The files of an OGB node property prediction directory; finding them reads nothing."""

    def __init__(self, root: str, scheme: Optional[str]):
        self.root = root
        raw = os.path.join(root, "raw")
        if not os.path.isdir(raw):
            raise InputError(f"{root}: no raw/ directory, so not an OGB dataset directory; give the directory "
                             "that holds raw/ and split/ (e.g. dataset/ogbn_arxiv)")
        self.raw = raw
        self.npz = self._file("data.npz")
        self.edge_csv = self._file("edge.csv.gz")
        if self.npz is None and self.edge_csv is None:
            raise _missing(os.path.join(raw, "edge.csv.gz"),
                           f"{raw} has neither edge.csv.gz nor data.npz; an OGB directory has one of them")
        self.num_nodes_csv = self._file("num-node-list.csv.gz")
        if self.npz is None and self.num_nodes_csv is None:
            raise _missing(os.path.join(raw, "num-node-list.csv.gz"),
                           "it gives the number of nodes of edge.csv.gz; download the dataset again")
        self.feat_csv = self._file("node-feat.csv.gz")
        self.label = self._file("node-label.npz") or self._file("node-label.csv.gz")
        self.split_dir = self._scheme(scheme)

    def _file(self, name: str) -> Optional[str]:
        path = os.path.join(self.raw, name)
        return path if os.path.isfile(path) else None

    def _scheme(self, scheme: Optional[str]) -> Optional[str]:
        top = os.path.join(self.root, "split")
        have = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d))) if os.path.isdir(top) else []
        if scheme is not None:
            if scheme not in have:
                raise InputError(f"{top}: no split scheme '{scheme}' (it has: {', '.join(have) or 'none'})")
            chosen = scheme
        elif not have:
            return None
        elif len(have) > 1:
            raise InputError(f"{top}: several split schemes ({', '.join(have)}); name one with --split-scheme")
        else:
            chosen = have[0]
        d = os.path.join(top, chosen)
        if any(os.path.isfile(os.path.join(d, f"{s}.pt")) for s in SPLIT_NAMES):
            return d  # link prediction (ogbl): see .ogbl
        if not os.path.isfile(os.path.join(d, "split_dict.pt")):
            for s in SPLIT_NAMES:
                if not os.path.isfile(os.path.join(d, f"{s}.csv.gz")):
                    raise _missing(os.path.join(d, f"{s}.csv.gz"), f"split scheme {d} needs train, valid and test "
                                   "(as .csv.gz files or one split_dict.pt)")
        return d


# --- staging -------------------------------------------------------------------------------------


class _Stager:
    def __init__(self, layout: _Layout, stage: Staging):
        self.layout, self.stage = layout, stage
        self.npz = Npz(layout.npz) if layout.npz else None

    def num_nodes(self) -> int:
        if self.npz is not None:
            where = f"{self.npz.path}: num_nodes_list"
            counts = self.npz.small("num_nodes_list", "OGB's data.npz gives the node count of its graph there")
        else:
            where = self.layout.num_nodes_csv
            counts = np.concatenate(list(csv_column(where)))
        if counts.size != 1:
            raise InputError(f"{where}: {counts.size} graphs; ringgnn converts one graph (a node property "
                             "prediction dataset), not a graph property prediction (ogbg) set")
        n = counts[0]
        if not (np.isfinite(n) and n == int(n) and n >= 0):
            raise InputError(f"{where}: {n} is not a node count")
        return int(n)

    def edges(self, n: int) -> Tuple[str, str]:
        if self.npz is None:
            return self.layout.edge_csv, "text"  # the builder reads "src,dst" lines, gzip included
        f, s = self.npz.open("edge_index", "OGB's data.npz holds the edges there, shape (2, E)")
        where = f"{self.npz.path}: edge_index"
        shape = s.shape[::-1] if s.transposed else s.shape  # as stored: (2, E) in either order
        if len(shape) != 2 or shape[0] != 2 or s.dtype.kind not in "iu":
            raise InputError(f"{where}: {s.dtype} of shape {shape}; OGB's edge_index is integers of shape (2, E)")
        e = shape[1]

        def place(k: int) -> str:  # entry k of the stream: row-major (2, E), or (E, 2) when transposed
            row, col = (k % 2, k // 2) if s.transposed else (k // e, k % e)
            return f"{where}[{'src' if row == 0 else 'dst'}, {col}]"

        with f, NpyWriter(self.stage.path("edges", where), np.int64) as out:
            seen = 0
            for chunk in s.flat_chunks():
                check_ids(chunk.astype(np.int64, copy=False), n, lambda i: place(seen + i), "node id")
                out.write(chunk)
                seen += chunk.size
            # A Fortran-ordered (2, E) array streams as its (E, 2) transpose: one pair per row.
            if s.transposed:
                return out.close(s.shape), "npy"
            return unambiguous_edges(out.close((2, e)), self.stage), "npy"

    def features(self, n: int) -> Optional[str]:
        if self.npz is not None and self.npz.has("node_feat"):
            f, s = self.npz.open("node_feat", "")
            where = f"{self.npz.path}: node_feat"
            if len(s.shape) != 2 or s.shape[0] != n or s.dtype.kind not in "fiu":
                raise InputError(f"{where}: {s.dtype} of shape {s.shape}; give numbers of shape ({n}, D)")
            dtype = s.dtype if s.dtype in (np.float16, np.float32, np.float64) else np.float32
            with f, NpyWriter(self.stage.path("features", where), dtype, s.shape[1:]) as out:
                for chunk in s.chunks():
                    out.write(chunk)
                return out.close()
        path = self.layout.feat_csv
        if path is None:
            return None
        out = None
        try:
            for chunk in csv_floats(path):
                out = out or NpyWriter(self.stage.path("features", path), np.float32, chunk.shape[1:])
                out.write(chunk)
            rows = 0 if out is None else out.rows
            if rows != n:
                raise InputError(f"{path}: {rows} rows, but the graph has {n} nodes; give one row per node")
            return out.close()
        finally:
            if out is not None:
                out.__exit__()

    def labels(self, n: int) -> Optional[str]:
        path = self.layout.label
        if path is None:
            return None
        with LabelWriter(self.stage.path("labels", path), path) as out:
            return self._label_file(path, n, out)

    def _label_file(self, path: str, n: int, out: LabelWriter) -> str:
        if path.endswith(".npz"):
            npz = Npz(path)
            key = "node_label" if npz.has("node_label") else (npz.names[0] if len(npz.names) == 1 else "node_label")
            f, s = npz.open(key, "OGB's node-label.npz holds the labels there")
            with f:
                write_labels(((c, f"{path}: {key}") for c in s.chunks()), out)
            npz.close()
        else:
            write_labels(((c, path) for c in csv_column(path)), out)
        if out.rows != n:
            raise InputError(f"{path}: {out.rows} labels, but the graph has {n} nodes; give one per node")
        return out.close()

    def splits(self, n: int) -> Optional[Dict[str, str]]:
        d = self.layout.split_dir
        if d is None:
            return None
        pt = os.path.join(d, "split_dict.pt")
        if os.path.isfile(pt):
            d = load_split_dict(pt)
            return {name: self._ids(d[k], n, f"{pt}: '{k}'", name) for k, name in split_names(d, pt).items()}
        out = {}
        for s in SPLIT_NAMES:
            path = os.path.join(d, f"{s}.csv.gz")
            with NpyWriter(self.stage.path(f"split-{s}", path), np.int64) as w:
                for chunk in csv_column(path):
                    if not np.all(chunk == np.floor(chunk)):
                        raise InputError(f"{path}: not one node id per line; OGB's split files list node ids")
                    ids = chunk.astype(np.int64)
                    first = w.rows
                    check_ids(ids, n, lambda i: f"{path}: line {first + i + 1}", "node id")
                    w.write(ids)
                out[split_name(s, path)] = w.close()
        return out

    def _ids(self, value: Any, n: int, where: str, name: str) -> str:
        a = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"{where}: {a.dtype} of shape {a.shape}; give a 1-D array of node ids")
        a = a.astype(np.int64)
        check_ids(a, n, lambda i: f"{where}[{i}]", "node id")
        with NpyWriter(self.stage.path(f"split-{name}", where), np.int64) as w:
            w.write(a)
            return w.close()

    def close(self) -> None:
        if self.npz is not None:
            self.npz.close()


def _is_link_dict(split_dir: Optional[str]) -> bool:
    """A ``split_dict.pt`` of edge dictionaries (``DatasetSaver``'s ogbl layout)."""
    if split_dir is None or not os.path.isfile(os.path.join(split_dir, "split_dict.pt")):
        return False
    return any(isinstance(v, dict) for v in load_split_dict(os.path.join(split_dir, "split_dict.pt")).values())


# --- the conversion ------------------------------------------------------------------------------


def convert_ogb(
    root: PathLike,
    out: PathLike,
    *,
    split_scheme: Optional[str] = None,
    link_negatives: int = 100,
    undirected: bool = False,
    add_reverse: bool = False,
    self_loops: str = "keep",
    dedup: bool = False,
    feature_dtype: Optional[str] = None,
    seed: int = 0,
    memory: Optional[build.Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Build a ringgnn dataset at ``out`` from the OGB node property prediction directory
    ``root`` (the one holding ``raw/`` and ``split/``); returns the manifest. ``split_scheme``
    names the directory under ``split/`` when there are several. A heterogeneous directory
    (``ogbn-mag``'s CSV layout) becomes a heterogeneous dataset (:mod:`.ogb_hetero`;
    ``add_reverse`` adds the ``rev_`` relations). A link prediction directory
    (``ogbl-*``) becomes a dataset with edge splits (:mod:`.ogbl`), with ``link_negatives``
    negatives drawn per held-out pair. ``undirected``, ``self_loops``, ``dedup``,
    ``feature_dtype`` and the rest are :func:`ringgnn.data.build.convert`'s."""
    root = os.fspath(root)
    raw = os.path.join(root, "raw")
    binary = os.path.isfile(os.path.join(raw, "edge_index_dict.npz"))  # DatasetSaver's heterogeneous layout
    if binary or os.path.isfile(os.path.join(raw, "triplet-type-list.csv.gz")):  # heterogeneous (ogbn-mag)
        if undirected or dedup or self_loops != "keep":
            raise InputError(f"{root}: a heterogeneous OGB dataset takes add_reverse (--add-reverse), not "
                             "undirected, dedup or self_loops")
        scheme_dir = ogb_hetero._scheme(root, split_scheme)
        if ogbl.is_link(scheme_dir):  # ogbl-biokg: typed triples in train/valid/test.pt
            raise InputError(f"{scheme_dir}: {ogbl.KG_REFUSAL}")
        layout = ogb_hetero_npz if binary else ogb_hetero
        return layout.convert(root, raw, out, split_scheme=split_scheme, add_reverse=add_reverse,
                              feature_dtype=feature_dtype, seed=seed, memory=memory, overwrite=overwrite,
                              threads=threads, progress=progress)
    if add_reverse:
        raise InputError(f"{root}: a homogeneous OGB dataset adds reverse edges with undirected (--undirected)")
    layout = _Layout(root, split_scheme)
    with Staging(out, overwrite) as stage:
        stage.node_count_from(layout.npz and f"{layout.npz}: num_nodes_list" or layout.num_nodes_csv)
        s = _Stager(layout, stage)
        try:
            n = s.num_nodes()
            if ogbl.is_link(layout.split_dir) or _is_link_dict(layout.split_dir):
                args = dict(undirected=undirected, self_loops=self_loops, dedup=dedup, seed=seed,
                            feature_dtype=feature_dtype, memory=memory, overwrite=overwrite, threads=threads,
                            progress=progress)
                return ogbl.convert(layout, s, stage, n, out, link_negatives=link_negatives, build_args=args)
            edges, fmt = s.edges(n)
            features, labels, split = s.features(n), s.labels(n), s.splits(n)
        finally:
            s.close()
        return build.convert(edges, out, format=fmt, num_nodes=n, undirected=undirected, self_loops=self_loops,
                             dedup=dedup, features=features, labels=labels, split=split, seed=seed,
                             feature_dtype=feature_dtype, memory=memory, overwrite=overwrite, threads=threads,
                             progress=progress, quote_input=False)
