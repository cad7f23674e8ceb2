"""``ringgnn train``: the command line of :func:`ringgnn.training.loop.train`."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from .. import _options
from .._options import BACKENDS, CACHE_POLICIES, count_arg, positive_arg, size_arg
from ..data.dataset import Dataset
from ..training import distributed
from ..training.loop import EVAL_MODES, TASKS, train


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a GNN (GraphSAGE, GCN, GAT) out of core",
        description="Train a GNN with neighbor sampling, graph and features read from disk. Each epoch "
        "prints the train loss, validation and test scores (sampled with the training fanouts) and where the "
        "time went. On a dataset with times every seed is sampled at its time.",
    )
    p.add_argument("dataset", metavar="DATASET",
                   help="a dataset with features, labels and train/val/test splits (--task link: features and an "
                        "edge split, convert --link-split, or --link-split-time on a dataset with times; --task-table: "
                        "features)")
    p.add_argument("--task", choices=TASKS, default="node",
                   help="node: classify nodes (default); link: predict edges, trained on the train edge split "
                        "against sampled negatives, scored by AUC, MRR and Hits@K against val and test's stored "
                        "negatives (at times: each pair sampled just before its time)")
    p.add_argument("--model", default="sage",
                   help="sage (GraphSAGE, default), gcn or gat; on the typed engine (heterogeneous datasets, runs "
                        "at times or on task tables) sage or rgcn (R-GCN)")
    p.add_argument("--target", default=None, metavar="TYPE",
                   help="heterogeneous datasets: the node type to classify (its labels and splits are used)")
    p.add_argument("--relation", default=None, metavar="S:R:D",
                   help="heterogeneous datasets, --task link: the relation whose links to predict (its edge splits "
                        "are used)")
    p.add_argument("--embed-dim", type=positive_arg, default=None, metavar="D",
                   help="heterogeneous datasets: width of the learned embeddings of featureless node types "
                        "(default: --hidden)")
    p.add_argument("--embed-tables", choices=("auto", "memory", "file"), default="auto",
                   help="heterogeneous datasets: where the learned embedding tables live: auto (default: as the "
                        "memory plan decides), memory, or file (RUN_DIR/tables, SparseAdam)")
    p.add_argument("--decoder", default=None, metavar="dot|mlp",
                   help="--task link: how a pair of node embeddings is scored: dot (inner product, default) or "
                        "mlp (a two-layer perceptron on their element-wise product)")
    p.add_argument("--neg-ratio", type=float, default=None, metavar="R",
                   help="--task link: random negative pairs per positive in training (default 1)")
    p.add_argument("--neg-weight", default=None, metavar="uniform|degree",
                   help="--task link: how negatives are drawn: uniform (default) or by degree^0.75")
    p.add_argument("--fanouts", default="10,5", metavar="F1,F2,...",
                   help="neighbors per layer (default 10,5); on a heterogeneous dataset the same for every "
                        "relation, or a JSON object per relation ('{\"S:R:D\": [10, 5], ...}', 0 skips a hop)")
    p.add_argument("--batch-size", type=positive_arg, default=512, metavar="B", help="seeds per batch (default 512)")
    p.add_argument("--epochs", type=positive_arg, default=5, metavar="N", help="epochs in total (default 5)")
    p.add_argument("--hidden", type=positive_arg, default=64, help="hidden width (default 64)")
    p.add_argument("--layers", type=positive_arg, default=2, help="GNN layers = number of fanouts (default 2)")
    p.add_argument("--lr", type=float, default=0.005, help="Adam learning rate (default 0.005)")
    p.add_argument("--dropout", type=float, default=0.3, help="dropout between layers (default 0.3)")
    p.add_argument("--cache", type=size_arg, default=None, metavar="SIZE",
                   help="hot feature rows kept in memory (default: what --memory leaves; 0: none)")
    p.add_argument("--cache-policy", choices=CACHE_POLICIES, default="presample",
                   help="rows to cache: most accessed in look-ahead sampling (default) or highest in-degree "
                        "(refused on the typed engine)")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE",
                   help="budget of the whole process, per rank (default: what it holds plus half the available "
                        "memory, divided among this machine's ranks)")
    p.add_argument("--prefetch", type=positive_arg, default=None, metavar="N",
                   help="gathered batches held ahead of training (default: one per thread, 1 if memory is tight)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="how neighbor lists and feature rows are read (default auto)")
    p.add_argument("--direct", action="store_true", help="io_uring with O_DIRECT: bypass the page cache")
    p.add_argument("--hyperbatch", default="auto", metavar="N|auto",
                   help="batches sampled together when the graph is read from disk (default auto)")
    p.add_argument("--staging-dir", default=None, metavar="DIR",
                   help="where hyperbatches stage feature rows (default: beside the dataset)")
    p.add_argument("--staging-cap", type=size_arg, default=None, metavar="SIZE",
                   help="largest staging file (default: the feature file's size; 0: never stage)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model runs (default cpu; under torchrun each rank takes its local rank's GPU)")
    p.add_argument("--gpu-cache", type=size_arg, default=None, metavar="SIZE",
                   help="with --device cuda: GPU memory for the feature rows the batches touch most (default: "
                        "none; refused on the typed engine)")
    p.add_argument("--seed", type=count_arg, default=0, help="seeds PyTorch and the sampler (default 0)")
    p.add_argument("--threads", type=positive_arg, default=None,
                   help="sampling threads (default: all cores, divided among the ranks of this machine)")
    p.add_argument("--dist-timeout", type=positive_arg, default=int(distributed.DEFAULT_TIMEOUT), metavar="SECONDS",
                   help="under torchrun: how long a rank waits for the others at a collective before it fails "
                        f"(default {int(distributed.DEFAULT_TIMEOUT)})")
    p.add_argument("--out", metavar="RUN_DIR", default=None, help="run directory (default runs/<dataset name>)")
    p.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt with the next epoch")
    p.add_argument("--overwrite", action="store_true", help="start over in a RUN_DIR that already holds a run")
    p.add_argument("--eval", choices=EVAL_MODES, default="auto", dest="eval_mode",
                   help="auto (default): sampled after each epoch, then exact layer-wise inference of the best "
                        "checkpoint; sampled: only the former; layerwise: exact after every epoch too. Runs at times "
                        "or on task tables: auto is sampled, layerwise refused")
    p.add_argument("--seed-time", default=None, metavar="FILE.npy",
                   help="a dataset with times: the time each seed is sampled at, one int64 per node of the target "
                        "type (default: the node times; needed where the nodes have none)")
    p.add_argument("--ignore-time", action="store_true",
                   help="a dataset with times: sample every edge whatever its time, as on a dataset without times "
                        "(warns: a seed's neighborhood may hold its future, a leak)")
    p.add_argument("--task-table", default=None, metavar="train=T1,val=T2[,test=T3]",
                   help="node classification on task tables (Parquet or CSV), one per split (train and val needed), "
                        "in place of the dataset's splits and labels: each row a node of the target type, a time and "
                        "an integer class (on a dataset without times, or with --ignore-time, the time is not read)")
    p.add_argument("--task-node-column", default="node", metavar="COL",
                   help="--task-table: the column of each row's node id (default node)")
    p.add_argument("--task-time-column", default="time", metavar="COL",
                   help="--task-table: the column of each row's time, in the unit of the dataset's times "
                        "(default time)")
    p.add_argument("--task-label-column", default="label", metavar="COL",
                   help="--task-table: the column of each row's class, an integer >= 0 (default label)")
    p.add_argument("--tensorboard", action="store_true",
                   help="log each epoch to RUN_DIR/tensorboard (needs the tensorboard package)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print metrics.json on stdout instead of text")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    # torch_geometric's import-time torch.jit.script: a deprecation a CLI user can do nothing about.
    warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated", category=FutureWarning)
    opts = {k: v for k, v in vars(args).items() if k not in ("command", "func", "dataset", "fanouts", "quiet", "json")}
    log = (lambda s: None) if args.json else _print_line
    ds = Dataset.open(args.dataset)
    fanouts: Any = args.fanouts
    if ds.is_hetero:  # a JSON object of fanouts per relation, or one list for all of them
        text = args.fanouts.strip()
        fanouts = json.loads(text) if text.startswith("{") else _options.fanouts(text)
    m = train(ds, fanouts=fanouts, quiet=args.quiet or args.json, log=log, **opts)
    if args.json and distributed.leader_by_env():
        print(json.dumps(m, indent=2))
    return 0


def _print_line(s: str) -> None:
    """One write per line, so that the lines of ranks sharing a terminal do not interleave."""
    sys.stdout.write(s + "\n")
    sys.stdout.flush()
