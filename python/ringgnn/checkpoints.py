"""Checkpoints: the ``.pt`` files of a run directory, written by ``ringgnn train`` and read by
inference, serving and ``--resume``.

A run directory holds ``last.pt`` (written after each epoch: what ``--resume`` continues from)
and ``best.pt`` (the epoch of best validation score). Each is a dict: ``model`` and ``optimizer``
(state dicts), ``epoch``, ``args`` (the run's options, :data:`RUN_DEFINING` among them),
``metrics`` (what ``metrics.json`` held then) and ``rng`` (PyTorch's generator state). Files are
written whole under a locked temporary name and renamed into place (``ringgnn._files``), so a
killed run leaves the previous checkpoint, never half of one.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ._core import InputError
from ._files import os_errors, replacing
from .dataset import Dataset
from .models import DECODERS, MODELS, build_link_model, build_model

#: Options that define the run: ``--resume`` refuses to continue when one of them differs. The
#: number of epochs may grow, and how the run is executed (device, threads, output) may change.
RUN_DEFINING = ("task", "model", "decoder", "fanouts", "batch_size", "hidden", "layers", "lr", "dropout",
                "neg_ratio", "neg_weight", "seed", "world_size")
#: What a checkpoint written before an option existed was trained with (node tasks have no
#: decoder nor negatives).
RUN_DEFAULTS = {"world_size": 1, "task": "node", "decoder": None, "neg_ratio": None, "neg_weight": None}


@dataclass
class Checkpoint:
    """A ``ringgnn train`` run's model, ready for inference (eval mode, CPU): ``net`` is the
    encoder (what layer-wise inference runs); a link run's ``decoder`` scores pairs of its rows."""

    net: Any
    kind: str
    fanouts: List[int]
    hidden: int
    layers: int
    path: str
    args: Dict[str, Any] = field(default_factory=dict)
    metrics: Dict[str, Any] = field(default_factory=dict)
    decoder: Any = None

    @property
    def task(self) -> str:
        """``node`` (the encoder gives class logits) or ``link`` (it gives embeddings)."""
        return self.args.get("task", "node")


def read_checkpoint(run_dir: str, what: str = "--model") -> Tuple[str, Dict[str, Any]]:
    """(path, state) of ``run_dir``'s ``best.pt``, else ``last.pt``, with a clear error for a
    directory that holds no run or a file that is not a checkpoint."""
    import torch

    path = next((p for p in (os.path.join(run_dir, f) for f in ("best.pt", "last.pt")) if os.path.exists(p)), None)
    if path is None:
        raise InputError(f"{what} {run_dir}: no best.pt or last.pt there; give a `ringgnn train` run directory")
    try:
        with os_errors("reading the checkpoint", path):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError:
        raise
    except Exception as e:
        raise InputError(f"{path}: not a readable checkpoint ({e})") from None
    return path, state if isinstance(state, dict) else {}


