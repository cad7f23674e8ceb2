"""Every option a user gives ringgnn, parsed once where it enters: the Python API calls these
functions and the command line uses them as argparse types (:func:`arg`)."""

from __future__ import annotations

import argparse
import math
import operator
import os
import re
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._core import InputError, RingGnnError
from ._files import os_errors

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}

BACKENDS: Tuple[str, ...] = tuple(_core.BACKENDS)
CACHE_POLICIES: Tuple[str, ...] = tuple(_core.CACHE_POLICIES)

SplitArg = Union[List[Tuple[str, float]], List[Tuple[str, str]]]


def parse_size(text: str) -> int:
    """Bytes from '1073741824', '512M', '1G', '64k' (suffixes are powers of 1024)."""
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"'{text}' is not a size; use bytes or a number with K, M, G or T (e.g. 512M)")
    return int(m.group(1)) << _UNITS[m.group(2).upper()]


def size(value: Union[None, int, str], what: str) -> Optional[int]:
    """A byte count from an int or a size string ('4G'); None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_size(value)
    n = _integer(value, what)
    if n < 0:
        raise InputError(f"{what} must be >= 0 bytes, not {value}")
    return n


def process_rss() -> int:
    """Resident memory of this process in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: Library code pages a running command keeps touching, which plans leave room for besides the
#: anonymous memory (:func:`held_memory`). Measured (``/proc/self/smaps`` after ``clear_refs``):
#: 60 MB in a layer of inference with PyTorch; 7.3 MiB without it (twice that here); 245 MiB in a
#: heterogeneous training epoch.
CODE_BYTES = 64 << 20
CODE_BYTES_NO_TORCH = 16 << 20
CODE_BYTES_TRAINING = 256 << 20


def held_memory() -> int:
    """The anonymous memory this process holds (``RssAnon``; else the resident size), what a plan
    takes off a budget as held. Not the resident size: its library pages (350 MB with PyTorch)
    can be reclaimed; plans leave :func:`code_bytes` for them."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return process_rss()


def code_bytes(training: bool = False) -> int:
    """The room a plan leaves for library code: :data:`CODE_BYTES` (or ``_TRAINING``) once PyTorch
    is imported, :data:`CODE_BYTES_NO_TORCH` before."""
    if "torch" not in sys.modules:
        return CODE_BYTES_NO_TORCH
    return CODE_BYTES_TRAINING if training else CODE_BYTES


def default_memory(cap: Optional[int] = None, held: Optional[int] = None) -> int:
    """A command's default memory budget: what the process holds (``held``, default its resident
    memory) plus the core's share (half of ``MemAvailable``, or less under a memory cgroup), the
    growth at most ``cap`` bytes."""
    held = process_rss() if held is None else held
    share = _core.default_budget()
    if share is None:
        share = cap if cap is not None else 1 << 30
    return held + (share if cap is None else min(cap, share))


def check_default(budget: int, least: int, held: int = 0) -> None:
    """Refuse a default ``budget`` below the ``least`` a command needs when a memory cgroup bounds
    it, with the core's message naming the cgroup's limit (not a ``--memory`` never given)."""
    why = _core.default_refusal(int(budget), int(least), int(held))
    if why is not None:
        raise InputError(why)


def reserve(value: Union[None, int, str]) -> int:
    """The bytes of a budget left to the caller: ``value``, or what this process uses now."""
    n = size(value, "reserve")
    return process_rss() if n is None else n


#: The largest count any option takes (the core's are 64-bit unsigned).
MAX_COUNT = (1 << 64) - 1


def count(value: Any, what: str, minimum: int = 0) -> int:
    """An integer of at least ``minimum`` and at most :data:`MAX_COUNT`."""
    n = _integer(value, what)
    if n < minimum:
        need = "at least 1" if minimum == 1 else f">= {minimum}"
        raise InputError(f"{what} must be {need}, not {value}")
    if n > MAX_COUNT:
        raise InputError(f"{what} must be at most 2^64 - 1 ({MAX_COUNT}), not {value}")
    return n


def real(value: Any, what: str, low: float = -math.inf, high: float = math.inf, *, above: bool = False,
         below: bool = False) -> float:
    """A finite number in ``[low, high]`` (``above``/``below``: open at that end); NaN and
    infinities are refused here, not far from the option."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{what} must be a number, not {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(x) or not (low < x if above else low <= x) or \
            not (x < high if below else x <= high):
        if math.isinf(high):
            rule = f"a finite number {'>' if above else '>='} {low:g}"
        else:
            rule = f"in {'(' if above else '['}{low:g}, {high:g}{')' if below else ']'}"
        raise InputError(f"{what} must be {rule}, not {value!r}")
    return x


