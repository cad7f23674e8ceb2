"""Progress bars: :class:`TqdmProgress`, the object the core reports its stages to."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional, TextIO

from tqdm import tqdm


def bar(total: Optional[int], desc: str, unit: str, *, disable: bool = False, leave: bool = True,
        file: Optional[TextIO] = None, unit_scale: bool = False) -> tqdm:
    """A tqdm bar on ``file`` (stderr) redrawn twice a second on a terminal, every 15 s elsewhere."""
    file = file if file is not None else sys.stderr
    isatty = getattr(file, "isatty", lambda: False)()
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale,
                unit_divisor=1024 if unit == "B" else 1000, file=file,
                mininterval=0.5 if isatty else 15.0, dynamic_ncols=isatty, disable=disable, leave=leave)


class TqdmProgress:
    """One :func:`bar` per stage on ``file`` (stderr by default); byte counts are shown scaled."""

    def __init__(self, file: Optional[TextIO] = None, disable: bool = False):
        self.file = file if file is not None else sys.stderr
        self.disable = disable
        self._bar: Optional[tqdm] = None

    def stage(self, name: str, total: Optional[int], unit: str) -> None:
        self.close()
        self._bar = bar(total, name, unit, disable=self.disable, file=self.file, unit_scale=True)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def note(self, line: str) -> None:
        """A line about something done besides the task, printed above the bar."""
        tqdm.write(f"ringgnn: {line}", file=self.file)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "TqdmProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def reporting(progress: Any) -> Iterator[Any]:
    """``progress=`` as the core takes it: True gives tqdm bars, False or None nothing, else itself."""
    if progress is True:
        with TqdmProgress() as bars:
            yield bars
    else:
        yield None if progress is False else progress
