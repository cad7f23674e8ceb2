"""Paths a dataset description names, kept inside its folder."""

from __future__ import annotations

import os

from .._core import InputError
from .._excerpt import quoted

#: How to use a file outside the folder; every refusal ends with it.
USE_A_SYMLINK = ("paths in a dataset description stay inside its folder; to use a file elsewhere, put a symlink "
                 "to it inside the folder (ln -s /path/to/file {folder}/NAME) and name the link")


def resolve(folder: str, path: str, where: str) -> str:
    """The absolute path of ``path`` inside ``folder``; an :class:`ringgnn.InputError` naming
    ``where`` for an absolute path, one whose ``..`` leaves ``folder``, or one holding a NUL."""
    folder = os.path.abspath(folder)
    if "\0" in path:
        problem = "holds a NUL character"
    elif os.path.isabs(path):
        problem = "is an absolute path"
    else:
        full = os.path.normpath(os.path.join(folder, path))
        if os.path.commonpath([folder, full]) == folder:
            return full
        problem = "climbs out of the folder with '..'"
    raise InputError(f"{where}: {quoted(path)} {problem}; {USE_A_SYMLINK.format(folder=folder)}")
