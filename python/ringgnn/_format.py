"""Numbers as the commands and the plans print them (counts with a decimal prefix, bytes with a binary
one)."""

from __future__ import annotations


def human(x: float) -> str:
    """86, 1.4k, 3.2M: a count or rate with a decimal prefix."""
    for u in ["", "k", "M", "G"]:
        if abs(x) < 1000:
            return f"{x:.0f}" if u == "" else f"{x:.1f}{u}"
        x /= 1000
    return f"{x:.1f}T"


def human_bytes(n: float) -> str:
    """512 B, 4.0 KiB, 1.2 GiB."""
    for u in ["B", "KiB", "MiB", "GiB"]:
        if abs(n) < 1024:
            return f"{n:.0f} B" if u == "B" else f"{n:.1f} {u}"
        n /= 1024
    return f"{n:.1f} TiB"
