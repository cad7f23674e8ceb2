"""Data parallelism on ``torch.distributed``: this process's ranks (:func:`join`), its share of
each epoch (:func:`shard`) and the collectives ``ringgnn train`` needs, a failed peer raised as
:class:`PeerFailedError` (docs/DISTRIBUTED.md)."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, TypeVar

from .. import _options
from .._core import InputError, RingGnnError

T = TypeVar("T")

#: Seconds a rank waits at a collective (and at start-up) for a hung or vanished peer.
DEFAULT_TIMEOUT = 600.0


class PeerFailedError(RingGnnError):
    """Another rank failed or the connection to it was lost; this rank stops too."""


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel job (``world_size`` 1: a lone process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    owned: bool = False

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def tag(self) -> str:
        """``"[rank 1/2] "`` for log lines, empty for a lone process."""
        return f"[rank {self.rank}/{self.world_size}] " if self.active else ""


def shard(num_batches: int, rank: int, world_size: int, pad: bool = True) -> List[int]:
    """Rank ``rank``'s batches ``rank, rank + world_size, ...``; with ``pad`` as many on every
    rank, the short ones wrapping round to the first batches."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise InputError(f"rank {rank} is not a rank of a world of {world_size}")
    if num_batches <= 0:
        return []
    if not pad:
        return list(range(rank, num_batches, world_size))
    per_rank = -(-num_batches // world_size)
    return [(rank + i * world_size) % num_batches for i in range(per_rank)]


def _env_int(name: str, default: Optional[int]) -> Optional[int]:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise InputError(f"environment variable {name}={text!r} is not an integer (torchrun sets it)") from None


def join(device: str, timeout: float = DEFAULT_TIMEOUT) -> Ranks:
    """This process's ranks: of a process group already started, else of ``torchrun``'s
    environment (the group started here: gloo on CPU, NCCL on CUDA), else a lone process."""
    world = _env_int("WORLD_SIZE", None)
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        dist = torch.distributed
        return Ranks(dist.get_rank(), dist.get_world_size(), _env_int("LOCAL_RANK", 0) or 0,
                     _env_int("LOCAL_WORLD_SIZE", 1) or 1, owned=False)
    if world is None or world <= 1:
        return Ranks()
    if not torch.distributed.is_available():
        raise InputError("WORLD_SIZE > 1 but this PyTorch has no torch.distributed; install a build with it")
    rank, local_rank = _env_int("RANK", None), _env_int("LOCAL_RANK", 0) or 0
    local_world = _env_int("LOCAL_WORLD_SIZE", 1) or 1
    if rank is None or not 0 <= rank < world:
        raise InputError(f"WORLD_SIZE={world} but RANK is {os.environ.get('RANK')!r}: launch the ranks with torchrun")
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:
        raise InputError(f"WORLD_SIZE={world} but {' and '.join(missing)} not set: launch the ranks with torchrun "
                         "(or set them to the address and port of rank 0)")
    backend = "gloo"
    if device == "cuda":
        _options.require_cuda()
        if local_rank >= torch.cuda.device_count():
            raise InputError(f"local rank {local_rank} has no GPU: this machine has {torch.cuda.device_count()}; "
                             "start at most that many processes per node")
        torch.cuda.set_device(local_rank)
        backend = "nccl"
    try:
        torch.distributed.init_process_group(backend, rank=rank, world_size=world,
                                             timeout=datetime.timedelta(seconds=timeout))
    except Exception as e:  # a rendezvous that times out or finds no peer
        raise PeerFailedError(f"rank {rank}: could not join the {world} ranks at "
                              f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}: {e}") from e
    return Ranks(rank, world, local_rank, local_world, owned=True)


def leader_by_env() -> bool:
    """Whether this process is rank 0 (or alone) by ``torchrun``'s environment."""
    return _env_int("RANK", 0) == 0


def leave(ranks: Ranks) -> None:
    """End the process group if :func:`join` started it."""
    if ranks.owned:
        import torch

        torch.distributed.destroy_process_group()


def device_of(ranks: Ranks, device: str) -> str:
    """The torch device of this rank: ``cuda`` is the local rank's GPU."""
    return f"cuda:{ranks.local_rank}" if device == "cuda" and ranks.active else device


def _peer_failed(ranks: Ranks, what: str, e: BaseException) -> PeerFailedError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return PeerFailedError(f"rank {ranks.rank}: {what} failed: another rank failed or the connection to it was "
                           f"lost ({first})")


#: Words of the errors gloo, NCCL and the c10d store raise when a peer is gone or too slow.
_COMMUNICATION = ("gloo", "nccl", "connection reset", "connection closed", "broken pipe", "timed out", "timeout",
                  "socket", "store")


def guarded(ranks: Ranks, what: str, op: Callable[[], T], collective: bool = False) -> T:
    """Run ``op`` (a training epoch), a communication failure (any failure of a ``collective``)
    raised as :class:`PeerFailedError`."""
    if not ranks.active:
        return op()
    import torch

    try:
        return op()
    except RingGnnError:
        raise
    except Exception as e:  # gloo/NCCL: a peer that exited, a timeout
        dist_error = getattr(torch.distributed, "DistError", ())
        if collective or isinstance(e, dist_error) or any(w in str(e).lower() for w in _COMMUNICATION):
            raise _peer_failed(ranks, what, e) from e
        raise


def sums(ranks: Ranks, values: Sequence[float], device: str = "cpu") -> List[float]:
    """Element-wise sums of ``values`` over the ranks (float64; exact for counts below 2**53)."""
    if not ranks.active:
        return [float(v) for v in values]
    import torch

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    guarded(ranks, "all_reduce", lambda: torch.distributed.all_reduce(t), collective=True)
    return t.cpu().tolist()


def gather(ranks: Ranks, obj: T) -> List[T]:
    """``obj`` of every rank, in rank order, on every rank (small objects: they are pickled)."""
    if not ranks.active:
        return [obj]
    import torch

    out: List[Any] = [None] * ranks.world_size
    guarded(ranks, "all_gather", lambda: torch.distributed.all_gather_object(out, obj), collective=True)
    return out


def from_leader(ranks: Ranks, fn: Callable[[], T]) -> T:
    """``fn()`` run on rank 0, its result (or ``InputError``) sent to every rank."""
    if not ranks.active:
        return fn()
    import torch

    box: List[Any] = [None]
    if ranks.leader:
        try:
            box[0] = ("ok", fn())
        except InputError as e:
            box[0] = ("error", str(e))
    guarded(ranks, "broadcast", lambda: torch.distributed.broadcast_object_list(box, src=0), collective=True)
    kind, value = box[0]
    if kind == "error":
        raise InputError(value)
    return value


def data_parallel(net: Any, ranks: Ranks, device: str) -> Any:
    """``net``, wrapped in DDP under ``torchrun``."""
    if not ranks.active:
        return net
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(net, device_ids=[ranks.local_rank] if device == "cuda" else None)


def barrier(ranks: Ranks) -> None:
    if ranks.active:
        import torch

        guarded(ranks, "barrier", lambda: torch.distributed.barrier(), collective=True)
