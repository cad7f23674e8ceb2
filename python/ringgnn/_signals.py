"""Signal handlers a command installs for its own run: SIGTERM unwinding like Ctrl-C
(:func:`interrupts`) and a command's own handlers (:func:`handling`)."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def handling(handler: Callable[[int, Any], Any], *signals: int) -> Iterator[None]:
    """Run the body with ``handler`` for ``signals`` (main thread only), then put back the old ones."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class Terminated(KeyboardInterrupt):
    """SIGTERM, a ``KeyboardInterrupt``: what cleans up after Ctrl-C cleans up after SIGTERM too."""

    signum = signal.SIGTERM


#: The exit status after each signal: 128 + its number.
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def exit_status(e: KeyboardInterrupt) -> int:
    return EXIT[getattr(e, "signum", signal.SIGINT)]


def describe(e: KeyboardInterrupt) -> str:
    """What the CLI says happened: "interrupted" (Ctrl-C) or "terminated (SIGTERM)"."""
    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


@contextlib.contextmanager
def interrupts(keep: bool = False) -> Iterator[Callable[[], None]]:
    """Run a command with SIGINT raising ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`,
    then put back the old handlers. Yields ``disarm``, to call once the work is done. ``keep``:
    the process's own command, which exits next: the signals are ignored after the block, not
    restored. Only the first signal raises (a second would cut its cleanup short); a signal
    the process was started ignoring stays ignored."""
    disarmed = []

    def handler(signum: int, frame: Any) -> None:
        if disarmed:
            return
        disarmed.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    wanted = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) != signal.SIG_IGN]
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, handler) for s in wanted} if main else {}
    try:
        yield lambda: disarmed.append(None)
    finally:
        disarmed.append(None)
        for s, h in previous.items():
            # keep: ignored outright, as the interpreter resets Python handlers to death at shutdown.
            signal.signal(s, signal.SIG_IGN if keep else h)
