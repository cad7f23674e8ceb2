""":class:`HeteroSample`, the sampled heterogeneous mini-batch that
:class:`ringgnn.HeteroNeighborSampler` returns and the serving client decodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .._core import InputError
from ..data.schema import parse_edge_type


@dataclass
class HeteroSample:
    """One sampled heterogeneous mini-batch (numpy int64 arrays), in PyG's layout per type and
    relation; :meth:`to_hetero_data` makes a ``HeteroData``.

    ``seed_types``: the node types seeded, in the order given (seeds of several types come from
    :meth:`HeteroNeighborSampler.sample_typed`); empty means ``(seed_type,)``. ``seed_type`` is
    the first of them."""

    seed_type: str
    node: Dict[str, np.ndarray]
    num_sampled_nodes: Dict[str, List[int]]
    row: Dict[str, np.ndarray]
    col: Dict[str, np.ndarray]
    num_sampled_edges: Dict[str, List[int]]
    edge: Optional[Dict[str, np.ndarray]] = None
    seed_types: Tuple[str, ...] = ()
    #: Sampled at seed times: per type, parallel to ``node``, the seed time each node was
    #: sampled at (its subgraph's); None otherwise.
    seed_time: Optional[Dict[str, np.ndarray]] = None

    def __post_init__(self) -> None:
        if not self.seed_types:
            self.seed_types = (self.seed_type,)

    @property
    def batch_sizes(self) -> Dict[str, int]:
        """Distinct seeds of each seeded type: the first ``batch_sizes[t]`` entries of
        ``node[t]``."""
        return {t: self.num_sampled_nodes[t][0] for t in self.seed_types}

    @property
    def batch_size(self) -> int:
        """Distinct seeds: the first ``batch_size`` entries of ``node[seed_type]`` (a sample with
        seeds of several types has one per type: :attr:`batch_sizes`)."""
        if len(self.seed_types) > 1:
            raise InputError(f"this sample has seeds of several types ({', '.join(self.seed_types)}): "
                             "use batch_sizes, one per type")
        return self.num_sampled_nodes[self.seed_type][0]

    def edge_index(self, relation: str) -> np.ndarray:
        return np.stack([self.row[relation], self.col[relation]])

    def to_hetero_data(self, x: Optional[Mapping[str, Any]] = None, y: Any = None,
                       input_id: Optional[Mapping[str, Any]] = None) -> Any:
        """A ``torch_geometric.data.HeteroData``: per type ``n_id`` and ``num_sampled_nodes``,
        ``seed_time`` when sampled at times, ``x`` where given; per edge type ``edge_index``,
        ``num_sampled_edges`` (and ``e_id`` with edge ids); each seeded type's ``batch_size`` and
        ``input_id`` where given; ``y`` if given: the seed type's labels, or a dict per type."""
        import torch
        from torch_geometric.data import HeteroData

        def tensor(v: Any) -> Any:
            return v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v))

        data = HeteroData()
        for t, ids in self.node.items():
            data[t].n_id = torch.from_numpy(ids)
            data[t].num_sampled_nodes = list(self.num_sampled_nodes[t])
            data[t].num_nodes = len(ids)
            if self.seed_time is not None:
                data[t].seed_time = torch.from_numpy(self.seed_time[t])
            if x is not None and t in x:
                data[t].x = tensor(x[t])
        for r in self.row:
            et = parse_edge_type(r)
            data[et].edge_index = torch.from_numpy(self.edge_index(r))
            data[et].num_sampled_edges = list(self.num_sampled_edges[r])
            if self.edge is not None:
                data[et].e_id = torch.from_numpy(self.edge[r])
        for t, n in self.batch_sizes.items():
            data[t].batch_size = n
        for t, ids in (input_id or {}).items():
            data[t].input_id = tensor(ids)
        for t, v in (y.items() if isinstance(y, Mapping) else [] if y is None else [(self.seed_type, y)]):
            data[t].y = tensor(v)
        return data
