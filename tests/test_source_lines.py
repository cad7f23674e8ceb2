"""The package's source keeps to ``[tool.ruff] line-length`` in pyproject.toml, which pytest can
check where ruff is not installed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_line_of_the_package_is_longer_than_the_configured_length():
    limit = int(re.search(r"(?m)^line-length\s*=\s*(\d+)", (ROOT / "pyproject.toml").read_text()).group(1))
    long = [f"{path.relative_to(ROOT)}:{i} ({len(line)} characters)"
            for path in sorted((ROOT / "python" / "ringgnn").rglob("*.py"))
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > limit]
    assert limit == 120 and long == []
