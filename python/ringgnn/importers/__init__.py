"""Importers: datasets in other libraries' layouts (OGB, MAG240M, GraphBolt, PyG objects,
tables) made into ringgnn datasets."""

from __future__ import annotations

import os
from typing import Optional

from ._stage import PathLike

SOURCES = ("edges", "graphbolt", "ogb", "mag240m", "table")


def detect(input: PathLike) -> Optional[str]:
    """The layout of directory ``input``: "mag240m", "ogb" (a ``raw/`` directory) or None."""
    path = os.fspath(input)
    if not os.path.isdir(path):
        return None
    inner = os.path.join(path, "mag240m_kddcup2021")
    if os.path.isdir(inner) and detect(inner) == "mag240m":
        return "mag240m"
    if os.path.isfile(os.path.join(path, "processed", "paper", "node_feat.npy")) or (
            os.path.isfile(os.path.join(path, "meta.pt")) and os.path.isdir(os.path.join(path, "processed"))):
        return "mag240m"
    if os.path.isdir(os.path.join(path, "raw")):
        return "ogb"
    return None
