"""Every option a user gives ringgnn, parsed once where it enters: the Python API calls these
functions on its arguments and the command line uses them as argparse types (:func:`arg`), so a
value is checked by one rule whichever way it came; rules the Rust core also needs (fanouts,
backend and cache-policy names) are the core's own (docs/ARCHITECTURE.md, "Options").
"""

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

#: Backend names ("auto", "memory", "uring", "pread") and cache policies, as the core accepts them.
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


#: Library code pages (PyTorch's, PyG's, numpy's, the core's) a running command keeps touching. A
#: memory cgroup counts them, but the kernel can drop and refault them, so plans size from the
#: anonymous memory (:func:`held_memory`) and leave this much room for them besides. Measured:
#: 60 MB referenced during a layer of layer-wise inference with PyTorch imported (torch 2.15, PyG
#: 2.x; ``/proc/self/smaps`` after ``clear_refs``).
CODE_BYTES = 64 << 20
#: The same without PyTorch in the process (layer-wise inference on the CPU: Python, numpy, the
#: core): measured 7.3 MiB referenced during a layer on the 1M-node graph of issue 24; twice that.
CODE_BYTES_NO_TORCH = 16 << 20
#: The same for training with PyTorch (autograd, the optimizer, the loaders): measured 245 MiB of
#: library pages referenced in 30 s of a heterogeneous training epoch on the CPU (an upper bound:
#: the referenced flag of a shared library page is also set by other processes using it).
CODE_BYTES_TRAINING = 256 << 20


def held_memory() -> int:
    """The anonymous memory this process holds now (``RssAnon``: the heap, the runtime's and the
    libraries' data, what no cgroup can reclaim without swap), the one measure of what a plan
    takes off a budget as held; the resident size where ``/proc/self/status`` does not say. Not
    the resident size: its mapped library pages (350 MB with PyTorch) are reclaimed and
    refaulted under a cgroup, and counting them as held starves the plan; plans leave
    :func:`code_bytes` for them instead."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return process_rss()


def code_bytes(training: bool = False) -> int:
    """The room a plan leaves for the library code a running command keeps touching:
    :data:`CODE_BYTES` once PyTorch is imported (:data:`CODE_BYTES_TRAINING` for ``training``),
    :data:`CODE_BYTES_NO_TORCH` before."""
    if "torch" not in sys.modules:
        return CODE_BYTES_NO_TORCH
    return CODE_BYTES_TRAINING if training else CODE_BYTES


def default_memory(cap: Optional[int] = None, held: Optional[int] = None) -> int:
    """A command's default memory budget: what the process holds (``held``, default its resident
    memory now) plus what the core's one rule allows (half of ``MemAvailable``, or 7/8 of the room
    under the memory cgroups above the process, v1 or v2, ``memory.high`` included, never the
    room's last 48 MiB that the kernel's page cache and buffers need, if less), and with ``cap``
    the growth at most ``cap`` bytes. A default that ignored a container's limit would get the
    process killed."""
    held = process_rss() if held is None else held
    share = _core.default_budget()
    if share is None:
        share = cap if cap is not None else 1 << 30
    return held + (share if cap is None else min(cap, share))


def check_default(budget: int, least: int, held: int = 0) -> None:
    """Refuse a default ``budget`` (what the process holds, ``held``, plus :func:`default_memory`'s
    growth) below the ``least`` a command needs when a memory cgroup bounds the default: the error
    names the cgroup's limit, the least budget and the least limit that runs (the core's one
    message, ``DefaultBudget::refusal``), not a ``--memory`` the user never gave. A default the
    machine bounds is left to the command's own check."""
    why = _core.default_refusal(int(budget), int(least), int(held))
    if why is not None:
        raise InputError(why)


def reserve(value: Union[None, int, str]) -> int:
    """The bytes of a memory budget left to the caller: ``value``, or by default what this
    process already uses now (the Python runtime, PyTorch, the model, anything loaded)."""
    n = size(value, "reserve")
    return process_rss() if n is None else n


#: The largest count any option takes: the core's counts and seeds are 64-bit unsigned, and a
#: larger Python int would fail converting into it (an ``OverflowError`` far from the option).
MAX_COUNT = (1 << 64) - 1


