"""The memory plan of typed sampling and loading: :func:`plan_hetero` decides within one budget
which neighbor files, feature files and embedding tables are held and the rows of the hot-row
cache (:class:`HeteroPlan`; the decision is Rust's, ``crates/ringgnn-loader/src/budget/files.rs``);
this module gathers its inputs from the dataset and says why (:meth:`HeteroPlan.text`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import _core, _options
from .._core import offset_index_bytes
from .._files import os_errors
from .._format import human_bytes as _b
from ..data.dataset import typed_entries
from ..data.schema import parse_edge_type
from .features import CacheChoice, neighbor_file, row_bytes


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
    """What a typed sampler and loader hold: ``relations`` and ``features`` per relation and per
    type with features; ``cache`` the hot-row cache's rows (None: none); ``batches``: per epoch
    (1 when unknown: values are then per batch)."""

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
        """Bytes left to the batches: what a probe measured (else half of what the budget leaves
        beside the process), plus the room the held files and the cache leave unused."""
        return self.batch_bytes + max(0, self.room - self.held_bytes())

    @property
    def held_relations(self) -> List[str]:
        return sorted(r for r, c in self.relations.items() if c.held)

    def placement(self) -> Tuple[str, List[str]]:
        """(backend of the relations on disk, relations held); ``memory`` when all are held."""
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
        lines = [f"memory plan by relation and node type: budget {_b(self.budget)}, the process holds "
                 f"{_b(self.process)} (with what training will add: gradients, optimizer state), "
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


#: The margin on a probe batch's measured peak: batches differ, and the allocator fragments.
PROBE_MARGIN = 1.5


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as f:
            return int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def probe_batch_bytes(loader: Any, step: Any, in_flight: int) -> int:
    """What the batches take at their peak, measured: the process's peak resident memory (reset
    first, ``/proc/self/clear_refs``) over one batch made by ``loader`` (at its seeds' times where
    it samples at times) and ``step(batch)`` run on it, plus the batch's own arrays once per
    batch in flight (``in_flight``), all times :data:`PROBE_MARGIN`. None where the peak cannot
    be reset (then the plan keeps half)."""
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


def _relations(ds: Any, fanouts: Mapping[str, List[int]], times: bool = True) -> List[Tuple[Any, ...]]:
    """Per relation of ``fanouts``, what the Rust plan takes: (name, source and destination types,
    edges, bytes held, bytes read, fanouts, its neighbor file (path, bytes an entry) or None)."""
    _, held = relation_bytes(ds, times)
    _, read = relation_bytes(ds)
    rels = typed_entries(ds.manifest, "relations")
    out = []
    for r in fanouts:
        s, _, d = parse_edge_type(r)
        out.append((r, s, d, int(rels[r]["num_edges"]), held[r], read[r], [int(f) for f in fanouts[r]],
                    neighbor_file(ds, r)))
    return out


def expected_reads(ds: Any, fanouts: Mapping[str, List[int]], target: Optional[str] = None,
                   batch_size: Optional[int] = None) -> Tuple[Dict[str, float], Dict[str, float]]:
    """Per batch, (bytes read per relation from disk, rows sampled per type): see the Rust plan's
    docs. Without ``target``/``batch_size`` every frontier is its whole type (dense)."""
    reads, rows = _core.expected_reads(list(ds.num_nodes_dict.items()), _relations(ds, fanouts), target, batch_size)
    return dict(reads), dict(rows)


def plan_hetero(ds: Any, fanouts: Mapping[str, List[int]], *, target: Optional[str] = None,
                batch_size: Optional[int] = None, seeds: Optional[int] = None, memory: Optional[int] = None,
                backend: str = "auto", feature_backend: Optional[str] = None, cache: Optional[int] = None,
                fixed_relations: Optional[Tuple[str, List[str]]] = None, process: Optional[int] = None,
                reserve: int = 0, batch_bytes: Optional[int] = None,
                tables: Optional[Mapping[str, int]] = None, fixed_tables: Optional[Mapping[str, bool]] = None,
                times: bool = True) -> HeteroPlan:
    """The plan (see the module docs). ``feature_backend`` None: no features (a sampler alone);
    ``cache`` None: as the plan decides, 0: none, else that many bytes; ``seeds``: seeds per
    epoch; ``fixed_relations``: a placement already made (a sampler given to a loader);
    ``process``: what the process holds (default: ``_options.held_memory`` and ``code_bytes``);
    ``reserve``: what it will hold besides the batches but does not yet
    (:func:`training_reserve`); ``batch_bytes``: what the batches take at their peak
    (:func:`probe_batch_bytes`), default half of what the budget leaves; ``tables``: per
    featureless type the model learns, its embedding table's width; ``fixed_tables``:
    placements already made (True: held); ``times``: whether edge times are held with the
    neighbor files."""
    if process is None:
        process = _options.held_memory() + _options.code_bytes(training=True)
    process = int(process) + int(reserve)
    budget = memory if memory is not None else _options.default_memory(held=process)
    index, rel_files = relation_bytes(ds, times)
    features = None
    if feature_backend is not None:
        rb = row_bytes(ds)
        features = (feature_backend, [(t, int(ds.node_type(t).manifest["files"]["features"]["bytes"]), rb[t])
                                      for t, d in ds.feature_dims().items() if d is not None])
    with os_errors("counting the sources of the relations read"):
        p = _core.plan_files(
            budget=int(budget), process=process, index=index,
            batch_bytes=None if batch_bytes is None else int(batch_bytes),
            nodes=list(ds.num_nodes_dict.items()), relations=_relations(ds, {r: fanouts[r] for r in rel_files}, times),
            target=target, batch_size=None if batch_size is None else int(batch_size),
            seeds=None if seeds is None else int(seeds), backend=backend, features=features,
            cache=None if cache is None else int(cache), fixed_relations=fixed_relations,
            tables=[(t, int(w)) for t, w in (tables or {}).items()],
            fixed_tables=[(t, bool(h)) for t, h in (fixed_tables or {}).items()])

    def choices(group: List[Tuple[str, bool, int, float, str]]) -> Dict[str, Choice]:
        return {c[0]: Choice(*c) for c in group}

    return HeteroPlan(budget=int(budget), process=process, index=index, room=p["room"], batch_bytes=p["batch_bytes"],
                      relations=choices(p["relations"]), features=choices(p["features"]),
                      cache=None if p["cache"] is None else CacheChoice(*p["cache"]), cache_saved=p["cache_saved"],
                      disk_backend=p["disk_backend"], feature_disk_backend=p["feature_disk_backend"],
                      batches=p["batches"], notes=p["notes"], tables=choices(p["tables"]), times=times)


__all__ = ("Choice", "HeteroPlan", "expected_reads", "plan_hetero", "probe_batch_bytes", "relation_bytes",
           "training_reserve")
