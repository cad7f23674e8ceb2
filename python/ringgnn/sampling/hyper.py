"""Hyperbatches of the heterogeneous loaders: how many batches a worker samples together
(``hyperbatch=H | "auto"``), decided here and nowhere else, and how many such jobs are in flight.

A hyperbatch of H batches is sampled hop by hop with each relation's file read once per hop for
all of them (``HeteroNeighborSampler.sample_many``), so a page several batches need is read once.
Its cost is memory: each worker holds H batch states while it samples, and a finished job's H
batches wait, features gathered, until the consumer takes them. ``"auto"`` therefore takes the
largest H for which every batch that can be held at once fits the hyperbatches' share: half of
the batches' half of the memory budget (``HeteroPlan.batch_memory``, ``ringgnn.sampling.plan``);
the other half of it is left to what every loader needs whatever H, the model's activations and
the threads' read buffers. When every neighbor file is held in memory there is nothing to
share: H is 1.

**The node loader** (:class:`ringgnn.HeteroLoader`, on the Rust typed loader) gathers a
batch's feature rows only when it is among the next ``prefetch`` the consumer takes, so a
hyperbatch costs ``H`` *samples* per worker, not ``H`` batches of rows. Its ``"auto"``
(``fixed`` given) counts everything its epoch holds, as measured (:func:`measured_bytes`,
:func:`measured_rows`: :data:`PROBE_BATCHES` batches sampled from disk as one probe hyperbatch):
``threads * H`` sampled batches (each its share of the sampler's workspaces and its sample, the
largest times :data:`MEASURED_MARGIN`), plus what it holds whatever H (``fixed``: the rows of the
``prefetch`` batches ahead and of the consumer's, each worker's read buffers, the labels), all
within the batches' whole memory. **The link batches** gather as they sample and size H from
upper bounds (:func:`batch_bound`: the core's ``state_bytes``, ``edge_index``, rows, labels;
about three times what real batches hold): ``(jobs_in_flight + 1) * H`` of them fit the share.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .._format import human_bytes


def run_in_order(jobs: Sequence[Any], make: Callable[[Any], List[Any]], *, threads: int, ahead: int,
                 name: str) -> Iterator[Any]:
    """The batches of ``make(job)`` for each job (a hyperbatch's list), made by ``threads``
    worker threads with ``ahead`` jobs in flight, handed out in job order; each batch is dropped
    from its list as it is handed out, and the jobs not started are cancelled if the consumer or
    a job fails. The one pipeline of the heterogeneous node and link loaders."""
    with ThreadPoolExecutor(threads, thread_name_prefix=name) as pool:
        queue: List[Future] = []
        nxt = 0
        for _ in range(len(jobs)):
            while nxt < len(jobs) and len(queue) < ahead:
                queue.append(pool.submit(make, jobs[nxt]))
                nxt += 1
            fut = queue.pop(0)
            try:
                batches = fut.result()
                while batches:
                    yield batches.pop(0)
            except BaseException:
                for f in queue:
                    f.cancel()
                raise


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


def share(batch_memory: int) -> int:
    """The hyperbatches' share of the batches' memory (see the module docs): half of it."""
    return batch_memory // 2


def batch_bound(bound: Dict[str, Any], row_bytes: Dict[str, int], target: str, labels: bool) -> int:
    """Upper bound on what one batch holds from its sampling until the consumer takes it: its
    state while sampled (``bound["state_bytes"]``, the sample included), the ``edge_index`` made
    from its ``row``/``col`` (16 B per edge), its feature rows (float32) and labels."""
    edges = sum(bound["edges"].values())
    rows = sum(n * row_bytes.get(t, 0) for t, n in bound["nodes"].items())
    return bound["state_bytes"] + 16 * edges + rows + (8 * bound["nodes"][target] if labels else 0)


def choose(asked: Optional[int], *, in_memory: bool, share: int, per_batch: int, threads: int, prefetch: int,
           batches: int, fixed: Optional[int] = None) -> Tuple[int, str]:
    """(H, why in words). ``asked``: a number fixes H (at most the epoch's ``batches``); None is
    ``"auto"``: 1 when the neighbor files are all in memory, else the largest H at most
    ``ceil(batches / threads)`` (so every thread has a job) whose held batches,
    ``(jobs_in_flight + 1) * H`` of ``per_batch`` bytes at most, fit ``share``; at least 1.
    ``fixed`` (the node loader, see the module docs): ``per_batch`` is a sampled batch as
    measured, and ``fixed + threads * H * per_batch`` fits ``share``."""
    if asked is not None:
        h = max(1, min(asked, batches))
        return h, f"{h} (as given)"
    if in_memory:
        return 1, "1 (auto: every neighbor file is in memory, nothing to share)"
    cap = max(1, -(-batches // threads))

    def held(h: int) -> int:
        if fixed is not None:
            return fixed + threads * h * per_batch
        return (jobs_in_flight(h, threads, prefetch) + 1) * h * per_batch

    h = cap
    while h > 1 and held(h) > share:
        h -= 1
    fits = "fit in" if held(h) <= share else "exceed, even one batch at a time,"
    if fixed is not None:
        each = (f"{human_bytes(per_batch)} per sampled batch (measured on {PROBE_BATCHES} probe batches, "
                f"x{MEASURED_MARGIN}) and {human_bytes(fixed)} whatever H (rows gathered for the next "
                f"{prefetch} and the consumer's, read buffers, labels)")
        whose = "batches'"
    else:
        each, whose = f"at most {human_bytes(per_batch)} per batch", "hyperbatches'"
    return h, (f"{h} (auto: {threads} threads, {each}; "
               f"{human_bytes(held(h))} held {fits} the {whose} {human_bytes(share)})")
