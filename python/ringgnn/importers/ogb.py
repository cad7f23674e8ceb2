"""OGB directories (``raw/``, ``split/``) into datasets: :func:`convert_ogb`, which hands link
(:mod:`.ogbl`) and heterogeneous (:mod:`.ogb_hetero`) layouts on."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._core import InputError
from ..data import build
from . import ogb_hetero, ogbl
from ._ogb_io import (SPLITS, Npz, csv_column, load_split_dict, missing, need, scheme_dir, stage_csv_features,
                      stage_csv_ids, stage_edges, stage_labels, stage_npz_features, stage_npz_labels, stage_split_dict)
from ._stage import PathLike, Staging, split_name

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
            raise missing(os.path.join(raw, "edge.csv.gz"),
                          f"{raw} has neither edge.csv.gz nor data.npz; an OGB directory has one of them")
        self.num_nodes_csv = self._file("num-node-list.csv.gz")
        if self.npz is None and self.num_nodes_csv is None:
            raise missing(os.path.join(raw, "num-node-list.csv.gz"),
                          "it gives the number of nodes of edge.csv.gz; download the dataset again")
        self.feat_csv = self._file("node-feat.csv.gz")
        self.label = self._file("node-label.npz") or self._file("node-label.csv.gz")
        self.split_dir = self._scheme(scheme)

    def _file(self, name: str) -> Optional[str]:
        path = os.path.join(self.raw, name)
        return path if os.path.isfile(path) else None

    def _scheme(self, scheme: Optional[str]) -> Optional[str]:
        d = scheme_dir(self.root, scheme)
        if d is None or ogbl.is_link(d):
            return d  # none, or link prediction (ogbl): see .ogbl
        if not os.path.isfile(os.path.join(d, "split_dict.pt")):
            for s in SPLITS:
                need(os.path.join(d, f"{s}.csv.gz"), f"split scheme {d} needs train, valid and test (as .csv.gz "
                     "files or one split_dict.pt)")
        return d


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
        return stage_edges(self.stage, self.npz, "edge_index", "OGB's data.npz holds the edges there, shape (2, E)",
                           [(None, n, "node id")], "edges"), "npy"

    def features(self, n: int) -> Optional[str]:
        if self.npz is not None and self.npz.has("node_feat"):
            return stage_npz_features(self.stage, self.npz, "node_feat", n, "features",
                                      f"{self.npz.path}: node_feat:")
        if self.layout.feat_csv is None:
            return None
        return stage_csv_features(self.stage, self.layout.feat_csv, n, "features", f"the graph has {n} nodes")

    def labels(self, n: int) -> Optional[str]:
        path = self.layout.label
        if path is None:
            return None

        def mismatch(rows: int) -> str:
            return f"{path}: {rows} labels, but the graph has {n} nodes; give one per node"

        if not path.endswith(".npz"):
            return stage_labels(self.stage, "labels", path, ((c, path) for c in csv_column(path)), n, mismatch)
        with Npz(path) as npz:
            key = "node_label" if npz.has("node_label") else (npz.names[0] if len(npz.names) == 1 else "node_label")
            return stage_npz_labels(self.stage, npz, key, "OGB's node-label.npz holds the labels there", "labels", path,
                                    n, mismatch)

    def splits(self, n: int) -> Optional[Dict[str, str]]:
        d = self.layout.split_dir
        if d is None:
            return None
        pt = os.path.join(d, "split_dict.pt")
        if os.path.isfile(pt):
            return stage_split_dict(self.stage, pt, n, "node id", ":", "a 1-D array of node ids")
        out = {}
        for s in SPLITS:
            path = os.path.join(d, f"{s}.csv.gz")
            out[split_name(s, path)] = stage_csv_ids(self.stage, path, n, f"split-{s}", "node id")
        return out

    def close(self) -> None:
        if self.npz is not None:
            self.npz.close()


def _is_link_dict(split_dir: Optional[str]) -> bool:
    # A split_dict.pt of edge dictionaries: DatasetSaver's ogbl layout.
    if split_dir is None or not os.path.isfile(os.path.join(split_dir, "split_dict.pt")):
        return False
    return any(isinstance(v, dict) for v in load_split_dict(os.path.join(split_dir, "split_dict.pt")).values())


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
    """Build a ringgnn dataset at ``out`` from the OGB directory ``root`` (holding ``raw/`` and
    ``split/``); returns the manifest. ``split_scheme`` names the directory under ``split/``
    when there are several. A heterogeneous directory becomes a heterogeneous dataset
    (``add_reverse``), a link prediction one (``ogbl-*``) a dataset with edge splits
    (``link_negatives`` per held-out pair). The rest are :func:`ringgnn.data.build.convert`'s."""
    root = os.fspath(root)
    common = dict(seed=seed, memory=memory, overwrite=overwrite, threads=threads, progress=progress)
    raw = os.path.join(root, "raw")
    binary = os.path.isfile(os.path.join(raw, "edge_index_dict.npz"))  # DatasetSaver's heterogeneous layout
    if binary or os.path.isfile(os.path.join(raw, "triplet-type-list.csv.gz")):  # heterogeneous (ogbn-mag)
        if undirected or dedup or self_loops != "keep":
            raise InputError(f"{root}: a heterogeneous OGB dataset takes add_reverse (--add-reverse), not "
                             "undirected, dedup or self_loops")
        scheme = scheme_dir(root, split_scheme)
        if ogbl.is_link(scheme):  # ogbl-biokg: typed triples in train/valid/test.pt
            raise InputError(f"{scheme}: {ogbl.KG_REFUSAL}")
        return ogb_hetero.convert(root, raw, out, scheme, feature_dtype, add_reverse=add_reverse, **common)
    if add_reverse:
        raise InputError(f"{root}: a homogeneous OGB dataset adds reverse edges with undirected (--undirected)")
    layout = _Layout(root, split_scheme)
    args = dict(undirected=undirected, self_loops=self_loops, dedup=dedup, feature_dtype=feature_dtype, **common)
    with Staging(out, overwrite) as stage:
        stage.node_count_from(layout.npz and f"{layout.npz}: num_nodes_list" or layout.num_nodes_csv)
        s = _Stager(layout, stage)
        try:
            n = s.num_nodes()
            if ogbl.is_link(layout.split_dir) or _is_link_dict(layout.split_dir):
                return ogbl.convert(layout, s, stage, n, out, link_negatives=link_negatives, build_args=args)
            edges, fmt = s.edges(n)
            features, labels, split = s.features(n), s.labels(n), s.splits(n)
        finally:
            s.close()
        return build.convert(edges, out, format=fmt, num_nodes=n, features=features, labels=labels, split=split,
                             quote_input=False, **args)
