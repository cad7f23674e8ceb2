#!/usr/bin/env python3
"""Same-run A/B of two builds of ringgnn: one command run alternately with each build's package.

A build is a directory that holds the ``ringgnn`` package with its built ``_core`` (a checkout's
``python/``); it reaches the command through ``PYTHONPATH``, and a leading ``ringgnn`` in the
command becomes ``python -m ringgnn`` so the console script of an installed copy plays no part.
Each round runs A then B, the next round B then A (neither build always runs on the warmer
machine), optionally under ``memcap [--drop-caches] SIZE --`` (a fresh cgroup per run). Per run:
wall seconds, the figures the command prints (``--figure NAME=REGEX``: the first group of the
last match in its stdout, else its stderr), the peak RSS of its processes (``wait4``) and the
cgroup's line (peak, failcnt or max_events, OOM kills). Printed: a Markdown table of the medians,
their ratio B / A and each run's values, then the same as one JSON line (``--json FILE`` also
writes it there).

In the command, ``{label}``, ``{tree}`` and ``{round}`` are replaced by the run's label, build
directory and round (for per-run output directories).

Usage (root, for memcap):
    python benchmarks/ab.py --a /work/wt/base/python --b python --labels 2e31343,this --rounds 5 \\
        [--memcap 480M] [--drop-caches] [--warmup 1] [--figure epoch_s='"seconds": ([0-9.]+)'] \\
        [--json benchmarks/results/ab.json] -- ringgnn sample DATASET ... --json
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

from _sizes import MEMCAP

MEMCAP_KEYS = ("cap", "peak", "failcnt", "max_events", "oom_kills", "exit")


def command(template: Sequence[str], label: str, tree: str, rnd: int, memcap: Optional[str], drop: bool,
            tool: str = MEMCAP) -> List[str]:
    """The argv of one run: placeholders filled, ``ringgnn`` as ``python -m ringgnn``, under memcap."""
    argv = [a.format(label=label, tree=tree, round=rnd) for a in template]
    if argv and argv[0] == "ringgnn":
        argv = [sys.executable, "-m", "ringgnn"] + argv[1:]
    elif argv and argv[0] in ("python", "python3"):
        argv = [sys.executable] + argv[1:]
    if memcap:
        argv = [tool] + (["--drop-caches"] if drop else []) + [memcap, "--"] + argv
    return argv


def memcap_fields(err: str) -> Dict[str, int]:
    """The numbers of memcap's last ``memcap: cap=... peak=... ...`` line ({} without one)."""
    lines = [ln for ln in err.splitlines() if ln.startswith("memcap:")]
    if not lines:
        return {}
    pairs = (kv.split("=", 1) for kv in lines[-1].split()[1:] if "=" in kv)
    return {k: int(v) for k, v in pairs if k in MEMCAP_KEYS and v.isdigit()}


def figure(pattern: str, out: str, err: str) -> Optional[float]:
    """The first group (or the whole match) of the last match of ``pattern``, stdout before stderr."""
    for text in (out, err):
        found = list(re.finditer(pattern, text))
        if found:
            m = found[-1]
            return float(m.group(1) if m.groups() else m.group(0))
    return None


def run_once(argv: List[str], tree: str, figures: Dict[str, str], cwd: Optional[str]) -> Dict[str, object]:
    rest = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=tree + (os.pathsep + rest if rest else ""))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        so, se = out.read(), err.read()
    rec: Dict[str, object] = dict(rc=p.returncode, wall_s=wall, peak_rss=usage.ru_maxrss * 1024)
    rec.update({k: figure(rx, so, se) for k, rx in figures.items()})
    cg = memcap_fields(se)
    if cg:
        rec["memcap"] = cg
    if p.returncode != 0:
        rec["tail"] = (so[-1500:] + "\n" + se[-1500:]).strip()
    return rec


def summarize(runs: Dict[str, List[Dict[str, object]]], labels: Sequence[str],
              keys: Sequence[str]) -> List[Dict[str, object]]:
    """Per measure: each side's median and values, the ratio B / A of the medians, and the median
    of the rounds' own ratios (a round's A and B ran next to each other, so a slow drift of the
    machine's load cancels in it)."""
    a, b = labels
    rows = []
    for k in keys:
        vals = {s: [r[k] for r in runs[s] if isinstance(r.get(k), (int, float))] for s in labels}
        med = {s: statistics.median(v) if v else None for s, v in vals.items()}
        ratio = med[b] / med[a] if med[a] and med[b] is not None else None
        pairs = [y / x for x, y in zip(vals[a], vals[b]) if x] if len(vals[a]) == len(vals[b]) else []
        rows.append(dict(measure=k, a=med[a], b=med[b], ratio=ratio, paired=statistics.median(pairs) if pairs else None,
                         a_runs=vals[a], b_runs=vals[b]))
    return rows


