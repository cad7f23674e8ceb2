"""``ringgnn predict``, ``embed`` and ``report``: use a trained run. On the CPU none of them
imports PyTorch (checkpoints are read as numpy arrays)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, Dict, List

import numpy as np

from .. import _signals
from .._core import InputError
from .._files import os_errors
from .._options import BACKENDS, HIDDEN_DTYPES, size_arg, time_arg
from .._threads import passive_waits
from ..data.dataset import Dataset
from ..data.schema import HOMOGENEOUS_TYPE
from ..inference.attach import attach_embeddings
from ..inference.hetero import infer_hetero
from ..inference.plan import check_runtime
from ..inference.run import infer
from ..inference.scoring import predict_edges, predict_link_edges
from ..models.checkpoints import is_hetero_link_run, is_hetero_run, read_checkpoint

#: The edge splits that hold stored negatives: ``predict --edges`` prints their metrics.
HELD_OUT = ("val", "test")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a `ringgnn train` run directory (best.pt, else last.pt)")
    p.add_argument("--dataset", metavar="DATASET", default=None, help="the dataset (default: the one the run used)")
    p.add_argument("--nodes", default=None,
                   help="train, val, test, all (default) or a .npy file of node ids; rows come in that order")
    p.add_argument("--out", metavar="FILE.npy", help="where to write the array (.npy; required, except with "
                   "--edges val/test, which print the metrics)")
    p.add_argument("--memory", type=size_arg, default=None, metavar="SIZE",
                   help="budget of the process (default: what it holds plus 1 GiB for the blocks)")
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="how rows are read (default auto)")
    p.add_argument("--direct", action="store_true", help="O_DIRECT reads: bypass the page cache")
    p.add_argument("--keep-layers", action="store_true",
                   help="keep the intermediate layers' outputs (layerK.f32, feature-file layout) beside --out")
    p.add_argument("--hidden-dtype", choices=HIDDEN_DTYPES, default=None,
                   help="how hidden layers' rows are stored between layers: bf16 (default; heterogeneous runs: "
                   "f32), f16 or f32; outputs are float32")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="where the dense parts run: cpu (default) or cuda (homogeneous runs, not with --edges)")
    p.add_argument("--at", type=time_arg, default=None, metavar="T",
                   help="the graph as of time T (in the unit of the dataset's times): only edges at or before T, "
                   "from nodes not newer than T (default: every edge)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print a JSON summary")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "predict", help="exact predictions of a trained model for every node, or a link model's pair scores "
        "(layer-wise, out of core)",
        description="Run the model of a `ringgnn train` run over full neighborhoods, layer by layer, out of "
        "core, and write each node's predicted class (or class probabilities) to a .npy file; with --nodes a "
        "split, print the accuracy on it. A link run scores pairs instead: give --edges.",
    )
    _common(p)
    p.add_argument("--edges", metavar="PAIRS.npy|SPLIT", default=None,
                   help="a link run's pairs to score: a .npy of node-id pairs ((2, n) or (n, 2); writes (n,) "
                   "scores), or val or test (prints AUC, MRR and Hits@K against the stored negatives; --out gets "
                   "(n, 1 + K)). Scores are the decoder's logits (float32)")
    p.add_argument("--probabilities", action="store_true",
                   help="class probabilities (f32 [nodes, classes]); with --edges, sigmoid of the scores")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser(
        "embed", help="node embeddings of a trained model (layer-wise, out of core)",
        description="Write each node's output of one layer of the model (activated) to a .npy file: by default "
        "a node run's last hidden layer, a link run's last layer.",
    )
    _common(p)
    p.add_argument("--layer", type=int, default=None, metavar="K",
                   help="layer 1..L (default: L-1 for a node run, L for a link run); a heterogeneous run also has "
                   "0, the input rows, and defaults to the last hidden layer that computes --type")
    p.add_argument("--type", default=None, metavar="TYPE",
                   help="heterogeneous runs: the node type whose rows to write (default: the run's target; a link "
                   "run on S:R:D: S or D, needed when they differ)")
    p.add_argument("--dtype", choices=["f32", "f16"], default="f32", help="stored type (default f32)")
    p.add_argument("--attach", metavar="DS", default=None,
                   help="instead of --out: write every node's embeddings (of --type) as the features of a new "
                   "dataset --name beside DS, a hard-linked copy of DS")
    p.add_argument("--name", metavar="NAME", default=None, help="with --attach: the new dataset's directory name")
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("report", help="summary of a training run (metrics.json)",
                       description="Print the summary of a `ringgnn train` run: options, per-epoch loss, accuracies "
                       "and stage times, the best epoch, the layer-wise evaluation, the plots written.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_report)


def _run(args: argparse.Namespace, output: str, **kw: Any) -> Dict[str, Any]:
    if args.out is None:
        raise InputError("--out: give the .npy file to write")
    if not args.out.endswith(".npy"):
        raise InputError(f"--out {args.out}: give a .npy path")
    check_runtime(args.memory, torch=args.device == "cuda")
    read = read_checkpoint(args.run_dir, "RUN_DIR", arrays=True)
    hetero = is_hetero_run(read) or is_hetero_link_run(read)
    node_type = kw.pop("node_type", None)
    if node_type is not None and not hetero:
        raise InputError(f"--type {node_type}: names a node type of a heterogeneous run; {read[0]} is a homogeneous "
                         "run: leave --type out")
    if hetero and args.device not in (None, "cpu"):
        raise InputError(f"--device {args.device}: a heterogeneous run's inference runs on the CPU; leave --device out")
    # SIGTERM stops the command as Ctrl-C does: the temporary files are removed on the way out.
    with _signals.handling(_terminated, signal.SIGTERM):
        if hetero:
            return infer_hetero(args.run_dir, args.dataset, node_type=node_type, output=output, nodes=args.nodes,
                                out=args.out, memory=args.memory, backend=args.backend, direct=args.direct,
                                keep=args.keep_layers, quiet=args.quiet or args.json, read=read,
                                hidden_dtype=args.hidden_dtype, at=args.at, **kw)
        return infer(args.run_dir, dataset=args.dataset, nodes=args.nodes, output=output, out=args.out,
                     memory=args.memory, backend=args.backend, direct=args.direct, keep=args.keep_layers,
                     quiet=args.quiet or args.json, hidden_dtype=args.hidden_dtype, device=args.device, at=args.at,
                     **kw)


def _score_edges(args: argparse.Namespace, read: Any) -> Dict[str, Any]:
    """``predict --edges``: a link run's scores of pairs; ``read`` is its checkpoint."""
    if args.nodes is not None:
        raise InputError("--nodes selects nodes to predict; with --edges the pairs name the nodes: drop --nodes")
    if args.out is None and args.edges not in HELD_OUT:
        raise InputError(f"--out: give the .npy file to write the scores of --edges {args.edges} to (only the "
                         f"held-out splits, {' and '.join(HELD_OUT)}, go without: they print their metrics)")
    common = dict(dataset=args.dataset, out=args.out, probabilities=args.probabilities, memory=args.memory,
                  backend=args.backend, direct=args.direct, quiet=args.quiet or args.json, at=args.at)
    if args.device not in (None, "cpu"):
        raise InputError(f"--device {args.device}: scoring pairs (--edges) runs on the CPU; leave --device out")
    with _signals.handling(_terminated, signal.SIGTERM):
        if is_hetero_link_run(read):
            s = predict_link_edges(args.run_dir, args.edges, read=read, hidden_dtype=args.hidden_dtype, **common)
        else:
            s = predict_edges(args.run_dir, args.edges, keep=args.keep_layers, hidden_dtype=args.hidden_dtype,
                              **common)
    s.pop("scores", None)
    return s


