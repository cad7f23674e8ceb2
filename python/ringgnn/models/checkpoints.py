"""Checkpoints: a run directory's ``last.pt`` and ``best.pt``, written whole under a
locked temporary name by ``ringgnn train``, read by inference, serving and ``--resume``; read
without PyTorch (``arrays=True``) a :class:`Checkpoint` holds the dense parts and builds the PyG
model only when asked."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .._core import InputError
from .._files import os_errors, replacing
from ..data.dataset import Dataset
from .dense import decoder_from_state, from_module, from_state
from .gnn import DECODERS, MODELS, build_link_model, build_model
from .torchfile import ADVICE, load, unreadable

#: Options that define a run: ``--resume`` refuses to continue when one differs.
RUN_DEFINING = ("task", "model", "decoder", "fanouts", "batch_size", "hidden", "layers", "lr", "dropout",
                "neg_ratio", "neg_weight", "seed", "world_size")
#: The checkpoint ``--resume`` continues from, in a run directory.
LAST = "last.pt"
#: What a checkpoint written before an option existed was trained with.
RUN_DEFAULTS = {"world_size": 1, "task": "node", "decoder": None, "neg_ratio": None, "neg_weight": None}


@dataclass
class Checkpoint:
    """A run's model for inference: ``net`` the encoder and a link run's ``decoder``; read
    without PyTorch, ``arrays`` and a ``DenseDecoder`` instead, :meth:`module` builds the encoder."""

    net: Any
    kind: str
    fanouts: List[int]
    hidden: int
    layers: int
    path: str
    args: Dict[str, Any] = field(default_factory=dict)
    metrics: Dict[str, Any] = field(default_factory=dict)
    decoder: Any = None
    arrays: Any = None
    #: The encoder's state dict as numpy arrays and its widths, when read without PyTorch.
    state: Optional[Dict[str, np.ndarray]] = None
    dims: Optional[List[int]] = None

    @property
    def task(self) -> str:
        """``node`` (the encoder gives class logits) or ``link`` (it gives embeddings)."""
        return self.args.get("task", "node")

    def dense(self, xp: Any = None) -> Any:
        """The encoder's ``DenseNet`` on ``xp`` (default numpy): from ``net`` if held, else ``arrays``."""
        if self.net is not None:
            return from_module(self.net, self.kind, self.path, xp)
        return self.arrays if xp is None else self.arrays.to(xp)

    def module(self) -> Any:
        """The PyG encoder (eval mode, CPU), built from ``state`` when first asked (imports PyTorch)."""
        if self.net is None:
            import torch

            dims = self.dims or []
            net = build_model(self.kind, dims[0], self.hidden, dims[-1], self.layers, 0.0)
            net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in (self.state or {}).items()})
            self.net = net.eval()
        return self.net


def read_checkpoint(run_dir: str, what: str = "--model", arrays: bool = False) -> Tuple[str, Dict[str, Any]]:
    """(path, state) of ``run_dir``'s ``best.pt``, else ``last.pt``, with a clear
    error for a directory without a run or a file that is not a checkpoint. ``arrays``: read without
    PyTorch, tensors as numpy arrays, the optimizer's state skipped."""
    path = next((p for p in (os.path.join(run_dir, f) for f in ("best.pt", "last.pt")) if os.path.exists(p)), None)
    if path is None:
        raise InputError(f"{what} {run_dir}: no best.pt or last.pt there; give a `ringgnn train` run directory")
    state = load(path, skip=("optimizer",)) if arrays else _load(path)
    return path, state if isinstance(state, dict) else {}


def _load(path: str, advice: Optional[str] = None) -> Any:
    """``torch.load`` of a checkpoint (tensors and plain values only); a file that is not one
    is an :class:`InputError` naming it, what it is and ``advice``."""
    import torch

    with os_errors("reading the checkpoint", path), open(path, "rb"):
        pass  # a missing or unreadable file is an OSError naming it; what torch raises is about the contents
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # RuntimeError, UnpicklingError, EOFError, even OSError(EINVAL), with pages of text
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise unreadable(path, first, advice or ADVICE) from None


def is_hetero_run(read: Tuple[str, Dict[str, Any]]) -> bool:
    """Whether a checkpoint (:func:`read_checkpoint`'s answer) is of a heterogeneous run."""
    return bool((read[1].get("args") or {}).get("hetero"))


def is_hetero_link_run(read: Tuple[str, Dict[str, Any]]) -> bool:
    """Whether a checkpoint (:func:`read_checkpoint`'s answer) is of a heterogeneous link run."""
    return bool((read[1].get("args") or {}).get("hetero_link"))


