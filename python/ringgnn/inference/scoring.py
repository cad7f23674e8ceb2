"""Exact scores of pairs by a link model (``ringgnn predict RUN --edges``): the
endpoints' embeddings by layer-wise inference, then the decoder (:func:`decode_pairs`), for
homogeneous runs (:func:`predict_edges`) and typed ones, each end's rows from its tower
(:func:`predict_link_edges`), in one layout (:func:`_deliver`). docs/INFERENCE.md "Link models:
pair scores and embeddings"."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from .. import _options
from .._core import InputError
from ..data.dataset import Dataset
from ..data.schema import parse_edge_type
from ..models.checkpoints import Checkpoint, read_checkpoint
from ..models.dense import decoder_from_state, dense_decoder
from ..models.hetero_dense import dense_of
from . import metrics
from .hetero import HeteroLayerwise, link_towers
from .rows import MemmapNpyWriter, wanted_mask, write_output
from .run import open_run, run_inference


def score_pairs(ds: Dataset, ckpt: Checkpoint, pairs: np.ndarray, negs: Optional[np.ndarray] = None,
                stats: Optional[Dict[str, Any]] = None, **opts: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(scores of ``pairs`` (n,), scores of ``negs`` (n, K)) of link model ``ckpt``:
    exact embeddings of the distinct endpoints, then the decoder. ``opts``:
    :func:`~ringgnn.inference.run.run_inference`'s; ``stats`` receives its summary."""
    ids, z = embed_endpoints(ds, ckpt, [pairs] + ([] if negs is None else [negs]), stats, **opts)
    return decode_pairs(ckpt.decoder, z, ids, pairs, negs)


def embed_endpoints(ds: Dataset, ckpt: Checkpoint, arrays: Any, stats: Optional[Dict[str, Any]] = None,
                    **opts: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids of ``arrays``, their exact embeddings by link model ``ckpt``)."""
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
                  hidden_dtype: Optional[str] = None, at: Optional[int] = None) -> Dict[str, Any]:
    """Score ``edges`` with the link model of ``run_dir``: pairs (a ``.npy`` or
    array, (2, n) or (n, 2)) or a split name (``val``/``test``: its pairs, stored negatives and the
    metrics). Scores go to ``out`` (``.npy``, whole or not at all) or ``summary["scores"]``; the
    summary has the pairs, ``negatives`` per pair, ``metrics`` and the engine's counters. ``at``:
    embeddings of the graph as of that time."""

    if out is not None and not os.fspath(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")
    ds, ckpt = open_run(run_dir, dataset, arrays=True)  # no PyTorch: numpy's dense parts and decoder
    if ckpt.task != "link":
        raise InputError(f"--edges: {run_dir} is a node-classification run (its model predicts classes); --edges "
                         "scores pairs with a link model (`ringgnn train DATASET --task link`)")
    pairs = _options.edge_pairs(ds, edges, "--edges")
    split = _options.stored_split(ds, edges)
    negs = shared = None
    if split is not None:
        shared = ds.edge_shared_negatives(split)
        try:
            negs = ds.edge_negatives(split) if shared is None else None
        except InputError:  # the train split, or a split built with --link-negatives 0
            negs = None
    m = None if shared is None else shared.shape[1]
    if shared is not None:  # scored as pairs after the positives: one inference for both
        pairs = np.concatenate([pairs, shared], axis=1)
    work_dir = os.path.dirname(os.path.abspath(out)) if out is not None else None
    t0 = time.perf_counter()
    stats: Dict[str, Any] = {}
    pos, neg = score_pairs(ds, ckpt, pairs, negs, stats=stats, memory=_options.size(memory, "memory"),
                           backend=backend, direct=direct, keep=keep, quiet=quiet, work_dir=work_dir,
                           hidden_dtype=hidden_dtype or "f32", at=at)  # ranked scores: f32 unless asked
    summary: Dict[str, Any] = dict(checkpoint=ckpt.path, dataset=os.path.abspath(ds.path))
    _deliver(summary, split, pos, neg, negs, m, stats.get("endpoints", 0), probabilities, out, t0)
    for k in ("at", "as_of", "layers", "bytes_read_neighbors", "bytes_read_rows", "bytes_written", "plan"):
        if k in stats:
            summary[k] = stats[k]
    return summary


def decode_pairs(decoder: Any, z: np.ndarray, ids: np.ndarray, pairs: np.ndarray, negs: Optional[np.ndarray] = None,
                 chunk: int = 1 << 14,
                 dst: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Scores of ``pairs`` ((2, n)) and ``negs`` ((n, K)) from rows ``z`` of sorted ``ids`` by
    ``decoder``, ``chunk`` pairs at a time; ``dst``: (rows, ids) of the destinations if not ``z``'s."""
    decoder = dense_decoder(decoder)
    n = pairs.shape[1]
    k = 0 if negs is None else negs.shape[1]
    pos = np.empty(n, np.float32)
    neg = np.empty((n, k), np.float32)
    zt = np.ascontiguousarray(z, dtype=np.float32)
    zd, dst_ids = (zt, ids) if dst is None else (np.ascontiguousarray(dst[0], dtype=np.float32), dst[1])
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        zs = zt[np.searchsorted(ids, pairs[0, a:b])]
        pos[a:b] = decoder(zs, zd[np.searchsorted(dst_ids, pairs[1, a:b])])
        if k:
            neg[a:b] = decoder(zs[:, None], zd[np.searchsorted(dst_ids, np.asarray(negs[a:b]))])
    return pos, neg


