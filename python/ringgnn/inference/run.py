"""Layer-wise inference of a homogeneous run (``ringgnn.infer``, ``ringgnn predict``/``embed``):
every node's output of a trained model, exact and out of core, on the engine of :mod:`.engine`.
Typed runs: :mod:`.hetero`. docs/INFERENCE.md."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from .. import _options
from .._core import InputError
from ..data.dataset import Dataset, open_homogeneous
from ..models.checkpoints import Checkpoint, load_checkpoint, read_checkpoint
from .engine import LayerwiseInference
from .rows import (check_output, link_outputs, node_selection, only_embeddings, trained_on, wanted_mask,
                   write_output)


def infer(run_dir: str, *, dataset: Union[None, str, Dataset] = None, nodes: Union[None, str, Any] = None,
          layer: Optional[int] = None, output: str = "logits", out: Optional[str] = None, dtype: str = "f32",
          memory: Union[None, int, str] = None, backend: str = "auto", direct: bool = False, keep: bool = False,
          quiet: bool = True, log: Callable[[str], None] = lambda s: None,
          block_edges: Optional[int] = None, strategy: str = "grid",
          grid_nodes: Optional[int] = None, aggregate: Optional[str] = None,
          hidden_dtype: Optional[str] = None, device: Optional[str] = None, scheme: Optional[str] = None,
          parts: Optional[int] = None, at: Optional[int] = None) -> Union[np.ndarray, Dict[str, Any]]:
    """Exact layer-wise inference of the model of a ``ringgnn train`` run.

    ``output``: ``"logits"``, ``"probabilities"``, ``"predictions"`` (argmax, int64) or
    ``"embeddings"`` (layer ``layer``'s output, activated as the next layer sees it; default the
    last hidden layer of a node run, the last layer of a link run). A link run refuses
    ``"predictions"`` and ``"probabilities"``. ``nodes``: ``"all"``/None, a split name, a ``.npy``
    file or an array of node ids (rows in that order). With ``out`` the ``.npy`` is written whole
    or not at all and a summary dict returned; else the array. ``memory``: the process's budget.
    ``hidden_dtype``: how hidden rows are stored between layers, ``bf16`` (default), ``f16`` or
    ``f32``. ``at``: the graph as of that time (edges not after it, from nodes not newer than it)."""
    ds, ckpt = open_run(run_dir, dataset, arrays=True)
    if ckpt.task == "link":
        link_outputs(run_dir, output)
    return run_inference(ds, ckpt, node_selection(ds, nodes), layer=layer, output=output, out=out, dtype=dtype,
                         memory=_options.size(memory, "memory"), backend=backend, direct=direct, keep=keep,
                         quiet=quiet, log=log, block_edges=block_edges, strategy=strategy, grid_nodes=grid_nodes,
                         aggregate=aggregate, hidden_dtype=hidden_dtype, device=device, scheme=scheme, parts=parts,
                         at=at)


def embedding_layer(ckpt: Checkpoint, layer: Optional[int]) -> int:
    """The layer whose output ``embed`` writes: ``layer``, checked, else a node run's last hidden
    layer (its last layer gives class logits) or a link run's last (the embeddings themselves)."""
    L = ckpt.layers
    upto = layer if layer is not None else (L if ckpt.task == "link" else max(1, L - 1))
    if not 1 <= upto <= L:
        raise InputError(f"--layer {upto}: the model has layers 1..{L}")
    return upto


def open_run(run_dir: str, dataset: Union[None, str, Dataset] = None,
             arrays: bool = False) -> Tuple[Dataset, Checkpoint]:
    """The dataset (default: the run's) and the loaded model of a run directory;
    ``arrays``: read without PyTorch (the model's dense parts only)."""
    read = read_checkpoint(run_dir, "RUN_DIR", arrays=arrays)
    ds = open_homogeneous(trained_on(read, dataset), "layer-wise inference")
    return ds, load_checkpoint(run_dir, ds, "RUN_DIR", read)


def run_inference(ds: Dataset, ckpt: Checkpoint, ids: Optional[np.ndarray], *, layer: Optional[int] = None,
                  output: str = "logits", out: Optional[str] = None, dtype: str = "f32", memory: Optional[int] = None,
                  backend: str = "auto", direct: bool = False, keep: bool = False, quiet: bool = True,
                  log: Callable[[str], None] = lambda s: None, block_edges: Optional[int] = None,
                  strategy: str = "grid", grid_nodes: Optional[int] = None, work_dir: Optional[str] = None,
                  stats: Optional[Dict[str, Any]] = None, aggregate: Optional[str] = None,
                  hidden_dtype: Optional[str] = None,
                  device: Optional[str] = None, scheme: Optional[str] = None,
                  parts: Optional[int] = None, at: Optional[int] = None) -> Union[np.ndarray, Dict[str, Any]]:
    """:func:`infer` for a loaded model and node ids (None: all). ``work_dir``:
    where the layer files go (default beside ``out``, else the checkpoint); ``stats`` receives the
    summary."""
    check_output(output, dtype)
    if output == "embeddings":
        upto = embedding_layer(ckpt, layer)
    else:
        only_embeddings(layer)
        upto = ckpt.layers
    run = LayerwiseInference(ds, ckpt, memory=memory, backend=backend, direct=direct,
                             work_dir=work_dir or (os.path.dirname(os.path.abspath(out)) if out else None), keep=keep,
                             quiet=quiet,
                             log=log, block_edges=block_edges, strategy=strategy, grid_nodes=grid_nodes,
                             aggregate=aggregate, hidden_dtype=hidden_dtype, device=device, scheme=scheme, parts=parts,
                             at=at)
    wanted = wanted_mask(ds.num_nodes, ids)
    try:
        summary = write_output(run, ds, ids, output, upto, run.widths[upto], dtype, out,
                               lambda put: run.run(upto, wanted, put, activate_last=output == "embeddings"),
                               dict(checkpoint=ckpt.path, dataset=os.path.abspath(ds.path), **run.times))
    finally:
        run.close()
    result = summary.pop("array", None)
    if stats is not None:
        stats.update(summary)
    return summary if out else result
