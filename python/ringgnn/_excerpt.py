"""What an error may show of an input's content: the one owner of excerpts on the Python side
(the Rust side's is ``ringgnn_store::excerpt``, whose length this module takes).

* A file the user named (``ringgnn convert edges.parquet``, a ``metadata.yaml``): an error may
  quote :func:`excerpt` of the offending text, at most :data:`EXCERPT_CHARS` characters, cut with
  an ellipsis; a library's reason about it (which may hold a whole line) is cut the same way by
  :func:`reason`.
* A file a dataset description named (a GraphBolt ``path:``, a file an OGB folder's layout
  names): an error names the file and the line, entry or field, never its content
  (``quote=False``; :data:`WITHHELD` says so in the message). A downloaded dataset may hold a
  symlink to any file of the user's (``/etc/shadow``, ``~/.aws/credentials``), and what it
  points at must not reach a log through an error message. Numbers read from a typed array
  (an id or label out of range, with its entry) are data, not text, and are named either way.
"""

from __future__ import annotations

from typing import Union

from . import _core

#: Characters of an input an error quotes at most.
EXCERPT_CHARS: int = _core.EXCERPT_CHARS

#: What an error about a withheld file says in place of its content.
WITHHELD = "not quoted: the dataset named this file, not you"


def excerpt(text: Union[str, bytes]) -> str:
    """``text`` for an error message: bytes decoded leniently, control characters escaped, at
    most :data:`EXCERPT_CHARS` characters, ``...`` appended when cut."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    cut = text[:EXCERPT_CHARS]
    shown = "".join(c.encode("unicode_escape").decode("ascii") if not c.isprintable() else c for c in cut)
    return shown + ("..." if len(text) > EXCERPT_CHARS else "")


def quoted(value: object) -> str:
    """A value of a file the user named, for a message: ``'text'`` for strings, ``repr`` else,
    each as an :func:`excerpt`."""
    return f"'{excerpt(value)}'" if isinstance(value, (str, bytes)) else excerpt(repr(value))


def reason(e: BaseException, quote: bool) -> str:
    """A library's reason for failing to read a file: its message as an :func:`excerpt` when the
    user named the file (``quote``), else only the kind of error, since the message may quote the
    file (numpy's ``could not convert string 'root:x:0:0...'``, gzip's first bytes)."""
    if quote:
        return excerpt(str(e) or type(e).__name__)
    return f"{type(e).__name__}, {WITHHELD}"
