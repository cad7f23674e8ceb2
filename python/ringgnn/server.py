"""``ringgnn serve``: on-demand sampling, features and inference behind a gRPC API.

The API is ``ringgnn/serve.proto`` (shipped in the package; docs/SERVING.md). The gRPC server is
in Rust (``_core.GrpcServer``: tonic, crate ``ringgnn-serve``): ``Sample``, ``Features`` and
``Info`` are decoded, served by the Rust request engine and encoded without entering Python.
``Predict``/``Embed`` sample the nodes' neighborhood with the model's training fanouts, take its
feature rows from the same wave, and run the model here (:class:`Servicer`, called back with the
GIL; PyTorch releases it in its kernels). A link model (``train --task link``) answers ``Score``
the same way: the pairs' distinct endpoints are sampled as one request, the encoder embeds them
and the decoder scores the pairs; its ``Embed`` is the encoder's last layer, and ``Predict``
(class probabilities) is refused. ``--frontend grpcio`` serves every call through
Python's grpcio instead (handler threads calling the engine with the GIL released): the first
design, kept as the baseline of docs/benchmarks.md. The engine batches the requests that arrive
together into waves that share their reads, within the memory budget; it refuses what does not
fit its queue (RESOURCE_EXHAUSTED), honors deadlines and drops the work of clients that went
away.

Status codes: INVALID_ARGUMENT for bad input (the message says what and the limit),
RESOURCE_EXHAUSTED when the queue is full, DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE while
shutting down, FAILED_PRECONDITION for Predict/Embed/Score without a model, Predict with a link
model, Score with a node model, or Features without features, INTERNAL for a read error (the
message names the file). SIGTERM or SIGINT stops taking requests, lets those in flight finish
(``--grace`` seconds at most), and exits 0. The command line is ``ringgnn.cli.serve``.
"""

from __future__ import annotations

import argparse
import functools
from concurrent import futures
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _core, _options
from ._core import (
    BusyError,
    CancelledError,
    DeadlineExceededError,
    InputError,
    RingGnnError,
    ShuttingDownError,
)
from .dataset import Dataset, open_homogeneous

#: The API, relative to the directory holding the ``ringgnn`` package, and its service.
PROTO = "ringgnn/serve.proto"
SERVICE = "ringgnn.v1.RingGnn"

#: The gRPC servers: tonic in Rust (the default: Sample, Features and Info never enter Python), or
#: grpcio in Python (every call through Python; kept as the baseline of docs/benchmarks.md).
FRONTENDS = ("rust", "grpcio")

#: Messages larger than gRPC's 4 MiB default are fine here: a sample of a large request is tens
#: of MB. The server's request limits (--max-nodes and the plan's batch) bound them.
MAX_MESSAGE = 1 << 30


@functools.lru_cache(maxsize=1)
def protos() -> Tuple[Any, Any]:
    """The message and service modules of ``serve.proto``, generated at first use by grpcio's
    bundled compiler (no ``protoc`` needed)."""
    import grpc

    return grpc.protos_and_services(PROTO)


class Model:
    """A ``ringgnn train`` run's model (``best.pt``, else ``last.pt``) ready for inference on
    sampled neighborhoods."""

    def __init__(self, run_dir: str, ds: Dataset):
        from .checkpoints import load_checkpoint

        ckpt = load_checkpoint(run_dir, ds, "--model")
        self.kind, self.fanouts, self.hidden, self.layers = ckpt.kind, ckpt.fanouts, ckpt.hidden, ckpt.layers
        self.run_dir, self.path, self.net = run_dir, ckpt.path, ckpt.net
        #: ``node`` (the net gives class logits) or ``link`` (it gives embeddings, which
        #: ``decoder`` scores in pairs; ``decoder_kind`` names it).
        self.task, self.decoder = ckpt.task, ckpt.decoder
        self.decoder_kind = ckpt.args.get("decoder") if self.task == "link" else None
        self.classes = ds.num_classes if self.task == "node" else None

    def run(self, sub: Dict[str, Any], x: np.ndarray) -> Tuple[Any, Any]:
        """(logits, input of the last layer) of the distinct seeds of the sampled subgraph
        ``sub`` (the dict of ``_core.Engine.sample``) with feature rows ``x``."""
        import torch

        from .models import forward

        seen: List[Any] = []
        hook = self.net.convs[-1].register_forward_pre_hook(lambda _m, inp: seen.append(inp[0]))
        counts = list(sub["num_sampled_nodes"])
        batch = argparse.Namespace(
            x=torch.from_numpy(x), edge_index=torch.from_numpy(np.stack([sub["row"], sub["col"]])),
            num_sampled_nodes=counts, num_sampled_edges=list(sub["num_sampled_edges"]), batch_size=counts[0])
        try:
            with torch.no_grad():
                logits = forward(self.net, batch, "cpu", self.kind)
        finally:
            hook.remove()
        return logits, seen[0][: counts[0]]

    def embeddings(self, sub: Dict[str, Any], x: np.ndarray) -> Any:
        """What ``Embed`` answers for the distinct seeds: a link model's last layer (the
        embeddings its decoder scores), a node model's last hidden layer."""
        logits, hidden = self.run(sub, x)
        return logits if self.task == "link" else hidden

    def score(self, zs: Any, zd: Any) -> Any:
        """The decoder's scores (logits) of embedding pairs ``zs[i]``, ``zd[i]``."""
        import torch

        with torch.no_grad():
            return self.decoder(zs, zd)