def load_checkpoint(run_dir: str, ds: Dataset, what: str = "--model",
                    read: Optional[Tuple[str, Dict[str, Any]]] = None) -> Checkpoint:
    """The model of ``run_dir`` (``best.pt``, else ``last.pt``; or ``read``, what
    :func:`read_checkpoint` returned) for ``ds``, with clear errors for a directory that holds
    no run or a model that does not fit the dataset."""
    path, state = read if read is not None else read_checkpoint(run_dir, what)
    args = state.get("args", {})
    if args.get("hetero"):
        # A HeteroModel (its config in args["hetero"]) and per-relation fanouts: nothing below fits it.
        raise InputError(f"{what} {run_dir}: {path} is a heterogeneous run (target type "
                         f"'{args.get('target')}'); this takes a homogeneous run. Use `ringgnn predict {run_dir}` or "
                         f"`ringgnn embed {run_dir} [--type TYPE]` (ringgnn.hetero_infer.infer_hetero) for its exact "
                         "outputs; serving and link scoring of heterogeneous runs are not supported yet")
    kind, fanouts = args.get("model"), [int(f) for f in args.get("fanouts", [])]
    hidden, layers = int(args.get("hidden", 0)), int(args.get("layers", 0))
    if kind not in MODELS or not fanouts or layers != len(fanouts):
        raise InputError(f"{path}: not a ringgnn run checkpoint (model {kind!r}, fanouts {fanouts})")
    task = args.get("task", "node")
    if task == "link":
        decoder = args.get("decoder")
        if decoder not in DECODERS:
            raise InputError(f"{path}: not a ringgnn link run checkpoint (decoder {decoder!r})")
        if ds.feature_dim is None:
            raise InputError(f"{what}: the dataset {ds.path} has no features; use the dataset the model was trained on")
        net = build_link_model(kind, ds.feature_dim, hidden, layers, 0.0, decoder)
        fits = f"{ds.feature_dim} features"
    elif task == "node":
        if ds.feature_dim is None or ds.num_classes is None:
            raise InputError(f"{what}: the dataset {ds.path} has no features or no labels; use the dataset the model "
                             "was trained on")
        net = build_model(kind, ds.feature_dim, hidden, ds.num_classes, layers, 0.0)
        fits = f"{ds.feature_dim} features, {ds.num_classes} classes"
    else:
        raise InputError(f"{path}: not a ringgnn run checkpoint (task {task!r})")
    try:
        net.load_state_dict(state["model"])
    except RuntimeError as e:
        raise InputError(f"{path} does not fit the dataset {ds.path} ({fits}): {e}") from None
    net.eval()
    if task == "link":
        return Checkpoint(net.encoder, kind, fanouts, hidden, layers, path, dict(args),
                          dict(state.get("metrics") or {}), decoder=net.decoder)
    return Checkpoint(net, kind, fanouts, hidden, layers, path, dict(args), dict(state.get("metrics") or {}))


def save(obj: Any, path: str) -> None:
    """A checkpoint, written whole under a locked temporary name and renamed into place."""
    import torch

    # Serialized in memory, then written: torch's own writers report a full disk as a
    # RuntimeError without errno or file (a checkpoint is the model and its optimizer: small).
    buf = io.BytesIO()
    torch.save(obj, buf)
    with replacing(path, "writing the checkpoint") as tmp, open(tmp, "wb") as f:
        f.write(buf.getbuffer())


def write_json(obj: Any, path: str) -> None:
    """A run directory's JSON file (``metrics.json``), written whole under a locked temporary
    name and renamed into place."""
    import json

    with replacing(path, "writing") as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def restore(net: Any, opt: Any, resumed: Optional[Dict[str, Any]]) -> Tuple[int, List[Dict[str, Any]]]:
    """Load a resumed checkpoint (:func:`open_run`'s answer) into the model, the optimizer and
    PyTorch's generator; (first epoch to run, the epochs' rows so far): ``(0, [])`` without one."""
    if resumed is None:
        return 0, []
    import torch

    net.load_state_dict(resumed["model"])
    opt.load_state_dict(resumed["optimizer"])
    torch.set_rng_state(resumed["rng"])
    return resumed["epoch"] + 1, list(resumed["metrics"]["epochs"])


def open_run(out: str, run_args: Dict[str, Any], resume: bool, overwrite: bool) -> Optional[Dict[str, Any]]:
    """Check RUN_DIR for this start; on ``resume``, the checkpoint to continue from."""
    if not resume and not overwrite and os.path.exists(os.path.join(out, "last.pt")):
        raise InputError(f"{out} already holds a run (last.pt): use --resume to continue it, --overwrite to start "
                         "over, or another --out")
    return _resume(out, run_args) if resume else None


def _resume(out: str, run_args: Dict[str, Any]) -> Dict[str, Any]:
    """``out``'s ``last.pt``, refused when it was trained with other run-defining options."""
    import torch

    path = os.path.join(out, "last.pt")
    if not os.path.exists(path):
        raise InputError(f"--resume: {path} does not exist; run without --resume first")
    with os_errors("reading the checkpoint", path):
        state = torch.load(path, map_location="cpu", weights_only=True)
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
