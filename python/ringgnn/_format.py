"""Numbers as the commands print them: counts with a decimal prefix, bytes with a binary one."""

from __future__ import annotations

from typing import Sequence


def human(x: float) -> str:
    """86, 1.4k, 3.2M: a count or rate with a decimal prefix."""
    return _scaled(x, 1000, ("", "k", "M", "G", "T"), "")


def human_bytes(n: float) -> str:
    """512 B, 4.0 KiB, 1.2 GiB."""
    return _scaled(n, 1024, ("B", "KiB", "MiB", "GiB", "TiB"), " ")


def _scaled(x: float, base: int, units: Sequence[str], sep: str) -> str:
    """``x`` in the first of ``units`` under which it is below ``base``."""
    for unit in units[:-1]:
        if abs(x) < base:
            return f"{x:.0f}{sep}{unit}" if unit == units[0] else f"{x:.1f}{sep}{unit}"
        x /= base
    return f"{x:.1f}{sep}{units[-1]}"
