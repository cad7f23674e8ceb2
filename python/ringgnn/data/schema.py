"""The structure of a heterogeneous model without PyTorch: relation names, which types each
layer computes, the checks of a model's configuration (shared by the torch and numpy models)."""

from __future__ import annotations

from collections import deque
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

EdgeType = Tuple[str, str, str]

#: The node type and the relation of a homogeneous dataset seen as a typed one (PyG's names for them).
HOMOGENEOUS_TYPE = "node"
HOMOGENEOUS_RELATION = "node:to:node"

#: The encoders ``model=`` names.
HETERO_MODELS = ("sage", "rgcn")
#: What :meth:`HeteroModel.config` holds: the constructor's arguments.
CONFIG_KEYS = ("node_types", "edge_types", "in_dims", "num_nodes", "target", "hidden", "out_dim", "layers",
               "model", "embed_dim", "dropout", "external")


def edge_type_str(edge_type: Union[EdgeType, str]) -> str:
    """``"src:rel:dst"``, GraphBolt's spelling of a relation, of a tuple or such a string."""
    return edge_type if isinstance(edge_type, str) else ":".join(edge_type)


def parse_edge_type(edge_type: Union[EdgeType, Sequence[str], str]) -> EdgeType:
    """The ``(src, rel, dst)`` tuple of ``"src:rel:dst"`` or of a 3-sequence (a JSON list)."""
    parts = edge_type.split(":") if isinstance(edge_type, str) else list(edge_type)
    if len(parts) != 3 or not all(isinstance(p, str) and p for p in parts):
        raise ValueError(f"edge type {edge_type!r}: expected 'src:rel:dst' or (src, rel, dst), three non-empty names")
    return (parts[0], parts[1], parts[2])


def target_distances(node_types: Sequence[str], edge_types: Sequence[EdgeType], target: str) -> Dict[str, int]:
    """Per type from which the target can be reached along relations, the fewest hops (0 for
    the target): the layers a type's rows still have to travel."""
    into: Dict[str, List[str]] = {t: [] for t in node_types}
    for s, _, d in edge_types:
        into[d].append(s)
    dist, queue = {target: 0}, deque([target])
    while queue:
        t = queue.popleft()
        for s in into[t]:
            if s not in dist:
                dist[s] = dist[t] + 1
                queue.append(s)
    return dist


def computed_types(node_types: Sequence[str], edge_types: Sequence[EdgeType], target: str,
                   layers: int) -> List[List[str]]:
    """Per layer ``l = 0..layers``, the types layer ``l`` needs as input (``l = 0``: the input
    rows): those within ``layers - l`` hops of the target."""
    hops = target_distances(node_types, edge_types, target)
    return [[t for t in node_types if hops.get(t, layers + 1) <= layers - l] for l in range(layers + 1)]


def check_config(node_types: List[str], edge_types: List[EdgeType], in_dims: Mapping[str, Optional[int]],
                 num_nodes: Mapping[str, int], target: str, hidden: int, out_dim: int, layers: int, model: str,
                 embed_dim: Optional[int], dropout: float) -> None:
    """Errors that name the argument at fault, before any module is built."""
    if model not in HETERO_MODELS:
        raise ValueError(f"model {model!r}: expected one of {list(HETERO_MODELS)}")
    if len(set(node_types)) != len(node_types) or not node_types:
        raise ValueError(f"node_types {node_types}: expected distinct names, at least one")
    for t in node_types:
        # ':' separates the parts of a relation's name, '.' the parts of a state dict key.
        if not isinstance(t, str) or not t or ":" in t or "." in t:
            raise ValueError(f"node type {t!r}: expected a non-empty name without ':' or '.'")
    for et in edge_types:
        if et[0] not in node_types or et[2] not in node_types or "." in et[1]:
            raise ValueError(f"edge type {edge_type_str(et)!r}: its source and destination must be among "
                             f"node_types {node_types}, its relation name without '.'")
    if len(set(edge_types)) != len(edge_types):
        raise ValueError("edge_types: a relation is listed twice")
    if target not in node_types:
        raise ValueError(f"target {target!r}: not one of node_types {node_types}")
    if not any(d == target for _, _, d in edge_types):
        raise ValueError(f"target {target!r}: no relation enters it, so no neighbor can inform it; "
                         f"add the reverse relations (e.g. 'dst:rev_rel:src')")
    for t in node_types:
        if t not in in_dims:
            raise ValueError(f"in_dims: no entry for node type {t!r} (an int, or None for a featureless type)")
        d = in_dims[t]
        if d is not None and (int(d) != d or d <= 0):
            raise ValueError(f"in_dims[{t!r}] = {d!r}: expected a positive int or None")
        if d is None and int(num_nodes.get(t, 0)) <= 0:
            raise ValueError(f"num_nodes[{t!r}]: featureless type {t!r} needs its node count for its embedding table")
    for name, v in (("hidden", hidden), ("out_dim", out_dim), ("layers", layers)):
        if int(v) != v or v <= 0:
            raise ValueError(f"{name} = {v!r}: expected a positive int")
    if embed_dim is not None and (int(embed_dim) != embed_dim or embed_dim <= 0):
        raise ValueError(f"embed_dim = {embed_dim!r}: expected a positive int or None (then hidden)")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout = {dropout!r}: expected a probability in [0, 1)")
