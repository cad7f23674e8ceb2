#!/usr/bin/env python3
"""Load generator and latency report for `ringgnn serve` (issue 10).

Starts `ringgnn serve DATASET` (optionally under `memcap`, caches dropped first), then drives its
Sample call with C client processes, one node per request (uniform over the nodes that have
neighbors), fanouts 20,15,10 by default, for each gRPC frontend (--frontends: rust, the default
server, and/or grpcio, the Python one) and each batching mode (--modes):

  wait    --max-wait-ms 1: a wave waits up to 1 ms for concurrent requests
  queued  --max-wait-ms 0: a wave takes what is already queued, no waiting (the server's default)
  off     --max-wave 1: every request is its own wave (no sharing of reads)
  default no batching option: the server's defaults (the only mode a heterogeneous dataset
          takes besides off)

A heterogeneous dataset (--node-type TYPE) gets typed requests: seeds of TYPE, uniform over its
nodes, the fanouts the same for every relation; it is served through grpcio (--frontends grpcio).
Run the script with PYTHONPATH set to another checkout's python/ to measure that build's server
(say, before and after a change) on the same requests.

For each frontend and mode:
  max     closed loop, every client keeping --outstanding requests in flight for --duration s:
          the maximum sustainable throughput (completed requests / s);
  LOAD%   open loop, Poisson arrivals at LOAD% of the frontend's *first* mode's maximum (the same
          offered load for every mode of a frontend, so their latencies compare), for --duration
          s; with --top R, of R req/s for every run instead (and no max runs).
Latency is measured from a request's scheduled send time to its answer (no coordinated
omission), in the client processes. The clients send pre-serialized requests and do not decode
the answers. --generator rust (the default) runs crates/ringgnn-serve/examples/loadgen.rs (tonic;
one thread for the schedule, one for the connections); --generator python runs grpc.aio
processes (one event loop each), which spend about half a millisecond of CPU per request. Either
way the clients share the 2 cores with the server, so the maximum is the client+server system's,
and the latencies include the clients' own scheduling.

Usage (root for --memcap/--drop-caches):
    python benchmarks/serve_bench.py /var/tmp/ringgnn-bench/rmat23 --label rmat23-disk --clients 2 \
        --frontends rust,grpcio --server-args "--backend uring --direct --memory 480M" --memcap 480M --drop-caches
    python benchmarks/serve_bench.py /var/tmp/ringgnn-bench/rmat23 --label rmat23-warm \
        --server-args "--backend uring"
Writes benchmarks/results/serve_LABEL.json and docs/img/serve_cdf_LABEL.png and prints a Markdown
table for docs/benchmarks.md.
"""
import argparse
import json
import multiprocessing as mp
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# ../shared/tools/memcap beside the checkout (or beside a folder holding it, for a worktree).
MEMCAP = next((d / "shared" / "tools" / "memcap" for d in ROOT.parents if (d / "shared" / "tools" / "memcap").exists()),
              ROOT.parent / "shared" / "tools" / "memcap")
MODES = {"wait": ["--max-wait-ms", "1"], "queued": ["--max-wait-ms", "0"], "off": ["--max-wave", "1"], "default": []}
PERCENTILES = (50, 90, 99, 99.9)


# --- client processes ---------------------------------------------------------------------------


def _client(address, requests, rate, duration, outstanding, start_at, out):
    """One client process (grpc.aio, one event loop): send `requests` (serialized) round-robin;
    open loop at `rate`/s (Poisson) or, with rate None, closed loop with `outstanding` in
    flight. Puts (latencies in seconds, error counts, seconds) on `out`."""
    import asyncio

    import grpc

    async def run():
        lat, errors = [], {}
        async with grpc.aio.insecure_channel(address, options=[("grpc.max_receive_message_length", 1 << 30)]) as ch:
            call = ch.unary_unary("/ringgnn.v1.RingGnn/Sample", request_serializer=None,
                                  response_deserializer=None)
            await ch.channel_ready()

            async def one(req, t0):
                try:
                    await call(req, timeout=30)
                    lat.append(time.perf_counter() - t0)
                except grpc.aio.AioRpcError as e:
                    errors[e.code().name] = errors.get(e.code().name, 0) + 1

            while time.time() < start_at:
                await asyncio.sleep(0.001)
            t_start = time.perf_counter()
            if rate is None:
                async def loop(k):
                    i = k
                    while time.perf_counter() - t_start < duration:
                        await one(requests[i % len(requests)], time.perf_counter())
                        i += outstanding
                await asyncio.gather(*(loop(k) for k in range(outstanding)))
            else:
                rng = np.random.default_rng(os.getpid())
                tasks, t_next, i = [], t_start, 0
                while True:
                    t_next += rng.exponential(1.0 / rate)
                    if t_next - t_start >= duration:
                        break
                    delay = t_next - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    # Latency from the scheduled time: a late send counts against us.
                    tasks.append(asyncio.ensure_future(one(requests[i % len(requests)], t_next)))
                    i += 1
                await asyncio.gather(*tasks)
            return lat, errors, time.perf_counter() - t_start

    lat, errors, elapsed = asyncio.run(run())
    out.put((np.array(lat), errors, elapsed))


