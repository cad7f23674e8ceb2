"""The typed loaders' one engine from Python: :class:`TypedEpochs`, the Rust typed loader, its
hyperbatch size and the run of an epoch's batches on its workers."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import _core, _options, _threads
from . import hyper as hetero_hyper
from .base import Epochs, ProcessLocal
from .features import TypedRows
from .plan import HeteroPlan

logger = logging.getLogger("ringgnn")


class TypedEpochs(Epochs, ProcessLocal):
    """What the typed node loader (:class:`HeteroLoader`) and link batcher
    (:class:`ringgnn.sampling.links.HeteroLinkBatches`) share: one Rust typed loader
    (``_core.TypedLoader``, ``crates/ringgnn-loader/src/typed``) over the sampler's graph and the
    feature readers (``features``), its hyperbatch size ``H`` (``ringgnn.sampling.hyper``, from
    probe batches measured, within ``plan.batch_memory``), and its epochs run on the worker
    pipeline: ``threads`` workers, a batch's rows gathered when it is among the next
    ``prefetch``, batches handed out in order. A batch is given as (its index, its seeds: a
    list of (node type, ids) for each type seeded); subclasses give :meth:`_probe_seeds`, the
    seeds or pairs :class:`ringgnn.sampling.loader.Epochs` cuts, and ``_data`` (a core batch as
    ``HeteroData``, from :meth:`_hetero_data`). ``core_type``: the node type whose labels the
    batches carry as ``y`` when ``with_labels``."""

    def __init__(self, sampler: Any, features: TypedRows, plan: HeteroPlan, core_type: str, with_labels: bool, *,
                 threads: Optional[int], prefetch: Optional[int], hyperbatch: Any, staging_dir: Any, staging_cap: Any):
        self.sampler: Any = sampler  # its HeteroNeighborSampler (ringgnn.sampling.hetero, which imports this module)
        self.features, self.plan = features, plan
        self.feature_types = feature_types(sampler.dataset)
        self.threads = _options.optional_count(threads, "threads") or max(1, min(4, _threads.cores()))
        #: None: hyper.DEFAULT_PREFETCH, or fewer where they do not fit.
        self.prefetch = _options.optional_count(prefetch, "prefetch")
        self.hyperbatch = _options.hyperbatch_size(hyperbatch)
        #: Where each type's rows read from disk may be staged (None: beside the dataset).
        self.staging_dir = None if staging_dir is None else os.fspath(staging_dir)
        #: Bytes each type's staging file may hold (None: its feature file's; 0: never).
        self.staging_cap = _options.size(staging_cap, "staging_cap")
        self._core_type, self._with_labels = core_type, with_labels
        self._sizes: Optional[hetero_hyper.Sizes] = None
        self._core: Optional[Tuple[int, Any]] = None
        self.epoch = 0

    def _probe_seeds(self) -> List[Tuple[List[Tuple[str, np.ndarray]], Optional[List[np.ndarray]]]]:
        """The seeds (and their times, or None) of the first
        :data:`ringgnn.sampling.hyper.PROBE_BATCHES` batches of epoch 0."""
        raise NotImplementedError

    def _core_loader(self) -> Any:
        """This process's ``_core.TypedLoader`` (``ringgnn_loader::typed``): the sampler's graph,
        the feature readers' files and cache, the labels of ``_core_type`` if ``_with_labels``;
        made on first use."""
        pid = os.getpid()
        if self._core is None or self._core[0] != pid:
            s = self.sampler
            protos = self.features._prototypes()
            self._core = (pid, _core.TypedLoader(
                s.graph(), [(r, list(f)) for r, f in s.fanouts.items()], self._core_type, replace=s.replace,
                seed=s.seed, features=[(t, protos[t]) for t in self.feature_types], labels=self._with_labels,
                with_edge_ids=s.with_edge_ids, staging_dir=self.staging_dir, staging_cap=self.staging_cap,
                temporal_strategy=s.temporal_strategy))
        return self._core[1]

    def probe_batch_bytes(self) -> int:
        """What one batch holds at most while its hyperbatch is sampled, measured
        (``ringgnn.sampling.hyper.measured_bytes``) on the first
        :data:`ringgnn.sampling.hyper.PROBE_BATCHES` batches of epoch 0 sampled from disk together
        as a probe: its share of the sampler's workspaces and its sample."""
        return self._probe()["per_batch"]

    def _probe(self) -> Dict[str, Any]:
        """What the probe batches of :meth:`probe_batch_bytes` measure, as
        ``ringgnn.sampling.hyper.choose`` takes it: ``per_batch`` (a sampled batch), ``rows`` (a
        gathered batch: its rows, ``ringgnn.sampling.hyper.measured_rows``, and its sample,
        ``measured_sample``), ``buffers`` (one worker's read and spill buffers, its sampler's
        dedup maps and the finished sample it spills or gathers), ``held`` (the labels), staging's part (``staging_per_batch``,
        ``staging_buffers``) and the seconds a batch takes (``times``,
        ``ringgnn.sampling.hyper.Times``)."""
        core = self._core_loader()
        probe = self._probe_seeds()
        probes = core.probe([s for s, _ in probe], [t for _, t in probe])
        sample = hetero_hyper.measured_sample(probes)
        return dict(per_batch=hetero_hyper.measured_bytes(probes), rows=hetero_hyper.measured_rows(probes) + sample,
                    buffers=core.worker_bytes() + hetero_hyper.measured_scratch(probes) + sample,
                    held=core.held_bytes(),
                    staging_per_batch=hetero_hyper.measured_staging(probes), staging_buffers=core.staging_bytes(),
                    times=hetero_hyper.measured_times(probes))

    def sizes(self) -> hetero_hyper.Sizes:
        """The epochs' hyperbatch size, batches ahead and workers, decided once, on first use
        (``ringgnn.sampling.hyper.choose``, from what the probe batches of
        :meth:`probe_batch_bytes` hold), within the plan's ``batch_memory``."""
        if self._sizes is None:
            backend, _ = self.sampler.placement()
            measured = dict(per_batch=0, rows=0, buffers=0, held=0)
            if self.hyperbatch is None and backend != "memory" and len(self):
                measured = self._probe()
            self._sizes = hetero_hyper.choose(self.hyperbatch, in_memory=backend == "memory",
                                              share=self.plan.batch_memory, threads=self.threads,
                                              prefetch=self.prefetch, batches=max(1, len(self)), **measured)
            logger.info("hyperbatch: %s", self._sizes.why)
        return self._sizes

    def hyperbatch_size(self) -> Tuple[int, str]:
        """(H, why): batches sampled together (:meth:`sizes`)."""
        s = self.sizes()
        return s.hyperbatch, s.why

    def feature_stats(self) -> Dict[str, Dict[str, int]]:
        """Per type, the feature reads of this loader's workers (rows, cache hits, pages and bytes
        read), summed, plus those of the shared ``features`` readers' own gathers; the cache's
        rows per type are ``features.cached_rows()``."""
        out = self.features.stats()
        core = self._core_loader().feature_stats() if self._core is not None else {}
        for t, s in core.items():
            if t in out:
                for k in out[t]:
                    out[t][k] += int(s[k])
        return out

    def staged_hyperbatches(self) -> Dict[str, int]:
        """Per node type, the hyperbatches whose rows were staged (one pass over its feature file,
        ``ringgnn_loader::typed::stage``) rather than read batch by batch, over every epoch."""
        return dict(self._core_loader().staged_hyperbatches()) if self._core is not None else {}

    def _hetero_data(self, out: Mapping[str, Any], seeds: Sequence[Tuple[str, np.ndarray]],
                     input_id: Optional[Mapping[str, Any]] = None) -> Any:
        """A core batch of ``seeds`` (by type) as ``HeteroData``: its sample, each type's rows,
        the labels (when ``with_labels``), ``input_id`` where given."""
        return self.sampler._sample(out, seeds).to_hetero_data(out["x"], out["y"], input_id)

    def _make(self, epoch: int, batches: Sequence[Tuple[int, Sequence[Tuple[str, np.ndarray]], Any]]) -> List[Any]:
        """The core batches of ``batches`` (index, seeds by type, their times or None) of epoch
        ``epoch``, sampled together (one hyperbatch) on the calling thread."""
        job = [(_options.count(b, "batch"), [(t, np.ascontiguousarray(ids, dtype=np.int64)) for t, ids in seeds], times)
               for b, seeds, times in batches]
        return self._core_loader().make(_options.count(epoch, "epoch"), job)

    def _run(self, epoch: int, batches: Sequence[Tuple[int, Sequence[Tuple[str, np.ndarray]], Any]]) -> Iterator[Any]:
        """The core batches of ``batches`` (index, seeds by type, their times or None) of epoch
        ``epoch``, in order, made by the workers in hyperbatches of ``H`` consecutive ones."""
        s = self.sizes()
        h = s.hyperbatch
        jobs = [list(batches[i:i + h]) for i in range(0, len(batches), h)]
        window = hetero_hyper.jobs_in_flight(h, s.workers, s.prefetch) * h
        run = self._core_loader().epoch(epoch, jobs, s.workers, window, s.prefetch, s.staging)
        try:
            yield from run
        finally:
            run.close()

    def _fresh(self) -> Dict[str, Any]:
        return dict(_core=None)


def feature_types(ds: Any) -> List[str]:
    """The node types of ``ds`` that have features."""
    return [t for t, d in ds.feature_dims().items() if d is not None]
