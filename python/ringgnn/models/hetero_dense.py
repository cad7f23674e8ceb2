"""The dense parts of a heterogeneous model as numpy arrays (:class:`HeteroDense`), so
that inference of a typed run never imports PyTorch; the model and its dense parts read their
structure from the config through :class:`TypedStructure`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .._core import InputError
from ..data.schema import CONFIG_KEYS, EdgeType, check_config, computed_types, edge_type_str, parse_edge_type
from .dense import DenseLayer, Numpy, check_state, sage_finish


class TypedStructure:
    """A heterogeneous model's structure from its config (checked by
    ``data.schema.check_config``, a ``ValueError`` naming the argument): the config's arguments as
    attributes, and ``computed[l]``, the types layer ``l`` needs as input."""

    def configure(self, node_types: Sequence[str], edge_types: Sequence[Union[EdgeType, str]],
                  in_dims: Mapping[str, Optional[int]], num_nodes: Mapping[str, int], target: str, hidden: int,
                  out_dim: int, layers: int, model: str = "sage", embed_dim: Optional[int] = None,
                  dropout: float = 0.5, external: Sequence[str] = ()) -> None:
        node_types = list(node_types)
        edge_types = [parse_edge_type(et) for et in edge_types]
        check_config(node_types, edge_types, in_dims, num_nodes, target, hidden, out_dim, layers, model, embed_dim,
                     dropout)
        self.node_types, self.edge_types, self.target = node_types, edge_types, target
        self.in_dims = {t: (None if in_dims.get(t) is None else int(in_dims[t])) for t in node_types}
        self.num_nodes = {t: int(n) for t, n in num_nodes.items() if t in node_types}
        self.hidden, self.out_dim, self.layers, self.model = int(hidden), int(out_dim), int(layers), model
        self.embed_dim, self.dropout = (None if embed_dim is None else int(embed_dim)), float(dropout)
        self.external = sorted(set(external or ()))
        self.computed = computed_types(node_types, edge_types, target, layers)

    @property
    def width(self) -> int:
        """The width of a featureless type's embedding rows."""
        return self.embed_dim or self.hidden

    def layers_of(self, t: str) -> List[int]:
        """The layers (0: the inputs) that compute type ``t``."""
        return [k for k, types in enumerate(self.computed) if t in types]

    def held_tables(self) -> List[str]:
        """The featureless first-layer types whose table the model holds (not ``external``)."""
        return [t for t in self.computed[0] if self.in_dims[t] is None and t not in self.external]

    def layer_parts(self) -> Iterator[Tuple[int, int, Dict[str, int], List[EdgeType], List[str]]]:
        """Per layer ``k`` from 1: ``(k, out, dims, rels, roots)``: output width,
        input widths, relations into its types and the types with a root ``Linear``."""
        dims = {t: (self.width if self.in_dims[t] is None else self.in_dims[t]) for t in self.node_types}
        for k in range(1, self.layers + 1):
            out = self.out_dim if k == self.layers else self.hidden
            rels = [et for et in self.edge_types if et[2] in self.computed[k]]
            entered = {et[2] for et in rels}
            yield k, out, dims, rels, [t for t in self.computed[k] if self.model == "rgcn" or t not in entered]
            dims = dict.fromkeys(self.node_types, out)


@dataclass
class DenseHeteroLayer:
    """One layer: a ``SAGEConv`` per relation (``rels``) and the root ``Linear`` of each type with one (``roots``)."""

    types: List[str]
    edge_types: List[EdgeType]
    rels: Dict[str, DenseLayer]
    roots: Dict[str, Tuple[np.ndarray, np.ndarray]]


