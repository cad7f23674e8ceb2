"""Task tables (``--task-table``): rows of (node id, time, label) as a node run's splits; reading
them (:func:`read_task_tables`), what ``--resume`` checks, the loader of a split's rows."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import _core, _options
from .._core import InputError
from ..importers._arrow import Table, to_np
from ..sampling.hetero import HeteroLoader
from .temporal import seed_times

MAX_LABEL = (1 << 31) - 1


class Rows:
    """One split's rows: ``node``, ``time`` (or None) and ``label``; ``file``, what a run records."""

    def __init__(self, node: np.ndarray, time: Optional[np.ndarray], label: np.ndarray, file: Dict[str, Any]):
        self.node, self.time, self.label, self.file = node, time, label, file

    def __len__(self) -> int:
        return len(self.node)


class TaskTables:
    """The rows of each split, their ``columns`` and ``classes`` (the largest label plus one)."""

    def __init__(self, splits: Dict[str, Rows], columns: Dict[str, Optional[str]]):
        self.splits, self.columns = splits, columns
        self.classes = 1 + max(int(r.label.max()) for r in splits.values())

    @property
    def timed(self) -> bool:
        return self.columns["time"] is not None

    @property
    def eval_splits(self) -> Tuple[str, ...]:
        return tuple(s for s in ("val", "test") if s in self.splits)

    def record(self) -> Dict[str, Any]:
        """What a run's ``args`` (``metrics.json``, checkpoints) hold of the tables."""
        return dict(columns=dict(self.columns), classes=self.classes,
                    **{s: dict(r.file) for s, r in self.splits.items()})

    def text(self) -> str:
        rows = ", ".join(f"{s} {len(r):,}" for s, r in self.splits.items())
        how = "at its time" if self.timed else "without times"
        return f"task table: rows {rows}, {self.classes} classes; each row's node is a seed sampled {how}"

    def loader(self, ds: Any, fanouts: Any, target: str, split: str, **opts: Any) -> "RowLoader":
        return RowLoader(ds, fanouts, target, self.splits[split], **opts)


def at_times(ds: Any, ignore_time: bool) -> bool:
    """Whether the rows are sampled at their times: on a dataset with times, unless ``ignore_time``."""
    if ignore_time:
        seed_times(ds, "", "node", None, True)  # its warning
        return False
    return bool(ds.has_times)


def read_task_tables(ds: Any, target: str, spec: Any, node: str = "node", time: str = "time", label: str = "label",
                     ignore_time: bool = False) -> TaskTables:
    """The task tables ``spec`` of node type ``target``, columns ``node``, ``time``, ``label`` checked."""
    paths = _options.task_tables(spec)
    timed = at_times(ds, ignore_time)
    n = ds.node_type(target).num_nodes
    tables = {s: _Reader(p, node, time if timed else None, label) for s, p in paths.items()}
    if not timed and not ignore_time:  # a dataset without times
        for r in tables.values():
            if time in r.t.schema.names:
                raise InputError(f"{r.t.path}: column '{time}' (--task-time-column) gives each row a time, but "
                                 f"{ds.path} has no edge or node times to sample at; build it with --edge-time (and "
                                 "--node-time), or give --ignore-time to use the rows without their times")
    units = [(r.unit, r.t.path) for r in tables.values() if r.unit]
    for unit, path in units[1:]:
        if unit != units[0][0]:
            raise InputError(f"{units[0][1]}: column '{time}' holds times in {units[0][0]} and {path}'s in {unit}; "
                             "give the tables one unit (the dataset's)")
    return TaskTables({s: r.read(n, target) for s, r in tables.items()},
                      dict(node=node, time=time if timed else None, label=label))


