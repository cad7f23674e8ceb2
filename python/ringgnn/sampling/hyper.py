"""Hyperbatches of the typed loaders: how many batches a worker samples together
(``hyperbatch=H | "auto"``), decided here and nowhere else, and how many batches are in flight.

A hyperbatch of H batches is sampled hop by hop with each relation's file read once per hop for
all of them (``HeteroNeighborSampler.sample_many``), so a page several batches need is read once.
The typed node loader (:class:`ringgnn.HeteroLoader`) and link batcher
(:class:`ringgnn.sampling.links.HeteroLinkBatches`) run on the Rust typed loader
(:class:`ringgnn.sampling.typed.TypedEpochs`), which gathers a batch's feature rows only when it
is among the next ``prefetch`` the consumer takes, so a hyperbatch costs ``H`` *samples* per
worker, not ``H`` batches of rows. ``"auto"`` counts everything an epoch holds, as measured
(:func:`measured_bytes`, :func:`measured_rows`: :data:`PROBE_BATCHES` batches sampled from disk
as one probe hyperbatch): ``threads * H`` sampled batches (each its share of the sampler's
workspaces and its sample, the largest times :data:`MEASURED_MARGIN`), plus what it holds
whatever H (``fixed``: the rows of the ``prefetch`` batches ahead and of the consumer's, each
worker's read buffers, the labels), all within the batches' part of the memory plan
(``HeteroPlan.batch_memory``, ``ringgnn.sampling.plan``). When every neighbor file is held in
memory there is nothing to share: H is 1.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from .._format import human_bytes


#: Batches sampled as probes to measure what a batch holds.
PROBE_BATCHES = 3
#: The margin on the largest probe batch: batches differ (a seed set that reaches hubs draws
#: more), and the allocator rounds and fragments.
MEASURED_MARGIN = 1.5


#: The margin on the largest probe batch's rows: their counts vary little from batch to batch
#: (the seeds' neighborhoods are of one size), far less than the sampler's workspaces.
ROWS_MARGIN = 1.1


def measured_rows(probes: Sequence[Dict[str, int]]) -> int:
    """What gathering one batch holds at most (``rows`` of ``_core.TypedLoader.probe``: its
    feature rows, the gather's scratch and its labels), the largest times :data:`ROWS_MARGIN`;
    0 without probes."""
    return int(ROWS_MARGIN * max((p["rows"] for p in probes), default=0))


def measured_bytes(probes: Sequence[Dict[str, int]]) -> int:
    """What one batch holds at most while its hyperbatch is sampled, from probe batches
    measured by ``_core.TypedLoader.probe`` (each ``state``: its share of the sampler's
    workspaces, ``batch``: its sample): the largest ``state + batch`` times
    :data:`MEASURED_MARGIN`; 0 without probes."""
    most = max((p["state"] + p["batch"] for p in probes), default=0)
    return int(MEASURED_MARGIN * most)


def jobs_in_flight(h: int, threads: int, prefetch: int) -> int:
    """Jobs (of ``h`` batches) submitted ahead of the one the consumer is taking: one per thread,
    and at least the ``prefetch + threads - 1`` batches a per-batch loader keeps ahead."""
    return max(threads, -(-(prefetch + threads - 1) // h))


def choose(asked: Optional[int], *, in_memory: bool, share: int, per_batch: int, threads: int, prefetch: int,
           batches: int, fixed: int) -> Tuple[int, str]:
    """(H, why in words). ``asked``: a number fixes H (at most the epoch's ``batches``); None is
    ``"auto"``: 1 when the neighbor files are all in memory, else the largest H at most
    ``ceil(batches / threads)`` (so every thread has a job) for which ``fixed + threads * H *
    per_batch`` (see the module docs; ``per_batch``: a sampled batch as measured) fits
    ``share``; at least 1."""
    if asked is not None:
        h = max(1, min(asked, batches))
        return h, f"{h} (as given)"
    if in_memory:
        return 1, "1 (auto: every neighbor file is in memory, nothing to share)"

    def held(h: int) -> int:
        return fixed + threads * h * per_batch

    h = max(1, -(-batches // threads))
    while h > 1 and held(h) > share:
        h -= 1
    fits = "fit in" if held(h) <= share else "exceed, even one batch at a time,"
    return h, (f"{h} (auto: {threads} threads, {human_bytes(per_batch)} per sampled batch (measured on "
               f"{PROBE_BATCHES} probe batches, x{MEASURED_MARGIN}) and {human_bytes(fixed)} whatever H (rows "
               f"gathered for the next {prefetch} and the consumer's, read buffers, labels); "
               f"{human_bytes(held(h))} held {fits} the batches' {human_bytes(share)})")