def optional_count(value: Any, what: str, minimum: int = 1) -> Optional[int]:
    """:func:`count`, with None meaning "the default"."""
    return None if value is None else count(value, what, minimum)


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what} must be an integer, not {value!r}")
    try:
        return int(operator.index(value))
    except TypeError:
        raise InputError(f"{what} must be an integer, not {value!r}") from None


def fanouts(value: Union[str, Sequence[int]]) -> List[int]:
    """Neighbors per hop from "20,15,10" or [20, 15, 10]: each a positive count or -1 (all)."""
    if isinstance(value, bytes) or not isinstance(value, (str, Sequence, np.ndarray)):
        raise InputError(f"fanouts must be a list of integers such as [20, 15, 10], not {value!r}")
    if not isinstance(value, str):
        value = [_integer(f, f"fanout {f!r}") for f in value]
    return list(_core.parse_fanouts(value))


def hyperbatch(value: Union[int, str]) -> str:
    """Batches sampled together, "auto" or a count, as the text the core parses."""
    if isinstance(value, str):
        return value.strip()
    return str(_integer(value, "hyperbatch"))


def hyperbatch_size(value: Union[None, int, str]) -> Optional[int]:
    """Batches sampled together as the typed loader takes them: None for "auto" (or None), else
    a count of at least 1."""
    if value is None:
        return None
    text = hyperbatch(value)
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(f'hyperbatch {value!r} is not valid: use "auto" or a number of batches of at least 1')
    return n


HIDDEN_DTYPES: Tuple[str, ...] = ("bf16", "f16", "f32")


def hidden_dtype(value: Optional[str]) -> str:
    """``--hidden-dtype``: bf16 (the default, None), f16 or f32."""
    return "bf16" if value is None else choice(value, HIDDEN_DTYPES, "--hidden-dtype")


def inference_device(value: Optional[str]) -> str:
    """``--device``: cpu (the default, None) or cuda (refused where PyTorch sees no CUDA device)."""
    d = "cpu" if value is None else choice(value, ("cpu", "cuda"), "--device")
    if d == "cuda":
        require_cuda()
    return d


def require_cuda() -> None:
    """Refuse ``--device cuda`` where PyTorch sees no CUDA device (training, inference, ranks)."""
    import torch

    if not torch.cuda.is_available():
        raise InputError("--device cuda: PyTorch sees no CUDA device here; use --device cpu")


def choice(value: Any, names: Sequence[str], what: str) -> str:
    """``value`` if it is one of ``names``."""
    if value not in names:
        raise InputError(f"{what} '{value}' is unknown; use one of {', '.join(names)}")
    return str(value)


def backend(value: Any, what: str = "backend") -> str:
    """How a file is read: one of :data:`BACKENDS`."""
    return choice(value, BACKENDS, what)


def cache_policy(value: Any) -> str:
    """How the hot-row cache picks rows: one of :data:`CACHE_POLICIES`."""
    return choice(value, CACHE_POLICIES, "cache_policy")