LOADGEN = ROOT / "target" / "release" / "examples" / "loadgen"


def loadgen():
    """The Rust load generator (crates/ringgnn-serve/examples/loadgen.rs), built if needed."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ringgnn-serve", "--example", "loadgen"],
                   cwd=ROOT, check=True)
    return LOADGEN


def drive(address, requests, clients, *, rate=None, duration, outstanding=8, generator="python"):
    """Run `clients` generator processes against `address`; returns (latencies [s], errors,
    seconds)."""
    start_at = time.time() + 3.0  # after every process has started and connected
    share = [requests[k::clients] for k in range(clients)]
    if generator == "rust":
        import tempfile

        procs = []
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(clients):
                path = Path(tmp) / f"requests{k}.bin"
                path.write_bytes(b"".join(len(r).to_bytes(4, "little") + r for r in share[k]))
                mode = ["--closed", str(outstanding)] if rate is None else ["--rate", str(rate / clients)]
                procs.append(subprocess.Popen([str(LOADGEN), address, str(path), str(duration), str(start_at), *mode],
                                              stdout=subprocess.PIPE, text=True))
            outs = [json.loads(p.communicate(timeout=duration + 180)[0]) for p in procs]
        results = [(np.array(o["latencies"]), o["errors"], o["seconds"]) for o in outs]
    else:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=_client, args=(address, share[k], None if rate is None else rate / clients,
                                                   duration, outstanding, start_at, q)) for k in range(clients)]
        for p in procs:
            p.start()
        results = [q.get(timeout=duration + 180) for _ in procs]
        for p in procs:
            p.join()
    lat = np.concatenate([r[0] for r in results])
    errors = {}
    for r in results:
        for k, v in r[1].items():
            errors[k] = errors.get(k, 0) + v
    return lat, errors, max(r[2] for r in results)


# --- the server ---------------------------------------------------------------------------------


class Server:
    def __init__(self, dataset, args, memcap=None, drop_caches=False):
        cmd = [sys.executable, "-m", "ringgnn", "serve", dataset, "--listen", "127.0.0.1:0", *args]
        if memcap:
            cmd = [str(MEMCAP), *(["--drop-caches"] if drop_caches else []), memcap, "--", *cmd]
        elif drop_caches:
            subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines = []
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "listening on" in line:
                self.address = line.split("listening on ")[1].strip()
                break
        else:
            sys.exit(f"server did not start: {' '.join(cmd)}\n{self.proc.stderr.read()[-3000:]}")
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def stats(self):
        import ringgnn

        with ringgnn.Client(self.address) as c:
            return c.info()["stats"]

    def pid(self):
        """The server's python process (under memcap, a child of it)."""
        if not hasattr(self, "_pid"):
            pids = subprocess.run(["pgrep", "-s", str(self.proc.pid), "-f", "ringgnn serve"], capture_output=True,
                                  text=True).stdout.split()
            self._pid = next(p for p in pids if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"/")
                             and b"python" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0])
        return self._pid

    def rss(self):
        status = Path(f"/proc/{self.pid()}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) * 1024

    def cpu(self):
        """CPU seconds the server has used (user + system)."""
        fields = Path(f"/proc/{self.pid()}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        """SIGTERM to the server itself (under memcap, memcap then exits with its code and
        prints its peak)."""
        os.kill(int(self.pid()), signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        time.sleep(0.2)
        return code, [line.rstrip() for line in self.err]


def server_percentiles(before, after):
    """Latency inside the server between two Info snapshots (its histogram: four buckets per
    octave of microseconds; a percentile is its bucket's lower edge, at most 20% low)."""
    counts = np.array(after["latency_buckets"]) - np.array(before["latency_buckets"])
    n = counts.sum()
    out = {}
    for p in (50, 99):
        if n == 0:
            out[f"server_p{p}"] = None
            continue
        k = int(np.searchsorted(np.cumsum(counts), np.ceil(p / 100 * n)))
        out[f"server_p{p}"] = round(2 ** (k // 4) * (1 + (k % 4) / 4) / 1e3, 3)
    return out


def summary(lat, errors, seconds, offered=None):
    ms = np.sort(lat) * 1e3
    d = {"completed": int(len(ms)), "seconds": round(seconds, 2), "throughput": round(len(ms) / seconds, 1),
         "errors": errors}
    if offered is not None:
        d["offered"] = round(offered, 1)
    for p in PERCENTILES:
        d[f"p{p}"] = round(float(np.percentile(ms, p)), 3) if len(ms) else None
    d["mean"] = round(float(ms.mean()), 3) if len(ms) else None
    return d, ms


def measure(s, requests, a, rate=None):
    """One run against server `s`: closed loop (the maximum) without `rate`, else open loop at
    `rate` req/s; the client-side summary with the server's CPU, latency histogram, wave sizes
    and bytes read over the run, and the latencies in ms."""
    before, cpu = s.stats(), s.cpu()
    lat, errors, secs = drive(s.address, requests, a.clients, rate=rate, duration=a.duration,
                              outstanding=a.outstanding, generator=a.generator)
    after = s.stats()
    r, ms = summary(lat, errors, secs, offered=rate)
    done = max(1, r["completed"])
    r["server_cpu_ms_per_request"] = round((s.cpu() - cpu) * 1e3 / done, 3)
    r.update(server_percentiles(before, after))
    r["requests_per_wave"] = round((after["wave_requests"] - before["wave_requests"])
                                   / max(1, after["waves"] - before["waves"]), 2)
    r["bytes_read_per_request"] = round((after["bytes_read"] - before["bytes_read"]) / done)
    return r, ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--label", required=True)
    ap.add_argument("--fanouts", default="20,15,10")
    ap.add_argument("--server-args", default="", help="more `ringgnn serve` options, quoted")
    ap.add_argument("--memcap", help="run the server under memcap SIZE (RSS + page cache)")
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before each server start")
    ap.add_argument("--warm", action="store_true", help="read the dataset's files once first (warm page cache)")
    ap.add_argument("--modes", default="wait,queued,off")
    ap.add_argument("--frontends", default="rust",
                    help="gRPC servers to compare in this run (`ringgnn serve --frontend`): rust, grpcio or both; "
                    "each frontend's loads are fractions of its own first mode's maximum")
    ap.add_argument("--loads", default="0.5,0.8", help="open-loop loads, fractions of the wait mode's maximum")
    ap.add_argument("--clients", type=int, default=4, help="client processes")
    ap.add_argument("--generator", choices=["python", "rust"], default="rust",
                    help="load generator: rust (crates/ringgnn-serve/examples/loadgen.rs, tonic, little CPU; the "
                    "default) or python (grpc.aio processes)")
    ap.add_argument("--outstanding", type=int, default=16, help="requests in flight per client, closed loop")
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--requests", type=int, default=200_000, help="distinct requests prepared")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--node-type", help="a heterogeneous dataset: the requests' node type")
    ap.add_argument("--at", choices=["uniform", "last"], help="sample each request at a time (a dataset with times): "
                    "uniform over its edge times, or its last edge time (every edge: samples the size of those "
                    "without a time)")
    ap.add_argument("--top", type=float, help="take this as the maximum (req/s) instead of measuring it: the loads "
                    "are then the same offered rates for every run")
    a = ap.parse_args()
    if a.generator == "rust":
        loadgen()

    import ringgnn
    try:
        from ringgnn.serving.server import protos
    except ImportError:  # a build from before the package's subpackages (say, 2e31343, an A/B's base)
        from ringgnn.server import protos

    pb, _ = protos()
    ds = ringgnn.Dataset.open(a.dataset)
    rng = np.random.default_rng(a.seed)
    nodes = np.arange(ds.num_nodes_dict[a.node_type]) if a.node_type else np.flatnonzero(ds.degrees() > 0)
    picks = rng.choice(nodes, a.requests)
    fanouts = [int(f) for f in a.fanouts.split(",")]
    at = {}
    if a.at:  # drawn after the nodes, so that a run with --at asks for the same nodes as one without
        span = ds.manifest["edge_times"]
        times = rng.integers(span["min"], span["max"] + 1, a.requests) if a.at == "uniform" else [span["max"]] * a.requests
        at = dict(enumerate(int(t) for t in times))
    requests = [pb.SampleRequest(nodes=[int(v)], fanouts=fanouts, seed=k, node_type=a.node_type or "",
                                 **({"time": at[k]} if at else {})).SerializeToString() for k, v in enumerate(picks)]
    extra = shlex.split(a.server_args) + ["--fanouts", a.fanouts]
    loads = [float(x) for x in a.loads.split(",")]
    out = {"label": a.label, "dataset": a.dataset, "fanouts": fanouts, "at": a.at, "server_args": extra,
           "memcap": a.memcap, "clients": a.clients, "generator": a.generator, "outstanding": a.outstanding, "duration": a.duration,
           "command": " ".join(shlex.quote(x) for x in sys.argv), "runs": {}}
    cdfs = {}
    if a.warm:
        for f in Path(a.dataset).iterdir():
            with open(f, "rb") as fh:
                while fh.read(8 << 20):
                    pass
    for frontend in a.frontends.split(","):
        top = None
        for mode in a.modes.split(","):
            run = f"{frontend} {mode}"
            s = Server(a.dataset, extra + MODES[mode] + ["--frontend", frontend], a.memcap, a.drop_caches)
            print(f"[{run}] {s.lines[0]}", file=sys.stderr)
            res = {"server": s.lines[0], "frontend": frontend, "mode": mode}
            drive(s.address, requests[:2000], a.clients, duration=3.0, outstanding=4, generator=a.generator)  # warm the handlers up
            if a.top:
                top = a.top
            else:
                res["max"], _ = measure(s, requests, a)
                top = top or res["max"]["throughput"]
                print(f"[{run}] max {res['max']}", file=sys.stderr)
            for load in loads:
                r, ms = measure(s, requests, a, rate=load * top)
                res[f"{int(load * 100)}%"] = r
                cdfs[(run, load)] = ms
                print(f"[{run}] {int(load * 100)}% {r}", file=sys.stderr)
            res["rss"] = s.rss()
            code, err = s.stop()
            res["exit"] = code
            res["stderr_tail"] = err[-12:]
            out["runs"][run] = res
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"serve_{a.label}.json").write_text(json.dumps(out, indent=1))
    plot(cdfs, a, ROOT / "docs" / "img" / f"serve_cdf_{a.label}.png")
    table(out, loads)


def plot(cdfs, a, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {0.5: "-", 0.8: "--"}
    palette = ["tab:green", "tab:blue", "tab:red", "tab:orange", "tab:purple", "tab:brown"]
    colors = {}
    for (run, load), ms in cdfs.items():
        if len(ms):
            y = np.arange(1, len(ms) + 1) / len(ms)
            color = colors.setdefault(run, palette[len(colors) % len(palette)])
            ax.plot(ms, y, styles.get(load, ":"), color=color, label=f"{run}, {int(load * 100)}% load")
    ax.set_xscale("log")
    ax.set_xlabel("latency per request (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"ringgnn serve, {a.label}: Sample, 1 node, fanouts {a.fanouts}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)


def table(out, loads):
    print(f"\n{out['label']}: `{out['command']}`\n")
    print("| frontend mode | load | offered req/s | served req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | req/wave "
          "| server CPU ms/req | in server p50 / p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mode, res in out["runs"].items():
        for key in ["max"] + [f"{int(x * 100)}%" for x in loads]:
            if key not in res:
                continue
            r = res[key]
            print(f"| {mode} | {key} | {r.get('offered', '-')} | {r['throughput']} | {r['p50']} | {r['p90']} | "
                  f"{r['p99']} | {r['p99.9']} | {r['requests_per_wave']} | {r['server_cpu_ms_per_request']} | "
                  f"{r.get('server_p50')} / {r.get('server_p99')} | {r['errors'] or ''} |")


if __name__ == "__main__":
    main()
