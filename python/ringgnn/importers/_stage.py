"""What every importer shares: a locked staging directory beside the output for the files the
builder cannot read as the source gives them, ``.npy`` files written and read in chunks (never
a whole array in memory), and errors that name the user's file.

The builders (:func:`ringgnn.build.convert`, :func:`ringgnn.build.build_hetero`) stream edge
lists and ``.npy`` features themselves, within ``--memory``; an importer only rewrites what they
cannot take as given (a member of an ``.npz``, CSV features, labels with NaN, split files) and
checks ids and lengths on the way, so an error names the source file rather than a staged copy.
"""

from __future__ import annotations

import os
import struct
from typing import IO, Any, Callable, Iterator, Optional, Tuple, Union

import numpy as np

from .. import _core
from .._core import InputError
from .._files import os_errors, save_npy, temporary

PathLike = Union[str, "os.PathLike[str]"]

#: Bytes per chunk read from or written to a staged array: large enough that per-chunk work is
#: negligible, small next to any build budget.
CHUNK_BYTES = 8 << 20

_MAGIC = b"\x93NUMPY"
#: Header length reserved by :class:`NpyWriter` (magic + version + length + dict + padding): room
#: for any shape, so the final shape can be written over the first without moving the data.
_HEADER = 128


class Staging:
    """A locked temporary directory beside ``out`` (removed by :meth:`close`) for staged files.
    Refuses at once, before any work, an ``out`` the build may not write (``_core.check_output``:
    it exists without ``overwrite``, or is neither an empty directory nor a dataset) or whose
    parent does not exist."""

    def __init__(self, out: PathLike, overwrite: bool):
        out = os.fspath(out)
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise InputError(f"{parent}: the parent directory does not exist; create it first")
        _core.check_output(out, overwrite)  # the builder checks it again
        self._tmp = temporary(parent, os.path.basename(os.path.normpath(out)), directory=True)
        self.dir = self._tmp.path
        self._n = 0

    def path(self, stem: str) -> str:
        """A new file name in the staging directory (``stem`` says what it holds)."""
        self._n += 1
        return os.path.join(self.dir, f"{self._n}-{stem}.npy")

    def close(self) -> None:
        self._tmp.close()

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class NpyWriter:
    """A ``.npy`` file of ``dtype`` rows of ``row_shape`` written chunk by chunk; the number of
    rows is counted and written into the header at :meth:`close`."""

    def __init__(self, path: str, dtype: Any, row_shape: Tuple[int, ...] = ()):
        self.path, self.dtype, self.row_shape, self.rows = path, np.dtype(dtype), tuple(row_shape), 0
        with os_errors("writing", path):
            self._f = open(path, "wb")
            self._f.write(b"\0" * _HEADER)

    def __enter__(self) -> "NpyWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._f.closed:  # an error before close(): the staging directory goes with it
            self._f.close()

    def write(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a, dtype=self.dtype)
        if a.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {a.shape[1:]}, expected {self.row_shape}")  # a bug, not input
        with os_errors("writing", self.path):
            self._f.write(a.tobytes())
        self.rows += a.shape[0]

    def close(self, shape: Optional[Tuple[int, ...]] = None) -> str:
        """Finish the file; ``shape`` (of as many elements as were written) replaces the shape
        of the rows written (a flat stream written as the (2, E) array it is)."""
        shape = (self.rows,) + self.row_shape if shape is None else tuple(shape)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape}
        text = repr(header).encode("latin1")
        pad = _HEADER - len(_MAGIC) - 2 - 2 - len(text) - 1
        with os_errors("writing", self.path):
            self._f.seek(0)
            self._f.write(_MAGIC + b"\x01\x00" + struct.pack("<H", _HEADER - 10) + text + b" " * pad + b"\n")
            self._f.close()
        return self.path


class NpyStream:
    """The array of a ``.npy`` stream (a file, or a member of an ``.npz``) read in chunks of
    rows: ``shape``, ``dtype`` and :meth:`chunks`. A Fortran-ordered 2-D array is read as its
    C-ordered transpose (``transposed`` is then True)."""

    def __init__(self, f: IO[bytes], name: str):
        self.f, self.name = f, name
        try:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except (ValueError, SyntaxError, struct.error) as e:
            raise InputError(f"{name}: not a .npy array ({e}); save it with numpy.save") from None
        if dtype.hasobject:
            raise InputError(f"{name}: holds Python objects ({dtype}); save a numeric array")
        self.transposed = bool(fortran) and len(shape) > 1
        self.shape = tuple(reversed(shape)) if self.transposed else tuple(shape)
        self.dtype = dtype

    def chunks(self, rows: Optional[int] = None) -> Iterator[np.ndarray]:
        """Consecutive row blocks of the (C-ordered) array, in the file's byte order."""
        row = int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1
        step = rows or max(1, CHUNK_BYTES // max(1, row * self.dtype.itemsize))
        left = self.shape[0] if self.shape else 1
        while left:
            n = min(step, left)
            want = n * row * self.dtype.itemsize
            data = self.f.read(want)
            if len(data) != want:
                raise InputError(f"{self.name}: ends early (the file is truncated); download or save it again")
            yield np.frombuffer(data, dtype=self.dtype).reshape((n,) + self.shape[1:])
            left -= n


    def flat_chunks(self) -> Iterator[np.ndarray]:
        """The elements in file order (C order of the array as stored), in 1-D chunks: how a
        (2, E) edge array is streamed, whose rows are each larger than a chunk."""
        left = int(np.prod(self.shape, dtype=np.int64))
        step = max(1, CHUNK_BYTES // self.dtype.itemsize)
        while left:
            n = min(step, left)
            data = self.f.read(n * self.dtype.itemsize)
            if len(data) != n * self.dtype.itemsize:
                raise InputError(f"{self.name}: ends early (the file is truncated); download or save it again")
            yield np.frombuffer(data, dtype=self.dtype)
            left -= n


def open_npy(path: str) -> Tuple[IO[bytes], NpyStream]:
    """A ``.npy`` file opened as a :class:`NpyStream` (the caller closes the file)."""
    with os_errors("reading", path):
        f = open(path, "rb")
    return f, NpyStream(f, path)


def unambiguous_edges(path: str, stage: Staging) -> str:
    """``path``, a ``.npy`` edge array of shape (2, E), as the builder will read it: the builder
    reads a (2, 2) array as one edge per row, so that one shape (two edges) is staged transposed."""
    with os_errors("reading", path):
        a = np.load(path, mmap_mode="r")
    if a.shape != (2, 2):
        return path
    out = stage.path("edges")
    with os_errors("writing", out):
        save_npy(out, np.ascontiguousarray(np.asarray(a).T))
    return out


def check_ids(ids: np.ndarray, limit: int, where: Callable[[int], str], what: str) -> None:
    """Refuse ids outside ``[0, limit)``: ``where(i)`` names entry ``i``'s place in the source."""
    bad = np.flatnonzero((ids < 0) | (ids >= limit))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{where(i)}: {what} {ids[i]} is out of range ({limit} nodes); give ids 0 .. {limit - 1}")
