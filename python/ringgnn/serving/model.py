"""The models ``ringgnn serve`` runs on sampled neighborhoods: a homogeneous run's (:class:`Model`)
and a heterogeneous run's (:class:`HeteroModelRun`), both answering ``target``, ``layer_of`` and
``answer``. PyTorch is imported only where a model is loaded or run."""

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
        self.task, self.decoder = ckpt.task, ckpt.decoder
        self.decoder_kind = ckpt.args.get("decoder") if self.task == "link" else None
        self.classes = ds.num_classes if self.task == "node" else None

    def layer_of(self, t: None) -> int:
        """What Embed returns: a link model's output, a node model's last hidden layer."""
        return self.layers if self.task == "link" else self.layers - 1

    def run(self, sub: Dict[str, Any], x: np.ndarray) -> Tuple[Any, Any]:
        """(logits, input of the last layer) of the distinct seeds of the sampled subgraph
        ``sub`` (the dict of ``_core.Engine.sample``) with feature rows ``x``."""
        import torch

        counts = list(sub["num_sampled_nodes"])
        batch = argparse.Namespace(
            x=torch.from_numpy(x), edge_index=torch.from_numpy(np.stack([sub["row"], sub["col"]])),
            num_sampled_nodes=counts, num_sampled_edges=list(sub["num_sampled_edges"]), batch_size=counts[0])
        logits, seen = hooked(self.net.convs[-1], lambda inp: inp[0],
                              lambda: forward(self.net, batch, "cpu", self.kind))
        return logits, seen[: counts[0]]

    def embeddings(self, sub: Dict[str, Any], x: np.ndarray) -> Any:
        """What Embed answers for the distinct seeds of ``sub`` (:meth:`layer_of`'s layer)."""
        logits, hidden = self.run(sub, x)
        return logits if self.task == "link" else hidden

    def answer(self, sub: Dict[str, Any], x: np.ndarray, t: None = None,
               layer: Optional[int] = None) -> Tuple[Any, Any, np.ndarray]:
        """(logits, rows at ``layer`` or None, node ids) of the distinct seeds of sample ``sub``."""
        logits, hidden = self.run(sub, x)
        rows = None if layer is None else logits if layer == self.layers else hidden
        return logits, rows, sub["node"][: sub["num_sampled_nodes"][0]]

    def score(self, zs: Any, zd: Any) -> Any:
        """The decoder's scores (logits) of embedding pairs ``zs[i]``, ``zd[i]``."""
        import torch

        with torch.no_grad():
            return self.decoder(zs, zd)


class HeteroModelRun:
    """A heterogeneous node run's model for inference on sampled neighborhoods of ``ds``."""

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
        """The layer whose input Embed returns for type ``t`` (0: the input rows); None when the
        model never computes ``t``."""
        below = [k for k, types in enumerate(self.net.computed[:-1]) if t in types]
        return below[-1] if below else None

    def answer(self, sub: Dict[str, Any], x: Mapping[str, np.ndarray], t: str,
               layer: Optional[int] = None) -> Tuple[Any, Any, np.ndarray]:
        """(the target's logits, type ``t``'s rows at the input of ``layer`` or None, node ids) of
        the distinct seeds of sample ``sub``."""
        s = HeteroSample(seed_type=t, node=sub["node"], num_sampled_nodes=sub["num_sampled_nodes"],
                         row=sub["row"], col=sub["col"], num_sampled_edges=sub["num_sampled_edges"], edge=None)
        logits, rows = self.run(s, x, layer)
        bs = s.batch_size
        return logits[:bs], None if rows is None else rows[:bs], s.node[t][:bs]

    def run(self, s: HeteroSample, x: Mapping[str, np.ndarray], layer: Optional[int] = None) -> Tuple[Any, Any]:
        """(the target's logits, the seed type's rows at the input of ``layer`` or None) of ``s``."""
        import torch

        edges = {r: torch.from_numpy(s.edge_index(r)) for r in s.row}
        n_id = {t: torch.from_numpy(v) for t, v in s.node.items()}
        return hooked(None if layer is None else self.net.convs[layer], lambda inp: inp[0][s.seed_type],
                      lambda: self.net({t: torch.from_numpy(v) for t, v in x.items()}, edges, n_id))


def hooked(module: Any, pick: Any, call: Any) -> Tuple[Any, Any]:
    """(``call()`` without gradients, ``pick(inputs)`` of ``module``'s forward in this thread, or
    None): the hook sees this thread's forward only, as concurrent requests share the model."""
    import torch

    seen: List[Any] = []
    me = threading.get_ident()

    def hook(_module: Any, inputs: Any) -> None:
        if threading.get_ident() == me:
            seen.append(pick(inputs))

    handle = None if module is None else module.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            out = call()
    finally:
        if handle is not None:
            handle.remove()
    return out, (seen[0] if seen else None)


def request_order(nodes: np.ndarray, sampled: np.ndarray, distinct: int, times: Optional[np.ndarray] = None,
                  sampled_times: Optional[np.ndarray] = None) -> np.ndarray:
    """Each requested node's row among the ``distinct`` first entries of ``sampled``; at times a
    seed is a (node, time)."""
    if times is None:
        index = {int(v): i for i, v in enumerate(sampled[:distinct])}
        return np.fromiter((index[int(v)] for v in nodes), dtype=np.int64, count=len(nodes))
    keyed = {(int(v), int(t)): i for i, (v, t) in enumerate(zip(sampled[:distinct], sampled_times[:distinct]))}
    return np.fromiter((keyed[int(v), int(t)] for v, t in zip(nodes, times)), dtype=np.int64, count=len(nodes))
