"""ringgnn: train graph neural networks on graphs larger than RAM.

This package holds the Python API and the ``ringgnn`` command; the work is done by the Rust
core in ``ringgnn._core``. Start with :class:`Dataset` and :func:`convert`; sample with
:class:`NeighborSampler` (link batches: :class:`LinkSampler`, :class:`LinkLoader`;
heterogeneous datasets: :class:`HeteroDataset`, :func:`build_hetero`, :class:`HeteroNeighborSampler`,
:class:`HeteroLoader`); use a trained run with :func:`infer`; query a ``ringgnn serve``
with :class:`Client`; PyG adapters are in
:mod:`ringgnn.pyg` (imported on demand: ``import ringgnn`` imports neither torch nor grpc).
"""

from ._core import (
    BusyError,
    CancelledError,
    CorruptDatasetError,
    DeadlineExceededError,
    DatasetExistsError,
    InputError,
    RingGnnError,
    ShuttingDownError,
    __version__,
)
from .client import Client
from .build import NodeType, Relation, build_hetero, convert, generate_rmat, generate_sbm, read_manifest, verify
from .dataset import Dataset, HeteroDataset
from .hetero import HeteroLoader, HeteroNeighborSampler, HeteroSample
from .importers.pyg_io import from_pyg
from .inference import infer
from .links import LinkLoader, LinkSampler, NegativeSampling
from .loader import Loader
from .sampler import NeighborSampler, SampledSubgraph

__all__ = [
    "BusyError",
    "CancelledError",
    "Client",
    "CorruptDatasetError",
    "DeadlineExceededError",
    "Dataset",
    "DatasetExistsError",
    "HeteroDataset",
    "from_pyg",
    "HeteroLoader",
    "HeteroNeighborSampler",
    "HeteroSample",
    "InputError",
    "LinkLoader",
    "LinkSampler",
    "Loader",
    "NegativeSampling",
    "NeighborSampler",
    "NodeType",
    "Relation",
    "RingGnnError",
    "SampledSubgraph",
    "ShuttingDownError",
    "__version__",
    "build_hetero",
    "convert",
    "generate_rmat",
    "generate_sbm",
    "infer",
    "read_manifest",
    "verify",
]
