"""The files ringgnn writes (``ringgnn._files``, ``crates/ringgnn-store/src/temp.rs``): temporaries
that a killed run leaves behind are removed by the next command writing beside them, and OS errors
name the path and the operation.

The full-disk cases run the CLI in a subprocess under ``RLIMIT_FSIZE`` (with SIGXFSZ ignored, as
Python does anyway), so a write past the limit fails with EFBIG (errno 27) as a full disk fails
with ENOSPC, on any filesystem and without root."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn import _core, _files

from conftest import console_script, write_bin
from ringgnn.training.loop import train

STALE = "ringgnn: removed a stale temporary left by a killed run: "


def temporaries(d: Path):
    return sorted(p.name for p in d.iterdir() if _files.MARKER in p.name)


def age(p: Path, seconds: float = 3600) -> None:
    """Make ``p`` look old: only its lock can keep it now."""
    t = time.time() - seconds
    os.utime(p, (t, t))


# --- temporaries ---------------------------------------------------------------------------------


def test_sigkill_during_generate_then_rerun_reclaims(cli, tmp_path):
    """Issue 20, case 3: a build killed with SIGKILL leaves its staging directory; the next build
    of the same output removes it and says so in one line."""
    out = tmp_path / "ds"
    proc = subprocess.Popen([console_script(), "generate", "rmat", str(out), "--scale", "21", "--edge-factor", "8",
                             "--quiet"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Wait until the build has written megabytes into its staging directory: it is mid-build.
        deadline = time.monotonic() + 60
        while True:
            staged = [p for p in tmp_path.iterdir() if p.name.startswith(f".ds{_files.MARKER}")]
            if staged and sum(f.stat().st_size for f in staged[0].rglob("*") if f.is_file()) > 4 << 20:
                break
            assert proc.poll() is None, f"the build ended before it could be killed: {proc.communicate()}"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert staged[0].exists() and not out.exists(), "SIGKILL leaves the staging directory behind"
    r = cli("generate", "rmat", out, "--scale", "4", "--quiet")
    assert r.code == 0, r.err
    lines = [line for line in r.err.splitlines() if line.startswith(STALE)]
    assert len(lines) == 1 and lines[0].startswith(f"{STALE}{staged[0]} (") and lines[0].endswith(" MiB)"), r.err
    assert temporaries(tmp_path) == [] and ringgnn.Dataset.open(out).num_nodes == 16


WRITER = """
import sys, time
from ringgnn._files import temporary
t = temporary(sys.argv[1], "last.pt")
open(t.path, "wb").write(b"x" * 1000)
print(t.path, flush=True)
time.sleep(600)
"""


def test_a_live_writers_temporary_is_never_removed_and_a_killed_ones_is(tmp_path):
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        path = Path(writer.stdout.readline().strip())
        assert path.name.startswith(f".last.pt{_files.MARKER}{writer.pid}-")
        age(path)  # past the grace period: the lock alone protects it
        assert _core.reclaim(str(tmp_path)) == []
        # A new temporary beside it (what every writer does first) leaves it too.
        with _files.temporary(tmp_path, "metrics.json") as mine:
            assert Path(mine.path).exists() and path.exists()
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        writer.kill()
        writer.communicate()
    assert _core.reclaim(str(tmp_path)) == [(str(path), 1000, f"{STALE[9:]}{path} (1000 B)")]
    assert not path.exists()


def test_a_fresh_unlocked_temporary_of_a_live_process_is_left_for_its_grace_period(tmp_path):
    # The window between creating a temporary and locking it: the pid in the name is alive.
    p = tmp_path / f".x{_files.MARKER}{os.getpid()}-1"
    p.mkdir()
    assert _core.reclaim(str(tmp_path)) == []
    age(p)
    assert [r[0] for r in _core.reclaim(str(tmp_path))] == [str(p)]


def test_names_that_are_not_ours_are_never_touched(tmp_path, capsys):
    others = [".ringgnn-infer-k2j3", ".ds.tmp-999999999-0000abcd", "metrics.json.tmp", ".pred.npy.tmp123.npy",
              f"ds{_files.MARKER}999999999-a", f".ds{_files.MARKER}999999999-a.bak"]
    for name in others:
        (tmp_path / name).mkdir()
        age(tmp_path / name)
    assert _files.reclaim(tmp_path) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(others)
    assert capsys.readouterr().err == ""


def test_replacing_writes_whole_or_not_at_all(tmp_path):
    out = tmp_path / "metrics.json"
    with _files.replacing(out) as tmp:
        assert Path(tmp).parent == tmp_path and _files.MARKER in tmp
        Path(tmp).write_text("new")
    assert out.read_text() == "new"
    with pytest.raises(ZeroDivisionError), _files.replacing(out) as tmp:
        Path(tmp).write_text("half")
        1 / 0
    assert out.read_text() == "new" and temporaries(tmp_path) == []


# --- OS errors name the path and the operation ---------------------------------------------------


def limited(*args: object, fsize: int) -> subprocess.CompletedProcess:
    """``ringgnn ARGS`` where no file may grow past ``fsize`` bytes (writes fail with EFBIG)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return subprocess.run([console_script(), *map(str, args), "--quiet"], preexec_fn=limit, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)