def _terminated(signum: int, _frame: Any) -> None:
    sys.exit(128 + signum)


def _layers_line(s: Dict[str, Any]) -> str:
    """Each computed layer's time, the bytes read and written and the blocks."""
    parts = [f"layer {d['layer']}{' ' + d['type'] if 'type' in d else ''} {d['seconds']:.1f} s" for d in s["layers"]]
    mib = 1 << 20
    return (f"{', '.join(parts) + '; ' if parts else ''}read {s['bytes_read_neighbors'] / mib:,.1f} "
            f"MiB of neighbor lists and {s['bytes_read_rows'] / mib:,.1f} MiB of rows, wrote "
            f"{s['bytes_written'] / mib:,.1f} MiB of intermediate layers; {_blocks_line(s['plan'])}")


def _blocks_line(plan: Dict[str, Any]) -> str:
    """The grid's sweeps per layer (planned from the budget), else the blocks' edge bound."""
    grid = plan.get("grid")
    if grid:
        return "destination blocks (input sweeps) per layer: " + ", ".join(
            str(g["sweeps"]) + (f" ({g['layer']} {g['type']})" if "type" in g else "") for g in grid["layers"])
    if "block_edges" not in plan:  # sizes given (a heterogeneous run's tests)
        return "blocks and pieces of the sizes given"
    return f"blocks of up to {plan['block_edges']:,} edges"


