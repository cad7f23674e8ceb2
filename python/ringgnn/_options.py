"""Parsing of option values shared by the CLI and the Python API: sizes ("512M") and splits
("train=0.5,val=0.1,test=0.4" or "train=train.npy,val=val.npy")."""

from __future__ import annotations

import os
import re
from typing import List, Mapping, Tuple, Union

from ._core import InputError

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}

SplitArg = Union[List[Tuple[str, float]], List[Tuple[str, str]]]


def parse_size(text: str) -> int:
    """Bytes from '1073741824', '512M', '1G', '64k' (suffixes are powers of 1024)."""
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"'{text}' is not a size; use bytes or a number with K, M, G or T (e.g. 512M)")
    return int(m.group(1)) << _UNITS[m.group(2).upper()]


def parse_split(spec: Union[str, Mapping[str, Union[float, str, os.PathLike]]]) -> SplitArg:
    """A split spec as the core wants it: [(name, fraction), ...] or [(name, path), ...].

    Accepts "train=0.5,val=0.1,test=0.4", "train=a.npy,val=b.npy", or a dict of either.
    """
    if isinstance(spec, str):
        items = []
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip():
                raise InputError(
                    f"split '{spec}': '{part}' is not NAME=VALUE; use e.g. train=0.5,val=0.1,test=0.4 "
                    "or train=train.npy,val=val.npy"
                )
            items.append((name.strip(), value.strip()))
    else:
        items = [(str(k), v) for k, v in dict(spec).items()]
    if not items:
        raise InputError(f"split '{spec}' names no split; use e.g. train=0.5,val=0.1,test=0.4")
    names = [n for n, _ in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"split '{spec}' names {', '.join(dup)} more than once")

    fractions = [_as_fraction(v) for _, v in items]
    if all(f is not None for f in fractions):
        return [(n, float(f)) for (n, _), f in zip(items, fractions)]
    if any(f is not None for f in fractions):
        raise InputError(f"split '{spec}' mixes fractions and files; give all fractions or all .npy files")
    return [(n, os.fspath(v)) for n, v in items]


def _as_fraction(value) -> "float | None":
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_self_loops(value: Union[bool, str]) -> str:
    """'keep' or 'drop' (True/False mean keep/drop)."""
    if isinstance(value, bool):
        return "keep" if value else "drop"
    if value not in ("keep", "drop"):
        raise InputError(f"self_loops must be 'keep' or 'drop', not '{value}'")
    return value
