"""ringgnn: train graph neural networks on graphs larger than RAM.

This package holds the Python API and the ``ringgnn`` command; the work is done by the Rust
core in ``ringgnn._core``. Start with :class:`Dataset` and :func:`convert`; sample with
:class:`NeighborSampler`; PyG adapters are in :mod:`ringgnn.pyg` (imported on demand: ``import
ringgnn`` does not import torch).
"""

from ._core import (
    CorruptDatasetError,
    DatasetExistsError,
    InputError,
    RingGnnError,
    __version__,
)
from .build import convert, generate_rmat, generate_sbm, read_manifest, verify
from .dataset import Dataset
from .loader import Loader
from .sampler import NeighborSampler, SampledSubgraph

__all__ = [
    "CorruptDatasetError",
    "Dataset",
    "DatasetExistsError",
    "InputError",
    "Loader",
    "NeighborSampler",
    "RingGnnError",
    "SampledSubgraph",
    "__version__",
    "convert",
    "generate_rmat",
    "generate_sbm",
    "read_manifest",
    "verify",
]
