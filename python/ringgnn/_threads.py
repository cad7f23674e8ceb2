"""How the dense libraries' worker threads wait between parallel regions, and how many numpy's
BLAS uses (issue 24).

PyTorch's CPU kernels (elementwise ops, MKL's products) run on an OpenMP team (GNU libgomp).
By default a team's threads *spin* after each parallel region before they sleep, ready for the
next one. On a machine whose cores are shared with other work (a CI runner, a workstation, the
2 shared cores these benchmarks ran on) the spinning threads take CPU from the thread doing the
work, and a region cannot end before a descheduled team member runs again: measured on the
1M-node planted graph at ``--memory 768M`` (load average 12-14 on 2 cores), one layer of
layer-wise inference took 36-41 s and 11.6-12.4 CPU seconds with the default policy and
14.8 s and 4.9 CPU seconds with ``OMP_WAIT_POLICY=PASSIVE`` (the same as one thread):
finishing the blocks (small products and elementwise ops) went from 17-20 s to 2.2 s
(``docs/benchmarks.md``). Layer-wise inference calls the library on large slices, so sleeping
between them costs nothing measurable on an idle machine.

The policy is read once, when libgomp is loaded (PyTorch's import): :func:`passive_waits` must
run before that, so the inference commands call it first. A policy the user set is kept.

numpy's BLAS (OpenBLAS, which runs the dense parts of layer-wise inference on the CPU without
PyTorch) keeps a pool of its own threads: :func:`one_blas_thread` runs a block with one."""

from __future__ import annotations

import ctypes
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Tuple

#: The environment variable of libgomp's (and Intel OpenMP's) wait policy.
WAIT_POLICY = "OMP_WAIT_POLICY"


def passive_waits() -> bool:
    """Ask for sleeping (not spinning) OpenMP threads in this process, unless the user chose a
    policy; True when it takes effect (PyTorch not imported yet)."""
    if "torch" in sys.modules:
        return False
    os.environ.setdefault(WAIT_POLICY, "PASSIVE")
    return True


# --- numpy's BLAS ------------------------------------------------------------------------------------

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
    """numpy's BLAS on one thread within the block (layer-wise inference's dense parts on the
    CPU), the counts restored after. Its products are called once per piece and per finishing
    slice, each a few milliseconds of work; with a thread per core, each call waits for the pool
    to be scheduled, and on cores shared with other work that wait is the call's cost: on the
    1M-node graph at ``--memory 400M`` (2 cores, load average 13) a layer took 20.5 s and 6.4 CPU
    seconds with 2 threads, 13.7 s and 3.9 with one; at 173M (pieces of 1,060 rows), 141 s and 57
    CPU seconds, against 20 s and 10 (``docs/benchmarks.md``). The folds, the work that scales
    with the edges, run on every core in the Rust core."""
    libs = _openblas()
    before = [int(get()) for _, get in libs]
    for set_threads, _ in libs:
        set_threads(1)
    try:
        yield
    finally:
        for (set_threads, _), n in zip(libs, before):
            set_threads(n)
