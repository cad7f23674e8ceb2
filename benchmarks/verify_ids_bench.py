#!/usr/bin/env python3
"""`ringgnn verify`'s check that each original node id occurs once: its memory under a cap and
its cost against the same command without it.

One run, on datasets of V nodes with original ids (one edge each: the ids are the work):
  * `ringgnn verify DS --memory M` under `memcap M` (RSS and page cache capped) for each budget:
    exit 0, the bytes spilled, the peak RSS, the cap's failcnt;
  * the baseline: the same command of a build without the check (`--baseline`, default the
    global `python3`, a frozen build of main), warm, alternated with ours; the ratio is the cost
    of the check;
  * a copy with one duplicated id (node V-1 gets node 3's id) under the smallest cap: exit 1 with
    both nodes named, and no temporary left in the work directory.

Usage: python benchmarks/verify_ids_bench.py [--ints 50000000] [--strings 20000000]
       [--work /var/tmp/ringgnn-bench/NAME] [--budgets 128M,256M,512M] [--baseline python3]
Needs root (memcap). Prints a Markdown table; paste it into docs/benchmarks.md.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _ids import write_ids

ROOT = Path(__file__).resolve().parent.parent
MEMCAP = ROOT.parent / "shared" / "tools" / "memcap"


def make(work: Path, kind: str, n: int, dup: bool) -> Path:
    """A dataset of n nodes with distinct i64 (or string) ids; with dup, node n-1 repeats node 3's."""
    import ringgnn

    out = work / f"{kind}{n // 1_000_000}m{'-dup' if dup else ''}"
    if (out / "manifest.json").exists():
        return out
    np.save(work / "e.npy", np.array([[0], [1]], dtype=np.int64))
    node_ids = write_ids(work / "ids.bin", work / "ids.bytes", kind, n, dup)
    if dup:  # builds refuse a repeated id: the ids are stored after a build without them
        ringgnn.convert(work / "e.npy", out, num_nodes=n, memory="512M")
        store_ids(out, node_ids)
    else:
        ringgnn.convert(work / "e.npy", out, num_nodes=n, node_ids=node_ids, memory="512M")
    for p in (work / "ids.bin", work / "ids.bytes", work / "e.npy"):
        p.unlink(missing_ok=True)
    return out


def store_ids(ds: Path, node_ids: tuple) -> None:
    """Store an importer's id files in built dataset ``ds`` as docs/FORMAT.md lays them out
    (page-padded, sizes and checksums in the manifest), repeats and all."""
    import json
    import shutil

    import ringgnn

    m = json.loads((ds / "manifest.json").read_text())
    dtype, ids, data = node_ids
    for name, src in (("node_ids", ids), ("node_id_bytes", data)):
        if src is None:
            continue
        size = os.path.getsize(src)
        with open(src, "rb") as f, open(ds / f"{name}.bin", "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
            g.write(bytes(-size % 4096))
        total, crc = ringgnn._core.file_crc32c(str(ds / f"{name}.bin"))
        m["files"][name] = {"path": f"{name}.bin", "bytes": total, "payload_bytes": size, "crc32c": crc}
    m["node_ids"] = {"dtype": dtype, "bytes": 0 if data is None else os.path.getsize(data)}
    (ds / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")


def run(cmd: str):
    t = time.perf_counter()
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    return time.perf_counter() - t, r


def capped(py: str, ds: Path, budget: str, quiet: bool = True):
    """`verify` under memcap: (seconds, returncode, stdout, peak RSS MiB, failcnt, stderr)."""
    cmd = (f"{MEMCAP} {budget} -- /usr/bin/time -f 'maxrss %M' {py} -m ringgnn verify {ds} "
           f"--memory {budget}{' -q' if quiet else ''}")
    dt, r = run(cmd)
    rss = int(re.search(r"maxrss (\d+)", r.stderr).group(1)) >> 10
    fail = re.search(r"failcnt=(\d+)", r.stderr).group(1)
    return dt, r.returncode, r.stdout, rss, fail, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ints", type=int, default=50_000_000)
    ap.add_argument("--strings", type=int, default=20_000_000)
    ap.add_argument("--work", default=f"/var/tmp/ringgnn-bench/{os.environ.get('USER', 'bench')}")
    ap.add_argument("--budgets", default="128M,256M,512M")
    ap.add_argument("--baseline", default="python3")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ours = sys.executable
    budgets = args.budgets.split(",")
    rows = []
    for kind, n in (("int", args.ints), ("str", args.strings)):
        ds = make(work, kind, n, dup=False)
        run(f"cat {ds}/* > /dev/null")  # warm: both commands read the same cached files
        base, mine = [], []
        for _ in range(2):  # alternated, so drift hits both
            dt, r = run(f"{args.baseline} -m ringgnn verify {ds} -q")
            assert r.returncode == 0, r.stderr
            base.append(dt)
            dt, r = run(f"{ours} -m ringgnn verify {ds} -q --memory 1G")
            assert r.returncode == 0, r.stderr
            mine.append(dt)
        rows.append(f"| {kind} | {n:,} | 1G, no cap | {min(mine):.1f} s | {min(base):.1f} s | "
                    f"{min(mine) / min(base):.2f}x | | | |")
        for b in budgets:
            dt, rc, out, rss, fail, err = capped(ours, ds, b, quiet=False)
            assert rc == 0, err
            spilled = re.search(r"; ([\d.]+ \w+) of sorted", out)
            rows.append(f"| {kind} | {n:,} | {b} under memcap {b} | {dt:.1f} s | | | "
                        f"{spilled.group(1) if spilled else '0 (in memory)'} | {rss} MiB | {fail} |")
        dup = make(work, kind, n, dup=True)
        dt, rc, _, rss, fail, err = capped(ours, dup, budgets[0])
        found = f"nodes 3 and {n - 1} both have the original id" in err
        left = [p for p in os.listdir(work) if "ringgnn-tmp" in p]
        rows.append(f"| {kind}, node {n - 1} repeats node 3 | {n:,} | {budgets[0]} under memcap {budgets[0]} | "
                    f"{dt:.1f} s | | | exit {rc}, named: {found}, temporaries left: {len(left)} | {rss} MiB | {fail} |")
    print("| ids | V | --memory | ours | without the check | ratio | spilled | peak RSS | failcnt |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
