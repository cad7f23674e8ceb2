"""Link prediction on one relation ``S:R:D`` of a heterogeneous dataset: ``ringgnn train DS --task
link --relation S:R:D``, its batches, its model and its exact evaluation.

**Data.** The relation's edge splits (docs/FORMAT.md "Edge splits of a relation"): ``train``
pairs are the supervision edges (and stay in the graph, as PyG's ``LinkNeighborLoader`` keeps
them); ``val`` and ``test`` are out of the relation and of its reverse ``D:rev_R:S``, scored
against their stored negatives (OGB's protocol, :mod:`ringgnn.metrics`).

**Batches** (:class:`HeteroLinkBatches`), PyG ``LinkNeighborLoader`` semantics on a
``HeteroData`` (``disjoint=False``, ``neg_sampling="binary"``): a batch's positives are
``batch_size`` train pairs of the epoch's order (a keyed permutation, :class:`ringgnn.links.Shuffle`,
key (seed, "lshf", epoch)); ``ceil(neg_ratio * n)`` negative pairs, source uniform over ``S``
and destination uniform over ``D``, come from the numpy stream (seed, "lneg", epoch, batch). The
seeds are the sorted distinct sources (type ``S``) and destinations (type ``D``) of all pairs,
sampled in **one** typed sample (:meth:`ringgnn.HeteroNeighborSampler.sample_typed`; one type
when ``S = D``), features gathered per type; ``data[S, R, D].edge_label_index`` holds the pairs'
positions in ``data[S].n_id`` and ``data[D].n_id``, ``edge_label`` 1 or 0, ``input_id`` the
positives' positions in the split. A batch depends only on (seed, epoch, batch).

**Model** (:class:`HeteroLinkModel`): the heterogeneous encoders of :mod:`ringgnn.hetero_models`
(``sage`` or ``rgcn``, featureless types with learned embeddings), one per endpoint type (two
towers when ``S != D``, each a ``HeteroModel`` whose target is its type and whose last layer is
``hidden`` wide; one encoder when ``S = D``), and the decoder of homogeneous link runs
(``dot``, or ``mlp`` on the element-wise product). Loss: binary cross-entropy, as
``--task link`` on a homogeneous graph. Two towers cost two embedding tables for a featureless
type both encoders read (each tower learns its own); they make the exact evaluation the node
case's: each tower's layer-wise inference of its own type.

**Evaluation.** Per epoch (sampled): every node a held-out split names gets one sampled
embedding from node batches of its type (a ``HeteroLoader`` of those ids, fixed sample), then the
decoder scores the pairs and their negatives. At the end (exact, unless ``exact=False``): the best
checkpoint's towers run layer-wise over the whole graph (:class:`ringgnn.hetero_infer.HeteroLayerwise`,
out of core), keeping the rows of the named nodes only; ``metrics.json``'s ``layerwise``.
Memory: the named nodes' embeddings (distinct nodes x hidden x 4 bytes) and the split files
(mapped), as homogeneous link runs. Not yet: ``torchrun`` (refused), the Rust loader's
hyperbatches for link batches.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from . import _options, hetero_hyper, progress
from ._core import InputError
from ._files import os_errors
from .checkpoints import LAST, config_mismatch, open_run, restore, run_directory, save, write_json
from .hetero import HeteroLoader, HeteroNeighborSampler, open_hetero, relation_fanouts
from .hetero_schema import HETERO_MODELS, parse_edge_type
from .hetero_plan import plan_hetero
from .links import NEG_PURPOSE, SHUFFLE_PURPOSE, Shuffle

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

    from .hetero_models import HeteroModel
    from .models import build_decoder

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


class HeteroLinkBatches:
    """The link batches of relation ``relation`` (see the module docs), gathered on ``threads``
    threads, ``prefetch`` ahead. ``pairs`` (2, n): the positives (default the ``train`` split,
    mapped). ``hyperbatch``: link batches a thread samples together from disk (``H`` consecutive
    ones, :meth:`HeteroNeighborSampler.sample_many`, each relation file read once per hop for all
    of them; ``"auto"`` sizes H as :class:`ringgnn.HeteroLoader` does); the batches are the same."""

    def __init__(self, ds: Any, relation: str, sampler: HeteroNeighborSampler, features: Any = None, *,
                 batch_size: int,
                 neg_ratio: float, seed: int, shuffle: bool = True, threads: Optional[int] = None, prefetch: int = 2,
                 pairs: Optional[np.ndarray] = None, hyperbatch: Any = "auto"):
        self.ds, self.relation = ds, ds.check_relation(relation)
        self.src_type, _, self.dst_type = parse_edge_type(relation)
        self.edge_type = parse_edge_type(relation)
        if features is None:  # the readers (and cache) a loader of this sampler would make
            features = HeteroLoader(ds, sampler.fanouts, self.dst_type, seeds=np.arange(1), sampler=sampler).features
        self.sampler, self.features = sampler, features
        self.pairs = ds.relation(relation).edge_split("train", mmap=True) if pairs is None else pairs
        self.batch_size = _options.count(batch_size, "batch_size", 1)
        self.neg_ratio, self.seed, self.shuffle = float(neg_ratio), int(seed), bool(shuffle)
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self.prefetch = prefetch
        self.counts = ds.num_nodes_dict
        self.feature_types = [t for t, d in ds.feature_dims().items() if d is not None]
        self.hyperbatch = _options.hyperbatch_size(hyperbatch)
        self._hyper: Optional[Tuple[int, str]] = None
        self.epoch = 0

    def __len__(self) -> int:
        return -(-self.pairs.shape[1] // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = _options.count(epoch, "epoch")

    def positions(self, epoch: int, b: int) -> np.ndarray:
        """Where batch ``b``'s positives are in the split, ascending (page order of the file)."""
        n = self.pairs.shape[1]
        idx = np.arange(b * self.batch_size, min(n, (b + 1) * self.batch_size), dtype=np.int64)
        if self.shuffle:
            idx = Shuffle(n, (self.seed, SHUFFLE_PURPOSE, epoch))(idx)
        return np.sort(idx)

    def draw(self, epoch: int, b: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, label, positions) of batch ``b`` of epoch ``epoch``: its positives, then
        its negatives from the (seed, "lneg", epoch, batch) stream."""
        pos = self.positions(epoch, b)
        src = np.ascontiguousarray(self.pairs[0, pos], dtype=np.int64)
        dst = np.ascontiguousarray(self.pairs[1, pos], dtype=np.int64)
        k = math.ceil(len(pos) * self.neg_ratio)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, NEG_PURPOSE, epoch, b])))
        src = np.concatenate([src, rng.integers(0, self.counts[self.src_type], k, dtype=np.int64)])
        dst = np.concatenate([dst, rng.integers(0, self.counts[self.dst_type], k, dtype=np.int64)])
        label = np.concatenate([np.ones(len(pos), np.float32), np.zeros(k, np.float32)])
        return src, dst, label, pos

    def seeds(self, src: np.ndarray, dst: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(seeds per type, positions of ``src`` and of ``dst`` among their type's seeds): the
        sorted distinct endpoints, one type when ``S = D``."""
        s, d = self.src_type, self.dst_type
        if s == d:
            ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
            return {s: ids}, inv[:len(src)], inv[len(src):]
        us, si = np.unique(src, return_inverse=True)
        ud, di = np.unique(dst, return_inverse=True)
        return {s: us, d: ud}, si, di

    def batch(self, epoch: int, b: int) -> Any:
        """Batch ``b`` of epoch ``epoch`` as ``HeteroData``."""
        src, dst, label, pos = self.draw(epoch, b)
        return self.make(src, dst, label, epoch, b, input_id=pos)

    def batches(self, epoch: int, indices: List[int]) -> List[Any]:
        """Batches ``indices`` of epoch ``epoch`` sampled together (one hyperbatch,
        :meth:`HeteroNeighborSampler.sample_many`): each exactly :meth:`batch` of its own."""
        if len(indices) == 1:
            return [self.batch(epoch, indices[0])]
        drawn = [self.draw(epoch, b) for b in indices]
        typed = [self.seeds(src, dst) for src, dst, _, _ in drawn]
        samples = self.sampler.sample_many([t[0] for t in typed], indices, epoch=epoch)
        return [self._assemble(sample, si, di, label, pos)
                for sample, (_, si, di), (_, _, label, pos) in zip(samples, typed, drawn)]

    def make(self, src: np.ndarray, dst: np.ndarray, label: Optional[np.ndarray], epoch: int, b: int,
             input_id: Optional[np.ndarray] = None) -> Any:
        """The ``HeteroData`` scoring pairs ``(src[i], dst[i])`` (ids of ``S`` and ``D``): one typed
        sample around their distinct endpoints, ``edge_label_index`` their positions."""
        seeds, si, di = self.seeds(src, dst)
        return self._assemble(self.sampler.sample_typed(seeds, epoch=epoch, batch=b), si, di, label, input_id)

    def _assemble(self, sample: Any, si: np.ndarray, di: np.ndarray, label: Optional[np.ndarray],
                  input_id: Optional[np.ndarray]) -> Any:
        import torch

        x = {t: self.features.gather(t, sample.node[t]) for t in self.feature_types}
        data = sample.to_hetero_data(x)
        et = self.edge_type
        data[et].edge_label_index = torch.from_numpy(np.stack([si, di]).astype(np.int64))
        if label is not None:
            data[et].edge_label = torch.from_numpy(label)
        if input_id is not None:
            data[et].input_id = torch.from_numpy(np.ascontiguousarray(input_id, dtype=np.int64))
        return data

    def hyperbatch_size(self) -> Tuple[int, str]:
        """(H, why): link batches sampled together, decided once (``ringgnn.hetero_hyper``, as
        :class:`ringgnn.HeteroLoader` decides it, for the most endpoints a link batch can have)."""
        if self._hyper is None:
            backend, _ = self.sampler.placement()
            per_batch = 0
            if self.hyperbatch is None and backend != "memory":
                b = self.batch_size + math.ceil(self.batch_size * self.neg_ratio)
                most = {self.src_type: min(self.counts[self.src_type], b)}
                most[self.dst_type] = min(self.counts[self.dst_type], most.get(self.dst_type, 0) + b)
                dims = self.ds.feature_dims()
                rows = {t: 4 * dims[t] for t in self.feature_types}
                per_batch = hetero_hyper.batch_bound(self.sampler.bound(most), rows, self.dst_type, False)
            self._hyper = hetero_hyper.choose(self.hyperbatch, in_memory=backend == "memory",
                                              share=hetero_hyper.share(self.sampler.plan().batch_memory),
                                              per_batch=per_batch, threads=self.threads, prefetch=self.prefetch,
                                              batches=max(1, len(self)))
        return self._hyper

    def __iter__(self) -> Iterator[Any]:
        epoch, n = self.epoch, len(self)
        h = self.hyperbatch_size()[0]
        jobs = [list(range(i, min(n, i + h))) for i in range(0, n, h)]
        ahead = hetero_hyper.jobs_in_flight(h, self.threads, self.prefetch)
        yield from hetero_hyper.run_in_order(jobs, lambda job: self.batches(epoch, job), threads=self.threads,
                                             ahead=ahead, name="ringgnn-hlink")


