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

A heterogeneous dataset is served by :class:`HeteroServicer` through grpcio only (the Rust engine
is homogeneous): requests name the seeds' node type, Sample is
``ringgnn.HeteroNeighborSampler(...).sample(nodes, node_type)``, run on ``--threads`` worker
threads that call the core samplers and feature readers with the GIL released, and a
heterogeneous run's :class:`~ringgnn.hetero_models.HeteroModel` answers Predict and Embed
(:class:`HeteroModelRun`). docs/SERVING.md, "Heterogeneous datasets".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import threading
from collections import OrderedDict
from concurrent import futures
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

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
from .dataset import Dataset, HeteroDataset
from .hetero import HeteroNeighborSampler, HeteroSample, relation_fanouts

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

    def __init__(self, run_dir: str, ds: Dataset, read: Optional[Tuple[str, Dict[str, Any]]] = None):
        from .checkpoints import load_checkpoint

        ckpt = load_checkpoint(run_dir, ds, "--model", read=read)
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
        hook = self.net.convs[-1].register_forward_pre_hook(_seen_by(seen, lambda inp: inp[0]))
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


def _seen_by(seen: List[Any], pick) -> Any:
    """A forward pre-hook that appends ``pick(inputs)`` to ``seen`` for the calling thread's
    forward only: hooks belong to the shared model, and concurrent requests run it at once
    (PyTorch releases the GIL in its kernels)."""
    me = threading.get_ident()

    def hook(_module: Any, inputs: Any) -> None:
        if threading.get_ident() == me:
            seen.append(pick(inputs))

    return hook


def request_order(nodes: np.ndarray, sampled: np.ndarray, distinct: int) -> np.ndarray:
    """For each requested node, its row among the ``distinct`` first entries of ``sampled`` (the
    distinct seeds in first-occurrence order)."""
    index = {int(v): i for i, v in enumerate(sampled[:distinct])}
    return np.fromiter((index[int(v)] for v in nodes), dtype=np.int64, count=len(nodes))


class _Handlers:
    """What both servicers share: the grpcio handler and the Rust server's entry point, over
    their :meth:`methods`."""

    def methods(self) -> Dict[str, Tuple[Any, Any, bool]]:
        raise NotImplementedError

    def handler(self) -> Any:
        """The service's handler for grpcio. Requests arrive as bytes and are parsed here, so
        that a malformed one gets INVALID_ARGUMENT with the parser's message; a reply may be bytes
        already (the homogeneous Sample's)."""
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


class Servicer(_Handlers):
    """The ``RingGnn`` service over one engine (and an optional model): a homogeneous dataset."""

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

    def _untyped(self, context: Any, call: str, node_type: str, relation_fanouts: int = 0) -> None:
        """Refuse the fields of heterogeneous requests: this dataset has no types."""
        if node_type or relation_fanouts:
            what = f"node_type '{node_type}'" if node_type else "relation_fanouts"
            context.abort(_code("INVALID_ARGUMENT"),
                          f"{call}: {what}: {self.dataset.path} is a homogeneous dataset (no node types or "
                          "relations); leave node_type and relation_fanouts out")

    def _needs_model(self, context: Any) -> Model:
        import grpc

        if self.model is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "this server has no model: start it with --model RUN_DIR (a `ringgnn train` run)")
        return self.model

    # --- the calls --------------------------------------------------------------------------------

    def Sample(self, request: Any, context: Any) -> bytes:
        """The reply's bytes, encoded by the engine (sent as they are: see :meth:`handler`)."""
        self._untyped(context, "Sample", request.node_type, len(request.relation_fanouts))
        seed = request.seed if request.HasField("seed") else self.engine.seed
        return self._call(context, self.engine.sample, self._nodes(context, request.nodes),
                          fanouts=list(request.fanouts) or None, replace=request.replace, seed=seed,
                          edge_ids=request.edge_ids, reply=True)

    def Features(self, request: Any, context: Any) -> Any:
        import grpc

        self._untyped(context, "Features", request.node_type)
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

        self._untyped(context, "Predict", request.node_type)
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
        self._untyped(context, "Embed", request.node_type)
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


# --- heterogeneous datasets -------------------------------------------------------------------

#: Samplers of request configurations other than the server's pinned ones (fanouts, replace,
#: seed, edge ids) kept for reuse. Each holds its relations' offset indexes and open files, loaded
#: again on a miss (a request with its own seed misses unless the seed repeats).
ADHOC_SAMPLERS = 8