def load_checkpoint(run_dir: str, ds: Dataset, what: str = "--model",
                    read: Optional[Tuple[str, Dict[str, Any]]] = None) -> Checkpoint:
    """The model of ``run_dir`` (or ``read``, :func:`read_checkpoint`'s answer)
    for ``ds``, with clear errors for a missing run or a model that does not fit the dataset; read as
    arrays, a :class:`Checkpoint` without PyTorch."""
    path, state = read if read is not None else read_checkpoint(run_dir, what)
    args = state.get("args", {})
    if args.get("hetero"):
        # A HeteroModel (its config in args["hetero"]) and per-relation fanouts: nothing below fits it.
        raise InputError(f"{what} {run_dir}: {path} is a heterogeneous run (target type "
                         f"'{args.get('target')}'); this takes a homogeneous run. Use `ringgnn predict {run_dir}` or "
                         f"`ringgnn embed {run_dir} [--type TYPE]` (ringgnn.inference.hetero.infer_hetero) for its "
                         "exact outputs; serving and link scoring of heterogeneous runs are not supported yet")
    kind, fanouts = args.get("model"), [int(f) for f in args.get("fanouts", [])]
    hidden, layers = int(args.get("hidden", 0)), int(args.get("layers", 0))
    if kind not in MODELS or not fanouts or layers != len(fanouts):
        raise InputError(f"{path}: not a ringgnn run checkpoint (model {kind!r}, fanouts {fanouts})")
    task = args.get("task", "node")
    if task not in ("node", "link"):
        raise InputError(f"{path}: not a ringgnn run checkpoint (task {task!r})")
    if task == "link" and args.get("decoder") not in DECODERS:
        raise InputError(f"{path}: not a ringgnn link run checkpoint (decoder {args.get('decoder')!r})")
    if ds.feature_dim is None or (task == "node" and ds.num_classes is None):
        raise InputError(f"{what}: the dataset {ds.path} has no features{' or no labels' if task == 'node' else ''}; "
                         "use the dataset the model was trained on")
    fits = f"{ds.feature_dim} features" + (f", {ds.num_classes} classes" if task == "node" else "")
    meta = dict(kind=kind, fanouts=fanouts, hidden=hidden, layers=layers, path=path, args=dict(args),
                metrics=dict(state.get("metrics") or {}))
    dims = [ds.feature_dim] + [hidden] * (layers - 1) + [hidden if task == "link" else ds.num_classes]
    model = state.get("model")
    if isinstance(model, dict) and model and all(isinstance(v, np.ndarray) for v in model.values()):
        # Read as numpy arrays: the encoder's dense parts and a link run's decoder, no PyTorch.
        prefix = "encoder." if task == "link" else ""
        encoder = {k[len(prefix):]: v for k, v in model.items() if k.startswith(prefix)}
        decoder = None
        if task == "link":  # the decoder's keys are not the encoder's; the rest is checked below
            decoder = decoder_from_state(args["decoder"], model, hidden, path, fits)
            model = {k: v for k, v in model.items() if not k.startswith("decoder.")}
        dense = from_state(kind, model, dims, path, fits, prefix)
        return Checkpoint(None, **meta, decoder=decoder, arrays=dense, state=encoder, dims=dims)
    net = (build_link_model(kind, dims[0], hidden, layers, 0.0, args["decoder"]) if task == "link"
           else build_model(kind, dims[0], hidden, dims[-1], layers, 0.0))
    try:
        net.load_state_dict(state["model"])
    except RuntimeError as e:
        raise InputError(f"{path} does not fit the dataset {ds.path} ({fits}): {e}") from None
    net.eval()
    if task == "link":
        return Checkpoint(net.encoder, **meta, decoder=net.decoder)
    return Checkpoint(net, **meta)


def save(obj: Any, path: str) -> None:
    """A checkpoint, written whole under a locked temporary name and renamed into place."""
    import torch

    # Serialized in memory: torch's writers report a full disk without errno or file.
    buf = io.BytesIO()
    torch.save(obj, buf)
    with replacing(path, "writing the checkpoint") as tmp, open(tmp, "wb") as f:
        f.write(buf.getbuffer())


