"""Heterogeneous models: :class:`HeteroModel` (``sage``: ``to_hetero`` GraphSAGE, mean
over relations; ``rgcn``: R-GCN) giving the logits of one target type, and the batch's tensors it
takes (:func:`hetero_batch_to_dicts`). docs/ARCHITECTURE.md "Heterogeneous graphs"."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch_geometric.utils import trim_to_layer

from ..data.schema import CONFIG_KEYS, EdgeType, edge_type_str, parse_edge_type
from .hetero_dense import TypedStructure, config_keys


class _Relation(torch.nn.Module):
    """One relation's ``SAGEConv`` (R-GCN's: without root weight nor bias)."""

    def __init__(self, kind: str, in_src: int, in_dst: int, out: int):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        if kind == "rgcn":
            self.conv = SAGEConv(in_src, out, aggr="mean", root_weight=False, bias=False)
        else:
            self.conv = SAGEConv((in_src, in_dst), out, aggr="mean")

    def forward(self, x: Tuple[torch.Tensor, torch.Tensor], edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv(x, edge_index, size=(x[0].size(0), x[1].size(0)))


class _Layer(torch.nn.Module):
    """One layer: a module per relation (``rels``) and the root terms (``roots``)."""

    def __init__(self, kind: str, types: Sequence[str], edge_types: Sequence[EdgeType], roots: Sequence[str],
                 dims: Mapping[str, int], out: int):
        super().__init__()
        self.kind, self.types, self.edge_types = kind, list(types), list(edge_types)
        self.rels = torch.nn.ModuleDict({edge_type_str((s, r, d)): _Relation(kind, dims[s], dims[d], out)
                                         for s, r, d in self.edge_types})
        self.roots = torch.nn.ModuleDict({t: torch.nn.Linear(dims[t], out) for t in roots})

    def forward(self, h: Mapping[str, torch.Tensor], edges: Mapping[EdgeType, torch.Tensor]) -> Dict[str, torch.Tensor]:
        parts: Dict[str, List[torch.Tensor]] = {t: [] for t in self.types}
        for et in self.edge_types:
            s, _, d = et
            ei = edges.get(et)
            if ei is None:  # not sampled in this batch: no edges
                ei = torch.empty(2, 0, dtype=torch.long, device=h[d].device)
            parts[d].append(self.rels[edge_type_str(et)]((h[s], h[d]), ei))
        out = {}
        for t, msgs in parts.items():
            if self.kind == "rgcn":
                out[t] = self.roots[t](h[t]) + sum(msgs)
            else:
                out[t] = torch.stack(msgs).mean(0) if msgs else self.roots[t](h[t])
        return out


class HeteroModel(torch.nn.Module, TypedStructure):
    """An encoder of a heterogeneous batch: logits ``[n, out_dim]`` of its ``n``
    nodes of type ``target``. For node ``i`` of type ``t``, ``N_r(i)`` its in-neighbors by relation
    ``r`` into ``t`` (an empty mean is 0):

    * ``rgcn``: ``h_i' = W_0^t h_i + b^t + sum_r W_r mean_{j in N_r(i)} h_j``;
    * ``sage``: ``h_i' = mean_r (W_l^r mean_{j in N_r(i)} h_j + b^r + W_r^r h_i)``; a type no
      relation enters gets ``W h_i + b``.

    ReLU and dropout follow every layer but the last. Layer ``l`` computes only the types within
    ``layers - l`` hops of the target. A type with features feeds ``x[t]`` directly; a featureless
    one (``in_dims[t] is None``) has an ``Embedding(num_nodes[t], embed_dim or hidden)`` indexed by
    ``n_id``, unless ``external``: then its rows come in ``x_dict[t]`` or from ``tables[t]``."""

    def __init__(self, node_types: Sequence[str], edge_types: Sequence[Union[EdgeType, str]],
                 in_dims: Mapping[str, Optional[int]], num_nodes: Mapping[str, int], target: str, hidden: int,
                 out_dim: int, layers: int, model: str = "sage", embed_dim: Optional[int] = None,
                 dropout: float = 0.5, external: Sequence[str] = ()):
        super().__init__()
        self.configure(node_types, edge_types, in_dims, num_nodes, target, hidden, out_dim, layers, model, embed_dim,
                       dropout, external)
        featureless = [u for u in self.node_types if self.in_dims[u] is None]
        for t in self.external:
            if t not in featureless:
                raise ValueError(f"external {t!r}: only a featureless node type's embedding table can be outside the "
                                 f"model (featureless types: {featureless})")
        self.embeddings = torch.nn.ModuleDict({t: torch.nn.Embedding(self.num_nodes[t], self.width)
                                               for t in self.held_tables()})
        #: Readers of the external tables' rows (``gather(ids)``), for inference and serving.
        self.tables: Dict[str, Any] = {}
        self.convs = torch.nn.ModuleList(_Layer(model, self.computed[k], rels, roots, dims, out)
                                         for k, out, dims, rels, roots in self.layer_parts())

    def config(self) -> Dict[str, Any]:
        """The constructor's arguments, JSON-able (relations as ``"src:rel:dst"``)."""
        cfg = {"node_types": list(self.node_types), "edge_types": [edge_type_str(et) for et in self.edge_types],
               "in_dims": dict(self.in_dims), "num_nodes": dict(self.num_nodes), "target": self.target,
               "hidden": self.hidden, "out_dim": self.out_dim, "layers": self.layers, "model": self.model,
               "embed_dim": self.embed_dim, "dropout": self.dropout}
        if self.external:  # absent when empty: configs written before it existed stay equal
            cfg["external"] = list(self.external)
        return cfg

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "HeteroModel":
        """The model :meth:`config` describes (fresh weights: load the state dict next)."""
        unknown, missing = config_keys(cfg)
        if unknown:
            raise ValueError(f"hetero model config: unknown keys {unknown}; expected some of {list(CONFIG_KEYS)}")
        if missing:
            raise ValueError(f"hetero model config: missing keys {missing} (a config written by HeteroModel.config)")
        return cls(**cfg)

    def inputs(self, x_dict: Mapping[str, torch.Tensor],
               n_id_dict: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The first layer's rows of every type it needs: ``x_dict[t]``, or the embedding rows
        ``n_id_dict[t]`` of a featureless type; a type absent from the batch has no rows."""
        h = {}
        for t in self.computed[0]:
            x, ids = x_dict.get(t), n_id_dict.get(t)
            if t in self.embeddings:
                h[t] = self.embeddings[t].weight[:0] if ids is None else self.embeddings[t](ids)
                continue
            outside = t in self.external
            width, what = (self.width, "embedding rows") if outside else (self.in_dims[t], "features")
            if x is None and ids is not None and ids.numel():
                if not outside:
                    raise ValueError(f"batch: node type {t!r} has {ids.numel()} nodes but no features x; "
                                     f"the model was built with in_dims[{t!r}] = {self.in_dims[t]}")
                if t not in self.tables:
                    raise ValueError(f"batch: node type {t!r} has its embedding table in a file; give its rows as "
                                     f"x_dict[{t!r}] or a reader in model.tables[{t!r}]")
                x = torch.from_numpy(self.tables[t].gather(ids.cpu().numpy().astype(np.int64)))
            if x is None:
                x = torch.empty(0, width, device=next(self.parameters()).device)
            if x.dim() != 2 or x.size(1) != width:
                raise ValueError(f"batch: {what} of node type {t!r} have shape {tuple(x.shape)}, "
                                 f"the model expects [n, {width}]")
            h[t] = x
        return h

    def forward(self, x_dict: Mapping[str, torch.Tensor], edge_index_dict: Mapping[Any, torch.Tensor],
                n_id_dict: Mapping[str, torch.Tensor], hops: Optional[Tuple[Mapping[str, List[int]],
                                                                              Mapping[Any, List[int]]]] = None
                ) -> torch.Tensor:
        """Logits of the batch's target nodes (seeds first). ``edge_index_dict``:
        keyed ``(src, rel, dst)`` or ``"src:rel:dst"``, local indices; it may lack relations, not add
        ones. ``hops``: nodes per hop of each type and edges per hop of each relation; layer ``l`` then
        computes only the nodes later layers read (PyG's ``trim_to_layer``), the seeds' rows the same."""
        edges: Dict[EdgeType, torch.Tensor] = {}
        known = set(self.edge_types)
        for key, ei in edge_index_dict.items():
            et = parse_edge_type(key)
            if et not in known:
                raise ValueError(f"batch: relation {edge_type_str(et)!r} is not one of the model's "
                                 f"{[edge_type_str(e) for e in self.edge_types]}")
            edges[et] = ei
        h = self.inputs(x_dict, n_id_dict)
        nodes, per_hop = ({}, {}) if hops is None else (hops[0], {parse_edge_type(k): v for k, v in hops[1].items()})
        trim = hops is not None and set(h) <= set(nodes) and set(edges) <= set(per_hop)  # else all: no counts
        for i, conv in enumerate(self.convs):
            if trim and i:
                h, edges, _ = trim_to_layer(i, nodes, per_hop, h, edges)
            h = conv(h, edges)
            if i < len(self.convs) - 1:
                h = {t: torch.nn.functional.dropout(v.relu(), p=self.dropout, training=self.training)
                     for t, v in h.items()}
        return h[self.target]


def hetero_batch_to_dicts(data: Any, device: Any = None) -> Tuple[Dict[str, torch.Tensor],
                                                                   Dict[EdgeType, torch.Tensor],
                                                                   Dict[str, torch.Tensor]]:
    """``(x_dict, edge_index_dict, n_id_dict)`` of a PyG ``HeteroData`` batch, on ``device``."""
    def move(v: torch.Tensor) -> torch.Tensor:
        return v if device is None else v.to(device)

    x_dict = {t: move(data[t].x) for t in data.node_types if "x" in data[t]}
    n_id_dict = {t: move(data[t].n_id) for t in data.node_types if "n_id" in data[t]}
    edge_index_dict = {et: move(data[et].edge_index) for et in data.edge_types if "edge_index" in data[et]}
    return x_dict, edge_index_dict, n_id_dict
