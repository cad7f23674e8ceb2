"""Signal handlers a command installs for its own run only: SIGTERM unwinding like Ctrl-C for every
command (:func:`interrupts`), and a command's own handlers within it (:func:`handling`;
docs/ARCHITECTURE.md, "Errors and cancellation").
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def handling(handler: Callable[[int, Any], Any], *signals: int) -> Iterator[None]:
    """Run the body with ``handler`` for ``signals``, then put back the handlers there were.

    Only the main thread may set handlers: elsewhere the body runs with them unchanged.
    """
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
    """SIGTERM, raised where Ctrl-C raises ``KeyboardInterrupt`` (a subclass of it): whatever
    cleans up after Ctrl-C (a build removing its staging directory) cleans up after SIGTERM too."""

    signum = signal.SIGTERM


#: The exit status after each signal: 128 + its number, as a shell reports a process it killed.
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def exit_status(e: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return EXIT[getattr(e, "signum", signal.SIGINT)]


def describe(e: KeyboardInterrupt) -> str:
    """What the CLI says happened: "interrupted" (Ctrl-C) or "terminated (SIGTERM)"."""
    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


@contextlib.contextmanager
def interrupts(keep: bool = False) -> Iterator[Callable[[], None]]:
    """Run a command with SIGINT raising ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`,
    then put back the handlers there were (why: docs/ARCHITECTURE.md, "Errors and cancellation").
    Yields ``disarm``: call it once the command's work is done, so that a signal arriving after
    (while the block exits) does not raise in the middle of putting the handlers back.

    ``keep``: leave the handlers in place, disarmed, when the block ends: for the process's own
    command, which exits next; a signal in between must not kill a process whose work is done
    (its exit status would then say "killed" of a dataset that is complete).

    Only the first signal raises: a later one (a second Ctrl-C, the SIGTERM a scheduler sends
    after it) arrives while the first unwinds, and raising again there could cut short the
    cleanup it runs (a staging directory half removed); it is ignored. A signal the process was
    started ignoring (``nohup``, a background job's SIGINT) stays ignored.
    """
    disarmed = []

    def handler(signum: int, frame: Any) -> None:
        if disarmed:
            return
        disarmed.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    wanted = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) != signal.SIG_IGN]
    if not keep:
        with handling(handler, *wanted):
            yield lambda: disarmed.append(None)
        return
    if threading.current_thread() is threading.main_thread():
        for s in wanted:
            signal.signal(s, handler)
    try:
        yield lambda: disarmed.append(None)
    finally:
        disarmed.append(None)
        if threading.current_thread() is threading.main_thread():
            # Ignored outright: the interpreter resets Python handlers to the default (death)
            # while it shuts down, but keeps an ignored signal ignored.
            for s in wanted:
                signal.signal(s, signal.SIG_IGN)
