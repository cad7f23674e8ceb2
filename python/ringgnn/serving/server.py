"""``ringgnn serve``: the :class:`Server` (on-demand sampling, features and inference behind the
gRPC API of ``ringgnn/serve.proto``): the Rust request engine of the dataset's kind, the model
of ``--model``, and the frontend (tonic in Rust, or Python's grpcio). What it answers, its status
codes and how it serves: docs/SERVING.md; the command line is ``ringgnn.cli.serve``.
"""

from __future__ import annotations

import json
from concurrent import futures
from typing import Any, Dict, Mapping, Optional, Tuple

from .. import _core, _options
from .._core import InputError
from ..data.dataset import Dataset, HeteroDataset
from ..data.schema import HOMOGENEOUS_TYPE
from ..models.checkpoints import is_hetero_run, read_checkpoint
from ..sampling.hetero import relation_fanouts
from ..sampling.plan import plan_hetero
from .model import HeteroModelRun, Model, request_order
from .rpc import MAX_MESSAGE, PROTO, SERVICE, protos
from .servicer import Servicer

#: The gRPC servers: tonic in Rust (the default: Sample, Features and Info never enter Python), or
#: grpcio in Python (every call through Python; kept as the baseline of docs/benchmarks.md).
FRONTENDS = ("rust", "grpcio")

__all__ = ["FRONTENDS", "MAX_MESSAGE", "PROTO", "SERVICE", "HeteroModelRun", "Model", "Server", "Servicer",
           "fanouts_arg", "protos", "request_order"]


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


