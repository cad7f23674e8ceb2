"""Exact scores of pairs by a link model: what ``ringgnn predict RUN --edges`` computes.

A link run's encoder gives each node an embedding (its last layer's output) and its decoder a
score per pair of embeddings (``ringgnn.models``). :func:`score_pairs` computes the embeddings of
just the pairs' endpoints (and candidates) by exact layer-wise inference (``ringgnn.inference``:
full neighborhoods, out of core; at the last layer only the blocks holding an endpoint are
computed), then decodes each pair (:func:`decode_pairs`). The result equals a
full-graph forward of the encoder followed by the decoder. :func:`predict_edges` does it for a
run directory and writes the scores.

**Scores** are the decoder's logits, float32: ``sigmoid(score)`` is the model's probability that
the edge exists (what ``probabilities=True`` writes instead; the ranking metrics are the same
either way). **Layouts** of what is written:

- pairs (a ``.npy`` file or an array, (2, n) or (n, 2); or the ``train`` split, which has no
  stored negatives): shape ``(n,)``, one score per pair in the given order;
- a held-out edge split (``val``, ``test``): shape ``(n, 1 + K)``, row ``i`` the score of pair
  ``i`` then those of its ``K`` stored negatives ``(src_i, edge_negatives[i, j])``: the table the
  metrics rank (AUC, MRR, Hits@K of ``ringgnn.metrics``), which are returned;
- a held-out split with negatives shared by all its pairs (``Dataset.edge_shared_negatives``,
  OGB's ``edge_neg``): shape ``(n + m,)``, the ``n`` pairs' scores then the ``m`` shared
  negatives', and the metrics of OGB's rule (``ringgnn.metrics.shared_ranking_sums``).

Memory: besides the layer-wise budget, the process holds the endpoints' embeddings (distinct
endpoints x hidden x 4 bytes) and the scores.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _options
from ._core import InputError
from .checkpoints import Checkpoint
from .dataset import Dataset


def score_pairs(ds: Dataset, ckpt: Checkpoint, pairs: np.ndarray, negs: Optional[np.ndarray] = None,
                stats: Optional[Dict[str, Any]] = None, **opts: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(scores of ``pairs`` (n,), scores of ``negs`` (n, K): ``(src_i, negs[i, j])``, (n, 0)
    without) of link model ``ckpt``, exact: layer-wise embeddings of the distinct endpoints, then
    the decoder. ``opts``: :func:`~ringgnn.inference.run_inference`'s (``memory``, ``backend``,
    ``direct``, ``keep``, ``quiet``, ``work_dir``); ``stats`` receives its summary."""
    ids, z = embed_endpoints(ds, ckpt, [pairs] + ([] if negs is None else [negs]), stats, **opts)
    return decode_pairs(ckpt.decoder, z, ids, pairs, negs)


