"""Reading and staging OGB's files, for every OGB layout: gzip CSVs in chunks, ``.npz`` members
as streams, ``.pt`` files without running code; errors name a file and line, never quote it."""

from __future__ import annotations

import errno
import gzip
import itertools
import os
import pickle
import re
import zipfile
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .._core import InputError
from .._excerpt import WITHHELD, reason
from .._files import NpyWriter, os_errors
from ..data import build
from ._stage import LabelWriter, NpyStream, Staging, check_ids, split_names, unambiguous_edges

SPLITS = ("train", "valid", "test")
CSV_LINES = 1 << 16


def csv_lines(path: str) -> Iterator[Tuple[int, List[str]]]:
    """(number of the first line, lines) in chunks of a gzip (or plain) CSV file."""
    with os_errors("reading", path):
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        f = gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")
        with f:
            first = 1
            while True:
                try:
                    lines = list(itertools.islice(f, CSV_LINES))
                except (OSError, EOFError, UnicodeDecodeError) as e:
                    raise InputError(f"{path}: cannot be read near line {first} ({reason(e, quote=False)}); "
                                     "download it again") from None
                if not lines:
                    return
                yield first, lines
                first += len(lines)


def csv_floats(path: str, columns: Optional[int] = None) -> Iterator[np.ndarray]:
    """Rows of a numeric CSV (no header) as float64 chunks; empty fields and ``nan`` are NaN."""
    for first, lines in csv_lines(path):
        try:
            a = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2, comments=None,
                           converters=lambda s: float(s) if s.strip() else np.nan)
        except ValueError:
            raise InputError(f"{path}: {_first_bad(lines, first)} is not a number ({WITHHELD}); OGB's CSV files "
                             "hold one row of numbers separated by commas per line") from None
        if columns is not None and a.shape[1] != columns:
            raise InputError(f"{path}: lines {first}..{first + len(lines) - 1} have {a.shape[1]} columns where "
                             f"earlier lines have {columns}; give every row the same width")
        columns = a.shape[1]
        yield a


def _first_bad(lines: List[str], first: int) -> str:
    for i, line in enumerate(lines):
        for c, field in enumerate(line.rstrip("\r\n").split(",")):
            try:
                float(field) if field.strip() else None
            except ValueError:
                return f"line {first + i}, column {c + 1}"
    return f"lines {first}..{first + len(lines) - 1}: a field"


def csv_column(path: str) -> Iterator[np.ndarray]:
    """The values of a one-column CSV as float64 chunks; an empty line or ``nan`` is NaN."""
    for first, lines in csv_lines(path):
        values = np.empty(len(lines))
        for i, line in enumerate(lines):
            text = line.strip()
            if "," in text:
                raise InputError(f"{path}: line {first + i} has {text.count(',') + 1} columns (a multi-task "
                                 "dataset?); ringgnn reads one value per line here")
            try:
                values[i] = float(text) if text else np.nan
            except ValueError:
                raise InputError(f"{path}: line {first + i} is not a number ({WITHHELD})") from None
        yield values


class Npz:
    """An ``.npz`` archive whose arrays are read as streams."""

    def __init__(self, path: str):
        self.path = path
        with os_errors("reading", path):
            try:
                self.zip = zipfile.ZipFile(path)
            except zipfile.BadZipFile as e:
                raise InputError(f"{path}: not an .npz archive ({reason(e, quote=False)}); save it with "
                                 "numpy.savez") from None
        self.names = sorted(n[:-4] for n in self.zip.namelist() if n.endswith(".npy"))

    def has(self, key: str) -> bool:
        return key in self.names

    def open(self, key: str, fix: str) -> Tuple[IO[bytes], NpyStream]:
        if key not in self.names:
            raise InputError(f"{self.path}: no array '{key}' (it has: {', '.join(self.names) or 'none'}); {fix}")
        f = self.zip.open(key + ".npy")
        return f, NpyStream(f, f"{self.path}: {key}")

    def small(self, key: str, fix: str) -> np.ndarray:
        f, s = self.open(key, fix)
        with f:
            return np.concatenate(list(s.chunks())) if s.shape and s.shape[0] else np.zeros(s.shape, s.dtype)

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> "Npz":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def load_split_dict(path: str) -> Dict[str, Any]:
    """OGB's ``split_dict.pt``: split name -> node ids (numpy arrays or tensors)."""
    d = load_pt(path, "OGB's split_dict.pt maps train/valid/test to node ids")
    if not isinstance(d, dict) or not d:
        raise InputError(f"{path}: holds a {type(d).__name__}, not a dictionary of splits; OGB's split_dict.pt "
                         "maps train/valid/test to node ids")
    return d


class _NeedsTorch(Exception):
    """The file holds more than numpy arrays and numbers: torch must load it."""