# --- held-out splits --------------------------------------------------------------------------


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


def decode(decoder: Any, zs: np.ndarray, src_ids: np.ndarray, zd: np.ndarray, dst_ids: np.ndarray, pairs: np.ndarray,
           negs: np.ndarray, chunk: int = 1 << 14) -> Tuple[np.ndarray, np.ndarray]:
    """Scores of ``pairs`` and of ``(src, negs[i])`` from the rows ``zs`` of the sorted ids
    ``src_ids`` (type ``S``) and ``zd`` of ``dst_ids`` (type ``D``), by ``decoder`` (a
    ``DenseDecoder`` or the torch module: its weights, in numpy)."""
    from .infer_dense import dense_decoder

    decoder = dense_decoder(decoder)
    n, k = pairs.shape[1], negs.shape[1]
    pos, neg = np.empty(n, np.float32), np.empty((n, k), np.float32)
    ts = np.ascontiguousarray(zs, dtype=np.float32)
    td = np.ascontiguousarray(zd, dtype=np.float32)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        s = ts[np.searchsorted(src_ids, pairs[0, a:b])]
        pos[a:b] = decoder(s, td[np.searchsorted(dst_ids, pairs[1, a:b])])
        neg[a:b] = decoder(s[:, None], td[np.searchsorted(dst_ids, np.asarray(negs[a:b]))])
    return pos, neg


