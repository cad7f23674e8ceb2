"""Sizes checked before writing, and every signal cleaned up (issue 34, items 2 and 4).

* A build whose output cannot fit the free space of its file system is refused at once, before
  anything is written, with a message naming the output, what it needs and what is free:
  whatever the way in (``convert`` with a node count or an id far out, the generators, a
  heterogeneous build, a GraphBolt ``num:``, ``from_pyg`` of an ``edge_index`` without
  ``num_nodes``).
* SIGTERM and SIGINT at any point of a ``ringgnn convert`` leave either the complete dataset
  (exit 0, ``verify`` passes) or nothing at all (exit 143 / 130, no staging directory).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn import _core, _signals
from ringgnn.data import build
from ringgnn.cli import main
from conftest import assert_nothing_left, console_script

#: The refusal, whatever the build: the output, both sizes, and what to do.
REFUSED = re.compile(
    r": writing it needs [\d.]+ [KMGT]?i?B \(\d+ bytes: .*\), but its file system has only [\d.]+ [KMGT]?i?B "
    r"\(\d+ bytes\) free; check the node and edge counts, free space there, or write to a file system with room$"
)
#: Far beyond any test machine's disk: 8 TB of index alone.
HUGE = 10**12
#: Refusing reads no more than a few headers: "at once" with room for a loaded machine.
AT_ONCE = 5.0


def _refused(fn, out: Path, *parts: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(_core.InputError) as e:
        fn()
    elapsed = time.perf_counter() - t0
    text = str(e.value)
    assert REFUSED.search(text), text
    assert text.startswith(f"{out}: "), text
    for p in parts:
        assert p in text, (p, text)
    assert elapsed < AT_ONCE, f"took {elapsed:.1f} s to refuse"
    assert_nothing_left(out)
    return text


@pytest.fixture
def tiny(tmp_path) -> Path:
    p = tmp_path / "edges.txt"
    p.write_text("0 1\n1 2\n2 0\n")
    return p


def test_convert_refuses_a_node_count_beyond_the_disk(tmp_path, tiny):
    out = tmp_path / "ds"
    _refused(lambda: ringgnn.convert(tiny, out, num_nodes=HUGE), out,
             "the index of the graph: 1000000000000 nodes x 8 B = 7.3 TiB")


def test_convert_refuses_an_inferred_count_beyond_the_disk(tmp_path):
    # One id of 2^40 and no --num-nodes: the count is known after the first pass, before pass 2.
    src = tmp_path / "edges.txt"
    src.write_text(f"0 1\n1 {2**40}\n")
    out = tmp_path / "ds"
    _refused(lambda: ringgnn.convert(src, out), out, f"{2**40 + 1} nodes x 8 B = 8.0 TiB")


@pytest.mark.parametrize("fmt", ["npy", "bin64"])
def test_convert_refuses_binary_inputs_too(tmp_path, fmt):
    src = tmp_path / f"edges.{fmt}"
    edges = np.array([[0, 1], [1, 2**45]], dtype=np.uint64)
    np.save(src, edges) if fmt == "npy" else edges.tofile(src)
    out = tmp_path / "ds"
    _refused(lambda: ringgnn.convert(src, out, format=fmt), out, "the index of the graph")


def test_convert_counts_features_and_labels(tmp_path, tiny):
    # A count that the index alone would fit, but not with a row of 2^20 float32s per node.
    n = 1 << 20
    feats = tmp_path / "x.npy"
    try:  # a sparse file: no disk
        np.lib.format.open_memmap(feats, mode="w+", dtype=np.float32, shape=(n, 1 << 20))
    except OSError as e:
        pytest.skip(f"this file system has no 4 TiB sparse files: {e}")
    out = tmp_path / "ds"
    free = _core_free(tmp_path)
    if n * (1 << 20) * 4 <= free:
        pytest.skip("this file system has 4 TiB free")
    _refused(lambda: ringgnn.convert(tiny, out, num_nodes=n, features=feats), out,
             "the features of the graph: 1048576 x 4194304 B = 4.0 TiB")


def _core_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_cli_convert_refuses_with_one_line(tmp_path, tiny, cli):
    out = tmp_path / "ds"
    r = cli("convert", tiny, out, "--num-nodes", str(HUGE), "--quiet")
    code, err = r.code, r.err
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ringgnn convert: error: {out}: writing it needs 7.3 TiB"), err
    assert_nothing_left(out)


@pytest.mark.parametrize("args, part", [
    (["rmat", "--scale", "38"], "the sort's spill"),
    (["sbm", "--nodes", str(1 << 32), "--classes", "2", "--avg-degree", "1", "--feature-dim", str(1 << 20)],
     "the features of the graph: 4294967296 x 4194304 B = 16384.0 TiB"),
])
def test_generators_refuse_before_generating(tmp_path, cli, args, part):
    out = tmp_path / "gen"
    t0 = time.perf_counter()
    r = cli("generate", args[0], out, *args[1:], "--quiet")
    code, err = r.code, r.err
    assert code == 1 and part in err and "free; check the node and edge counts" in err, err
    assert time.perf_counter() - t0 < AT_ONCE
    assert_nothing_left(out)


def test_hetero_build_refuses_a_huge_node_type(tmp_path):
    edges = tmp_path / "writes.npy"
    np.save(edges, np.array([[0, 0], [1, 1]], dtype=np.int64))
    out = tmp_path / "het"
    types = [build.NodeType("author", 2), build.NodeType("paper", HUGE)]
    rels = [build.Relation("author:writes:paper", edges, "npy")]
    _refused(lambda: build.build_hetero(out, types, rels), out,
             "the index of relation author:writes:paper: 1000000000000 nodes x 8 B")


def _graphbolt(root: Path, num, task: bool) -> Path:
    yaml = pytest.importorskip("yaml")
    root.mkdir()
    np.save(root / "edges.npy", np.array([[0, 1, 2], [1, 2, 0]], dtype=np.int64))
    meta = {"dataset_name": "huge", "graph": {"nodes": [{"num": num}],
                                               "edges": [{"format": "numpy", "path": "edges.npy"}]}}
    if task:
        np.save(root / "seeds.npy", np.array([0, 1], dtype=np.int64))
        np.save(root / "labels.npy", np.array([0, 1], dtype=np.int64))
        meta["tasks"] = [{"name": "nc", "num_classes": 2, "train_set": [{"data": [
            {"name": "seeds", "format": "numpy", "path": "seeds.npy"},
            {"name": "labels", "format": "numpy", "path": "labels.npy"}]}]}]
    path = root / "metadata.yaml"
    path.write_text(yaml.safe_dump(meta, sort_keys=False))
    return path


@pytest.mark.parametrize("task, part", [
    (False, "the index of the graph: 1000000000000 nodes x 8 B"),
    (True, "the staged labels of the graph: 1000000000000 x 8 B"),  # a map the importer fills
])
def test_graphbolt_num_beyond_the_disk(tmp_path, task, part):
    from ringgnn.importers.graphbolt import convert_graphbolt

    yaml_path = _graphbolt(tmp_path / "gb", HUGE, task)
    out = tmp_path / "ds"
    _refused(lambda: convert_graphbolt(yaml_path, out, threads=1), out, part)


def test_from_pyg_edge_index_with_a_far_id(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    import warnings

    from torch_geometric.data import Data

    from ringgnn.importers.pyg_io import from_pyg

    data = Data(edge_index=torch.tensor([[0, 1], [1, 2**40]]))  # no num_nodes: PyG infers 2^40 + 1
    out = tmp_path / "ds"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _refused(lambda: from_pyg(data, out), out, f"{2**40 + 1} nodes x 8 B")


def test_from_pyg_hetero_with_a_huge_count(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import HeteroData

    from ringgnn.importers.pyg_io import from_pyg

    data = HeteroData()
    data["a"].num_nodes = 3
    data["b"].num_nodes = HUGE
    data["a", "r", "b"].edge_index = torch.tensor([[0, 1], [1, 2]])
    out = tmp_path / "ds"
    _refused(lambda: from_pyg(data, out), out, "relation a:r:b: 1000000000000 nodes x 8 B")


@pytest.fixture
def small_disk(disk):
    """A 256 KiB tmpfs (conftest's ``disk``: skipped where mounting is not allowed)."""
    return disk("256k")


@pytest.mark.parametrize("nodes, fits", [(30_000, True), (40_000, False)])
def test_the_limit_is_the_free_space_of_the_output(tmp_path, tiny, small_disk, nodes, fits):
    """On a 256 KiB disk: 30,000 nodes (240 KB of index, 236 KiB padded) fit, 40,000 do not,
    and the refusal names the 256 KiB free."""
    out = small_disk / "ds"
    if fits:
        assert ringgnn.convert(tiny, out, num_nodes=nodes)["num_nodes"] == nodes
        assert main(["verify", str(out)]) == 0
        return
    text = _refused(lambda: ringgnn.convert(tiny, out, num_nodes=nodes), out,
                    "the index of the graph: 40000 nodes x 8 B = 316.0 KiB")
    assert "only 256.0 KiB (262144 bytes) free" in text
    assert list(small_disk.iterdir()) == []


def test_the_binding_refuses_what_python_stages(tmp_path):
    _core.check_room(str(tmp_path), str(tmp_path / "o"), [("a little", 1)])
    with pytest.raises(_core.InputError, match=r"o: writing it needs .*a lot = "):
        _core.check_room(str(tmp_path), str(tmp_path / "o"), [("a lot", 2**63)])


# --- signals ------------------------------------------------------------------------------------


def _start(src: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([console_script(), "convert", str(src), str(out), "--memory", "256M", "--quiet", *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_staging(proc: subprocess.Popen, out: Path) -> float:
    """Wait until the build has made its staging directory (it is past start-up); its time."""
    while proc.poll() is None:
        if any(p.name.startswith(f".{out.name}.") for p in out.parent.iterdir()):
            return time.perf_counter()
        time.sleep(0.005)
    return time.perf_counter()


@pytest.fixture(scope="module")
def build_seconds(big_bin32, tmp_path_factory):
    """How long the build runs once it has started (the signals below fall within and after it)."""
    out = tmp_path_factory.mktemp("ref") / "ds"
    proc = _start(big_bin32, out)
    t0 = _wait_for_staging(proc, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return time.perf_counter() - t0


SEEDED_POINTS = np.random.default_rng(2038).uniform(0.0, 1.15, size=5)  # of the build's time, some past its end


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("point", range(len(SEEDED_POINTS)))
def test_a_signal_at_any_point_leaves_the_dataset_or_nothing(tmp_path, big_bin32, build_seconds, signame, point):
    sig, code = getattr(signal, signame), {"SIGTERM": 143, "SIGINT": 130}[signame]
    out = tmp_path / "ds"
    proc = _start(big_bin32, out)
    try:
        t0 = _wait_for_staging(proc, out)
        time.sleep(max(0.0, t0 + SEEDED_POINTS[point] * build_seconds - time.perf_counter()))
        if proc.poll() is None:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    if proc.returncode == 0:  # finished, or the signal came after the rename into place
        assert err == "" or re.fullmatch(rf"ringgnn convert: (interrupted|terminated \(SIGTERM\)) after {out} was "
                                         r"complete; it is kept\n", err), err
        assert main(["verify", str(out)]) == 0
        leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
        assert not leftovers
    else:
        assert proc.returncode == code, (proc.returncode, err)
        assert err.endswith("ringgnn convert: interrupted\n" if code == 130 else
                            "ringgnn convert: terminated (SIGTERM)\n"), err
        assert_nothing_left(out)


@pytest.mark.parametrize("args", [
    ["generate", "rmat", "{out}", "--scale", "20"],
    ["generate", "hetero", "{out}", "--papers", "200000", "--authors", "100000", "--institutions", "1000"],
])
def test_sigterm_during_other_builds(tmp_path, args):
    """The generators (a Rust build; a Python one over build_hetero) clean up after SIGTERM too."""
    out = tmp_path / "gen"
    proc = subprocess.Popen([console_script(), *[a.format(out=out) for a in args], "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_staging(proc, out)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    if proc.returncode == 0:  # a machine fast enough to finish first
        assert main(["verify", str(out)]) == 0
        return
    assert (proc.returncode, err) == (143, f"ringgnn generate {args[1]}: terminated (SIGTERM)\n")
    assert_nothing_left(out)


def test_sigterm_stops_a_long_run_of_empty_nodes(tmp_path):
    """2^29 nodes and two edges: the index is 4 GiB of one repeated value, written in one loop
    between two progress reports. SIGTERM stops it there (before, the run wrote it all)."""
    src = tmp_path / "edges.txt"
    src.write_text("0 1\n1 2\n")
    out = tmp_path / "ds"
    need = (2**29 + 1) * 8
    if _core_free(tmp_path) < 2 * need:
        pytest.skip("needs 8 GiB free")
    proc = subprocess.Popen([console_script(), "convert", str(src), str(out), "--num-nodes", str(2**29)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = b""
        while b"sort" not in seen:  # the index is written in the "sort" stage
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, seen
            seen += chunk
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, (seen + err).decode()
    assert_nothing_left(out)


def test_in_process_handlers_are_put_back(tmp_path, tiny, cli):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    r = cli("convert", tiny, tmp_path / "ds", "--quiet")
    code, err = r.code, r.err
    assert code == 0, err
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("sig, text", [(signal.SIGTERM, "terminated (SIGTERM)"), (signal.SIGINT, "interrupted")])
def test_a_signal_after_the_rename_reports_success(tmp_path, tiny, cli, monkeypatch, sig, text):
    """A signal that arrives once the dataset is in place (here: while the summary prints) does
    not turn a finished build into a failure: exit 0, and the line says the dataset is kept."""
    from ringgnn.cli import data

    def summary(*a, **k):
        os.kill(os.getpid(), sig)
        time.sleep(0.5)  # the handler runs at the next bytecode, within this sleep

    monkeypatch.setattr(data, "_summary", summary)
    out = tmp_path / "ds"
    r = cli("convert", tiny, out, "--quiet")
    code, err = r.code, r.err
    assert code == 0, err
    assert err == f"ringgnn convert: {text} after {out} was complete; it is kept\n"
    assert main(["verify", str(out)]) == 0


def test_sigterm_in_process_unwinds_like_ctrl_c(tmp_path, big_bin32, cli):
    """SIGTERM seen by the progress relay cancels the core, which removes its staging directory."""
    out = tmp_path / "ds"

    class SendsTerm:
        def stage(self, name, total, unit):
            os.kill(os.getpid(), signal.SIGTERM)

        def advance(self, n):
            pass

    with _signals.interrupts():
        with pytest.raises(_signals.Terminated):
            ringgnn.convert(big_bin32, out, memory="256M", progress=SendsTerm())
    assert_nothing_left(out)
