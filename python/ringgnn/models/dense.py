"""The dense parts of layer-wise inference (:class:`DenseNet`, :class:`DenseLayer`,
:class:`DenseDecoder`): each layer's weights and its PyG forward's arithmetic around the
aggregation, written once for numpy (:class:`Numpy`) and torch tensors (:class:`Torch`, ``--device
cuda``); made from a PyG model (:func:`from_module`) or a state dict read without PyTorch
(:func:`from_state`, checked by :func:`check_state`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .._core import InputError


class Numpy:
    """The CPU's arrays: numpy, the rows as they are (no copies)."""

    device = "cpu"
    up = down = staticmethod(lambda a: a)

    @staticmethod
    def weight(a: Any) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.float32)

    @staticmethod
    def cat(xs: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(xs, axis=1)

    @staticmethod
    def where(cond: Any, x: Any, y: Any) -> np.ndarray:
        return np.where(cond, x, y)

    @staticmethod
    def relu(x: np.ndarray) -> np.ndarray:
        return np.maximum(x, np.float32(0), out=x)  # NaN stays NaN, as torch.relu


class Torch:
    """A device's tensors (``--device cuda``): rows copied up from page-locked memory and back."""

    def __init__(self, device: str):
        import torch

        self.torch, self.device = torch, device

    def up(self, a: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(a)).pin_memory().to(self.device, non_blocking=True)

    @staticmethod
    def down(x: Any) -> np.ndarray:
        return x.cpu().numpy()

    def weight(self, a: Any) -> Any:
        t = a if hasattr(a, "detach") else self.torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
        return t.detach().to(self.device, self.torch.float32)

    def cat(self, xs: Sequence[Any]) -> Any:
        return self.torch.cat(list(xs), dim=1)

    def where(self, cond: Any, x: Any, y: Any) -> Any:
        return self.torch.where(cond, x, y)

    def relu(self, x: Any) -> Any:
        return self.torch.relu(x)


def backend(device: str) -> Any:
    """The arrays of the dense parts on ``device`` (``cpu``: numpy; else torch's)."""
    return Numpy() if device == "cpu" else Torch(device)


@dataclass(frozen=True)
class DenseLayer:
    """One convolution's weights (``[out, in]``) and configuration: ``weight`` is
    ``lin_l`` (GraphSAGE), ``lin`` (GCN) or GAT's source ``lin``; ``root`` GraphSAGE's ``lin_r``;
    GAT's ``dst_weight``, ``att_src``/``att_dst`` ``[heads, channels]``."""

    kind: str
    d_in: int
    d_out: int
    aggr: str  # mean or max (GraphSAGE; another, or "project", the grid refuses), sum (GCN), softmax (GAT)
    weight: Any
    bias: Any = None
    root: Any = None
    normalize: bool = False
    dst_weight: Any = None
    att_src: Any = None
    att_dst: Any = None
    heads: int = 1
    channels: int = 0
    concat: bool = True
    slope: float = 0.2


class DenseNet:
    """A model's dense parts on ``xp``: ``layers``, and what BasicGNN applies between them
    in eval mode (``act``, ``norms``, ``act_first``)."""

    def __init__(self, layers: List[DenseLayer], act: Any = "relu", norms: Optional[List[Callable]] = None,
                 act_first: bool = False, xp: Any = None):
        self.xp = xp or Numpy()
        self.layers = [replace(l, **{f: self.xp.weight(getattr(l, f)) for f in
                                     ("weight", "bias", "root", "dst_weight", "att_src", "att_dst")
                                     if getattr(l, f) is not None}) for l in layers]
        self.act, self.norms, self.act_first = act, norms, act_first

    @property
    def widths(self) -> List[int]:
        """The input's width, then each layer's output width."""
        return [self.layers[0].d_in] + [l.d_out for l in self.layers]

    def to(self, xp: Any) -> "DenseNet":
        return DenseNet(self.layers, self.act, self.norms, self.act_first, xp)

    # -- the parts ----------------------------------------------------------------------------------

    def transform(self, k: int) -> Callable[[np.ndarray], np.ndarray]:
        """``W x`` (no bias) of rows, for the Rust core's callback: host rows in, host rows out."""
        w, xp = self.layers[k].weight, self.xp
        return lambda x: np.ascontiguousarray(xp.down(xp.up(x) @ w.T), dtype=np.float32)

    def messages(self, k: int) -> Callable[[np.ndarray], np.ndarray]:
        """GAT layer ``k``'s ``lin(x)`` and source logits per head, side by side (the Rust fold's input)."""
        l, xp = self.layers[k], self.xp

        def apply(x: np.ndarray) -> np.ndarray:
            xs = xp.up(x) @ l.weight.T
            logits = (xs.reshape(-1, l.heads, l.channels) * l.att_src).sum(-1)
            return np.ascontiguousarray(xp.down(xp.cat([xs, logits])), dtype=np.float32)

        return apply

    def gat_start(self, k: int, x: Any) -> Any:
        """GAT layer ``k``'s (destination logits, self loop logits, self loop messages) of rows ``x``."""
        l = self.layers[k]
        xd = (x @ l.dst_weight.T).reshape(-1, l.heads, l.channels)
        xs = xd if l.dst_weight is l.weight else (x @ l.weight.T).reshape(-1, l.heads, l.channels)
        a_dst = (xd * l.att_dst).sum(-1)
        z = (xs * l.att_src).sum(-1) + a_dst
        return a_dst, self.xp.where(z > 0, z, z * l.slope), xs  # the self loop's leaky ReLU

    def finish(self, k: int, st: Dict[str, Any], deg: Optional[np.ndarray], dinv: Optional[np.ndarray],
               x_dst: Any, narrow: bool) -> Any:
        """Layer ``k``'s outputs of a slice of destinations from their aggregates
        ``st`` (``acc``, or GAT's ``msg`` and ``z``), as the PyG layer computes them: GraphSAGE by
        :func:`sage_finish` (``deg``, host), GCN ``lin(sum + self term) + bias`` (``dinv``, host), GAT
        ``sum / z + bias``. ``narrow``: the sums are of ``W x``."""
        l, xp = self.layers[k], self.xp
        if l.kind == "sage":
            return sage_finish(l, xp, st["acc"], deg, x_dst, narrow)
        if l.kind == "gcn":
            dd = xp.up((dinv * dinv)[:, None])
            if narrow:  # sums of W x: the self loop's W x too
                out = st["acc"] + (x_dst @ l.weight.T) * dd
            else:
                out = (st["acc"] + x_dst * dd) @ l.weight.T
            return out + l.bias if l.bias is not None else out
        n = st["z"].shape[0]
        out = st["msg"].reshape(n, l.heads, l.channels) / st["z"].reshape(n, l.heads, 1)
        out = out.reshape(out.shape[0], -1) if l.concat else out.mean(1)
        return out + l.bias if l.bias is not None else out

    def after(self, k: int, out: Any) -> Any:
        """What BasicGNN applies after layer ``k`` but the last, in eval mode (activation, norm)."""
        if k >= len(self.layers) - 1:
            return out
        if self.act_first:
            out = self._act(out)
        if self.norms is not None and self.norms[k] is not None:
            out = self.norms[k](out)
        return out if self.act_first else self._act(out)

    def _act(self, out: Any) -> Any:
        if self.act is None:
            return out
        return self.xp.relu(out) if self.act == "relu" else self.act(out)


def sage_finish(l: DenseLayer, xp: Any, acc: Any, deg: np.ndarray, x_dst: Any, narrow: bool) -> Any:
    """A ``SAGEConv``'s outputs from the sums (or maxima) ``acc`` of in-neighbors' rows
    (of ``W x`` where ``narrow``), in-degrees ``deg`` (host) and own rows ``x_dst``:
    ``lin_l(mean) + lin_r(x)``, normalized where the layer is; also a typed model's relation term."""
    if l.aggr == "max":  # a node without in-edges aggregates to 0, as in PyG
        mean = xp.where(xp.up((deg == 0)[:, None]), 0.0, acc)
    else:
        mean = acc / xp.up(np.maximum(deg, 1).astype(np.float32)[:, None])
    if narrow:  # the mean of W x: only the bias is left to add
        out = mean + l.bias if l.bias is not None else mean
    else:
        out = mean @ l.weight.T
        out = out + l.bias if l.bias is not None else out
    if l.root is not None:
        out = out + x_dst @ l.root.T
    if l.normalize:
        out = out / (((out * out).sum(-1)) ** 0.5).clip(min=1e-12).reshape(-1, 1)
    return out


#: The arrays of an ``mlp`` decoder, in :class:`DenseDecoder`'s order.
_MLP = ("lin1.weight", "lin1.bias", "lin2.weight", "lin2.bias")


@dataclass(frozen=True)
class DenseDecoder:
    """A link run's decoder on numpy arrays: ``dot`` or ``mlp``, ``lin2(relu(lin1(zs * zd)))``;
    rows broadcast as the torch modules' do."""

    kind: str
    w1: Optional[np.ndarray] = None
    b1: Optional[np.ndarray] = None
    w2: Optional[np.ndarray] = None
    b2: Optional[np.ndarray] = None

    def __call__(self, zs: np.ndarray, zd: np.ndarray) -> np.ndarray:
        h = zs * zd
        if self.kind == "dot":
            return h.sum(-1)
        h = np.maximum(h @ self.w1.T + self.b1, np.float32(0))
        return (h @ self.w2.T + self.b2)[..., 0]


def decoder_from_state(kind: str, state: Dict[str, np.ndarray], dim: int, path: str, fits: str,
                       prefix: str = "decoder.") -> DenseDecoder:
    """The :class:`DenseDecoder` of a link run's state dict, checked by :func:`check_state`."""
    if kind not in ("dot", "mlp"):
        raise InputError(f"{path}: not a ringgnn link run checkpoint (decoder {kind!r})")
    shapes = dict(zip(_MLP, ((dim, dim), (dim,), (1, dim), (1,)))) if kind == "mlp" else {}
    got = check_state({prefix + k: s for k, s in shapes.items()}, state, path, fits, prefix)
    return DenseDecoder(kind, *(got[prefix + k] for k in shapes))


def dense_decoder(decoder: Any) -> DenseDecoder:
    """``decoder`` as a :class:`DenseDecoder`: itself, or a torch decoder's weights on the host."""
    if isinstance(decoder, DenseDecoder):
        return decoder
    if not hasattr(decoder, "lin1"):
        return DenseDecoder("dot")
    state = decoder.state_dict()
    return DenseDecoder("mlp", *(_host(state[k]) for k in _MLP))


# --- from a PyG model ------------------------------------------------------------------------------


def from_module(net: Any, kind: str, path: str, xp: Any = None) -> DenseNet:
    """The dense parts of PyG ``BasicGNN`` ``net`` of ``kind``, weights shared on the
    CPU or copied to ``xp``'s device; ``path`` names the checkpoint in errors."""
    import torch

    if getattr(net, "jk_mode", None) is not None:
        raise InputError(f"{path}: jumping knowledge is not supported by layer-wise inference")
    layers = [_dense_layer(kind, conv, {k: _host(v) for k, v in conv.state_dict().items()}) for conv in net.convs]
    act = net.act
    if act is not None and isinstance(act, torch.nn.ReLU):
        act = "relu"
    elif act is not None:
        act = _on_arrays(act)
    norms = getattr(net, "norms", None)
    norms = None if norms is None else [None if isinstance(n, torch.nn.Identity) else _on_arrays(n) for n in norms]
    dense = DenseNet(layers, act, norms, bool(getattr(net, "act_first", False)))
    return dense if xp is None else dense.to(xp)


def _host(p: Any) -> Optional[np.ndarray]:
    return None if p is None else p.detach().cpu().numpy()


def _on_arrays(module: Any) -> Callable[[Any], Any]:
    """A torch module (activation or norm) applied to numpy arrays or tensors."""
    import torch

    def apply(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return module(torch.from_numpy(x)).numpy()
        return module(x)

    return apply


# --- from a state dict (no PyTorch) ------------------------------------------------------------------


def from_state(kind: str, state: Dict[str, np.ndarray], dims: Sequence[int], path: str, fits: str,
               prefix: str = "") -> DenseNet:
    """The dense parts of ``build_model(kind, dims[0], hidden, dims[-1], len(dims) - 1)``
    from its state dict (numpy arrays; ``prefix``: ``encoder.`` for a link run), checked by
    :func:`check_state`."""
    want: Dict[str, tuple] = {}
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        c = f"{prefix}convs.{i}."
        if kind == "sage":
            want.update({c + "lin_l.weight": (d_out, d_in), c + "lin_l.bias": (d_out,),
                         c + "lin_r.weight": (d_out, d_in)})
        elif kind == "gcn":
            want.update({c + "lin.weight": (d_out, d_in), c + "bias": (d_out,)})
        else:  # PyG's GATConv, one head: a shared lin (PyG >= 2.5) or lin_src and lin_dst
            lin = ("lin.weight",) if c + "lin.weight" in state else ("lin_src.weight", "lin_dst.weight")
            want.update({c + n: (d_out, d_in) for n in lin})
            want.update({c + "att_src": (1, 1, d_out), c + "att_dst": (1, 1, d_out), c + "bias": (d_out,)})
    mine = check_state(want, state, path, fits, prefix)
    layers = []
    for i, d_out in enumerate(dims[1:]):
        c = f"{prefix}convs.{i}."
        conf = SimpleNamespace(aggr="mean", root_weight=True, normalize=False, heads=1, out_channels=d_out,
                               concat=i < len(dims) - 2, negative_slope=0.2)
        layers.append(_dense_layer(kind, conf, {k[len(c):]: v for k, v in mine.items() if k.startswith(c)}))
    return DenseNet(layers)


def _dense_layer(kind: str, conf: Any, arrays: Dict[str, np.ndarray]) -> DenseLayer:
    """Convolution ``kind``'s :class:`DenseLayer` from its ``arrays`` and ``conf``."""
    if kind == "sage":
        # Another aggregation or a projection is the grid's to refuse (``strategy="blocks"`` takes it).
        aggr = "project" if getattr(conf, "project", False) else str(getattr(conf, "aggr", "mean"))
        w = arrays["lin_l.weight"]
        return DenseLayer("sage", w.shape[1], w.shape[0], aggr, w, arrays.get("lin_l.bias"),
                          arrays["lin_r.weight"] if conf.root_weight else None, bool(conf.normalize))
    if kind == "gcn":
        w = arrays["lin.weight"]
        return DenseLayer("gcn", w.shape[1], w.shape[0], "sum", w, arrays.get("bias"))
    shared = "lin.weight" in arrays  # PyG >= 2.5 shares one lin between sources and destinations
    w = arrays["lin.weight" if shared else "lin_src.weight"]
    H, C = conf.heads, conf.out_channels
    return DenseLayer("gat", w.shape[1], H * C if conf.concat else C, "softmax", w, arrays.get("bias"),
                      dst_weight=w if shared else arrays["lin_dst.weight"], att_src=arrays["att_src"].reshape(H, C),
                      att_dst=arrays["att_dst"].reshape(H, C), heads=H, channels=C, concat=bool(conf.concat),
                      slope=float(conf.negative_slope))


def check_state(want: Dict[str, tuple], state: Dict[str, Any], path: str, fits: str,
                prefix: str = "") -> Dict[str, np.ndarray]:
    """The float32 arrays of ``state`` that ``want`` names (key: shape), checked as
    ``load_state_dict`` does: a missing, unexpected (under ``prefix``), misshapen or non-float one
    is an :class:`InputError` naming ``path`` and ``fits``."""
    mine = {k: v for k, v in state.items() if k.startswith(prefix)}
    missing = [k for k in want if k not in mine]
    unexpected = [k for k in mine if k not in want]
    bad = [f"{k} {tuple(np.shape(mine[k]))} (the model has {want[k]})" for k in want
           if k in mine and tuple(np.shape(mine[k])) != want[k]]
    if missing or unexpected or bad:
        what = "; ".join(p for p in (f"missing {', '.join(missing)}" if missing else "",
                                     f"unexpected {', '.join(unexpected)}" if unexpected else "",
                                     f"size mismatch: {', '.join(bad)}" if bad else "") if p)
        raise InputError(f"{path} does not fit the dataset ({fits}): {what}")
    for k in want:
        if np.asarray(mine[k]).dtype.kind != "f":
            raise InputError(f"{path}: {k} is {np.asarray(mine[k]).dtype}, not floating point; not a ringgnn model")
    return {k: np.ascontiguousarray(mine[k], dtype=np.float32) for k in want}