class _NumpyUnpickler(pickle.Unpickler):
    """An unpickler that builds only numpy arrays, numbers and containers; anything else raises
    :class:`_NeedsTorch`."""

    _NUMPY = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
              ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"), ("numpy", "ndarray"),
              ("numpy", "dtype"), ("_codecs", "encode"), ("collections", "OrderedDict"), ("builtins", "bytes"),
              ("__builtin__", "bytes")}  # protocol 2 (torch.save's) names builtins as __builtin__

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._NUMPY or (module == "numpy.dtypes" and re.fullmatch(r"U?Int\d+DType|Float\d+DType|"
                                                                                        r"BoolDType", name)):
            return super().find_class(module, name)
        raise _NeedsTorch(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _NeedsTorch("a tensor's storage")


def _load_numpy_pt(path: str) -> Any:
    """A numpy-only ``torch.save`` file read without importing torch (a few hundred MB)."""
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise _NeedsTorch("not torch's zip format") from None
    with z:
        names = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if len(names) != 1:
            raise _NeedsTorch("no single data.pkl")
        with z.open(names[0]) as f:
            return _NumpyUnpickler(f).load()


def load_pt(path: str, what: str) -> Any:
    """A small ``torch.save`` file of OGB's, never running code from it: without torch when it
    holds only numpy arrays and numbers, else by torch's safe unpickler."""
    with os_errors("reading", path):
        try:
            return _load_numpy_pt(path)
        except _NeedsTorch:
            pass
        except (pickle.UnpicklingError, EOFError, ValueError, KeyError) as e:
            raise InputError(f"{path}: not a file saved with torch.save ({reason(e, quote=False)}); {what}") from None
    import torch

    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar
    kinds = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
             "float64", "bool")
    allowed = [_reconstruct, scalar, np.ndarray, np.dtype, bytes]  # bytes: how an empty array pickles
    allowed += [type(np.dtype(c)) for c in kinds]  # numpy >= 1.25 pickles dtypes by their class
    with os_errors("reading", path):
        try:
            with torch.serialization.safe_globals(allowed):
                return torch.load(path, map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError, IndexError) as e:
            raise InputError(f"{path}: not a file saved with torch.save that holds only arrays and numbers "
                             f"({reason(e, quote=False)}); {what}") from None


def write_labels(chunks: Iterator[Tuple[np.ndarray, str]], out: LabelWriter) -> None:
    """Check OGB node labels (one column; NaN = unlabeled; whole classes >= 0) chunk by chunk
    (``(array, where)``) and write them to ``out``."""
    for c, where in chunks:
        if c.ndim == 2 and c.shape[1] != 1:
            raise InputError(f"{where}: {c.shape[1]} label columns (a multi-task dataset); ringgnn stores one "
                             "class per node")
        c = c.reshape(-1)
        if c.dtype.kind == "f":
            nan = np.isnan(c)
            bad = np.flatnonzero(~nan & ((c != np.floor(c)) | (c < 0)))
            if bad.size:
                raise InputError(f"{where}: label {c[bad[0]]} of node {out.rows + bad[0]} is not a class "
                                 "(a whole number >= 0; NaN = unlabeled); regression targets are not supported")
            c = np.where(nan, -1, c).astype(np.int64)
        elif c.dtype.kind in "iu":
            c = c.astype(np.int64)
        else:
            raise InputError(f"{where}: labels of type {c.dtype}; give numbers")
        first = out.rows
        out.write(c, lambda i, v: f"{where}: label {v} of node {first + i}")


def build_typed(root: str, out: Any, origin: str, counts: Dict[str, int], relations: List[build.Relation],
                staged: Tuple[Dict[str, str], Dict[str, Any], Dict[str, Any]], feature_dtype: Optional[str],
                **build_args: Any) -> Dict[str, Any]:
    """:func:`ringgnn.data.build.build_hetero` of node types ``counts`` with their ``staged``
    (features, labels, splits by type) and ``relations``."""
    feats, labels, splits = staged
    types = [build.NodeType(t, n, features=feats.get(t), labels=labels.get(t), split=splits.get(t),
                            feature_dtype=feature_dtype if t in feats else None) for t, n in counts.items()]
    source = {"command": "convert", "from": origin, "dir": os.path.basename(os.path.normpath(root))}
    return build.build_hetero(out, types, relations, source=source, quote_input=False, **build_args)


def missing(path: str, why: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, f"no such file: {why}", path)


def need(path: str, why: str) -> str:
    if not os.path.isfile(path):
        raise missing(path, why)
    return path


def array(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def scheme_dir(root: str, scheme: Optional[str]) -> Optional[str]:
    """``root/split/SCHEME``: the scheme named, else the only one there; None without any."""
    top = os.path.join(root, "split")
    have = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d))) if os.path.isdir(top) else []
    if scheme is not None:
        if scheme not in have:
            raise InputError(f"{top}: no split scheme '{scheme}' (it has: {', '.join(have) or 'none'})")
        return os.path.join(top, scheme)
    if len(have) > 1:
        raise InputError(f"{top}: several split schemes ({', '.join(have)}); name one with --split-scheme")
    return os.path.join(top, have[0]) if have else None