def seeds(dataset: Any, spec: Any, what: str = "seeds") -> np.ndarray:
    """Seed node ids as a 1-D int64 array: None or "all", a split name, a ``.npy`` file of ids, or
    an array (numpy, torch, list); ranges are checked by the core."""
    if spec is None or (isinstance(spec, str) and spec == "all"):
        return np.arange(dataset.num_nodes, dtype=np.int64)
    if isinstance(spec, (str, os.PathLike)):
        spec = os.fspath(spec)
        if spec.endswith(".npy") or os.sep in spec or (os.path.exists(spec) and spec not in dataset.split_names):
            try:
                ids = np.load(spec, allow_pickle=False)
            except ValueError as e:  # a missing file stays FileNotFoundError
                raise InputError(f"{what} {spec}: not a .npy array of node ids ({e})") from None
            return node_ids(ids, f"{what} {spec}")
        if spec not in dataset.split_names:
            have = ", ".join(dataset.split_names) or "no splits"
            raise InputError(f"{what} '{spec}': the dataset has no split '{spec}' (it has: {have}); or use all or "
                             "FILE.npy")
        return np.ascontiguousarray(dataset.split(spec), dtype=np.int64)
    return node_ids(spec, what)


def node_ids(value: Any, what: str = "seeds") -> np.ndarray:
    """An array of node ids (numpy, torch, list) as a contiguous 1-D int64 array."""
    a = _array(value)
    if a.ndim != 1:
        raise InputError(f"{what} must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{what} must be integer node ids, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


def _array(value: Any) -> np.ndarray:
    return np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)


def stored_split(dataset: Any, edges: Any) -> Optional[str]:
    """The name of ``dataset``'s edge split that ``edges`` names, or None (a file, an array)."""
    if not isinstance(edges, (str, os.PathLike)):
        return None
    spec = os.fspath(edges)
    return spec if spec in dataset.edge_split_names else None


def edge_pairs(dataset: Any, edges: Any, what: str = "edges", counts: Optional[Tuple[int, int]] = None,
               types: Optional[Tuple[str, str]] = None) -> np.ndarray:
    """Pairs as a (2, n) int64 array from an edge split's name, a ``.npy`` or an array of shape
    (2, n) or (n, 2) ((2, 2) is read as (2, n)), every id checked. ``dataset``: a dataset or a
    relation; ``counts``/``types``: each end's nodes and type; ``what`` names the option."""
    if isinstance(edges, (str, os.PathLike)):
        spec = os.fspath(edges)
        if spec in dataset.edge_split_names:
            return dataset.edge_split(spec)
        if not spec.endswith(".npy"):
            part = getattr(dataset, "part", None) or ""
            place = f"relation {part[len('relation/'):]} of {dataset.path}" if part.startswith("relation/") else \
                dataset.path
            have = ", ".join(dataset.edge_split_names) or "none: convert with --link-split"
            raise InputError(f"{what} '{spec}': not an edge split of {place} (it has: {have}) nor a .npy file")
        with os_errors("reading the pairs", spec):
            try:
                edges = np.load(spec, allow_pickle=False)
            except ValueError as e:
                raise InputError(f"{what} {spec}: not a .npy array of pairs ({e})") from None
        what = f"{what} {spec}"
    a = _array(edges)
    if a.ndim != 2 or 2 not in a.shape:
        raise InputError(f"{what}: pairs need shape (2, n) or (n, 2), got {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{what}: node ids must be integers, got {a.dtype}")
    a = np.ascontiguousarray(a if a.shape[0] == 2 else a.T, dtype=np.int64)
    for k, (row, n) in enumerate(zip(a, counts or (dataset.num_nodes,) * 2)):
        bad = np.flatnonzero((row < 0) | (row >= n))
        if bad.size:
            i, end = int(bad[0]), ("source", "destination")[k]
            whose = "the dataset" if types is None else f"node type '{types[k]}'"
            raise InputError(f"{what}: node {row[i]} is not a node of {dataset.path}: pair {i} has {end} {row[i]}, "
                             f"but {whose} has {n:,} nodes")
    return a


