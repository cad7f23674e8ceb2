"""What every sampler and loader shares: :class:`ProcessLocal` (pickling of an object whose core
objects belong to one process) and :class:`Epochs` (every loader's cut of an epoch into batches)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .. import _options
from ..data.dataset import Dataset, HeteroDataset


class ProcessLocal:
    """Pickles an object that holds core objects of this process (rings, threads, file handles):
    the attributes :meth:`_fresh` gives are made anew in the receiving process, and a whole
    ``dataset`` travels as its path."""

    def _fresh(self) -> Dict[str, Any]:
        """The per-process attributes as a new object has them (before any core object)."""
        return {}

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__, **dict.fromkeys(self._fresh()))
        ds = state.get("dataset")
        if isinstance(ds, (Dataset, HeteroDataset)) and getattr(ds, "part", None) is None:
            state["dataset"] = ds.path
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if isinstance(state.get("dataset"), str):
            state["dataset"] = Dataset.open(state["dataset"])
        self.__dict__.update(state, **self._fresh())


class Epochs:
    """An epoch cut into batches of ``batch_size`` (the last one short unless ``drop_last``), of
    which ``batches`` (global indices, e.g. one rank's share; None: all, in order) are yielded.
    It cuts :meth:`_items` (its seeds, or its pairs)."""

    batch_size: int
    drop_last: bool
    batches: Optional[List[int]]
    seeds: Any
    epoch: int  # the epoch of the next iter()

    def _cut_options(self, batch_size: Any, shuffle: Any, drop_last: Any, batches: Optional[Sequence[int]]) -> None:
        """Check and set how epochs are cut (every loader's arguments of that name)."""
        self.batch_size = _options.count(batch_size, "batch_size", 1)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.batches = None if batches is None else [_options.count(b, "batch") for b in batches]

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next ``iter()``."""
        self.epoch = _options.count(epoch, "epoch")

    def _items(self) -> int:
        return len(self.seeds)

    def epoch_batches(self) -> int:
        """The number of batches of a whole epoch."""
        n = self._items()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __len__(self) -> int:
        return self.epoch_batches() if self.batches is None else len(self.batches)

    def epoch_order(self) -> List[int]:
        """The global indices of the batches an epoch yields."""
        return list(range(self.epoch_batches())) if self.batches is None else list(self.batches)
