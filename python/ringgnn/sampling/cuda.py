"""The CUDA data path: pinned batch buffers, host-to-device copies on a side stream, and a GPU
tier of the hot-row cache (docs/DISTRIBUTED.md, "The CUDA data path")."""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np

from .. import _core
from .._core import InputError
from .loader import Loader
from .sampler import NeighborSampler

logger = logging.getLogger("ringgnn")

#: Rows read and uploaded at a time when the GPU tier is filled (bounds the host memory used).
FILL_CHUNK_BYTES = 16 << 20


def cuda_pinner() -> Tuple[Callable[[int, int], None], Callable[[int], None]]:
    """``(pin, unpin)`` calling ``cudaHostRegister``/``cudaHostUnregister``; a failure is logged
    once and leaves that buffer pageable."""
    import torch

    cudart = torch.cuda.cudart()
    warned: List[bool] = [False]

    def check(what: str, res: Any) -> None:
        code = int(getattr(res, "value", res))
        if code != 0 and not warned[0]:
            warned[0] = True
            logger.warning("ringgnn: %s failed (CUDA error %d): batch buffers stay pageable", what, code)

    def pin(addr: int, nbytes: int) -> None:
        check("cudaHostRegister", cudart.cudaHostRegister(addr, nbytes, 0))

    def unpin(addr: int) -> None:
        check("cudaHostUnregister", cudart.cudaHostUnregister(addr))

    return pin, unpin


def pin(loader: Loader, pinner: Optional[Tuple[Callable[[int, int], None], Callable[[int], None]]] = None) -> bool:
    """Pin ``loader``'s batch buffers (and those of the loaders sharing its engine) with
    ``pinner`` (default: CUDA's). False when they already are."""
    p, u = pinner if pinner is not None else cuda_pinner()
    return bool(loader._core.pin_buffers(p, u))


