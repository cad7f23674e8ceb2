"""Files the Python side writes and reads: temporaries a killed run cannot leak, and OS errors
that name the path and the operation.

**Temporaries.** Every temporary the package makes (a staging directory, a file written under a
temporary name and renamed into place when complete) is a ``ringgnn._core.Temporary``: named
``.LABEL.ringgnn-tmp-PID-NONCE`` beside what it becomes and ``flock``-ed by its writer for as
long as it lives. Making one first removes the temporaries in the same directory whose lock is
free (their writer was killed) and prints one line per removal on stderr. The protocol has one
owner, ``crates/ringgnn-store/src/temp.rs``, whose docs say why it is safe (including the window
between creating a temporary and locking it); this module only reports and wraps it.

**OS errors.** :func:`os_errors` is the one place that turns an ``OSError`` into one that says
what was being done to which file: the same class, errno and filename, the operation and path
in ``strerror``, and :func:`describe` for the CLI's one-line message
(``writing /run/metrics.json: No space left on device [Errno 28]``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional, Union

from . import _core

PathLike = Union[str, "os.PathLike[str]"]

#: What marks a name as a ringgnn temporary (see the module's docstring).
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
