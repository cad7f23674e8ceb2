"""The memory plan of heterogeneous sampling and loading: the one owner of what a heterogeneous
loader holds in memory. :func:`plan_hetero` decides, within one budget, per relation whether its
neighbor file is held or read from disk, per node type whether its feature file is held or read
from disk, and the bytes of the hot-row cache across types (``ringgnn.sampling.features``); the
sampler and the feature readers are opened with what it decided (:class:`HeteroPlan`), nothing
below second-guesses it, and :meth:`HeteroPlan.text` says why each choice was made and what the
other choice would cost.

**Room.** The offset indexes are always held. What the budget leaves beside what the process
holds when the plan is made (the runtime, the model) is split in two: half is left to the
batches (samples, gathered rows, the model's activations, the read buffers, and while the cache
is built its 4 bytes per node of hit counts), half is the *room* the plan fills.

**Value of a byte held.** Every candidate is valued by the bytes it saves reading per epoch, per
byte it holds. Per batch, from the fanouts and the average in-degrees, the expected frontier of
each type at each hop (the seeds, then per relation ``frontier(dst) * min(fanout, avg degree)``
new sources, at most the type's count; with no target or batch size, every frontier is the whole
type). A relation read at hop ``k`` costs about a page per frontier node's list, at most its
whole file (a dense frontier reads about the whole file per hop); a type's features a page per
sampled row, at most its whole file; a cached row saves its type's bytes per hit times its hits
(its out-degree in the relations read: ``hetero_features.source_hits``).

**Choice.** Greedy by value per byte: whole files (relations and feature files) in order of
saved bytes per byte held (ties: larger first, then name), merged with the cache's groups of rows
in the cache's own ranking (hits per byte held, across types), taking each that fits the room
left. The cache stays a prefix of its ranking (its first group that does not fit ends it); a
feature file held releases the cached rows of its type. An explicit ``cache`` is taken first (an
error if it does not fit the room), explicit backends decide their files (a held file must fit).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import _options
from .._core import InputError, offset_index_bytes
from ..data.dataset import typed_entries
from ..data.schema import parse_edge_type
from .features import (INDEX_BYTES_PER_ROW, CacheChoice, choose_cache_rows, feature_file_bytes, ranked_groups,
                       row_bytes, source_hits)

#: Bytes a read from disk costs at least: one page.
PAGE = 4096


@dataclass(frozen=True)
class Choice:
    """One file's placement: ``held`` in memory or read from disk; ``bytes`` it holds when held;
    ``saved``: bytes read per epoch it saves when held; ``why``: the reason, in words."""

    name: str
    held: bool
    bytes: int
    saved: float
    why: str


@dataclass(frozen=True)
class HeteroPlan:
    """What a heterogeneous sampler and loader hold (see the module docs). ``relations`` and
    ``features`` per relation and per type with features; ``cache`` the rows of the hot-row
    cache (None: no cache); ``batches``: per epoch (1 when unknown: values are then per batch)."""

    budget: int
    process: int
    index: int
    room: int
    relations: Dict[str, Choice]
    features: Dict[str, Choice]
    cache: Optional[CacheChoice]
    cache_saved: float
    disk_backend: str
    feature_disk_backend: str
    batches: int
    batch_bytes: int = 0
    notes: List[str] = field(default_factory=list)
    tables: Dict[str, Choice] = field(default_factory=dict)
    #: Whether the graph is opened with the dataset's times (held with the neighbor files).
    times: bool = True

    @property
    def file_tables(self) -> List[str]:
        """The featureless types whose embedding table is kept in files."""
        return sorted(t for t, c in self.tables.items() if not c.held)

    @property
    def batch_memory(self) -> int:
        """Bytes left to the batches (``ringgnn_loader::budget::typed`` sizes hyperbatches, rows ahead
        and workers within it): what a probe measured, else half of what the budget leaves beside
        the process, plus the room the held files and the cache leave unused (with every file
        read from disk and no cache, the whole of what is left)."""
        return self.batch_bytes + max(0, self.room - self.held_bytes())

    @property
    def held_relations(self) -> List[str]:
        return sorted(r for r, c in self.relations.items() if c.held)

    def placement(self) -> Tuple[str, List[str]]:
        """(backend of the relations on disk, relations held), as the sampler's core graph
        takes them: ``memory`` when every relation is held."""
        held = self.held_relations
        if held and len(held) == len(self.relations):
            return "memory", []
        return self.disk_backend, held

    def feature_backends(self) -> Dict[str, str]:
        """Per type with features, how its rows are read (``memory``: the file held)."""
        return {t: "memory" if c.held else self.feature_disk_backend for t, c in self.features.items()}

    def held_bytes(self) -> int:
        """Bytes the plan holds in the room: held files and the cache."""
        files = sum(c.bytes for c in list(self.relations.values()) + list(self.features.values())
                    + list(self.tables.values()) if c.held)
        return files + (0 if self.cache is None else self.cache.total)

    def text(self) -> str:
        """The plan in words: each choice, why, and what the other choice would cost."""
        unit = "per epoch" if self.batches > 1 else "per batch"
        lines = [f"memory plan (heterogeneous): budget {_b(self.budget)}, the process holds {_b(self.process)} "
                 "(with what training will add: gradients, optimizer state), "
                 f"offset indexes {_b(self.index)}, the batches {_b(self.batch_bytes)}; room for files and cache "
                 f"{_b(self.room)}, {_b(self.held_bytes())} of it used"]
        for kind, group in (("relation", self.relations), ("features", self.features),
                            ("embedding table", self.tables)):
            for c in group.values():
                where = "in memory" if c.held else "on disk"
                ratio = f"{c.saved / c.bytes:.3g} bytes per byte held" if c.bytes else "nothing to hold"
                if c.held:
                    other = f"on disk it would read about {_b(c.saved)} more {unit} ({ratio})"
                else:
                    other = f"held it would take {_b(c.bytes)} and save about {_b(c.saved)} read {unit} ({ratio})"
                lines.append(f"  {kind} {c.name}: {where}, {c.why}; {other}")
        if self.cache is None:
            lines.append("  hot-row cache: none")
        else:
            rows = ", ".join(f"{t} {n:,} rows" for t, n in self.cache.rows().items() if n) or "no rows"
            lines.append(f"  hot-row cache: {_b(self.cache.total)} ({rows}; rows ranked by hits per byte held across "
                         f"types), saves about {_b(self.cache_saved)} read {unit}")
        lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines)


def _b(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


#: The margin on a probe batch's measured peak: batches differ, and the allocator fragments.
PROBE_MARGIN = 1.5


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as f:
            return int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def probe_batch_bytes(loader: Any, step: Any, in_flight: int) -> int:
    """What the batches take at their peak, measured: one batch made by ``loader`` (read from
    disk; at its seeds' times when it samples at times, as its batches are: a seed's subgraph is
    its own then, so a batch holds more nodes) and ``step(batch)`` run on it (a forward and
    backward pass), the process's peak
    resident memory reset first (``/proc/self/clear_refs``) and read after; the batch's own
    arrays counted once more per batch in flight (``in_flight``: made ahead or held), all times
    :data:`PROBE_MARGIN`. None where the peak cannot be reset (then the plan keeps half)."""
    import gc

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None  # type: ignore[return-value]
    base = _options.process_rss()
    ids, times = loader.batch_seeds(0)[0], loader.batch_times(0)
    batch = loader.make_batch(ids, 0, 0, None if times is None else times[0])
    own = sum(v.numel() * v.element_size() for store in batch.stores for v in store.values()
              if hasattr(v, "numel"))
    step(batch)
    peak = _peak_rss() - base
    del batch
    gc.collect()
    return int(PROBE_MARGIN * (max(peak, own) + in_flight * own))


def training_reserve(net: Any) -> int:
    """Bytes a model's training adds to what it holds once built: a gradient and Adam's two
    moments per parameter (dense: an embedding table's gradient is as large as the table)."""
    return 3 * sum(p.numel() * p.element_size() for p in net.parameters() if p.requires_grad)


def relation_bytes(ds: Any, times: bool = True) -> Tuple[int, Dict[str, int]]:
    """(offset indexes of every relation, bytes per relation held when its neighbor file is: the
    file, and with ``times`` its edge times, 8 bytes an edge, which are held with it)."""
    types, rels = typed_entries(ds.manifest, "node_types"), typed_entries(ds.manifest, "relations")
    index = sum(offset_index_bytes(types[parse_edge_type(r)[2]]["num_nodes"], rels[r]["num_edges"])
                for r in ds.relations)
    width = {"u32": 4, "u64": 8}
    files = {r: i["num_edges"] * (width[i["graph"]["indices_dtype"]] + (8 if times and i.get("edge_times") else 0))
             for r, i in rels.items()}
    return index, files


def expected_reads(ds: Any, fanouts: Mapping[str, List[int]], target: Optional[str] = None,
                   batch_size: Optional[int] = None) -> Tuple[Dict[str, float], Dict[str, float]]:
    """Per batch, (bytes read per relation from disk, rows sampled per type): see the module
    docs. Without ``target``/``batch_size`` every frontier is its whole type (dense)."""
    n = ds.num_nodes_dict
    _, files = relation_bytes(ds)
    hops = len(next(iter(fanouts.values())))
    dense = target is None or batch_size is None
    front: Dict[str, float] = dict(n) if dense else {target: float(min(batch_size, n[target]))}
    rows: Dict[str, float] = {t: front.get(t, 0.0) for t in n}
    reads = dict.fromkeys(fanouts, 0.0)
    for k in range(hops):
        new: Dict[str, float] = {}
        for r in sorted(fanouts):
            s, _, d = parse_edge_type(r)
            f = fanouts[r][k]
            if f == 0 or not front.get(d):
                continue
            deg = ds.num_edges_dict[r] / max(1, n[d])
            reads[r] += min(files[r], front[d] * PAGE)
            new[s] = new.get(s, 0.0) + front[d] * (deg if f < 0 else min(f, deg))
        front = dict(n) if dense else {t: min(float(n[t]), v) for t, v in new.items()}
        for t, v in front.items():
            rows[t] = rows.get(t, 0.0) + v
    return reads, {t: min(float(n[t]), v) for t, v in rows.items()}


def plan_hetero(ds: Any, fanouts: Mapping[str, List[int]], *, target: Optional[str] = None,
                batch_size: Optional[int] = None, seeds: Optional[int] = None, memory: Optional[int] = None,
                backend: str = "auto", feature_backend: Optional[str] = None, cache: Optional[int] = None,
                fixed_relations: Optional[Tuple[str, List[str]]] = None, process: Optional[int] = None,
                reserve: int = 0, batch_bytes: Optional[int] = None,
                tables: Optional[Mapping[str, int]] = None, fixed_tables: Optional[Mapping[str, bool]] = None,
                times: bool = True) -> HeteroPlan:
    """The plan (see the module docs). ``feature_backend`` None: no features (a sampler alone);
    ``cache`` None: as the plan decides, 0: none, else that many bytes; ``seeds``: seeds per
    epoch (with ``batch_size``, the batches an epoch has); ``fixed_relations``: a placement
    already made (a sampler given to a loader: its relations are taken as they are);
    ``process``: what the process holds (default: its anonymous memory now and the library code
    it keeps touching, ``_options.held_memory`` and ``code_bytes``); ``reserve``: what
    it will hold besides the batches that it does not yet (a model's gradients and optimizer
    state: :func:`training_reserve`), counted as held; ``batch_bytes``: what the batches take at
    their peak (:func:`probe_batch_bytes`), default half of what the budget leaves; ``tables``:
    per featureless type the model learns, its embedding table's width (held: the table, its
    gradient and Adam's two moments, 16 bytes per value; in files: a page per sampled row read
    and written per array and step, ``ringgnn.models.tables``); ``fixed_tables``: placements
    already made (a resumed run's: True held); ``times``: whether the graph is opened with the
    dataset's times (False for sampling without times: edge times are not counted)."""
    if process is None:
        process = _options.held_memory() + _options.code_bytes(training=True)
    process = int(process) + int(reserve)
    budget = memory if memory is not None else _options.default_memory(held=process)
    index, rel_files = relation_bytes(ds, times)
    left = max(0, budget - process)
    room = (left // 2 if batch_bytes is None else left - int(batch_bytes)) - index
    notes: List[str] = []
    batches = max(1, -(-int(seeds) // int(batch_size))) if seeds and batch_size else 1
    reads, rows = expected_reads(ds, fanouts, target, batch_size)
    with_features = feature_backend is not None
    ftypes = [t for t, d in ds.feature_dims().items() if d is not None] if with_features else []
    feat_files = {t: feature_file_bytes(ds, t) for t in ftypes}
    feat_reads = {t: min(feat_files[t], rows.get(t, 0.0) * PAGE) for t in ftypes}
    saved_rel = {r: reads[r] * batches for r in rel_files}
    saved_feat = {t: feat_reads[t] * batches for t in ftypes}

    held: Dict[str, bool] = {}
    why: Dict[str, str] = {}
    n_nodes = ds.num_nodes_dict
    table_size = {t: 16 * n_nodes[t] * int(w) for t, w in (tables or {}).items()}
    saved_table = {t: 2 * min(12 * n_nodes[t] * int(w), rows.get(t, 0.0) * 3 * PAGE) * batches
                   for t, w in (tables or {}).items()}
    for t, h in (fixed_tables or {}).items():
        if t in table_size:
            held[f"t:{t}"], why[f"t:{t}"] = bool(h), "as the resumed run placed it"
            if h:
                room -= table_size[t]
    rel_disk = backend if backend not in ("auto", "memory") else "auto"
    feat_disk = "auto"
    if fixed_relations is not None:
        b, kept = fixed_relations
        rel_disk = b if b != "memory" else "auto"
        for r in rel_files:
            held[f"r:{r}"] = b == "memory" or r in kept
            why[f"r:{r}"] = "as the sampler given to the loader placed it"
        room -= sum(rel_files[r] for r in rel_files if held[f"r:{r}"])
    elif backend != "auto":
        for r in rel_files:
            held[f"r:{r}"] = backend == "memory"
            why[f"r:{r}"] = f"backend={backend!r} asked"
        if backend == "memory":
            room -= sum(rel_files.values())
    if with_features and feature_backend != "auto":
        feat_disk = feature_backend if feature_backend != "memory" else "auto"
        for t in ftypes:
            held[f"f:{t}"] = feature_backend == "memory"
            why[f"f:{t}"] = f"feature_backend={feature_backend!r} asked"
        if feature_backend == "memory":
            room -= sum(feat_files.values())
    if room < 0:
        batches_part = (f"the batches {int(batch_bytes):,} at their peak (measured)" if batch_bytes is not None
                        else "the batches half of what is left")
        asked = ((sum(rel_files.values()) if backend == "memory" else 0)
                 + (sum(feat_files.values()) if feature_backend == "memory" else 0))
        raise InputError(f"memory {budget:,} bytes: the process holds {process:,}, {batches_part}, the offset indexes "
                         f"{index:,} and the files asked in memory {asked:,}: more than the budget; give a larger "
                         "--memory (or a smaller --batch-size), or read files from disk (backend auto)")
    if cache is not None and cache > max(0, room):
        raise InputError(f"cache {cache:,} bytes: the memory plan has {max(0, room):,} bytes of room for files and "
                         f"cache (half of what memory={budget:,} leaves beside the process's {process:,} bytes and "
                         f"the offset indexes' {index:,}); give a smaller cache or a larger memory")

    # Candidates still to decide: whole files, in order of value per byte.
    files: List[Tuple[float, int, str]] = []
    for r, b in rel_files.items():
        if f"r:{r}" in held:
            continue
        if saved_rel[r] <= 0:
            held[f"r:{r}"], why[f"r:{r}"] = False, "never read (fanout 0 at every hop it could be read)"
        else:
            files.append((saved_rel[r] / max(1, b), b, f"r:{r}"))
    for t, b in table_size.items():
        if f"t:{t}" in held:
            continue
        if saved_table[t] <= 0:
            held[f"t:{t}"] = b <= room
            why[f"t:{t}"] = "never sampled" + (": held, it costs no reads" if b <= room else ", and does not fit")
            room -= b if b <= room else 0
        else:
            files.append((saved_table[t] / max(1, b), b, f"t:{t}"))
    for t in ftypes:
        if f"f:{t}" in held:
            continue
        if saved_feat[t] <= 0:
            held[f"f:{t}"], why[f"f:{t}"] = False, "never sampled"
        else:
            files.append((saved_feat[t] / max(1, feat_files[t]), feat_files[t], f"f:{t}"))
    files.sort(key=lambda x: (-x[0], -x[1], x[2]))
    disk_types = [t for t in ftypes if not held.get(f"f:{t}", False)]
    total_files = sum(b for _, b, _ in files)

    hits: Dict[str, np.ndarray] = {}
    # Rows are counted only where a cache can matter: some rows read from disk whatever the room.
    kept_on_disk = [t for t in disk_types if f"f:{t}" in held]
    want_cache = bool(with_features and cache != 0 and disk_types
                      and (cache is not None or total_files > room or kept_on_disk))
    if want_cache:
        read = [r for r, f in fanouts.items() if any(f)]
        hits = {t: source_hits(ds, t, read) for t in disk_types}
    rb = row_bytes(ds) if with_features else {}
    per_hit = {t: saved_feat[t] / max(1, int(hits[t].sum(dtype=np.uint64))) for t in hits}
    groups = ranked_groups(hits, rb) if hits else []
    cached: Dict[str, int] = {t: 0 for t in hits}
    if cache is not None:
        room -= cache

    if cache is not None:
        # An explicit cache: its bytes are taken; the files share what is left.
        for _, b, key in files:
            held[key] = b <= room
            why[key] = "fits the room left" if held[key] else f"does not fit the {_b(max(0, room))} left"
            if held[key]:
                room -= b
        types = [t for t in disk_types if not held.get(f"f:{t}", False)]
        choice = choose_cache_rows({t: hits[t] for t in types}, rb, cache) if types and cache else None
    else:
        # Lazy greedy: a feature file's value is re-counted, net of its type's cached rows, when
        # it comes up; the cache's groups come in their own ranking, merged by value per byte.
        heap = [(-ratio, -b, key) for ratio, b, key in files]
        heapq.heapify(heap)
        closed, gi = not groups, 0
        cache_saved_t = dict.fromkeys(hits, 0.0)
        dropped: set = set()

        def group_ratio(g: Tuple[str, int, int]) -> float:
            return per_hit[g[0]] * g[1] / (rb[g[0]] + INDEX_BYTES_PER_ROW)

        while heap or (not closed and gi < len(groups)):
            if not closed and gi < len(groups) and (not heap or group_ratio(groups[gi]) > -heap[0][0]):
                t, v, c = groups[gi]
                gi += 1
                if t in dropped:
                    continue
                cost = rb[t] + INDEX_BYTES_PER_ROW
                take = min(c, max(0, room) // cost)
                cached[t] += take * cost
                cache_saved_t[t] += per_hit[t] * v * take
                room -= take * cost
                closed = take < c  # the cache stays a prefix of its ranking
                continue
            neg, negb, key = heapq.heappop(heap)
            b = -negb
            t = key[2:] if key.startswith("f:") else None
            if t is not None and cached.get(t):
                net_saved, net_bytes = saved_feat[t] - cache_saved_t[t], b - cached[t]
                if net_saved <= 0:
                    held[key], why[key] = False, "its sampled rows are all in the cache"
                    continue
                ratio = net_saved / net_bytes if net_bytes > 0 else float("inf")
                if ratio < -neg * (1 - 1e-9):
                    heapq.heappush(heap, (-ratio, negb, key))
                    continue
            free = room + (cached.get(t, 0) if t else 0)
            held[key] = b <= free
            if not held[key]:
                why[key] = f"does not fit the {_b(max(0, free))} left"
                continue
            room = free - b
            why[key] = "fits the room left"
            if t is not None:
                if cached.get(t):
                    why[key] += f" (worth more than its {_b(cached[t])} of cached rows, released)"
                cached[t] = 0
                dropped.add(t)
        types = [t for t in disk_types if t not in dropped and not held.get(f"f:{t}", False)]
        total = sum(cached.get(t, 0) for t in types)
        choice = choose_cache_rows({t: hits[t] for t in types}, rb, total) if types and total else None
    cache_saved = 0.0
    if choice is not None:
        for t, ids in choice.ids.items():
            cache_saved += per_hit[t] * float(hits[t][ids].sum(dtype=np.uint64))
        if choice.total == 0:
            choice = None
    if want_cache and choice is None:
        notes.append("no cache: every byte of room went to files worth more per byte")
    relations = {r: Choice(r, held[f"r:{r}"], rel_files[r], saved_rel[r], why[f"r:{r}"]) for r in sorted(rel_files)}
    features = {t: Choice(t, held[f"f:{t}"], feat_files[t], saved_feat[t], why[f"f:{t}"]) for t in ftypes}
    table_choices = {t: Choice(t, held[f"t:{t}"], table_size[t], saved_table[t], why[f"t:{t}"]) for t in table_size}
    return HeteroPlan(budget=int(budget), process=process, index=index,
                      room=(left // 2 if batch_bytes is None else left - int(batch_bytes)) - index,
                      batch_bytes=left // 2 if batch_bytes is None else int(batch_bytes), relations=relations,
                      features=features,
                      cache=choice, cache_saved=cache_saved, disk_backend=rel_disk, feature_disk_backend=feat_disk,
                      batches=batches, notes=notes, tables=table_choices, times=times)


__all__ = ("Choice", "HeteroPlan", "PAGE", "expected_reads", "plan_hetero", "probe_batch_bytes", "relation_bytes",
           "training_reserve")