def assert_names(r: subprocess.CompletedProcess, command: str, operation: str, path: Path) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    want = f"ringgnn {command}: error: {operation} {path}: File too large [Errno 27]"
    assert lines[-1].startswith(want), f"{lines[-1]!r} does not start with {want!r}"


@pytest.fixture(scope="module")
def sbm_ds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("files") / "sbm"
    ringgnn.generate_sbm(out, nodes=2000, classes=4, avg_degree=10, feature_dim=16, seed=1)
    return out


@pytest.fixture(scope="module")
def one_layer_run(sbm_ds, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run") / "run"
    train(sbm_ds, fanouts=[5], layers=1, hidden=16, batch_size=256, epochs=1, out=str(run),
                  eval_mode="sampled", quiet=True, log=lambda s: None)
    return run


def test_full_disk_in_the_run_directory(sbm_ds, tmp_path):
    run = tmp_path / "run"
    # The checkpoint (weights and Adam's moments of 2 layers of 128) is the first file past 16 KiB.
    r = limited("train", sbm_ds, "--fanouts", "5,5", "--hidden", "128", "--epochs", "1", "--eval", "sampled",
                "--out", run, fsize=16 << 10)
    assert_names(r, "train", "writing the checkpoint", run / "best.pt")
    # The run directory the failed run made is removed whole (no best.pt, no temporaries in it).
    assert not run.exists() and temporaries(tmp_path) == []


def test_full_disk_while_writing_the_dataset(tmp_path):
    edges = np.random.default_rng(0).integers(0, 1000, size=(200_000, 2))
    src = write_bin(tmp_path / "e.bin32", edges, 32)  # 800 KB of indices
    out = tmp_path / "ds"
    r = limited("convert", src, out, fsize=64 << 10)
    assert_names(r, "convert", "building the dataset", out)
    assert f"(file {tmp_path}/.ds{_files.MARKER}" in r.stderr  # the file that failed, in the staging directory
    assert not out.exists() and temporaries(tmp_path) == []


def test_full_disk_while_writing_predictions(one_layer_run, tmp_path):
    out = tmp_path / "pred.npy"
    r = limited("predict", one_layer_run, "--out", out, "--probabilities", fsize=4 << 10)
    assert_names(r, "predict", "writing", out)
    assert not out.exists() and temporaries(tmp_path) == []


def test_full_disk_while_writing_layer_files(sbm_ds, tmp_path):
    run = tmp_path / "run"
    train(sbm_ds, fanouts=[5, 5], hidden=64, batch_size=256, epochs=1, out=str(run), eval_mode="sampled",
                  quiet=True, log=lambda s: None)
    out = tmp_path / "out" / "pred.npy"
    out.parent.mkdir()
    # The predictions (2000 int64) fit in 32 KiB; layer 1's file (2000 rows of 64 floats) does not.
    r = limited("predict", run, "--out", out, fsize=32 << 10)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ringgnn predict: error: writing {out.parent}/.ringgnn-infer{_files.MARKER}"), last
    assert "/layer1.bf16: File too large [Errno 27]" in last  # hidden layers are bf16 by default
    assert os.listdir(out.parent) == []


def test_full_disk_in_the_spill_directory(sbm_ds, tmp_path):
    r = limited("sample", sbm_ds, "--fanouts", "5,3", "--batch-size", "64", "--hyperbatch", "4", "--spill", "on",
                "--spill-dir", tmp_path, "--backend", "pread", fsize=4 << 10)
    assert_names(r, "sample", "sampling", sbm_ds)
    assert f"(file {tmp_path}/.ringgnn-spill-" in r.stderr
    assert os.listdir(tmp_path) == []


def test_os_errors_keeps_class_errno_and_filename(tmp_path):
    missing = tmp_path / "nope" / "x.json"
    with pytest.raises(FileNotFoundError) as e, _files.os_errors("writing", missing):
        open(missing, "w")
    err = e.value
    assert err.errno == 2 and err.filename == str(missing) and err.operation == "writing"
    assert _files.describe(err) == f"writing {missing}: No such file or directory [Errno 2]"
    # A failed write() carries no file name: the path given is used.
    with pytest.raises(OSError) as e, _files.os_errors("writing the checkpoint", "/run/last.pt"):
        raise OSError(28, "No space left on device")
    assert e.value.filename == "/run/last.pt" and e.value.errno == 28
    assert _files.describe(e.value) == "writing the checkpoint /run/last.pt: No space left on device [Errno 28]"
    # The innermost block names the operation; ringgnn's own errors pass unchanged.
    with pytest.raises(OSError) as e, _files.os_errors("training on", "/ds"), _files.os_errors("writing", "/m"):
        raise OSError(27, "File too large")
    assert _files.describe(e.value) == "writing /m: File too large [Errno 27]"
    with pytest.raises(ringgnn.DatasetExistsError) as e, _files.os_errors("building the dataset", "/ds"):
        raise _core.DatasetExistsError("/ds: already exists; pass --overwrite to replace it")
    assert str(e.value) == "/ds: already exists; pass --overwrite to replace it"


def test_report_json_is_unchanged(one_layer_run):
    # The run directory written through locked temporaries holds exactly its files.
    assert sorted(os.listdir(one_layer_run)) == sorted(["best.pt", "last.pt", "metrics.json"]
                                                       + (["curves.png"] if (one_layer_run / "curves.png").exists()
                                                          else []))
    assert json.loads((one_layer_run / "metrics.json").read_text())["best_epoch"] == 0