def split_scores(pos: np.ndarray, neg: np.ndarray) -> Dict[str, Any]:
    """``{"auc", "mrr", "hits"}`` (hits keyed by K as strings: JSON keys), NaN when empty."""
    from . import metrics

    if not len(pos):
        return dict(auc=float("nan"), mrr=float("nan"), hits={})
    s = metrics.link_scores(pos, neg)
    return dict(auc=s["auc"], mrr=s["mrr"], hits={str(k): v for k, v in s["hits"].items()})


def sampled_rows(tower: Any, loader: HeteroLoader, target: str, device: Any, rows: int) -> np.ndarray:
    """``tower``'s rows of ``loader``'s seeds (sorted ids, unshuffled, epoch 0: a fixed sample)."""
    import torch

    from .hetero_models import hetero_batch_to_dicts

    tower.eval()
    loader.set_epoch(0)
    out: List[np.ndarray] = []
    with torch.no_grad():
        for batch in loader:
            bs = batch[target].batch_size
            out.append(tower(*hetero_batch_to_dicts(batch, device))[:bs].cpu().numpy())
    z = np.concatenate(out) if out else np.zeros((0, 1), np.float32)
    if len(z) != rows:
        raise RuntimeError(f"sampled {len(z)} embeddings for {rows} nodes")
    return z