def cmd_predict(args: argparse.Namespace) -> int:
    passive_waits()  # before PyTorch is imported
    if args.edges is not None:
        check_runtime(args.memory)
        read = read_checkpoint(args.run_dir, "RUN_DIR", arrays=True)
        if is_hetero_run(read) and not is_hetero_link_run(read):
            raise InputError(f"--edges: scoring pairs is not supported yet for heterogeneous runs ({read[0]} "
                             "classifies nodes of one type); leave --edges out to predict its target nodes")
        return _print_scores(args, _score_edges(args, read))
    s = _run(args, "probabilities" if args.probabilities else "predictions")
    typed = s.get("heterogeneous")
    if not typed and args.nodes in ("train", "val", "test"):
        ds = Dataset.open(s["dataset"])
        y = ds.labels[ds.split(args.nodes)] if ds.labels is not None else None
        if y is not None:
            pred = np.load(s["out"], mmap_mode="r")
            pred = pred.argmax(axis=1) if args.probabilities else pred
            labeled = y >= 0
            s["accuracy"] = float((np.asarray(pred)[labeled] == y[labeled]).mean()) if labeled.any() else None
    acc = f"; {args.nodes} accuracy {s['accuracy']:.4f}" if not typed and s.get("accuracy") is not None else ""
    return _print_rows(args, s, "class probabilities" if args.probabilities else "predictions", acc=acc)


