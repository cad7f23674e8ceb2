"""``ringgnn serve``'s :class:`Server`: the Rust request engine of the dataset's kind, the model of
``--model`` and the gRPC frontend (tonic in Rust, or grpcio); docs/SERVING.md."""

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
from .model import HeteroModelRun, Model
from .rpc import MAX_MESSAGE, SERVICE, protos
from .servicer import Servicer

#: The gRPC servers: tonic in Rust (the default), or grpcio (every call through Python).
FRONTENDS = ("rust", "grpcio")


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
    """A running ``ringgnn serve``: :meth:`start` serves, :meth:`stop` drains. The options are the
    command's (``ringgnn serve --help``); ``fanouts`` may also be a dict per relation."""

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
        # A homogeneous dataset with a typed run of its one type is served as its one-type case.
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
        self.typed = typed = typed or one_type
        self.frontend = frontend = frontend or "rust"
        self.dataset = ds
        self.model = (HeteroModelRun if typed else Model)(model, ds, read) if model else None
        # grpc and protobuf (24 MiB) only where calls go through Python; before the engine's reserve.
        if frontend == "grpcio" or self.model or typed:
            protos()
        if fanouts is None:
            fanouts = self.model.fanouts if self.model else [20, 15, 10]
        max_concurrent = _options.count(max_concurrent, "max_concurrent", 1)
        if max_wait_ms is not None:
            max_wait_ms = _options.real(max_wait_ms, "--max-wait-ms", 0.0, 10_000.0)
        limits = dict(threads=_options.optional_count(threads, "threads"), seed=_options.count(seed, "seed"),
                      batch_size=None if batch_size is None else _options.count(batch_size, "batch_size", 1),
                      max_wait_us=None if max_wait_ms is None else int(max_wait_ms * 1000),
                      max_wave=_options.count(64 if max_wave is None else max_wave, "max_wave", 1),
                      queue=max_concurrent, max_nodes=_options.count(max_nodes, "max_nodes", 1),
                      max_hops=_options.count(max_hops, "max_hops", 1), temporal_strategy=temporal_strategy,
                      times=not ignore_time)
        if typed:
            self.engine, self.memory_plan = _hetero_engine(
                ds, fanouts, backend=_options.backend(backend), direct=bool(direct),
                memory=_options.size(memory, "memory"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
                **limits)
        else:
            # The budget covers the process: what it holds now is the reserve.
            self.engine = _core.Engine(
                ds.path, _options.fanouts(fanouts), backend=_options.backend(backend), direct=bool(direct),
                memory=_options.size(memory, "memory"), reserve=_options.process_rss(),
                cache=_options.size(cache, "cache"), neighbor_cache=_options.size(neighbor_cache, "neighbor_cache"),
                **limits)
        handlers = _options.count(handlers, "handlers", 1)
        if frontend == "rust":
            # Binds and serves at once; calls the model needs (all, on a typed dataset) go to the servicer.
            m = self.model
            delegate = Servicer(self.engine, ds, m, typed).dispatch if m or typed else None
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
        """Serve (the Rust frontend serves from the start)."""
        if self.frontend == "grpcio":
            self._grpc.start()
            for name in ("", SERVICE):
                self.health.set(name, self._serving)
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Refuse new requests, let those in flight finish (``grace`` seconds at most), stop."""
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
    """The engine of a typed dataset and its memory plan (``neighbor_cache`` default: half the
    batches' part). A large request's room not lent by the hot pages is held: the engine reopens."""
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
