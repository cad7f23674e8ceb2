"""Signal handlers a command installs for its own run only.

`ringgnn infer` and `ringgnn serve` catch SIGTERM (and `serve` SIGINT) to stop cleanly. They
run in-process too (`ringgnn.cli.main([...])`), so a handler left behind would outlive the
command: a process forked later (a `multiprocessing` pool worker) would inherit it, and
`Pool.terminate()`'s SIGTERM would then run it at any point of the worker instead of ending
it, which can leave the worker, and the parent joining it, waiting forever.
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
