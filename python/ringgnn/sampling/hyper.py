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
whatever H (the rows of the ``prefetch`` batches ahead and of the consumer's, each worker's read
buffers, the labels), all within the batches' part of the memory plan and the room its files and
cache leave unused (``HeteroPlan.batch_memory``, ``ringgnn.sampling.plan``). Where not even one
batch at a time fits, it takes one batch ahead instead of two, then one worker, as the
homogeneous plan does, and warns where even that does not fit (:func:`choose`). When every
neighbor file is held in memory there is nothing to share: H is 1.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from .._format import human_bytes


logger = logging.getLogger("ringgnn")

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
    workspaces, ``batch``: its sample; staging's part: :func:`measured_staging`): the largest
    ``state + batch`` times :data:`MEASURED_MARGIN`; 0 without probes."""
    most = max((p["state"] + p["batch"] for p in probes), default=0)
    return int(MEASURED_MARGIN * most)


def jobs_in_flight(h: int, threads: int, prefetch: int) -> int:
    """Jobs (of ``h`` batches) submitted ahead of the one the consumer is taking: one per thread,
    and at least the ``prefetch + threads - 1`` batches a per-batch loader keeps ahead."""
    return max(threads, -(-(prefetch + threads - 1) // h))


#: Batches whose rows are gathered ahead of the consumer's when ``prefetch`` is not given.
DEFAULT_PREFETCH = 2


@dataclass(frozen=True)
class Sizes:
    """What an epoch of a typed loader runs with: ``hyperbatch`` (H), ``prefetch`` (batches
    whose rows are gathered ahead of the consumer's), ``workers`` (threads), why, in words, and
    ``staging``: whether its hyperbatches' rows may be staged."""

    hyperbatch: int
    prefetch: int
    workers: int
    why: str
    staging: bool = True


def measured_staging(probes: Sequence[Dict[str, int]]) -> int:
    """What staging one batch's rows holds at most while its hyperbatch waits (``staging`` of
    ``_core.TypedLoader.probe``: its cold row ids and write buffers), the largest times
    :data:`MEASURED_MARGIN`; 0 without probes or staging."""
    return int(MEASURED_MARGIN * max((p.get("staging", 0) for p in probes), default=0))


def choose(asked: Optional[int], *, in_memory: bool, share: int, per_batch: int, rows: int, buffers: int, held: int,
           threads: int, prefetch: Optional[int], batches: int, staging_per_batch: int = 0,
           staging_buffers: int = 0) -> Sizes:
    """The :class:`Sizes` of an epoch of ``batches`` batches. ``asked``: a number fixes H (at most
    ``batches``); None is ``"auto"``: 1 when the neighbor files are all in memory, else, with
    what the probes measured (``per_batch``: a sampled batch, ``rows``: a batch's gathered rows,
    ``buffers``: one worker's read buffers, ``held``: what the loader holds, its labels), the
    largest H at most ``ceil(batches / workers)`` (so every worker has a job) for which
    ``(prefetch + 1) * rows + workers * (buffers + H * per_batch) + held`` fits ``share``.
    When not even H = 1 fits, as the homogeneous plan does: one batch ahead instead of
    :data:`DEFAULT_PREFETCH` (when ``prefetch`` is not given), then one worker instead of
    ``threads``; when nothing fits, the batches run as asked, one at a time, and a warning names
    each part and what to do (the memory plan, not this choice, is where a budget too small for
    the batches is refused; for typed batches it does not count their rows ahead yet).

    Staging (``staging_buffers`` a worker and ``staging_per_batch`` a batch, where rows may be
    staged) pays only over hyperbatches: it is kept where, counted, hyperbatches of two or more
    still fit, else dropped and H chosen without it."""
    p = DEFAULT_PREFETCH if prefetch is None else prefetch
    if asked is not None:
        h = max(1, min(asked, batches))
        return Sizes(h, p, threads, f"{h} (as given)")
    if in_memory:
        return Sizes(1, p, threads, "1 (auto: every neighbor file is in memory, nothing to share)")
    if staging_buffers:
        staged = _fit(share, per_batch + staging_per_batch, rows, buffers + staging_buffers, held, threads, prefetch,
                      batches, warn=False)
        if staged is not None and staged.hyperbatch > 1:
            return Sizes(staged.hyperbatch, staged.prefetch, staged.workers,
                         staged.why + "; rows staged where a pass over a feature file pays (its buffers and row ids "
                         "counted)", True)
    plain = _fit(share, per_batch, rows, buffers, held, threads, prefetch, batches, warn=True)
    assert plain is not None
    if not staging_buffers:
        return plain
    return Sizes(plain.hyperbatch, plain.prefetch, plain.workers,
                 plain.why + "; rows not staged: with staging's buffers only one batch at a time would fit", False)


def _fit(share: int, per_batch: int, rows: int, buffers: int, held: int, threads: int, prefetch: Optional[int],
         batches: int, *, warn: bool) -> Optional[Sizes]:
    """:func:`choose`'s "auto" for these bytes; where nothing fits, None, or with ``warn`` the
    batches as asked and the warning."""
    p = DEFAULT_PREFETCH if prefetch is None else prefetch

    def whatever_h(p: int, w: int) -> int:
        return (p + 1) * rows + w * buffers + held

    def total(h: int, p: int, w: int) -> int:
        return whatever_h(p, w) + w * h * per_batch

    tries = [(p, threads)]
    if prefetch is None and p > 1:
        tries.append((1, threads))
    if threads > 1:
        tries.append((tries[-1][0], 1))
    fitting = [(p, w) for p, w in tries if total(1, p, w) <= share]
    if not fitting:
        if not warn:
            return None
        p, w = tries[-1]
        logger.warning(
            "the memory budget is too small for these batches: the plan leaves the batches %s, and even one batch "
            "at a time, with %d ahead and %d worker%s, needs %s: %d batches' rows (%s each, measured on %d probe "
            "batches), a sampled batch (%s), read buffers (%s) and labels (%s); they run as asked, one batch at a "
            "time, beyond the budget: give a larger memory budget (--memory), a smaller batch size or smaller "
            "fanouts", human_bytes(share), p, w, "s" * (w > 1), human_bytes(total(1, p, w)), p + 1,
            human_bytes(rows), PROBE_BATCHES, human_bytes(per_batch), human_bytes(w * buffers), human_bytes(held))
        fitting = tries[:1]
    p, w = fitting[0]
    h = max(1, -(-batches // w))
    while h > 1 and total(h, p, w) > share:
        h -= 1
    fits = "fit in" if total(h, p, w) <= share else "exceed, even one batch at a time,"
    why = (f"{h} (auto: {w} threads, {human_bytes(per_batch)} per sampled batch (measured on {PROBE_BATCHES} probe "
           f"batches, x{MEASURED_MARGIN}) and {human_bytes(whatever_h(p, w))} whatever H (rows gathered for the next "
           f"{p} and the consumer's, read buffers, labels); {human_bytes(total(h, p, w))} held {fits} the batches' "
           f"{human_bytes(share)})")
    if (p, w) != tries[0]:
        less = [f"{p} batch ahead instead of {tries[0][0]}"] if p != tries[0][0] else []
        less += [f"{w} worker instead of {threads}"] if w != threads else []
        why += f"; {' and '.join(less)}: with them even one batch at a time would exceed the batches' memory"
    return Sizes(h, p, w, why)
