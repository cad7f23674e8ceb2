"""The ``RingGnn`` service over the Rust request engine: one :class:`Servicer` for both kinds of
dataset (a homogeneous one's node type is None): requests checked, replies encoded, the model
step of Predict, Embed and Score run on what the engine sampled."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from .._core import InputError
from ..data.dataset import HeteroDataset
from ..sampling.hetero import relation_fanouts
from .model import request_order
from .rpc import Handlers, call_engine, code, protos


class Servicer(Handlers):
    """The ``RingGnn`` service over one engine (and an optional model)."""

    def __init__(self, engine: Any, dataset: Any, model: Any, typed: Optional[bool] = None):
        self.engine, self.dataset, self.model = engine, dataset, model
        self.typed = isinstance(dataset, HeteroDataset) if typed is None else bool(typed)
        self.pb, _ = protos()
        e = engine
        # (feature width, stored dtype) of each type with features
        types = zip(e.node_types, e.feature_info) if self.typed else [(None, (e.feature_dim, e.feature_dtype))]
        self.features = {t: f for t, f in types if f and f[0]}
        if self.typed:
            self.num_nodes = dict(zip(e.node_types, e.num_nodes))
            self.fanouts = dict(e.fanouts)

    def _seed(self, request: Any) -> int:
        return request.seed if request.HasField("seed") else self.engine.seed

    @staticmethod
    def _times(request: Any) -> Dict[str, Any]:
        seed_times = getattr(request, "seed_times", ())
        return dict(time=request.time if request.HasField("time") else None,
                    seed_times=list(seed_times) if len(seed_times) else None)

    @staticmethod
    def _row_times(times: Dict[str, Any], n: int) -> Optional[np.ndarray]:
        """The time of each of a request's ``n`` nodes (None without times)."""
        if times["seed_times"] is not None:
            return np.asarray(times["seed_times"], dtype=np.int64)
        return None if times["time"] is None else np.full(n, times["time"], dtype=np.int64)

    def _nodes(self, context: Any, nodes: Sequence[int]) -> np.ndarray:
        try:
            self.engine.check_count(len(nodes))  # refused before converting them
        except InputError as e:
            context.abort(code("INVALID_ARGUMENT"), str(e))
        return np.asarray(nodes, dtype=np.int64)

    def _type(self, context: Any, call: str, node_type: str, relation_fanouts: int = 0) -> Optional[str]:
        """The request's node type: required on a typed dataset, refused on a homogeneous one."""
        if not self.typed:
            if node_type or relation_fanouts:
                what = f"node_type '{node_type}'" if node_type else "relation_fanouts"
                context.abort(code("INVALID_ARGUMENT"),
                              f"{call}: {what}: {self.dataset.path} is a homogeneous dataset (no node types or "
                              "relations); leave node_type and relation_fanouts out")
            return None
        if not node_type and not isinstance(self.dataset, HeteroDataset):  # the one-type case
            one = next(iter(self.num_nodes))
            if call == "Sample":  # its reply names types: asked for by naming the type
                context.abort(code("INVALID_ARGUMENT"),
                              f"Sample: {self.dataset.path} is served as its one-type case (a model trained at "
                              f"times); give node_type '{one}', and the reply names it")
            return one
        if not node_type:
            context.abort(code("INVALID_ARGUMENT"),
                          f"{call}: node_type is required: {self.dataset.path} is a heterogeneous dataset (node "
                          f"types: {', '.join(self.num_nodes)})")
        if node_type not in self.num_nodes:
            context.abort(code("INVALID_ARGUMENT"),
                          f"{call}: node_type '{node_type}' is not a node type of {self.dataset.path} (it has: "
                          f"{', '.join(self.num_nodes)})")
        return node_type

    def _fanouts(self, context: Any, request: Any) -> Any:
        """A request's fanouts (None: the server's); a typed request's per relation."""
        if not self.typed:
            return list(request.fanouts) or None
        given = {r: list(f.hops) for r, f in request.relation_fanouts.items()}
        if given and len(request.fanouts):
            context.abort(code("INVALID_ARGUMENT"),
                          "give fanouts (the same for every relation) or relation_fanouts (per relation), not both")
        if not given and not len(request.fanouts):
            return None
        try:
            return relation_fanouts(self.dataset, given or list(request.fanouts))
        except InputError as e:
            context.abort(code("INVALID_ARGUMENT"), str(e))

    def _needs_model(self, context: Any, call: str) -> Any:
        if self.model is None:
            context.abort(code("FAILED_PRECONDITION"),
                          f"{call}: this server has no model: start it with --model RUN_DIR (a `ringgnn train "
                          f"{self.dataset.path} --target TYPE` run)" if self.typed else
                          "this server has no model: start it with --model RUN_DIR (a `ringgnn train` run)")
        return self.model

    def _needs_task(self, context: Any, task: str, call: str) -> Any:
        model = self._needs_model(context, call)
        if model.task != task:
            if self.typed:
                what = ("a heterogeneous node-classification model; Score needs a link model (`ringgnn train "
                        "DATASET --task link`, homogeneous datasets)")
            elif model.task == "link":
                what = ("a link model: it scores pairs (Score) and embeds nodes (Embed); Predict needs a "
                        "node-classification run")
            else:
                what = "a node-classification model: Score needs a link model (`ringgnn train DATASET --task link`)"
            context.abort(code("FAILED_PRECONDITION"), f"{call}: the served model ({model.run_dir}) is {what}")
        return model

    def Sample(self, request: Any, context: Any) -> bytes:
        t = self._type(context, "Sample", request.node_type, len(request.relation_fanouts))
        seed = self._seed(request)
        nodes = self._nodes(context, request.nodes)
        how = dict(node_type=t, fanouts=self._fanouts(context, request), replace=request.replace, seed=seed,
                   edge_ids=request.edge_ids, **self._times(request))
        if t is None:  # encoded by the engine
            return call_engine(context, self.engine.sample, nodes, reply=True, **how)
        s = call_engine(context, self.engine.sample, nodes, **how)
        pb, edge, time = self.pb, s["edge"] or {}, s["time"] or {}
        typed = pb.HeteroSampleReply(
            node_type=t,
            nodes={u: pb.SampledNodes(node=v.tolist(), num_sampled_nodes=list(s["num_sampled_nodes"][u]),
                                      seed_time=time[u].tolist() if u in time else [])
                   for u, v in s["node"].items()},
            edges={r: pb.SampledEdges(row=v.tolist(), col=s["col"][r].tolist(),
                                      edge=edge[r].tolist() if r in edge else [],
                                      num_sampled_edges=list(s["num_sampled_edges"][r])) for r, v in s["row"].items()})
        return pb.SampleReply(seed=seed, hetero=typed).SerializeToString()

    def Features(self, request: Any, context: Any) -> bytes:
        t = self._type(context, "Features", request.node_type)
        if t not in self.features:
            context.abort(code("FAILED_PRECONDITION"), f"the dataset {self.dataset.path} has no node features"
                          if t is None else f"Features: node type '{t}' of {self.dataset.path} has no features "
                          f"(types with features: {', '.join(self.features) or 'none'})")
        dim, dtype = self.features[t]
        stored = bool(request.stored_dtype)
        nodes = self._nodes(context, request.nodes)
        out = call_engine(context, self.engine.features, nodes, stored=stored, node_type=t)
        data = out if stored else out.astype("<f4", copy=False).tobytes()
        return self.pb.FeaturesReply(rows=len(nodes), dim=dim, dtype=dtype if stored else "f32", data=data,
                                     node_type=t or "").SerializeToString()

    def _run(self, context: Any, request: Any, call: str) -> Tuple[Any, np.ndarray, int, Optional[np.ndarray]]:
        """(Predict's logits or Embed's rows of the distinct nodes, their order for the request's
        nodes, the seed, each row's time or None), sampled with the model's training fanouts."""
        if not self.typed:  # a homogeneous request's node type is refused before its model is asked for
            self._type(context, call, request.node_type)
        model = self._needs_task(context, "node", call) if call == "Predict" else self._needs_model(context, call)
        seed = self._seed(request)
        t = self._type(context, call, request.node_type or model.target)
        layer = None
        if call == "Predict" and t != model.target:
            context.abort(code("INVALID_ARGUMENT"),
                          f"Predict: node_type '{t}': the model ({model.run_dir}) classifies nodes of its target type "
                          f"'{model.target}' only; Embed gives the rows of other types")
        if call == "Embed":
            layer = model.layer_of(t)
            if layer is None:
                context.abort(code("INVALID_ARGUMENT"),
                              f"Embed: node_type '{t}': the model ({model.run_dir}) never computes it (more than "
                              f"{model.layers} hops from its target '{model.target}')")
        nodes = self._nodes(context, request.nodes)
        times = self._times(request)
        sub, x = call_engine(context, self.engine.sample, nodes, node_type=t, fanouts=model.fanouts, seed=seed,
                             rows=True, **times)
        logits, rows, seeds = model.answer(sub, x, t, layer)
        at = self._row_times(times, len(nodes))
        sampled_at = None if at is None else (sub["time"] if t is None else sub["time"][t])[: len(seeds)]
        order = request_order(nodes, seeds, len(seeds), at, sampled_at)
        return logits if layer is None else rows, order, seed, at

    def Predict(self, request: Any, context: Any) -> bytes:
        import torch  # a model is served: torch is loaded already

        logits, order, seed, at = self._run(context, request, "Predict")
        probs = torch.softmax(logits, dim=-1).numpy()[order]
        reply = self.pb.PredictReply(rows=len(order), classes=probs.shape[1], seed=seed,
                                     seed_time=[] if at is None else at.tolist())
        reply.probs.extend(probs.ravel().tolist())
        reply.label.extend(probs.argmax(axis=1).tolist())
        return reply.SerializeToString()

    def Embed(self, request: Any, context: Any) -> bytes:
        rows, order, seed, at = self._run(context, request, "Embed")
        values = rows.numpy()[order]
        reply = self.pb.EmbedReply(rows=len(order), dim=values.shape[1], seed=seed,
                                   seed_time=[] if at is None else at.tolist())
        reply.values.extend(values.ravel().tolist())
        return reply.SerializeToString()

    def Score(self, request: Any, context: Any) -> bytes:
        model = self._needs_task(context, "link", "Score")
        if len(request.src) != len(request.dst):
            context.abort(code("INVALID_ARGUMENT"),
                          f"Score: src has {len(request.src)} node ids and dst {len(request.dst)}: give one "
                          "destination per source")
        seed = self._seed(request)
        src, dst = np.asarray(request.src, dtype=np.int64), np.asarray(request.dst, dtype=np.int64)
        # The distinct endpoints, ascending (a link batch's seeds, as in training).
        nodes = self._nodes(context, np.unique(np.concatenate([src, dst])))
        time = self._times(request)["time"]
        sub, x = call_engine(context, self.engine.sample, nodes, fanouts=model.fanouts, seed=seed, rows=True,
                             time=time)
        _, z, seeds = model.answer(sub, x, None, model.layer_of(None))
        scores = model.score(z[request_order(src, seeds, len(seeds))], z[request_order(dst, seeds, len(seeds))])
        reply = self.pb.ScoreReply(rows=len(src), seed=seed)
        if time is not None:
            reply.time = time
        reply.scores.extend(scores.numpy().astype(np.float32).tolist())
        return reply.SerializeToString()

    def Info(self, request: Any, context: Any) -> bytes:
        e, ds, m, pb = self.engine, self.dataset, self.model, self.pb
        common = dict(
            seed=e.seed, model=m.kind if m else "", model_run=m.run_dir if m else "", model_hidden=m.hidden if m else 0,
            max_nodes=e.max_nodes, max_hops=e.max_hops, version=_core.__version__, backend=e.backend,
            feature_backend=e.feature_backend, dataset=ds.path, stats=pb.Stats(**e.stats()), has_times=e.has_times,
            model_task=m.task if m else "", model_decoder=(m.decoder_kind or "") if m else "")
        if not self.typed:
            reply = pb.InfoReply(num_nodes=e.num_nodes, num_edges=e.num_edges, feature_dim=e.feature_dim,
                                 feature_dtype=e.feature_dtype or "", num_classes=ds.num_classes or 0, **common)
            reply.fanouts.extend(e.fanouts)
            if m:
                reply.model_fanouts.extend(m.fanouts)
            return reply.SerializeToString()
        types = [pb.NodeTypeInfo(name=t, num_nodes=n, feature_dim=f[0] if f else 0, feature_dtype=f[1] if f else "",
                                 num_classes=ds.node_type(t).num_classes or 0)
                 for t, n, f in zip(e.node_types, e.num_nodes, e.feature_info)]
        return pb.InfoReply(
            num_nodes=ds.num_nodes, num_edges=ds.num_edges, node_types=types,
            relations=[pb.RelationInfo(name=r, num_edges=n) for r, n in zip(e.relations, e.num_edges)],
            relation_fanouts={r: pb.Fanouts(hops=f) for r, f in self.fanouts.items()},
            model_relation_fanouts={r: pb.Fanouts(hops=f) for r, f in m.fanouts.items()} if m else {},
            model_target=m.target if m else "", **common).SerializeToString()

    def methods(self) -> Dict[str, Tuple[Any, Any]]:
        pb = self.pb
        return {
            "Sample": (self.Sample, pb.SampleRequest),
            "Features": (self.Features, pb.FeaturesRequest),
            "Predict": (self.Predict, pb.PredictRequest),
            "Embed": (self.Embed, pb.PredictRequest),
            "Score": (self.Score, pb.ScoreRequest),
            "Info": (self.Info, pb.InfoRequest),
        }
