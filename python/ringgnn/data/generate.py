"""``ringgnn generate hetero``: a MAG-like heterogeneous graph with a planted class structure
(papers, authors, institutions), generated out of core; the model is specified in
``docs/generators.md`` ("hetero"), in this module's names."""

from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .. import _core
from .._files import allocated_memmap, os_errors, save_npy, temporary
from .._options import count, optional_count, real, size
from ..progress import reporting
from .build import DEFAULT_SBM_SPLIT, NodeType, PathLike, Relation, Size, build_hetero, fractions, link_fractions
from .schema import parse_edge_type

#: Papers (authors) per chunk of the streams. Part of the definition: changing it changes every dataset.
CHUNK = 1 << 16
#: Paper rows per block of the feature stream (part of the definition).
FEATURE_ROWS = 1 << 10
#: Calibrated feature noise puts the feature-only Bayes accuracy this far from chance to perfect.
FEATURE_SIGNAL = 0.3

DEFAULTS: Dict[str, Any] = dict(
    classes=8, feature_dim=64, avg_authors=3.0, avg_cites=8.0, homophily_writes=0.85, homophily_cites=0.3,
    homophily_affiliation=0.8, feature_noise=None, split=DEFAULT_SBM_SPLIT, add_reverse=True,
)

MAX_NODES = 1 << 40
MAX_CLASSES = 1024
MAX_FEATURE_DIM = 4096
MAX_DEGREE = 256.0

# Stream ids of np.random.default_rng([seed, STREAM, index]) (docs/generators.md, "Randomness").
_PERMUTATION, _MEANS, _CALIBRATION, _AFFILIATION, _WRITES, _CITES, _FEATURES, _SPLIT = range(8)
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def generate_hetero(
    out: PathLike,
    *,
    papers: int,
    authors: int,
    institutions: int,
    classes: int = 8,
    feature_dim: int = 64,
    avg_authors: float = 3.0,
    avg_cites: float = 8.0,
    homophily_writes: float = 0.85,
    homophily_cites: float = 0.3,
    homophily_affiliation: float = 0.8,
    feature_noise: Optional[float] = None,
    split: Union[str, Dict[str, float]] = DEFAULT_SBM_SPLIT,
    add_reverse: bool = True,
    link_split: Union[None, str, Dict[str, float]] = None,
    link_relation: Optional[str] = None,
    link_negatives: int = 100,
    seed: int = 0,
    memory: Optional[Size] = None,
    overwrite: bool = False,
    threads: Optional[int] = None,
    progress: Any = None,
) -> Dict[str, Any]:
    """Generate the planted paper/author/institution dataset of docs/generators.md ("hetero") at
    ``out``; returns its manifest. ``feature_noise`` None calibrates σ; ``memory``, ``overwrite``,
    ``threads`` and ``progress`` are :func:`build.build_hetero`'s."""
    p = dict(
        papers=_nodes(papers, "papers"), authors=_nodes(authors, "authors"),
        institutions=_nodes(institutions, "institutions"),
        classes=_bounded(classes, "classes", 2, MAX_CLASSES),
        feature_dim=_bounded(feature_dim, "feature_dim", 1, MAX_FEATURE_DIM),
        avg_authors=_real(avg_authors, "avg_authors", 1.0, MAX_DEGREE),
        avg_cites=_real(avg_cites, "avg_cites", 0.0, MAX_DEGREE),
        homophily_writes=_real(homophily_writes, "homophily_writes", 0.0, 1.0),
        homophily_cites=_real(homophily_cites, "homophily_cites", 0.0, 1.0),
        homophily_affiliation=_real(homophily_affiliation, "homophily_affiliation", 0.0, 1.0),
    )
    noise = None if feature_noise is None else _real(feature_noise, "feature_noise", 0.0, math.inf)
    fractions = _fractions(split)
    link = _link(link_split, link_relation, link_negatives)
    seed = count(seed, "seed (--seed)")
    if seed >= 1 << 64:
        raise _core.InputError(f"seed (--seed) must be below 2^64, not {seed}")
    size(memory, "memory (--memory)")  # checked now; the builder takes it as given
    optional_count(threads, "threads (--threads)")
    out = os.path.normpath(os.fspath(out))
    _core.check_output(out, overwrite)  # before any work; the builder checks it again

    means = _means(p["classes"], p["feature_dim"], seed)
    target = 1.0 / p["classes"] + FEATURE_SIGNAL * (1.0 - 1.0 / p["classes"])
    sigma = _calibrate(means, target, seed) if noise is None else noise
    source = dict(command="generate hetero", **p, feature_noise=sigma, feature_noise_calibrated=noise is None,
                  feature_accuracy_target=target if noise is None else None,
                  split=",".join(f"{n}={f:g}" for n, f in fractions),
                  add_reverse=bool(add_reverse), seed=seed, self_citations="dropped", chunk=CHUNK,
                  feature_rows=FEATURE_ROWS, numpy=np.__version__)

    def relation(name: str, key: str) -> Relation:
        if link is not None and link[0] == name:
            return Relation(name, files[key], "bin64", link_split=dict(link[1]), link_negatives=link[2])
        return Relation(name, files[key], "bin64")

    tmp = temporary(os.path.dirname(os.path.abspath(out)), os.path.basename(out) + ".gen", directory=True)
    try:
        with reporting(progress) as bars:
            with os_errors("generating the dataset", out):
                files = _write_intermediates(tmp.path, p, means, sigma, fractions, seed, bars)
            types = [NodeType("author", p["authors"]), NodeType("institution", p["institutions"]),
                     NodeType("paper", p["papers"], features=files["features"], labels=files["labels"],
                              split=files["split"] or None)]
            return build_hetero(out, types, [relation(r, parse_edge_type(r)[1]) for r in RELATIONS],
                                add_reverse=add_reverse, seed=seed, memory=memory, overwrite=overwrite,
                                threads=threads, source=source, progress=bars)
    finally:
        tmp.close()


