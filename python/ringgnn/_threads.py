"""The cores the process may run on (:func:`cores`), the OpenMP wait policy set before PyTorch
loads (:func:`passive_waits`) and numpy's BLAS threads."""

from __future__ import annotations

import ctypes
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Tuple

def cores() -> int:
    """Cores this process may run on: its CPU affinity, else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


WAIT_POLICY = "OMP_WAIT_POLICY"


def passive_waits() -> bool:
    """Ask for sleeping (not spinning) OpenMP threads in this process, unless the user chose a
    policy; True when it takes effect (PyTorch not imported yet)."""
    if "torch" in sys.modules:
        return False
    os.environ.setdefault(WAIT_POLICY, "PASSIVE")
    return True


#: The thread-count functions of the OpenBLAS builds numpy ships or links: (set, get) names.
_OPENBLAS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("openblas_set_num_threads", "openblas_get_num_threads"))


def _openblas() -> List[Tuple[Any, Any]]:
    """(set, get) of each OpenBLAS loaded in this process (``/proc/self/maps``; none elsewhere)."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _OPENBLAS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                found.append((getattr(lib, set_name), getattr(lib, get_name)))
                break
    return found


def blas_threads() -> List[int]:
    """The thread count of each OpenBLAS loaded in this process (numpy's)."""
    return [int(get()) for _, get in _openblas()]


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread within the block: its products are milliseconds each, and a
    pool per call waits to be scheduled (``docs/benchmarks.md``, "OpenMP and BLAS threads")."""
    libs = _openblas()
    before = [int(get()) for _, get in libs]
    for set_threads, _ in libs:
        set_threads(1)
    try:
        yield
    finally:
        for (set_threads, _), n in zip(libs, before):
            set_threads(n)