class Server:
    """A running ``ringgnn serve``: :meth:`start` binds and serves, :meth:`stop` drains.

    ``frontend``: ``rust`` (the default) or ``grpcio``. ``fanouts``: a list, "20,15,10", or for a
    heterogeneous dataset a dict per relation or its JSON text. ``ignore_time``: sample every edge
    whatever its time; the dataset's time files are not opened and requests at times are refused."""

    def __init__(self, dataset: Any, *, listen: str = "127.0.0.1:50051", model: Optional[str] = None,
                 fanouts: Any = None, seed: int = 0, memory: Any = None, threads: Optional[int] = None,
                 backend: str = "auto", direct: bool = False, cache: Any = None, neighbor_cache: Any = None,
                 max_wait_ms: Optional[float] = None,
                 max_wave: Optional[int] = None, max_concurrent: int = 256, handlers: int = 32, max_nodes: int = 4096,
                 max_hops: int = 6,
                 batch_size: Optional[int] = None, frontend: Optional[str] = None,
                 temporal_strategy: str = "uniform", ignore_time: bool = False):
        if frontend is not None and frontend not in FRONTENDS:
            raise InputError(f"--frontend must be one of {', '.join(FRONTENDS)}, not {frontend!r}")
        ds = Dataset.opened(dataset)
        typed = isinstance(ds, HeteroDataset)
        fanouts = fanouts_arg(fanouts)
        read = None
        if model:
            read = read_checkpoint(model, "--model")
        # A homogeneous dataset with a typed run of its one type (`ringgnn train` at times makes one)
        # is served as that one-type case: the typed engine, requests of node type `node` (the
        # default there), replies naming it.
        one_type = (not typed and read is not None and is_hetero_run(read)
                    and read[1]["args"].get("target") == HOMOGENEOUS_TYPE)
        if typed:
            if cache is not None:
                raise InputError(f"--cache: not available for a heterogeneous dataset ({ds.path} is one: its feature "
                                 "rows are read as the memory plan places them; docs/SERVING.md); leave it out")
            if read is not None and not is_hetero_run(read):
                raise InputError(f"--model {model}: {read[0]} is a homogeneous run; {ds.path} is heterogeneous: serve "
                                 "it with a run of `ringgnn train DATASET --target TYPE`")
        elif read is not None and is_hetero_run(read) and not one_type:
            raise InputError(f"--model {model}: {read[0]} is a heterogeneous run (target type "
                             f"'{read[1]['args'].get('target')}'); {ds.path} is homogeneous: serve the "
                             "heterogeneous dataset it was trained on")
        if one_type and cache is not None:
            raise InputError(f"--cache: not available for {ds.path} served with a typed run of its one type ({model}: "
                             "the typed engine reads feature rows as the memory plan places them); leave it out")
        if not typed and isinstance(fanouts, Mapping):
            raise InputError(f"--fanouts per relation: {ds.path} is a homogeneous dataset (no relations); give "
                             "a list such as 20,15,10")
        #: Served by the typed engine (a heterogeneous dataset, or the one-type case above).
        self.typed = typed = typed or one_type
        self.frontend = frontend = frontend or "rust"
        self.dataset = ds
        # The served model of run ``model`` (read already), for dataset ``ds``.
        self.model = (HeteroModelRun if typed else Model)(model, ds, read) if model else None
        # Python's gRPC and protobuf (about 24 MiB) only where calls go through Python: the
        # grpcio frontend, a typed dataset, or Predict/Embed/Score. Loaded before the engine, so its
        # reserve has them.
        if frontend == "grpcio" or self.model or typed:
            protos()
        if fanouts is None:
            fanouts = self.model.fanouts if self.model else [20, 15, 10]
        max_concurrent = _options.count(max_concurrent, "max_concurrent", 1)
        if max_wait_ms is not None:
            max_wait_ms = _options.real(max_wait_ms, "--max-wait-ms", 0.0, 10_000.0)
        # Each worker is sized for a wave of --batch-size seeds (default: the engine's, a full wave of
        # single-node requests); a request up to --max-nodes larger than that is answered alone, in a
        # room of its own.
        limits = dict(threads=_options.optional_count(threads, "threads"), seed=_options.count(seed, "seed"),
                      batch_size=None if batch_size is None else _options.count(batch_size, "batch_size", 1),
                      max_wait_us=None if max_wait_ms is None else int(max_wait_ms * 1000),
                      max_wave=_options.count(64 if max_wave is None else max_wave, "max_wave", 1),
                      queue=max_concurrent, max_nodes=_options.count(max_nodes, "max_nodes", 1),
                      max_hops=_options.count(max_hops, "max_hops", 1), temporal_strategy=temporal_strategy,
                      times=not ignore_time)
        if typed:
            #: A typed engine's memory plan (``ringgnn.sampling.plan.HeteroPlan``; the Rust engine
            #: of a homogeneous dataset says its own: ``engine.plan()``).
            self.engine, self.memory_plan = _hetero_engine(
                ds, fanouts, backend=_options.backend(backend), direct=bool(direct),
                memory=_options.size(memory, "memory"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
                **limits)
        else:
            # The budget covers the whole process: what it holds now (Python, grpc, PyTorch and the
            # model) is the caller's reserve. A budget that does not fit the waves is refused here.
            self.engine = _core.Engine(
                ds.path, _options.fanouts(fanouts), backend=_options.backend(backend), direct=bool(direct),
                memory=_options.size(memory, "memory"), reserve=_options.process_rss(),
                cache=_options.size(cache, "cache"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
                **limits)
        handlers = _options.count(handlers, "handlers", 1)
        if frontend == "rust":
            # Binds and serves at once. Over a homogeneous dataset Sample, Features and Info never
            # enter Python; Predict, Embed and Score call the servicer (with the GIL) for the model.
            # Over a typed one every call goes to the servicer.
            m = self.model
            delegate = Servicer(self.engine, ds, m, typed).dispatch if m or typed else None
            # What Info reports of the dataset and the model (the servicer's Info, for a typed one).
            info = {} if typed or not m else dict(
                model=m.kind, model_run=str(m.run_dir), model_fanouts=list(m.fanouts), model_hidden=m.hidden,
                model_task=m.task, model_decoder=m.decoder_kind or "")
            self._rust = _core.GrpcServer(
                self.engine, listen, delegate, handlers=handlers, max_concurrent=max_concurrent,
                max_message=MAX_MESSAGE, dataset=str(ds.path), num_classes=0 if typed else ds.num_classes or 0,
                **info)
            self.port = self._rust.port
            self.address = f"{listen.rsplit(':', 1)[0]}:{self.port}"
            return
        self.servicer = Servicer(self.engine, ds, self.model, typed)
        self._grpcio(listen, handlers, max_concurrent)

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
            self.engine.close()
            raise InputError(f"--listen {listen}: cannot listen there ({e}); is the port in use?") from None
        if not self.port:
            self.engine.close()
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
        stop the engine."""
        if self.frontend == "rust":
            self._rust.stop(grace)
            return
        self.health.enter_graceful_shutdown()
        self._grpc.stop(grace).wait()
        self.engine.close()

    def stats(self) -> Dict[str, Any]:
        """The counters of ``InfoReply.stats``."""
        return self.engine.stats()

    def describe(self) -> str:
        e, m = self.engine, self.model
        pages = e.stats()["pages_cached"]
        cached = f"; {pages:,} hot neighbor pages read and kept" if pages else ""
        if e.has_times:
            cached += ("; the dataset has times: a request with a time samples the edges up to it, one without "
                       "every edge (the present)")
        elif self.dataset.has_times:
            cached += "; the dataset's times are not opened (--ignore-time): every edge is sampled"
        if self.typed:
            ds = self.dataset
            kind = "heterogeneous" if isinstance(ds, HeteroDataset) else "as its one-type case"
            return (f"serving {ds.path} ({kind}: {len(ds.node_types)} node types, {ds.num_nodes:,} nodes; "
                    f"{len(ds.relations)} relations, {ds.num_edges:,} edges) on {self.address} "
                    f"(gRPC: {self.frontend}): "
                    f"{e.threads} workers sampling with {e.backend}"
                    + (f", rows with {e.feature_backend}" if e.feature_backend else "")
                    + f", default fanouts {json.dumps(dict(e.fanouts))}, seed {e.seed}"
                    + (f"; model {m.kind} from {m.path} (target {m.target}, fanouts {json.dumps(m.fanouts)})"
                       if m else "") + cached)
        return (f"serving {self.dataset.path} ({e.num_nodes:,} nodes, {e.num_edges:,} edges"
                + (f", {e.feature_dim} features ({e.feature_dtype})" if e.feature_dim else "")
                + f") on {self.address} (gRPC: {self.frontend}): sampling with {e.backend}"
                + (f", rows with {e.feature_backend}" if e.feature_dim else "")
                + f", default fanouts {','.join(map(str, e.fanouts))}, seed {e.seed}"
                + (f"; {'link model' if m and m.task == 'link' else 'model'} {m.kind}"
                   + (f" with a {m.decoder_kind} decoder" if m.decoder_kind else "")
                   + f" from {m.path} (fanouts {','.join(map(str, m.fanouts))})" if m else "")
                + f"; memory {e.plan()['text']}" + cached)


def _hetero_engine(ds: HeteroDataset, fanouts: Any, *, backend: str, direct: bool, memory: Optional[int],
                   neighbor_cache: Optional[int], max_hops: int, **limits: Any) -> Tuple[Any, Any]:
    """The engine of a heterogeneous dataset and its memory plan: the neighbor files the memory plan
    (``ringgnn.sampling.plan``) holds are loaded, the others read with ``backend`` through
    ``neighbor_cache`` bytes of hot pages (default: half of the batches' part, ``plan.batch_bytes``);
    feature rows are loaded when every neighbor file is, else read from disk. The room of a
    request larger than a wave (``HeteroEngine.large_room``) is lent by the hot pages when they
    hold it; otherwise the plan counts it as held, and the engine opens again on that plan (as
    ``_core.Engine`` adds it to its reserve)."""
    fan = relation_fanouts(ds, fanouts)
    hops = len(next(iter(fan.values())))
    if hops > max_hops:
        raise InputError(f"--fanouts has {hops} hops, more than --max-hops {max_hops}")

    def open_engine(reserve: int) -> Any:
        plan = plan_hetero(ds, fan, memory=memory, backend=backend, reserve=reserve, times=limits["times"])
        placed, held = plan.placement()
        cache = (0 if placed == "memory" else plan.batch_bytes // 2) if neighbor_cache is None else neighbor_cache
        engine = _core.HeteroEngine(ds.path, list(fan.items()), backend=placed, direct=direct, memory_relations=held,
                                    features_memory=placed == "memory", neighbor_cache=cache, max_hops=max_hops,
                                    **limits)
        return engine, plan

    engine, plan = open_engine(0)
    room, lent = engine.large_room
    if room and not lent:
        engine.close()
        engine, plan = open_engine(room)
    return engine, plan
