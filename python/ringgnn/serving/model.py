"""The models ``ringgnn serve`` runs on sampled neighborhoods: a homogeneous run's (:class:`Model`,
node classification or link prediction) and a heterogeneous run's (:class:`HeteroModelRun`),
each loaded from a ``ringgnn train`` run directory and checked against the served dataset.
Both answer the servicer alike: ``target`` (the node type classified; None on a homogeneous
dataset, whose nodes have none), ``layer_of`` (what Embed returns of a type) and ``answer`` (on
the engine's sample with feature rows). PyTorch is imported where a model is loaded or run, so
that a server without a model does without it."""

from __future__ import annotations

import argparse
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .._core import InputError
from ..data.dataset import Dataset, HeteroDataset
from ..inference.hetero import load_hetero_run
from ..models.checkpoints import load_checkpoint
from ..models.gnn import forward
from ..sampling.hetero import HeteroSample, relation_fanouts


class Model:
    """A ``ringgnn train`` run's model (``best.pt``, else ``last.pt``) ready for inference on
    sampled neighborhoods."""

    target = None

    def __init__(self, run_dir: str, ds: Dataset, read: Optional[Tuple[str, Dict[str, Any]]] = None):
        ckpt = load_checkpoint(run_dir, ds, "--model", read=read)
        self.kind, self.fanouts, self.hidden, self.layers = ckpt.kind, ckpt.fanouts, ckpt.hidden, ckpt.layers
        self.run_dir, self.path, self.net = run_dir, ckpt.path, ckpt.net
        #: ``node`` (the net gives class logits) or ``link`` (it gives embeddings, which
        #: ``decoder`` scores in pairs; ``decoder_kind`` names it).
        self.task, self.decoder = ckpt.task, ckpt.decoder
        self.decoder_kind = ckpt.args.get("decoder") if self.task == "link" else None
        self.classes = ds.num_classes if self.task == "node" else None

    def layer_of(self, t: None) -> int:
        """What Embed returns: a link model's output (``layers``: the embeddings its decoder
        scores), a node model's last hidden layer (the input of the last layer)."""
        return self.layers if self.task == "link" else self.layers - 1

    def run(self, sub: Dict[str, Any], x: np.ndarray) -> Tuple[Any, Any]:
        """(logits, input of the last layer) of the distinct seeds of the sampled subgraph
        ``sub`` (the dict of ``_core.Engine.sample``) with feature rows ``x``."""
        import torch

        seen: List[Any] = []
        hook = self.net.convs[-1].register_forward_pre_hook(seen_by(seen, lambda inp: inp[0]))
        counts = list(sub["num_sampled_nodes"])
        batch = argparse.Namespace(
            x=torch.from_numpy(x), edge_index=torch.from_numpy(np.stack([sub["row"], sub["col"]])),
            num_sampled_nodes=counts, num_sampled_edges=list(sub["num_sampled_edges"]), batch_size=counts[0])
        try:
            with torch.no_grad():
                logits = forward(self.net, batch, "cpu", self.kind)
        finally:
            hook.remove()
        return logits, seen[0][: counts[0]]

    def embeddings(self, sub: Dict[str, Any], x: np.ndarray) -> Any:
        """What ``Embed`` answers for the distinct seeds: a link model's last layer (the
        embeddings its decoder scores), a node model's last hidden layer."""
        logits, hidden = self.run(sub, x)
        return logits if self.task == "link" else hidden

    def answer(self, sub: Dict[str, Any], x: np.ndarray, t: None = None,
               layer: Optional[int] = None) -> Tuple[Any, Any, np.ndarray]:
        """(logits, rows at ``layer_of``'s layer when ``layer`` is given, else None, their node
        ids) of the distinct seeds of the engine's sample ``sub`` with feature rows ``x``."""
        logits, hidden = self.run(sub, x)
        rows = None if layer is None else logits if layer == self.layers else hidden
        return logits, rows, sub["node"][: sub["num_sampled_nodes"][0]]

    def score(self, zs: Any, zd: Any) -> Any:
        """The decoder's scores (logits) of embedding pairs ``zs[i]``, ``zd[i]``."""
        import torch

        with torch.no_grad():
            return self.decoder(zs, zd)


