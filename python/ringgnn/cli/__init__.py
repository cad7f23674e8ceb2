"""The ``ringgnn`` command: convert, generate, info, verify, sample, train, predict, embed, report,
serve, demo; one module per group of commands (``data``: convert, generate, info, verify, demo;
``sample``; ``train``; ``infer``: predict, embed, report; ``serve``), each adding its parsers and
holding its ``cmd_*`` functions, which call the package's API.

Errors print ``ringgnn CMD: error: MESSAGE`` on stderr and exit 1 (usage errors exit 2, as
argparse does); Ctrl-C exits 130 after the core has removed its staging directory.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .. import __version__
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
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (RingGnnError, OSError) as e:
        print(f"{prog}: error: {describe(e)}", file=sys.stderr)
        return 1
