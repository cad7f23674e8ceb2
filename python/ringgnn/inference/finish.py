"""Finishing a destination block, for the grid and the source partitions: the layer's
outputs from the aggregates, a slice at a time, as a pipeline (:func:`map_slices`: one thread
reads ahead, ``workers`` compute, the caller writes in order; results bit for bit the sequential
ones). docs/INFERENCE.md "Finishing a block"."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Iterator, Optional, Tuple

import numpy as np

from .. import _threads

#: The most threads computing finishing slices (each holds a slice's temporaries).
MAX_WORKERS = 4


@dataclass
class LayerStep:
    """Layer ``k`` of the engine as :func:`finish_block` and the source partitions take it."""

    k: int
    #: The model: ``sage``, ``gcn`` or ``gat``.
    kind: str
    #: The layer's dense parts (``infer_dense``: ``transform``, ``messages``, ``gat_start``, ``layers``).
    dense: Any
    #: The graph (``infer_graph.NeighborFile``).
    graph: Any
    #: Where temporary files go.
    work_dir: str
    #: Floats of an accumulator row (GAT's: messages, running maxima, sums of exponentials).
    acc_width: int
    #: ``FeatureReader.aggregate``/``partials``' fold arguments.
    fold: Dict[str, Any]
    #: ``finish(state, a, b, x_dst)``: the outputs of destinations ``a..b`` from their aggregates.
    finish: Callable[[Dict[str, Any], int, int, Any], Any]
    #: What the model applies between layers (activation, norm).
    after: Callable[[Any], Any]
    #: Host rows to the dense parts' device, and back.
    up: Callable[[np.ndarray], Any]
    down: Callable[[Any], np.ndarray]
    #: Threads computing slices, and whether the next slice is read ahead.
    workers: int
    overlap: bool
    #: Seconds of the layer's phases (the engine's ``stats``).
    phases: Dict[str, float] = field(default_factory=dict)
    #: ``done(a, b)`` once block ``a..b`` is finished: the engine's count of blocks and progress.
    done: Callable[[int, int], None] = lambda a, b: None

    def phase(self, name: str, since: float) -> None:
        """Count the seconds since ``since`` to phase ``name``."""
        self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - since


def workers(device: str) -> int:
    """Threads computing finishing slices: one per usable core (at most :data:`MAX_WORKERS`), one on a GPU."""
    if device != "cpu":
        return 1
    return max(1, min(MAX_WORKERS, _threads.cores()))


def slices_in_flight(workers: int, overlap: bool) -> int:
    """Finishing slices held at once: 1 without ``overlap``, else ``workers + 2``."""
    return workers + 2 if overlap else 1


def slice_reader(reader: Any, end: int, rows: int) -> Callable[[int], np.ndarray]:
    """``read(r0)``: rows ``r0..min(end, r0 + rows)`` of ``reader``."""
    return lambda r0: reader.gather(np.arange(r0, min(end, r0 + rows), dtype=np.int64))


def map_slices(starts: Any, read: Callable[[int], Any], compute: Callable[[int, Any], Any],
               write: Callable[[int, Any], None], workers: int, overlap: bool = True) -> None:
    """``write(s, compute(s, read(s)))`` for each slice start ``s``, writes in order;
    with ``overlap`` as the module's pipeline, else sequentially on this thread."""
    starts = list(starts)
    if not overlap or len(starts) <= 1:
        for s in starts:
            write(s, compute(s, read(s)))
        return
    def task(s: int, got: Any) -> Any:
        return compute(s, got.result())  # raises the read's error (or its cancellation)

    depth = workers + 1  # slices read or computed while one is written
    pending: Deque[Tuple[int, Any, Any]] = deque()
    with ThreadPoolExecutor(1, thread_name_prefix="ringgnn-finish-read") as reads, \
            ThreadPoolExecutor(workers, thread_name_prefix="ringgnn-finish") as computes:
        try:
            nxt = 0

            def submit() -> None:
                nonlocal nxt
                if nxt < len(starts):
                    s = starts[nxt]
                    got = reads.submit(read, s)
                    pending.append((s, got, computes.submit(task, s, got)))
                    nxt += 1

            for _ in range(depth):
                submit()
            while pending:
                s, got, done = pending.popleft()
                del got  # its rows: held by the slice's computation only, if at all
                out = done.result()
                submit()  # the next slice starts while this one is written
                write(s, out)
                del out, done
        finally:
            # An error (or Ctrl-C): nothing more starts; the pools' exits wait for what runs.
            for _, got, done in pending:
                done.cancel()
                got.cancel()
            pending.clear()


#: The fewest rows of a part when a piece's rows are split among threads (:func:`split_rows`).
MIN_SPLIT = 1024


@contextmanager
def split_rows(fn: Callable[[np.ndarray], np.ndarray], workers: int) -> Iterator[Callable[[np.ndarray], np.ndarray]]:
    """``fn`` (a dense product of rows, called by the Rust aggregation per piece)
    computed on ``workers`` threads over contiguous parts, the results concatenated in order."""
    if workers <= 1:
        yield fn
        return
    with ThreadPoolExecutor(workers - 1, thread_name_prefix="ringgnn-split") as pool:
        def apply(x: np.ndarray) -> np.ndarray:
            n = len(x)
            if n < 2 * MIN_SPLIT:
                return fn(x)
            bounds = np.linspace(0, n, min(workers, n // MIN_SPLIT) + 1).astype(np.int64)
            rest = [pool.submit(fn, x[lo:hi]) for lo, hi in zip(bounds[1:-1], bounds[2:])]
            try:
                first = fn(x[:bounds[1]])
            finally:
                wait(rest)  # ``x`` is the caller's (the Rust core's buffer): no thread may outlive the call
            return np.concatenate([first] + [f.result() for f in rest])

        yield apply


def finish_block(step: LayerStep, a: int, b: int, reader: Any, writer: Callable[[int, np.ndarray], None],
                 rows: int, activate: bool, state: Callable[[int, int, Any], Dict[str, Any]],
                 read_rows: bool = True) -> None:
    """Layer ``step.k``'s outputs of destinations ``a..b``, ``rows`` at a time, to
    ``writer(first, rows)`` in node order. ``state(r0, r1, x)``: the slice's aggregates as
    ``step.finish`` takes them (``x``: its input rows, None without ``read_rows``)."""

    read_slice = slice_reader(reader, b, rows)

    def read(r0: int) -> Optional[np.ndarray]:
        return read_slice(r0) if read_rows else None

    def compute(r0: int, x: Optional[np.ndarray]) -> np.ndarray:
        r1 = min(b, r0 + rows)
        x_dst = None if x is None else step.up(x)  # the dense parts on the run's device (``--device``)
        out = step.finish(state(r0, r1, x_dst), r0, r1, x_dst)
        if activate:
            out = step.after(out)
        return step.down(out)

    map_slices(range(a, b, rows), read, compute, writer, step.workers, step.overlap)
    step.done(a, b)