def count_accesses(loader: Loader, batches: int = 64, seed: int = 0) -> np.ndarray:
    """How often each node appears in the first ``batches`` batches of ``loader``'s seeds,
    sampled with its fanouts and ``seed`` (int32, one count per node)."""
    ds = loader.dataset
    counts = np.zeros(ds.num_nodes, dtype=np.int32)
    sampler = NeighborSampler(ds, loader.fanouts, seed=seed, threads=1)
    # (A link loader's seeds are its first batches' endpoints: as many batches as they make.)
    n = min(batches, len(loader), -(-len(loader.seeds) // loader.batch_size))
    for sub in sampler.epoch(loader.seeds, loader.batch_size, shuffle=loader.shuffle, epoch=0,
                             batches=list(range(n))):
        np.add.at(counts, sub.node, 1)
    return counts


def rows_that_fit(nbytes: int, dim: int, num_nodes: int) -> int:
    """Rows of ``dim`` float32 in a GPU tier of ``nbytes``."""
    return max(0, min(num_nodes, nbytes // (4 * dim))) if dim else 0


class DeviceRowCache:
    """Feature rows of the nodes ``ids`` held on ``device``, in the order of the sorted ids; a
    batch's slots are found on the host, so putting it together never waits for the device."""

    def __init__(self, dataset: Any, ids: np.ndarray, device: Any):
        import torch

        self.device = torch.device(device)
        self.ids = np.unique(np.asarray(ids, dtype=np.int64))
        dim = dataset.feature_dim
        self.rows = torch.empty((len(self.ids), dim), dtype=torch.float32, device=self.device)
        reader = _core.FeatureReader(dataset.path)
        step = max(1, FILL_CHUNK_BYTES // (4 * dim))
        for start in range(0, len(self.ids), step):
            part = reader.gather(self.ids[start:start + step])
            self.rows[start:start + len(part)] = torch.from_numpy(part).to(self.device)

    @classmethod
    def for_loader(cls, loader: Loader, nbytes: int, device: Any, seed: int = 0,
                   presample_batches: int = 64) -> "DeviceRowCache":
        """The rows ``loader``'s batches touch most, as many as ``nbytes`` holds; ``loader`` (and
        the loaders sharing its engine) then leaves them out of ``x``."""
        ds = loader.dataset
        k = rows_that_fit(nbytes, ds.feature_dim, ds.num_nodes)
        counts = count_accesses(loader, presample_batches, seed)
        k = min(k, int(np.count_nonzero(counts)))
        # Highest counts first, ties to the smaller id.
        order = np.lexsort((np.arange(len(counts)), -counts.astype(np.int64)))
        ids = np.sort(order[:k])
        del counts, order
        cache = cls(ds, ids, device)
        loader._core.set_device_rows(ids)
        return cache

    @property
    def nbytes(self) -> int:
        return int(self.rows.numel() * 4)

    def __len__(self) -> int:
        return len(self.ids)

    def split(self, n_id: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a batch's nodes: (positions held here, their slots, positions the loader sent)."""
        if len(self.ids) == 0:
            return (np.empty(0, np.int64), np.empty(0, np.int64), np.arange(len(n_id), dtype=np.int64))
        pos = np.searchsorted(self.ids, n_id)
        held = self.ids[np.minimum(pos, len(self.ids) - 1)] == n_id
        return np.flatnonzero(held), pos[held].astype(np.int64), np.flatnonzero(~held)

    def assemble(self, parts: Tuple[np.ndarray, np.ndarray, np.ndarray], x_rest: Any) -> Any:
        """The batch's feature matrix on the device, from :meth:`split`'s parts and the rows
        the loader sent (``x_rest``, on the device)."""
        import torch

        held, slots, rest = parts
        if len(rest) != x_rest.shape[0]:
            raise RuntimeError(f"the loader sent {x_rest.shape[0]} rows for {len(rest)} nodes the device lacks: "
                               "were its device rows set for another cache?")
        dev = self.device
        x = torch.empty((len(held) + len(rest), self.rows.shape[1]), dtype=torch.float32, device=dev)
        x.index_copy_(0, torch.from_numpy(rest).to(dev, non_blocking=True), x_rest)
        held_t = torch.from_numpy(held).to(dev, non_blocking=True)
        x.index_copy_(0, held_t, self.rows.index_select(0, torch.from_numpy(slots).to(dev, non_blocking=True)))
        return x


class DeviceLoader:
    """Batches of ``loader`` on ``device``, copied ahead on a side stream (CUDA), with the
    feature rows ``cache`` holds taken from the device. Iterate it like the loader."""

    def __init__(self, loader: Loader, device: Any, cache: Optional[DeviceRowCache] = None):
        import torch

        self.loader = loader
        self.device = torch.device(device)
        self.cache = cache
        if cache is not None and loader._core.device_rows != len(cache):
            raise InputError("DeviceLoader: the loader's device rows are not this cache's; make the cache with "
                             "DeviceRowCache.for_loader(loader, ...)")

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        """The loader's own (``set_epoch``, ``last_epoch``, ``stats``, ``plan``, ...)."""
        if name == "loader":  # not set yet (unpickling): no loader to ask
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        import torch

        cuda = self.device.type == "cuda"
        stream = torch.cuda.Stream(self.device) if cuda else None
        held: List[Tuple[Any, Any]] = []  # (event, host x) whose copies may still run
        ready: Optional[Tuple[Any, Any]] = None
        for host in self.loader:
            x_host = host.x
            if cuda:
                with torch.cuda.stream(stream):
                    moved = self._move(host)
                    event = stream.record_event()
            else:
                moved, event = self._move(host), None
            del host
            held.append((event, x_host))
            del x_host
            if ready is not None:
                yield self._hand_over(ready)
                ready = None
            ready = (moved, event)
            self._release(held, keep=1)
        if ready is not None:
            yield self._hand_over(ready)
        self._release(held, keep=0)

    def _move(self, host: Any) -> Any:
        parts = None if self.cache is None else self.cache.split(host.n_id.numpy())
        if parts is None and host.x.shape[0] != host.n_id.shape[0]:
            raise InputError("the loader leaves device rows out of x: iterate it with their DeviceLoader")
        moved = host.to(self.device, non_blocking=True)  # Data.to replaces the tensors in place
        if parts is not None:
            moved.x = self.cache.assemble(parts, moved.x)
        return moved

    @staticmethod
    def _hand_over(ready: Tuple[Any, Any]) -> Any:
        import torch

        batch, event = ready
        if event is not None:
            current = torch.cuda.current_stream()
            current.wait_event(event)
            for _, value in batch:
                if isinstance(value, torch.Tensor) and value.is_cuda:
                    value.record_stream(current)
        return batch

    @staticmethod
    def _release(held: List[Tuple[Any, Any]], keep: int) -> None:
        """Give back host buffers whose copies are done; wait for the oldest beyond ``keep``."""
        while held and (held[0][0] is None or held[0][0].query()):
            held.pop(0)
        while len(held) > keep:
            held.pop(0)[0].synchronize()