def count(value: Any, what: str, minimum: int = 0) -> int:
    """An integer of at least ``minimum`` and at most :data:`MAX_COUNT` (threads, batch sizes,
    seeds, epochs...)."""
    n = _integer(value, what)
    if n < minimum:
        need = "at least 1" if minimum == 1 else f">= {minimum}"
        raise InputError(f"{what} must be {need}, not {value}")
    if n > MAX_COUNT:
        raise InputError(f"{what} must be at most 2^64 - 1 ({MAX_COUNT}), not {value}")
    return n


def real(value: Any, what: str, low: float = -math.inf, high: float = math.inf, *, above: bool = False,
         below: bool = False) -> float:
    """A finite number in ``[low, high]`` (``above``: greater than ``low``; ``below``: less than
    ``high``). NaN and infinities are refused: argparse's ``type=float`` takes "nan" and "inf",
    and PyTorch, numpy and the core would fail on them later, far from the option."""
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


def learning_rate(value: Any) -> float:
    """``--lr``: Adam's learning rate, a finite number > 0 (0 would train nothing)."""
    return real(value, "--lr", 0.0, above=True)


def dropout(value: Any) -> float:
    """``--dropout``: the probability of dropping a unit between layers, in [0, 1)."""
    return real(value, "--dropout", 0.0, 1.0, below=True)


def negative_ratio(value: Any) -> float:
    """``--neg-ratio``: random negative pairs per positive, a finite number > 0."""
    return real(value, "--neg-ratio", 0.0, above=True)


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
    """Neighbors per hop from "20,15,10" or [20, 15, 10]: each a positive count or -1 (all);
    the core's rule (``_core.parse_fanouts``)."""
    if isinstance(value, bytes) or not isinstance(value, (str, Sequence, np.ndarray)):
        raise InputError(f"fanouts must be a list of integers such as [20, 15, 10], not {value!r}")
    if not isinstance(value, str):
        value = [_integer(f, f"fanout {f!r}") for f in value]
    return list(_core.parse_fanouts(value))


def hyperbatch(value: Union[int, str]) -> str:
    """Batches sampled together: "auto" or a count of at least 1, as the core's text (the core
    parses it, by its one rule)."""
    if isinstance(value, str):
        return value.strip()
    return str(_integer(value, "hyperbatch"))


def hyperbatch_size(value: Union[None, int, str]) -> Optional[int]:
    """Batches sampled together, as the typed loader's core takes them (``TypedLoader.sizes``):
    None for "auto", else a count of at least 1; the core's rule (``Hyperbatch::from_str``) for
    the homogeneous ones. None (already parsed "auto") stays None."""
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


#: How layer-wise inference stores its hidden layers' rows (``--hidden-dtype``; outputs stay f32).
HIDDEN_DTYPES: Tuple[str, ...] = ("bf16", "f16", "f32")


def hidden_dtype(value: Optional[str]) -> str:
    """``--hidden-dtype``: bf16 (the default, None), f16 or f32."""
    return "bf16" if value is None else choice(value, HIDDEN_DTYPES, "--hidden-dtype")


def inference_device(value: Optional[str]) -> str:
    """Layer-wise inference's ``--device``: cpu (the default, None) or cuda (refused where
    PyTorch sees no CUDA device)."""
    d = "cpu" if value is None else choice(value, ("cpu", "cuda"), "--device")
    if d == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: PyTorch sees no CUDA device here; use --device cpu")
    return d


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
    """Seed node ids as a 1-D int64 array: None or "all" for every node, a split name, a
    ``.npy`` file of ids, or an array (numpy, torch, list). Ranges are checked by the core."""
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
    """``value`` (numpy, torch, list) as a numpy array; a torch tensor without importing torch."""
    return np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)


def stored_split(dataset: Any, edges: Any) -> Optional[str]:
    """The name of ``dataset``'s edge split that ``edges`` names, or None (a file, an array)."""
    if not isinstance(edges, (str, os.PathLike)):
        return None
    spec = os.fspath(edges)
    return spec if spec in dataset.edge_split_names else None


