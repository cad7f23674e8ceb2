"""The dense parts of a heterogeneous model (``ringgnn.models.hetero.HeteroModel``) as numpy
arrays: what layer-wise inference of a heterogeneous run (``ringgnn.inference.hetero``) runs on the
CPU, so that ``ringgnn predict``/``embed`` of such a run and ``predict --edges`` of a
heterogeneous link run never import PyTorch (``docs/INFERENCE.md``).

A :class:`HeteroDense` has the model's structure (``ringgnn.data.schema``: types, relations,
the types each layer computes) and, per layer, each relation's ``SAGEConv`` as a
:class:`~ringgnn.models.dense.DenseLayer` (R-GCN's: ``lin_l`` only, no bias nor root weight) and
each root ``Linear``; a featureless type's embedding table held by the model is an array. It
comes from a checkpoint's state dict read without PyTorch (:meth:`HeteroDense.from_state`, keys
and shapes checked by ``infer_dense.check_state``) or from a live ``HeteroModel``
(:meth:`HeteroDense.from_module`: its weights shared, as training's evaluation holds it). The
arithmetic of a block (:meth:`HeteroDense.block`) is the model's ``_Layer.forward`` with the
relation terms of ``infer_dense.sage_finish``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from .._core import InputError
from ..data.schema import CONFIG_KEYS, EdgeType, check_config, computed_types, edge_type_str, parse_edge_type
from .dense import DenseLayer, Numpy, check_state, sage_finish


@dataclass
class DenseHeteroLayer:
    """One layer: the relations into its computed types (``edge_types``, each with its
    ``SAGEConv`` in ``rels`` keyed ``"src:rel:dst"``) and the root ``Linear`` (weight, bias) of
    each type that has one (``roots``: every type for ``rgcn``, a type no relation enters for
    ``sage``)."""

    types: List[str]
    edge_types: List[EdgeType]
    rels: Dict[str, DenseLayer]
    roots: Dict[str, Tuple[np.ndarray, np.ndarray]]


class HeteroDense:
    """A :class:`~ringgnn.models.hetero.HeteroModel`'s dense parts (see the module's docstring):
    the same attributes inference reads (``node_types``, ``edge_types``, ``in_dims``,
    ``num_nodes``, ``target``, ``hidden``, ``out_dim``, ``layers``, ``model``, ``embed_dim``,
    ``external``, ``computed``, ``convs``, ``embeddings``, ``tables``)."""

    def __init__(self, cfg: Mapping[str, Any], convs: List[DenseHeteroLayer], embeddings: Dict[str, np.ndarray]):
        self.node_types = list(cfg["node_types"])
        self.edge_types = [parse_edge_type(et) for et in cfg["edge_types"]]
        self.in_dims = {t: (None if cfg["in_dims"].get(t) is None else int(cfg["in_dims"][t])) for t in self.node_types}
        self.num_nodes = {t: int(n) for t, n in cfg["num_nodes"].items() if t in self.node_types}
        self.target, self.model = cfg["target"], cfg.get("model", "sage")
        self.hidden, self.out_dim, self.layers = int(cfg["hidden"]), int(cfg["out_dim"]), int(cfg["layers"])
        self.embed_dim = None if cfg.get("embed_dim") is None else int(cfg["embed_dim"])
        self.external = sorted(set(cfg.get("external") or ()))
        self.computed = computed_types(self.node_types, self.edge_types, self.target, self.layers)
        self.convs, self.embeddings = convs, embeddings
        #: Readers of the external tables' rows (``gather(ids)``): the checkpoint's files.
        self.tables: Dict[str, Any] = {}

    # -- building ---------------------------------------------------------------------------------

    @staticmethod
    def shapes(cfg: Mapping[str, Any], prefix: str = "") -> Dict[str, tuple]:
        """The keys and shapes of the state dict of the ``HeteroModel`` that ``cfg`` describes
        (``prefix``: a link run's tower, ``encoders.src.``)."""
        node_types = list(cfg["node_types"])
        edge_types = [parse_edge_type(et) for et in cfg["edge_types"]]
        layers, hidden, out_dim = int(cfg["layers"]), int(cfg["hidden"]), int(cfg["out_dim"])
        width = int(cfg.get("embed_dim") or hidden)
        external = set(cfg.get("external") or ())
        computed = computed_types(node_types, edge_types, cfg["target"], layers)
        want: Dict[str, tuple] = {}
        for t in computed[0]:
            if cfg["in_dims"].get(t) is None and t not in external:
                want[f"{prefix}embeddings.{t}.weight"] = (int(cfg["num_nodes"][t]), width)
        dims = {t: (width if cfg["in_dims"].get(t) is None else int(cfg["in_dims"][t])) for t in node_types}
        for k in range(1, layers + 1):
            out, c = out_dim if k == layers else hidden, f"{prefix}convs.{k - 1}."
            rels = [et for et in edge_types if et[2] in computed[k]]
            for s, r, d in rels:
                rc = f"{c}rels.{edge_type_str((s, r, d))}.conv."
                want[rc + "lin_l.weight"] = (out, dims[s])
                if cfg.get("model", "sage") == "sage":
                    want.update({rc + "lin_l.bias": (out,), rc + "lin_r.weight": (out, dims[d])})
            entered = {et[2] for et in rels}
            for t in computed[k]:
                if cfg.get("model", "sage") == "rgcn" or t not in entered:
                    want.update({f"{c}roots.{t}.weight": (out, dims[t]), f"{c}roots.{t}.bias": (out,)})
            dims = dict.fromkeys(node_types, out)
        return want

    @classmethod
    def from_state(cls, cfg: Mapping[str, Any], state: Mapping[str, Any], path: str, fits: str = "its config",
                   prefix: str = "") -> "HeteroDense":
        """The dense parts of the ``HeteroModel`` of config ``cfg`` (``HeteroModel.config``) from its
        state dict as numpy arrays (``ringgnn.models.torchfile``), checked key by key and shape by shape:
        a config or a state that does not fit is an :class:`InputError` naming ``path``."""
        unknown = sorted(set(cfg) - set(CONFIG_KEYS))
        missing = [k for k in CONFIG_KEYS[:8] if k not in cfg]
        if unknown or missing:
            raise InputError(f"{path}: not a readable heterogeneous model (config keys: unknown {unknown}, missing "
                             f"{missing})")
        try:
            edge_types = [parse_edge_type(et) for et in cfg["edge_types"]]
            check_config(list(cfg["node_types"]), edge_types, cfg["in_dims"], cfg["num_nodes"], cfg["target"],
                         cfg["hidden"], cfg["out_dim"], cfg["layers"], cfg.get("model", "sage"), cfg.get("embed_dim"),
                         cfg.get("dropout", 0.5))
            want = cls.shapes(cfg, prefix)
        except (ValueError, TypeError, KeyError) as e:
            raise InputError(f"{path}: not a readable heterogeneous model ({e})") from None
        got = check_state(want, dict(state), path, fits, prefix)
        return cls._build(cfg, lambda k: got[prefix + k])

    @classmethod
    def from_module(cls, net: Any) -> "HeteroDense":
        """The dense parts of a live ``HeteroModel`` (its weights shared, on the CPU, or copied
        from its device); its external tables' readers too."""
        state = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
        dense = cls._build(net.config(), lambda k: np.ascontiguousarray(state[k], dtype=np.float32))
        dense.tables = dict(net.tables)
        return dense

    @classmethod
    def _build(cls, cfg: Mapping[str, Any], get: Any) -> "HeteroDense":
        node_types = list(cfg["node_types"])
        edge_types = [parse_edge_type(et) for et in cfg["edge_types"]]
        layers = int(cfg["layers"])
        rgcn = cfg.get("model", "sage") == "rgcn"
        computed = computed_types(node_types, edge_types, cfg["target"], layers)
        external = set(cfg.get("external") or ())
        embeddings = {t: get(f"embeddings.{t}.weight") for t in computed[0]
                      if cfg["in_dims"].get(t) is None and t not in external}
        convs = []
        for k in range(1, layers + 1):
            c, types = f"convs.{k - 1}.", computed[k]
            rels_in = [et for et in edge_types if et[2] in types]
            rels = {}
            for et in rels_in:
                rc = f"{c}rels.{edge_type_str(et)}.conv."
                w = get(rc + "lin_l.weight")
                rels[edge_type_str(et)] = DenseLayer("sage", w.shape[1], w.shape[0], "mean", w,
                                                     None if rgcn else get(rc + "lin_l.bias"),
                                                     None if rgcn else get(rc + "lin_r.weight"))
            entered = {et[2] for et in rels_in}
            roots = {t: (get(f"{c}roots.{t}.weight"), get(f"{c}roots.{t}.bias")) for t in types
                     if rgcn or t not in entered}
            convs.append(DenseHeteroLayer(list(types), rels_in, rels, roots))
        return cls(cfg, convs, embeddings)

    # -- the arithmetic ---------------------------------------------------------------------------

    def block(self, layer: int, d: str, x_d: np.ndarray,
              sums: Sequence[Tuple[EdgeType, np.ndarray, np.ndarray]]) -> np.ndarray:
        """Layer ``layer``'s outputs (before the activation) of a block of type ``d``'s nodes:
        ``x_d`` their input rows, ``sums`` per relation into ``d`` (in the layer's order) its
        edge type, the sums of the block's in-neighbors' rows and the in-degrees. The arithmetic
        of ``_Layer.forward``: ``rgcn`` the root term plus each relation's ``W_r mean``,
        ``sage`` the mean over the relations of their ``SAGEConv``s (a type no relation enters:
        its root ``Linear``)."""
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


def dense_of(net: Any) -> HeteroDense:
    """``net`` as a :class:`HeteroDense`: itself, or a live ``HeteroModel``'s dense parts."""
    return net if isinstance(net, HeteroDense) else HeteroDense.from_module(net)