def request_order(nodes: np.ndarray, sampled: np.ndarray, distinct: int) -> np.ndarray:
    """For each requested node, its row among the ``distinct`` first entries of ``sampled`` (the
    distinct seeds in first-occurrence order)."""
    index = {int(v): i for i, v in enumerate(sampled[:distinct])}
    return np.fromiter((index[int(v)] for v in nodes), dtype=np.int64, count=len(nodes))


class Servicer:
    """The ``RingGnn`` service over one engine (and an optional model)."""

    def __init__(self, engine: Any, dataset: Dataset, model: Optional[Model]):
        self.engine, self.dataset, self.model = engine, dataset, model
        self.pb, _ = protos()

    # --- plumbing ---------------------------------------------------------------------------------

    def _call(self, context: Any, fn, *args, **kwargs):
        """Run an engine call for this RPC: its deadline, a cancel token tied to the client's
        connection, and every failure mapped to a status with its message."""
        import grpc

        token = getattr(context, "token", None)
        if token is None:  # grpcio's context: cancel when the client goes away
            token = _core.CancelToken()
            context.add_callback(token.cancel)
        try:
            return fn(*args, timeout=context.time_remaining(), token=token, **kwargs)
        except InputError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except BusyError as e:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        except DeadlineExceededError as e:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(e))
        except CancelledError as e:
            context.abort(grpc.StatusCode.CANCELLED, str(e))
        except ShuttingDownError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
        except (RingGnnError, OSError) as e:
            context.abort(grpc.StatusCode.INTERNAL, _message(e))

    def _nodes(self, context: Any, nodes: Sequence[int]) -> np.ndarray:
        import grpc

        try:
            self.engine.check_count(len(nodes))  # refused before converting them
        except InputError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return np.asarray(nodes, dtype=np.int64)

    def _needs_model(self, context: Any) -> Model:
        import grpc

        if self.model is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "this server has no model: start it with --model RUN_DIR (a `ringgnn train` run)")
        return self.model

    # --- the calls --------------------------------------------------------------------------------

    def Sample(self, request: Any, context: Any) -> bytes:
        """The reply's bytes, encoded by the engine (sent as they are: see :meth:`handler`)."""
        seed = request.seed if request.HasField("seed") else self.engine.seed
        return self._call(context, self.engine.sample, self._nodes(context, request.nodes),
                          fanouts=list(request.fanouts) or None, replace=request.replace, seed=seed,
                          edge_ids=request.edge_ids, reply=True)

    def Features(self, request: Any, context: Any) -> Any:
        import grpc

        if not self.engine.feature_dim:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"the dataset {self.dataset.path} has no node features")
        nodes = self._nodes(context, request.nodes)
        stored = bool(request.stored_dtype)
        out = self._call(context, self.engine.features, nodes, stored=stored)
        dtype = self.engine.feature_dtype if stored else "f32"
        data = out if stored else out.astype("<f4", copy=False).tobytes()
        return self.pb.FeaturesReply(rows=len(nodes), dim=self.engine.feature_dim, dtype=dtype, data=data)

    def _needs_task(self, context: Any, task: str, call: str) -> Model:
        import grpc

        model = self._needs_model(context)
        if model.task != task:
            what = ("a link model: it scores pairs (Score) and embeds nodes (Embed); Predict needs a "
                    "node-classification run" if model.task == "link" else
                    "a node-classification model: Score needs a link model (`ringgnn train DATASET --task link`)")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{call}: the served model ({model.run_dir}) is {what}")
        return model

    def _sample(self, context: Any, model: Model, nodes: np.ndarray, seed: int) -> Tuple[Dict[str, Any], np.ndarray]:
        return self._call(context, self.engine.sample_with_rows, nodes, fanouts=model.fanouts, seed=seed)

    def Predict(self, request: Any, context: Any) -> Any:
        import torch

        model = self._needs_task(context, "node", "Predict")
        seed = request.seed if request.HasField("seed") else self.engine.seed
        nodes = self._nodes(context, request.nodes)
        sub, x = self._sample(context, model, nodes, seed)
        logits, _ = model.run(sub, x)
        order = request_order(nodes, sub["node"], sub["num_sampled_nodes"][0])
        probs = torch.softmax(logits, dim=-1).numpy()[order]
        reply = self.pb.PredictReply(rows=len(order), classes=probs.shape[1], seed=seed)
        reply.probs.extend(probs.ravel().tolist())
        reply.label.extend(probs.argmax(axis=1).tolist())
        return reply

    def Embed(self, request: Any, context: Any) -> Any:
        model = self._needs_model(context)
        seed = request.seed if request.HasField("seed") else self.engine.seed
        nodes = self._nodes(context, request.nodes)
        sub, x = self._sample(context, model, nodes, seed)
        order = request_order(nodes, sub["node"], sub["num_sampled_nodes"][0])
        values = model.embeddings(sub, x).numpy()[order]
        reply = self.pb.EmbedReply(rows=len(order), dim=values.shape[1], seed=seed)
        reply.values.extend(values.ravel().tolist())
        return reply

    def Score(self, request: Any, context: Any) -> Any:
        import grpc

        model = self._needs_task(context, "link", "Score")
        if len(request.src) != len(request.dst):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Score: src has {len(request.src)} node ids and dst {len(request.dst)}: give one "
                          "destination per source")
        seed = request.seed if request.HasField("seed") else self.engine.seed
        src, dst = np.asarray(request.src, dtype=np.int64), np.asarray(request.dst, dtype=np.int64)
        # The sample of the distinct endpoints, ascending (the seeds of a link batch, as in training).
        nodes = self._nodes(context, np.unique(np.concatenate([src, dst])))
        sub, x = self._sample(context, model, nodes, seed)
        z = model.embeddings(sub, x)
        distinct = sub["num_sampled_nodes"][0]
        scores = model.score(z[request_order(src, sub["node"], distinct)], z[request_order(dst, sub["node"], distinct)])
        reply = self.pb.ScoreReply(rows=len(src), seed=seed)
        reply.scores.extend(scores.numpy().astype(np.float32).tolist())
        return reply

    def Info(self, request: Any, context: Any) -> Any:
        e, ds, m = self.engine, self.dataset, self.model
        reply = self.pb.InfoReply(
            num_nodes=e.num_nodes, num_edges=e.num_edges, feature_dim=e.feature_dim,
            feature_dtype=e.feature_dtype or "", num_classes=ds.num_classes or 0, seed=e.seed,
            model=m.kind if m else "", model_run=m.run_dir if m else "", model_hidden=m.hidden if m else 0,
            max_nodes=e.max_nodes, max_hops=e.max_hops, version=_core.__version__, backend=e.backend,
            feature_backend=e.feature_backend, dataset=ds.path, stats=self.pb.Stats(**e.stats()),
            model_task=m.task if m else "", model_decoder=(m.decoder_kind or "") if m else "")
        reply.fanouts.extend(e.fanouts)
        if m:
            reply.model_fanouts.extend(m.fanouts)
        return reply

    def methods(self) -> Dict[str, Tuple[Any, Any, bool]]:
        """Each method's (implementation, request message, whether the reply is bytes already)."""
        pb = self.pb
        return {
            "Sample": (self.Sample, pb.SampleRequest, True),
            "Features": (self.Features, pb.FeaturesRequest, False),
            "Predict": (self.Predict, pb.PredictRequest, False),
            "Embed": (self.Embed, pb.PredictRequest, False),
            "Score": (self.Score, pb.ScoreRequest, False),
            "Info": (self.Info, pb.InfoRequest, False),
        }

    def handler(self) -> Any:
        """The service's handler for grpcio. Requests arrive as bytes and are parsed here, so
        that a malformed one gets INVALID_ARGUMENT with the parser's message; Sample's reply is
        already bytes."""
        import grpc

        def method(fn, message, raw_reply):
            def call(data: bytes, context: Any) -> Any:
                try:
                    request = message.FromString(data)
                except Exception as e:  # protobuf's DecodeError, or a bad UTF-8 string
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"malformed {message.DESCRIPTOR.full_name}: {e}")
                return fn(request, context)

            serialize = (lambda b: b) if raw_reply else (lambda m: m.SerializeToString())
            return grpc.unary_unary_rpc_method_handler(call, response_serializer=serialize)

        return grpc.method_handlers_generic_handler(
            SERVICE, {name: method(*m) for name, m in self.methods().items()})

    def dispatch(self, method: str, data: bytes, timeout: Optional[float], token: Any) -> Tuple[int, Any]:
        """One call from the Rust server (``_core.GrpcServer``, which serves Sample, Features and
        Info itself and calls this for Predict, Embed and Score): ``(0, reply bytes)`` or
        ``(status code, message)``."""
        fn, message, raw_reply = self.methods()[method]
        context = _Context(timeout, token)
        try:
            try:
                request = message.FromString(data)
            except Exception as e:  # protobuf's DecodeError, or a bad UTF-8 string
                context.abort(_code("INVALID_ARGUMENT"), f"malformed {message.DESCRIPTOR.full_name}: {e}")
            reply = fn(request, context)
            return 0, reply if raw_reply else reply.SerializeToString()
        except _Aborted as a:
            return a.code.value[0], a.details