def embed_endpoints(ds: Dataset, ckpt: Checkpoint, arrays: Any, stats: Optional[Dict[str, Any]] = None,
                    **opts: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted distinct node ids of ``arrays``, their exact embeddings by link model ``ckpt``):
    one layer-wise inference for every endpoint; ``opts`` and ``stats`` as :func:`score_pairs`."""
    from .inference import run_inference

    if ckpt.task != "link" or ckpt.decoder is None:
        raise InputError(f"{ckpt.path}: a node-classification model has no pair scores; train a link model "
                         "(`ringgnn train DATASET --task link`)")
    ids = np.unique(np.concatenate([np.asarray(a).reshape(-1) for a in arrays]))
    if len(ids) == 0:  # no pairs: nothing to compute
        z = np.zeros((0, ckpt.hidden), np.float32)
    else:
        z = run_inference(ds, ckpt, ids, output="logits", stats=stats, **opts)
    if stats is not None:
        stats["endpoints"] = int(len(ids))
    return ids, z


def predict_edges(run_dir: str, edges: Any, *, dataset: Union[None, str, Dataset] = None, out: Optional[str] = None,
                  probabilities: bool = False, memory: Union[None, int, str] = None, backend: str = "auto",
                  direct: bool = False, keep: bool = False, quiet: bool = True,
                  hidden_dtype: Optional[str] = None) -> Dict[str, Any]:
    """Score ``edges`` with the link model of run ``run_dir``: a ``.npy`` file of pairs or an
    array ((2, n) or (n, 2) node ids), or an edge split's name (``val``/``test``: the split's
    pairs and stored negatives, and the metrics). Writes the scores to ``out`` (``.npy``, in the
    layout of the module's docstring; whole or not at all) when given. Returns a summary: the
    pairs, ``negatives`` per pair (0 for given pairs), ``metrics`` (``auc``, ``mrr``, ``hits``
    by K) for a split with negatives, ``out`` or else ``scores`` (the array), the layer-wise
    inference's counters."""
    from . import metrics
    from .inference import open_run
    from .links import edge_pairs

    if out is not None and not os.fspath(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")
    ds, ckpt = open_run(run_dir, dataset, arrays=True)  # no PyTorch: numpy's dense parts and decoder
    if ckpt.task != "link":
        raise InputError(f"--edges: {run_dir} is a node-classification run (its model predicts classes); --edges "
                         "scores pairs with a link model (`ringgnn train DATASET --task link`)")
    pairs = edge_pairs(ds, edges, "--edges")
    split = edges if isinstance(edges, str) and edges in ds.edge_split_names else None
    negs = shared = None
    if split is not None:
        shared = ds.edge_shared_negatives(split)
        try:
            negs = ds.edge_negatives(split) if shared is None else None
        except InputError:  # the train split, or a split built with --link-negatives 0
            negs = None
    m = 0 if shared is None else shared.shape[1]
    if shared is not None:  # scored as pairs after the positives: one inference for both
        pairs = np.concatenate([pairs, shared], axis=1)
    work_dir = os.path.dirname(os.path.abspath(out)) if out is not None else None
    t0 = time.perf_counter()
    stats: Dict[str, Any] = {}
    pos, neg = score_pairs(ds, ckpt, pairs, negs, stats=stats, memory=_options.size(memory, "memory"),
                           backend=backend, direct=direct, keep=keep, quiet=quiet, work_dir=work_dir,
                           hidden_dtype=hidden_dtype or "f32")  # ranked scores: f32 unless asked
    table = pos if negs is None else np.concatenate([pos[:, None], neg], axis=1)
    if m:
        pos, neg = pos[:len(pos) - m], pos[len(pos) - m:]
    if probabilities:
        table = (1.0 / (1.0 + np.exp(-table.astype(np.float64)))).astype(np.float32)
    summary: Dict[str, Any] = dict(
        checkpoint=ckpt.path, dataset=os.path.abspath(ds.path), edges=split or "pairs", pairs=int(pairs.shape[1]) - m,
        negatives=0 if negs is None else int(negs.shape[1]), output="probabilities" if probabilities else "scores",
        shape=list(table.shape), endpoints=stats.get("endpoints", 0))
    if shared is not None:
        summary["shared_negatives"] = m
    if (negs is not None or m) and len(pos):
        got = metrics.link_scores(pos, neg) if negs is not None else metrics.shared_link_scores(pos, neg)
        summary["metrics"] = dict(auc=got["auc"], mrr=got["mrr"], hits={str(k): v for k, v in got["hits"].items()})
    deliver_scores(summary, table, out, t0)
    for k in ("layers", "bytes_read_neighbors", "bytes_read_rows", "bytes_written", "plan"):
        if k in stats:
            summary[k] = stats[k]
    return summary


def decode_pairs(decoder: Any, z: np.ndarray, ids: np.ndarray, pairs: np.ndarray, negs: Optional[np.ndarray] = None,
                 chunk: int = 1 << 14) -> Tuple[np.ndarray, np.ndarray]:
    """Scores of ``pairs`` ((2, n) node ids) and of ``negs`` ((n, K) candidate destinations per
    pair, optional) from the embeddings ``z`` of the sorted node ids ``ids``, ``chunk`` pairs at a
    time, by ``decoder`` (an ``infer_dense.DenseDecoder``, or a torch decoder module whose weights
    it takes): numpy's arithmetic either way."""
    from .infer_dense import dense_decoder

    decoder = dense_decoder(decoder)
    n = pairs.shape[1]
    k = 0 if negs is None else negs.shape[1]
    pos = np.empty(n, np.float32)
    neg = np.empty((n, k), np.float32)
    zt = np.ascontiguousarray(z, dtype=np.float32)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        zs = zt[np.searchsorted(ids, pairs[0, a:b])]
        zd = zt[np.searchsorted(ids, pairs[1, a:b])]
        pos[a:b] = decoder(zs, zd)
        if k:
            zn = zt[np.searchsorted(ids, negs[a:b])]
            neg[a:b] = decoder(zs[:, None], zn)
    return pos, neg


def deliver_scores(summary: Dict[str, Any], table: np.ndarray, out: Any, t0: float) -> None:
    """Put ``predict --edges``' scores where the caller asked: written atomically as ``.npy`` at
    ``out`` (``summary["out"]``), or kept in ``summary["scores"]``; then ``summary["seconds"]``
    since ``t0``. The one ending of homogeneous and heterogeneous pair scoring."""
    from .inference import NpyWriter

    if out is not None:
        sink = NpyWriter(os.fspath(out), table.shape, np.float32)
        try:
            sink.put(slice(None), table)
            summary["out"] = sink.finish()
        except BaseException:
            sink.abort()
            raise
    else:
        summary["scores"] = table
    summary["seconds"] = time.perf_counter() - t0
