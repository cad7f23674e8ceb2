"""How the dense library's worker threads wait between parallel regions (issue 24).

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
run before that, so the inference commands call it first. A policy the user set is kept."""

from __future__ import annotations

import os
import sys

#: The environment variable of libgomp's (and Intel OpenMP's) wait policy.
WAIT_POLICY = "OMP_WAIT_POLICY"


def passive_waits() -> bool:
    """Ask for sleeping (not spinning) OpenMP threads in this process, unless the user chose a
    policy; True when it takes effect (PyTorch not imported yet)."""
    if "torch" in sys.modules:
        return False
    os.environ.setdefault(WAIT_POLICY, "PASSIVE")
    return True