def _deliver(summary: Dict[str, Any], split: Optional[str], pos: np.ndarray, neg: np.ndarray,
             negs: Optional[np.ndarray], m: Optional[int], endpoints: int, probabilities: bool, out: Any,
             t0: float) -> Dict[str, Any]:
    """The one ending of pair scoring: ``summary`` completed, the scores written to ``out`` or kept."""
    table = pos if negs is None else np.concatenate([pos[:, None], neg], axis=1)
    if m:
        pos, neg = pos[:len(pos) - m], pos[len(pos) - m:]
    if probabilities:
        table = (1.0 / (1.0 + np.exp(-table.astype(np.float64)))).astype(np.float32)
    summary.update(edges=split or "pairs", pairs=len(pos), negatives=0 if negs is None else int(negs.shape[1]),
                   output="probabilities" if probabilities else "scores", shape=list(table.shape), endpoints=endpoints)
    if m is not None:
        summary["shared_negatives"] = m
    if (negs is not None or m) and len(pos):
        summary["metrics"] = split_scores(pos, neg, shared=negs is None)
    if out is not None:
        sink = MemmapNpyWriter(os.fspath(out), table.shape, np.float32)
        try:
            sink.put(slice(None), table)
            summary["out"] = sink.finish()
        except BaseException:
            sink.abort()
            raise
    else:
        summary["scores"] = table
    summary["seconds"] = time.perf_counter() - t0
    return summary


# --- heterogeneous link runs: pairs of one relation S:R:D, each end's rows from its tower ---------


def exact_rows(ds: Any, tower: Any, node_type: str, ids: np.ndarray, stats: Optional[Dict[str, Any]] = None,
               **opts: Any) -> np.ndarray:
    """``tower``'s exact rows of the sorted ``ids`` of ``node_type`` (``opts``:
    :class:`~ringgnn.inference.hetero.HeteroLayerwise`'s); ``stats`` receives its ``times``."""
    tower = dense_of(tower)
    run = HeteroLayerwise(ds, tower, **opts)
    wanted = wanted_mask(ds.num_nodes_dict[node_type], ids)
    try:
        rows = write_output(run, ds.node_type(node_type), ids, "logits", tower.layers, tower.out_dim, "f32", None,
                            lambda put: run.run(tower.layers, node_type, put, wanted=wanted), {})["array"]
    finally:
        run.close()
    if stats is not None:
        stats.update(run.times)
    return rows


def split_scores(pos: np.ndarray, neg: np.ndarray, shared: bool = False) -> Dict[str, Any]:
    """``{"auc", "mrr", "hits"}`` of positives ``pos`` against their negatives ``neg`` ((n, K), or
    with ``shared`` (m,) for all of them), hits keyed by K as strings (JSON keys); NaN when empty."""
    if not len(pos):
        return dict(auc=float("nan"), mrr=float("nan"), hits={})
    s = metrics.shared_link_scores(pos, neg) if shared else metrics.link_scores(pos, neg)
    return dict(auc=s["auc"], mrr=s["mrr"], hits={str(k): v for k, v in s["hits"].items()})


def predict_link_edges(run_dir: str, edges: Any, *, dataset: Any = None, out: Optional[str] = None,
                       probabilities: bool = False, memory: Any = None, backend: str = "auto", direct: bool = False,
                       quiet: bool = True, read: Optional[Tuple[str, Mapping[str, Any]]] = None,
                       hidden_dtype: Optional[str] = None, at: Optional[int] = None) -> Dict[str, Any]:
    """:func:`predict_edges` for a typed link run (or a homogeneous one at
    times, ``node:to:node``), without PyTorch (``read``: the checkpoint as arrays).
    ``hidden_dtype``: f32 unless given."""

    if out is not None and not os.fspath(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")
    read = read if read is not None else read_checkpoint(run_dir, "RUN_DIR", arrays=True)
    ds, relation, towers, path = link_towers(read, dataset)
    cfg, model = read[1]["args"]["hetero_link"], read[1].get("model") or {}
    decoder = decoder_from_state(cfg["decoder"], model, int(cfg["src"]["hidden"]), path,
                                 f"{ds.path}; give the dataset it was trained on")
    rel = ds.relation(relation)
    s_type, _, d_type = parse_edge_type(relation)
    pairs = _options.edge_pairs(rel, edges, "--edges", counts=(ds.num_nodes_dict[s_type], ds.num_nodes_dict[d_type]),
                                types=(s_type, d_type))
    split = _options.stored_split(rel, edges)
    negs = None
    if split is not None and rel.manifest["edge_splits"][split]["negatives"]:
        negs = rel.edge_negatives(split)
    t0 = time.perf_counter()
    src_ids = np.unique(pairs[0])
    dst_ids = np.unique(pairs[1] if negs is None else np.concatenate([pairs[1], negs.ravel()]))
    if s_type == d_type:
        src_ids = dst_ids = np.union1d(src_ids, dst_ids)
    work_dir = os.path.dirname(os.path.abspath(out)) if out is not None else os.path.abspath(run_dir)
    opts = dict(memory=_options.size(memory, "--memory"), backend=backend, direct=direct, quiet=quiet,
                work_dir=work_dir, hidden_dtype=hidden_dtype, at=at)
    times: Dict[str, Any] = {}
    zs = exact_rows(ds, towers["src"], s_type, src_ids, stats=times, **opts)
    zd = zs if s_type == d_type else exact_rows(ds, towers.get("dst", towers["src"]), d_type, dst_ids, **opts)
    pos, neg = decode_pairs(decoder, zs, src_ids, pairs, negs, dst=(zd, dst_ids))
    summary: Dict[str, Any] = dict(checkpoint=path, dataset=os.path.abspath(ds.path), relation=relation, **times)
    return _deliver(summary, split, pos, neg, negs, None, int(len(src_ids) + (0 if s_type == d_type else len(dst_ids))),
                    probabilities, out, t0)