def _print_scores(args: argparse.Namespace, s: Dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    what = "probabilities" if args.probabilities else "scores (logits)"
    pairs = f"{s['pairs']:,} {s['edges']} pairs" if s["edges"] != "pairs" else f"{s['pairs']:,} pairs"
    negs = f" and their {s['negatives']} negatives each" if s["negatives"] else ""
    if s.get("shared_negatives"):
        negs = f" and the {s['shared_negatives']:,} negative pairs they share"
    dest = f" -> {s['out']} {tuple(s['shape'])}" if "out" in s else ""
    print(f"{what} of {pairs}{negs}{dest} in {s['seconds']:.1f} s ({s['endpoints']:,} nodes embedded)")
    m = s.get("metrics")
    if m:
        hits = ", ".join(f"Hits@{k} {v:.4f}" for k, v in m["hits"].items())
        print(f"  {s['edges']}: AUC {m['auc']:.4f}, MRR {m['mrr']:.4f}, {hits}")
    if "at" in s:
        print(f"  {_times_line(s)}")
    if "layers" in s:
        print(f"  {_layers_line(s)}")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    passive_waits()  # before PyTorch is imported
    if args.attach is not None or args.name is not None:
        return _attach(args)
    s = _run(args, "embeddings", layer=args.layer, dtype=args.dtype, node_type=args.type)
    return _print_rows(args, s, f"layer {s['layer']} embeddings", shape=f" ({s['dim']} {s['dtype']})")


def _attach(args: argparse.Namespace) -> int:
    """``embed --attach DS --name NAME``: the embeddings as the features of a copy of DS."""
    if args.attach is None or args.name is None:
        raise InputError("--attach DS and --name NAME go together: the embeddings become the features of a new "
                         "dataset NAME beside DS")
    for opt, value in (("--out", args.out), ("--nodes", args.nodes)):
        if value is not None:
            raise InputError(f"{opt}: --attach writes every node's embeddings into a dataset; leave {opt} out")
    check_runtime(args.memory, torch=args.device == "cuda")

    with _signals.handling(_terminated, signal.SIGTERM):
        s = attach_embeddings(args.run_dir, args.attach, args.name, dataset=args.dataset, layer=args.layer,
                              dtype=args.dtype, memory=args.memory, backend=args.backend, direct=args.direct,
                              quiet=args.quiet or args.json, hidden_dtype=args.hidden_dtype, device=args.device,
                              at=args.at, node_type=args.type)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    nodes = f"{s['type']} nodes" if s.get("type", HOMOGENEOUS_TYPE) != HOMOGENEOUS_TYPE else "nodes"
    print(f"layer {s['layer']} embeddings of {s['rows']:,} {nodes} ({s['dim']} {s['dtype']}) -> features of "
          f"{s['dataset']} (a copy of {s['attached_to']}); train on them with `ringgnn train {s['dataset']}`")
    if "at" in s:
        print(f"  {_times_line(s)}")
    print(f"  {_layers_line(s)}")
    return 0


def _print_rows(args: argparse.Namespace, s: Dict[str, Any], what: str, shape: str = "", acc: str = "") -> int:
    """The summary of predict or embed: the rows written, their original ids, the layers."""
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    typed = bool(s.get("heterogeneous"))
    if typed:
        shape = f" ({s['dim']} {s['dtype']})" if s["dim"] is not None else ""
        acc = "".join(f"; {k} accuracy {v:.4f}" for k, v in (s.get("accuracy") or {}).items() if v is not None)
    nodes = f"{s['type']} nodes" if typed and s["type"] != HOMOGENEOUS_TYPE else "nodes"
    print(f"{what} of {s['rows']:,} {nodes}{shape} -> {s['out']} in {s['seconds']:.1f} s{acc}")
    if s.get("node_ids"):
        print(f"  the rows' original {s['type'] if typed else 'node'} ids -> {s['node_ids']}")
    if "at" in s:
        print(f"  {_times_line(s)}")
    print(f"  {_layers_line(s)}")
    return 0


def _times_line(s: Dict[str, Any]) -> str:
    if s["at"] is None:
        return "every edge, whatever its time (the graph as it is now); --at T gives the graph as of time T"
    a = s["as_of"]
    newer = (f"; {a['newer_nodes']:,} nodes newer than {s['at']} are computed from those edges too and send no "
             "messages" if a["newer_nodes"] else "")
    return (f"as of time {s['at']}: {a['edges']:,} of {a['edges_total']:,} edges (at or before {s['at']}, from nodes "
            f"not newer), cut in {a['seconds']:.1f} s{newer}")


def report(run_dir: str) -> Dict[str, Any]:
    """The summary of a run directory (what ``ringgnn report --json`` prints)."""
    path = os.path.join(run_dir, "metrics.json")
    try:
        with os_errors("reading", path), open(path) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: give a `ringgnn train` run directory") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    epochs = m.get("epochs") or []
    plots = [p for p in ("curves.png",) if os.path.exists(os.path.join(run_dir, p))]
    task = (m.get("args") or {}).get("task", "node")
    scores = SCORES.get(task, SCORES["node"])
    best = {k: m.get(k) for k in (("best_val_acc", "test_acc") if task == "node" else
                                   ("best_val_auc", "val_mrr", "val_hits", "test_auc", "test_mrr", "test_hits"))}
    return dict(
        run_dir=os.path.abspath(run_dir), dataset=m.get("dataset"), args=m.get("args", {}), task=task,
        world_size=m.get("world_size", 1), epochs=len(epochs), best_epoch=m.get("best_epoch"),
        **best, layerwise=m.get("layerwise"),
        total_seconds=sum(e.get("seconds", 0.0) for e in epochs),
        history=[{k: e.get(k) for k in ("epoch", "loss", *scores, "seconds", *_STAGES)} for e in epochs],
        plots=plots, tensorboard=os.path.isdir(os.path.join(run_dir, "tensorboard")),
    )


#: The per-epoch scores ``report`` shows, by task.
SCORES = {"node": ("val_acc", "test_acc"), "link": ("val_auc", "val_mrr", "test_auc", "test_mrr")}
#: The stages of an epoch whose seconds ``report`` shows.
_STAGES = ("sample_seconds", "gather_seconds", "train_seconds", "wait_seconds", "eval_seconds")


def _num(v: Any) -> str:
    return "     -" if v is None else f"{v:.4f}"


def _history(r: Dict[str, Any], fmt: Any) -> List[str]:
    """The per-epoch table: loss, the task's scores (by ``fmt``) and each stage's seconds."""
    scores = SCORES["link" if r["task"] == "link" else "node"]
    lines = ["  epoch    loss  " + "  ".join(s.replace("_", " ") for s in scores)
             + "  seconds (sample/gather/train/wait/eval)"]
    for e in r["history"]:
        lines.append(f"  {e['epoch']:>5}  {_num(e['loss'])}" + "".join(" " * (len(s) - 4) + fmt(e[s]) for s in scores)
                     + f"  {e['seconds']:.2f} ({'/'.join(_secs(e[k]) for k in _STAGES)})")
    return lines


def _scores_lines(r: Dict[str, Any]) -> List[str]:
    """The per-epoch table, the best epoch and the layer-wise scores of a node or link run."""
    link = r["task"] == "link"
    fmt = _num if link else _acc
    lines = _history(r, fmt)
    keys = ("val_auc", "test_auc", "test_mrr") if link else ("val_acc", "test_acc")

    def scores(s: Dict[str, Any], best: str) -> str:
        hits = "".join(f", hits@{k} {v:.4f}" for k, v in (s.get("test_hits") or {}).items())
        return ", ".join(f"{k.replace('_', ' ')} {fmt(s.get(best + k if k.startswith('val') else k))}"
                         for k in keys) + hits

    if r["best_epoch"] is not None:
        lines += ["", f"  best epoch {r['best_epoch']}: {scores(r, 'best_')} (sampled neighborhoods)"]
    lw = r["layerwise"]
    if lw:
        lines.append(f"  layer-wise (exact) evaluation of epoch {lw['epoch']}: {scores(lw, '')} "
                     f"({lw['seconds']:.1f} s)")
    return lines


def cmd_report(args: argparse.Namespace) -> int:
    r = report(args.run_dir)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    a = r["args"]
    lines: List[str] = [
        f"run {r['run_dir']}: {a.get('model')} on {r['dataset']}",
        f"  fanouts {_fanouts_text(a.get('fanouts', []))}, batch {a.get('batch_size')}, hidden {a.get('hidden')}, "
        f"layers {a.get('layers')}, lr {a.get('lr')}, dropout {a.get('dropout')}, seed {a.get('seed')}, "
        f"{r['world_size']} process(es)",
        f"  {r['epochs']} epochs in {r['total_seconds']:.1f} s",
        "",
    ]
    if r["task"] == "link":
        lines[1] += f", decoder {a.get('decoder')}, {a.get('neg_ratio')} negatives per positive ({a.get('neg_weight')})"
    lines += _scores_lines(r) + _plots_lines(r)
    print("\n".join(lines))
    return 0


def _fanouts_text(f: Any) -> str:
    if isinstance(f, dict):
        lists = {tuple(v) for v in f.values()}
        if len(lists) == 1:
            return ",".join(map(str, lists.pop())) + " (every relation)"
        return "; ".join(f"{r} {','.join(map(str, v))}" for r, v in f.items())
    return ",".join(map(str, f))


def _secs(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


def _acc(v: Any) -> str:
    return "  -   " if v is None else f"{v:.4f}"


def _plots_lines(r: Dict[str, Any]) -> List[str]:
    lines = []
    if r["plots"]:
        lines.append(f"  plots: {', '.join(os.path.join(r['run_dir'], p) for p in r['plots'])}")
    if r["tensorboard"]:
        lines.append(f"  TensorBoard logs: {os.path.join(r['run_dir'], 'tensorboard')}")
    return lines
