"""Files the Python side writes: temporaries a killed run cannot leak, ``.npy`` outputs allocated
before they are mapped, and OS errors naming the path and the operation."""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import sys
from typing import Any, Iterator, Optional, Tuple, Union

import numpy as np

from . import _core

PathLike = Union[str, "os.PathLike[str]"]

MARKER: str = _core.TEMP_MARKER


def note(line: str) -> None:
    """Print a line about something done to the user's files (a stale temporary removed)."""
    print(f"ringgnn: {line}", file=sys.stderr, flush=True)


def temporary(parent: PathLike, label: str, directory: bool = False) -> "_core.Temporary":
    """A new locked temporary file (or directory) in ``parent`` for ``label``, after removing the
    stale ones there; the caller ``commit(final)``s or ``close()``s it."""
    parent = os.fspath(parent)
    with os_errors(f"creating a temporary {'directory' if directory else 'file'} in", parent):
        t = _core.Temporary(parent, label, directory)
    for _path, _bytes, line in t.reclaimed:
        note(line)
    return t


@contextlib.contextmanager
def replacing(path: PathLike, operation: str = "writing") -> Iterator[str]:
    """Write ``path`` whole or not at all: yields a temporary path beside it, renamed over
    ``path`` when the block ends; OS errors name ``path`` and ``operation``."""
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    with os_errors(operation, path):
        t = temporary(parent, os.path.basename(path))
        try:
            yield t.path
            t.commit(path)
        finally:
            t.close()


def allocated_memmap(path: PathLike, dtype: Any, shape: Tuple[int, ...]) -> np.memmap:
    """A new zero-filled ``.npy`` at ``path`` as a writable memory map whose every byte is
    allocated on disk (the package's one way to write through a map); removed on an error."""
    path = os.fspath(path)
    with _whole_or_removed(path):
        a = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(shape))
        try:
            _allocate(path, a.offset, a.offset + a.nbytes)
        except BaseException:
            del a  # unmapped before the file is removed
            raise
    return a


#: ``posix_fallocate``'s answers where the file system cannot (EINVAL: ZFS before 2.2).
_NO_FALLOCATE = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}


def _allocate(path: str, start: int, end: int) -> None:
    """Allocate bytes ``[0, end)`` of ``path``: ``posix_fallocate``, else zeros written over
    ``[start, end)``."""
    fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    try:
        if end > 0 and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, end)
                return
            except OSError as e:
                if e.errno not in _NO_FALLOCATE:
                    raise
        zeros = bytes(1 << 20)
        at = start
        while at < end:
            at += os.pwrite(fd, zeros[:min(len(zeros), end - at)], at)
        os.fsync(fd)
    finally:
        os.close(fd)


def save_npy(path: PathLike, array: np.ndarray) -> str:
    """``array`` saved as the ``.npy`` ``path`` with ``write``; removed on an error."""
    path = os.fspath(path)
    with _whole_or_removed(path), open(path, "wb") as f:
        np.save(_Stream(f), array, allow_pickle=False)
    return path


class _Stream:
    """A file's ``write`` alone, so that ``np.save`` writes with it, not ``tofile``."""

    def __init__(self, f: Any):
        self.write = f.write


@contextlib.contextmanager
def _whole_or_removed(path: str) -> Iterator[None]:
    """On any error of the block (a signal too) ``path`` is removed, and an OS error names it."""
    try:
        yield
    except OSError as e:
        _remove_quietly(path)
        raise _named(e, path) from None
    except BaseException:
        _remove_quietly(path)
        raise


def _named(e: OSError, path: str) -> OSError:
    if e.filename is not None or e.errno is None:
        return e
    new = type(e)(e.errno, e.strerror or os.strerror(e.errno), path)
    new.__traceback__ = e.__traceback__
    return new


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass  # not made, or already gone: the error being handled is the one to report


def reclaim(parent: PathLike) -> int:
    """Remove the stale temporaries in ``parent`` now (each reported); how many there were."""
    removed = _core.reclaim(os.fspath(parent))
    for _path, _bytes, line in removed:
        note(line)
    return len(removed)


@contextlib.contextmanager
def os_errors(operation: str, path: Optional[PathLike] = None) -> Iterator[None]:
    """Re-raise an ``OSError`` of the block as one of the same class and errno naming
    ``operation`` and ``path`` (in ``strerror`` and as ``.operation`` / ``.path``). Errors
    without an errno, ringgnn's own and those an inner block named are raised unchanged."""
    try:
        yield
    except OSError as e:
        if e.errno is None or isinstance(e, _core.RingGnnError) or getattr(e, "operation", None) is not None:
            raise
        raise _with_operation(e, operation, path).with_traceback(e.__traceback__) from None


def _with_operation(e: OSError, operation: str, path: Optional[PathLike]) -> OSError:
    shown = os.fspath(path) if path is not None else (None if e.filename is None else os.fsdecode(e.filename))
    reason = e.strerror or os.strerror(e.errno)
    filename = e.filename if e.filename is not None else shown
    new = type(e)(e.errno, f"{reason} ({operation} {shown})" if shown else f"{reason} ({operation})", filename, None,
                  e.filename2)
    new.operation, new.path, new.reason = operation, shown, reason
    return new


def describe(e: BaseException) -> str:
    """The CLI's one-line message of an error: ``OPERATION PATH: REASON [Errno N] (file F)`` for
    OS errors, else the error's text."""
    if isinstance(e, OSError) and getattr(e, "operation", None) is not None:
        where = f"{e.operation} {e.path}" if e.path else e.operation
        text = f"{where}: {e.reason} [Errno {e.errno}]"
        if e.filename is not None and e.path is not None:
            f = os.fsdecode(e.filename)
            own_temp = os.path.basename(f).startswith(f".{os.path.basename(e.path)}{MARKER}")
            if f != e.path and not own_temp:
                text += f" (file {f})"
        return text
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


def keep_files(files: "list[str]", directory: PathLike, what: str) -> None:
    """Move each of ``files`` into ``directory`` (``what`` names them in an OS error)."""
    for f in files:
        kept = os.path.join(directory, os.path.basename(f))
        with os_errors(f"keeping the {what}", kept):
            os.replace(f, kept)


_MAGIC = b"\x93NUMPY"
#: The header :class:`NpyWriter` reserves: room for any final shape.
_HEADER = 128


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
        """Finish the file, with ``shape`` (as many elements) in place of the rows written."""
        shape = (self.rows,) + self.row_shape if shape is None else tuple(shape)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape}
        text = repr(header).encode("latin1")
        pad = _HEADER - len(_MAGIC) - 2 - 2 - len(text) - 1
        with os_errors("writing", self.path):
            self._f.seek(0)
            self._f.write(_MAGIC + b"\x01\x00" + struct.pack("<H", _HEADER - 10) + text + b" " * pad + b"\n")
            self._f.close()
        return self.path
