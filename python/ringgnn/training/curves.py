"""A run's ``RUN_DIR/curves.png`` (with matplotlib) and TensorBoard scalars, from the rows of
``metrics.json``'s ``epochs``. A plot that cannot be written is one warning, not a failure."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional

from .._files import describe, os_errors, replacing

logger = logging.getLogger("ringgnn")


class Plots:
    """The plots of one run (``run_dir`` None: none), brought up to date after each epoch."""

    def __init__(self, run_dir: Optional[str], tensorboard: bool, start: int):
        self.run_dir, self.writer, self.curves = run_dir, None, True
        if run_dir is not None and tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            with os_errors("writing TensorBoard logs to", os.path.join(run_dir, "tensorboard")):
                self.writer = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=start)

    def epoch(self, history: List[Dict[str, Any]]) -> None:
        if self.run_dir is None:
            return
        e = history[-1]
        if self.writer is not None:
            for key in ("loss", *score_keys(e), "seconds", "sample_seconds", "gather_seconds",
                        "train_seconds", "wait_seconds", "eval_seconds", "cache_hit_rate"):
                if key not in e:  # a typed loader's run has no sample/gather split nor cache rate
                    continue
                group = "loss" if key == "loss" else "accuracy" if key.endswith("_acc") else "time" \
                    if key.endswith("seconds") else "loader" if key == "cache_hit_rate" else "scores"
                self.writer.add_scalar(f"{group}/{key}", e[key], e["epoch"])
            with os_errors("writing TensorBoard logs to", os.path.join(self.run_dir, "tensorboard")):
                self.writer.flush()
        if self.curves:
            path = os.path.join(self.run_dir, "curves.png")
            try:
                write_curves(history, path)
            except OSError as e:
                self.curves = False  # one warning, not one an epoch
                logger.warning("ringgnn: warning: no training curves (%s); the metrics are in %s", describe(e),
                               os.path.join(self.run_dir, "metrics.json"))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def score_keys(row: Dict[str, Any]) -> List[str]:
    """The numeric scores of an epoch's row (``val_acc``, ``val_auc``..., not ``val_hits``)."""
    return [k for k, v in row.items() if k.startswith(("val_", "test_")) and isinstance(v, (int, float))]


def write_curves(history: List[Dict[str, Any]], path: str) -> bool:
    """Training curves as a PNG (written whole, then renamed); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ep = [e["epoch"] for e in history]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(ep, [e["loss"] for e in history], marker="o")
    axes[0].set(title="train loss", xlabel="epoch")
    keys = score_keys(history[-1])
    for key in keys:
        axes[1].plot(ep, [e[key] for e in history], marker="o", label=key.replace("_", " "))
    axes[1].set(title="accuracy" if all(k.endswith("_acc") for k in keys) else "scores", xlabel="epoch")
    axes[1].legend()
    bottom = [0.0] * len(ep)
    for key, label in (("train_seconds", "train"), ("wait_seconds", "waiting for batches"),
                       ("eval_seconds", "evaluation")):
        vals = [e[key] for e in history]
        axes[2].bar(ep, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    axes[2].set(title="seconds per epoch", xlabel="epoch")
    axes[2].legend(fontsize="small")
    fig.tight_layout()
    try:
        with replacing(path, "writing the training curves") as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return True
