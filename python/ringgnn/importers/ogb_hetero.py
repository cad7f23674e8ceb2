"""OGB's heterogeneous node property prediction layout (``ogbn-mag`` as downloaded: CSV files)
into a heterogeneous ringgnn dataset with :func:`ringgnn.data.build.build_hetero`;
:func:`ringgnn.importers.ogb.convert_ogb` calls :func:`convert` when ``raw/`` holds
``triplet-type-list.csv.gz``.

What becomes what (OGB's ``read_csv_heterograph_raw``, ``read_node_label_hetero``,
``read_nodesplitidx_split_hetero``):

* ``raw/num-node-dict.csv.gz`` (a header of node types, a row of counts) -> node types;
* ``raw/triplet-type-list.csv.gz`` (``head,relation,tail`` lines) and
  ``raw/relations/HEAD___REL___TAIL/edge.csv.gz`` -> relation ``HEAD:REL:TAIL`` (the edge file
  goes to the builder as it is); ``add_reverse`` adds ``TAIL:rev_REL:HEAD``;
* ``raw/node-feat/TYPE/node-feat.csv.gz`` -> the type's features;
* ``raw/nodetype-has-label.csv.gz`` and ``raw/node-label/TYPE/node-label.csv.gz`` -> labels of
  the types that have them (NaN or empty = unlabeled);
* ``split/SCHEME/nodetype-has-split.csv.gz`` and ``split/SCHEME/TYPE/{train,valid,test}.csv.gz``
  -> each such type's splits (``valid`` -> ``val``).

Edge attributes (``edge_reltype``, years) are not converted. The binary variant
(``edge_index_dict.npz``) is :mod:`.ogb_hetero_npz`'s. CSV files are read in chunks and staged
as ``.npy``; every problem names the file.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Dict, List, Optional

import numpy as np

from .._core import InputError
from .._excerpt import WITHHELD, quoted
from .._files import NpyWriter
from ..data import build
from ._described import resolve
from ._ogb_io import csv_column, csv_floats, csv_lines, write_labels
from ._stage import LabelWriter, Staging, check_ids, split_name

SPLITS = ("train", "valid", "test")


def _need(path: str, what: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, f"no such file: OGB's heterogeneous layout has {what} there", path)
    return path


def _lines(path: str) -> List[str]:
    """The non-blank lines of a small CSV of the layout, stripped."""
    return [line.strip() for _, chunk in csv_lines(path) for line in chunk if line.strip()]


def _header_table(path: str) -> Dict[str, str]:
    """A small CSV of a header line and one row (``num-node-dict``, ``nodetype-has-label``)."""
    lines = _lines(path)
    if len(lines) < 2:
        raise InputError(f"{path}: expected a header line of node types and a line of values")
    names, values = lines[0].split(","), lines[1].split(",")
    if len(names) != len(values):
        raise InputError(f"{path}: {len(names)} node types in the header but {len(values)} values")
    return dict(zip(names, values))


def _counts(raw: str) -> Dict[str, int]:
    path = _need(os.path.join(raw, "num-node-dict.csv.gz"), "the node count of each type (num-node-dict.csv.gz)")
    out = {}
    for i, (t, v) in enumerate(_header_table(path).items()):
        try:
            out[t] = int(float(v))
        except ValueError:  # the file may not be what the layout says: quote nothing of it
            raise InputError(f"{path}: line 2, column {i + 1}: the count is not a number ({WITHHELD})") from None
    return out


def _triplets(raw: str, counts: Dict[str, int]) -> List[List[str]]:
    path = _need(os.path.join(raw, "triplet-type-list.csv.gz"), "the relations (triplet-type-list.csv.gz)")
    rows = [line.split(",") for line in _lines(path)]
    for i, r in enumerate(rows):
        if len(r) != 3 or not all(r):
            raise InputError(f"{path}: line {i + 1} is not head,relation,tail")
        for c in (0, 2):
            if r[c] not in counts:  # the file may not be what the layout says: quote nothing of it
                raise InputError(f"{path}: line {i + 1}, column {c + 1} names a node type that num-node-dict.csv.gz "
                                 f"does not have (it has {', '.join(map(quoted, counts))}; {WITHHELD})")
    return sorted(rows)


def _flags(path: str) -> List[str]:
    """The node types a ``nodetype-has-*.csv.gz`` marks True."""
    return [t for t, v in _header_table(path).items() if v.strip().lower() in ("true", "1")]


def convert(root: str, raw: str, out: Any, *, split_scheme: Optional[str], add_reverse: bool,
            feature_dtype: Optional[str], seed: int, memory: Any, overwrite: bool, threads: Optional[int],
            progress: Any) -> Dict[str, Any]:
    """Build the heterogeneous dataset (see the module)."""
    counts = _counts(raw)
    triplets = _triplets(raw, counts)
    relations = []
    for h, r, t in triplets:
        where = f"{os.path.join(raw, 'triplet-type-list.csv.gz')}: relation {quoted(f'{h},{r},{t}')}"
        path = _need(resolve(raw, os.path.join("relations", f"{h}___{r}___{t}", "edge.csv.gz"), where),
                     f"the edges of {h}___{r}___{t}")
        relations.append(build.Relation(f"{h}:{r}:{t}", path, "text"))
    labeled = _flags(os.path.join(raw, "nodetype-has-label.csv.gz")) \
        if os.path.isfile(os.path.join(raw, "nodetype-has-label.csv.gz")) else []
    scheme_dir = _scheme(root, split_scheme)
    split_types = _flags(_need(os.path.join(scheme_dir, "nodetype-has-split.csv.gz"),
                               "the types with splits (nodetype-has-split.csv.gz)")) if scheme_dir else []
    with Staging(out, overwrite) as stage:
        types = []
        for t, n in counts.items():
            feats = labels = None
            where = f"{os.path.join(raw, 'num-node-dict.csv.gz')}: node type {quoted(t)}"
            fpath = resolve(raw, os.path.join("node-feat", t, "node-feat.csv.gz"), where)
            if os.path.isfile(fpath):
                with NpyWriter(stage.path(f"features-{t}", fpath), np.float32, ()) as w:
                    for chunk in csv_floats(fpath):
                        w.row_shape = chunk.shape[1:]
                        w.write(chunk)
                    if w.rows != n:
                        raise InputError(f"{fpath}: {w.rows} rows, but num-node-dict.csv.gz has {n} {quoted(t)} nodes; give "
                                         "one row per node")
                    feats = w.close()
            if t in labeled:
                lpath = _need(resolve(raw, os.path.join("node-label", t, "node-label.csv.gz"), where),
                              f"the labels of {quoted(t)}")
                with LabelWriter(stage.path(f"labels-{t}", lpath), lpath) as w:
                    write_labels(((c, lpath) for c in csv_column(lpath)), w)
                    if w.rows != n:
                        raise InputError(f"{lpath}: {w.rows} labels, but num-node-dict.csv.gz has {n} {quoted(t)} nodes")
                    labels = w.close()
            split = None
            if t in split_types:
                split = {}
                for s in SPLITS:
                    spath = _need(resolve(scheme_dir, os.path.join(t, f"{s}.csv.gz"), where),
                                  f"the {s} split of {quoted(t)}")
                    with NpyWriter(stage.path(f"split-{t}-{s}", spath), np.int64) as w:
                        for chunk in csv_column(spath):
                            ids = chunk.astype(np.int64)
                            first = w.rows
                            check_ids(ids, n, lambda i: f"{spath}: line {first + i + 1}", f"{quoted(t)} id")
                            w.write(ids)
                        split[split_name(s, spath)] = w.close()
            types.append(build.NodeType(t, n, features=feats, labels=labels, split=split,
                                        feature_dtype=feature_dtype if feats else None))
        source = {"command": "convert", "from": "ogb", "dir": os.path.basename(os.path.normpath(root))}
        return build.build_hetero(out, types, relations, add_reverse=add_reverse, seed=seed, memory=memory,
                                  overwrite=overwrite, threads=threads, source=source, progress=progress,
                                  quote_input=False)


def _scheme(root: str, scheme: Optional[str]) -> Optional[str]:
    top = os.path.join(root, "split")
    have = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d))) if os.path.isdir(top) else []
    if scheme is not None:
        if scheme not in have:
            raise InputError(f"{top}: no split scheme '{scheme}' (it has: {', '.join(have) or 'none'})")
        return os.path.join(top, scheme)
    if len(have) > 1:
        raise InputError(f"{top}: several split schemes ({', '.join(have)}); name one with --split-scheme")
    return os.path.join(top, have[0]) if have else None