def exact_rows(ds: Any, tower: Any, node_type: str, ids: np.ndarray, **opts: Any) -> np.ndarray:
    """``tower``'s exact rows (layer-wise, full neighborhoods) of the sorted ``ids`` of
    ``node_type`` (``tower``: a ``HeteroModel`` or its ``HeteroDense``; ``opts``:
    :class:`ringgnn.hetero_infer.HeteroLayerwise`'s)."""
    from .hetero_dense import dense_of
    from .hetero_infer import HeteroLayerwise

    tower = dense_of(tower)
    out = np.zeros((len(ids), tower.out_dim), np.float32)
    wanted = np.zeros(ds.num_nodes_dict[node_type], dtype=bool)
    wanted[ids] = True

    def emit(first: int, rows: np.ndarray) -> None:
        a, b = np.searchsorted(ids, [first, first + len(rows)])
        out[a:b] = rows[ids[a:b] - first]

    HeteroLayerwise(ds, tower, **opts).run(tower.layers, node_type, emit, wanted=wanted)
    return out


# --- training ---------------------------------------------------------------------------------


def train_hetero_link(
    dataset: Any,
    *,
    relation: Optional[str],
    model: str = "sage",
    decoder: Optional[str] = None,
    neg_ratio: Optional[float] = None,
    fanouts: Any = (10, 5),
    batch_size: int = 512,
    epochs: int = 5,
    hidden: int = 64,
    layers: int = 2,
    lr: float = 0.005,
    dropout: float = 0.3,
    embed_dim: Optional[int] = None,
    memory: Any = None,
    cache: Any = None,
    backend: str = "auto",
    direct: bool = False,
    threads: Optional[int] = None,
    seed: int = 0,
    out: Optional[str] = None,
    resume: bool = False,
    overwrite: bool = False,
    quiet: bool = False,
    log: Callable[[str], None] = print,
    device: str = "cpu",
    exact: bool = True,
    hyperbatch: Any = "auto",
) -> Dict[str, Any]:
    """Train link prediction on ``relation`` (``S:R:D``) of a heterogeneous dataset; returns what
    ``RUN_DIR/metrics.json`` holds (the keys of a homogeneous ``--task link`` run:
    ``best_val_auc``, ``val_mrr``, ``val_hits``, ``test_auc``, ``test_mrr``, ``test_hits``,
    ``best_epoch``, per-epoch rows, ``layerwise``)."""
    import torch

    ds = open_hetero(dataset, "train --task link")
    relation = _check_relation(ds, relation)
    model = _options.choice(model, HETERO_MODELS, "--model")
    decoder = _options.choice("dot" if decoder is None else decoder, DECODERS, "--decoder")
    neg_ratio = 1.0 if neg_ratio is None else _options.negative_ratio(neg_ratio)
    lr, dropout = _options.learning_rate(lr), _options.dropout(dropout)
    fan = relation_fanouts(ds, fanouts)
    epochs, hidden, layers = (_options.count(v, k, 1) for k, v in (("epochs", epochs), ("hidden", hidden),
                                                                   ("layers", layers)))
    if len(next(iter(fan.values()))) != layers:
        raise InputError(f"--fanouts has {len(next(iter(fan.values())))} hops but --layers is {layers}; give one "
                         "fanout per layer")
    if embed_dim is not None:
        embed_dim = _options.count(embed_dim, "--embed-dim", 1)
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: PyTorch sees no CUDA device here; use --device cpu")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise InputError("--task link on a heterogeneous dataset runs on one process; torchrun is not supported yet")
    s_type, _, d_type = parse_edge_type(relation)
    for t in {s_type, d_type}:
        if not any(et[2] == t for et in ds.edge_types):
            raise InputError(f"--relation {relation}: no relation enters node type '{t}', so its nodes get no "
                             "messages; build the dataset with --add-reverse (add_reverse=True)")
    out = out or os.path.join("runs", os.path.basename(os.path.normpath(ds.path)))
    cfg = link_config(ds, relation, model, hidden, layers, embed_dim, dropout, decoder)
    run_args = dict(task="link", model=model, decoder=decoder, fanouts=fan, batch_size=batch_size, epochs=epochs,
                    hidden=hidden, layers=layers, lr=lr, dropout=dropout, neg_ratio=neg_ratio, neg_weight="uniform",
                    memory=memory, cache=_options.size(cache, "--cache"), device=device, seed=seed, world_size=1,
                    relation=relation, embed_dim=embed_dim, hetero_link=cfg)
    if resume and overwrite:
        raise InputError("--resume continues the run in RUN_DIR and --overwrite starts it over: give one of them")
    resumed = open_run(out, run_args, resume, overwrite)
    was = resumed["args"].get("hetero_link") or {} if resumed is not None else None
    if was is not None and was != cfg:
        raise InputError(f"--resume: {os.path.join(out, LAST)} holds a run of another model, relation or dataset "
                         f"({config_mismatch(was, cfg)}); resume on the dataset it was trained on with its options, "
                         "or use another --out")
    dev = torch.device(device)
    torch.manual_seed(seed)
    net = build_link_model(cfg).to(dev)
    held = {s: HeldOut(ds, relation, s) for s in EVAL_SPLITS}
    train_pairs = ds.relation(relation).manifest["edge_splits"]["train"]["edges"]
    most = min(ds.num_nodes, 2 * (batch_size + math.ceil(batch_size * neg_ratio)))
    plan = plan_hetero(ds, fan, target=d_type, batch_size=most, seeds=train_pairs, memory=_options.size(memory, "--memory"),
                       backend=backend, feature_backend="auto", cache=run_args["cache"])
    sampler = HeteroNeighborSampler(ds, fan, backend=backend, direct=direct, seed=seed, memory=memory, plan=plan)
    common = dict(batch_size=batch_size, seed=seed, threads=threads, direct=direct, sampler=sampler)
    side_types = {"src": s_type} if s_type == d_type else {"src": s_type, "dst": d_type}
    loaders: Dict[str, HeteroLoader] = {}
    features = None
    for split in EVAL_SPLITS:
        h = held[split]
        for side, t in side_types.items():
            ids = h.src_nodes if side == "src" and s_type != d_type else \
                h.dst_nodes if s_type != d_type else np.union1d(h.src_nodes, h.dst_nodes)
            loaders[f"{split}.{side}"] = HeteroLoader(ds, fan, t, seeds=ids, shuffle=False, features=features, **common)
            features = loaders[f"{split}.{side}"].features  # one set of readers and one cache
    batches = HeteroLinkBatches(ds, relation, sampler, features, batch_size=batch_size, neg_ratio=neg_ratio,
                                seed=seed, threads=threads, hyperbatch=hyperbatch)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    start, history = restore(net, opt, resumed, out)
    with run_directory(out):  # a run that fails before its first checkpoint leaves none
        with os_errors("creating the run directory", out):
            os.makedirs(out, exist_ok=True)
        log(f"training {model} link prediction on {relation} of {ds.path} ({decoder} decoder, {neg_ratio:g} "
            f"negatives per positive): {train_pairs:,} training pairs, {len(batches)} batches of {batch_size} per "
            f"epoch, sampling with {sampler.resolved_backend()}, hyperbatch {batches.hyperbatch_size()[1]}, device "
            f"{device} -> {out}")
        metrics = _metrics(ds, run_args, history)
        for epoch in range(start, epochs):
            t0 = time.perf_counter()
            loss_sum, count = _train_epoch(net, opt, batches, epoch, dev, quiet)
            t1 = time.perf_counter()
            scores = _sampled_scores(net, held, loaders, side_types, dev)
            row = dict(epoch=epoch, loss=loss_sum / max(count, 1), **scores, seconds=time.perf_counter() - t0,
                       train_seconds=t1 - t0, eval_seconds=time.perf_counter() - t1)
            history.append(row)
            log(f"epoch {epoch}: loss {row['loss']:.4f}, " + _describe(scores) + f", {row['seconds']:.2f} s")
            metrics = _metrics(ds, run_args, history)
            state = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=epoch, args=run_args,
                         metrics=metrics, rng=torch.get_rng_state())
            if metrics["best_epoch"] == epoch:
                save(state, os.path.join(out, "best.pt"))
            save(state, os.path.join(out, "last.pt"))
            write_json(metrics, os.path.join(out, "metrics.json"))
    if metrics["best_epoch"] is not None and exact:
        t0 = time.perf_counter()
        best = torch.load(os.path.join(out, "best.pt"), map_location="cpu", weights_only=True)
        final = build_link_model(cfg)
        final.load_state_dict(best["model"])
        scores = layerwise_scores(ds, final, held, memory=memory, backend=backend, direct=direct, quiet=quiet,
                                  work_dir=out)
        metrics["layerwise"] = dict(epoch=metrics["best_epoch"], **scores, seconds=time.perf_counter() - t0)
        log(f"layer-wise (exact) evaluation of epoch {metrics['best_epoch']}: {_describe(scores)} "
            f"({metrics['layerwise']['seconds']:.1f} s)")
    write_json(metrics, os.path.join(out, "metrics.json"))
    if metrics["best_epoch"] is not None:
        log(f"best val auc {metrics['best_val_auc']:.4f} at epoch {metrics['best_epoch']}; "
            + _describe({k: metrics[k] for k in ("test_auc", "test_mrr")}, ("test",))
            + f"; {os.path.join(out, 'metrics.json')}")
    return metrics


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


