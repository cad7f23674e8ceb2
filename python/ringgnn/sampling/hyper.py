"""Hyperbatches of the typed loaders: how many batches a worker samples together
(``hyperbatch=H | "auto"``), decided here and nowhere else, and how many batches are in flight.

A hyperbatch of H batches is sampled hop by hop with each relation's file read once per hop for
all of them (``HeteroNeighborSampler.sample_many``), so a page several batches need is read once.
The typed node loader (:class:`ringgnn.HeteroLoader`) and link batcher
(:class:`ringgnn.sampling.links.HeteroLinkBatches`) run on the Rust typed loader
(:class:`ringgnn.sampling.typed.TypedEpochs`), which gathers a batch's feature rows only when it
is among the next ``prefetch`` the consumer takes, so a hyperbatch costs ``H`` *samples* per
worker, not ``H`` batches of rows; read from disk, a hyperbatch of more than one batch writes each
finished sample to a spill file and reads it back when its turn comes, so it holds each batch's
sample only until its last hop is drawn and read. ``"auto"`` counts everything an epoch holds, as
measured (:func:`measured_bytes`, :func:`measured_rows`, :func:`measured_sample`:
:data:`PROBE_BATCHES` batches sampled from disk as one probe hyperbatch): ``threads * H`` sampled
batches (each its share of the sampler's workspaces and what its sample holds while sampled, the
largest times :data:`MEASURED_MARGIN`), plus what it holds whatever H (the rows and samples of
the ``prefetch`` batches ahead and of the consumer's, each worker's read and spill buffers, dedup
maps (:func:`measured_scratch`) and the finished sample it spills or gathers, the labels), all within the batches' part of the memory
plan and the room its files and
cache leave unused (``HeteroPlan.batch_memory``, ``ringgnn.sampling.plan``). Where not even one
batch at a time fits, it takes one batch ahead instead of two, then one worker, as the
homogeneous plan does, and warns where even that does not fit (:func:`choose`). When every
neighbor file is held in memory there is nothing to share: H is 1.

Where rows may be staged (one pass over a feature file for a hyperbatch's rows, then each
batch's read back), staging's buffers take room from the hyperbatches, and the pass pays more
the more batches share it: the probe also times its sampling and estimates each batch's reads
and the pass (:class:`Times`), and "auto" takes the configuration predicted fastest among those
that fit (H, batches ahead, workers, staged or not). On the 6M-paper benchmark under 500M that
is hyperbatches of 4 staged on one worker, about twice as fast as two workers reading each
batch's rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

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


def measured_sample(probes: Sequence[Dict[str, int]]) -> int:
    """What one finished sample holds at most (``sample`` of ``_core.TypedLoader.probe``: a
    worker holds one while it spills or gathers it, and each gathered batch holds its own),
    the largest times :data:`MEASURED_MARGIN`; 0 without probes."""
    return int(MEASURED_MARGIN * max((p["sample"] for p in probes), default=0))


def measured_scratch(probes: Sequence[Dict[str, int]]) -> int:
    """What one worker's sampler holds whatever H (``scratch`` of ``_core.TypedLoader.probe``: its
    dedup maps, one per node type, refilled batch by batch, and its fetch's copies of one group of
    positions), times :data:`MEASURED_MARGIN`; 0 without probes."""
    return int(MEASURED_MARGIN * max((p["scratch"] for p in probes), default=0))


def measured_bytes(probes: Sequence[Dict[str, int]]) -> int:
    """What one batch holds at most while its hyperbatch is sampled, from probe batches
    measured by ``_core.TypedLoader.probe`` (each ``state``: its share of the sampler's hop
    buffers, ``batch``: what its sample holds while sampled, before its last hop where
    hyperbatches spill; staging's part: :func:`measured_staging`): the largest
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


@dataclass(frozen=True)
class Times:
    """Seconds a batch takes, from the probe batches (``_core.TypedLoader.probe``): ``sample``
    (its sampling, measured), ``read`` (its rows read batch by batch), ``scan`` (one pass over
    the feature files for a hyperbatch's rows), ``back`` (its staged rows written to the staging
    file and read back), estimated by the device model over the types whose rows may be staged
    (the other types' reads are the same whatever is chosen)."""

    sample: float = 0.0
    read: float = 0.0
    scan: float = 0.0
    back: float = 0.0

    def per_batch(self, h: int, workers: int, staged: bool, batches: int) -> float:
        """Predicted seconds a batch over an epoch of ``batches`` batches in hyperbatches of
        ``h`` on ``workers`` threads, rows ``staged`` or not: each batch's rows take ``read``,
        or, staged, the hyperbatch's pass shared by its ``h`` batches plus ``back`` where that
        is cheaper (the loader chooses so for each hyperbatch); the reads of all workers share
        the device, their sampling does not, so a batch takes the longer of its reads and its
        worker's whole work shared among the workers. The epoch's first hyperbatch is read batch
        by batch (nothing trains before it to hide a pass)."""
        def cost(disk: float) -> float:
            return max(disk, (self.sample + disk) / workers)

        steady = cost(min(self.read, self.scan / h + self.back) if staged else self.read)
        first = min(h, batches)
        return (first * cost(self.read) + (batches - first) * steady) / batches


def measured_times(probes: Sequence[Dict[str, Any]]) -> Times:
    """The :class:`Times` of probe batches (means; one pass for the probe's hyperbatch)."""
    if not probes:
        return Times()
    n = len(probes)
    return Times(sample=sum(p.get("sample_s", 0.0) for p in probes) / n,
                 read=sum(p.get("read_s", 0.0) for p in probes) / n,
                 scan=max(p.get("pass_s", 0.0) for p in probes),
                 back=sum(p.get("back_s", 0.0) for p in probes) / n)


#: A configuration predicted faster by less than this fraction does not displace one tried
#: before it (unstaged before staged, then as many batches ahead and workers as given before
#: fewer, larger H before smaller): the prediction is a model, not a measurement.
TIME_MARGIN = 0.05


def choose(asked: Optional[int], *, in_memory: bool, share: int, per_batch: int, rows: int, buffers: int, held: int,
           threads: int, prefetch: Optional[int], batches: int, staging_per_batch: int = 0,
           staging_buffers: int = 0, times: Optional[Times] = None) -> Sizes:
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
    staged) pays only over hyperbatches, and its buffers take room from them. With the probe's
    ``times`` (:class:`Times`), every configuration that fits (batches ahead and workers as
    above, staged or not, each H) is predicted (:meth:`Times.per_batch`) and the fastest taken
    (:data:`TIME_MARGIN`): a pass over a feature file shared by H batches can beat reading each
    batch's rows even with one worker and one batch ahead. Without times, staging is kept where,
    counted, hyperbatches of two or more still fit, else dropped and H chosen without it."""
    p = DEFAULT_PREFETCH if prefetch is None else prefetch
    if asked is not None:
        h = max(1, min(asked, batches))
        return Sizes(h, p, threads, f"{h} (as given)")
    if in_memory:
        return Sizes(1, p, threads, "1 (auto: every neighbor file is in memory, nothing to share)")
    bytes_ = dict(share=share, rows=rows, held=held, threads=threads, prefetch=prefetch, batches=batches)
    if staging_buffers and times is not None and times.read > 0:
        timed = _by_time(times, per_batch=per_batch, buffers=buffers, staging_per_batch=staging_per_batch,
                         staging_buffers=staging_buffers, **bytes_)
        if timed is not None:
            return timed
    if staging_buffers:
        staged = _fit(per_batch=per_batch + staging_per_batch, buffers=buffers + staging_buffers, warn=False, **bytes_)
        if staged is not None and staged.hyperbatch > 1:
            return Sizes(staged.hyperbatch, staged.prefetch, staged.workers,
                         staged.why + "; rows staged where a pass over a feature file pays (its buffers and row ids "
                         "counted)", True)
    plain = _fit(per_batch=per_batch, buffers=buffers, warn=True, **bytes_)
    assert plain is not None
    if not staging_buffers:
        return plain
    return Sizes(plain.hyperbatch, plain.prefetch, plain.workers,
                 plain.why + "; rows not staged: with staging's buffers only one batch at a time would fit", False)


def _tries(threads: int, prefetch: Optional[int]) -> List[Tuple[int, int]]:
    """(batches ahead, workers) in the order they are tried: as given, then one batch ahead
    (when ``prefetch`` is not given), then one worker."""
    p = DEFAULT_PREFETCH if prefetch is None else prefetch
    tries = [(p, threads)]
    if prefetch is None and p > 1:
        tries.append((1, threads))
    if threads > 1:
        tries.append((tries[-1][0], 1))
    return tries


class _Bytes:
    """What an epoch holds for (H, batches ahead, workers), and its words."""

    def __init__(self, share: int, per_batch: int, rows: int, buffers: int, held: int) -> None:
        self.share, self.per_batch, self.rows, self.buffers, self.held = share, per_batch, rows, buffers, held

    def whatever_h(self, p: int, w: int) -> int:
        return (p + 1) * self.rows + w * self.buffers + self.held

    def total(self, h: int, p: int, w: int) -> int:
        return self.whatever_h(p, w) + w * h * self.per_batch

    def largest(self, p: int, w: int, batches: int) -> int:
        """The largest H at most ``ceil(batches / w)`` that fits, 0 where H = 1 does not."""
        h = max(1, -(-batches // w))
        while h > 0 and self.total(h, p, w) > self.share:
            h -= 1
        return h

    def why(self, h: int, p: int, w: int) -> str:
        fits = "fit in" if self.total(h, p, w) <= self.share else "exceed, even one batch at a time,"
        return (f"{h} (auto: {w} threads, {human_bytes(self.per_batch)} per sampled batch (measured on "
                f"{PROBE_BATCHES} probe batches, x{MEASURED_MARGIN}) and {human_bytes(self.whatever_h(p, w))} "
                f"whatever H (rows gathered for the next {p} and the consumer's, read buffers, labels); "
                f"{human_bytes(self.total(h, p, w))} held {fits} the batches' {human_bytes(self.share)})")


def _by_time(times: Times, *, share: int, per_batch: int, rows: int, buffers: int, held: int, threads: int,
             prefetch: Optional[int], batches: int, staging_per_batch: int, staging_buffers: int) -> Optional[Sizes]:
    """:func:`choose`'s "auto" by predicted time; None where nothing fits."""
    best: Optional[Tuple[float, int, int, int, bool]] = None
    for staged in (False, True):
        b = _Bytes(share, per_batch + staged * staging_per_batch, rows, buffers + staged * staging_buffers, held)
        for p, w in _tries(threads, prefetch):
            for h in range(b.largest(p, w, batches), 0, -1):
                t = times.per_batch(h, w, staged, batches)
                if best is None or t < (1 - TIME_MARGIN) * best[0]:
                    best = (t, h, p, w, staged)
    if best is None:
        return None
    t, h, p, w, staged = best
    b = _Bytes(share, per_batch + staged * staging_per_batch, rows, buffers + staged * staging_buffers, held)
    why = b.why(h, p, w)
    p0, w0 = _tries(threads, prefetch)[0]
    less = [f"{p} batch{'es' * (p > 1)} ahead"] if p != p0 else []
    less += [f"{w} worker{'s' * (w > 1)}"] if w != w0 else []
    why += (f"; rows {'staged where a pass over a feature file pays' if staged else 'not staged'}"
            f"{' and ' + ' and '.join(less) if less else ''}: the fastest that fits, predicted "
            f"{t:.2f} s a batch (rows read {times.read:.2f} s a batch, a pass {times.scan:.2f} s, sampling "
            f"{times.sample:.2f} s, estimated on the probe batches)")
    plain = _fit(share=share, per_batch=per_batch, rows=rows, buffers=buffers, held=held, threads=threads,
                 prefetch=prefetch, batches=batches, warn=False)
    if plain is not None and (plain.hyperbatch, plain.prefetch, plain.workers, False) != (h, p, w, staged):
        why += (f", against {times.per_batch(plain.hyperbatch, plain.workers, False, batches):.2f} s for the "
                f"largest H unstaged ({plain.hyperbatch} on {plain.workers} threads)")
    return Sizes(h, p, w, why, staged)


