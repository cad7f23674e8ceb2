"""What an error may show of an input's content: a file the user named is quoted up to
:data:`EXCERPT_CHARS`, a file a dataset named never."""

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
    user named the file (``quote``), else only the kind of error (the message may quote the file)."""
    if quote:
        return excerpt(str(e) or type(e).__name__)
    return f"{type(e).__name__}, {WITHHELD}"