def fanouts_arg(value: Any) -> Any:
    """``--fanouts`` as given: a JSON object per relation (text starting with ``{``), else as is
    (a list, "20,15,10", a dict, or None)."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError as e:
            raise InputError(f"--fanouts {value!r}: not a JSON object ({e}); give "
                             "'{\"SRC:REL:DST\": [10, 5], ...}' or a list such as 10,5") from None
    return value


def _is_hetero_run(read: Tuple[str, Dict[str, Any]]) -> bool:
    from .hetero_infer import is_hetero_run

    return is_hetero_run(read)


class HeteroModelRun:
    """A heterogeneous run's model (``ringgnn train DS --target TYPE``; ``best.pt``, else
    ``last.pt``) for inference on sampled neighborhoods of ``ds``, which it must fit: the same
    node types with the same counts and feature widths, the same relations, its classes."""

    task, decoder_kind = "node", None

    def __init__(self, run_dir: str, ds: HeteroDataset, read: Tuple[str, Dict[str, Any]]):
        from .hetero_infer import load_hetero_run

        _, net, path = load_hetero_run(run_dir, ds, read)
        args = read[1].get("args") or {}
        try:
            self.fanouts = relation_fanouts(ds, args.get("fanouts"))
        except InputError as e:
            raise InputError(f"{path}: its training fanouts do not fit {ds.path}: {e}") from None
        self.net = net.eval()
        self.kind, self.hidden, self.layers = args.get("model") or net.model, net.hidden, net.layers
        self.target, self.classes = net.target, net.out_dim
        self.run_dir, self.path = run_dir, path

    def layer_of(self, t: str) -> Optional[int]:
        """The layer whose input Embed returns for type ``t``: the last below the output layer
        that has rows of ``t`` (for the target, the input of the last layer; 0: the input rows);
        None when the model never computes ``t`` (too far from the target)."""
        below = [k for k, types in enumerate(self.net.computed[:-1]) if t in types]
        return below[-1] if below else None

    def run(self, s: HeteroSample, x: Mapping[str, np.ndarray], layer: Optional[int] = None) -> Tuple[Any, Any]:
        """(the target's logits, ``s.seed_type``'s rows at the input of layer ``layer`` or None)
        for every row of the sampled batch ``s`` with feature rows ``x`` (eval mode)."""
        import torch

        seen: List[Any] = []
        hook = None
        if layer is not None:
            hook = self.net.convs[layer].register_forward_pre_hook(_seen_by(seen, lambda inp: inp[0][s.seed_type]))
        edges = {r: torch.from_numpy(s.edge_index(r)) for r in s.row}
        n_id = {t: torch.from_numpy(v) for t, v in s.node.items()}
        try:
            with torch.no_grad():
                logits = self.net({t: torch.from_numpy(v) for t, v in x.items()}, edges, n_id)
        finally:
            if hook is not None:
                hook.remove()
        return logits, (seen[0] if seen else None)


def _narrow(rows: np.ndarray, dtype: str) -> bytes:
    """The stored-dtype bytes of float32 rows widened from ``dtype``: exact, since widening f16
    or bf16 to f32 loses nothing."""
    if dtype == "f16":
        return rows.astype("<f2").tobytes()
    if dtype == "bf16":
        return (rows.astype("<f4", copy=False).view("<u4") >> 16).astype("<u2").tobytes()
    return rows.astype("<f4", copy=False).tobytes()


class HeteroServicer(_Handlers):
    """The ``RingGnn`` service over a heterogeneous dataset (grpcio only). A request is checked
    on its handler thread, then sampled (and its rows gathered) on one of ``threads`` workers
    (a thread pool: the core sampler and feature readers release the GIL), each holding its own
    core samplers (one per sampling configuration in use, through
    :class:`~ringgnn.HeteroNeighborSampler`, which keeps one per thread) and feature readers;
    the model runs on the handler thread. No waves: each request is sampled on its own."""

    def __init__(self, dataset: HeteroDataset, model: Optional[HeteroModelRun], *, fanouts: Any, seed: int,
                 threads: int, backend: str, direct: bool, memory: Optional[int], max_nodes: int, max_hops: int):
        self.pb, _ = protos()
        self.dataset, self.model, self.seed, self.direct = dataset, model, seed, direct
        self.threads, self.max_nodes, self.max_hops = threads, max_nodes, max_hops
        ds = dataset
        self.num_nodes, self.num_edges = ds.num_nodes_dict, ds.num_edges_dict
        self.feature_dtypes = {t: ds.manifest["node_types"][t]["features"]["dtype"] for t, d in
                               ds.feature_dims().items() if d is not None}
        self.fanouts = relation_fanouts(ds, fanouts)
        if len(next(iter(self.fanouts.values()))) > max_hops:
            raise InputError(f"--fanouts has {len(next(iter(self.fanouts.values())))} hops, more than --max-hops "
                             f"{max_hops}")
        pinned = [self.fanouts] + ([model.fanouts] if model and model.fanouts != self.fanouts else [])
        # One graph for every sampling configuration (offset indexes and the neighbor files its
        # placement holds, loaded once): the base sampler owns the placement within --memory
        # (HeteroNeighborSampler.placement), the others share it.
        self._base = HeteroNeighborSampler(ds, self.fanouts, backend=backend, direct=direct, seed=seed, memory=memory)
        # Feature rows follow the graph: loaded when the placement holds the whole graph in
        # memory (or --backend memory says so), else read from disk.
        self.backend_choice = "memory" if self._base.placement()[0] == "memory" else backend
        # What samplers of other configurations (made for a request) read the relations kept on
        # disk with: pread unless io_uring was asked for: setting up a ring per relation made such
        # a request 22 ms instead of 4 (docs/SERVING.md).
        self.disk_backend = "uring" if backend == "uring" else "pread"
        # The largest in-degree of each relation bounds a sample's size (--max-nodes at the default
        # fanouts is the largest request the server takes).
        self._max_degree = {r: int(ds.relation(r).degrees().max(initial=0)) for r in ds.relations}
        self.max_edges = max(self._bound(max_nodes, t, self.fanouts, False) for t in ds.node_types)
        self._lock = threading.Lock()
        self._adhoc: "OrderedDict[Any, HeteroNeighborSampler]" = OrderedDict()
        self._pinned = {self._key(f, False, seed, False): self._new_sampler(f, False, seed, False, pinned=True)
                        for f in pinned}
        # Opening the graph and one reader here fails at start, not at the first request, on a
        # dataset that cannot be read, and names what the placement chose.
        self._base.sample(np.zeros(0, dtype=np.int64), ds.node_types[0])
        self.backend = self._base.resolved_backend()
        t = next(iter(self.feature_dtypes), None)
        self.feature_backend = ("" if t is None else "memory" if self.backend_choice == "memory" else
                                _core.FeatureReader(ds.path, backend=self.backend_choice, direct=direct,
                                                    part=f"node/{t}").stats()["backend"])
        self._local = threading.local()
        self._pool = futures.ThreadPoolExecutor(threads, thread_name_prefix="ringgnn-worker")
        self._stats = dict.fromkeys(("sample_requests", "feature_requests", "deadline_exceeded", "cancelled",
                                     "failed", "queued"), 0)

    # --- workers ----------------------------------------------------------------------------------

    @staticmethod
    def _key(fanouts: Mapping[str, List[int]], replace: bool, seed: int, edge_ids: bool) -> Any:
        return tuple((r, tuple(f)) for r, f in sorted(fanouts.items())), replace, seed, edge_ids

    def _new_sampler(self, fanouts: Mapping[str, List[int]], replace: bool, seed: int, edge_ids: bool,
                     pinned: bool = False) -> HeteroNeighborSampler:
        """A sampler of one configuration on the server's graph; one made for a request reads the
        relations kept on disk with :attr:`disk_backend`."""
        return HeteroNeighborSampler(self.dataset, fanouts, replace=replace, seed=seed, with_edge_ids=edge_ids,
                                     share=self._base, disk_backend=None if pinned else self.disk_backend)

    def _sampler(self, fanouts: Mapping[str, List[int]], replace: bool, seed: int,
                 edge_ids: bool) -> HeteroNeighborSampler:
        """The sampler of a configuration: a pinned one (the defaults, the model's), else one of
        the last :data:`ADHOC_SAMPLERS` used, else a new one (reading from disk)."""
        key = self._key(fanouts, replace, seed, edge_ids)
        s = self._pinned.get(key)
        if s is not None:
            return s
        with self._lock:
            s = self._adhoc.pop(key, None) or self._new_sampler(fanouts, replace, seed, edge_ids)
            self._adhoc[key] = s
            while len(self._adhoc) > ADHOC_SAMPLERS:
                self._adhoc.popitem(last=False)
        return s

    def _reader(self, t: str) -> Any:
        """This worker's feature reader of type ``t`` (a reader serves one caller at a time)."""
        readers = getattr(self._local, "readers", None)
        if readers is None:
            readers = self._local.readers = {}
        if t not in readers:
            readers[t] = _core.FeatureReader(self.dataset.path, backend=self.backend_choice, direct=self.direct,
                                             part=f"node/{t}")
        return readers[t]

    def _sample(self, sampler: HeteroNeighborSampler, ids: np.ndarray, t: str,
                rows: bool) -> Tuple[HeteroSample, Optional[Dict[str, np.ndarray]]]:
        s = sampler.sample(ids, t)
        x = {u: self._reader(u).gather(s.node[u]) for u in self.feature_dtypes} if rows else None
        return s, x

    def _gather(self, t: str, ids: np.ndarray) -> np.ndarray:
        return self._reader(t).gather(ids)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._stats[name] += n

    def _work(self, fn, *args) -> Any:
        self._count("queued", -1)
        return fn(*args)

    def _run(self, context: Any, fn, *args) -> Any:
        """``fn(*args)`` on a worker, within the request's deadline; dropped if the client goes
        away before it starts; failures mapped to a status as the engine's are."""
        import grpc

        self._count("queued")
        try:
            fut = self._pool.submit(self._work, fn, *args)
        except RuntimeError:  # the pool was shut down: the server is stopping
            self._count("queued", -1)
            context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")

        def drop() -> None:
            if fut.cancel():
                self._count("queued", -1)

        context.add_callback(drop)
        try:
            return fut.result(timeout=context.time_remaining())
        except futures.TimeoutError:
            drop()
            self._count("deadline_exceeded")
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed before the request was served")
        except futures.CancelledError:
            self._count("cancelled")
            context.abort(grpc.StatusCode.CANCELLED, "the client went away")
        except InputError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except (RingGnnError, OSError) as e:
            self._count("failed")
            context.abort(grpc.StatusCode.INTERNAL, _message(e))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def stats(self) -> Dict[str, int]:
        """The counters of ``InfoReply.stats`` this server keeps (the others stay 0)."""
        with self._lock:
            return dict(self._stats)

    # --- checks -----------------------------------------------------------------------------------

    def _type(self, context: Any, call: str, node_type: str) -> str:
        if not node_type:
            context.abort(_code("INVALID_ARGUMENT"),
                          f"{call}: node_type is required: {self.dataset.path} is a heterogeneous dataset (node "
                          f"types: {', '.join(self.num_nodes)})")
        if node_type not in self.num_nodes:
            context.abort(_code("INVALID_ARGUMENT"),
                          f"{call}: node_type '{node_type}' is not a node type of {self.dataset.path} (it has: "
                          f"{', '.join(self.num_nodes)})")
        return node_type

    def _ids(self, context: Any, nodes: Sequence[int], t: str) -> np.ndarray:
        n = len(nodes)
        if n == 0:
            context.abort(_code("INVALID_ARGUMENT"), "no node ids: give at least one")
        if n > self.max_nodes:
            context.abort(_code("INVALID_ARGUMENT"),
                          f"{n} node ids in one request: at most {self.max_nodes} (the server's --max-nodes)")
        ids = np.asarray(nodes, dtype=np.int64)
        count = self.num_nodes[t]
        bad = ids[(ids < 0) | (ids >= count)]
        if len(bad):
            context.abort(_code("INVALID_ARGUMENT"),
                          f"node {int(bad[0])} of type '{t}' is out of range: '{t}' has {count:,} nodes "
                          f"(ids 0..{count - 1})")
        return ids

    def _request_fanouts(self, context: Any, request: Any) -> Dict[str, List[int]]:
        given = {r: list(f.hops) for r, f in request.relation_fanouts.items()}
        if given and len(request.fanouts):
            context.abort(_code("INVALID_ARGUMENT"),
                          "give fanouts (the same for every relation) or relation_fanouts (per relation), not both")
        if not given and not len(request.fanouts):
            return self.fanouts
        try:
            fan = relation_fanouts(self.dataset, given or list(request.fanouts))
        except InputError as e:
            context.abort(_code("INVALID_ARGUMENT"), str(e))
        hops = len(next(iter(fan.values())))
        if hops > self.max_hops:
            context.abort(_code("INVALID_ARGUMENT"), f"{hops} fanouts: give 1 to {self.max_hops} (one per hop)")
        return fan

    def _bound(self, seeds: int, t: str, fanouts: Mapping[str, List[int]], replace: bool) -> int:
        """An upper bound of the edges sampled around ``seeds`` nodes of type ``t``: at each hop,
        every node of a relation's destination type in the frontier draws at most its fanout (all
        of the relation's largest in-degree for -1), at most the relation's edges in all without
        replacement; the next frontier of a type holds at most its nodes."""
        frontier = dict.fromkeys(self.num_nodes, 0)
        frontier[t] = seeds
        total = 0
        for k in range(len(next(iter(fanouts.values())))):
            reached = dict.fromkeys(self.num_nodes, 0)
            for r, f in fanouts.items():
                src, _, dst = r.split(":")
                deg = self._max_degree[r]
                per = deg if f[k] == -1 else f[k] if replace else min(f[k], deg)
                edges = frontier[dst] * per if replace else min(frontier[dst] * per, self.num_edges[r])
                total += edges
                reached[src] += edges
            frontier = {u: min(reached[u], self.num_nodes[u]) for u in self.num_nodes}
        return total

    def _check_bound(self, context: Any, ids: np.ndarray, t: str, fanouts: Mapping[str, List[int]],
                     replace: bool) -> None:
        b = self._bound(len(ids), t, fanouts, replace)
        if b > self.max_edges:
            context.abort(_code("INVALID_ARGUMENT"),
                          f"this request may sample up to {b:,} edges (its upper bound: {len(ids)} nodes of type "
                          f"'{t}', fanouts {json.dumps(fanouts)}); the server takes at most {self.max_edges:,} per "
                          f"request (the bound of --max-nodes {self.max_nodes} seeds of any type at its default "
                          "fanouts): ask for fewer nodes or smaller fanouts, or start the server with a larger "
                          "--max-nodes or --fanouts")

    def _needs_model(self, context: Any, call: str) -> HeteroModelRun:
        if self.model is None:
            context.abort(_code("FAILED_PRECONDITION"),
                          f"{call}: this server has no model: start it with --model RUN_DIR (a `ringgnn train "
                          f"{self.dataset.path} --target TYPE` run)")
        return self.model

    # --- the calls --------------------------------------------------------------------------------

    def Sample(self, request: Any, context: Any) -> Any:
        t = self._type(context, "Sample", request.node_type)
        ids = self._ids(context, request.nodes, t)
        fan = self._request_fanouts(context, request)
        replace = bool(request.replace)
        self._check_bound(context, ids, t, fan, replace)
        seed = request.seed if request.HasField("seed") else self.seed
        sampler = self._sampler(fan, replace, seed, bool(request.edge_ids))
        s, _ = self._run(context, self._sample, sampler, ids, t, False)
        self._count("sample_requests")
        pb, edge = self.pb, s.edge or {}
        typed = pb.HeteroSampleReply(
            node_type=t,
            nodes={u: pb.SampledNodes(node=v.tolist(), num_sampled_nodes=list(s.num_sampled_nodes[u]))
                   for u, v in s.node.items()},
            edges={r: pb.SampledEdges(row=s.row[r].tolist(), col=s.col[r].tolist(),
                                      edge=edge[r].tolist() if r in edge else [],
                                      num_sampled_edges=list(s.num_sampled_edges[r])) for r in s.row})
        return pb.SampleReply(seed=seed, hetero=typed)

    def Features(self, request: Any, context: Any) -> Any:
        t = self._type(context, "Features", request.node_type)
        dtype = self.feature_dtypes.get(t)
        if dtype is None:
            context.abort(_code("FAILED_PRECONDITION"),
                          f"Features: node type '{t}' of {self.dataset.path} has no features (types with features: "
                          f"{', '.join(self.feature_dtypes) or 'none'})")
        ids = self._ids(context, request.nodes, t)
        rows = self._run(context, self._gather, t, ids)
        self._count("feature_requests")
        stored = bool(request.stored_dtype)
        data = _narrow(rows, dtype) if stored else rows.astype("<f4", copy=False).tobytes()
        return self.pb.FeaturesReply(rows=len(ids), dim=rows.shape[1], dtype=dtype if stored else "f32", data=data,
                                     node_type=t)

    def _infer(self, request: Any, context: Any, call: str) -> Tuple[Any, int]:
        """What Predict (the target's class probabilities) or Embed (rows of the model's
        :meth:`~HeteroModelRun.layer_of` the type) answers, in request order, and the seed."""
        import torch

        model = self._needs_model(context, call)
        t = self._type(context, call, request.node_type or model.target)
        layer = None
        if call == "Predict" and t != model.target:
            context.abort(_code("INVALID_ARGUMENT"),
                          f"Predict: node_type '{t}': the model ({model.run_dir}) classifies nodes of its target "
                          f"type '{model.target}' only; Embed gives the rows of other types")
        if call == "Embed":
            layer = model.layer_of(t)
            if layer is None:
                context.abort(_code("INVALID_ARGUMENT"),
                              f"Embed: node_type '{t}': the model ({model.run_dir}) never computes it (more than "
                              f"{model.layers} hops from its target '{model.target}')")
        ids = self._ids(context, request.nodes, t)
        seed = request.seed if request.HasField("seed") else self.seed
        s, x = self._run(context, self._sample, self._sampler(model.fanouts, False, seed, False), ids, t, True)
        self._count("sample_requests")
        logits, rows = model.run(s, x, layer)
        order = request_order(ids, s.node[t], s.batch_size)
        if call == "Predict":
            return torch.softmax(logits[: s.batch_size], dim=-1).numpy()[order], seed
        return rows[: s.batch_size].numpy()[order], seed

    def Predict(self, request: Any, context: Any) -> Any:
        probs, seed = self._infer(request, context, "Predict")
        reply = self.pb.PredictReply(rows=len(probs), classes=probs.shape[1], seed=seed)
        reply.probs.extend(probs.ravel().tolist())
        reply.label.extend(probs.argmax(axis=1).tolist())
        return reply

    def Embed(self, request: Any, context: Any) -> Any:
        values, seed = self._infer(request, context, "Embed")
        reply = self.pb.EmbedReply(rows=len(values), dim=values.shape[1], seed=seed)
        reply.values.extend(values.ravel().tolist())
        return reply

    def Score(self, request: Any, context: Any) -> Any:
        self._needs_model(context, "Score")
        context.abort(_code("FAILED_PRECONDITION"),
                      f"Score: the served model ({self.model.run_dir}) is a heterogeneous node-classification "
                      "model; Score needs a link model (`ringgnn train DATASET --task link`, homogeneous datasets)")

    def Info(self, request: Any, context: Any) -> Any:
        ds, m, pb = self.dataset, self.model, self.pb
        nt = ds.manifest["node_types"]
        types = [pb.NodeTypeInfo(name=t, num_nodes=n, feature_dim=ds.feature_dims()[t] or 0,
                                 feature_dtype=self.feature_dtypes.get(t, ""),
                                 num_classes=(nt[t].get("labels") or {}).get("num_classes", 0))
                 for t, n in self.num_nodes.items()]
        stats = pb.Stats(**self.stats())
        return pb.InfoReply(
            num_nodes=ds.num_nodes, num_edges=ds.num_edges, seed=self.seed, model=m.kind if m else "",
            model_run=m.run_dir if m else "", model_hidden=m.hidden if m else 0, max_nodes=self.max_nodes,
            max_hops=self.max_hops, version=_core.__version__, backend=self.backend,
            feature_backend=self.feature_backend, dataset=ds.path, stats=stats, model_task="node" if m else "",
            node_types=types, relations=[pb.RelationInfo(name=r, num_edges=n) for r, n in self.num_edges.items()],
            relation_fanouts={r: pb.Fanouts(hops=f) for r, f in self.fanouts.items()},
            model_relation_fanouts={r: pb.Fanouts(hops=f) for r, f in m.fanouts.items()} if m else {},
            model_target=m.target if m else "")

    def methods(self) -> Dict[str, Tuple[Any, Any, bool]]:
        pb = self.pb
        return {
            "Sample": (self.Sample, pb.SampleRequest, False),
            "Features": (self.Features, pb.FeaturesRequest, False),
            "Predict": (self.Predict, pb.PredictRequest, False),
            "Embed": (self.Embed, pb.PredictRequest, False),
            "Score": (self.Score, pb.ScoreRequest, False),
            "Info": (self.Info, pb.InfoRequest, False),
        }


class Server:
    """A running ``ringgnn serve``: :meth:`start` binds and serves, :meth:`stop` drains.

    ``frontend`` defaults to ``rust`` for a homogeneous dataset and ``grpcio`` for a heterogeneous
    one, which only grpcio serves (``rust`` is refused). ``fanouts``: a list, "20,15,10", or for a
    heterogeneous dataset a dict per relation or its JSON text."""

    def __init__(self, dataset: Any, *, listen: str = "127.0.0.1:50051", model: Optional[str] = None,
                 fanouts: Any = None, seed: int = 0, memory: Any = None, threads: Optional[int] = None,
                 backend: str = "auto", direct: bool = False, cache: Any = None, neighbor_cache: Any = None,
                 max_wait_ms: Optional[float] = None,
                 max_wave: Optional[int] = None, max_concurrent: int = 256, handlers: int = 32, max_nodes: int = 4096,
                 max_hops: int = 6,
                 batch_size: Optional[int] = None, frontend: Optional[str] = None):
        if frontend is not None and frontend not in FRONTENDS:
            raise InputError(f"--frontend must be one of {', '.join(FRONTENDS)}, not {frontend!r}")
        ds = dataset if isinstance(dataset, (Dataset, HeteroDataset)) else Dataset.open(dataset)
        fanouts = fanouts_arg(fanouts)
        read = None
        if model:
            from .checkpoints import read_checkpoint

            read = read_checkpoint(model, "--model")
        if isinstance(ds, HeteroDataset):
            self._init_hetero(ds, model, read, listen=listen, fanouts=fanouts, seed=seed, memory=memory,
                              threads=threads, backend=backend, direct=direct, max_concurrent=max_concurrent,
                              handlers=handlers, max_nodes=max_nodes, max_hops=max_hops, frontend=frontend,
                              unused={"--cache": cache, "--neighbor-cache": neighbor_cache,
                                      "--max-wait-ms": max_wait_ms, "--max-wave": max_wave,
                                      "--batch-size": batch_size})
            return
        self.frontend = frontend = frontend or "rust"
        self.dataset = ds
        if read is not None and _is_hetero_run(read):
            raise InputError(f"--model {model}: {read[0]} is a heterogeneous run (target type "
                             f"'{read[1]['args'].get('target')}'); {ds.path} is homogeneous: serve the heterogeneous "
                             "dataset it was trained on")
        if isinstance(fanouts, Mapping):
            raise InputError(f"--fanouts per relation: {ds.path} is a homogeneous dataset (no relations); give a "
                             "list such as 20,15,10")
        self.model = Model(model, self.dataset, read) if model else None
        # Python's gRPC and protobuf (about 24 MiB) only where calls go through Python: the
        # grpcio frontend, or Predict/Embed/Score. Loaded before the engine, so its reserve has them.
        if frontend == "grpcio" or self.model:
            protos()
        if fanouts is None:
            fanouts = self.model.fanouts if self.model else [20, 15, 10]
        max_concurrent = _options.count(max_concurrent, "max_concurrent", 1)
        if max_wait_ms is not None:
            max_wait_ms = _options.real(max_wait_ms, "--max-wait-ms", 0.0, 10_000.0)
        max_wait_us = None if max_wait_ms is None else int(max_wait_ms * 1000)
        # The budget covers the whole process: what it holds now (Python, grpc, PyTorch and the
        # model) is the caller's reserve.
        self.engine = _core.Engine(
            self.dataset.path, _options.fanouts(fanouts), backend=_options.backend(backend), direct=bool(direct),
            threads=_options.optional_count(threads, "threads"), seed=_options.count(seed, "seed"),
            memory=_options.size(memory, "memory"), reserve=_options.process_rss(),
            cache=_options.size(cache, "cache"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
            # Each worker is sized for a wave of --batch-size seeds (default: the engine's, a full
            # wave of single-node requests); a request up to --max-nodes larger than that is
            # answered alone, in a room of its own. A budget that does not fit is refused here.
            batch_size=None if batch_size is None else _options.count(batch_size, "batch_size", 1),
            max_wait_us=max_wait_us, max_wave=_options.count(64 if max_wave is None else max_wave, "max_wave", 1),
            queue=max_concurrent,
            max_nodes=_options.count(max_nodes, "max_nodes", 1), max_hops=_options.count(max_hops, "max_hops", 1))
        handlers = _options.count(handlers, "handlers", 1)
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
            self.address = f"{listen.rsplit(':', 1)[0]}:{self.port}"
            return
        self.servicer = Servicer(self.engine, self.dataset, self.model)
        self._close = self.engine.close
        self._grpcio(listen, handlers, max_concurrent)

    def _init_hetero(self, ds: HeteroDataset, model: Optional[str], read: Optional[Tuple[str, Dict[str, Any]]], *,
                     listen: str, fanouts: Any, seed: int, memory: Any, threads: Optional[int], backend: str,
                     direct: bool, max_concurrent: int, handlers: int, max_nodes: int, max_hops: int,
                     frontend: Optional[str], unused: Dict[str, Any]) -> None:
        """A heterogeneous dataset: :class:`HeteroServicer` behind grpcio."""
        if frontend == "rust":
            raise InputError(f"--frontend rust: {ds.path} is a heterogeneous dataset, which the Rust frontend (a "
                             "homogeneous engine) does not serve; leave --frontend out or give --frontend grpcio")
        given = [k for k, v in unused.items() if v is not None]
        if given:
            raise InputError(f"{', '.join(given)}: not available for a heterogeneous dataset ({ds.path} is one: each "
                             "request is sampled on its own, without waves, memory plan or caches; docs/SERVING.md); "
                             "leave them out")
        if read is not None and not _is_hetero_run(read):
            raise InputError(f"--model {model}: {read[0]} is a homogeneous run; {ds.path} is heterogeneous: serve it "
                             "with a run of `ringgnn train DATASET --target TYPE`")
        self.frontend, self.dataset, self.engine = "grpcio", ds, None
        protos()
        self.model = HeteroModelRun(model, ds, read) if read is not None else None
        if fanouts is None:
            fanouts = self.model.fanouts if self.model else [20, 15, 10]
        threads = _options.optional_count(threads, "threads") or len(os.sched_getaffinity(0))
        self.servicer = HeteroServicer(
            ds, self.model, fanouts=fanouts, seed=_options.count(seed, "seed"), threads=threads,
            backend=_options.backend(backend), direct=bool(direct), memory=_options.size(memory, "memory"),
            max_nodes=_options.count(max_nodes, "max_nodes", 1), max_hops=_options.count(max_hops, "max_hops", 1))
        self._close = self.servicer.close
        self._grpcio(listen, _options.count(handlers, "handlers", 1),
                     _options.count(max_concurrent, "max_concurrent", 1))

    def _grpcio(self, listen: str, handlers: int, max_concurrent: int) -> None:
        """Python's grpcio server of ``self.servicer``, bound to ``listen`` (served by :meth:`start`)."""
        import grpc
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc

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
            self._close()
            raise InputError(f"--listen {listen}: cannot listen there ({e}); is the port in use?") from None
        if not self.port:
            self._close()
            raise InputError(f"--listen {listen}: cannot listen there; is the port in use?")
        self.address = f"{listen.rsplit(':', 1)[0]}:{self.port}"

    def start(self) -> "Server":
        """Serve (the Rust frontend serves from the start; the health service says SERVING)."""
        if self.frontend == "grpcio":
            self._grpc.start()
            for name in ("", SERVICE):
                self.health.set(name, self._serving)
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Refuse new requests, let those in flight finish (``grace`` seconds at most), then
        stop the engine (or the workers)."""
        if self.frontend == "rust":
            self._rust.stop(grace)
            return
        self.health.enter_graceful_shutdown()
        self._grpc.stop(grace).wait()
        self._close()

    def stats(self) -> Dict[str, Any]:
        """The counters of ``InfoReply.stats``."""
        return self.engine.stats() if self.engine is not None else self.servicer.stats()

    def describe(self) -> str:
        if self.engine is None:
            return self._describe_hetero()
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

    def _describe_hetero(self) -> str:
        ds, s, m = self.dataset, self.servicer, self.model
        return (f"serving {ds.path} (heterogeneous: {len(ds.node_types)} node types, {ds.num_nodes:,} nodes; "
                f"{len(ds.relations)} relations, {ds.num_edges:,} edges) on {self.address} (gRPC: grpcio): "
                f"{s.threads} workers sampling with {s.backend}"
                + (f", rows with {s.feature_backend}" if s.feature_backend else "")
                + f", default fanouts {json.dumps(s.fanouts)}, seed {s.seed}"
                + (f"; model {m.kind} from {m.path} (target {m.target}, fanouts {json.dumps(m.fanouts)})" if m else ""))
