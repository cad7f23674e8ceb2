"""The typed loaders' one engine: :class:`TypedEpochs` over the Rust typed loader."""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import _core, _options, _threads
from .base import Epochs, ProcessLocal
from .features import TypedRows
from .plan import HeteroPlan

logger = logging.getLogger("ringgnn")


class TypedEpochs(Epochs, ProcessLocal):
    """What :class:`HeteroLoader` and ``HeteroLinkBatches`` share: one Rust typed loader
    (``_core.TypedLoader``) over the sampler's graph and the feature readers (``features``), its
    hyperbatch size (:meth:`sizes`, decided in Rust from probe batches within
    ``plan.batch_memory``), and its epochs run on the worker pipeline. A batch is given as (its
    index, its seeds: a list of (node type, ids)); subclasses give :meth:`_probe_seeds`, the
    items :class:`Epochs` cuts, and ``_data`` (a core batch as ``HeteroData``). ``core_type``:
    the node type whose labels the batches carry as ``y`` when ``with_labels``."""

    def __init__(self, sampler: Any, features: TypedRows, plan: HeteroPlan, core_type: str, with_labels: bool, *,
                 threads: Optional[int], prefetch: Optional[int], hyperbatch: Any, staging_dir: Any, staging_cap: Any):
        self.sampler: Any = sampler  # its HeteroNeighborSampler (ringgnn.sampling.hetero, which imports this module)
        self.features, self.plan = features, plan
        self.feature_types = feature_types(sampler.dataset)
        self.threads = _options.optional_count(threads, "threads") or max(1, min(4, _threads.cores()))
        #: None: the core's default (2), or fewer where they do not fit.
        self.prefetch = _options.optional_count(prefetch, "prefetch")
        self.hyperbatch = _options.hyperbatch_size(hyperbatch)
        #: Where each type's rows read from disk may be staged (None: beside the dataset).
        self.staging_dir = None if staging_dir is None else os.fspath(staging_dir)
        #: Bytes each type's staging file may hold (None: its feature file's; 0: never).
        self.staging_cap = _options.size(staging_cap, "staging_cap")
        self._core_type, self._with_labels = core_type, with_labels
        self._sizes: Any = None
        self._core: Optional[Tuple[int, Any]] = None
        self.epoch = 0

    def _probe_seeds(self) -> List[Tuple[List[Tuple[str, np.ndarray]], Optional[List[np.ndarray]]]]:
        """The seeds (and their times, or None) of the first ``_core.TypedLoader.PROBE_BATCHES``
        batches of epoch 0."""
        raise NotImplementedError

    def _core_loader(self) -> Any:
        """This process's ``_core.TypedLoader``, made on first use."""
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

    def sizes(self) -> Any:
        """The epochs' hyperbatch size, batches ahead, workers and staging
        (``_core.TypedLoader.sizes`` as attributes: ``hyperbatch``, ``prefetch``, ``workers``,
        ``threads``, ``drivers``, ``staging``, ``window``, ``why``, and what the probe
        measured), decided once by the Rust typed loader within the plan's ``batch_memory``:
        for "auto", from the first ``PROBE_BATCHES`` batches of epoch 0 sampled as a probe."""
        if self._sizes is None:
            probe = self._probe_seeds() if self.hyperbatch is None and len(self) else []
            self._sizes = SimpleNamespace(**self._core_loader().sizes(
                self.hyperbatch, self.plan.batch_memory, self.threads, self.prefetch, max(1, len(self)),
                [s for s, _ in probe], [t for _, t in probe]))
            if self._sizes.warning is not None:
                logger.warning("%s", self._sizes.warning)
            logger.info("hyperbatch: %s", self._sizes.why)
        return self._sizes

    def hyperbatch_size(self) -> Tuple[int, str]:
        """(H, why): batches sampled together (:meth:`sizes`)."""
        s = self.sizes()
        return s.hyperbatch, s.why

    def feature_stats(self) -> Dict[str, Dict[str, int]]:
        """Per type, the feature reads of this loader's workers and of the ``features`` readers
        (rows, cache hits, pages and bytes read), summed."""
        out = self.features.stats()
        core = self._core_loader().feature_stats() if self._core is not None else {}
        for t, s in core.items():
            if t in out:
                for k in out[t]:
                    out[t][k] += int(s[k])
        return out

    def staged_hyperbatches(self) -> Dict[str, int]:
        """Per node type, the hyperbatches whose rows were staged rather than read batch by batch."""
        return dict(self._core_loader().staged_hyperbatches()) if self._core is not None else {}

    def _hetero_data(self, out: Mapping[str, Any], seeds: Sequence[Tuple[str, np.ndarray]],
                     input_id: Optional[Mapping[str, Any]] = None) -> Any:
        """A core batch of ``seeds`` (by type) as ``HeteroData``."""
        return self.sampler._sample(out, seeds).to_hetero_data(out["x"], out["y"], input_id)

    def _make(self, epoch: int, batches: Sequence[Tuple[int, Sequence[Tuple[str, np.ndarray]], Any]]) -> List[Any]:
        """The core batches of ``batches`` (index, seeds by type, their times or None) of epoch
        ``epoch``, sampled together (one hyperbatch) on the calling thread."""
        job = [(_options.count(b, "batch"), [(t, np.ascontiguousarray(ids, dtype=np.int64)) for t, ids in seeds], times)
               for b, seeds, times in batches]
        return self._core_loader().make(_options.count(epoch, "epoch"), job)

    def _run(self, epoch: int, batches: Sequence[Tuple[int, Sequence[Tuple[str, np.ndarray]], Any]]) -> Iterator[Any]:
        """The core batches of ``batches`` (index, seeds by type, their times or None) of epoch
        ``epoch``, in order, made by the workers in hyperbatches of consecutive ones
        (``_core.TypedLoader.job_sizes``: for ``H`` from the budget as few as it allows, of even
        sizes)."""
        s = self.sizes()
        jobs, at = [], 0
        for n in self._core_loader().job_sizes(len(batches), s.hyperbatch, self.hyperbatch is None):
            jobs.append(list(batches[at:at + n]))
            at += n
        run = self._core_loader().epoch(epoch, jobs, s.workers, s.window, s.prefetch, s.staging, s.threads)
        try:
            yield from run
        finally:
            run.close()

    def _fresh(self) -> Dict[str, Any]:
        return dict(_core=None)


def feature_types(ds: Any) -> List[str]:
    """The node types of ``ds`` that have features."""
    return [t for t, d in ds.feature_dims().items() if d is not None]
