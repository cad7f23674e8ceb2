"""The gRPC plumbing of ``ringgnn serve``: the API (``serve.proto``, its generated modules), the
grpcio handler and the Rust server's entry point over a servicer's methods, engine calls mapped
to status codes, and the context a call from the Rust server gets. No servicer logic: that is
``ringgnn.serving.servicer``'s."""

from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

from .. import _core
from .._core import BusyError, CancelledError, DeadlineExceededError, InputError, RingGnnError, ShuttingDownError

#: The API, relative to the directory holding the ``ringgnn`` package, and its service.
PROTO = "ringgnn/serve.proto"
SERVICE = "ringgnn.v1.RingGnn"

#: Messages larger than gRPC's 4 MiB default are fine here: a sample of a large request is tens
#: of MB. The server's request limits (--max-nodes and the plan's batch) bound them.
MAX_MESSAGE = 1 << 30


@functools.lru_cache(maxsize=1)
def protos() -> Tuple[Any, Any]:
    """The message and service modules of ``serve.proto``, generated at first use by grpcio's
    bundled compiler (no ``protoc`` needed)."""
    import grpc  # imported here: a server whose calls never enter Python does without it

    return grpc.protos_and_services(PROTO)


def code(name: str) -> Any:
    """grpc's status code ``name``."""
    import grpc

    return getattr(grpc.StatusCode, name)


def message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


#: Engine exceptions and the status each becomes (the rest of RingGnnError and OSError: INTERNAL).
STATUS = ((InputError, "INVALID_ARGUMENT"), (BusyError, "RESOURCE_EXHAUSTED"),
          (DeadlineExceededError, "DEADLINE_EXCEEDED"), (CancelledError, "CANCELLED"),
          (ShuttingDownError, "UNAVAILABLE"), (RingGnnError, "INTERNAL"), (OSError, "INTERNAL"))


def call_engine(context: Any, fn, *args, **kwargs) -> Any:
    """Run an engine call for this RPC: its deadline, a cancel token tied to the client's
    connection, and every failure mapped to a status with its message."""
    token = getattr(context, "token", None)
    if token is None:  # grpcio's context: cancel when the client goes away
        token = _core.CancelToken()
        context.add_callback(token.cancel)
    try:
        return fn(*args, timeout=context.time_remaining(), token=token, **kwargs)
    except (RingGnnError, OSError) as e:
        status = next(s for cls, s in STATUS if isinstance(e, cls))
        context.abort(code(status), message(e) if status == "INTERNAL" else str(e))


class Handlers:
    """The grpcio handler and the Rust server's entry point over :meth:`methods`."""

    def methods(self) -> Dict[str, Tuple[Any, Any]]:
        """Each method's (implementation returning the reply's bytes, request message)."""
        raise NotImplementedError

    def handler(self) -> Any:
        """The service's handler for grpcio. Requests arrive as bytes and are parsed here, so
        that a malformed one gets INVALID_ARGUMENT with the parser's message."""
        import grpc

        def method(fn, msg):
            def call(data: bytes, context: Any) -> Any:
                try:
                    request = msg.FromString(data)
                except Exception as e:  # protobuf's DecodeError, or a bad UTF-8 string
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {msg.DESCRIPTOR.full_name}: {e}")
                return fn(request, context)

            return grpc.unary_unary_rpc_method_handler(call, response_serializer=lambda b: b)

        return grpc.method_handlers_generic_handler(SERVICE, {name: method(*m) for name, m in self.methods().items()})

    def dispatch(self, method: str, data: bytes, timeout: Optional[float], token: Any) -> Tuple[int, Any]:
        """One call from the Rust server (``_core.GrpcServer``, which serves Sample, Features and
        Info itself and calls this for Predict, Embed and Score): ``(0, reply bytes)`` or
        ``(status code, message)``."""
        fn, msg = self.methods()[method]
        context = Context(timeout, token)
        try:
            try:
                request = msg.FromString(data)
            except Exception as e:  # protobuf's DecodeError, or a bad UTF-8 string
                context.abort(code("INVALID_ARGUMENT"), f"malformed {msg.DESCRIPTOR.full_name}: {e}")
            return 0, fn(request, context)
        except Aborted as a:
            return a.code.value[0], a.details


class Aborted(Exception):
    def __init__(self, status: Any, details: str):
        super().__init__(details)
        self.code, self.details = status, details


class Context:
    """What the servicer's methods use of grpcio's context, for a call from the Rust server: the
    time left, the request's cancel token (cancelled by the server when the client goes away),
    and ``abort``."""

    def __init__(self, timeout: Optional[float], token: Any):
        self.timeout, self.token = timeout, token

    def time_remaining(self) -> Optional[float]:
        return self.timeout

    def abort(self, status: Any, details: str) -> None:
        raise Aborted(status, details)
