"""What every importer shares: the staging directory beside the output (its errors name the
user's input), ``.npy`` streams read in chunks, split names and the label check."""

from __future__ import annotations

import os
import re
import struct
from typing import IO, Any, Callable, Dict, Iterator, Optional, Tuple, Union

import numpy as np

from .. import _core
from .._core import InputError
from .._excerpt import quoted, reason
from .._files import NpyWriter, os_errors, save_npy, temporary

PathLike = Union[str, "os.PathLike[str]"]

CHUNK_BYTES = 8 << 20

#: The builder's advice about ``--num-nodes``, an option an importer does not take.
_NUM_NODES_ADVICE = re.compile(r"--num-nodes (\d+); raise --num-nodes or (?:leave it out \(the default is the "
                               r"largest id(?: \+ 1)?\)|drop the option)")


class Staging:
    """A locked temporary directory beside ``out`` for staged files; refuses at once an ``out``
    the build may not write. As a context manager it rewrites the errors raised inside it to
    name each staged file's source (:meth:`path`) and the node count's (:meth:`node_count_from`)."""

    def __init__(self, out: PathLike, overwrite: bool):
        out = os.fspath(out)
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise InputError(f"{parent}: the parent directory does not exist; create it first")
        _core.check_output(out, overwrite)  # the builder checks it again
        self._tmp = temporary(parent, os.path.basename(os.path.normpath(out)), directory=True)
        self.dir, self.out = self._tmp.path, out
        self._n = 0
        self._sources: Dict[str, str] = {}
        self._count_source: Optional[str] = None

    def check_room(self, what: str, nbytes: int) -> None:
        """Refuse, before writing, a staged file of ``nbytes`` that the file system cannot hold."""
        _core.check_room(self.dir, self.out, [(what, int(nbytes))])

    def path(self, stem: Optional[str], source: Optional[str] = None) -> str:
        """A new file name in the staging directory; ``source`` names the user's input it is a
        copy of, for errors about its content."""
        self._n += 1
        path = os.path.join(self.dir, f"{self._n}.npy" if stem is None else f"{self._n}-{stem}.npy")
        if source is not None:
            self._sources[path] = source
        return path

    def save(self, a: np.ndarray, stem: Optional[str], source: Optional[str] = None, what: Optional[str] = None) -> str:
        """``a`` written to a new staged ``.npy`` (:meth:`path`), after :meth:`check_room`."""
        path = self.path(stem, source)
        self.check_room(what or f"the staged {stem}", a.nbytes)
        with os_errors("writing", path):
            save_npy(path, np.ascontiguousarray(a))
        return path

    def source_of(self, path: str) -> str:
        return self._sources.get(path, path)

    def node_count_from(self, source: str) -> None:
        self._count_source = source

    def named(self, message: str) -> str:
        for path, source in self._sources.items():
            message = message.replace(path, source)
            message = re.sub(rf"(?<![\w.-]){re.escape(os.path.basename(path))}(?![\w.-])", lambda _: source, message)
        if self._count_source is not None:
            message = _NUM_NODES_ADVICE.sub(
                lambda m: f"the node count {m.group(1)} ({self._count_source}); fix the ids, or the count there",
                message)
        return message

    def close(self) -> None:
        self._tmp.close()

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, kind: Any, e: Optional[BaseException], tb: Any) -> None:
        self.close()
        if isinstance(e, OSError):  # one that no inner block named (os_errors leaves those as they are)
            with os_errors("importing, in the staging directory", self.dir):
                raise e
        if isinstance(e, InputError):
            message = self.named(str(e))
            if message != str(e):
                raise type(e)(message).with_traceback(tb) from None


SPLIT_ALIASES = {"valid": "val", "validation": "val"}
_SPLIT_NAME = re.compile(r"^[a-z0-9_]+$")  # a split's file name part (docs/FORMAT.md)


def split_name(name: Any, where: str, option: str = "") -> str:
    """A source's split name as ringgnn's: lower-case, ``-`` and spaces as ``_``,
    ``valid``/``validation`` as ``val``; anything but letters, digits and ``_`` is refused."""
    text = str(name).strip()
    out = re.sub(r"[\s-]+", "_", text.lower())
    out = SPLIT_ALIASES.get(out, out)
    if not _SPLIT_NAME.match(out):
        raise InputError(f"{where}: split {quoted(text)}{option} is not a split name; use letters a-z, digits and _ "
                         "(train, val, test)")
    return out


def split_names(names: Any, where: str) -> Dict[Any, str]:
    """Each of a source's split ``names`` -> ringgnn's; two that become one are refused."""
    out: Dict[Any, str] = {}
    for name in names:
        new = split_name(name, where)
        same = [k for k, v in out.items() if v == new]
        if same:
            raise InputError(f"{where}: splits {quoted(same[0])} and {quoted(name)} are both split '{new}'; "
                             "give one of them")
        out[name] = new
    return out


DENSE_CLASSES = 1 << 16


