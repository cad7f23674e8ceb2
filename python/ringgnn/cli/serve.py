"""``ringgnn serve``: the command line of :class:`ringgnn.serving.server.Server`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from .. import _options, _signals
from .._options import BACKENDS, count_arg, positive_arg, size_arg
from ..serving.server import FRONTENDS, Server


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="serve sampling, features and model inference over gRPC",
        description="A long-running gRPC server (ringgnn/serve.proto, docs/SERVING.md): Sample, Features, "
        "Predict, Embed, Score, Info and health. Concurrent requests share reads. SIGTERM drains the requests "
        "in flight and exits 0.")
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--listen", default="127.0.0.1:50051", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:50051; port 0 picks a free one)")
    p.add_argument("--model", metavar="RUN_DIR", help="a `ringgnn train` run directory: enables Predict and Embed (a "
                   "node run, or a heterogeneous run of --target TYPE), or Score and Embed (a link run, --task link)")
    p.add_argument("--fanouts", metavar="F1,F2,...", help="default fanouts of Sample (default: the model's, "
                   "else 20,15,10); on a heterogeneous dataset the same for every relation, or a JSON object "
                   "per relation ('{\"S:R:D\": [10, 5], ...}', 0 skips a hop)")
    p.add_argument("--batch-size", type=positive_arg, metavar="N",
                   help="seeds of the wave each worker is sized for (default 64); a larger request, up to "
                   "--max-nodes, is answered alone")
    p.add_argument("--seed", type=count_arg, default=0, help="seed of requests that give none (default 0)")
    p.add_argument("--memory", type=size_arg, metavar="SIZE", help="budget of the whole process (default: what "
                   "it holds plus half the available memory)")
    p.add_argument("--threads", type=positive_arg, metavar="N",
                   help="workers (read backends): waves served at once (default: available cores)")
    p.add_argument("--backend", default="auto", choices=BACKENDS, help="read backend (default auto)")
    p.add_argument("--direct", action="store_true", help="io_uring with O_DIRECT: bypass the page cache")
    p.add_argument("--cache", type=size_arg, metavar="SIZE", help="bytes of hot feature rows kept in memory, by "
                   "in-degree (default: what the budget leaves)")
    p.add_argument("--neighbor-cache", type=size_arg, metavar="SIZE",
                   help="bytes of hot neighbor-file pages kept in memory (default: what the budget leaves, "
                   "shared with --cache)")
    p.add_argument("--max-wait-ms", type=float, metavar="MS",
                   help="how long a wave waits for concurrent requests to join it (default 0)")
    p.add_argument("--max-wave", type=positive_arg, metavar="N",
                   help="requests served together in one wave at most (default 64; 1: no batching)")
    p.add_argument("--max-concurrent", type=positive_arg, default=256, metavar="N",
                   help="requests in progress at most; more get RESOURCE_EXHAUSTED (default 256)")
    p.add_argument("--handlers", type=positive_arg, default=32, metavar="N",
                   help="threads that run requests, each holding one until answered (default 32)")
    p.add_argument("--frontend", choices=FRONTENDS,
                   help="gRPC server: rust (tonic, the default) or grpcio (every call through Python)")
    p.add_argument("--max-nodes", type=positive_arg, default=4096, metavar="N",
                   help="node ids per request (default 4096); one request this large is answered at a time")
    p.add_argument("--max-hops", type=positive_arg, default=6, metavar="N", help="fanouts per request (default 6)")
    p.add_argument("--temporal-strategy", choices=("uniform", "last"), default="uniform",
                   help="on a dataset with times, how a request with a time draws among the edges up to it: "
                   "uniform (the default) or last (the most recent)")
    p.add_argument("--ignore-time", action="store_true",
                   help="on a dataset with times, sample every edge whatever its time (requests with a time are "
                   "refused)")
    p.add_argument("--grace", type=float, default=10.0, metavar="S",
                   help="seconds requests in flight get to finish on SIGTERM (default 10)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    grace = _options.real(args.grace, "--grace", 0.0)  # checked now, not at the SIGTERM that uses it
    server = Server(args.dataset, **{k: v for k, v in vars(args).items()
                                     if k not in ("command", "func", "dataset", "grace")})
    stop = threading.Event()
    with _signals.handling(lambda *_: stop.set(), signal.SIGTERM, signal.SIGINT):
        server.start()
        print(server.describe(), flush=True)
        print(f"ringgnn serve: listening on {server.address}", flush=True)
        while not stop.wait(0.5):
            pass
        print("ringgnn serve: stopping (requests in flight finish first)", file=sys.stderr, flush=True)
        server.stop(grace)
    st = server.stats()
    print(f"ringgnn serve: stopped after {st['sample_requests']:,} sample and {st['feature_requests']:,} feature "
          f"requests in {st['waves']:,} waves", file=sys.stderr, flush=True)
    return 0
