"""The encoders (PyG's ``GraphSAGE``, ``GCN``, ``GAT``: :func:`build_model`), their
forward on a sampled batch (:func:`forward`, the seeds' rows), the training step's memory bound
(:func:`activation_bytes`), and link prediction's decoders on the encoder's rows
(:class:`LinkModel`: ``dot`` or ``mlp`` on the element-wise product), which score rows that
broadcast: ``(m, d)`` with ``(m, d)``, or ``(n, 1, d)`` with ``(n, K, d)``."""

from __future__ import annotations

from typing import Any, Sequence

from ..data.dataset import Dataset

#: The encoders ``--model`` names.
MODELS = ("sage", "gcn", "gat")
#: The link decoders ``--decoder`` names.
DECODERS = ("dot", "mlp")


def build_model(kind: str, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float) -> Any:
    """PyG's ``GraphSAGE``, ``GCN`` or ``GAT``: ``layers`` convolutions, ReLU and dropout between."""
    from torch_geometric.nn import GAT, GCN, GraphSAGE

    cls = {"sage": GraphSAGE, "gcn": GCN, "gat": GAT}[kind]
    return cls(in_dim, hidden, layers, out_dim, dropout=dropout, act="relu")


def build_decoder(kind: str, dim: int) -> Any:
    """A decoder of ``dim``-wide embeddings: ``dot`` (no parameters) or ``mlp``."""
    import torch

    class Dot(torch.nn.Module):
        def forward(self, zs: Any, zd: Any) -> Any:
            return (zs * zd).sum(-1)

    class MLP(torch.nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.lin1 = torch.nn.Linear(d, d)
            self.lin2 = torch.nn.Linear(d, 1)

        def forward(self, zs: Any, zd: Any) -> Any:
            return self.lin2(torch.relu(self.lin1(zs * zd))).squeeze(-1)

    if kind == "dot":
        return Dot()
    if kind == "mlp":
        return MLP(dim)
    raise ValueError(f"unknown decoder {kind!r}")


def build_link_model(kind: str, in_dim: int, hidden: int, layers: int, dropout: float, decoder: str) -> Any:
    """A :class:`LinkModel`: encoder ``kind`` giving ``hidden``-wide embeddings, and ``decoder``."""
    import torch

    class LinkModel(torch.nn.Module):
        """``encoder`` and ``decoder`` (state keys ``encoder.*`` and
        ``decoder.*``); its forward scores pairs of rows (``src``, ``dst``) in one call, so a
        ``DistributedDataParallel`` wrapper sees the whole step."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = build_model(kind, in_dim, hidden, hidden, layers, dropout)
            self.decoder = build_decoder(decoder, hidden)

        def tower(self, side: str) -> Any:
            """The encoder of the ``side`` ends of pairs: the one encoder of both."""
            return self.encoder

        def forward(self, x: Any, edge_index: Any, src: Any, dst: Any, **kwargs: Any) -> Any:
            z = self.encoder(x, edge_index, **kwargs)
            return self.decoder(z[src], z[dst])

    return LinkModel()


def forward(net: Any, batch: Any, device: Any, kind: str, *extra: Any) -> Any:
    """The rows of ``batch``'s seeds (its first ``batch_size`` nodes) by encoder ``net``
    on ``device``; with ``extra`` (a :class:`LinkModel`'s row positions), ``net``'s scores."""
    x, edge_index = batch.x.to(device), batch.edge_index.to(device)
    if kind == "sage":
        # Trim layer by layer (exact for GraphSAGE: the seeds' outputs do not change).
        out = net(x, edge_index, *extra, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                  num_sampled_edges_per_hop=batch.num_sampled_edges)
    else:
        out = net(x, edge_index, *extra)
    return out if extra else out[: batch.batch_size]


def activation_bytes(model: str, ds: Dataset, fanouts: Sequence[int], batch_size: int, hidden: int) -> int:
    """Upper bound on one training step's activation memory: per layer, the gathered
    source rows, outputs, gradients and dropout masks (GraphSAGE trimmed layer by layer)."""
    dim = ds.feature_dim or 0
    hops_nodes, hops_edges, frontier = [batch_size], [0], batch_size
    for f in fanouts:
        frontier *= ds.num_nodes if f < 0 else f
        hops_nodes.append(frontier)
        hops_edges.append(frontier)
    n_all = min(ds.num_nodes, sum(hops_nodes))
    total, L = 0, len(fanouts)
    for layer in range(1, L + 1):
        d_in = dim if layer == 1 else hidden
        keep = L - layer + 1 if model == "sage" else L  # hops whose edges this layer uses
        edges = min(ds.num_edges, sum(hops_edges[: keep + 1]))
        nodes = min(n_all, sum(hops_nodes[:keep])) if model == "sage" else n_all
        total += edges * d_in * 4 + nodes * max(hidden, d_in) * 4 * 3
    return int(total)