def stage_edges(stage: Staging, npz: Npz, key: str, fix: str, ends: Sequence[Tuple[Optional[int], int, str]],
                stem: str) -> str:
    """Array ``key`` of ``npz``, OGB's (2, E) ``edge_index``, streamed to a staged ``.npy``;
    ``ends`` checks the ids: ``(row, count, what)``, row 0, 1 or None (both)."""
    f, s = npz.open(key, fix)
    where = f"{npz.path}: {key}"
    shape = s.shape[::-1] if s.transposed else s.shape  # as stored: (2, E) in either order
    if len(shape) != 2 or shape[0] != 2 or s.dtype.kind not in "iu":
        raise InputError(f"{where}: {s.dtype} of shape {shape}; OGB's edge_index is integers of shape (2, E)")
    e = shape[1]

    def place(k: int) -> str:  # entry k of the stream: row-major (2, E), or (E, 2) when transposed
        row, col = (k % 2, k // 2) if s.transposed else (k // e, k % e)
        return f"{where}[{'src' if row == 0 else 'dst'}, {col}]"

    with f, NpyWriter(stage.path(stem, where), np.int64) as out:
        seen = 0
        for chunk in s.flat_chunks():
            c = chunk.astype(np.int64, copy=False)
            for row, count, what in ends:
                if row is None:
                    check_ids(c, count, lambda i: place(seen + i), what)
                    continue
                k = np.arange(seen, seen + c.size)
                pick = np.flatnonzero((k % 2 if s.transposed else k // e) == row)
                check_ids(c[pick], count, lambda i, pick=pick: place(seen + pick[i]), what)
            out.write(c)
            seen += c.size
        # A Fortran-ordered (2, E) array streams as its (E, 2) transpose: one pair per row.
        return out.close(s.shape) if s.transposed else unambiguous_edges(out.close((2, e)), stage)


def stage_npz_features(stage: Staging, npz: Npz, key: str, n: int, stem: str, what: str) -> str:
    """Array ``key`` of ``npz``, the (n, D) features, staged (integers as float32)."""
    f, s = npz.open(key, "")
    if len(s.shape) != 2 or s.shape[0] != n or s.dtype.kind not in "fiu":
        raise InputError(f"{what} {s.dtype} of shape {s.shape}; give numbers of shape ({n}, D)")
    dtype = s.dtype if s.dtype in (np.float16, np.float32, np.float64) else np.float32
    with f, NpyWriter(stage.path(stem, f"{npz.path}: {key}"), dtype, s.shape[1:]) as out:
        for chunk in s.chunks():
            out.write(chunk)
        return out.close()


def stage_csv_features(stage: Staging, path: str, n: int, stem: str, has: str) -> str:
    """A CSV of features, one row per node, staged as float32; ``has`` says where ``n`` is from."""
    with NpyWriter(stage.path(stem, path), np.float32, ()) as out:
        for chunk in csv_floats(path):
            out.row_shape = chunk.shape[1:]
            out.write(chunk)
        if out.rows != n:
            raise InputError(f"{path}: {out.rows} rows, but {has}; give one row per node")
        return out.close()


def stage_labels(stage: Staging, stem: str, source: str, chunks: Iterator[Tuple[np.ndarray, str]], n: int,
                 mismatch: Callable[[int], str]) -> str:
    """Labels of ``n`` nodes staged; ``mismatch(rows)`` is the error for another count."""
    with LabelWriter(stage.path(stem, source), source) as out:
        write_labels(chunks, out)
        if out.rows != n:
            raise InputError(mismatch(out.rows))
        return out.close()


def stage_npz_labels(stage: Staging, npz: Npz, key: str, fix: str, stem: str, source: str, n: int,
                     mismatch: Callable[[int], str]) -> str:
    f, s = npz.open(key, fix)
    with f:
        return stage_labels(stage, stem, source, ((c, f"{npz.path}: {key}") for c in s.chunks()), n, mismatch)


def stage_ids(stage: Staging, ids: np.ndarray, stem: str, source: str) -> str:
    with NpyWriter(stage.path(stem, source), np.int64, ids.shape[1:]) as w:
        w.write(ids)
        return w.close()


def stage_split_dict(stage: Staging, path: str, n: int, what: str, sep: str, fix: str) -> Dict[str, str]:
    """A ``split_dict.pt`` of one node type (split -> ids below ``n``) staged, by ringgnn's split name."""
    d = load_split_dict(path)
    out = {}
    for k, name in split_names(d, path).items():
        a, where = array(d[k]), f"{path}: '{k}'"
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"{where}{sep} {a.dtype} of shape {a.shape}; give {fix}")
        a = a.astype(np.int64)
        check_ids(a, n, lambda i: f"{where}[{i}]", what)
        out[name] = stage_ids(stage, a, f"split-{name}", where)
    return out


def stage_csv_ids(stage: Staging, path: str, n: int, stem: str, what: str) -> str:
    with NpyWriter(stage.path(stem, path), np.int64) as w:
        for chunk in csv_column(path):
            if not np.all(chunk == np.floor(chunk)):
                raise InputError(f"{path}: not one node id per line; OGB's split files list node ids")
            ids = chunk.astype(np.int64)
            first = w.rows
            check_ids(ids, n, lambda i: f"{path}: line {first + i + 1}", what)
            w.write(ids)
        return w.close()