def write_json(obj: Any, path: str) -> None:
    """A run directory's JSON file (``metrics.json``), written whole under a temporary name."""
    with replacing(path, "writing") as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def restore(net: Any, opt: Any, resumed: Optional[Dict[str, Any]], out: str) -> Tuple[int, List[Dict[str, Any]]]:
    """Load a resumed checkpoint into the model, optimizer and generator; (first epoch, the
    epochs' rows), ``(0, [])`` without one. Tensors that do not fit are refused."""
    if resumed is None:
        return 0, []
    import torch

    path = os.path.join(out, LAST)
    mismatch = state_mismatch(net.state_dict(), resumed["model"])
    if mismatch:
        raise InputError(f"--resume: {path} does not fit the model built for this dataset: {mismatch}; resume on the "
                         f"dataset it was trained on, or use another --out")
    try:
        net.load_state_dict(resumed["model"])
        opt.load_state_dict(resumed["optimizer"])
        torch.set_rng_state(resumed["rng"])
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise InputError(f"--resume: {path} does not fit this run ({first}); use another --out") from None
    return resumed["epoch"] + 1, list(resumed["metrics"]["epochs"])


def state_mismatch(want: Mapping[str, Any], got: Mapping[str, Any]) -> str:
    """The first missing, unexpected or misshapen tensor of ``got`` against ``want``, or ""."""
    for key, value in want.items():
        if key not in got:
            return f"it has no {key}"
        have, need = tuple(getattr(got[key], "shape", ())), tuple(getattr(value, "shape", ()))
        if have != need:
            return f"{key} is {list(have)} there, {list(need)} here"
    extra = next((k for k in got if k not in want), None)
    return f"it has {extra}, which this model has not" if extra is not None else ""


def config_mismatch(was: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """The config entries that differ between a checkpoint (``was``) and this run (``now``)."""
    keys = [k for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
    return ", ".join(f"{k}={_short(was.get(k))} (now {_short(now.get(k))})" for k in keys)


def _short(value: Any, most: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


@contextlib.contextmanager
def run_directory(out: str, owner: bool = True) -> Iterator[None]:
    """The run directory over one training call: one the call creates (``owner``:
    rank 0) and leaves without a ``last.pt`` is removed when the call raises; one that existed
    before or holds a checkpoint is left as it is."""
    created: List[str] = []
    path = os.path.abspath(out)
    while owner and not os.path.lexists(path):
        created.append(path)
        path = os.path.dirname(path)
    try:
        yield
    except BaseException:
        if created and not os.path.exists(os.path.join(out, LAST)):
            shutil.rmtree(created[0], ignore_errors=True)
            for parent in created[1:]:
                try:
                    os.rmdir(parent)
                except OSError:
                    break
        raise


def open_run(out: str, run_args: Dict[str, Any], resume: bool, overwrite: bool) -> Optional[Dict[str, Any]]:
    """Check RUN_DIR for this start; on ``resume``, the checkpoint to continue from."""
    if not resume and not overwrite and os.path.exists(os.path.join(out, LAST)):
        raise InputError(f"{out} already holds a run (last.pt): use --resume to continue it, --overwrite to start "
                         "over, or another --out")
    return _resume(out, run_args) if resume else None


def _resume(out: str, run_args: Dict[str, Any]) -> Dict[str, Any]:
    """``out``'s ``last.pt``, refused unless a training checkpoint of the same run-defining options."""
    import torch

    path = os.path.join(out, LAST)
    if not os.path.exists(path):
        raise InputError(f"--resume: {path} does not exist; run without --resume first")
    best = os.path.join(out, "best.pt")
    state = _load(path, (f"copy {best} over it to resume from the best epoch, or " if os.path.exists(best) else "")
                  + "start over with --overwrite")
    kinds = dict(model=dict, optimizer=dict, epoch=int, args=dict, metrics=dict, rng=torch.Tensor)
    bad = [k for k, kind in kinds.items() if not isinstance(state, dict) or not isinstance(state.get(k), kind)]
    if not bad and not isinstance(state["metrics"].get("epochs"), list):
        bad = ["metrics.epochs"]
    if bad:
        raise InputError(f"--resume: {path} is not a checkpoint of `ringgnn train` (no valid {', '.join(bad)}); "
                         "start over with --overwrite, or use another --out")
    was = {k: state["args"].get(k, RUN_DEFAULTS.get(k)) for k in RUN_DEFINING}
    diff = [k for k in RUN_DEFINING if was[k] != run_args[k]]
    if diff:
        text = ", ".join(f"{k}={was[k]} (now {run_args[k]})" for k in diff)
        hint = "use the same options or another --out"
        if "world_size" in diff:
            hint = (f"resume with {was['world_size']} processes ("
                    + ("torchrun --nproc-per-node ... with that many ranks in all"
                       if was["world_size"] > 1 else "without torchrun") + "), or start a new run with another --out")
        raise InputError(f"--resume: {path} was trained with {text}; {hint}")
    return state