def time(value: Any, what: str = "--at") -> int:
    """One time (int64, in the unit of the dataset's times) from an integer or its text."""
    try:
        return _as_time(value)
    except ValueError:
        raise InputError(f"{what} '{value}' is not an integer") from None
    except TypeError:
        raise InputError(f"{what} must be an integer, not {value!r}") from None
    except OverflowError as e:
        raise InputError(f"{what} {e.args[0]}: times are 64-bit signed integers") from None


def _as_time(value: Any, digits: bool = False) -> int:
    """``value`` as an int64 from an integer or its text (``digits``: only ``[+-]DIGITS``); raises
    ValueError, TypeError or OverflowError (``args[0]``: the integer), which callers word."""
    if isinstance(value, str):
        if digits and not re.fullmatch(r"[+-]?\d+", value):
            raise ValueError(value)
        t = int(value)
    elif isinstance(value, bool):
        raise TypeError(value)
    else:
        t = operator.index(value)
    if not -(1 << 63) <= t < 1 << 63:
        raise OverflowError(t)
    return t


def seed_times(value: Any, n: int, what: str = "input_time") -> np.ndarray:
    """Seed times for ``n`` seeds (an array, or one integer for all) as a 1-D int64 array."""
    a = _array(value)
    if a.ndim > 1:
        raise InputError(f"{what} must be one integer time per seed (a 1-D array) or one integer, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if isinstance(value, (list, tuple)) and all(type(x) is int for x in value):  # some past int64
            i = next(i for i, x in enumerate(value) if not -(1 << 63) <= x < 1 << 63)
            raise InputError(f"{what}[{i}] = {value[i]}: outside the times int64 holds (-2^63 to 2^63 - 1)")
        raise InputError(f"{what} must be integer times (the unit of the dataset's times), got dtype {a.dtype}")
    # uint64 past int64: refused, not wrapped.
    if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
        i = int(np.argmax(a.reshape(-1)))
        raise InputError(f"{what}{'' if a.ndim == 0 else f'[{i}]'} = {a.reshape(-1)[i]}: outside the times int64 "
                         "holds (-2^63 to 2^63 - 1)")
    if a.ndim == 0:
        return np.full(n, int(a), dtype=np.int64)
    if len(a) != n:
        raise InputError(f"{what} has {len(a)} times for {n} seeds; give one time per seed")
    return np.ascontiguousarray(a, dtype=np.int64)


def parse_split(spec: Union[str, Mapping[str, Union[float, str, os.PathLike]]]) -> SplitArg:
    """[(name, fraction), ...] or [(name, path), ...] from "train=0.5,val=0.1,test=0.4",
    "train=a.npy,val=b.npy", or a dict of either."""
    if isinstance(spec, str):
        items = _name_values(spec, lambda part: f"split '{spec}': '{part}' is not NAME=VALUE; use e.g. "
                                                "train=0.5,val=0.1,test=0.4 or train=train.npy,val=val.npy")
    else:
        items = [(str(k), v) for k, v in dict(spec).items()]
    if not items:
        raise InputError(f"split '{spec}' names no split; use e.g. train=0.5,val=0.1,test=0.4")
    names = [n for n, _ in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"split '{spec}' names {', '.join(dup)} more than once")

    fractions = [_as_fraction(v) for _, v in items]
    if all(f is not None for f in fractions):
        return [(n, float(f)) for (n, _), f in zip(items, fractions)]
    if any(f is not None for f in fractions):
        raise InputError(f"split '{spec}' mixes fractions and files; give all fractions or all .npy files")
    return [(n, os.fspath(v)) for n, v in items]


def parse_link_split(spec: Union[str, Mapping[str, Union[float, str, os.PathLike]]]) -> SplitArg:
    """``--link-split``: held-out fractions ("val=0.05,test=0.1") or edge lists
    ("val=val.npy,test=test.npy"), or a dict; checked by the core."""
    try:
        return parse_split(spec)
    except InputError as e:
        raise InputError(f"--link-split: {e}") from None


TASK_TABLE_SPLITS = ("train", "val", "test")


def task_tables(spec: Union[str, Mapping[str, Union[str, os.PathLike]]]) -> Dict[str, str]:
    """``--task-table``: "train=T1.parquet,val=T2.parquet,test=T3.csv" or a dict; train and val needed."""
    hint = "give SPLIT=FILE pairs, e.g. train=train.parquet,val=val.parquet,test=test.parquet"
    try:
        items = parse_split(spec)
    except InputError:
        raise InputError(f"--task-table {spec}: {hint}") from None
    paths = {n: v for n, v in items if isinstance(v, str)}
    if len(paths) != len(items):
        raise InputError(f"--task-table {spec}: {hint} (files, not fractions)")
    unknown = [n for n in paths if n not in TASK_TABLE_SPLITS]
    missing = [n for n in ("train", "val") if n not in paths]
    if unknown or missing:
        raise InputError(f"--task-table {spec}: " + (f"unknown split {', '.join(unknown)}" if unknown else
                                                     f"no {' or '.join(missing)} table")
                         + f"; the splits are {', '.join(TASK_TABLE_SPLITS)} (train and val needed)")
    return {n: paths[n] for n in TASK_TABLE_SPLITS if n in paths}


def parse_link_split_time(spec: Union[str, Mapping[str, int]]) -> List[Tuple[str, int]]:
    """``--link-split-time``: "val=T1,test=T2" (or a dict) of int64 times; checked by the core."""
    what = "--link-split-time"
    example = "use e.g. val=100,test=200 (integer times in the unit of --edge-time)"
    if isinstance(spec, str):
        items: List[Tuple[str, Any]] = _name_values(spec, lambda part: f"{what} '{spec}': '{part}' is not "
                                                                      f"NAME=TIME; {example}")
    elif isinstance(spec, Mapping):
        items = [(str(k), v) for k, v in spec.items()]
    else:
        raise InputError(f"{what} must be a string or a dict of split name -> time, not {type(spec).__name__}")
    out = []
    for name, value in items:
        try:
            out.append((name, _as_time(value, digits=True)))
        except (ValueError, TypeError):
            raise InputError(f"{what} {name}={value}: a split time must be an integer; {example}") from None
        except OverflowError as e:
            raise InputError(f"{what} {name}={e.args[0]}: a split time must fit int64") from None
    if not out:
        raise InputError(f"{what} '{spec}' names no split; {example}")
    return out


def _name_values(spec: str, not_a_pair: Any) -> List[Tuple[str, Any]]:
    """The (name, value) pairs of "NAME=VALUE,..."; a part that is not one: ``not_a_pair(part)``."""
    items: List[Tuple[str, Any]] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(not_a_pair(part))
        items.append((name.strip(), value.strip()))
    return items


def _as_fraction(value) -> "float | None":
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_self_loops(value: Union[bool, str]) -> str:
    """'keep' or 'drop' (True/False mean keep/drop)."""
    if isinstance(value, bool):
        return "keep" if value else "drop"
    if value not in ("keep", "drop"):
        raise InputError(f"self_loops must be 'keep' or 'drop', not '{value}'")
    return value


def arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` from a parser of this module: its error becomes a usage error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except RingGnnError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _int_text(text: str, what: str = "") -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{what + ' ' if what else ''}'{text}' is not an integer") from None


size_arg = arg(parse_size)
count_arg = arg(lambda t: count(_int_text(t), "the value"))
positive_arg = arg(lambda t: count(_int_text(t), "the value", 1))
fanouts_arg = arg(fanouts)
time_arg = arg(lambda t: time(t, "the time"))
