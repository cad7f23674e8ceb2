"""``ringgnn.Client``: the Python client of ``ringgnn serve``, one gRPC request per call, a failed
one raising the exception of its status (docs/SERVING.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from .. import _options
from .._core import BusyError, CancelledError, DeadlineExceededError, InputError, RingGnnError, ShuttingDownError
from ..data.schema import edge_type_str
from ..sampling.sample import HeteroSample
from ..sampling.sampler import SampledSubgraph
from .rpc import MAX_MESSAGE, protos

_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}


@dataclass(frozen=True)
class Prediction:
    """``Predict``'s answer: ``probs[i]`` are the class probabilities of ``nodes[i]``."""

    probs: np.ndarray
    label: np.ndarray
    seed: int
    seed_time: Optional[np.ndarray] = None


class Client:
    """A connection to ``ringgnn serve`` at ``target`` ("host:port"). ``timeout``: each call's
    default deadline in seconds (None: none); ``wait_ready``: seconds to wait for the server."""

    def __init__(self, target: str, *, timeout: Optional[float] = 30.0, wait_ready: Optional[float] = None):
        import grpc

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

    def sample(self, nodes: Sequence[int], fanouts: Any = None, seed: Optional[int] = None, *,
               replace: bool = False, edge_ids: bool = False, node_type: Optional[str] = None,
               time: Optional[int] = None, seed_times: Any = None,
               timeout: Optional[float] = None) -> Union[SampledSubgraph, HeteroSample]:
        """The sampled neighborhood of ``nodes``, as ``NeighborSampler(dataset, fanouts, replace=,
        seed=).sample(nodes)`` gives it (``fanouts``, ``seed``: default the server's). With
        ``node_type`` (typed datasets) a :class:`~ringgnn.HeteroSample`, ``fanouts`` one list or a
        dict per relation. ``time`` (every node) or ``seed_times`` (one per node): sampled at them."""
        req, timed = self._request("SampleRequest", seed, time, seed_times, nodes=_ids(nodes), replace=bool(replace),
                                   edge_ids=bool(edge_ids))
        if isinstance(fanouts, Mapping):
            if node_type is None:
                raise InputError("sample: fanouts per relation are for a heterogeneous dataset: give node_type too")
            for rel, hops in fanouts.items():
                hops = hops.split(",") if isinstance(hops, str) else [hops] if isinstance(hops, int) else hops
                req.relation_fanouts[edge_type_str(rel)].hops.extend(_fanouts(hops))
        else:
            req.fanouts.extend(_fanouts(fanouts or []))
        if node_type is not None:
            req.node_type = str(node_type)
        r = self._call("Sample", req, timeout)
        if node_type is not None:
            s = _hetero_sample(self.target, r, node_type, edge_ids, timed)
            _answered_times(self.target, "Sample", timed, s.seed_time and any(map(len, s.seed_time.values())))
            return s
        _answered_times(self.target, "Sample", timed, len(r.seed_time))
        counts = list(r.num_sampled_nodes)
        return SampledSubgraph(
            node=np.array(r.node, dtype=np.int64), row=np.array(r.row, dtype=np.int64),
            col=np.array(r.col, dtype=np.int64), num_sampled_nodes=counts,
            num_sampled_edges=list(r.num_sampled_edges), batch_size=counts[0] if counts else 0,
            edge=np.array(r.edge, dtype=np.int64) if edge_ids else None,
            seed_time=np.array(r.seed_time, dtype=np.int64) if timed else None)

    def features(self, nodes: Sequence[int], *, stored_dtype: bool = False, node_type: Optional[str] = None,
                 timeout: Optional[float] = None) -> np.ndarray:
        """Feature rows of ``nodes`` (of ``node_type``): float32, or with ``stored_dtype`` the
        dataset's dtype (bfloat16 as a ``torch.bfloat16`` tensor)."""
        req = self._pb.FeaturesRequest(nodes=_ids(nodes), stored_dtype=bool(stored_dtype), node_type=node_type or "")
        r = self._call("Features", req, timeout)
        if node_type is not None and r.node_type != node_type:
            raise InputError(_untyped(self.target, "Features", node_type))
        if r.dtype == "bf16":
            import torch

            raw = np.frombuffer(r.data, dtype="<u2").reshape(r.rows, r.dim)
            return torch.from_numpy(raw.astype(np.int16)).view(torch.bfloat16)
        return np.frombuffer(r.data, dtype=_DTYPES[r.dtype]).reshape(r.rows, r.dim).copy()

    def predict(self, nodes: Sequence[int], seed: Optional[int] = None, *, node_type: Optional[str] = None,
                time: Optional[int] = None, seed_times: Any = None, timeout: Optional[float] = None) -> Prediction:
        """Class probabilities and most probable class of ``nodes`` (of the model's target type)
        by the served model, sampled at ``time`` or ``seed_times`` when given."""
        r, timed = self._nodes_call("Predict", nodes, seed, node_type, time, seed_times, timeout)
        probs = np.array(r.probs, dtype=np.float32).reshape(r.rows, r.classes)
        return Prediction(probs=probs, label=np.array(r.label, dtype=np.int64), seed=r.seed,
                          seed_time=np.array(r.seed_time, dtype=np.int64) if timed else None)

    def embed(self, nodes: Sequence[int], seed: Optional[int] = None, *, node_type: Optional[str] = None,
              time: Optional[int] = None, seed_times: Any = None, timeout: Optional[float] = None) -> np.ndarray:
        """Embeddings of ``nodes``: a node model's last hidden layer, a link model's last layer; a
        typed model's rows of ``node_type`` at the last hidden layer computing it. As :meth:`predict`."""
        r, _ = self._nodes_call("Embed", nodes, seed, node_type, time, seed_times, timeout)
        return np.array(r.values, dtype=np.float32).reshape(r.rows, r.dim)

    def _nodes_call(self, call: str, nodes: Any, seed: Optional[int], node_type: Optional[str],
                    time: Optional[int], seed_times: Any, timeout: Optional[float]) -> Any:
        req, timed = self._request("PredictRequest", seed, time, seed_times, nodes=_ids(nodes),
                                   node_type=node_type or "")
        r = self._call(call, req, timeout)
        _answered_times(self.target, call, timed, len(r.seed_time))
        return r, timed

    def score(self, src: Sequence[int], dst: Sequence[int], seed: Optional[int] = None, *,
              time: Optional[int] = None, timeout: Optional[float] = None) -> np.ndarray:
        """A link model's scores (logits, float32) of the pairs ``(src[i], dst[i])``, their
        endpoints sampled as one request, at ``time`` when given."""
        s, d = _ids(src, "src"), _ids(dst, "dst")
        if len(s) != len(d):
            raise InputError(f"score: src has {len(s)} node ids and dst {len(d)}: give one destination per source")
        req, timed = self._request("ScoreRequest", seed, time, None, src=s, dst=d)
        r = self._call("Score", req, timeout)
        _answered_times(self.target, "Score", timed, r.HasField("time"))
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
        # Typed datasets (empty otherwise): types and relations in name order.
        d["node_types"] = [{"name": t["name"], **{k: t[k] if k == "feature_dtype" else int(t[k]) for k in
                                                   ("num_nodes", "feature_dim", "feature_dtype", "num_classes")}}
                           for t in d["node_types"]]
        d["relations"] = [{"name": r["name"], "num_edges": int(r["num_edges"])} for r in d["relations"]]
        for k in ("relation_fanouts", "model_relation_fanouts"):
            d[k] = {rel: [int(f) for f in v.get("hops", [])] for rel, v in sorted(d[k].items())}
        return d

    def _request(self, name: str, seed: Optional[int], time: Optional[int], seed_times: Any, **fields: Any) -> Any:
        """(request ``name`` of ``fields`` with ``seed`` and the times set, whether it has times)."""
        req = getattr(self._pb, name)(**fields)
        if seed is not None:
            req.seed = _options.count(seed, "seed")  # the field is uint64
        return req, _set_times(req, time, seed_times)


