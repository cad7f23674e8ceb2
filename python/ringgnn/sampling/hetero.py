"""Typed sampling: :class:`HeteroNeighborSampler` and :class:`HeteroLoader` (batches as
``HeteroData``), also every dataset's sampling at seed times (docs/ARCHITECTURE.md,
"Heterogeneous graphs")."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, _options
from .._core import InputError
from ..data.dataset import Dataset, HeteroDataset, PathLike, warn_sampling_without_times
from ..data.schema import edge_type_str
from .base import ProcessLocal
from .features import TypedRows
from .plan import HeteroPlan, plan_hetero
from .sample import HeteroSample
from .typed import TypedEpochs, feature_types

logger = logging.getLogger("ringgnn")


def require_times(ds: Any) -> None:
    """Refuse ``input_time`` on a dataset without edge or node times (nothing to sample at)."""
    if not ds.has_times:
        raise InputError(f"{ds.path}: input_time was given but the dataset has no edge or node times; build it with "
                         "--edge-time (and --node-time), or sample without input_time")


def seed_times(ds: Any, node_type: str, seeds: np.ndarray, input_time: Any, ignore_time: bool, what: str
               ) -> Optional[np.ndarray]:
    """Each seed's time (parallel to ``seeds``, ids of ``node_type``) for ``what``, or None:
    sampled without times. ``input_time`` (one integer per seed, or one for all) where given,
    refused on a dataset without times; else the seeds' node times where their type has them.
    ``ignore_time`` samples without times, warned where ``ds`` has times, as is a type without
    node times on a dataset with times."""
    if ignore_time:
        if input_time is not None:
            raise InputError("input_time samples each seed at a time and ignore_time=True samples without times: "
                             "give one of them")
        warn_sampling_without_times(ds, f"{what} with ignore_time=True")
        return None
    if input_time is not None:
        require_times(ds)
        return _options.seed_times(input_time, len(seeds))
    times = ds.node_type(node_type).node_times()
    if times is not None:
        return times[seeds]
    if ds.has_times:
        logger.warning("ringgnn: %s has times but node type '%s' has no node times: its batches are sampled "
                       "without times; give input_time (one time per seed) to sample at times", ds.path,
                       node_type)
    return None


def relation_fanouts(ds: HeteroDataset, fanouts: Any) -> Dict[str, List[int]]:
    """Fanouts per relation (``SRC:REL:DST`` -> list per hop) from one list for every relation
    or a dict per relation, checked."""
    if isinstance(fanouts, Mapping):
        out: Dict[str, List[int]] = {}
        for key, value in fanouts.items():
            name = edge_type_str(key)
            if name not in ds.relations:
                raise InputError(f"fanouts: unknown relation '{name}' (the dataset has: {', '.join(ds.relations)})")
            if isinstance(value, str):
                value = [int(v) for v in value.split(",")]
            hops = [_options._integer(f, f"fanouts[{name!r}]") for f in value]
            if any(f < -1 for f in hops):
                raise InputError(f"fanouts[{name!r}] = {hops}: each hop is a count >= 0 or -1 (all neighbors)")
            out[name] = hops
        missing = [r for r in ds.relations if r not in out]
        if missing:
            raise InputError(f"fanouts has no entry for relation(s) {', '.join(missing)}; give every relation "
                             "(0 skips a relation at a hop)")
        lengths = {len(v) for v in out.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise InputError("fanouts: every relation needs the same number of hops (at least one), got "
                             + ", ".join(f"{r}: {len(v)}" for r, v in out.items()))
        return out
    hops = _options.fanouts(fanouts)
    return {r: list(hops) for r in ds.relations}


class HeteroNeighborSampler(ProcessLocal):
    """Node-wise uniform neighbor sampling over a heterogeneous dataset on disk (docs/ARCHITECTURE.md,
    "Heterogeneous graphs", Sampling).

    Args:
        dataset: a :class:`ringgnn.HeteroDataset` or its path (a homogeneous dataset is the
            one-type case: node type ``node``, relation ``node:to:node``).
        fanouts: one list for every relation (``[10, 5]`` or ``"10,5"``) or a dict per relation.
        replace, direct, seed, with_edge_ids, temporal_strategy: as :class:`ringgnn.NeighborSampler`'s
            (edge ids: positions in each relation's file).
        backend: ``"auto"`` (the files the memory plan holds in memory, the others read with
            io_uring, else pread: :meth:`placement`), ``"memory"``, ``"uring"`` or ``"pread"``.
        memory: the process's budget the ``auto`` choice is made against (bytes or "2G").
        share: another sampler of the same dataset whose graph (offset indexes, files held,
            placement) this one uses.
        disk_backend: how this sampler reads the relations kept on disk ("uring", "pread",
            "auto"), instead of the graph's backend.
        plan: the memory plan (:func:`ringgnn.sampling.plan.plan_hetero`) that placed the files;
            default: one for the neighbor files alone.
        times: whether the graph is opened with the dataset's times (default: ``plan``'s, or
            ``share``'s, else True); False holds none of their files and refuses ``input_time``.
    """

    def __init__(self, dataset: Union[HeteroDataset, PathLike], fanouts: Any, *, replace: bool = False,
                 backend: str = "auto", direct: bool = False, seed: int = 0, memory: Union[None, int, str] = None,
                 with_edge_ids: bool = False, share: Optional["HeteroNeighborSampler"] = None,
                 disk_backend: Optional[str] = None, plan: Optional[HeteroPlan] = None,
                 temporal_strategy: str = "uniform", times: Optional[bool] = None):
        self.share = share
        self.disk_backend = None if disk_backend is None else _options.choice(disk_backend, ("auto", "uring", "pread"),
                                                                             "disk_backend")
        if share is not None:
            dataset = share.dataset
        self.dataset = Dataset.opened(dataset)  # a homogeneous one is the one-type case
        self.fanouts = relation_fanouts(self.dataset, fanouts)
        self.replace = bool(replace)
        self.backend_choice = _options.backend(backend)
        self.direct = bool(direct)
        self.seed = _options.count(seed, "seed")
        self.memory = _options.size(memory, "memory")
        self.with_edge_ids = bool(with_edge_ids)
        self.temporal_strategy = _options.choice(temporal_strategy, ("uniform", "last"), "temporal_strategy")
        if plan is not None and times is not None and bool(times) != plan.times:
            raise InputError(f"times={bool(times)}, but the plan given was made {'with' if plan.times else 'without'} "
                             "the dataset's times; leave times out (the plan's is taken) or make the plan with it")
        #: Whether the graph holds the dataset's times (False: samples at ``input_time`` are refused).
        self.times: bool = (share.times if share is not None else plan.times if plan is not None and times is None
                            else times is None or bool(times))
        self._plan = plan
        self.__dict__.update(self._fresh())

    def _fresh(self) -> Dict[str, Any]:
        # _graph: (pid, this process's graph); _local: each thread's core sampler.
        return dict(_local=threading.local(), _lock=threading.Lock(), _graph=None)

    @property
    def hops(self) -> int:
        return len(next(iter(self.fanouts.values())))

    def plan(self) -> HeteroPlan:
        """The memory plan this sampler's graph is opened with: the one given, else one for the
        neighbor files alone, made once, with every frontier taken as dense."""
        if self.share is not None:
            return self.share.plan()
        if self._plan is None:
            self._plan = plan_hetero(self.dataset, self.fanouts, memory=self.memory, backend=self.backend_choice,
                                     times=self.times)
        return self._plan

    def placement(self) -> Tuple[str, List[str]]:
        """(backend of the relations read from disk, relations whose neighbor file is held in
        memory), as :meth:`plan` decided (``memory`` when every file is held)."""
        return self.plan().placement()

    def resolved_backend(self) -> str:
        """How the neighbor files are read, in words (``memory``; ``auto``; ``auto, N of M
        relations in memory``)."""
        backend, held = self.placement()
        return f"{backend}, {len(held)} of {len(self.dataset.relations)} relations in memory" if held else backend

    def graph(self) -> Any:
        """This process's ``_core.HeteroGraph`` (shared by every thread's sampler), made on first use."""
        if self.share is not None:
            return self.share.graph()
        pid = os.getpid()
        with self._lock:
            if self._graph is None or self._graph[0] != pid:
                backend, held = self.placement()
                self._graph = (pid, _core.HeteroGraph(self.dataset.path, backend=backend, direct=self.direct,
                                                      memory_relations=held, times=self.times))
            return self._graph[1]

    def _sampler(self) -> Any:
        """This thread's core sampler (its own rings and file handles), made on first use."""
        pid = os.getpid()
        st = self._local
        if getattr(st, "pid", None) != pid:
            st.core = _core.HeteroSampler(self.graph(), [(r, list(f)) for r, f in self.fanouts.items()],
                                          replace=self.replace, seed=self.seed, with_edge_ids=self.with_edge_ids,
                                          disk_backend=self.disk_backend, temporal_strategy=self.temporal_strategy)
            st.pid = pid
        return st.core

    @property
    def backend(self) -> str:
        return self._sampler().backend

    def io_stats(self) -> Dict[str, int]:
        """This thread's core sampler's read counters."""
        return dict(self._sampler().io_stats())

    def sample(self, seeds: Any, seed_type: str, *, epoch: int = 0, batch: int = 0,
               input_time: Any = None) -> HeteroSample:
        """Sample around ``seeds`` (ids of ``seed_type``) as batch ``batch`` of epoch ``epoch``;
        with ``input_time`` (one integer time per seed, or one for all), at those times (docs/USAGE.md,
        "Sampling at seed times")."""
        return self.sample_typed([(seed_type, seeds)], epoch=epoch, batch=batch,
                                 input_time=None if input_time is None else [input_time])

    def sample_typed(self, seeds: Union[Mapping[str, Any], Sequence[Tuple[str, Any]]], *, epoch: int = 0,
                     batch: int = 0, input_time: Any = None) -> HeteroSample:
        """Sample around seeds of several node types at once (``{"author": ids, "paper": ids}``,
        or (type, ids) pairs, a type possibly twice), as PyG's heterogeneous link loader seeds
        a batch's two ends: each type's seeds are deduplicated in its own id space, so
        ``batch_sizes[t]`` is the number of distinct seeds of ``t``. ``input_time``: seed times
        in the shape of ``seeds`` (a dict by type, or a list parallel to the pairs)."""
        typed = self._typed_seeds(seeds)
        out = self._sampler().sample_typed(typed, _options.count(epoch, "epoch"), _options.count(batch, "batch"),
                                           self._seed_times(typed, input_time))
        return self._sample(out, typed)

    def sample_many(self, seeds: Sequence[Union[Mapping[str, Any], Sequence[Tuple[str, Any]]]],
                    batches: Sequence[int], *, epoch: int = 0, input_time: Any = None) -> List[HeteroSample]:
        """Sample batches ``batches[i]`` of epoch ``epoch`` around ``seeds[i]`` (as
        :meth:`sample_typed` takes them) together, as a *hyperbatch*: each relation's file read
        once per hop for all of them. Sample ``i`` is exactly ``sample_typed(seeds[i],
        epoch=epoch, batch=batches[i])``. ``input_time``: None, or per seed set its times."""
        if len(seeds) != len(batches):
            raise InputError(f"sample_many: {len(seeds)} seed sets but {len(batches)} batch indices; give one "
                             "batch index per seed set")
        if input_time is not None and len(input_time) != len(seeds):
            raise InputError(f"sample_many: {len(input_time)} lists of seed times but {len(seeds)} seed sets; give "
                             "one per seed set")
        typed = [self._typed_seeds(x) for x in seeds]
        requests = [(t, _options.count(b, "batch")) for t, b in zip(typed, batches)]
        times = None if input_time is None else [self._seed_times(t, x) for t, x in zip(typed, input_time)]
        outs = self._sampler().sample_many(requests, _options.count(epoch, "epoch"), times)
        return [self._sample(o, t) for o, t in zip(outs, typed)]

    def bound(self, seeds: Mapping[str, int]) -> Dict[str, Any]:
        """Upper bounds on one sample with ``seeds[t]`` seeds of each type ``t``: ``nodes`` per
        type, ``edges`` per relation, ``sample_bytes`` and ``state_bytes`` (one batch of a
        hyperbatch while it is sampled)."""
        return dict(self._sampler().bound({self.dataset.check_type(t): _options.count(n, "seeds")
                                           for t, n in seeds.items()}))

    def _typed_seeds(self, seeds: Any) -> List[Tuple[str, np.ndarray]]:
        pairs = list(seeds.items()) if isinstance(seeds, Mapping) else list(seeds)
        if not pairs:
            raise InputError("seeds: no node type given; give {node type: ids} for at least one type")
        out = []
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise InputError(f"seeds: {pair!r} is not a (node type, ids) pair; give a dict {{type: ids}} "
                                 "or a list of (type, ids)")
            t, ids = pair
            out.append((self.dataset.check_type(t), _options.node_ids(ids, f"seeds[{t!r}]")))
        return out

    def _seed_times(self, typed: Sequence[Tuple[str, np.ndarray]], times: Any) -> Optional[List[np.ndarray]]:
        """Seed times parallel to ``typed`` (its (type, ids) pairs), from a dict by type or a list
        parallel to the pairs; None without times."""
        if times is None:
            return None
        require_times(self.dataset)
        self.require_times()
        if isinstance(times, Mapping):
            unknown = sorted(set(times) - {t for t, _ in typed})
            if unknown or len(typed) != len(times):
                seeded = ", ".join(t for t, _ in typed)
                raise InputError(f"input_time: give the times of each seeded type once ({seeded})"
                                 + (f"; {', '.join(map(str, unknown))} has no seeds" if unknown else ""))
            times = [times[t] for t, _ in typed]
        if len(times) != len(typed):
            raise InputError(f"input_time: {len(times)} lists of times for {len(typed)} lists of seeds")
        return [_options.seed_times(x, len(ids), f"input_time[{t!r}]") for (t, ids), x in zip(typed, times)]

    def require_times(self) -> None:
        """Refuse sampling at seed times with a sampler whose graph was opened without times."""
        if not self.times:
            raise InputError("input_time: this sampler's graph was opened without the dataset's times (times=False, "
                             "or a plan made without them, as for ignore_time=True); sample without input_time, or "
                             "open a sampler with times")

    @staticmethod
    def _sample(out: Mapping[str, Any], typed: Sequence[Tuple[str, Any]]) -> HeteroSample:
        types = tuple(dict.fromkeys(t for t, _ in typed))
        return HeteroSample(seed_type=types[0], node=out["node"], num_sampled_nodes=out["num_sampled_nodes"],
                            row=out["row"], col=out["col"], num_sampled_edges=out["num_sampled_edges"],
                            edge=out.get("edge"), seed_types=types, seed_time=out.get("time"))

    def __repr__(self) -> str:
        return (f"HeteroNeighborSampler({self.dataset.path!r}, fanouts={self.fanouts}, replace={self.replace}, "
                f"backend={self.backend_choice!r}, seed={self.seed})")


