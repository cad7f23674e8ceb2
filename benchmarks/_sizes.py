"""What the benchmark scripts share: sizes as people write them for memcap caps ("4.77G";
decimals allowed, unlike `ringgnn`'s own options, because caps are often fractions of a dataset)
and the path of `memcap` (the team's `shared/tools/memcap` beside the checkout, or `$MEMCAP`, for a checkout
elsewhere)."""

import os

MEMCAP = os.environ.get("MEMCAP") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                                  "tools", "memcap")


def parse_size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().rstrip("B").rstrip("I")
    unit = t[-1] if t and t[-1] in units else ""
    return int(float(t[: len(t) - len(unit)]) * units[unit])