def _fmt(x: Optional[float], k: str) -> str:
    if x is None:
        return "-"
    if k == "peak_rss" or k.startswith("memcap_peak"):
        return f"{x / 2**20:.0f} MiB"
    if x == int(x) and (abs(x) >= 1e5 or k.startswith("memcap_")):  # counts and bytes
        return f"{int(x):,}"
    return f"{x:.3f}" if isinstance(x, float) else f"{x:,}"


def table(rows: List[Dict[str, object]], labels: Sequence[str], rounds: int) -> str:
    a, b = labels
    lines = [f"| measure | {a} (median of {rounds}) | {b} (median of {rounds}) | {b} / {a} | per round (median) "
             f"| {a} runs | {b} runs |", "|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        k = r["measure"]
        ratio, paired = ("-" if r[x] is None else f"{r[x]:.3f}" for x in ("ratio", "paired"))
        each = [", ".join(_fmt(v, k) for v in r[s]) for s in ("a_runs", "b_runs")]
        lines.append(f"| {k} | {_fmt(r['a'], k)} | {_fmt(r['b'], k)} | {ratio} | {paired} | {each[0]} | {each[1]} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, metavar="TREE", help="build A: a directory holding the ringgnn package")
    ap.add_argument("--b", required=True, metavar="TREE", help="build B")
    ap.add_argument("--labels", default="A,B", help="names of A and B in the table (default A,B)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each build (default 3)")
    ap.add_argument("--warmup", type=int, default=0, help="uncounted rounds first (default 0)")
    ap.add_argument("--memcap", default=None, metavar="SIZE", help="run each under memcap SIZE")
    ap.add_argument("--drop-caches", action="store_true", help="with --memcap: drop the page cache before each run")
    ap.add_argument("--memcap-tool", default=MEMCAP, metavar="PATH", help="memcap (default ../shared/tools/memcap "
                    "beside the checkout)")
    ap.add_argument("--figure", action="append", default=[], metavar="NAME=REGEX",
                    help="a number the command prints, by regex (repeatable)")
    ap.add_argument("--cwd", default=None, help="where the command runs (default: here)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the runs and medians here")
    ap.add_argument("--name", default="", help="a title for the table and the JSON")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = ap.parse_args(argv)
    template = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not template:
        ap.error("give the command after --")
    if args.drop_caches and not args.memcap:
        ap.error("--drop-caches needs --memcap")
    labels = args.labels.split(",")
    if len(labels) != 2 or labels[0] == labels[1]:
        ap.error("--labels: two different names")
    figures = dict(f.split("=", 1) if "=" in f else (f, f) for f in args.figure)
    trees = dict(zip(labels, (os.path.abspath(args.a), os.path.abspath(args.b))))
    runs: Dict[str, List[Dict[str, object]]] = {s: [] for s in labels}
    for rnd in range(args.warmup + args.rounds):
        for side in (labels if rnd % 2 == 0 else labels[::-1]):
            argv_ = command(template, side, trees[side], rnd, args.memcap, args.drop_caches, args.memcap_tool)
            load = os.getloadavg()[0]  # when the run starts: how busy the machine was
            rec = run_once(argv_, trees[side], figures, args.cwd)
            rec.update(round=rnd, load=load, warmup=rnd < args.warmup)
            shown = {k: v for k, v in rec.items() if k != "tail"}
            print(json.dumps(dict(side=side, **shown)), file=sys.stderr, flush=True)
            if rec["rc"] != 0:
                print(f"{side} failed ({rec['rc']}): {shlex.join(argv_)}\n{rec.get('tail', '')}", file=sys.stderr)
                return 1
            for k, v in rec.pop("memcap", {}).items():
                rec[f"memcap_{k}"] = v
            if rnd >= args.warmup:
                runs[side].append(rec)
    keys = ["wall_s", *figures, "peak_rss"] + [f"memcap_{k}" for k in ("peak", "failcnt", "max_events", "oom_kills")
                                                if any(f"memcap_{k}" in r for rs in runs.values() for r in rs)]
    rows = summarize(runs, labels, keys)
    cmd = shlex.join(template)
    cap = f"memcap {'--drop-caches ' if args.drop_caches else ''}{args.memcap} -- " if args.memcap else ""
    print(f"### {args.name or 'A/B'}\n\n`{cap}{cmd}`; A = {trees[labels[0]]}, B = {trees[labels[1]]}; "
          f"alternating, {args.rounds} rounds" + (f" after {args.warmup} warm-up" if args.warmup else "") + "\n")
    print(table(rows, labels, args.rounds))
    doc = dict(name=args.name, command=template, memcap=args.memcap, drop_caches=args.drop_caches, labels=labels,
               trees=trees, rounds=args.rounds, warmup=args.warmup, figures=figures, summary=rows, runs=runs)
    print(json.dumps(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
