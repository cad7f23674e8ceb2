"""The gRPC plumbing of ``ringgnn serve``: ``serve.proto``'s modules, the grpcio handler and the
Rust server's entry point over a servicer's methods, engine errors mapped to status codes."""

from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

from .. import _core
from .._core import BusyError, CancelledError, DeadlineExceededError, InputError, RingGnnError, ShuttingDownError

PROTO = "ringgnn/serve.proto"
SERVICE = "ringgnn.v1.RingGnn"

#: A large request's sample is tens of MB; --max-nodes and the plan bound it.
MAX_MESSAGE = 1 << 30


@functools.lru_cache(maxsize=1)
def protos() -> Tuple[Any, Any]:
    """The message and service modules of ``serve.proto``, generated at first use."""
    import grpc

    return grpc.protos_and_services(PROTO)


def code(name: str) -> Any:
    import grpc

    return getattr(grpc.StatusCode, name)


def message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


STATUS = ((InputError, "INVALID_ARGUMENT"), (BusyError, "RESOURCE_EXHAUSTED"),
          (DeadlineExceededError, "DEADLINE_EXCEEDED"), (CancelledError, "CANCELLED"),
          (ShuttingDownError, "UNAVAILABLE"), (RingGnnError, "INTERNAL"), (OSError, "INTERNAL"))


def call_engine(context: Any, fn, *args, **kwargs) -> Any:
    """Run an engine call with this RPC's deadline and cancel token, failures mapped to statuses."""
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
        """The service's handler for grpcio (requests parsed here: a malformed one is INVALID_ARGUMENT)."""
        import grpc

        def method(fn, msg):
            def call(data: bytes, context: Any) -> Any:
                return fn(_parse(msg, data, context), context)

            return grpc.unary_unary_rpc_method_handler(call, response_serializer=lambda b: b)

        return grpc.method_handlers_generic_handler(SERVICE, {name: method(*m) for name, m in self.methods().items()})

    def dispatch(self, method: str, data: bytes, timeout: Optional[float], token: Any) -> Tuple[int, Any]:
        """One call from the Rust server (Predict, Embed, Score): ``(0, reply bytes)`` or
        ``(status code, message)``."""
        fn, msg = self.methods()[method]
        context = Context(timeout, token)
        try:
            return 0, fn(_parse(msg, data, context), context)
        except Aborted as a:
            return a.code.value[0], a.details


def _parse(msg: Any, data: bytes, context: Any) -> Any:
    try:
        return msg.FromString(data)
    except Exception as e:  # protobuf's DecodeError, or a bad UTF-8 string
        context.abort(code("INVALID_ARGUMENT"), f"malformed {msg.DESCRIPTOR.full_name}: {e}")


class Aborted(Exception):
    def __init__(self, status: Any, details: str):
        super().__init__(details)
        self.code, self.details = status, details


class Context:
    """grpcio's context as the servicer uses it, for a call from the Rust server."""

    def __init__(self, timeout: Optional[float], token: Any):
        self.timeout, self.token = timeout, token

    def time_remaining(self) -> Optional[float]:
        return self.timeout

    def abort(self, status: Any, details: str) -> None:
        raise Aborted(status, details)