def _train_epoch(net: Any, opt: Any, batches: HeteroLinkBatches, epoch: int, device: Any,
                 quiet: bool) -> Tuple[float, int]:
    import torch

    from .hetero_models import hetero_batch_to_dicts

    batches.set_epoch(epoch)
    net.train()
    loss_sum, count = 0.0, 0
    et = batches.edge_type
    with progress.bar(len(batches), f"epoch {epoch}", "batch", disable=quiet, leave=False) as bar:
        for batch in batches:
            eli = batch[et].edge_label_index.to(device)
            logits = net(*hetero_batch_to_dicts(batch, device), eli[0], eli[1])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch[et].edge_label.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss.detach()) * eli.shape[1]
            count += int(eli.shape[1])
            bar.update(1)
    return loss_sum, count


def _sampled_scores(net: Any, held: Mapping[str, HeldOut], loaders: Mapping[str, HeteroLoader],
                    side_types: Mapping[str, str], device: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for split, h in held.items():
        if "dst" in side_types:
            zs = sampled_rows(net.tower("src"), loaders[f"{split}.src"], side_types["src"], device, len(h.src_nodes))
            zd = sampled_rows(net.tower("dst"), loaders[f"{split}.dst"], side_types["dst"], device, len(h.dst_nodes))
            sid, did = h.src_nodes, h.dst_nodes
        else:
            ids = np.union1d(h.src_nodes, h.dst_nodes)
            zs = zd = sampled_rows(net.tower("src"), loaders[f"{split}.src"], side_types["src"], device, len(ids))
            sid = did = ids
        pos, neg = decode(net.decoder, zs, sid, zd, did, h.pairs, h.negs)  # its weights copied to the host
        out.update(_keys(split, split_scores(pos, neg)))
    return out


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
        pos, neg = decode(net.decoder, zs, src_ids, zd, dst_ids, h.pairs, h.negs)
        out.update(_keys(split, split_scores(pos, neg)))
    return out


def _keys(split: str, s: Mapping[str, Any]) -> Dict[str, Any]:
    return {f"{split}_auc": s["auc"], f"{split}_mrr": s["mrr"], f"{split}_hits": s["hits"]}


def _describe(scores: Mapping[str, Any], splits=EVAL_SPLITS) -> str:
    return ", ".join(f"{s} auc {scores[f'{s}_auc']:.4f} mrr {scores[f'{s}_mrr']:.4f}" for s in splits)


def _metrics(ds: Any, run_args: Dict[str, Any], history: List[Dict[str, Any]]) -> Dict[str, Any]:
    best = max(history, key=lambda h: (h["val_auc"], -h["epoch"])) if history else None

    def at(k: str) -> Any:
        return None if best is None else best[k]

    return {
        "dataset": os.path.abspath(ds.path),
        "heterogeneous": True,
        "task": "link",
        "relation": run_args["relation"],
        "best_epoch": at("epoch"),
        "best_val_auc": at("val_auc"),
        "val_mrr": at("val_mrr"),
        "val_hits": at("val_hits"),
        "test_auc": at("test_auc"),
        "test_mrr": at("test_mrr"),
        "test_hits": at("test_hits"),
        "world_size": 1,
        "epochs": list(history),
        "args": {k: v for k, v in run_args.items() if k != "hetero_link"},
        "layerwise": None,
    }


# --- using a run ------------------------------------------------------------------------------


def is_link_run(read: Tuple[str, Mapping[str, Any]]) -> bool:
    """Whether a checkpoint (``ringgnn.checkpoints.read_checkpoint``'s answer) is of a
    heterogeneous link run (``args["hetero_link"]``; ``checkpoints.is_hetero_link_run``)."""
    from .checkpoints import is_hetero_link_run

    return is_hetero_link_run(read)  # type: ignore[arg-type]


def _pairs_of(ds: Any, relation: str, edges: Any) -> Tuple[np.ndarray, Optional[str]]:
    """(pairs (2, n), split name or None) of ``--edges``: an edge split of ``relation``, a
    ``.npy`` file or an array of (SRC id, DST id) pairs, (2, n) or (n, 2)."""
    rel = ds.relation(relation)
    what = "--edges"
    if isinstance(edges, (str, os.PathLike)):
        spec = os.fspath(edges)
        if spec in rel.edge_split_names:
            return rel.edge_split(spec), spec
        if not spec.endswith(".npy"):
            raise InputError(f"--edges '{spec}': not an edge split of relation {relation} (it has: "
                             f"{', '.join(rel.edge_split_names)}) nor a .npy file")
        with os_errors("reading the pairs", spec):
            try:
                edges = np.load(spec, allow_pickle=False)
            except ValueError as e:
                raise InputError(f"--edges {spec}: not a .npy array of pairs ({e})") from None
        what = f"--edges {spec}"
    a = np.asarray(edges)
    if a.ndim != 2 or 2 not in a.shape or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InputError(f"{what}: pairs need integer ids of shape (2, n) or (n, 2), got {a.dtype} {a.shape}")
    a = np.ascontiguousarray(a if a.shape[0] == 2 else a.T, dtype=np.int64)
    s, _, d = parse_edge_type(relation)
    for row, t in ((0, s), (1, d)):
        n = ds.num_nodes_dict[t]
        bad = np.flatnonzero((a[row] < 0) | (a[row] >= n))
        if bad.size:
            raise InputError(f"{what}: pair {bad[0]} has {'source' if row == 0 else 'destination'} {a[row, bad[0]]}, "
                             f"but node type '{t}' has {n:,} nodes")
    return a, None


def predict_link_edges(run_dir: str, edges: Any, *, dataset: Any = None, out: Optional[str] = None,
                       probabilities: bool = False, memory: Any = None, backend: str = "auto", direct: bool = False,
                       quiet: bool = True, read: Optional[Tuple[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """Exact scores of ``edges`` (``val``/``test``: the split's pairs and stored negatives, with
    the metrics; or given pairs) by the heterogeneous link run ``run_dir``; the layout and the
    summary of :func:`ringgnn.scoring.predict_edges`. Runs without PyTorch: the checkpoint is
    read as numpy arrays (``read``: so read, ``read_checkpoint(..., arrays=True)``), the towers'
    dense parts are ``ringgnn.hetero_dense``'s and the decoder ``infer_dense``'s."""
    from .checkpoints import read_checkpoint
    from .hetero_dense import HeteroDense
    from .infer_dense import decoder_from_state
    from .scoring import deliver_scores

    if out is not None and not os.fspath(out).endswith(".npy"):
        raise InputError(f"--out {out}: give a .npy path")
    path, state = read if read is not None else read_checkpoint(run_dir, "RUN_DIR", arrays=True)
    cfg = state["args"]["hetero_link"]
    ds = open_hetero(dataset if dataset is not None else state["metrics"]["dataset"], "predict --edges")
    relation = ds.check_relation(cfg["relation"])
    fits = f"{ds.path}; give the dataset it was trained on"
    model = state.get("model") or {}
    towers = {side: HeteroDense.from_state(cfg[side], model, path, fits, f"encoders.{side}.")
              for side in ("src", "dst") if cfg.get(side) is not None}
    decoder = decoder_from_state(cfg["decoder"], model, int(cfg["src"]["hidden"]), path, fits)
    unexpected = [k for k in model if not k.startswith(("decoder.", *(f"encoders.{t}." for t in towers)))]
    if unexpected:
        raise InputError(f"{path} does not fit the dataset ({fits}): unexpected {', '.join(unexpected)}")
    pairs, split = _pairs_of(ds, relation, edges)
    negs = None
    if split is not None and ds.relation(relation).manifest["edge_splits"][split]["negatives"]:
        negs = ds.relation(relation).edge_negatives(split)
    s_type, _, d_type = parse_edge_type(relation)
    t0 = time.perf_counter()
    src_ids = np.unique(pairs[0])
    dst_ids = np.unique(pairs[1] if negs is None else np.concatenate([pairs[1], negs.ravel()]))
    if s_type == d_type:
        src_ids = dst_ids = np.union1d(src_ids, dst_ids)
    work_dir = os.path.dirname(os.path.abspath(out)) if out is not None else os.path.abspath(run_dir)
    opts = dict(memory=_options.size(memory, "--memory"), backend=backend, direct=direct, quiet=quiet,
                work_dir=work_dir)
    zs = exact_rows(ds, towers["src"], s_type, src_ids, **opts)
    zd = zs if s_type == d_type else exact_rows(ds, towers.get("dst", towers["src"]), d_type, dst_ids, **opts)
    pos, neg = decode(decoder, zs, src_ids, zd, dst_ids, pairs,
                      negs if negs is not None else np.zeros((pairs.shape[1], 0), np.int64))
    table = pos if negs is None else np.concatenate([pos[:, None], neg], axis=1)
    if probabilities:
        table = (1.0 / (1.0 + np.exp(-table.astype(np.float64)))).astype(np.float32)
    summary: Dict[str, Any] = dict(
        checkpoint=path, dataset=os.path.abspath(ds.path), relation=relation, edges=split or "pairs",
        pairs=int(pairs.shape[1]), negatives=0 if negs is None else int(negs.shape[1]),
        output="probabilities" if probabilities else "scores", shape=list(table.shape),
        endpoints=int(len(src_ids) + (0 if s_type == d_type else len(dst_ids))))
    if negs is not None and len(pos):
        summary["metrics"] = split_scores(pos, neg)
    deliver_scores(summary, table, out, t0)
    return summary
