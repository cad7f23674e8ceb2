#!/usr/bin/env python3
"""Issue 20's memory plan, measured as a same-run A/B: every configuration of a case runs with
this build's `ringgnn` (the interpreter running this script, `python -m ringgnn`) and, with
`--baseline-python PATH`, with another build's (a virtualenv holding it), interleaved in one run
(the order of the builds and budgets alternates between repetitions, so that neither always
runs on a warmer machine), each run under `memcap CAP` with `--memory CAP`.

Cases (issue 20, docs/benchmarks.md):
  1  a 200k-node SBM (`ringgnn generate sbm DS --nodes 200000 --classes 8 --avg-degree 20
     --feature-dim 12`, made with this build if missing), `ringgnn sample DS --epochs 2
     --fanouts 20,15,10 --batch-size 1024 --json` under 300M and 600M. Target: the 300M epoch
     within 1.3x of the 600M one.
  6  R-MAT 21 with its seeds (`--seeds FILE.npy --epochs 1 --direct --hyperbatch auto`) under
     160M, the page cache dropped before each run (`memcap --drop-caches`).

Per configuration: the median epoch time over every epoch of every repetition (and the range),
bytes read, hyperbatch size, the largest peak memcap saw (page cache included) and the largest
resident set, failcnt and exit status; then the ratios: 300M / 600M within each build, and this
build / baseline at each budget. The plan each build makes (`NeighborSampler.plan()`, in a
separate process with the same options) is printed once per configuration.

Usage (root, for memcap):
    python benchmarks/plan_bench.py [--cases 1,6] [--baseline-python /work/venv-base/bin/python]
        [--repeat 3] [--sbm /tmp/c1/sbm] [--rmat21 /var/tmp/rb/rmat21 --seeds21 FILE.npy]
        [--json OUT.json]
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _sizes import MEMCAP

# Runs a command and prints the largest resident set of its process tree (memcap's bash, then
# the Python that samples) to stderr: outside memcap's cgroup, so that it adds nothing to its peak.
RSS = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
       "print('maxrss:', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)")

# The plan a build makes for a configuration, in a process of its own (its reserve: what that
# process holds, as `ringgnn sample` has).
PLAN = r'''
import json, sys
import ringgnn
d, fanouts, memory, batch, hyper, direct = sys.argv[1:7]
kw = dict(memory=memory, batch_size=int(batch), direct=direct == "1")
if hyper != "-":
    kw["hyperbatch"] = hyper
s = ringgnn.NeighborSampler(ringgnn.Dataset.open(d), [int(f) for f in fanouts.split(",")], **kw)
p = dict(s.plan())
print(json.dumps({k: p.get(k) for k in ("text", "why", "cost_seconds", "prefetch", "window", "workers")}))
'''


def cases(args):
    c = {
        "1": dict(title="case 1: 200k-node SBM, fanouts 20,15,10, batch 1024, 2 epochs", data=args.sbm,
                  argv=["--epochs", "2", "--fanouts", "20,15,10", "--batch-size", "1024"],
                  memories=["300M", "600M"], drop=False, hyper="-", direct=False),
        "6": dict(title="case 6: R-MAT 21, its seeds, O_DIRECT, hyperbatch auto, 1 epoch", data=args.rmat21,
                  argv=["--seeds", args.seeds21, "--epochs", "1", "--direct", "--hyperbatch", "auto"],
                  memories=["160M"], drop=True, hyper="auto", direct=True),
    }
    return {k: c[k] for k in args.cases.split(",")}


def ensure_sbm(path: str):
    if (Path(path) / "manifest.json").exists():
        return
    cmd = [sys.executable, "-m", "ringgnn", "generate", "sbm", path, "--nodes", "200000", "--classes", "8",
           "--avg-degree", "20", "--feature-dim", "12", "--quiet"]
    subprocess.run(cmd, check=True)


def run_once(python: str, case: dict, memory: str):
    """One `ringgnn sample` run under memcap: its epochs (JSON lines), memcap's line, max RSS."""
    cap = [MEMCAP] + (["--drop-caches"] if case["drop"] else []) + [memory, "--"]
    cmd = [sys.executable, "-c", RSS] + cap + [python, "-m", "ringgnn", "sample", case["data"], *case["argv"],
                                               "--memory", memory, "--json", "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    epochs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    mc = next((l for l in p.stderr.splitlines() if l.startswith("memcap:")), "")
    fields = dict(kv.split("=", 1) for kv in mc.replace("memcap:", "").split() if "=" in kv)
    rss = next((int(l.split()[1]) * 1024 for l in p.stderr.splitlines() if l.startswith("maxrss:")), None)
    if p.returncode != 0 or not epochs:
        print(f"  run failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}", file=sys.stderr)
    return dict(rc=p.returncode, epochs=epochs, peak=int(fields.get("peak", 0)),
                failcnt=int(fields.get("failcnt", -1)), oom_kills=int(fields.get("oom_kills", -1)), maxrss=rss,
                cmd=" ".join(cmd[3:]))


def plan_of(python: str, case: dict, memory: str):
    fanouts = case["argv"][case["argv"].index("--fanouts") + 1] if "--fanouts" in case["argv"] else "20,15,10"
    cmd = [python, "-c", PLAN, case["data"], fanouts, memory, "1024", case["hyper"], "1" if case["direct"] else "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"text": f"(plan failed: {p.stderr.strip().splitlines()[-1:]})"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def summary(runs):
    secs = [e["seconds"] for r in runs for e in r["epochs"]]
    last = [r["epochs"][-1] for r in runs if r["epochs"]]
    return dict(
        median=statistics.median(secs) if secs else float("nan"),
        lo=min(secs) if secs else float("nan"), hi=max(secs) if secs else float("nan"), n=len(secs),
        bytes_read=statistics.median([e["bytes_read"] for e in last]) if last else 0,
        hyperbatch=statistics.median([e["hyperbatch"] for e in last]) if last else 0,
        backend=last[-1]["backend"] if last else "-",
        peak=max(r["peak"] for r in runs), maxrss=max(r["maxrss"] or 0 for r in runs),
        failcnt=max(r["failcnt"] for r in runs), oom_kills=max(r["oom_kills"] for r in runs),
        rcs=sorted({r["rc"] for r in runs}),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="1", help="comma-separated: 1, 6 (default 1)")
    ap.add_argument("--baseline-python", default="", metavar="PATH",
                    help="the interpreter of a virtualenv holding the baseline build")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration and build")
    ap.add_argument("--sbm", default="/tmp/c1/sbm")
    ap.add_argument("--rmat21", default="/var/tmp/rb/rmat21")
    ap.add_argument("--seeds21", default="/var/tmp/rb/seeds21.npy")
    ap.add_argument("--json", default=None, metavar="OUT", help="write every run and the summary here")
    args = ap.parse_args()

    builds = {"this": sys.executable}
    if args.baseline_python:
        builds["base"] = args.baseline_python
    out = {"builds": builds, "repeat": args.repeat, "cases": {}}
    for key, case in cases(args).items():
        if key == "1":
            ensure_sbm(case["data"])
        configs = [(b, m) for m in case["memories"] for b in builds]
        print(f"### {case['title']}\n")
        print(f"`memcap{' --drop-caches' if case['drop'] else ''} M -- PYTHON -m ringgnn sample {case['data']} "
              f"{' '.join(case['argv'])} --memory M --json`; builds: "
              + ", ".join(f"{b} = {p}" for b, p in builds.items()) + f"; {args.repeat} runs each, interleaved\n")
        plans = {f"{b} {m}": plan_of(builds[b], case, m) for b, m in configs}
        for name, p in plans.items():
            print(f"- plan, {name}: {p.get('text')}")
        print()
        runs = {c: [] for c in configs}
        for rep in range(args.repeat):
            for b, m in configs[:: -1 if rep % 2 else 1]:
                r = run_once(builds[b], case, m)
                runs[(b, m)].append(r)
                print(f"  rep {rep} {b} {m}: " + ", ".join(f"{e['seconds']:.2f}" for e in r["epochs"])
                      + f" s; peak {r['peak'] / 2**20:.0f} MiB, failcnt {r['failcnt']}, exit {r['rc']}",
                      file=sys.stderr, flush=True)
        sums = {c: summary(rs) for c, rs in runs.items()}
        print("| build | --memory | epoch s, median (range, n) | backend | hyperbatch | GB read | memcap peak MiB "
              "| max RSS MiB | failcnt | exit |")
        print("|---|---|---:|---|---:|---:|---:|---:|---:|---|")
        for (b, m), s in sums.items():
            print(f"| {b} | {m} | {s['median']:.2f} ({s['lo']:.2f}-{s['hi']:.2f}, {s['n']}) | {s['backend']} | "
                  f"{s['hyperbatch']:.1f} | {s['bytes_read'] / 1e9:.2f} | {s['peak'] / 2**20:.0f} | "
                  f"{s['maxrss'] / 2**20:.0f} | {s['failcnt']} | {','.join(map(str, s['rcs']))} |")
        print()
        ratios = {}
        mems = case["memories"]
        for b in builds:
            for m in mems[:-1]:
                k = f"{b}: {m} / {mems[-1]}"
                ratios[k] = sums[(b, m)]["median"] / sums[(b, mems[-1])]["median"]
        if "base" in builds:
            for m in mems:
                ratios[f"this / base at {m}"] = sums[("this", m)]["median"] / sums[("base", m)]["median"]
        for k, v in ratios.items():
            print(f"- {k}: {v:.2f}x")
        print(flush=True)
        out["cases"][key] = dict(
            title=case["title"], plans=plans, ratios=ratios,
            summary={f"{b} {m}": s for (b, m), s in sums.items()},
            runs={f"{b} {m}": rs for (b, m), rs in runs.items()},
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