class HeteroModelRun:
    """A heterogeneous run's model (``ringgnn train DS --target TYPE``; ``best.pt``, else
    ``last.pt``) for inference on sampled neighborhoods of ``ds``, which it must fit: the same
    node types with the same counts and feature widths, the same relations, its classes."""

    task, decoder_kind = "node", None

    def __init__(self, run_dir: str, ds: HeteroDataset, read: Tuple[str, Dict[str, Any]]):
        _, net, path = load_hetero_run(run_dir, ds, read)
        args = read[1].get("args") or {}
        try:
            self.fanouts = relation_fanouts(ds, args.get("fanouts"))
        except InputError as e:
            raise InputError(f"{path}: its training fanouts do not fit {ds.path}: {e}") from None
        self.net = net.eval()
        self.kind, self.hidden, self.layers = args.get("model") or net.model, net.hidden, net.layers
        self.target, self.classes = net.target, net.out_dim
        self.run_dir, self.path = run_dir, path

    def layer_of(self, t: str) -> Optional[int]:
        """The layer whose input Embed returns for type ``t``: the last below the output layer
        that has rows of ``t`` (for the target, the input of the last layer; 0: the input rows);
        None when the model never computes ``t`` (too far from the target)."""
        below = [k for k, types in enumerate(self.net.computed[:-1]) if t in types]
        return below[-1] if below else None

    def answer(self, sub: Dict[str, Any], x: Mapping[str, np.ndarray], t: str,
               layer: Optional[int] = None) -> Tuple[Any, Any, np.ndarray]:
        """(the target's logits, type ``t``'s rows at the input of layer ``layer`` or None, their
        node ids) of the distinct seeds (of type ``t``) of the engine's sample ``sub`` with
        feature rows ``x``."""
        s = HeteroSample(seed_type=t, node=sub["node"], num_sampled_nodes=sub["num_sampled_nodes"],
                         row=sub["row"], col=sub["col"], num_sampled_edges=sub["num_sampled_edges"], edge=None)
        logits, rows = self.run(s, x, layer)
        bs = s.batch_size
        return logits[:bs], None if rows is None else rows[:bs], s.node[t][:bs]

    def run(self, s: HeteroSample, x: Mapping[str, np.ndarray], layer: Optional[int] = None) -> Tuple[Any, Any]:
        """(the target's logits, ``s.seed_type``'s rows at the input of layer ``layer`` or None)
        for every row of the sampled batch ``s`` with feature rows ``x`` (eval mode)."""
        import torch

        seen: List[Any] = []
        hook = None
        if layer is not None:
            hook = self.net.convs[layer].register_forward_pre_hook(seen_by(seen, lambda inp: inp[0][s.seed_type]))
        edges = {r: torch.from_numpy(s.edge_index(r)) for r in s.row}
        n_id = {t: torch.from_numpy(v) for t, v in s.node.items()}
        try:
            with torch.no_grad():
                logits = self.net({t: torch.from_numpy(v) for t, v in x.items()}, edges, n_id)
        finally:
            if hook is not None:
                hook.remove()
        return logits, (seen[0] if seen else None)


def seen_by(seen: List[Any], pick) -> Any:
    """A forward pre-hook that appends ``pick(inputs)`` to ``seen`` for the calling thread's
    forward only: hooks belong to the shared model, and concurrent requests run it at once
    (PyTorch releases the GIL in its kernels)."""
    me = threading.get_ident()

    def hook(_module: Any, inputs: Any) -> None:
        if threading.get_ident() == me:
            seen.append(pick(inputs))

    return hook


def request_order(nodes: np.ndarray, sampled: np.ndarray, distinct: int, times: Optional[np.ndarray] = None,
                  sampled_times: Optional[np.ndarray] = None) -> np.ndarray:
    """For each requested node, its row among the ``distinct`` first entries of ``sampled`` (the
    distinct seeds in first-occurrence order). Sampled at times (``times`` of the requested
    nodes, ``sampled_times`` of the entries of ``sampled``), a seed is a (node, time): a node
    asked for at two times has two rows."""
    if times is None:
        index = {int(v): i for i, v in enumerate(sampled[:distinct])}
        return np.fromiter((index[int(v)] for v in nodes), dtype=np.int64, count=len(nodes))
    keyed = {(int(v), int(t)): i for i, (v, t) in enumerate(zip(sampled[:distinct], sampled_times[:distinct]))}
    return np.fromiter((keyed[int(v), int(t)] for v, t in zip(nodes, times)), dtype=np.int64, count=len(nodes))
