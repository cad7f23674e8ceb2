"""The models: encoders that turn a sampled neighborhood into one row per seed.

The encoders are PyG's ``GraphSAGE`` (default), ``GCN`` and ``GAT`` (``SAGEConv``/``GCNConv``/
``GATConv`` layers, one attention head), built by :func:`build_model`; :func:`forward` runs one on
a sampled batch and keeps the seeds' rows (they come first), and :func:`activation_bytes` bounds
the memory of one training step for the loader's budget. A task (``ringgnn.training.tasks``) says what the
rows mean: for node classification the encoder's last layer gives the class logits itself; link
prediction puts a *decoder* on top of the encoder's rows (:class:`LinkModel`): ``dot``, the
inner product of the two endpoints' embeddings, or ``mlp``, a two-layer perceptron on their
element-wise product (PyG's link-prediction examples use both). Decoders score pairs of rows
that broadcast: ``(m, d)`` with ``(m, d)``, or ``(n, 1, d)`` with ``(n, K, d)`` for K candidates
per source.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..data.dataset import Dataset

#: The encoders ``--model`` names.
MODELS = ("sage", "gcn", "gat")
#: The link decoders ``--decoder`` names.
DECODERS = ("dot", "mlp")


def build_model(kind: str, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float) -> Any:
    """PyG's ``GraphSAGE``, ``GCN`` or ``GAT`` (``SAGEConv``/``GCNConv``/``GATConv`` layers, one
    attention head): ``layers`` convolutions with ReLU and dropout between them."""
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
    """A :class:`LinkModel`: encoder ``kind`` whose last layer gives ``hidden``-wide embeddings,
    and decoder ``decoder``."""
    import torch

    class LinkModel(torch.nn.Module):
        """``encoder`` (the node embeddings) and ``decoder`` (a score per pair of embeddings):
        a checkpoint's state dict holds both, as ``encoder.*`` and ``decoder.*``. Its forward
        scores pairs of rows of the encoder's output (``src``, ``dst``: row positions), in one
        call, so that a ``DistributedDataParallel`` wrapper sees the whole step."""

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
    """The rows of ``batch``'s seeds (its first ``batch_size`` nodes) of encoder ``net`` of kind
    ``kind``, on ``device``; with ``extra`` (a :class:`LinkModel`'s row positions), what ``net``
    returns for them."""
    x, edge_index = batch.x.to(device), batch.edge_index.to(device)
    if kind == "sage":
        # Trim layer by layer (exact for GraphSAGE: the seeds' outputs do not change).
        out = net(x, edge_index, *extra, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                  num_sampled_edges_per_hop=batch.num_sampled_edges)
    else:
        out = net(x, edge_index, *extra)
    return out if extra else out[: batch.batch_size]


def activation_bytes(model: str, ds: Dataset, fanouts: Sequence[int], batch_size: int, hidden: int) -> int:
    """Upper bound on the memory of one training step's activations (forward and backward):
    per layer, the gathered source rows of its edges (PyG's message passing materialises
    ``x[edge_index[0]]``), and its outputs, their gradients and dropout masks. GraphSAGE is
    trimmed layer by layer (PyG's ``num_sampled_nodes_per_hop``): layer ``l`` only computes the
    nodes that later layers need."""
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