RELATIONS = ("author:affiliated_with:institution", "author:writes:paper", "paper:cites:paper")


def _link(split: Any, relation: Optional[str], negatives: Any) -> Optional[Tuple[str, Any, int]]:
    if split is None:
        if relation is not None:
            raise _core.InputError(f"link_relation (--link-relation) {relation} given without link_split "
                                   "(--link-split); give the held-out fractions, e.g. val=0.05,test=0.1")
        return None
    if relation not in RELATIONS:
        what = "missing" if relation is None else f"'{relation}' is not a relation of the generator"
        raise _core.InputError(f"link_relation (--link-relation): {what}; name the relation whose pairs to hold "
                               f"out: {', '.join(RELATIONS)}")
    return relation, link_fractions(split), count(negatives, "link_negatives (--link-negatives)")


def _flag(name: str) -> str:
    return f"{name} (--{name.replace('_', '-')})"


def _nodes(value: Any, name: str) -> int:
    return _bounded(value, name, 1, MAX_NODES)


def _bounded(value: Any, name: str, low: int, high: int) -> int:
    n = count(value, _flag(name), minimum=low)
    if n > high:
        raise _core.InputError(f"{_flag(name)} must be at most {high:,}, not {n:,}")
    return n


def _real(value: Any, name: str, low: float, high: float) -> float:
    return real(value, _flag(name), low, high)


def _fractions(split: Any) -> List[Tuple[str, float]]:
    parsed = fractions(split, "split (--split)")
    for name, f in parsed:
        if not _SPLIT_NAME.match(name):
            raise _core.InputError(f"split (--split): name '{name}' may use letters, digits, _ and - only")
        if not 0.0 <= f <= 1.0:
            raise _core.InputError(f"split (--split): fraction {name}={f:g} must be in [0, 1]")
    if sum(f for _, f in parsed) > 1.0 + 1e-9:
        raise _core.InputError(f"split (--split) '{split}': the fractions add up to more than 1")
    return parsed


def _rng(seed: int, stream: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, index])


_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


class Feistel:
    """A keyed bijection of ``[0, n)`` on uint64 arrays with its inverse, in O(1) memory: a
    balanced Feistel network over ``2h`` bits (round function :func:`mix64`), cycle-walked."""

    def __init__(self, n: int, h: int, keys: Any):
        self.n, self.h, self.mask = np.uint64(n), np.uint64(h), np.uint64((1 << h) - 1)
        self.keys = [np.uint64(k) for k in keys]

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self.h, x & self.mask
        with np.errstate(over="ignore"):
            for k in self.keys:
                left, right = right, left ^ (mix64(right ^ k) & self.mask)
        return (left << self.h) | right

    def _decrypt(self, y: np.ndarray) -> np.ndarray:
        left, right = y >> self.h, y & self.mask
        with np.errstate(over="ignore"):
            for k in reversed(self.keys):
                left, right = right ^ (mix64(left ^ k) & self.mask), left
        return (left << self.h) | right

    def _walk(self, x: np.ndarray, step) -> np.ndarray:
        y = step(np.asarray(x, dtype=np.uint64))
        bad = np.flatnonzero(y >= self.n)
        while bad.size:  # cycle walking: a few steps
            y[bad] = step(y[bad])
            bad = bad[y[bad] >= self.n]
        return y.astype(np.int64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self._walk(x, self._encrypt)

    def inverse(self, y: np.ndarray) -> np.ndarray:
        return self._walk(y, self._decrypt)


class _Permutation(Feistel):
    """π_T of docs/generators.md ("The permutation")."""

    ROUNDS = 4

    def __init__(self, n: int, seed: int, index: int):
        super().__init__(n, (max(2, (n - 1).bit_length()) + 1) // 2, _rng(seed, _PERMUTATION, index).integers(
            0, 1 << 64, size=self.ROUNDS, dtype=np.uint64, endpoint=False))


