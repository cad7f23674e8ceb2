#!/usr/bin/env python3
"""The plots of docs/benchmarks.md, drawn from the recorded results.

Reads the JSON files in benchmarks/results/ (what the benchmark scripts wrote) and, for numbers
whose runs kept no JSON, benchmarks/results/docs_numbers.json (copied from the page's tables);
writes docs/img/*.png. Needs matplotlib only; nothing is measured here.

    python benchmarks/plots.py            # all plots
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot loads)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "img"
DPI = 80  # keeps each PNG well under 100 KB


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _save(fig, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(OUT / name, dpi=DPI)
    plt.close(fig)
    print(f"wrote {OUT / name} ({(OUT / name).stat().st_size // 1024} KiB)")


def sampling_against_ringsampler(numbers: dict) -> None:
    """R-MAT 23 epoch seconds, warm and under a 480 MiB cap, log scale."""
    data = numbers["sampling_rmat23"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharex=True)
    for ax, cond in zip(axes, ["warm", "capped 480 MiB"]):
        rows = list(data[cond].items())
        names = [n for n, _ in rows]
        secs = [s for _, s in rows]
        colors = ["#999999" if not n.startswith("ringgnn") else "#1f77b4" for n in names]
        ax.barh(range(len(rows)), secs, color=colors)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(names if cond == "warm" else [""] * len(rows), fontsize=8)
        for i, s in enumerate(secs):
            ax.text(s * 1.1, i, f"{s:g} s", va="center", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(0.5, 3000)
        ax.invert_yaxis()
        ax.set_title(f"R-MAT 23, {cond}", fontsize=9)
        ax.set_xlabel("seconds per epoch (log)", fontsize=8)
    axes[1].set_yticks(range(len(data["capped 480 MiB"])))
    axes[1].set_yticklabels(list(data["capped 480 MiB"]), fontsize=8)
    _save(fig, "sampling_rmat23.png")


def capped_against_memory(numbers: dict) -> None:
    """Each capped configuration's time as a multiple of the same work with its files in RAM."""
    rows = []
    for r in numbers["capped_vs_memory"]["rows"]:
        if "json" in r:
            d = _load(r["json"])
            mem, cap = d["memory"]["epoch"], d["ringgnn"]["epoch"]
        else:
            mem, cap = r["memory"], r["capped"]
        rows.append((r["what"], cap / mem))
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    ax.barh(range(len(rows)), [x for _, x in rows], color="#1f77b4")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([w for w, _ in rows], fontsize=8)
    for i, (_, x) in enumerate(rows):
        ax.text(x + 0.1, i, f"{x:.2f}x", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(x for _, x in rows) * 1.2)
    ax.set_xlabel("capped time / in-memory time", fontsize=8)
    ax.set_title("Under a memory cap against everything in RAM", fontsize=9)
    _save(fig, "capped_vs_memory.png")


def inference_against_floor() -> None:
    """sbm32m layer-wise inference under 4.77G: each layer's phases against its read floor."""
    d = _load("infer_sbm32m.json")
    layers = d["summary"]["layers"]
    floor = d["rows"][0]["floor_seconds"]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    parts = [("fold", "#1f77b4"), ("finish", "#ff7f0e"), ("other", "#bbbbbb")]
    for i, layer in enumerate(layers):
        ph = layer["phases"]
        fold, finish = ph.get("fold", 0.0), ph.get("finish", 0.0)
        left = 0.0
        for (name, color), width in zip(parts, [fold, finish, layer["seconds"] - fold - finish]):
            ax.barh(i, width, left=left, color=color, label=name if i == 0 else None)
            left += width
        ax.text(left + 2, i, f"{layer['seconds']:.1f} s = {layer['seconds'] / floor:.1f}x", va="center",
                fontsize=8)
    ax.axvline(floor, color="black", ls="--", lw=1)
    ax.text(floor + 1, -0.55, f"read floor {floor:.1f} s", fontsize=8)
    ax.axvline(4 * floor, color="grey", ls=":", lw=1)
    ax.text(4 * floor + 1, -0.55, "4x floor", fontsize=8, color="grey")
    ax.set_yticks(range(len(layers)))
    ax.set_yticklabels([f"layer {x['layer']}" for x in layers], fontsize=8)
    ax.set_ylim(len(layers) - 0.5, -0.8)
    ax.set_xlim(0, max(x["seconds"] for x in layers) * 1.35)
    ax.set_xlabel("seconds", fontsize=8)
    ax.set_title("Layer-wise inference, sbm32m (32M nodes, 896M edges) under 4.77 GiB", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, "inference_floor.png")


def main() -> None:
    numbers = _load("docs_numbers.json")
    sampling_against_ringsampler(numbers)
    capped_against_memory(numbers)
    inference_against_floor()


if __name__ == "__main__":
    main()