class HeteroDense(TypedStructure):
    """A :class:`~ringgnn.models.hetero.HeteroModel`'s dense parts (``convs``, ``embeddings``, ``tables``)."""

    def __init__(self, cfg: Mapping[str, Any], get: Callable[[str, tuple], Any]):
        """The model of config ``cfg``, each array of its state dict ``get(key, shape)``."""
        self.configure(**cfg)
        self.embeddings: Dict[str, np.ndarray] = {t: get(f"embeddings.{t}.weight", (self.num_nodes[t], self.width))
                                                  for t in self.held_tables()}
        self.convs: List[DenseHeteroLayer] = []
        sage = self.model == "sage"  # R-GCN's relations: lin_l only, no bias nor root weight
        for k, out, dims, rels_in, root_types in self.layer_parts():
            c, rels = f"convs.{k - 1}.", {}
            for s, r, d in rels_in:
                name = edge_type_str((s, r, d))
                rc = f"{c}rels.{name}.conv."
                w = get(rc + "lin_l.weight", (out, dims[s]))
                rels[name] = DenseLayer("sage", dims[s], out, "mean", w,
                                        get(rc + "lin_l.bias", (out,)) if sage else None,
                                        get(rc + "lin_r.weight", (out, dims[d])) if sage else None)
            roots = {t: (get(f"{c}roots.{t}.weight", (out, dims[t])), get(f"{c}roots.{t}.bias", (out,)))
                     for t in root_types}
            self.convs.append(DenseHeteroLayer(list(self.computed[k]), rels_in, rels, roots))
        #: Readers of the external tables' rows (``gather(ids)``): the checkpoint's files.
        self.tables: Dict[str, Any] = {}

    # -- building ---------------------------------------------------------------------------------

    @classmethod
    def from_state(cls, cfg: Mapping[str, Any], state: Mapping[str, Any], path: str, fits: str = "its config",
                   prefix: str = "") -> "HeteroDense":
        """The dense parts of config ``cfg`` from a state dict of numpy arrays
        (``prefix``: a link tower's keys), checked key by key and shape by shape: what does not fit is an
        :class:`InputError` naming ``path``."""
        unknown, missing = config_keys(cfg)
        if unknown or missing:
            raise InputError(f"{path}: not a readable heterogeneous model (config keys: unknown {unknown}, missing "
                             f"{missing})")
        want: Dict[str, tuple] = {}
        try:  # the keys and shapes of its state dict
            cls(cfg, lambda k, shape: want.setdefault(prefix + k, shape))
        except (ValueError, TypeError, KeyError) as e:
            raise InputError(f"{path}: not a readable heterogeneous model ({e})") from None
        got = check_state(want, dict(state), path, fits, prefix)
        return cls(cfg, lambda k, _: got[prefix + k])

    @classmethod
    def from_module(cls, net: Any) -> "HeteroDense":
        """The dense parts of a live ``HeteroModel`` (weights on the CPU) and its table readers."""
        state = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
        dense = cls(net.config(), lambda k, _: np.ascontiguousarray(state[k], dtype=np.float32))
        dense.tables = dict(net.tables)
        return dense

    # -- the arithmetic ---------------------------------------------------------------------------

    def block(self, layer: int, d: str, x_d: np.ndarray,
              sums: Sequence[Tuple[EdgeType, np.ndarray, np.ndarray]]) -> np.ndarray:
        """Layer ``layer``'s outputs (before the activation) of a block of type
        ``d``: ``x_d`` its rows, ``sums`` per relation into ``d`` (edge type, sums of in-neighbors' rows,
        in-degrees); ``_Layer.forward``'s arithmetic."""
        conv = self.convs[layer - 1]
        out, count = None, 0
        for et, acc, deg in sums:
            term = sage_finish(conv.rels[edge_type_str(et)], Numpy, acc, deg, x_d, False)
            out = term if out is None else out + term
            count += 1
        if self.model == "rgcn" or out is None:
            w, b = conv.roots[d]
            root = x_d @ w.T + b
            return root if out is None else root + out
        return out / np.float32(count)


def config_keys(cfg: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(the unknown keys of a model's config, the required ones it lacks)."""
    return sorted(set(cfg) - set(CONFIG_KEYS)), [k for k in CONFIG_KEYS[:8] if k not in cfg]


def dense_of(net: Any) -> HeteroDense:
    """``net`` as a :class:`HeteroDense`: itself, or a live ``HeteroModel``'s dense parts."""
    return net if isinstance(net, HeteroDense) else HeteroDense.from_module(net)
