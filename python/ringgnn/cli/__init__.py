"""The ``ringgnn`` command: one module per group of commands, and the one place that turns an
exception into its exit status and one-line message (:func:`_failure`), or, when stdout's reader
has gone (``| head``), into a quiet stop (:func:`_reader_gone`). Everything is imported inside
:func:`main`, within the Ctrl-C handler."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import traceback
from typing import Any, List, Optional

from .. import _signals

#: Set, it prints an error's traceback before its one line.
DEBUG = "RINGGNN_DEBUG"


def build_parser() -> Any:
    from .. import __version__
    from . import data, infer, sample, serve, train

    parser = argparse.ArgumentParser(
        prog="ringgnn",
        description="Build, inspect, check and sample ringgnn datasets and train GNNs on them (graphs larger "
        "than RAM).",
    )
    parser.add_argument("--version", action="version", version=f"ringgnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data.add_parsers(sub)
    sample.add_parser(sub)
    train.add_parser(sub)
    infer.add_parsers(sub)
    serve.add_parser(sub)
    data.add_demo_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the ``ringgnn`` command line; returns the exit status."""
    prog, built, before = "ringgnn", None, None
    with _signals.interrupts(keep=argv is None) as disarm:
        try:
            args = build_parser().parse_args(argv)
            prog = f"ringgnn {args.command}" + (f" {args.generator}" if args.command == "generate" else "")
            built = args.out if args.command in _BUILDS else None
            before = _identity(built)
            rc = args.func(args)
            sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's exit
            disarm()
            return rc
        except KeyboardInterrupt as e:
            disarm()
            after = _identity(built)
            if after is not None and after != before:  # the signal came after the rename into place
                print(f"{prog}: {_signals.describe(e)} after {built} was complete; it is kept", file=sys.stderr)
                return 0
            print(f"{prog}: {_signals.describe(e)}", file=sys.stderr)
            return _signals.exit_status(e)
        except BrokenPipeError as e:
            disarm()
            return _reader_gone() if _stdout_closed() else _failure(prog, e)
        except Exception as e:
            disarm()
            return _failure(prog, e)


_BUILDS = ("convert", "generate")


def _identity(path: Optional[str]) -> Optional[tuple]:
    """What tells a dataset renamed into place at ``path`` from the one there before (None: none)."""
    try:
        st = os.lstat(path) if path is not None else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone, which a :class:`BrokenPipeError` may also
    mean of a socket (a server's client)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _reader_gone() -> int:
    """Stop without a word, as a Unix tool that SIGPIPE ends (status 141): stdout now writes to
    /dev/null, so that what it still buffers cannot fail again at the interpreter's exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _failure(prog: str, e: Exception) -> int:
    """Print ``e`` as the command's one error line; the exit status, 1."""
    if os.environ.get(DEBUG, "") not in ("", "0"):
        traceback.print_exception(type(e), e, e.__traceback__)
    # The core may be what failed to import: then no error is one of its classes.
    core = sys.modules.get("ringgnn._core")
    if core is not None and isinstance(e, (core.RingGnnError, OSError)):
        from .._files import describe

        text = describe(e)
    elif isinstance(e, OSError):
        text = str(e)
    elif isinstance(e, MemoryError):
        text = (f"out of memory{' (' + str(e) + ')' if str(e) else ''}; ask for less (--memory, --batch-size, the "
                "model's size) or run on a machine with more")
    else:
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
        text = (f"unexpected {type(e).__name__}{': ' + first if first else ''} (an input ringgnn does not check "
                f"yet, or a bug: rerun with {DEBUG}=1 for the traceback, and please report it)")
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    print(f"{prog}: error: {line}", file=sys.stderr)
    return 1