class _Classes:
    """Classes (fields) of one node type: ``of(ids)`` and uniform members of given classes."""

    def __init__(self, n: int, classes: int, seed: int, index: int):
        self.n, self.c = n, classes
        self.perm = _Permutation(n, seed, index)
        self.sizes = (n - np.arange(classes, dtype=np.int64) + classes - 1) // classes

    def of(self, ids: np.ndarray) -> np.ndarray:
        return self.perm.forward(ids) % self.c

    def draw(self, cls: np.ndarray, same: np.ndarray, u: np.ndarray, uniform: np.ndarray) -> np.ndarray:
        """Per draw: where ``same`` and class ``cls`` has members, its member ``floor(u·size)``;
        elsewhere ``uniform``."""
        size = self.sizes[cls]
        pick = same & (size > 0)
        out = uniform.astype(np.int64, copy=True)
        j = np.minimum((u[pick] * size[pick]).astype(np.int64), size[pick] - 1)
        out[pick] = self.perm.inverse(cls[pick] + self.c * j)
        return out


def _means(classes: int, dim: int, seed: int) -> np.ndarray:
    g = _rng(seed, _MEANS, 0).standard_normal((dim, classes))
    if dim >= classes:
        q, r = np.linalg.qr(g)
        return (q * np.where(np.diag(r) < 0, -1.0, 1.0)).T
    return (g / np.linalg.norm(g, axis=0)).T


