"""Link prediction on one relation ``S:R:D`` of a heterogeneous dataset: ``ringgnn train DS --task
link --relation S:R:D``, its batches, its model and its exact evaluation.

**Data.** The relation's edge splits (docs/FORMAT.md "Edge splits of a relation"): ``train``
pairs are the supervision edges (and stay in the graph, as PyG's ``LinkNeighborLoader`` keeps
them); ``val`` and ``test`` are out of the relation and of its reverse ``D:rev_R:S``, scored
against their stored negatives (OGB's protocol, :mod:`ringgnn.inference.metrics`).

**Batches** (:class:`HeteroLinkBatches`), PyG ``LinkNeighborLoader`` semantics on a
``HeteroData`` (``disjoint=False``, ``neg_sampling="binary"``): a batch's positives are
``batch_size`` train pairs of the epoch's order (a keyed permutation, :class:`ringgnn.sampling.links.Shuffle`,
key (seed, "lshf", epoch)); ``ceil(neg_ratio * n)`` negative pairs, source uniform over ``S``
and destination uniform over ``D``, come from the numpy stream (seed, "lneg", epoch, batch). The
seeds are the sorted distinct sources (type ``S``) and destinations (type ``D``) of all pairs,
sampled in **one** typed sample (:meth:`ringgnn.HeteroNeighborSampler.sample_typed`; one type
when ``S = D``), features gathered per type; ``data[S, R, D].edge_label_index`` holds the pairs'
positions in ``data[S].n_id`` and ``data[D].n_id``, ``edge_label`` 1 or 0, ``input_id`` the
positives' positions in the split. A batch depends only on (seed, epoch, batch).

**Model** (:class:`HeteroLinkModel`): the heterogeneous encoders of :mod:`ringgnn.models.hetero`
(``sage`` or ``rgcn``, featureless types with learned embeddings), one per endpoint type (two
towers when ``S != D``, each a ``HeteroModel`` whose target is its type and whose last layer is
``hidden`` wide; one encoder when ``S = D``), and the decoder of homogeneous link runs
(``dot``, or ``mlp`` on the element-wise product). Loss: binary cross-entropy, as
``--task link`` on a homogeneous graph. Two towers cost two embedding tables for a featureless
type both encoders read (each tower learns its own); they make the exact evaluation the node
case's: each tower's layer-wise inference of its own type.

**Evaluation.** Per epoch (sampled): every node a held-out split names gets one sampled
embedding from node batches of its type (a ``HeteroLoader`` of those ids, fixed sample), then the
decoder scores the pairs and their negatives. At the end (exact, unless ``exact=False``; after
every epoch with ``--eval layerwise``): the towers run layer-wise over the whole graph
(:func:`ringgnn.inference.scoring.exact_rows`, out of core), keeping the rows of the named nodes only;
``metrics.json``'s ``layerwise``. Memory: the named nodes' embeddings (distinct nodes x hidden x
4 bytes) and the split files (mapped), as homogeneous link runs.

**Training** is ``ringgnn.training.loop``'s loop (:class:`HeteroLinkPrediction` is its task plug-in):
under ``torchrun`` each rank trains on its share of the link batches and scores its share of the
held-out pairs, as homogeneous link runs. Not yet: embedding tables in files (``--embed-tables``),
the Rust loader's hyperbatches for link batches.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .. import _options
from .._core import InputError
from ..data.schema import parse_edge_type
from ..inference.scoring import decode_pairs, exact_rows, split_scores
from ..models.gnn import build_decoder
from ..models.hetero import HeteroModel, hetero_batch_to_dicts
from ..sampling import hyper as hetero_hyper
from ..sampling.hetero import HeteroLoader, HeteroNeighborSampler
from ..sampling.links import HeteroLinkBatches
from ..sampling.plan import plan_hetero
from . import distributed
from .hetero import TypedRuns
from .tasks import LinkPrediction, link_keys, sampled_embeddings

#: The decoders ``decoder=`` names.
DECODERS = ("dot", "mlp")
#: The held-out splits a run scores, in order (the first picks the best epoch).
EVAL_SPLITS = ("val", "test")


def link_config(ds: Any, relation: str, model: str, hidden: int, layers: int, embed_dim: Optional[int],
                dropout: float, decoder: str) -> Dict[str, Any]:
    """The JSON-able description of a :class:`HeteroLinkModel` for ``relation`` of ``ds``."""
    s, _, d = parse_edge_type(relation)

    def tower(t: str) -> Dict[str, Any]:
        return dict(node_types=list(ds.node_types), edge_types=list(ds.relations), in_dims=ds.feature_dims(),
                    num_nodes=ds.num_nodes_dict, target=t, hidden=hidden, out_dim=hidden, layers=layers, model=model,
                    embed_dim=embed_dim, dropout=dropout)

    return dict(relation=relation, decoder=decoder, src=tower(s), dst=None if s == d else tower(d))


def _build_model(cfg: Mapping[str, Any]) -> Any:
    import torch


    class HeteroLinkModel(torch.nn.Module):
        """Encoders ``encoders["src"]`` (rows of type ``S``) and ``encoders["dst"]`` (type ``D``;
        absent when ``S = D``: the source tower encodes both) and the ``decoder``; its forward
        scores pairs of a batch's rows in one call (a DDP wrapper sees the whole step)."""

        def __init__(self) -> None:
            super().__init__()
            self.config = dict(cfg)
            self.encoders = torch.nn.ModuleDict({"src": HeteroModel(**cfg["src"])})
            if cfg.get("dst") is not None:
                self.encoders["dst"] = HeteroModel(**cfg["dst"])
            self.decoder = build_decoder(cfg["decoder"], int(cfg["src"]["hidden"]))

        def tower(self, side: str) -> Any:
            return self.encoders["dst"] if side == "dst" and "dst" in self.encoders else self.encoders["src"]

        def forward(self, x_dict: Any, edge_index_dict: Any, n_id_dict: Any, src: Any, dst: Any) -> Any:
            zs = self.encoders["src"](x_dict, edge_index_dict, n_id_dict)
            zd = self.encoders["dst"](x_dict, edge_index_dict, n_id_dict) if "dst" in self.encoders else zs
            return self.decoder(zs[src], zd[dst])

    return HeteroLinkModel()


