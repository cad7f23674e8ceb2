"""A typed dataset's kind (:class:`Typed`, the methods of ``training.kinds.Homogeneous``): a
heterogeneous dataset, or a homogeneous one at times or on task tables (its one-type case):
per-relation fanouts, the typed loaders and their plan, the heterogeneous models (a link task: a
tower per end type) and the embedding tables of featureless types."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from .. import _options
from .._core import InputError
from ..data.schema import HETERO_MODELS, HOMOGENEOUS_RELATION, parse_edge_type
from ..inference.hetero import attach_tables, infer_hetero
from ..inference.scoring import exact_rows
from ..models.checkpoints import LAST, config_mismatch, save
from ..models.gnn import build_decoder
from ..models.hetero import HeteroModel, hetero_batch_to_dicts
from ..models.tables import FileTable, load_tables, prune_tables, save_tables
from ..sampling.hetero import HeteroLoader, HeteroNeighborSampler, relation_fanouts
from ..sampling.links import HeteroLinkBatches
from ..sampling.plan import plan_hetero, probe_batch_bytes, training_reserve

#: Where the embedding tables of featureless types live (``--embed-tables``).
EMBED_TABLES = ("auto", "memory", "file")


class Typed:
    """A typed dataset's kind; ``plan``, ``sampler`` and ``hyper`` are set in :meth:`prepare`."""

    typed = True
    plan: Any = None
    sampler: Any = None
    hyper: Any = None

    def __init__(self, embed_dim: Optional[int] = None, embed_tables: str = "auto", times: Optional[np.ndarray] = None,
                 hetero: bool = True, pairs_at_times: bool = False, table: Any = None):
        self.times = times  # each target node's seed time (``temporal.seed_times``), or None
        self.pairs_at_times = pairs_at_times
        self.table = table  # a node task's ``task_table.TaskTables``, or None
        self.hetero = hetero  # False: the one-type case
        self.embed_dim = None if embed_dim is None else _options.count(embed_dim, "--embed-dim", 1)
        self.embed_tables = _options.choice(embed_tables, EMBED_TABLES, "--embed-tables")
        self.config_key = "hetero"  # the run's option holding the model's config (not in metrics.json)
        # The tables in files, by name (TYPE, or SIDE.TYPE per link tower), and the batch's rows (leaves).
        self.tables: Dict[str, FileTable] = {}
        self._rows: Dict[str, Tuple[np.ndarray, Any]] = {}

    @property
    def temporal(self) -> bool:
        return self.times is not None or self.pairs_at_times or (self.table is not None and self.table.timed)

    def _one_type(self) -> Tuple[str, str]:
        """(why a homogeneous dataset's run is on the typed engine, how to leave it)."""
        return ("on task tables", "") if self.table is not None else ("at times", "--ignore-time")

    def fanouts(self, ds: Any, fanouts: Any) -> Dict[str, List[int]]:
        if not self.hetero:  # the one-type case takes the homogeneous --fanouts, one list
            fanouts = _options.fanouts(fanouts)
        return relation_fanouts(ds, fanouts)

    def check_model(self, model: str, ds: Any) -> None:
        if not self.hetero and model not in HETERO_MODELS:
            why, leave = self._one_type()
            raise InputError(f"--model {model}: a run {why} trains on the typed engine, whose models are "
                             f"{', '.join(HETERO_MODELS)}; use one of them" + (f", or {leave}" if leave else ""))
        _options.choice(model, HETERO_MODELS, "--model")

    #: The loop's options a typed run refuses: their defaults and why.
    REFUSED = {
        "cache_policy": ("presample", "a typed run's cache ranks each type's rows by expected hits per byte"),
        "gpu_cache": (None, "the GPU tier holds rows of one feature file, a typed dataset has one per type"),
    }

    def check_options(self, opts: Dict[str, Any]) -> None:
        given = [k for k, (default, _) in self.REFUSED.items() if opts.get(k) != default]
        if given:
            why, leave = self._one_type()
            which = "heterogeneous datasets" if self.hetero else f"runs {why} (on the typed engine)"
            raise InputError(f"{', '.join('--' + k.replace('_', '-') for k in given)}: not available for {which} "
                             f"({'; '.join(self.REFUSED[k][1] for k in given)}); leave "
                             f"{'it' if len(given) == 1 else 'them'} out"
                             f"{'' if self.hetero or not leave else ' or give ' + leave}")

    def run_args(self, task: Any, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        if not self.hetero:  # the one-type case's fanouts as a homogeneous run's: one list
            args = dict(args, fanouts=args["fanouts"][HOMOGENEOUS_RELATION])
        self.featureless = [t for t, d in ds.feature_dims().items() if d is None]
        self.width = self.embed_dim or args["hidden"]
        if task.name == "link":
            self.config_key = "hetero_link"
            self.cfg = link_config(ds, task.relation, args["model"], args["hidden"], args["layers"], self.embed_dim,
                                   args["dropout"], task.decoder)
            extra = dict(relation=task.relation, embed_dim=self.embed_dim, hetero_link=self.cfg)
        else:
            # The model without its tables, for the plan to probe; prepare builds the run's.
            classes = self.table.classes if self.table is not None else int(ds.node_type(task.target).num_classes)
            self.net = HeteroModel(ds.node_types, ds.edge_types, ds.feature_dims(), ds.num_nodes_dict, task.target,
                                   args["hidden"], classes, args["layers"], model=args["model"],
                                   embed_dim=self.embed_dim, dropout=args["dropout"], external=self.featureless)
            extra = dict(target=task.target, embed_dim=self.embed_dim, hetero=_placed(self.net.config()),
                         **({} if self.table is None else {"task_table": self.table.record()}))
        return dict(task=task.name, **dict(args, cache=_options.size(args["cache"], "--cache")), **task.task_args(),
                    **extra)

    def public_args(self, run_args: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in run_args.items() if k != self.config_key}

    def identity(self, task: Any) -> Dict[str, Any]:
        if not self.hetero:
            return {}
        return {"heterogeneous": True, **({"relation": task.relation} if task.name == "link"
                                          else {"target": task.target})}

    def scope(self, task: Any, ds: Any, train_loader: Any) -> str:
        if task.name == "link":
            return (f"{f'heterogeneous, link prediction on {task.relation}' if self.hetero else 'link prediction'} "
                    f"({task.decoder} decoder, {task.neg.amount:g} negatives per positive), "
                    f"{train_loader.edges.shape[1]:,} training pairs")
        if not self.hetero:
            return f"{ds.num_nodes:,} nodes"
        return (f"heterogeneous, {len(ds.node_types)} node types, {len(ds.relations)} relations, target "
                f"{task.target}, {len(train_loader.seeds):,} training seeds")

    def open_run(self, out: str, run_args: Dict[str, Any], resumed: Any) -> Any:
        key = self.config_key
        was = _placed(resumed["args"].get(key) or {}) if resumed is not None else None
        if was is not None and was != _placed(run_args[key]):
            raise InputError(f"--resume: {os.path.join(out, LAST)} holds a run of another model or dataset "
                             f"({config_mismatch(was, _placed(run_args[key]))}); resume on the dataset it was trained "
                             "on with its options, or use another --out")
        return resumed

    def restored(self, resumed: Any, out: str) -> None:
        if resumed is not None and self.tables:
            load_tables(self.tables, os.path.join(out, LAST), resumed.get("tables") or {})

    def stepped(self) -> None:
        for name, (ids, leaf) in self._rows.items():
            self.tables[name].step(ids, leaf.grad)
        self._rows = {}

    def save(self, state: Dict[str, Any], path: str, epoch: int) -> None:
        # Tables' copies first, then the checkpoint naming them, then the copies none names.
        state["tables"] = save_tables(self.tables, path, f"e{epoch}")
        save(state, path)
        prune_tables(path, state["tables"])

    def prepare(self, task: Any, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        placed = None if resumed is None else resumed["args"][self.config_key]
        if task.name == "link":
            return self._link_run(task, ds, ranks, run_args, None if placed is None else placed["src"], dev, opts)
        return self._node_run(task, ds, ranks, run_args, placed, dev, opts)

    def _plan(self, ds: Any, opts: Dict[str, Any], run_args: Dict[str, Any], resumed_cfg: Any, towers: int,
              **sizes: Any) -> Any:
        """The run's one plan, placing each featureless type's ``towers`` tables together."""
        return plan_hetero(ds, opts["fanouts"], memory=_options.size(opts["memory"], "--memory"),
                           backend=opts["backend"], feature_backend="auto", cache=run_args["cache"],
                           tables=dict.fromkeys(self.featureless, self.width * towers),
                           fixed_tables=_table_placement(self.featureless, self.embed_tables, resumed_cfg),
                           times=self.temporal, **sizes)

    def _node_run(self, task: Any, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed_cfg: Any, dev: Any,
                  opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        net, target, fan, batch_size = self.net.to(dev), task.target, opts["fanouts"], opts["batch_size"]
        width = self.width
        # The plan measures a probe batch's peak (read from disk, nothing held, the RNG kept).
        probe = self.split_loader(ds, fan, target, "train", shuffle=True, batch_size=batch_size, seed=opts["seed"],
                                  threads=1, backend="pread", feature_backend="pread", cache=0, direct=opts["direct"])
        threads_n = probe.threads if opts["threads"] is None else opts["threads"]

        def probe_step(batch: Any) -> None:
            rng = torch.get_rng_state()
            bs = batch[target].batch_size
            x, edges, n_id = hetero_batch_to_dicts(batch, dev)
            for t in self.featureless:  # rows as the tables would give them
                if t in n_id:
                    x[t] = torch.zeros(len(n_id[t]), width, device=dev, requires_grad=True)
            net(x, edges, n_id)[:bs].float().logsumexp(-1).sum().backward()
            net.zero_grad(set_to_none=True)
            torch.set_rng_state(rng)

        # Before the probe: what it frees stays held for the batches to reuse.
        held = _options.held_memory() + _options.code_bytes(training=True)
        batch_bytes = probe_batch_bytes(probe, probe_step, threads_n + 2)
        train_seeds = len(probe.seeds)
        del probe
        plan = self._plan(ds, opts, run_args, resumed_cfg, 1, target=target, batch_size=batch_size,
                          seeds=train_seeds, reserve=training_reserve(net),
                          batch_bytes=batch_bytes, process=held)
        cfg = dict(run_args["hetero"], **({"external": plan.file_tables} if plan.file_tables else {}))
        run_args["hetero"] = cfg
        torch.manual_seed(opts["seed"])
        net = HeteroModel.from_config(cfg).to(dev)
        self.open_tables({t: net.num_nodes[t] for t in plan.file_tables}, width, ranks, opts)
        net.tables = {t: table.reader() for t, table in self.tables.items()}
        common = dict(self.typed_sampler(ds, plan, opts), hyperbatch=opts["hyperbatch"])
        train_loader = self.hyper = self.split_loader(ds, fan, target, "train", shuffle=True, **common)
        loaders = {task.train_split: train_loader}
        for s in task.eval_splits:
            loaders[s] = self.split_loader(ds, fan, target, s, shuffle=False, features=train_loader.features,
                                           **common)
        self.net = net
        return net, loaders

    def _link_run(self, task: Any, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed_cfg: Any, dev: Any,
                  opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        rel, batch_size, sides = ds.relation(task.relation), opts["batch_size"], task.sides
        for s in task.eval_splits:
            task.hold(rel, s, at_times=self.pairs_at_times)
        most = 2 * (batch_size + math.ceil(batch_size * task.neg.amount))  # at times a node may recur
        most = most if self.pairs_at_times else min(ds.num_nodes, most)
        plan = self._plan(ds, opts, run_args, resumed_cfg, len(sides), target=task.edge_type[2], batch_size=most,
                          seeds=rel.manifest["edge_splits"]["train"]["edges"])
        if plan.file_tables:
            self.cfg = dict(self.cfg, **{side: dict(self.cfg[side], external=plan.file_tables) for side in sides})
            run_args["hetero_link"] = self.cfg
        net = build_link_model(self.cfg).to(dev)
        self.open_tables({f"{side}.{t}": ds.num_nodes_dict[t] for side in sides for t in plan.file_tables},
                         self.width, ranks, opts)
        for side in sides:
            net.tower(side).tables = {t: self.tables[f"{side}.{t}"].reader() for t in plan.file_tables}
        common = self.typed_sampler(ds, plan, opts)
        loaders: Dict[str, Any] = {}
        features = None
        for split, h in task.held.items():
            for side, t in sides.items():
                key = split if side == "src" else f"{split}.{side}"
                at = dict(ignore_time=True) if h.times is None else dict(input_time=h.times[side])
                loaders[key] = HeteroLoader(ds, opts["fanouts"], t, seeds=h.ends[side], shuffle=False,
                                            features=features, **at, **common)
                features = loaders[key].features  # one set of readers and one cache
        common = {k: v for k, v in common.items() if k not in ("sampler", "direct")}
        self.hyper = loaders[task.train_split] = HeteroLinkBatches(
            ds, task.relation, self.sampler, features, neg_ratio=task.neg.amount, neg_weight=task.neg.weight,
            hyperbatch=opts["hyperbatch"], ignore_time=not self.pairs_at_times, **common)
        return net, loaders

    def split_loader(self, ds: Any, fanouts: Any, target: str, split: str, **opts: Any) -> Any:
        """The ``HeteroLoader`` of ``split`` of ``target``: the task table's rows, or the type's
        split (at the seeds' times, if any)."""
        if self.table is not None:
            return self.table.loader(ds, fanouts, target, split, **opts)
        at = dict(ignore_time=True) if self.times is None else \
            dict(input_time=self.times[ds.node_type(target).split(split)])
        return HeteroLoader(ds, fanouts, target, seeds=split, **opts, **at)

    def open_tables(self, names: Mapping[str, int], width: int, ranks: Any, opts: Dict[str, Any]) -> None:
        """Create the live tables ``names`` (name: rows) in ``RUN/tables``; refused under torchrun."""
        if names and ranks.active:
            raise InputError(f"embedding tables in files ({', '.join(names)}) are not supported under torchrun yet: "
                             "every rank would update the same files; give a larger --memory or --embed-tables memory")
        if names and ranks.leader:
            os.makedirs(opts["out"], exist_ok=True)
        self.tables = {name: FileTable(os.path.join(opts["out"], "tables"), name, n, width, create=True, lr=opts["lr"])
                       for name, n in names.items()}
        self._rows = {}

    def typed_sampler(self, ds: Any, plan: Any, opts: Dict[str, Any]) -> Dict[str, Any]:
        """Set the run's ``plan`` and its ``sampler`` (placed by it); the options its loaders share."""
        self.plan = plan
        self.sampler = HeteroNeighborSampler(ds, opts["fanouts"], backend=opts["backend"], direct=opts["direct"],
                                             seed=opts["seed"], memory=opts["memory"], plan=plan)
        return dict(batch_size=opts["batch_size"], seed=opts["seed"], threads=opts["threads"], direct=opts["direct"],
                    sampler=self.sampler, staging_dir=opts.get("staging_dir"), staging_cap=opts.get("staging_cap"),
                    **({} if opts["prefetch"] is None else {"prefetch": opts["prefetch"]}))

    def feeds(self, loaders: Dict[str, Any], opts: Dict[str, Any], dev: Any, train_split: str = "train"
              ) -> Tuple[Dict[str, Any], str]:
        return dict(loaders), ""  # typed batches go to the device in hetero_batch_to_dicts

    def with_rows(self, x: Dict[str, Any], batch: Any, device: Any, training: bool, prefix: str = "") -> Dict[str, Any]:
        """``x`` with the batch's rows of the tables ``prefix + TYPE`` as leaves for :meth:`stepped`,
        when ``training``; else ``x`` (the model reads its tables' readers)."""
        if not training:
            return x
        x = dict(x)
        for name, table in self.tables.items():
            t = name[len(prefix):]
            if name.startswith(prefix) and t in batch.node_types and "n_id" in batch[t]:
                ids = batch[t].n_id.numpy()
                self._rows[name] = (ids, table.gather(ids))
                x[t] = self._rows[name][1].to(device)
        return x

    def rows(self, net: Any, batch: Any, device: Any, kind: str, node_type: Any = None, prefix: str = "") -> Any:
        x, edges, n_id = hetero_batch_to_dicts(batch, device)
        self._rows = {}
        # Evaluation computes at each layer only the nodes later layers read.
        hops = None if net.training else sampled_hops(batch, net.layers)
        out = net(self.with_rows(x, batch, device, net.training, prefix), edges, n_id, hops=hops)
        s = batch[node_type]
        # A task table's batch: one output per row (rows of one node at one time share a seed).
        return out[s.row_seed.to(out.device)] if "row_seed" in s else out[:s.batch_size]

    def labels(self, batch: Any, node_type: Any = None) -> Any:
        s = batch[node_type]
        return s.y if "row_seed" in s else s.y[:s.batch_size]  # a task table's: one per row

    def pairs(self, task: Any, net: Any, batch: Any, device: Any, kind: str) -> Tuple[Any, Any, int]:
        pairs = batch[task.edge_type]
        eli = pairs.edge_label_index.to(device)
        x, edges, n_id = hetero_batch_to_dicts(batch, device)
        self._rows = {}
        xs = {side: self.with_rows(x, batch, device, net.training, f"{side}.") for side in task.sides}
        return net(xs["src"], edges, n_id, eli[0], eli[1], xs.get("dst")), pairs.edge_label, int(eli.shape[1])

    def loader_lines(self, train_loader: Any, ranks: Any, device_note: str) -> List[str]:
        lines = [f"{ranks.tag()}loader: sampling with {self.sampler.resolved_backend()}; hyperbatch: "
                 f"{self.hyper.hyperbatch_size()[1]}", self.plan.text()]
        if self.pairs_at_times:
            lines.append("temporal: each pair and its negatives are sampled at the pair's time minus one (only edges "
                         "and nodes before it), in training and evaluation")
        elif self.temporal:
            lines.append("temporal: each seed is sampled at its time (only edges and nodes not newer than it), in "
                         "training and evaluation")
        if self.table is not None:
            lines.append(self.table.text())
        return lines

    def counters(self, train_loader: Any) -> Any:
        return None

    def epoch_report(self, train_loader: Any, before: Any, timing: Dict[str, float],
                     ranks: Any) -> Tuple[Dict[str, Any], List[str]]:
        t = timing
        return dict(t), [f"  {'rank 0: ' if ranks.active else ''}training pass {t['train_epoch_seconds']:.2f} s: "
                         f"train {t['train_seconds']:.2f} s, waiting for batches {t['wait_seconds']:.2f} s; "
                         f"evaluation {t['eval_seconds']:.2f} s"]

    def loader_metrics(self, train_loader: Any) -> Dict[str, Any]:
        return {"loader": {"backend": self.sampler.resolved_backend(), "hyperbatch": self.hyper.hyperbatch_size()[0]},
                "memory_plan": {"text": self.plan.text()}}

    def exact(self, task: Any, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        """Exact scores of the live ``net`` or of the best checkpoint, on the CPU."""
        if task.name == "node" and net is None:
            r = infer_hetero(out, ds, output="predictions", **exact)
            return {k: r.get(k) for k in ("val_acc", "test_acc")}  # None for a split the target has not
        if task.name == "node":
            return task.accuracy(lambda union: exact_rows(ds, net, task.target, union, work_dir=out,
                                                          **exact).argmax(-1), ds.node_type(task.target))
        if net is None:
            path = os.path.join(out, "best.pt")
            best = torch.load(path, map_location="cpu", weights_only=True)
            net = build_link_model(self.cfg)
            net.load_state_dict(best["model"])
            for side in task.sides:  # the checkpoint's copies of the tables in files
                attach_tables(net.tower(side), path, best, f"{side}.")
        rows = {}
        for side, t in task.sides.items():
            ids = np.unique(np.concatenate([h.ends[side] for h in task.held.values()]))
            rows[side] = (exact_rows(ds, net.tower(side), t, ids, work_dir=out, **exact), ids)
        return task.exact_scores(net.decoder, rows)


def sampled_hops(batch: Any, layers: int) -> Optional[Tuple[Dict[str, List[int]], Dict[Any, List[int]]]]:
    """(nodes per hop of each type, edges per hop of each relation) of a typed batch, for
    ``HeteroModel.forward(hops=)``; None where it was not sampled one hop per layer."""
    nodes = {t: list(batch[t].num_sampled_nodes) for t in batch.node_types if "num_sampled_nodes" in batch[t]}
    edges = {et: list(batch[et].num_sampled_edges) for et in batch.edge_types if "num_sampled_edges" in batch[et]}
    if len(nodes) != len(batch.node_types) or len(edges) != len(batch.edge_types) or \
            any(len(v) != layers + 1 for v in nodes.values()) or any(len(v) != layers for v in edges.values()):
        return None
    return nodes, edges


def _placed(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """A model's config (a link model's towers too) less where its tables are."""
    return {k: _placed(v) if k in ("src", "dst") and v else v for k, v in cfg.items() if k != "external"}


def _table_placement(featureless: List[str], embed_tables: str,
                     resumed: Optional[Dict[str, Any]]) -> Optional[Dict[str, bool]]:
    """Per featureless type, whether its table is held (True) or in files, where the resumed run
    or ``--embed-tables`` decides; else None."""
    if resumed is not None:
        ext = set(resumed.get("external") or ())
        return {t: t not in ext for t in featureless}
    if embed_tables == "auto":
        return None
    return dict.fromkeys(featureless, embed_tables == "memory")


def link_config(ds: Any, relation: str, model: str, hidden: int, layers: int, embed_dim: Optional[int],
                dropout: float, decoder: str) -> Dict[str, Any]:
    """The JSON-able description of a :func:`build_link_model` model for ``relation`` of ``ds``."""
    s, _, d = parse_edge_type(relation)

    def tower(t: str) -> Dict[str, Any]:
        return dict(node_types=list(ds.node_types), edge_types=list(ds.relations), in_dims=ds.feature_dims(),
                    num_nodes=ds.num_nodes_dict, target=t, hidden=hidden, out_dim=hidden, layers=layers, model=model,
                    embed_dim=embed_dim, dropout=dropout)

    return dict(relation=relation, decoder=decoder, src=tower(s), dst=None if s == d else tower(d))


def build_link_model(cfg: Mapping[str, Any]) -> Any:
    """The :class:`HeteroLinkModel` of :func:`link_config`'s ``cfg`` (fresh weights)."""
    class HeteroLinkModel(torch.nn.Module):
        """Towers ``encoders["src"]`` and ``encoders["dst"]`` (absent when ``S = D``) and the
        ``decoder``, scoring pairs in one call (a DDP wrapper sees the whole step)."""

        def __init__(self) -> None:
            super().__init__()
            self.config = dict(cfg)
            self.encoders = torch.nn.ModuleDict({"src": HeteroModel(**cfg["src"])})
            if cfg.get("dst") is not None:
                self.encoders["dst"] = HeteroModel(**cfg["dst"])
            self.decoder = build_decoder(cfg["decoder"], int(cfg["src"]["hidden"]))

        def tower(self, side: str) -> Any:
            return self.encoders["dst"] if side == "dst" and "dst" in self.encoders else self.encoders["src"]

        def forward(self, x_dict: Any, edge_index_dict: Any, n_id_dict: Any, src: Any, dst: Any,
                    x_dst: Any = None) -> Any:
            """Scores of the pairs ``(src, dst)``; ``x_dst``: the destination tower's own inputs."""
            zs = self.encoders["src"](x_dict, edge_index_dict, n_id_dict)
            zd = zs if "dst" not in self.encoders else self.encoders["dst"](
                x_dict if x_dst is None else x_dst, edge_index_dict, n_id_dict)
            return self.decoder(zs[src], zd[dst])

    return HeteroLinkModel()


def check_target(ds: Any, target: Optional[str]) -> Tuple[str, Tuple[str, ...]]:
    """(``target``, the node type a node task classifies, checked; its evaluated splits)."""
    if target is None:
        labeled = [t for t in ds.node_types if ds.manifest["node_types"][t].get("labels")]
        raise InputError(f"{ds.path} is heterogeneous: give --target TYPE, the node type to classify "
                         f"(types with labels: {', '.join(labeled) or 'none'})")
    checked = ds.check_type(target)
    info = ds.manifest["node_types"][checked]
    if info.get("labels") is None:
        raise InputError(f"--target {target}: node type '{target}' has no labels; choose a labeled type")
    for split in ("train", "val"):
        if split not in info.get("splits", {}):
            raise InputError(f"--target {target}: node type '{target}' has no '{split}' split (it has: "
                             f"{', '.join(info.get('splits', {})) or 'none'})")
    return checked, tuple(s for s in ("val", "test") if s in info["splits"])


def check_relation(ds: Any, relation: Optional[str], eval_splits: Tuple[str, ...]) -> str:
    """``relation``, the relation ``S:R:D`` a link task predicts, checked: its edge splits, their
    stored negatives, and relations into both of its node types."""
    split = [r for r in ds.relations if ds.relation(r).edge_split_names]
    if relation is None:
        raise InputError(f"{ds.path} is heterogeneous: give --relation SRC:REL:DST, the relation whose links to "
                         f"predict (relations with edge splits: {', '.join(split) or 'none'})")
    relation = ds.check_relation(relation)
    missing = [s for s in ("train", *eval_splits) if s not in ds.relation(relation).edge_split_names]
    if missing:
        raise InputError(f"--relation {relation}: it has no {'/'.join(missing)} edge split, which --task link trains "
                         "and scores on; build it with a link split (generate hetero --link-split ... --link-relation "
                         f"{relation}, or build_hetero's Relation(link_split=...)); relations with edge splits: "
                         f"{', '.join(split) or 'none'}")
    for s in eval_splits:
        if not ds.relation(relation).manifest["edge_splits"][s]["negatives"]:
            raise InputError(f"{ds.path}: relation {relation}'s edge split '{s}' has no stored negatives to rank "
                             "against; rebuild it with negatives (link_negatives > 0)")
    s_type, _, d_type = parse_edge_type(relation)
    for t in {s_type, d_type}:
        if not any(et[2] == t for et in ds.edge_types):
            raise InputError(f"--relation {relation}: no relation enters node type '{t}', so its nodes get no "
                             "messages; build the dataset with --add-reverse (add_reverse=True)")
    return relation