def _fit(*, share: int, per_batch: int, rows: int, buffers: int, held: int, threads: int, prefetch: Optional[int],
         batches: int, warn: bool) -> Optional[Sizes]:
    """:func:`choose`'s "auto" for these bytes; where nothing fits, None, or with ``warn`` the
    batches as asked and the warning."""
    b = _Bytes(share, per_batch, rows, buffers, held)
    tries = _tries(threads, prefetch)
    fitting = [(p, w) for p, w in tries if b.total(1, p, w) <= share]
    if not fitting:
        if not warn:
            return None
        p, w = tries[-1]
        logger.warning(
            "the memory budget is too small for these batches: the plan leaves the batches %s, and even one batch "
            "at a time, with %d ahead and %d worker%s, needs %s: %d batches' rows (%s each, measured on %d probe "
            "batches), a sampled batch (%s), read buffers (%s) and labels (%s); they run as asked, one batch at a "
            "time, beyond the budget: give a larger memory budget (--memory), a smaller batch size or smaller "
            "fanouts", human_bytes(share), p, w, "s" * (w > 1), human_bytes(b.total(1, p, w)), p + 1,
            human_bytes(rows), PROBE_BATCHES, human_bytes(per_batch), human_bytes(w * buffers), human_bytes(held))
        fitting = tries[:1]
    p, w = fitting[0]
    h = max(1, b.largest(p, w, batches))
    why = b.why(h, p, w)
    if (p, w) != tries[0]:
        less = [f"{p} batch ahead instead of {tries[0][0]}"] if p != tries[0][0] else []
        less += [f"{w} worker instead of {threads}"] if w != threads else []
        why += f"; {' and '.join(less)}: with them even one batch at a time would exceed the batches' memory"
    return Sizes(h, p, w, why)
