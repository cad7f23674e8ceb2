"""Progress bars for long-running operations: the object the core reports to.

The core calls ``stage(name, total, unit)`` when a stage starts and ``advance(n)`` as work gets
done (at most about ten times a second, from the calling thread; see
``crates/ringgnn-py/src/progress.rs``). :class:`TqdmProgress` shows one tqdm bar per stage on
stderr. Any object with these two methods can be passed as ``progress=`` instead.
"""

from __future__ import annotations

import sys
from typing import Optional, TextIO

from tqdm import tqdm


class TqdmProgress:
    """One tqdm bar per stage on ``file`` (stderr by default); byte counts are shown scaled.

    On a terminal the bar redraws twice a second; when stderr is a file or a pipe (CI logs) it
    is written at most every 15 seconds, so logs stay readable.
    """

    def __init__(self, file: Optional[TextIO] = None, disable: bool = False):
        self.file = file if file is not None else sys.stderr
        self.disable = disable
        self._bar: Optional[tqdm] = None

    def stage(self, name: str, total: Optional[int], unit: str) -> None:
        self.close()
        isatty = getattr(self.file, "isatty", lambda: False)()
        self._bar = tqdm(
            total=total,
            desc=name,
            unit=unit,
            unit_scale=True,
            unit_divisor=1024 if unit == "B" else 1000,
            file=self.file,
            mininterval=0.5 if isatty else 15.0,
            dynamic_ncols=isatty,
            disable=self.disable,
            leave=True,
        )

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "TqdmProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
