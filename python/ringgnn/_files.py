"""Files the Python side writes and reads: temporaries a killed run cannot leak (the protocol is
``crates/ringgnn-store/src/temp.rs``'s), ``.npy`` outputs allocated before they are mapped, and
OS errors that name the path and the operation (docs/ARCHITECTURE.md, "Errors and cancellation").
"""

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

#: What marks a name as a ringgnn temporary (docs/ARCHITECTURE.md, "Temporaries").
MARKER: str = _core.TEMP_MARKER


def note(line: str) -> None:
    """Print a line about something done to the user's files (a stale temporary removed)."""
    print(f"ringgnn: {line}", file=sys.stderr, flush=True)


def temporary(parent: PathLike, label: str, directory: bool = False) -> "_core.Temporary":
    """A new locked temporary file (or directory) in ``parent`` for ``label`` (the final name,
    or what it is for), after removing the stale ones there (each reported on stderr). The
    caller ``commit(final)``s or ``close()``s it (removing it); until then it is locked."""
    parent = os.fspath(parent)
    with os_errors(f"creating a temporary {'directory' if directory else 'file'} in", parent):
        t = _core.Temporary(parent, label, directory)
    for _path, _bytes, line in t.reclaimed:
        note(line)
    return t


@contextlib.contextmanager
def replacing(path: PathLike, operation: str = "writing") -> Iterator[str]:
    """Write ``path`` whole or not at all: yields a locked temporary path beside it, renamed
    over ``path`` when the block ends; removed if the block raises. OS errors name ``path``
    and ``operation``."""
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
    """A new ``.npy`` at ``path`` (created, or truncated) of ``dtype`` and ``shape``, zero-filled,
    as a writable memory map whose every byte is allocated on disk (docs/ARCHITECTURE.md, "Errors
    and cancellation"): the one way the package writes a file through a map. On an error
    (``ENOSPC`` naming ``path``) the file is removed; the caller's :func:`os_errors` adds what it
    was writing."""
    path = os.fspath(path)
    with _whole_or_removed(path):
        a = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(shape))
        try:
            _allocate(path, a.offset, a.offset + a.nbytes)
        except BaseException:
            del a  # unmapped before the file is removed
            raise
    return a


#: What ``posix_fallocate`` answers where the file system cannot allocate ahead (glibc emulates
#: it on most of them; musl and some file systems do not): EINVAL is ZFS's answer before 2.2.
_NO_FALLOCATE = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}


def _allocate(path: str, start: int, end: int) -> None:
    """Allocate bytes ``[0, end)`` of the file ``path`` (whose bytes from ``start`` are zeros
    not yet written): ``posix_fallocate``, or where the file system has none, zeros written
    over ``[start, end)``, which allocates them as well where a write does."""
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
    """``array`` saved as the ``.npy`` ``path``, written with ``write`` (docs/ARCHITECTURE.md,
    "Errors and cancellation"); removed on an error, which names ``path``."""
    path = os.fspath(path)
    with _whole_or_removed(path), open(path, "wb") as f:
        np.save(_Stream(f), array, allow_pickle=False)
    return path


class _Stream:
    """A file's ``write`` alone: not a file object to ``np.save``, which then writes in chunks
    with ``write`` instead of ``tofile``."""

    def __init__(self, f: Any):
        self.write = f.write


@contextlib.contextmanager
def _whole_or_removed(path: str) -> Iterator[None]:
    """The block writes the file ``path``; on any error (a signal too) the file is removed, and an
    OS error names ``path`` where it named no file (a failed ``write()`` names none)."""
    try:
        yield
    except OSError as e:
        _remove_quietly(path)
        raise _named(e, path) from None
    except BaseException:
        _remove_quietly(path)
        raise


def _named(e: OSError, path: str) -> OSError:
    """``e`` with ``path`` as its file name where it had none (a failed write has none)."""
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
    """Re-raise an ``OSError`` of the block as one naming ``operation`` (``"writing the
    checkpoint"``) and ``path``: the same class, ``errno``, ``filename`` (``path`` where the error
    had none, as a failed ``write()`` has) and ``filename2``, with the operation and path in
    ``strerror`` and as ``.operation`` / ``.path``. An error that already names its operation
    (from an inner block) is raised unchanged: the innermost knows best; so are errors without
    an errno (made by ringgnn or a library with their own message)."""
    try:
        yield
    except OSError as e:
        # ringgnn's own errors (an existing output is a FileExistsError) and errors made without
        # an errno already say what they mean; one that names its operation came from an inner block.
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
    """The one-line message of an error for the CLI: ``OPERATION PATH: REASON [Errno N]`` for
    OS errors (with the file that failed, where it is another than PATH and not PATH's own
    temporary), else the error's text."""
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
    """Move each of ``files`` into ``directory`` under its own name (``what`` names them in an
    OS error): the layer files an inference run was asked to keep."""
    for f in files:
        kept = os.path.join(directory, os.path.basename(f))
        with os_errors(f"keeping the {what}", kept):
            os.replace(f, kept)


_MAGIC = b"\x93NUMPY"
#: Header length reserved by :class:`NpyWriter` (magic + version + length + dict + padding): room
#: for any shape, so the final shape can be written over the first without moving the data.
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
