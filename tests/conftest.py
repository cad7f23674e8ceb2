"""Shared helpers for the ringgnn tests: writing small edge lists in every input format, running
the CLI in-process, and the in-memory reference CSC that every conversion is checked against."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from ringgnn.cli import main


# A test run started in the background by a non-interactive shell (`cmd &`, as CI scripts do)
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the Ctrl-C
# tests would see nothing. Restore the handler; the commands the tests start then get the
# default disposition too (an ignored signal survives exec, a handler does not).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

Edge = Tuple[int, int]

REPO = Path(__file__).resolve().parent.parent
#: The real-data file of the acceptance tests (absent in some checkouts: those tests skip).
CNR_2000 = REPO.parent / "shared" / "data" / "cnr-2000.tsv.gz"

# A small directed graph with everything the builder must get right: a duplicate edge (0->1
# twice), self loops (2->2 and the max id 5->5), an isolated node (4), and a node (3) with
# out-edges only.
SMALL_EDGES: List[Edge] = [(0, 1), (0, 1), (1, 2), (2, 2), (3, 0), (3, 2), (2, 0), (5, 5), (1, 5), (3, 5)]


@pytest.fixture(scope="session")
def big_bin32(tmp_path_factory):
    """16M random edges (128 MB): a conversion that takes about a second even on a fast machine,
    long enough to be interrupted in the middle (the Ctrl-C and SIGTERM tests)."""
    path = tmp_path_factory.mktemp("big") / "big.bin32"
    rng = np.random.default_rng(7)
    with open(path, "wb") as f:
        for _ in range(8):
            rng.integers(0, 1 << 22, size=(2_000_000, 2), dtype=np.uint32).tofile(f)
    return path


# --- a small disk ----------------------------------------------------------------------------


def mount_tmpfs(at: Path, size: str) -> Path:
    """A tmpfs of ``size`` (``"256k"``) mounted at ``at`` (made if missing): a small disk to fill.
    Skips the test where mounting is not allowed (no root or CAP_SYS_ADMIN, no mount command)."""
    import shutil

    at.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: the full-disk tests mount a small tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): the full-disk tests need root "
                    "or CAP_SYS_ADMIN")
    return at


def unmount_below(root: Path) -> None:
    """Unmount every mount point below ``root``, deepest first (a regression may have moved one:
    a replaced dataset's folder renamed to a temporary)."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].encode().decode("unicode_escape") for line in f]
    top = os.path.realpath(root)
    for point in sorted((p for p in points if p.startswith(f"{top}/")), key=len, reverse=True):
        subprocess.run(["umount", point], check=True)


@pytest.fixture
def disk(tmp_path):
    """``disk(size, at=None)``: a new tmpfs of ``size`` mounted at ``at`` (by default a new folder
    of ``tmp_path``), unmounted after the test (:func:`mount_tmpfs`)."""
    made = []

    def make(size: str, at: Optional[Path] = None) -> Path:
        made.append(mount_tmpfs(at or tmp_path / f"disk{len(made)}", size))
        return made[-1]

    yield make
    unmount_below(tmp_path)


# --- reference -------------------------------------------------------------------------------


def reference_csc(
    edges: Sequence[Edge],
    *,
    undirected: bool = False,
    self_loops: str = "keep",
    dedup: bool = False,
    num_nodes: Optional[int] = None,
) -> List[List[int]]:
    """For each node v, the sorted sources of the edges into v, as the spec defines them:
    --self-loops drop removes u->u, --undirected adds v->u for every u->v with u != v,
    --dedup keeps one copy of each (src, dst)."""
    n = num_nodes if num_nodes is not None else max((max(e) for e in edges), default=-1) + 1
    lists: List[List[int]] = [[] for _ in range(n)]
    for s, d in edges:
        if s == d and self_loops == "drop":
            continue
        lists[d].append(s)
        if undirected and s != d:
            lists[s].append(d)
    return [sorted(set(lst)) if dedup else sorted(lst) for lst in lists]


def assert_csc(path, expected: List[List[int]]) -> None:
    """The dataset at `path` has exactly the neighbor lists `expected`, and a consistent indptr."""
    import ringgnn

    ds = ringgnn.Dataset.open(path)
    assert ds.num_nodes == len(expected)
    assert ds.num_edges == sum(len(x) for x in expected)
    for v, want in enumerate(expected):
        got = ds.neighbors(v)
        assert got.dtype == np.int64
        assert got.tolist() == want, f"neighbors({v})"
    indptr = np.fromfile(Path(path) / "indptr.bin", dtype="<u8", count=len(expected) + 1)
    assert indptr.tolist() == np.concatenate([[0], np.cumsum([len(x) for x in expected])]).tolist()


def assert_nothing_left(out: Path) -> None:
    """Neither OUT nor a staging directory `.OUT.tmp-*` beside it exists."""
    assert not out.exists(), f"{out} was left behind"
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    assert not leftovers, f"staging directories left behind: {leftovers}"


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, as docs/FORMAT.md checksums files, computed bit by bit."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def rewrite_payload(ds: Path, key: str, payload: bytes) -> None:
    """Replace the start of dataset file ``key``'s payload keeping the manifest consistent (its
    checksum updated), so only the structure is wrong."""
    import json

    m = json.loads((ds / "manifest.json").read_text())
    entry = m["files"][key]
    raw = bytearray((ds / entry["path"]).read_bytes())
    raw[: len(payload)] = payload
    (ds / entry["path"]).write_bytes(bytes(raw))
    entry["crc32c"] = f"{crc32c(bytes(raw)):08x}"
    (ds / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")


# --- writing inputs --------------------------------------------------------------------------


def write_text(path: Path, edges: Iterable[Edge], sep: str = "\t", header: Sequence[str] = ()) -> Path:
    body = "".join(f"{line}\n" for line in header) + "".join(f"{s}{sep}{d}\n" for s, d in edges)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return path


def write_bin(path: Path, edges: Sequence[Edge], width: int) -> Path:
    np.asarray(edges, dtype=f"<u{width // 8}").reshape(-1, 2).tofile(path)
    return path


def write_npy(path: Path, edges: Sequence[Edge], dtype: str = "int64", layout: str = "E2") -> Path:
    a = np.asarray(edges, dtype=dtype).reshape(-1, 2)
    np.save(path, a.T.copy() if layout == "2E" else a)
    return path


# --- running the CLI -------------------------------------------------------------------------


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """Run `ringgnn ARGS` in-process; returns (exit code, stdout, stderr). Usage errors, which
    argparse reports by raising SystemExit, come back as their exit code too."""

    def run(*args) -> Result:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def console_script() -> str:
    """The installed `ringgnn` console command (next to this Python's scripts)."""
    exe = Path(sysconfig.get_path("scripts")) / "ringgnn"
    if exe.exists():
        return str(exe)
    pytest.skip(f"the ringgnn console script is not installed at {exe}; install the package with pip")


def run_console(*args, env=None, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, console_script(), *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def python_m(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ringgnn", *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


@pytest.fixture
def small_tsv(tmp_path) -> Path:
    return write_text(tmp_path / "small.tsv", SMALL_EDGES, header=["# a comment", "% another"])


#: The writes pairs of :func:`tiny_writes`: 20 author-paper pairs.
WRITES_PAIRS = [(a, p) for p in range(6) for a in range(5) if (a + p) % 3 != 0]


def tiny_writes(d: Path):
    """The typed link tests' graph in ``d``: 5 authors without features, 6 papers (2 float32
    features), the 20 ``author:writes:paper`` pairs of :data:`WRITES_PAIRS` with val (4, 4) and
    (0, 1) and test (3, 1) held out (3 stored negatives each), the reverse relation added."""
    import ringgnn
    from ringgnn.data import build

    (d / "w.csv").write_text("".join(f"{a},{p}\n" for a, p in WRITES_PAIRS))
    np.save(d / "x.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
    np.save(d / "val.npy", np.array([[4, 4], [0, 1]]))
    np.save(d / "test.npy", np.array([[3, 1]]))
    build.build_hetero(d / "ds", [build.NodeType("author", 5), build.NodeType("paper", 6, features=d / "x.npy")],
                       [build.Relation("author:writes:paper", d / "w.csv",
                                       link_split={"val": d / "val.npy", "test": d / "test.npy"}, link_negatives=3)],
                       add_reverse=True)
    return ringgnn.Dataset.open(d / "ds")