class _Aborted(Exception):
    def __init__(self, code: Any, details: str):
        super().__init__(details)
        self.code, self.details = code, details


class _Context:
    """What the servicer's methods use of grpcio's context, for a call from the Rust server: the
    time left, the request's cancel token (cancelled by the server when the client goes away),
    and ``abort``."""

    def __init__(self, timeout: Optional[float], token: Any):
        self.timeout, self.token = timeout, token

    def time_remaining(self) -> Optional[float]:
        return self.timeout

    def abort(self, code: Any, details: str) -> None:
        raise _Aborted(code, details)


def _code(name: str) -> Any:
    import grpc

    return getattr(grpc.StatusCode, name)


def _message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


class Server:
    """A running ``ringgnn serve``: :meth:`start` binds and serves, :meth:`stop` drains."""

    def __init__(self, dataset: Any, *, listen: str = "127.0.0.1:50051", model: Optional[str] = None,
                 fanouts: Any = None, seed: int = 0, memory: Any = None, threads: Optional[int] = None,
                 backend: str = "auto", direct: bool = False, cache: Any = None, neighbor_cache: Any = None,
                 max_wait_ms: Optional[float] = None,
                 max_wave: int = 64, max_concurrent: int = 256, handlers: int = 32, max_nodes: int = 4096,
                 max_hops: int = 6,
                 batch_size: Optional[int] = None, frontend: str = "rust"):
        if frontend not in FRONTENDS:
            raise InputError(f"--frontend must be one of {', '.join(FRONTENDS)}, not {frontend!r}")
        self.frontend = frontend
        self.dataset = open_homogeneous(dataset, "the server")
        self.model = Model(model, self.dataset) if model else None
        # Python's gRPC and protobuf (about 24 MiB) only where calls go through Python: the
        # grpcio frontend, or Predict/Embed/Score. Loaded before the engine, so its reserve has them.
        if frontend == "grpcio" or self.model:
            protos()
        if fanouts is None:
            fanouts = self.model.fanouts if self.model else [20, 15, 10]
        max_concurrent = _options.count(max_concurrent, "max_concurrent", 1)
        if max_wait_ms is not None and not 0 <= max_wait_ms <= 10_000:
            raise InputError(f"--max-wait-ms must be between 0 and 10000 milliseconds, not {max_wait_ms}")
        max_wait_us = None if max_wait_ms is None else int(max_wait_ms * 1000)
        # The budget covers the whole process: what it holds now (Python, grpc, PyTorch and the
        # model) is the caller's reserve.
        self.engine = _core.Engine(
            self.dataset.path, _options.fanouts(fanouts), backend=_options.backend(backend), direct=bool(direct),
            threads=_options.optional_count(threads, "threads"), seed=_options.count(seed, "seed"),
            memory=_options.size(memory, "memory"), reserve=_options.process_rss(),
            cache=_options.size(cache, "cache"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
            # The plan is made for the largest request: --max-nodes seeds at the default fanouts (a
            # larger --batch-size lets a wave hold more); a budget it does not fit is refused here.
            batch_size=_options.count(max_nodes if batch_size is None else batch_size, "batch_size", 1),
            max_wait_us=max_wait_us, max_wave=_options.count(max_wave, "max_wave", 1),
            queue=max_concurrent,
            max_nodes=_options.count(max_nodes, "max_nodes", 1), max_hops=_options.count(max_hops, "max_hops", 1))
        handlers = _options.count(handlers, "handlers", 1)
        host = listen.rsplit(":", 1)[0]
        if frontend == "rust":
            # Binds and serves at once. Sample, Features and Info never enter Python; Predict,
            # Embed and Score call the servicer (with the GIL) for the model.
            m = self.model
            delegate = Servicer(self.engine, self.dataset, m).dispatch if m else None
            self._rust = _core.GrpcServer(
                self.engine, listen, delegate, handlers=handlers, max_concurrent=max_concurrent,
                max_message=MAX_MESSAGE, dataset=str(self.dataset.path), num_classes=self.dataset.num_classes or 0,
                model=m.kind if m else "", model_run=str(m.run_dir) if m else "",
                model_fanouts=list(m.fanouts) if m else [], model_hidden=m.hidden if m else 0,
                model_task=m.task if m else "", model_decoder=(m.decoder_kind or "") if m else "")
            self.port = self._rust.port
            self.address = f"{host}:{self.port}"
            return
        import grpc
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc

        self.servicer = Servicer(self.engine, self.dataset, self.model)
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=handlers, thread_name_prefix="ringgnn-rpc"),
            maximum_concurrent_rpcs=max_concurrent,
            options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                     ("grpc.max_send_message_length", MAX_MESSAGE),
                     ("grpc.so_reuseport", 0)])
        self._grpc.add_generic_rpc_handlers((self.servicer.handler(),))
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._grpc)
        self._serving = health_pb2.HealthCheckResponse.SERVING
        try:
            self.port = self._grpc.add_insecure_port(listen)
        except RuntimeError as e:
            raise InputError(f"--listen {listen}: cannot listen there ({e}); is the port in use?") from None
        if not self.port:
            raise InputError(f"--listen {listen}: cannot listen there; is the port in use?")
        self.address = f"{host}:{self.port}"

    def start(self) -> "Server":
        """Serve (the Rust frontend serves from the start; the health service says SERVING)."""
        if self.frontend == "grpcio":
            self._grpc.start()
            for name in ("", SERVICE):
                self.health.set(name, self._serving)
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Refuse new requests, let those in flight finish (``grace`` seconds at most), then
        stop the engine."""
        if self.frontend == "rust":
            self._rust.stop(grace)
            return
        self.health.enter_graceful_shutdown()
        self._grpc.stop(grace).wait()
        self.engine.close()

    def describe(self) -> str:
        e, m = self.engine, self.model
        pages = e.stats()["pages_cached"]
        return (f"serving {self.dataset.path} ({e.num_nodes:,} nodes, {e.num_edges:,} edges"
                + (f", {e.feature_dim} features ({e.feature_dtype})" if e.feature_dim else "")
                + f") on {self.address} (gRPC: {self.frontend}): sampling with {e.backend}"
                + (f", rows with {e.feature_backend}" if e.feature_dim else "")
                + f", default fanouts {','.join(map(str, e.fanouts))}, seed {e.seed}"
                + (f"; {'link model' if m and m.task == 'link' else 'model'} {m.kind}"
                   + (f" with a {m.decoder_kind} decoder" if m.decoder_kind else "")
                   + f" from {m.path} (fanouts {','.join(map(str, m.fanouts))})" if m else "")
                + f"; memory {e.plan()['text']}"
                + (f"; {pages:,} hot neighbor pages read and kept" if pages else ""))