def _set_times(req: Any, time: Optional[int], seed_times: Any) -> bool:
    """Put ``time`` or ``seed_times`` on ``req``; whether either was given."""
    if time is not None:
        req.time = _time(time, "time")
    if seed_times is not None:
        a = np.asarray(seed_times)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"seed_times must be a 1-D sequence of integer times, not {a.dtype} of shape {a.shape}")
        req.seed_times.extend(_time(t, "seed_times") for t in a.tolist())
    return time is not None or seed_times is not None


def _time(t: Any, what: str) -> int:
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise InputError(f"{what}: {t!r} is not an integer time (times are int64, in the dataset's unit)")
    if not -(1 << 63) <= int(t) < 1 << 63:
        raise InputError(f"{what}: {t} is out of range: times are int64")
    return int(t)


def _answered_times(target: str, call: str, timed: bool, answered: Any) -> None:
    """Refuse the reply of a server that ignored a request's time (older than times)."""
    if timed and not answered:
        raise InputError(f"{call} at {target}: the server ignored the request's time: it predates sampling at times "
                         "(upgrade ringgnn there)")


def _untyped(target: str, call: str, node_type: str) -> str:
    return (f"{call} at {target}: node_type '{node_type}' was ignored: the server serves a homogeneous dataset (no "
            "node types; leave node_type out)")


