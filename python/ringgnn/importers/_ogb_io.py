"""Reading OGB's files: gzip CSVs in chunks of lines (:func:`csv_floats`, :func:`csv_column`),
the arrays of an ``.npz`` as streams (:class:`Npz`), and ``torch.save`` files (:func:`load_pt`,
:func:`load_split_dict`) without running code from them and, when they hold only numpy arrays
and numbers (what OGB and MAG240M save), without importing torch; OGB's node labels, checked as
they are written (:func:`write_labels`). Shared by :mod:`.ogb`, :mod:`.ogbl`, :mod:`.ogb_hetero`,
:mod:`.ogb_hetero_npz` and :mod:`.mag240m`.

The user names an OGB folder, not its files: errors name a file and its line, never quote its
content (:mod:`ringgnn._excerpt`), as a downloaded folder may hold links to any file."""

from __future__ import annotations

import gzip
import itertools
import pickle
import re
import zipfile
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .._core import InputError
from .._excerpt import WITHHELD, reason
from .._files import os_errors
from ._stage import LabelWriter, NpyStream

#: Lines parsed per chunk of a CSV: a few MiB of text.
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
            a = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2,
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
    """Where the first field of ``lines`` (numbered from ``first``) that is not a number is, as
    "line N, column C", without its text."""
    for i, line in enumerate(lines):
        for c, field in enumerate(line.rstrip("\r\n").split(",")):
            try:
                float(field) if field.strip() else None
            except ValueError:
                return f"line {first + i}, column {c + 1}"
    return f"lines {first}..{first + len(lines) - 1}: a field"


def csv_column(path: str) -> Iterator[np.ndarray]:
    """The values of a one-column CSV as float64 chunks; an empty line (how pandas writes NaN)
    or ``nan`` is NaN."""
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
    """An ``.npz`` archive whose arrays are read as streams (never whole)."""

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


def load_split_dict(path: str) -> Dict[str, Any]:
    """OGB's ``split_dict.pt``: split name -> node ids (numpy arrays or tensors)."""
    d = load_pt(path, "OGB's split_dict.pt maps train/valid/test to node ids")
    if not isinstance(d, dict) or not d:
        raise InputError(f"{path}: holds a {type(d).__name__}, not a dictionary of splits; OGB's split_dict.pt "
                         "maps train/valid/test to node ids")
    return d


class _NeedsTorch(Exception):
    """The file holds more than numpy arrays and numbers (tensors): torch must load it."""


class _NumpyUnpickler(pickle.Unpickler):
    """An unpickler that builds only numpy arrays, numbers and containers (Python's "restricting
    globals" recipe): everything else, tensors included, raises :class:`_NeedsTorch`."""

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
    """A ``torch.save`` file (zip format) that holds only numpy arrays, numbers and containers,
    read without importing torch (which would take a few hundred MB of the memory budget)."""
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
    """A small ``torch.save`` file of OGB's (tensors, numpy arrays, numbers), never running code
    from it: numpy arrays and numbers are read without torch by an unpickler that builds nothing
    else; anything more (tensors) goes to torch's safe unpickler with numpy arrays allowed."""
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
    """Check OGB node labels (one column; NaN = unlabeled, written -1; whole classes >= 0) chunk by
    chunk (``(array, where)``: ``where`` names the file in errors) and write them to ``out``."""
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
