"""``ringgnn.Client``: the Python client of ``ringgnn serve`` (API: ``ringgnn/serve.proto``).

Each call is one gRPC request; a failed one raises the exception of its status:

=====================  ===========================================================
INVALID_ARGUMENT       :class:`InputError` (the message names the field and limit)
RESOURCE_EXHAUSTED     :class:`BusyError` (retry later, or slower)
DEADLINE_EXCEEDED      :class:`DeadlineExceededError`
CANCELLED              :class:`CancelledError`
UNAVAILABLE            :class:`ShuttingDownError` when the server says it is stopping,
                       else :class:`ConnectionError` (no server there)
FAILED_PRECONDITION    :class:`InputError` (e.g. Predict on a server without a model, Score
                       with a node-classification model)
anything else          :class:`RingGnnError` with the status and the server's message
=====================  ===========================================================

A client is thread-safe (gRPC channels are); close it, or use it as a context manager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ._core import (
    BusyError,
    CancelledError,
    DeadlineExceededError,
    InputError,
    RingGnnError,
    ShuttingDownError,
)
from .sampler import SampledSubgraph

_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}


@dataclass(frozen=True)
class Prediction:
    """``Predict``'s answer: ``probs[i]`` are the class probabilities of ``nodes[i]``."""

    probs: np.ndarray
    label: np.ndarray
    seed: int


