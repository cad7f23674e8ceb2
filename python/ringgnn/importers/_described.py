"""Paths a dataset description names: the one owner of resolving them (a GraphBolt
``metadata.yaml``'s ``path:`` fields, the files an OGB folder's type and relation lists name).

A description is data that arrives with a dataset, often downloaded. The paths it names must
stay inside its folder: :func:`resolve` refuses an absolute path and any ``..`` that climbs out
of the folder, with an :class:`ringgnn.InputError` naming the field. The check is on the path as
written, normalised (``a/../b`` is ``b``); the normalised path is the one opened, so the kernel
never walks a ``..`` of its own.

To use a file that lives elsewhere, place a symlink to it inside the folder and name the link
(``ln -s /data/big/feat.npy DATASET/feat.npy``): a symlink inside the folder is followed
wherever it points, as it is the user's own way to say where the file is. Since a downloaded
archive may hold symlinks too, errors about described files never quote their content
(:mod:`ringgnn._excerpt`): a link to ``/etc/shadow`` can fail a conversion, not leak a line.
"""

from __future__ import annotations

import os

from .._core import InputError
from .._excerpt import quoted

#: How to use a file outside the folder; every refusal ends with it.
USE_A_SYMLINK = ("paths in a dataset description stay inside its folder; to use a file elsewhere, put a symlink "
                 "to it inside the folder (ln -s /path/to/file {folder}/NAME) and name the link")


def resolve(folder: str, path: str, where: str) -> str:
    """The absolute, normalised path of ``path`` (as a description wrote it) inside ``folder``.
    ``where`` names the field for the error (``"/d/metadata.yaml: graph.edges[0].path"``).
    Raises :class:`ringgnn.InputError` for an absolute path, one whose ``..`` leaves ``folder``,
    or one holding a NUL character."""
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