class HeteroLoader(TypedEpochs):
    """Mini-batches of a heterogeneous dataset as ``HeteroData``: seeds of the ``target`` type
    (``seeds``: a split name, ids, or None for all; shuffled by (seed, epoch)), sampled with
    :class:`HeteroNeighborSampler`, each type's feature rows gathered, the target's labels as
    ``y``. The Rust typed loader makes them on ``threads`` threads, ``prefetch`` ahead (default
    2), in order; a batch is the same whatever the threads, cache or ``hyperbatch`` (batches
    sampled together, or ``"auto"``: from the plan and probe batches, :meth:`hyperbatch_size`).

    One plan (``self.plan``, :func:`ringgnn.sampling.plan.plan_hetero` within ``memory``;
    ``plan.text()`` says why) decides which neighbor and feature files are held and the
    hot-row cache across types (``cache``: None as planned, bytes, 0 for none). Given a
    ``sampler``, its plan is taken if it was made with the features. ``features``: another
    loader's readers and cache, shared. Rows read from disk may be staged per hyperbatch
    (``staging_dir``, ``staging_cap``; :meth:`staged_hyperbatches`), as :class:`ringgnn.Loader` does.

    **At a time** (docs/USAGE.md, "Sampling at seed times"): each batch is sampled at its seeds'
    times (``HeteroData[t].seed_time``): ``input_time`` (one per seed, before the shuffle, or
    one for all), by default the target's node times (:func:`seed_times`); ``ignore_time=True``
    samples without times (warned where the dataset has times). ``temporal_strategy``: as
    :class:`HeteroNeighborSampler`.
    """

    def __init__(self, dataset: Union[HeteroDataset, PathLike], fanouts: Any, target: str, *,
                 seeds: Any = "train", batch_size: int = 512, shuffle: bool = True, drop_last: bool = False,
                 replace: bool = False, seed: int = 0, threads: Optional[int] = None, prefetch: Optional[int] = None,
                 backend: str = "auto", feature_backend: str = "auto", direct: bool = False,
                 memory: Union[None, int, str] = None, sampler: Optional[HeteroNeighborSampler] = None,
                 cache: Union[None, int, str] = None, features: Optional[TypedRows] = None,
                 hyperbatch: Union[int, str] = "auto", staging_dir: Optional[PathLike] = None,
                 staging_cap: Union[None, int, str] = None, input_time: Any = None, ignore_time: bool = False,
                 temporal_strategy: str = "uniform"):
        ds = sampler.dataset if sampler is not None else Dataset.opened(dataset)  # homogeneous: the one-type case
        self.target = ds.check_type(target)
        part = ds.node_type(target)
        self.dataset = ds
        self.seeds = self._seeds(part, seeds)
        self.seed_time = seed_times(ds, self.target, self.seeds, input_time, bool(ignore_time), "HeteroLoader")
        """Each seed's time (parallel to ``seeds``), or None: sampled without times."""
        self._cut_options(batch_size, shuffle, drop_last, None)
        self.feature_backend = _options.backend(feature_backend, "feature_backend")
        self.cache = _options.size(cache, "cache")
        memory = _options.size(memory, "memory")
        plan_args = dict(target=self.target, batch_size=self.batch_size, seeds=len(self.seeds),
                         feature_backend=self.feature_backend, cache=self.cache)
        if sampler is None:
            fan = relation_fanouts(ds, fanouts)
            self.plan = plan_hetero(ds, fan, memory=memory, backend=_options.backend(backend),
                                    times=self.seed_time is not None, **plan_args)
            sampler = HeteroNeighborSampler(ds, fan, replace=replace, backend=backend, direct=direct, seed=seed,
                                            memory=memory, plan=self.plan, temporal_strategy=temporal_strategy)
        elif sampler.plan().features or not feature_types(ds):
            self.plan = sampler.plan()  # a run's plan: the sampler's files, the features and the cache
        else:
            self.plan = plan_hetero(ds, sampler.fanouts, memory=memory if memory is not None else sampler.memory,
                                    fixed_relations=sampler.placement(), times=sampler.times, **plan_args)
        if self.seed_time is not None:
            sampler.require_times()
        self.seed = _options.count(seed, "seed")
        self.direct = bool(direct)
        if features is None:
            features = TypedRows(ds.path, self.plan.feature_backends(), self.direct, self.plan.cache)
        elif features.path != ds.path or features.types != feature_types(ds):
            raise InputError(f"features: rows of {features.path} ({features.types}), not of this loader's dataset "
                             f"{ds.path}; share features between loaders of one dataset")
        super().__init__(sampler, features, self.plan, self.target, part.num_classes is not None, threads=threads,
                         prefetch=prefetch, hyperbatch=hyperbatch, staging_dir=staging_dir, staging_cap=staging_cap)

    def _seeds(self, part: Dataset, spec: Any) -> np.ndarray:
        if isinstance(spec, str) and spec != "all" and spec not in part.split_names:
            have = ", ".join(part.split_names) or "none"
            raise InputError(f"seeds '{spec}': node type '{self.target}' has no split '{spec}' (it has: {have})")
        return _options.seeds(part, spec)

    def _order(self, epoch: int) -> np.ndarray:
        """The seeds' positions in epoch ``epoch``'s order (shuffled by (seed, epoch))."""
        n = len(self.seeds)
        return np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)

    def _cut(self, a: np.ndarray) -> List[np.ndarray]:
        """``a`` (in an epoch's order) cut into the epoch's batches (``RowLoader`` cuts its rows)."""
        return [a[i * self.batch_size:(i + 1) * self.batch_size] for i in range(self.epoch_batches())]

    def batch_seeds(self, epoch: int) -> List[np.ndarray]:
        """The seed ids of every batch of epoch ``epoch``, by global index."""
        return self._cut(self.seeds[self._order(epoch)] if self.shuffle else self.seeds)

    def batch_times(self, epoch: int) -> Optional[List[np.ndarray]]:
        """The seed times of every batch of epoch ``epoch`` (parallel to :meth:`batch_seeds`), or
        None when sampled without times."""
        if self.seed_time is None:
            return None
        return self._cut(self.seed_time[self._order(epoch)] if self.shuffle else self.seed_time)

    @property
    def labels(self) -> Optional[np.ndarray]:
        """Labels of the target type (int64, -1 unlabeled), or None; read on first use."""
        return self.dataset.node_type(self.target).labels

    def _times(self, times: Optional[np.ndarray]) -> Optional[List[np.ndarray]]:
        """A batch's seed times as the core takes them (one array for the target's seeds)."""
        return None if times is None else [np.ascontiguousarray(times, dtype=np.int64)]

    def _probe_seeds(self) -> List[Tuple[List[Tuple[str, np.ndarray]], Optional[List[np.ndarray]]]]:
        first = self.batch_seeds(0)[:_core.TypedLoader.PROBE_BATCHES]
        times = self.batch_times(0) or [None] * len(first)
        return [([(self.target, np.ascontiguousarray(ids, dtype=np.int64))], self._times(t))
                for ids, t in zip(first, times)]

    def make_batch(self, ids: np.ndarray, epoch: int, index: int, times: Any = None) -> Any:
        """Batch ``index`` of epoch ``epoch`` with seeds ``ids`` (at ``times``, one per seed, when
        given) as ``HeteroData``, made on the calling thread."""
        ids = _options.node_ids(ids)
        times = None if times is None else _options.seed_times(times, len(ids))
        return self._data(self._make(epoch, [(index, [(self.target, ids)], self._times(times))])[0], ids)

    def _data(self, out: Mapping[str, Any], ids: np.ndarray) -> Any:
        """A core batch (its sample, each type's rows, the labels) as ``HeteroData``."""
        return self._hetero_data(out, [(self.target, ids)], {self.target: ids})

    def __iter__(self) -> Iterator[Any]:
        seeds, times = self.batch_seeds(self.epoch), self.batch_times(self.epoch)
        order = self.epoch_order()
        batches = [(b, [(self.target, seeds[b])], self._times(None if times is None else times[b])) for b in order]
        for out in self._run(self.epoch, batches):
            yield self._data(out, seeds[out["batch"]])

    def __repr__(self) -> str:
        return (f"HeteroLoader({self.dataset.path!r}, target={self.target!r}, {len(self.seeds):,} seeds, "
                f"batch_size={self.batch_size}, fanouts={self.sampler.fanouts})")


__all__: Sequence[str] = ("HeteroNeighborSampler", "HeteroLoader", "HeteroSample", "relation_fanouts")