def edge_pairs(dataset: Any, edges: Any, what: str = "edges", counts: Optional[Tuple[int, int]] = None,
               types: Optional[Tuple[str, str]] = None) -> np.ndarray:
    """Pairs as a (2, n) int64 array: an edge split's name, a ``.npy`` file or an array (numpy,
    torch) of shape (2, n) or (n, 2) (a (2, 2) array is read as (2, n): rows are sources and
    destinations), every id checked. ``dataset``: a dataset, or a typed dataset's relation (its
    edge splits); ``counts``: the nodes of the source and destination ends (default
    ``dataset.num_nodes`` both), ``types`` their node types (named in errors; default: the dataset's
    nodes). ``what`` names the option in errors."""
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
    """One time, an integer in the unit of the dataset's times (int64: ``docs/FORMAT.md``, "Times"),
    from an integer or its text."""
    try:
        return _as_time(value)
    except ValueError:
        raise InputError(f"{what} '{value}' is not an integer") from None
    except TypeError:
        raise InputError(f"{what} must be an integer, not {value!r}") from None
    except OverflowError as e:
        raise InputError(f"{what} {e.args[0]}: times are 64-bit signed integers") from None


def _as_time(value: Any, digits: bool = False) -> int:
    """The one reader of times (:func:`time`, :func:`parse_link_split_time`): ``value`` as an int64,
    from an integer (not a bool) or its text (as ``int`` reads it, or only ``[+-]DIGITS`` when
    ``digits``). Raises ValueError for text that is not one, TypeError for a value that is not an
    integer, OverflowError (its ``args[0]`` the integer) outside int64; the callers word them."""
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
    """Seed times for ``n`` seeds (numpy, torch, list, or one integer for all of them) as a
    contiguous 1-D int64 array of length ``n``; the same unit as the dataset's times."""
    a = _array(value)
    if a.ndim > 1:
        raise InputError(f"{what} must be one integer time per seed (a 1-D array) or one integer, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if isinstance(value, (list, tuple)) and all(type(x) is int for x in value):  # some past int64
            i = next(i for i, x in enumerate(value) if not -(1 << 63) <= x < 1 << 63)
            raise InputError(f"{what}[{i}] = {value[i]}: outside the times int64 holds (-2^63 to 2^63 - 1)")
        raise InputError(f"{what} must be integer times (the unit of the dataset's times), got dtype {a.dtype}")
    # uint64 holds times past int64's (numpy makes it of Python ints from 2^63 on): refused, not wrapped.
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
    """A split spec as the core wants it: [(name, fraction), ...] or [(name, path), ...].

    Accepts "train=0.5,val=0.1,test=0.4", "train=a.npy,val=b.npy", or a dict of either.
    """
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
    """``--link-split``: held-out fractions of the edges ("val=0.05,test=0.1") or edge lists
    (``.npy`` of shape (2, n) or (n, 2): "val=val.npy,test=test.npy", optionally with
    "train=train.npy"), or a dict of either. Names, fractions and files are checked by the core."""
    try:
        return parse_split(spec)
    except InputError as e:
        raise InputError(f"--link-split: {e}") from None


#: The splits a task table may give (``--task-table``): ``train`` and ``val`` are needed.
TASK_TABLE_SPLITS = ("train", "val", "test")


def task_tables(spec: Union[str, Mapping[str, Union[str, os.PathLike]]]) -> Dict[str, str]:
    """``--task-table``: a table of rows per split, "train=T1.parquet,val=T2.parquet,test=T3.csv"
    or a dict of paths; ``train`` and ``val`` needed, ``test`` optional."""
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
    """``--link-split-time``: held-out splits by edge time, "val=T1,test=T2" (or a dict): the edge
    events after T1 go to val, those after T2 to test. Times are integers in the unit of the
    dataset's edge times (int64); names, their order and T1 <= T2 are checked by the core."""
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
    """The (name, value) pairs of "NAME=VALUE,NAME=VALUE" (stripped, empty parts skipped); a part
    that is not NAME=VALUE is refused with ``not_a_pair(part)``."""
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


#: argparse types of the command line, each made from the parsers above.
size_arg = arg(parse_size)
count_arg = arg(lambda t: count(_int_text(t), "the value"))
positive_arg = arg(lambda t: count(_int_text(t), "the value", 1))
fanouts_arg = arg(fanouts)
time_arg = arg(lambda t: time(t, "the time"))