def _calibrate(means: np.ndarray, target: float, seed: int) -> float:
    c = len(means)
    gram = means @ means.T
    lam, vec = np.linalg.eigh(gram)
    root = vec * np.sqrt(np.clip(lam, 0.0, None))
    samples = int(min(20000, max(64, (1 << 26) // (c * c))))
    w = _rng(seed, _CALIBRATION, 0).standard_normal((samples, c)) @ root.T
    y = np.arange(samples) % c
    gap = 1.0 - gram[y]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(gap > 1e-9, (w - w[np.arange(samples), y][:, None]) / gap, np.inf)
    t[np.arange(samples), y] = -np.inf
    delta = float(np.sort(t.max(axis=1))[max(0, math.ceil(target * samples) - 1)])
    if not (math.isfinite(delta) and delta > 0):
        raise _core.InputError(f"feature_dim (--feature-dim) {means.shape[1]} is too small to separate {c} classes; "
                               "use a larger one or give feature_noise (--feature-noise)")
    return 1.0 / delta


def _write_intermediates(d: str, p: Dict[str, Any], means: np.ndarray, sigma: float,
                         fractions: List[Tuple[str, float]], seed: int, progress: Any) -> Dict[str, Any]:
    n_p, n_a, c = p["papers"], p["authors"], p["classes"]
    paper, author, inst = (_Classes(n, c, seed, i) for i, n in enumerate((n_p, n_a, p["institutions"])))
    files: Dict[str, Any] = {k: os.path.join(d, f"{k}.bin64") for k in ("affiliated_with", "writes", "cites")}
    files["labels"], files["features"] = os.path.join(d, "labels.npy"), os.path.join(d, "features.npy")
    _stage(progress, "generating authors", n_a, "authors")
    with open(files["affiliated_with"], "wb") as f:
        for j, start in enumerate(range(0, n_a, CHUNK)):
            ids = np.arange(start, min(start + CHUNK, n_a), dtype=np.int64)
            ones = np.ones(len(ids), dtype=np.int64)
            _pairs(f, *_slots(_rng(seed, _AFFILIATION, j), ids, author.of(ids), ones, inst, p["homophily_affiliation"]))
            _advance(progress, len(ids))

    labels = allocated_memmap(files["labels"], np.int64, (n_p,))
    features = allocated_memmap(files["features"], np.float32, (n_p, p["feature_dim"]))
    splits = _Splits(d, fractions, n_p)
    mean32 = means.astype(np.float32)
    _stage(progress, "generating papers", n_p, "papers")
    with open(files["writes"], "wb") as fw, open(files["cites"], "wb") as fc:
        for j, start in enumerate(range(0, n_p, CHUNK)):
            ids = np.arange(start, min(start + CHUNK, n_p), dtype=np.int64)
            cls = paper.of(ids)
            labels[start:start + len(ids)] = cls
            rng = _rng(seed, _WRITES, j)
            src, dst = _slots(rng, ids, cls, 1 + rng.poisson(p["avg_authors"] - 1.0, len(ids)), author,
                              p["homophily_writes"])
            key = np.unique((src - start) * n_a + dst)
            _pairs(fw, key % n_a, start + key // n_a)
            rng = _rng(seed, _CITES, j)
            src, dst = _slots(rng, ids, cls, rng.poisson(p["avg_cites"], len(ids)), paper, p["homophily_cites"])
            key = np.unique(((src - start) * n_p + dst)[src != dst])
            _pairs(fc, start + key // n_p, key % n_p)
            for b in range(start // FEATURE_ROWS, (start + len(ids) - 1) // FEATURE_ROWS + 1):
                rows = slice(b * FEATURE_ROWS - start, min((b + 1) * FEATURE_ROWS, n_p) - start)
                z = _rng(seed, _FEATURES, b).standard_normal((rows.stop - rows.start, p["feature_dim"]),
                                                             dtype=np.float32)
                features[start + rows.start:start + rows.stop] = mean32[cls[rows]] + np.float32(sigma) * z
            splits.chunk(_rng(seed, _SPLIT, j), start, len(ids))
            _advance(progress, len(ids))
    labels.flush()
    features.flush()
    del labels, features
    files["split"] = splits.close()
    return files


def _slots(rng: np.random.Generator, ids: np.ndarray, cls: np.ndarray, k: np.ndarray, target: _Classes,
           homophily: float) -> Tuple[np.ndarray, np.ndarray]:
    """``k[i]`` draws for node ``ids[i]`` of class ``cls[i]``: each a member of its class in
    ``target`` with probability ``homophily``, else uniform. Returns (ids repeated, drawn)."""
    m = int(k.sum())
    src, c = np.repeat(ids, k), np.repeat(cls, k)
    same, u, uni = rng.random(m) < homophily, rng.random(m), rng.integers(0, target.n, m)
    return src, target.draw(c, same, u, uni)


def _pairs(f, src: np.ndarray, dst: np.ndarray) -> None:
    f.write(np.stack([src, dst], axis=1).astype("<u8").tobytes())


class _Splits:
    """The paper splits, written chunk by chunk as ascending int64 ``.npy`` files."""

    def __init__(self, d: str, fractions: List[Tuple[str, float]], n: int):
        bounds, acc = [0], 0.0
        for _, f in fractions:
            acc += f
            bounds.append(min(n, math.floor(n * acc + 0.5)))
        sizes = np.diff(bounds)
        self.left = np.append(sizes, n - bounds[-1]).astype(np.int64)  # the last: in no split
        self.paths = {name: os.path.join(d, f"split_{name}.npy") for name, _ in fractions}
        self.maps = [allocated_memmap(path, np.int64, (int(s),)) if s else None
                     for path, s in zip(self.paths.values(), sizes)]
        self.filled = [0] * len(sizes)
        for path, s in zip(self.paths.values(), sizes):
            if not s:
                save_npy(path, np.zeros(0, dtype=np.int64))

    def chunk(self, rng: np.random.Generator, start: int, n: int) -> None:
        counts = rng.multivariate_hypergeometric(self.left, n)
        self.left -= counts
        which = np.repeat(np.arange(len(counts)), counts)
        rng.shuffle(which)
        for s, m in enumerate(self.maps):
            if m is not None and counts[s]:
                m[self.filled[s]:self.filled[s] + counts[s]] = start + np.flatnonzero(which == s)
                self.filled[s] += int(counts[s])

    def close(self) -> Dict[str, str]:
        for m in self.maps:
            if m is not None:
                m.flush()
        self.maps = []
        return dict(self.paths)


def _stage(progress: Any, name: str, total: int, unit: str) -> None:
    if progress is not None:
        progress.stage(name, total, unit)


def _advance(progress: Any, n: int) -> None:
    if progress is not None:
        progress.advance(n)
