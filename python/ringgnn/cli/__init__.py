"""The ``ringgnn`` command: convert, generate, info, verify, sample, train, predict, embed, report,
serve, demo; one module per group of commands (``data``: convert, generate, info, verify, demo;
``sample``; ``train``; ``infer``: predict, embed, report; ``serve``), each adding its parsers and
holding its ``cmd_*`` functions, which call the package's API.

Errors print ``ringgnn CMD: error: MESSAGE`` on stderr and exit 1 (usage errors exit 2, as
argparse does). Ctrl-C exits 130 and SIGTERM 143 (``_signals.interrupts``), after what the command
was writing has been removed; a build interrupted after its dataset was renamed into place says
so and exits 0: the status says what is on disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from .. import __version__, _signals
from .._core import RingGnnError
from .._files import describe
from . import data, infer, sample, serve, train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ringgnn",
        description="Build, inspect, check and sample ringgnn datasets and train GNNs on them (graphs larger than RAM).",
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
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"ringgnn {args.command}" + (f" {args.generator}" if args.command == "generate" else "")
    built = args.out if args.command in _BUILDS else None
    before = _identity(built)
    # The process's own command (no argv given) keeps its handlers, disarmed, until it exits.
    with _signals.interrupts(keep=argv is None) as disarm:
        try:
            rc = args.func(args)
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
        except (RingGnnError, OSError) as e:
            print(f"{prog}: error: {describe(e)}", file=sys.stderr)
            return 1


#: The commands that build a dataset at ``args.out``, renamed into place when complete.
_BUILDS = ("convert", "generate")


def _identity(path: Optional[str]) -> Optional[tuple]:
    """What tells a dataset renamed into place at ``path`` from the one there before (None: none)."""
    try:
        st = os.lstat(path) if path is not None else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino)