def _hetero_sample(target: str, r: Any, node_type: str, edge_ids: bool, timed: bool = False) -> HeteroSample:
    """A typed ``SampleReply``'s sample (types and relations in name order)."""
    if not r.HasField("hetero"):
        raise InputError(_untyped(target, "Sample", node_type))
    h = r.hetero
    types, rels = sorted(h.nodes), sorted(h.edges)

    def ids(v: Any) -> np.ndarray:
        return np.array(v, dtype=np.int64)

    return HeteroSample(
        seed_type=h.node_type, node={t: ids(h.nodes[t].node) for t in types},
        num_sampled_nodes={t: [int(c) for c in h.nodes[t].num_sampled_nodes] for t in types},
        row={e: ids(h.edges[e].row) for e in rels}, col={e: ids(h.edges[e].col) for e in rels},
        num_sampled_edges={e: [int(c) for c in h.edges[e].num_sampled_edges] for e in rels},
        edge={e: ids(h.edges[e].edge) for e in rels} if edge_ids else None,
        seed_time={t: ids(h.nodes[t].seed_time) for t in types} if timed else None)


MAX_ID = (1 << 63) - 1


def _ids(nodes: Any, what: str = "nodes") -> List[int]:
    """Node ids as the request's int64 field takes them: one past int64 refused, never wrapped."""
    if isinstance(nodes, (list, tuple)) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                for v in nodes):
        values = [int(v) for v in nodes]  # as given: numpy would make 2^63 and past floats or objects
    else:
        a = np.asarray(nodes)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(f"{what} must be a 1-D sequence of integer node ids, not {a.dtype} of shape {a.shape}")
        values = a.tolist()  # Python ints, exact for uint64
        if a.dtype.kind == "i":
            return values
    bad = next((v for v in values if not -MAX_ID - 1 <= v <= MAX_ID), None)
    if bad is not None:
        raise InputError(f"{what}: node id {bad} is out of range: ids are 0 to the dataset's node count - 1, and a "
                         f"request's ids are at most 2^63 - 1")
    return values


def _fanouts(hops: Any) -> List[int]:
    values = []
    for f in hops:
        try:
            n = int(f)
        except (TypeError, ValueError):
            raise InputError(f"fanout {f!r} is not an integer: use a positive number of neighbors, or -1 for all "
                             "of them") from None
        if not -(1 << 31) <= n < 1 << 31:
            raise InputError(f"fanout {n} is out of range: use a positive number of neighbors (at most "
                             f"{(1 << 31) - 1}), or -1 for all of them")
        values.append(n)
    return values


_ERRORS = dict(INVALID_ARGUMENT=InputError, FAILED_PRECONDITION=InputError, OUT_OF_RANGE=InputError,
               RESOURCE_EXHAUSTED=BusyError, DEADLINE_EXCEEDED=DeadlineExceededError, CANCELLED=CancelledError)


def _error(target: str, call: str, e: Any) -> Exception:
    code, detail = e.code(), e.details() or ""
    text = f"{call} at {target}: {detail}" if detail else f"{call} at {target}: {code.name}"
    if code.name in _ERRORS:
        return _ERRORS[code.name](text)
    if code.name == "UNAVAILABLE":
        if "shutting down" in detail or "stopping" in detail:
            return ShuttingDownError(text)
        return ConnectionError(f"{call}: no ringgnn server answers at {target} ({detail or code.name})")
    return RingGnnError(f"{text} (status {code.name})")
