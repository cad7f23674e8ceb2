"""Errors at the command edge (issue 34, items 5 and 12): every failure of a command is one line
``ringgnn CMD: error: ...`` and exit 1 (argparse's usage errors exit 2), never a traceback.

Numbers that mean nothing (NaN, infinities, negative or zero learning rates, counts past 64 bits)
are refused where they enter (``ringgnn._options``); a ``--resume`` from a checkpoint that is
empty, truncated, random bytes or of another model or dataset is refused naming the file and
what differs; Ctrl-C while the command is still importing exits 130 with one line; an unexpected
exception is one line with a hint (``RINGGNN_DEBUG=1`` for its traceback). Smaller defects:
``curves.png`` that cannot be written is a warning, a run that fails before its first checkpoint
leaves no run directory, the client refuses ids no request can carry, and range messages give the
last id (``ids 0..199`` for 200 nodes)."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn.cli import main

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

HINT = "(an input ringgnn does not check yet, or a bug: rerun with RINGGNN_DEBUG=1 for the traceback, and please " \
       "report it)"


def cli(*args) -> "tuple[int, str, str]":
    """``ringgnn ARGS`` in-process: (exit status, stdout, stderr); the same ``main`` as the command."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def command(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    """``python -m ringgnn ARGS`` in a subprocess (what the console script runs)."""
    return subprocess.run([sys.executable, "-m", "ringgnn", *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, timeout=timeout)


def one_error(code: int, err: str, prog: str, message: str) -> None:
    assert (code, err) == (1, f"{prog}: error: {message}\n")


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edge") / "ds"
    ringgnn.generate_sbm(out, nodes=200, classes=3, avg_degree=5, feature_dim=8, seed=1)
    return out


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Path:
    """Another dataset: 12 features, 4 classes (a model of ``ds`` does not fit it)."""
    out = tmp_path_factory.mktemp("edge") / "wide"
    ringgnn.generate_sbm(out, nodes=200, classes=4, avg_degree=5, feature_dim=12, seed=2)
    return out


@pytest.fixture(scope="module")
def run(ds, tmp_path_factory) -> Path:
    """A one-epoch run of ``ds``: best.pt, last.pt, metrics.json."""
    out = tmp_path_factory.mktemp("edge") / "run"
    code, _, err = cli("train", ds, "--epochs", 1, "--hidden", 16, "--out", out, "--quiet", "--eval", "sampled")
    assert code == 0, err
    return out


# --- numbers where they enter --------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--lr", "nan"], "--lr must be a finite number > 0, not nan"),
    (["--lr", "-1"], "--lr must be a finite number > 0, not -1.0"),
    (["--lr", "0"], "--lr must be a finite number > 0, not 0.0"),
    (["--lr", "inf"], "--lr must be a finite number > 0, not inf"),
    (["--dropout", "nan"], "--dropout must be in [0, 1), not nan"),
    (["--dropout", "1"], "--dropout must be in [0, 1), not 1.0"),
    (["--dropout", "-0.1"], "--dropout must be in [0, 1), not -0.1"),
    (["--task", "link", "--neg-ratio", "0"], "--neg-ratio must be a finite number > 0, not 0.0"),
    (["--task", "link", "--neg-ratio=-inf"], "--neg-ratio must be a finite number > 0, not -inf"),
    (["--task", "link", "--neg-ratio", "nan"], "--neg-ratio must be a finite number > 0, not nan"),
])
def test_train_refuses_meaningless_numbers(ds, tmp_path, args, message):
    code, _, err = cli("train", ds, *args, "--out", tmp_path / "run", "--quiet")
    one_error(code, err, "ringgnn train", message)
    assert not (tmp_path / "run").exists()


def test_the_command_refuses_a_nan_learning_rate_without_a_traceback(ds, tmp_path):
    r = command("train", ds, "--lr", "nan", "--out", tmp_path / "run", "--quiet")
    one_error(r.returncode, r.stderr, "ringgnn train", "--lr must be a finite number > 0, not nan")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, message", [
    (["--grace", "nan"], "--grace must be a finite number >= 0, not nan"),
    (["--grace", "-1"], "--grace must be a finite number >= 0, not -1.0"),
    (["--grace", "inf"], "--grace must be a finite number >= 0, not inf"),
    (["--max-wait-ms", "nan"], "--max-wait-ms must be in [0, 10000], not nan"),
    (["--max-wait-ms", "-5"], "--max-wait-ms must be in [0, 10000], not -5.0"),
    (["--max-wait-ms", "20000"], "--max-wait-ms must be in [0, 10000], not 20000.0"),
])
def test_serve_refuses_meaningless_numbers_before_it_listens(ds, args, message):
    code, out, err = cli("serve", ds, "--listen", "127.0.0.1:0", *args)
    one_error(code, err, "ringgnn serve", message)
    assert "listening" not in out


@pytest.mark.parametrize("args, message", [
    (["--feature-noise", "inf"], "feature_noise (--feature-noise) must be a finite number >= 0, not inf"),
    (["--feature-noise", "nan"], "feature_noise (--feature-noise) must be a finite number >= 0, not nan"),
    (["--feature-noise", "-1"], "feature_noise (--feature-noise) must be a finite number >= 0, not -1.0"),
    (["--avg-cites", "inf"], "avg_cites (--avg-cites) must be in [0, 256], not inf"),
    (["--homophily-writes", "nan"], "homophily_writes (--homophily-writes) must be in [0, 1], not nan"),
])
def test_generate_hetero_refuses_meaningless_numbers(tmp_path, args, message):
    code, _, err = cli("generate", "hetero", tmp_path / "h", "--papers", 50, "--authors", 20, "--institutions", 5,
                       *args, "--quiet")
    one_error(code, err, "ringgnn generate hetero", message)
    assert not (tmp_path / "h").exists()


BIG = 2**64


@pytest.mark.parametrize("args, flag, value", [
    (["sample", "DS", "--batch-size", BIG], "--batch-size", BIG),
    (["sample", "DS", "--seed", 10**30], "--seed", 10**30),
    (["sample", "DS", "--threads", BIG], "--threads", BIG),
    (["generate", "rmat", "OUT", "--scale", 4, "--edge-factor", BIG], "--edge-factor", BIG),
    (["generate", "sbm", "OUT", "--nodes", BIG, "--classes", 2, "--avg-degree", 2, "--feature-dim", 2], "--nodes", BIG),
])
def test_counts_past_64_bits_are_usage_errors(ds, tmp_path, args, flag, value):
    args = [ds if a == "DS" else tmp_path / "out" if a == "OUT" else a for a in args]
    code, _, err = cli(*args)
    assert code == 2 and err.splitlines()[-1].endswith(
        f"error: argument {flag}: the value must be at most 2^64 - 1 (18446744073709551615), not {value}"), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


# --- --resume from a checkpoint that is not this run's --------------------------------------------


def _resume(tmp_path, run, last: bytes = None, dataset=None, extra=()) -> "tuple[int, str, Path]":
    """--resume of a copy of ``run`` whose last.pt holds ``last`` (as given: the copy's own)."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(run, out)
    if last is not None:
        (out / "last.pt").write_bytes(last)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = cli("train", dataset, "--epochs", 2, "--hidden", 16, "--out", out, "--quiet", "--resume",
                       "--eval", "sampled", *extra)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written, nothing removed
    return code, err, out


def _saved(obj) -> bytes:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize("case", ["truncated", "random", "empty", "half", "legacy"])
def test_resume_from_an_unreadable_checkpoint_names_it_and_says_what_it_is(ds, run, tmp_path, case):
    good = (run / "last.pt").read_bytes()
    data = {"truncated": good[:3000], "random": np.random.default_rng(1).bytes(5000), "empty": b"",
            "half": good[: len(good) // 2],
            "legacy": b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19" + b"\0" * 64}[case]
    code, err, out = _resume(tmp_path, run, data, ds)
    last, best = out / "last.pt", out / "best.pt"
    advice = f"copy {best} over it to resume from the best epoch, or start over with --overwrite"
    what = {"empty": "the file is empty: a copy or a write that did not finish",
            "legacy": None}.get(case, f"the file is truncated or corrupt: {len(data):,} bytes, not a whole archive in "
                                      "torch.save's zip format")
    if case == "legacy":
        message = (f"{last}: a checkpoint in torch's format before 1.6; re-save it with torch >= 1.6 "
                   "(torch.save(torch.load(path), path))")
    else:
        message = f"{last}: not a readable checkpoint ({what}); {advice}"
    one_error(code, err, "ringgnn train", message)


def test_resume_of_another_runs_checkpoint_says_what_differs(ds, wide, run, tmp_path):
    last = tmp_path / "copy" / "last.pt"
    code, err, _ = _resume(tmp_path, run, dataset=wide)
    one_error(code, err, "ringgnn train", f"--resume: {last} does not fit the model built for this dataset: "
              "convs.0.lin_l.weight is [16, 8] there, [16, 12] here; resume on the dataset it was trained on, or use "
              "another --out")
    for extra, was in ((["--model", "gcn"], "model=sage (now gcn)"), (["--hidden", "32"], "hidden=16 (now 32)")):
        import shutil

        shutil.rmtree(tmp_path / "copy")
        code, err, _ = _resume(tmp_path, run, dataset=ds, extra=extra)
        one_error(code, err, "ringgnn train",
                  f"--resume: {last} was trained with {was}; use the same options or another --out")


@pytest.mark.parametrize("state, missing", [
    ({"model": {}}, "optimizer, epoch, args, metrics, rng"),
    ([1, 2, 3], "model, optimizer, epoch, args, metrics, rng"),
    ({"model": {}, "optimizer": {}, "epoch": "0", "args": {}, "metrics": {"epochs": []}, "rng": torch.zeros(1)},
     "epoch"),
])
def test_resume_of_a_file_that_is_not_a_training_checkpoint(ds, run, tmp_path, state, missing):
    code, err, out = _resume(tmp_path, run, _saved(state), ds)
    one_error(code, err, "ringgnn train", f"--resume: {out / 'last.pt'} is not a checkpoint of `ringgnn train` (no "
              f"valid {missing}); start over with --overwrite, or use another --out")


def test_inference_from_a_truncated_checkpoint_names_it(ds, run, tmp_path):
    import shutil

    shutil.copytree(run, tmp_path / "r")
    best = tmp_path / "r" / "best.pt"
    best.write_bytes(best.read_bytes()[:1000])
    code, _, err = cli("predict", tmp_path / "r", "--dataset", ds, "--out", tmp_path / "p.npy", "--quiet")
    one_error(code, err, "ringgnn predict", f"{best}: not a readable checkpoint (the file is truncated or corrupt: "
              "1,000 bytes, not a whole archive in torch.save's zip format); use an earlier copy of it (a run keeps "
              "best.pt and last.pt) or train the run again")
    assert not (tmp_path / "p.npy").exists()


# --- the one place errors become lines ------------------------------------------------------------


@pytest.mark.parametrize("error, line", [
    (ValueError("Invalid learning rate: nan\n  second line"),
     f"unexpected ValueError: Invalid learning rate: nan {HINT}"),
    (TypeError(), f"unexpected TypeError {HINT}"),
    (MemoryError("Unable to allocate 256. GiB"), "out of memory (Unable to allocate 256. GiB); ask for less (--memory, "
                                                  "--batch-size, the model's size) or run on a machine with more"),
    (ringgnn.InputError("first\nsecond"), "first second"),
    (FileNotFoundError(2, "No such file or directory", "/x/y"), "/x/y: No such file or directory"),
])
def test_every_failure_is_one_line_and_exit_1(ds, monkeypatch, error, line):
    from ringgnn.cli import data

    def fail(args):
        raise error

    monkeypatch.setattr(data, "cmd_info", fail)
    code, _, err = cli("info", ds)
    one_error(code, err, "ringgnn info", line)
    monkeypatch.setenv("RINGGNN_DEBUG", "1")
    code, _, err = cli("info", ds)
    assert code == 1 and err.startswith("Traceback (most recent call last):\n") and err.endswith(
        f"ringgnn info: error: {line}\n")
    monkeypatch.setenv("RINGGNN_DEBUG", "0")
    assert cli("info", ds)[2] == f"ringgnn info: error: {line}\n"


@pytest.mark.parametrize("args", [["info", "{ds}", "--json"], ["verify", "{ds}"], ["report", "{run}", "--json"]])
def test_a_reader_gone_before_the_output_stops_the_command_quietly(ds, run, args):
    """``ringgnn info --json | head -1``: stdout is a pipe whose reader has closed (here before the
    first write, so that the test does not race); the command stops as SIGPIPE stops a Unix tool,
    status 141, with no error line and no traceback (its progress bars on stderr stay)."""
    read, write = os.pipe()
    os.close(read)
    argv = [a.format(ds=ds, run=run) for a in args]
    with subprocess.Popen([sys.executable, "-m", "ringgnn", *argv], stdin=subprocess.DEVNULL, stdout=write,
                          stderr=subprocess.PIPE, text=True) as p:
        os.close(write)
        err = p.stderr.read()
        code = p.wait(timeout=120)
    assert code == 128 + signal.SIGPIPE, err
    assert "Traceback" not in err and "error" not in err and "Broken pipe" not in err, err
    if args[0] != "verify":
        assert err == ""


def test_a_broken_pipe_that_is_not_stdout_is_an_error():
    """A BrokenPipeError of anything else (a server's socket) while stdout's reader is there is
    the command's one error line and exit 1, not a quiet stop."""
    code = ("import sys\nfrom ringgnn import cli\nfrom ringgnn.cli import data\n"
            "def fail(args):\n    raise BrokenPipeError(32, 'Broken pipe')\n"
            "data.cmd_info = fail\nsys.exit(cli.main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "info", "x"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "ringgnn info: error: [Errno 32] Broken pipe\n")


def _interrupt_while_importing(module: str, *args) -> "tuple[int, str]":
    """Start ``ringgnn ARGS`` with Python's import log on stderr, send SIGINT as soon as
    ``module`` is imported, and return (exit status, stderr without the import log)."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    lines = []
    with subprocess.Popen([sys.executable, "-m", "ringgnn", *map(str, args)], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env) as p:
        sent = False
        for line in p.stderr:
            lines.append(line)
            if line.startswith("import time:") and line.rstrip().rsplit("|", 1)[-1].strip() == module:
                p.send_signal(signal.SIGINT)
                sent = True
                break
        lines += p.stderr.read().splitlines(True)
        code = p.wait(timeout=120)
    if not sent:
        pytest.fail(f"{module} was never imported: {''.join(lines)[-2000:]}")
    return code, "".join(line for line in lines if not line.startswith("import time:"))


@pytest.mark.parametrize("module, prog", [("numpy", "ringgnn"), ("torch", "ringgnn train")])
def test_ctrl_c_while_the_command_starts_is_one_line_and_130(ds, tmp_path, module, prog):
    """``import ringgnn`` imports nothing: numpy, the core and PyTorch load inside the command's
    handler, so Ctrl-C while they load ends as Ctrl-C later does."""
    code, err = _interrupt_while_importing(module, "train", ds, "--epochs", 1, "--out", tmp_path / "run", "--quiet")
    assert (code, err) == (130, f"{prog}: interrupted\n")
    assert not (tmp_path / "run").exists()


def test_importing_the_package_imports_nothing_heavy():
    r = subprocess.run([sys.executable, "-c", "import sys, ringgnn, ringgnn.cli; "
                        "print(sorted(m for m in ('numpy', 'torch', 'grpc', 'ringgnn._core') if m in sys.modules))"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout == "[]\n", r.stderr
    # and every public name still comes on first use, the one type checkers see
    import ast

    tree = ast.parse(Path(ringgnn.__file__).read_text())
    checked = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {(a.name, "." * n.level + n.module) for n in checked.body for a in n.names}
    assert seen == set(ringgnn._EXPORTS.items())
    for name in ringgnn.__all__:
        assert getattr(ringgnn, name) is getattr(importlib.import_module(ringgnn._EXPORTS[name], "ringgnn"), name)
    assert ringgnn.inference.run.infer is ringgnn.infer
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        ringgnn.nope


# --- item 12 --------------------------------------------------------------------------------------


def test_curves_that_cannot_be_written_are_a_warning(ds, tmp_path):
    out = tmp_path / "run"
    (out / "curves.png").mkdir(parents=True)
    r = command("train", ds, "--epochs", 2, "--hidden", 8, "--out", out, "--quiet", "--eval", "sampled")
    assert r.returncode == 0, r.stderr
    warning = (f"ringgnn: warning: no training curves (writing the training curves {out}/curves.png: Is a directory "
               f"[Errno 21]); the metrics are in {out}/metrics.json")
    assert [line for line in r.stderr.splitlines() if "curves" in line] == [warning]  # once, not once an epoch
    assert "Traceback" not in r.stderr
    assert (out / "metrics.json").exists() and (out / "last.pt").exists()


@pytest.mark.parametrize("failure, code, line", [
    (ringgnn.InputError("injected"), 1, "ringgnn train: error: injected\n"),
    (KeyboardInterrupt(), 130, "ringgnn train: interrupted\n"),
])
def test_a_failed_run_leaves_no_run_directory_but_never_removes_the_users(ds, tmp_path, monkeypatch, failure, code,
                                                                         line):
    import ringgnn.training.loop

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(ringgnn.training.loop, "_train_epoch", fail)
    new = tmp_path / "a" / "b" / "run"
    got = cli("train", ds, "--epochs", 1, "--out", new, "--quiet")
    assert (got[0], got[2]) == (code, line)
    assert not (tmp_path / "a").exists()  # the run directory and the parents it made
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    got = cli("train", ds, "--epochs", 1, "--out", mine, "--quiet")
    assert (got[0], got[2]) == (code, line)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_failed_resume_keeps_the_run(ds, run, tmp_path, monkeypatch):
    import shutil

    import ringgnn.training.loop

    shutil.copytree(run, tmp_path / "r")
    monkeypatch.setattr(ringgnn.training.loop, "_train_epoch", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    got = cli("train", ds, "--epochs", 2, "--hidden", 16, "--out", tmp_path / "r", "--quiet", "--resume", "--eval",
              "sampled")
    assert got[0] == 130 and (tmp_path / "r" / "last.pt").read_bytes() == (run / "last.pt").read_bytes()


def test_the_client_refuses_ids_no_request_can_carry():
    pytest.importorskip("grpc")
    big = 2**63
    with ringgnn.Client("127.0.0.1:9") as c:  # no server: the ids are refused before any call
        for call, nodes, shown in [("sample", [big], big),
                                   ("sample", np.array([2**64 - 1], dtype=np.uint64), 2**64 - 1),
                                   ("features", [5, big + 1], big + 1), ("predict", [2**70], 2**70),
                                   ("embed", (3, -(2**63) - 1), -(2**63) - 1)]:
            with pytest.raises(ringgnn.InputError) as e:
                getattr(c, call)(nodes)
            assert str(e.value) == (f"nodes: node id {shown} is out of range: ids are 0 to the dataset's node count - "
                                    "1, and a request's ids are at most 2^63 - 1")
        with pytest.raises(ringgnn.InputError, match=r"^dst: node id 9223372036854775808 is out of range"):
            c.score([1], np.array([big], dtype=np.uint64))
        for kwargs, message in [(dict(seed=-1), "seed must be >= 0, not -1"),
                                (dict(seed=2**64), "seed must be at most 2^64 - 1 (18446744073709551615), not "
                                                   "18446744073709551616"),
                                (dict(fanouts=[2**31]), "fanout 2147483648 is out of range: use a positive number of "
                                                        "neighbors (at most 2147483647), or -1 for all of them"),
                                (dict(fanouts=["x"]), "fanout 'x' is not an integer: use a positive number of "
                                                      "neighbors, or -1 for all of them")]:
            with pytest.raises(ringgnn.InputError) as e:
                c.sample([1], **kwargs)
            assert str(e.value) == message


@pytest.mark.parametrize("frontend", ["rust", "grpcio"])
def test_the_servers_range_message_gives_the_last_id(ds, frontend):
    pytest.importorskip("grpc")
    from ringgnn.serving.server import Server

    s = Server(str(ds), listen="127.0.0.1:0", frontend=frontend, memory="1G", threads=1)
    s.start()
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            for call, node in (("sample", 200), ("features", 200), ("sample", -1)):
                with pytest.raises(ringgnn.InputError) as e:
                    getattr(c, call)([node])
                assert str(e.value).endswith(f"node {node} is out of range: the graph has 200 nodes (ids 0..199)")
    finally:
        s.stop(1)
