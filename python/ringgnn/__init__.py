"""ringgnn: train graph neural networks on graphs larger than RAM. The public names and modules are
imported on first use (PEP 562): ``import ringgnn`` imports nothing, so the command is inside its
Ctrl-C handler before numpy or the core loads."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:  # at run time, __getattr__ below
    from ._core import (BusyError, CancelledError, CorruptDatasetError, DatasetExistsError, DeadlineExceededError,
                        InputError, RingGnnError, ShuttingDownError, __version__)
    from .data.build import (NodeType, Relation, build_hetero, convert, generate_rmat, generate_sbm, read_manifest,
                             verify)
    from .data.dataset import Dataset, HeteroDataset
    from .importers.pyg_io import from_pyg
    from .inference.run import infer
    from .sampling.hetero import HeteroLoader, HeteroNeighborSampler
    from .sampling.links import LinkLoader, LinkSampler, NegativeSampling
    from .sampling.loader import Loader
    from .sampling.sample import HeteroSample
    from .sampling.sampler import NeighborSampler, SampledSubgraph
    from .serving.client import Client
    from .training.loop import train

#: Where each public name lives.
_EXPORTS = {
    **dict.fromkeys(("BusyError", "CancelledError", "CorruptDatasetError", "DeadlineExceededError",
                     "DatasetExistsError", "InputError", "RingGnnError", "ShuttingDownError", "__version__"),
                    "._core"),
    "Client": ".serving.client",
    **dict.fromkeys(("NodeType", "Relation", "build_hetero", "convert", "generate_rmat", "generate_sbm",
                     "read_manifest", "verify"), ".data.build"),
    **dict.fromkeys(("Dataset", "HeteroDataset"), ".data.dataset"),
    **dict.fromkeys(("HeteroLoader", "HeteroNeighborSampler"), ".sampling.hetero"),
    "HeteroSample": ".sampling.sample",
    "from_pyg": ".importers.pyg_io",
    "infer": ".inference.run",
    **dict.fromkeys(("LinkLoader", "LinkSampler", "NegativeSampling"), ".sampling.links"),
    "Loader": ".sampling.loader",
    **dict.fromkeys(("NeighborSampler", "SampledSubgraph"), ".sampling.sampler"),
    "train": ".training.loop",
}

__all__ = sorted(n for n in _EXPORTS if n != "__version__") + ["__version__"]


def __getattr__(name: str) -> Any:
    """A public name (imported from its module the first time), or a module of the package."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