class LabelWriter:
    """The staged ``.npy`` labels (int64, -1 = unlabeled) of every importer, written chunk by
    chunk. Refused, naming ``source``: labels below -1, and more than :data:`DENSE_CLASSES`
    classes of which fewer than half are used (one stray value would make a huge model)."""

    def __init__(self, path: str, source: str):
        self.source = source
        self._w = NpyWriter(path, np.int64)
        self.max, self.labeled = -1, 0

    @property
    def rows(self) -> int:
        return self._w.rows

    def __enter__(self) -> "LabelWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._w.__exit__()

    def write(self, labels: np.ndarray, where: Optional[Callable[[int, int], str]] = None) -> None:
        """Append int64 ``labels``; ``where(i, label)`` names entry ``i`` in errors."""
        labels = np.asarray(labels, dtype=np.int64)
        bad = np.flatnonzero(labels < -1)
        if bad.size:
            i, v = int(bad[0]), int(labels[bad[0]])
            at = where(i, v) if where else f"{self.source}: label {v} of node {self._w.rows + i}"
            raise InputError(f"{at}; give classes >= 0 (-1 = unlabeled)")
        if labels.size:
            self.max = max(self.max, int(labels.max()))
            self.labeled += int(np.count_nonzero(labels >= 0))
        self._w.write(labels)

    def close(self) -> str:
        path = self._w.close()
        classes = self.max + 1
        if classes <= DENSE_CLASSES:
            return path
        used = self.labeled if classes > 2 * self.labeled else self._used(path, classes)
        if 2 * used < classes:
            what = f"{self.labeled:,} nodes are labeled" if classes > 2 * self.labeled else \
                f"{used:,} of those class ids are used"
            raise InputError(f"{self.source}: label {self.max} makes {classes:,} classes (the largest label + 1), "
                             f"but only {what}; number the classes 0 .. C-1 (numpy.unique(y, return_inverse=True)), "
                             "or fix the wrong value")
        return path

    @staticmethod
    def _used(path: str, classes: int) -> int:
        seen = np.zeros(classes, dtype=bool)
        f, s = open_npy(path)
        with f:
            for chunk in s.chunks():
                seen[chunk[chunk >= 0]] = True
        return int(np.count_nonzero(seen))


class NpyStream:
    """The array of a ``.npy`` stream read in chunks of rows; a Fortran-ordered 2-D array is
    read as its C-ordered transpose (``transposed``)."""

    def __init__(self, f: IO[bytes], name: str):
        self.f, self.name = f, name
        try:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except (ValueError, SyntaxError, struct.error) as e:
            # numpy's reason quotes the first bytes; the readers of folder layouts never quote a file
            raise InputError(f"{name}: not a .npy array ({reason(e, quote=False)}); save it with numpy.save") from None
        if dtype.hasobject:
            raise InputError(f"{name}: holds Python objects ({dtype}); save a numeric array")
        self.transposed = bool(fortran) and len(shape) > 1
        self.shape = tuple(reversed(shape)) if self.transposed else tuple(shape)
        self.dtype = dtype

    def chunks(self, rows: Optional[int] = None) -> Iterator[np.ndarray]:
        row = int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1
        step = rows or max(1, CHUNK_BYTES // max(1, row * self.dtype.itemsize))
        for n, data in self._blocks(self.shape[0] if self.shape else 1, step, row):
            yield data.reshape((n,) + self.shape[1:])

    def flat_chunks(self) -> Iterator[np.ndarray]:
        """The elements in file order, in 1-D chunks (a (2, E) array's rows exceed a chunk)."""
        left, step = int(np.prod(self.shape, dtype=np.int64)), max(1, CHUNK_BYTES // self.dtype.itemsize)
        return (data for _, data in self._blocks(left, step, 1))

    def _blocks(self, left: int, step: int, row: int) -> Iterator[Tuple[int, np.ndarray]]:
        while left:
            n = min(step, left)
            want = n * row * self.dtype.itemsize
            with os_errors("reading", self.name):
                data = self.f.read(want)
            if len(data) != want:
                raise InputError(f"{self.name}: ends early (the file is truncated); download or save it again")
            yield n, np.frombuffer(data, dtype=self.dtype)
            left -= n


def open_npy(path: str) -> Tuple[IO[bytes], NpyStream]:
    with os_errors("reading", path):
        f = open(path, "rb")
    return f, NpyStream(f, path)


def unambiguous_edges(path: str, stage: Staging) -> str:
    """``path``, a ``.npy`` (2, E) edge array, as the builder reads it: a (2, 2) one (read as
    rows) is staged transposed."""
    with os_errors("reading", path):
        a = np.load(path, mmap_mode="r")
    if a.shape != (2, 2):
        return path
    return stage.save(np.asarray(a).T, "edges", stage.source_of(path))


def check_ids(ids: np.ndarray, limit: int, where: Callable[[int], str], what: str, fix: Optional[str] = None) -> None:
    """Refuse ids outside ``[0, limit)``: ``where(i)`` names entry ``i``, ``fix`` what to do."""
    bad = np.flatnonzero((ids < 0) | (ids >= limit))
    if bad.size:
        i, fix = int(bad[0]), f"give ids 0 .. {limit - 1}" if fix is None else fix
        raise InputError(f"{where(i)}: {what} {ids[i]} is out of range ({limit} nodes)" + (fix and f"; {fix}"))