class _Reader:
    """One task table, its columns checked before anything is read."""

    def __init__(self, path: Any, node: str, time: Optional[str], label: str):
        self.t = Table(os.fspath(path))
        self.node, self.time, self.label = node, time, label
        self.node_kind = self._integers(node, "--task-node-column", "node ids (the dataset's ids of the target type)")
        self._integers(label, "--task-label-column", "labels (class ids 0, 1, ...)")
        self.unit = None if time is None else self.t.time_unit(time, "--task-time-column")

    def _integers(self, name: str, option: str, what: str) -> str:
        """'int' or 'uint' for integer column ``name``; refused otherwise."""
        import pyarrow as pa  # here: a run without task tables needs no pyarrow (an extra)

        typ = self.t.value_type(name, option)
        if pa.types.is_integer(typ):
            return "uint" if pa.types.is_unsigned_integer(typ) else "int"
        where = self.t.first_float(name) if pa.types.is_floating(typ) else ""
        raise InputError(f"{self.t.path}: column '{name}' ({option}) holds {typ}{where}; {what} must be integers")

    def read(self, n: int, target: str) -> Rows:
        """The rows, their nodes in ``0 .. n-1`` (node type ``target``), labels >= 0."""
        t = self.t
        size, crc = _core.file_crc32c(t.path)
        cols = [self.node, self.label] + ([self.time] if self.time is not None else [])
        names = ("node", "label", "time")[:len(cols)]
        # Parquet knows its rows: filled in place (a CSV's batches are joined at the end).
        full = None if t.rows is None else {k: np.empty(t.rows, np.int32 if k == "label" else np.int64) for k in names}
        parts: Dict[str, List[np.ndarray]] = {k: [] for k in names}
        row0 = 0
        for b in t.batches(cols):
            ids = t.ids(b.column(0), self.node_kind, self.node, "--task-node-column", row0)
            bad = ids >= np.uint64(n) if self.node_kind == "uint" else (ids < 0) | (ids >= n)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"{t.path}: column '{self.node}' (--task-node-column): {t.place(row0 + i)} is node "
                                 f"{ids[i]}, out of range: node type '{target}' has {n:,} nodes (ids 0 to {n - 1})")
            got = dict(node=ids, label=self._labels(b.column(1), row0))
            if self.time is not None:
                got["time"] = t.times(b.column(2), self.time, "--task-time-column", row0)
            for k, a in got.items():
                if full is None:
                    parts[k].append(a.astype(np.int32 if k == "label" else np.int64, copy=False))
                else:
                    full[k][row0:row0 + len(a)] = a
            row0 += len(b)
        if not row0:
            raise InputError(f"{t.path}: the table has no rows; a task table needs at least one")
        file = dict(path=os.path.abspath(t.path), rows=row0, bytes=int(size), crc32c=crc)
        arrays = full if full is not None else {k: np.concatenate(v) for k, v in parts.items()}
        return Rows(arrays["node"], arrays.get("time"), arrays["label"], file)

    def _labels(self, col: Any, row0: int) -> np.ndarray:
        import pyarrow as pa  # here: a run without task tables needs no pyarrow (an extra)

        t, name = self.t, self.label
        if col.null_count:
            i = int(np.flatnonzero(to_np(col.is_null()))[0])
            raise InputError(f"{t.path}: column '{name}' (--task-label-column): {t.place(row0 + i)} has no label "
                             "(null); every row needs its class")
        v = to_np(col.cast(pa.uint64() if pa.types.is_unsigned_integer(col.type) else pa.int64()))
        bad = v > MAX_LABEL
        if v.dtype.kind == "i":
            bad |= v < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{t.path}: column '{name}' (--task-label-column): {t.place(row0 + i)} is label {v[i]}; "
                             f"labels are class ids 0, 1, ... (at most {MAX_LABEL})")
        return v.astype(np.int32)


def check_resumed(was: Optional[Mapping[str, Any]], now: Optional[Mapping[str, Any]], path: str) -> None:
    """Refuse to resume checkpoint ``path``, trained on task tables ``was`` (None: none), on other
    tables ``now`` (content, columns, splits; a table moved elsewhere is the same)."""
    def content(r: Mapping[str, Any]) -> Dict[str, Any]:
        return {k: {f: x for f, x in v.items() if f != "path"} if k in _options.TASK_TABLE_SPLITS else v
                for k, v in r.items()}

    if was is None or now is None:
        if was is not None or now is not None:
            raise InputError(f"--resume: {path} was trained {'without' if was is None else 'on'} task tables; resume "
                             f"it {'without' if was is None else 'with the same'} --task-table, or use another --out")
        return
    a, b = content(was), content(now)
    changed = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    if changed:
        what = ", ".join(f"{k} ({(now.get(k) or was[k])['path']})" if k in _options.TASK_TABLE_SPLITS else k
                         for k in changed)
        raise InputError(f"--resume: {path} was trained on other task tables (they differ in {what}); resume with "
                         "the tables and columns it was trained on, or use another --out")


class RowLoader(HeteroLoader):
    """:class:`ringgnn.HeteroLoader` seeded by a split's :class:`Rows`. Each batch's target type
    carries ``row`` (its rows' positions), ``y`` (one label per row) and ``row_seed`` (each row's
    seed among the batch's ``batch_size``: rows of one node at one time share one)."""

    def __init__(self, ds: Any, fanouts: Any, target: str, rows: Rows, **opts: Any):
        times = dict(ignore_time=True) if rows.time is None else dict(input_time=rows.time)
        super().__init__(ds, fanouts, target, seeds=rows.node, **times, **opts)
        self.rows = rows
        self._cuts: Optional[Tuple[int, List[np.ndarray]]] = None  # (epoch, the rows of each of its batches)

    def _data(self, out: Mapping[str, Any], ids: np.ndarray) -> Any:
        import torch  # not at import: the CLI's parser must not import it

        data = super()._data(out, ids)
        if self._cuts is None or self._cuts[0] != self.epoch:
            self._cuts = (self.epoch, self._cut(self._order(self.epoch)))
        at = self._cuts[1][out["batch"]]
        s = data[self.target]
        bs = s.batch_size
        times = (s.seed_time[:bs].numpy(), self.rows.time[at]) if "seed_time" in s else None
        s.row = torch.from_numpy(at)
        s.y = torch.from_numpy(self.rows.label[at].astype(np.int64))
        s.row_seed = torch.from_numpy(seed_of_row(s.n_id[:bs].numpy(), self.rows.node[at], times))
        return data


def seed_of_row(seeds: np.ndarray, nodes: np.ndarray, times: Optional[tuple] = None) -> np.ndarray:
    """Each row's position among a batch's ``seeds``, by node (and ``times``: (seeds', rows'))."""
    if times is None:
        keys, want = seeds, nodes
    else:
        keys, want = (np.empty(len(a), dtype=[("n", "<i8"), ("t", "<i8")]) for a in (seeds, nodes))
        keys["n"], keys["t"], want["n"], want["t"] = seeds, times[0], nodes, times[1]
    order = np.argsort(keys, kind="stable")
    at = order[np.minimum(np.searchsorted(keys[order], want), len(keys) - 1)]
    if len(keys) == 0 or (keys[at] != want).any():
        raise RuntimeError("a row's node (at its time) is not among its batch's seeds")
    return at.astype(np.int64)
