"""ringgnn: train graph neural networks on graphs larger than RAM.

This package holds the Python API and the ``ringgnn`` command; the work is done by the Rust
core in ``ringgnn._core``. Start with :class:`Dataset` and :func:`convert`.
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

__all__ = [
    "CorruptDatasetError",
    "Dataset",
    "DatasetExistsError",
    "InputError",
    "RingGnnError",
    "__version__",
    "convert",
    "generate_rmat",
    "generate_sbm",
    "read_manifest",
    "verify",
]