def build_link_model(cfg: Mapping[str, Any]) -> Any:
    """The :class:`HeteroLinkModel` of :func:`link_config`'s ``cfg`` (fresh weights)."""
    return _build_model(cfg)


# --- the task -----------------------------------------------------------------------------------


class HeldOut:
    """A held-out split's pairs ((2, n), mapped) and negatives ((n, K), mapped), and the sorted
    distinct nodes it names per side."""

    def __init__(self, ds: Any, relation: str, split: str):
        rel = ds.relation(relation)
        self.pairs = rel.edge_split(split, mmap=True)
        if not rel.manifest["edge_splits"][split]["negatives"]:
            raise InputError(f"{ds.path}: relation {relation}'s edge split '{split}' has no stored negatives to rank "
                             "against; rebuild it with negatives (link_negatives > 0)")
        self.negs = rel.edge_negatives(split, mmap=True)
        self.src_nodes = np.unique(self.pairs[0])
        self.dst_nodes = np.unique(np.concatenate([np.unique(self.pairs[1]), np.unique(self.negs)]))


class HeteroLinkPrediction(TypedRuns, LinkPrediction):
    """Link prediction on ``relation`` (see the module docs): the loop's link task with typed
    batches (:class:`HeteroLinkBatches`), the two-tower model and per-type evaluation loaders."""

    config_key = "hetero_link"

    def __init__(self, ds: Any, relation: Optional[str], decoder: str = "dot", neg_ratio: float = 1.0,
                 neg_weight: str = "uniform", embed_dim: Optional[int] = None, embed_tables: str = "auto"):
        if neg_weight != "uniform":
            raise InputError("--neg-weight: not available for heterogeneous datasets (negatives are drawn uniformly "
                             "over each end's node type); leave it out")
        if embed_tables != "auto":
            raise InputError("--embed-tables: --task link on a heterogeneous dataset keeps its embedding tables in "
                             "memory (tables in files are for --task node yet); leave it out")
        super().__init__(decoder, neg_ratio, neg_weight)
        self.relation = _check_relation(ds, relation)
        self.edge_type = parse_edge_type(self.relation)
        self.embed_dim = None if embed_dim is None else _options.count(embed_dim, "--embed-dim", 1)
        s_type, _, d_type = self.edge_type
        for t in {s_type, d_type}:
            if not any(et[2] == t for et in ds.edge_types):
                raise InputError(f"--relation {self.relation}: no relation enters node type '{t}', so its nodes get no "
                                 "messages; build the dataset with --add-reverse (add_reverse=True)")
        self.sides = {"src": s_type} if s_type == d_type else {"src": s_type, "dst": d_type}

    def check(self, ds: Any) -> None:
        pass  # the relation's splits are checked when the task is made

    def identity(self) -> Dict[str, Any]:
        return {"heterogeneous": True, "task": "link", "relation": self.relation}

    def scope(self, ds: Any, train_loader: Any) -> str:
        return (f"heterogeneous, link prediction on {self.relation} ({self.decoder} decoder, {self.neg.amount:g} "
                f"negatives per positive), {train_loader.edges.shape[1]:,} training pairs")

    def run_args(self, ds: Any, args: Dict[str, Any]) -> Dict[str, Any]:
        self.cfg = link_config(ds, self.relation, args["model"], args["hidden"], args["layers"], self.embed_dim,
                               args["dropout"], self.decoder)
        return dict(task="link", **dict(args, cache=_options.size(args["cache"], "--cache")), decoder=self.decoder,
                    neg_ratio=self.neg.amount, neg_weight="uniform", relation=self.relation,
                    embed_dim=self.embed_dim, hetero_link=self.cfg)

    def prepare(self, ds: Any, ranks: Any, run_args: Dict[str, Any], resumed: Any, dev: Any,
                opts: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        net = build_link_model(self.cfg).to(dev)
        fan, batch_size, seed = opts["fanouts"], opts["batch_size"], opts["seed"]
        self.held = {s: HeldOut(ds, self.relation, s) for s in self.eval_splits}
        train_pairs = ds.relation(self.relation).manifest["edge_splits"]["train"]["edges"]
        most = min(ds.num_nodes, 2 * (batch_size + math.ceil(batch_size * self.neg.amount)))
        self.plan = plan_hetero(ds, fan, target=self.edge_type[2], batch_size=most, seeds=train_pairs,
                                memory=_options.size(opts["memory"], "--memory"), backend=opts["backend"],
                                feature_backend="auto", cache=run_args["cache"])
        self.sampler = HeteroNeighborSampler(ds, fan, backend=opts["backend"], direct=opts["direct"], seed=seed,
                                             memory=opts["memory"], plan=self.plan)
        prefetch = {} if opts["prefetch"] is None else {"prefetch": opts["prefetch"]}
        common = dict(batch_size=batch_size, seed=seed, threads=opts["threads"], direct=opts["direct"],
                      sampler=self.sampler, **prefetch)
        loaders: Dict[str, Any] = {}
        features = None
        for split, h in self.held.items():
            for side, t in self.sides.items():
                loaders[f"{split}.{side}"] = HeteroLoader(ds, fan, t, seeds=self._nodes(h, side), shuffle=False,
                                                          features=features, **common)
                features = loaders[f"{split}.{side}"].features  # one set of readers and one cache
        self.hyper = loaders[self.train_split] = HeteroLinkBatches(
            ds, self.relation, self.sampler, features, batch_size=batch_size, neg_ratio=self.neg.amount, seed=seed,
            threads=opts["threads"], hyperbatch=opts["hyperbatch"], **prefetch)
        return net, loaders

    def _nodes(self, h: HeldOut, side: str) -> np.ndarray:
        """The sorted nodes of a held-out split a side's loader embeds (both sides' when ``S = D``)."""
        if "dst" not in self.sides:
            return np.union1d(h.src_nodes, h.dst_nodes)
        return h.src_nodes if side == "src" else h.dst_nodes

    def loss(self, net: Any, batch: Any, device: Any, kind: str, always: bool = False) -> Tuple[Any, int]:
        import torch.nn.functional as F

        et = self.edge_type
        eli = batch[et].edge_label_index.to(device)
        logits = net(*hetero_batch_to_dicts(batch, device), eli[0], eli[1])
        return F.binary_cross_entropy_with_logits(logits, batch[et].edge_label.to(device)), int(eli.shape[1])

    def distribute(self, loaders: Dict[str, Any], ranks: Any) -> None:
        """Each rank trains on its share of the link batches; every rank embeds every node of
        the held-out splits and scores its share of the pairs (as :class:`LinkPrediction`)."""
        batches = loaders[self.train_split]
        batches.batches = distributed.shard(batches.epoch_batches(), ranks.rank, ranks.world_size)
        self._share = (ranks.rank, ranks.world_size)

    def held_out_scores(self, net: Any, feeds: Dict[str, Any], split: str, device: Any,
                        kind: str) -> Tuple[np.ndarray, np.ndarray, bool]:
        h = self.held[split]
        rows = {}
        for side, t in self.sides.items():
            tower = net.tower(side)
            tower.eval()
            rows[side] = (sampled_embeddings(lambda b: tower(*hetero_batch_to_dicts(b, device))[:b[t].batch_size],
                                             feeds[f"{split}.{side}"], len(self._nodes(h, side))),
                          self._nodes(h, side))
        return (*decode_pairs(net.decoder, *rows["src"], h.pairs, h.negs, dst=rows.get("dst")), False)

    def exact(self, ds: Any, out: str, net: Any, opts: Dict[str, Any], **exact: Any) -> Dict[str, Any]:
        if net is None:
            import torch

            best = torch.load(os.path.join(out, "best.pt"), map_location="cpu", weights_only=True)
            net = build_link_model(self.cfg)
            net.load_state_dict(best["model"])
        return layerwise_scores(ds, net, self.held, work_dir=out, **exact)


def _check_relation(ds: Any, relation: Optional[str]) -> str:
    split = [r for r in ds.relations if ds.relation(r).edge_split_names]
    if relation is None:
        raise InputError(f"{ds.path} is heterogeneous: give --relation SRC:REL:DST, the relation whose links to predict "
                         f"(relations with edge splits: {', '.join(split) or 'none'})")
    relation = ds.check_relation(relation)
    missing = [s for s in ("train", *EVAL_SPLITS) if s not in ds.relation(relation).edge_split_names]
    if missing:
        raise InputError(f"--relation {relation}: it has no {'/'.join(missing)} edge split, which --task link trains "
                         "and scores on; build it with a link split (generate hetero --link-split ... --link-relation "
                         f"{relation}, or build_hetero's Relation(link_split=...)); relations with edge splits: "
                         f"{', '.join(split) or 'none'}")
    return relation


def layerwise_scores(ds: Any, net: Any, held: Mapping[str, HeldOut], **opts: Any) -> Dict[str, Any]:
    """Exact scores of ``net`` (on the CPU) on each held-out split: each tower's layer-wise rows of
    the nodes the splits name, then the decoder."""
    s_type, _, d_type = parse_edge_type(net.config["relation"])
    src_ids = np.unique(np.concatenate([h.src_nodes for h in held.values()]))
    dst_ids = np.unique(np.concatenate([h.dst_nodes for h in held.values()]))
    if s_type == d_type:
        src_ids = dst_ids = np.union1d(src_ids, dst_ids)
    zs = exact_rows(ds, net.tower("src"), s_type, src_ids, **opts)
    zd = zs if s_type == d_type else exact_rows(ds, net.tower("dst"), d_type, dst_ids, **opts)
    out: Dict[str, Any] = {}
    for split, h in held.items():
        s = split_scores(*decode_pairs(net.decoder, zs, src_ids, h.pairs, h.negs, dst=(zd, dst_ids)))
        out.update(link_keys(split, s["auc"], s["mrr"], s["hits"]))
    return out
