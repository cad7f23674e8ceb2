#!/usr/bin/env python3
"""Layer-wise inference (issue 12): time per layer against the sequential-read floor of the
files it streams, bytes read and written, peak memory.

Runs ``ringgnn predict RUN_DIR --nodes all`` as a child (under ``memcap --drop-caches CAP`` with
``--cap``, and ``--memory CAP``), reads its JSON summary (per layer: seconds, neighbor-list
bytes and row bytes read) and prints each layer against its floor: the bytes the layer must
stream at least once (the neighbor file and the input rows file), at the sequential rate given by
``--seq-mbps`` (this machine: about 1,100 MB/s). With ``--time-limit`` the child is stopped
after that many seconds and the script reports the blocks done so far from a progress probe
(``RINGGNN_INFER_PROBE``: a file the child appends one line per block to), extrapolated to the
layer.

With ``--aggregate python,rust`` (issue 24) the same prediction runs once per aggregation of
the grid (``RINGGNN_INFER_AGGREGATE``: torch's ``index_add_``, the path before issue 24, or the
Rust core), one after the other in this run, and the ratio of their layer times is printed.
The CPU column is the child's CPU time (all its threads) over the layer's wall time: the cores
it kept busy.

With ``--scheme grid,partitioned`` (issue 24) it runs once per aggregation scheme
(``RINGGNN_INFER_SCHEME``: destination blocks, or source partitions with spilled partial sums),
printing each layer's bytes read and written to temporaries (buckets, partials) beside its time.

Usage:
    python benchmarks/infer_bench.py RUN_DIR [--cap 4.77G] [--time-limit 600] [--json out.json]
        [--aggregate python,rust | --scheme grid,partitioned,auto]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _sizes import MEMCAP, parse_size


PROBE = r'''
import json, os, resource, sys, time
import ringgnn.inference.run as I
probe = open(os.environ["RINGGNN_INFER_PROBE"], "a", buffering=1)
orig_layer = I.LayerwiseInference.compute
def layer(self, k, reader, writer, *a, **kw):
    t0, c0 = time.perf_counter(), time.process_time()
    base = reader.stats()["bytes_read"]
    def w(first, rows, writer=writer):
        writer(first, rows)
        probe.write(json.dumps(dict(layer=k + 1, node=int(first) + len(rows), t=time.perf_counter() - t0,
                                    cpu=time.process_time() - c0,
                                    rows_bytes=reader.stats()["bytes_read"] - base,
                                    neighbor_bytes=self.graph.bytes_read, nodes=self.graph.num_nodes,
                                    edges=int(self.graph.indptr[int(first) + len(rows)]),
                                    total_edges=int(self.graph.indptr[-1]),
                                    max_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)) + "\n")
    return orig_layer(self, k, reader, w, *a, **kw)
I.LayerwiseInference.compute = layer
from ringgnn.cli import main
sys.exit(main(sys.argv[1:]))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--cap", default=None)
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--seq-mbps", type=float, default=1100.0)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--aggregate", default=None,
                    help="comma-separated aggregations to run in turn (rust, python); default: the default")
    ap.add_argument("--scheme", default=None,
                    help="comma-separated schemes to run in turn (grid, partitioned, auto) instead of aggregations")
    args = ap.parse_args()
    aggs = args.aggregate.split(",") if args.aggregate else [None]
    if args.scheme:
        aggs = ["scheme=" + s for s in args.scheme.split(",")]
    results = {}  # aggregation -> per run, its rows (a name given twice runs twice, interleaved)
    for agg in aggs:
        if agg is not None:
            print(f"## aggregate = {agg}")
        results.setdefault(agg, []).append(run_once(args, agg))
    names = list(results)
    if len(names) > 1:
        # Each aggregation's best time per layer over its runs, against the first one's.
        best = {a: [min(run[i]["est_layer_seconds"] for run in results[a]) for i in range(len(results[a][0]))]
                for a in names}
        base = names[0]
        for agg in names[1:]:
            for i, (t0, t1) in enumerate(zip(best[base], best[agg])):
                print(f"layer {i + 1}: {base} {t0:.2f} s, {agg} {t1:.2f} s: {t0 / t1:.2f}x "
                      f"(best of {len(results[base])} and {len(results[agg])} runs)")
            print(f"all layers: {base} {sum(best[base]):.2f} s, {agg} {sum(best[agg]):.2f} s: "
                  f"{sum(best[base]) / sum(best[agg]):.2f}x")


def run_once(args, aggregate):
    """One ``ringgnn predict`` child (with ``aggregate`` as RINGGNN_INFER_AGGREGATE unless None):
    prints its table and returns its rows."""

    tmp = tempfile.mkdtemp(prefix="infer_bench_", dir=os.path.dirname(os.path.abspath(args.run_dir)))
    probe = os.path.join(tmp, "probe.jsonl")
    out = os.path.join(tmp, "pred.npy")
    cmd = [sys.executable, "-c", PROBE, "predict", args.run_dir, "--out", out, "--json", "--quiet"]
    if args.direct:
        cmd.append("--direct")
    if args.cap:
        cmd += ["--memory", str(parse_size(args.cap))]
        cmd = [MEMCAP, "--drop-caches", str(parse_size(args.cap)), "--", *cmd]
    env = dict(os.environ, RINGGNN_INFER_PROBE=probe)
    if aggregate is not None and aggregate.startswith("scheme="):
        env["RINGGNN_INFER_SCHEME"] = aggregate[len("scheme="):]
    elif aggregate is not None:
        env["RINGGNN_INFER_AGGREGATE"] = aggregate
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=args.time_limit)
        finished, timed_out = p.returncode == 0, False
    except subprocess.TimeoutExpired:
        # The inference process is memcap's child: stop it (memcap then prints its line).
        import signal

        for pid in subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True).stdout.split():
            if int(pid) != p.pid:
                os.kill(int(pid), signal.SIGTERM)
        stdout, stderr = p.communicate()
        finished, timed_out = False, True
    wall = time.perf_counter() - t0
    lines = [json.loads(l) for l in open(probe)] if os.path.exists(probe) else []
    summary = json.loads(stdout) if finished else None
    cap_line = next((l for l in stderr.splitlines() if l.startswith("memcap:")), None)
    # A child that failed (a refused budget, an error) says why on stderr: keep its last lines.
    error = None
    if p.returncode != 0 and not timed_out:
        error = "\n".join(l for l in stderr.splitlines() if not l.startswith("memcap:"))[-2000:] or None
        print(f"the command exited with {p.returncode}:\n{error}", file=sys.stderr)

    import torch

    import ringgnn

    state = torch.load(os.path.join(args.run_dir, "best.pt"), map_location="cpu", weights_only=True)
    ds_path, hidden = state["metrics"]["dataset"], int(state["args"]["hidden"])
    ds = ringgnn.Dataset.open(ds_path)
    manifest = ringgnn.read_manifest(ds_path)
    neighbor_bytes = manifest["files"]["indices"]["bytes"]
    feature_bytes = manifest["files"]["features"]["bytes"]
    per_page = 4096 // (4 * hidden)
    hidden_bytes = -(-ds.num_nodes // per_page) * 4096  # a layer file (feature-file layout)
    rate = args.seq_mbps * 1e6

    rows = []
    by_layer = {}
    for l in lines:
        by_layer.setdefault(l["layer"], []).append(l)
    for layer, ls in sorted(by_layer.items()):
        last = ls[-1]
        frac = last["edges"] / max(1, last["total_edges"])
        done = last["node"] >= last["nodes"]
        in_bytes = feature_bytes if layer == 1 else hidden_bytes
        if summary:
            d = summary["layers"][layer - 1]
            seconds, nb, rb = d["seconds"], d["neighbor_bytes"], d["row_bytes"]
            print(f"layer {layer}: {d.get('scheme', 'grid')}, {d.get('plan', '')}; temporaries written "
                  f"{d.get('temp_written', 0) / 1e9:.2f} GB, read {d.get('temp_read', 0) / 1e9:.2f} GB; "
                  f"read+written in all {(nb + rb + d.get('temp_written', 0) + d.get('temp_read', 0)) / 1e9:.2f} GB")
        else:
            seconds, nb, rb = last["t"], last["neighbor_bytes"], last["rows_bytes"]
        est = seconds / frac if frac > 0 else float("nan")
        floor = (neighbor_bytes + in_bytes) / rate
        # CPU seconds of all the child's threads over the layer, up to its last row slice written.
        cpu_util = last.get("cpu", 0.0) / last["t"] if last["t"] > 0 else float("nan")
        rows.append(dict(layer=layer, done=done, fraction=frac, seconds=seconds, est_layer_seconds=est,
                         cpu_seconds=last.get("cpu"), cpu_util=cpu_util,
                         max_rss=max(l.get("max_rss", 0) for l in ls),
                         neighbor_bytes=nb, row_bytes=rb, est_row_bytes=rb / frac if frac else None,
                         input_file_bytes=in_bytes, floor_seconds=floor, blocks=len(ls)))
    print(f"dataset {ds_path}: {ds.num_nodes:,} nodes, {ds.num_edges:,} edges; neighbor file "
          f"{neighbor_bytes / 1e9:.2f} GB, features {feature_bytes / 1e9:.2f} GB; wall {wall:.0f} s, "
          f"{'finished' if finished else 'stopped at the time limit'}")
    print("| layer | row slices written | edges done | seconds | layer s (est.) | rows read GB (est. layer) | "
          "read / input file | floor s | layer / floor | CPU (cores busy) | peak RSS GB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        est_rb = r["est_row_bytes"] or 0
        print(f"| {r['layer']} | {r['blocks']} | {r['fraction']:.1%} | {r['seconds']:.1f} | {r['est_layer_seconds']:.0f} | "
              f"{r['row_bytes'] / 1e9:.2f} ({est_rb / 1e9:.1f}) | {est_rb / r['input_file_bytes']:.1f}x | "
              f"{r['floor_seconds']:.1f} | {r['est_layer_seconds'] / r['floor_seconds']:.1f}x | {r['cpu_util']:.2f} | "
              f"{r['max_rss'] / 1e9:.2f} |")
    if cap_line:
        print(cap_line)
    if summary:
        print(f"written: {summary['bytes_written'] / 1e9:.2f} GB of intermediate layers; plan {summary['plan']}")
        for d in summary["layers"]:  # where each layer's time went (seconds by phase, the grid)
            print(f"layer {d['layer']} phases: " + ", ".join(f"{p} {v:.2f}" for p, v in d.get("phases", {}).items()))
    if args.json:
        name = args.json if aggregate is None else args.json.replace(".json", f".{aggregate}.json")
        with open(name, "w") as f:
            json.dump(dict(args=vars(args), aggregate=aggregate, rows=rows, summary=summary, memcap=cap_line, wall=wall, error=error,
                           command=" ".join("<probe>" if c == PROBE else c for c in cmd)), f, indent=2)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    main()