class Client:
    """A connection to ``ringgnn serve`` at ``target`` ("host:port").

    ``timeout`` (seconds) is the default deadline of each call; ``None`` waits as long as it
    takes. ``wait_ready`` waits up to that many seconds for the server to come up.
    """

    def __init__(self, target: str, *, timeout: Optional[float] = 30.0, wait_ready: Optional[float] = None):
        import grpc

        from .server import MAX_MESSAGE, protos

        self.target, self.timeout = target, timeout
        self._pb, services = protos()
        self._channel = grpc.insecure_channel(
            target, options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                             ("grpc.max_send_message_length", MAX_MESSAGE)])
        self._stub = services.RingGnnStub(self._channel)
        if wait_ready is not None:
            try:
                grpc.channel_ready_future(self._channel).result(timeout=wait_ready)
            except grpc.FutureTimeoutError:
                self.close()
                raise ConnectionError(f"no ringgnn server answered at {target} within {wait_ready} s") from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, name: str, request: Any, timeout: Optional[float]) -> Any:
        import grpc

        try:
            return getattr(self._stub, name)(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise _error(self.target, name, e) from None

    # --- the calls --------------------------------------------------------------------------------

    def sample(self, nodes: Sequence[int], fanouts: Optional[Sequence[int]] = None, seed: Optional[int] = None, *,
               replace: bool = False, edge_ids: bool = False, timeout: Optional[float] = None) -> SampledSubgraph:
        """The sampled neighborhood of ``nodes``: what ``NeighborSampler(dataset, fanouts,
        replace=replace, seed=seed).sample(nodes)`` gives. ``fanouts``/``seed`` default to the
        server's (see :meth:`info`)."""
        req = self._pb.SampleRequest(nodes=_ids(nodes), fanouts=[int(f) for f in fanouts or []],
                                     replace=bool(replace), edge_ids=bool(edge_ids))
        if seed is not None:
            req.seed = int(seed)
        r = self._call("Sample", req, timeout)
        counts = list(r.num_sampled_nodes)
        return SampledSubgraph(
            node=np.array(r.node, dtype=np.int64), row=np.array(r.row, dtype=np.int64),
            col=np.array(r.col, dtype=np.int64), num_sampled_nodes=counts,
            num_sampled_edges=list(r.num_sampled_edges), batch_size=counts[0] if counts else 0,
            edge=np.array(r.edge, dtype=np.int64) if edge_ids else None)

    def features(self, nodes: Sequence[int], *, stored_dtype: bool = False,
                 timeout: Optional[float] = None) -> np.ndarray:
        """Feature rows of ``nodes`` (``[len(nodes), dim]``, request order): float32, or with
        ``stored_dtype`` the dataset's dtype (bfloat16 comes as a ``torch.bfloat16`` tensor)."""
        r = self._call("Features", self._pb.FeaturesRequest(nodes=_ids(nodes), stored_dtype=bool(stored_dtype)),
                       timeout)
        if r.dtype == "bf16":
            import torch

            raw = np.frombuffer(r.data, dtype="<u2").reshape(r.rows, r.dim)
            return torch.from_numpy(raw.astype(np.int16)).view(torch.bfloat16)
        return np.frombuffer(r.data, dtype=_DTYPES[r.dtype]).reshape(r.rows, r.dim).copy()

    def predict(self, nodes: Sequence[int], seed: Optional[int] = None, *,
                timeout: Optional[float] = None) -> Prediction:
        """Class probabilities and most probable class of ``nodes`` from the served model."""
        r = self._call("Predict", self._infer_request(nodes, seed), timeout)
        probs = np.array(r.probs, dtype=np.float32).reshape(r.rows, r.classes)
        return Prediction(probs=probs, label=np.array(r.label, dtype=np.int64), seed=r.seed)

    def embed(self, nodes: Sequence[int], seed: Optional[int] = None, *, timeout: Optional[float] = None) -> np.ndarray:
        """Embeddings of ``nodes`` (``[len(nodes), hidden]``): a node model's last hidden layer,
        a link model's last layer (what its decoder scores)."""
        r = self._call("Embed", self._infer_request(nodes, seed), timeout)
        return np.array(r.values, dtype=np.float32).reshape(r.rows, r.dim)

    def score(self, src: Sequence[int], dst: Sequence[int], seed: Optional[int] = None, *,
              timeout: Optional[float] = None) -> np.ndarray:
        """A link model's scores of the pairs ``(src[i], dst[i])`` (float32 ``[len(src)]``, the
        decoder's logits: ``sigmoid`` gives the probability of each edge), from the pairs'
        distinct endpoints sampled as one request with the model's fanouts and ``seed``
        (default the server's)."""
        s, d = _ids(src, "src"), _ids(dst, "dst")
        if len(s) != len(d):
            raise InputError(f"score: src has {len(s)} node ids and dst {len(d)}: give one destination per source")
        req = self._pb.ScoreRequest(src=s, dst=d)
        if seed is not None:
            req.seed = int(seed)
        r = self._call("Score", req, timeout)
        return np.array(r.scores, dtype=np.float32)

    def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """What the server serves: counts, dims, default fanouts and seed, model, limits, version."""
        from google.protobuf.json_format import MessageToDict

        r = self._call("Info", self._pb.InfoRequest(), timeout)
        d = MessageToDict(r, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        for k in ("num_nodes", "num_edges", "feature_dim", "num_classes", "model_hidden", "max_nodes", "max_hops",
                  "seed"):
            d[k] = int(d[k])
        d["stats"] = {k: [int(x) for x in v] if isinstance(v, list) else int(v) for k, v in d["stats"].items()}
        d["fanouts"] = [int(f) for f in d["fanouts"]]
        d["model_fanouts"] = [int(f) for f in d["model_fanouts"]]
        return d

    def _infer_request(self, nodes: Sequence[int], seed: Optional[int]) -> Any:
        req = self._pb.PredictRequest(nodes=_ids(nodes))
        if seed is not None:
            req.seed = int(seed)
        return req


def _ids(nodes: Any, what: str = "nodes") -> List[int]:
    a = np.asarray(nodes)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise InputError(f"{what} must be a 1-D sequence of integer node ids, not {a.dtype} of shape {a.shape}")
    return a.astype(np.int64).tolist()


def _error(target: str, call: str, e: Any) -> Exception:
    import grpc

    code, detail = e.code(), e.details() or ""
    text = f"{call} at {target}: {detail}" if detail else f"{call} at {target}: {code.name}"
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.OUT_OF_RANGE):
        return InputError(text)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return BusyError(text)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(text)
    if code == grpc.StatusCode.CANCELLED:
        return CancelledError(text)
    if code == grpc.StatusCode.UNAVAILABLE:
        if "shutting down" in detail or "stopping" in detail:
            return ShuttingDownError(text)
        return ConnectionError(f"{call}: no ringgnn server answers at {target} ({detail or code.name})")
    return RingGnnError(f"{text} (status {code.name})")
