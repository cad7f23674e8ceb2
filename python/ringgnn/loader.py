"""``ringgnn.Loader``: mini-batches as PyG ``Data``, with node features read from disk.

First version (issue 4 is not finished): neighbor sampling runs ahead in the Rust sampler's
threads (bounded prefetch, GIL released), and each batch's feature rows are gathered by the
Rust feature reader (page-coalesced reads, optional hot-row cache) when the batch is taken.
Gathering is therefore not yet overlapped with training; the pipelined loader that samples and
gathers in the same worker threads replaces this body without changing the interface.

Each yielded ``Data`` has what PyG's ``NeighborLoader`` gives: ``x`` (float32), ``y`` (int64,
-1 = unlabeled), ``edge_index`` (local, row = message source), ``n_id`` (global ids, seeds
first), ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id`` (the
seeds' positions in the split).
"""

from __future__ import annotations

import operator
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from ._core import InputError
from .dataset import Dataset, PathLike
from .sampler import NeighborSampler


class Loader:
    """Iterate over mini-batches of ``split`` (or an array of seed ids), one epoch per ``iter()``.

    Args:
        dataset: a :class:`Dataset` or its path; it must have features and labels.
        fanouts: neighbors per hop (``-1``: all).
        batch_size: seeds per batch.
        split: a split name, an array of node ids, or None for all nodes.
        shuffle, drop_last: as in PyTorch's ``DataLoader``.
        cache: bytes of hot feature rows (highest in-degree) kept in memory; 0 for none.
        memory: the sampler's byte budget (see :class:`NeighborSampler`).
        backend, direct, threads, seed: as for :class:`NeighborSampler`; ``backend`` also
            chooses how feature rows are read ("memory" loads the feature file).
        sampler, features: an existing :class:`NeighborSampler` and ``RingFeatureStore`` to
            share (e.g. between the train, val and test loaders, so the neighbor file, the
            hot-row cache and the budget are held once); they override the options above.

    Epochs count up from 0 with each ``iter()``; :meth:`set_epoch` sets the next one. A batch
    depends only on (seed, epoch, batch index).
    """

    def __init__(
        self,
        dataset: Union[Dataset, PathLike],
        fanouts: Sequence[int],
        batch_size: int,
        *,
        split: Union[None, str, Any] = "train",
        shuffle: bool = True,
        drop_last: bool = False,
        cache: int = 0,
        memory: Union[None, int, str] = None,
        backend: str = "auto",
        direct: bool = False,
        threads: Optional[int] = None,
        seed: int = 0,
        sampler: Optional[NeighborSampler] = None,
        features: Any = None,
    ):
        self.dataset = dataset if isinstance(dataset, Dataset) else Dataset.open(dataset)
        if self.dataset.feature_dim is None:
            raise InputError(f"{self.dataset.path}: the dataset has no node features; rebuild it with --features")
        if operator.index(batch_size) < 1:
            raise InputError(f"batch_size must be at least 1, not {batch_size}")
        self.sampler = sampler or NeighborSampler(
            self.dataset, fanouts, backend=backend, direct=direct, threads=threads, seed=seed, memory=memory
        )
        self.seeds = self.sampler.resolve_seeds(split)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if features is None:
            from .pyg import RingFeatureStore  # imports torch, like everything that yields tensors

            features = RingFeatureStore(self.dataset, backend=backend, direct=direct, cache=cache)
        self.features = features
        self._epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next ``iter()``."""
        self._epoch = operator.index(epoch)

    def __len__(self) -> int:
        n = len(self.seeds)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        import torch
        from torch_geometric.data import Data

        epoch, self._epoch = self._epoch, self._epoch + 1
        labels = self.dataset.labels
        # Positions of the seeds in `self.seeds`, to report `input_id` as PyG does.
        where = {int(s): i for i, s in enumerate(self.seeds.tolist())} if len(self.seeds) < 1 << 22 else None
        for sub in self.sampler.epoch(self.seeds, self.batch_size, self.shuffle, epoch, self.drop_last):
            node = sub.node
            x = self.features.reader().gather(node)
            y = labels[node] if labels is not None else np.full(len(node), -1, dtype=np.int64)
            data = Data(
                x=torch.from_numpy(x),
                y=torch.from_numpy(np.ascontiguousarray(y)),
                edge_index=torch.from_numpy(np.stack([sub.row, sub.col])),
                n_id=torch.from_numpy(node),
                batch_size=sub.batch_size,
                num_sampled_nodes=list(sub.num_sampled_nodes),
                num_sampled_edges=list(sub.num_sampled_edges),
            )
            if where is not None:
                data.input_id = torch.tensor([where[int(s)] for s in node[: sub.batch_size]], dtype=torch.int64)
            yield data

    def stats(self) -> dict:
        """Feature-read counters (rows, cache hits, pages and bytes read) of this process."""
        return dict(self.features.reader().stats())
