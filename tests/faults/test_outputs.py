"""Fault injection for output files (issue 34, items 3, 5 and 9): a full disk while ``embed``,
``predict``, the importers, the generators and the embedding tables write (an error naming the
file, exit 1, nothing left behind: never SIGBUS, exit 135, or a traceback), and ``--overwrite``
over a dataset folder that also holds the user's own files (kept, never deleted).

A full disk is a tmpfs of a few KiB mounted for the test (skipped where mounting is not allowed);
"a disk that fills while we write" is that tmpfs with all but a few KiB taken by a filler file at
a chosen point of the run (after any check made before writing).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
import yaml

import ringgnn
from ringgnn import _files
from ringgnn._files import allocated_memmap, describe, save_npy

NO_SPACE = "No space left on device [Errno 28]"


def fill(d: Path, keep: int = 4096) -> None:
    """Take all of ``d``'s free space but ``keep`` bytes, as another writer would."""
    st = os.statvfs(d)
    with open(d / "filler", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - keep)


def one_error(err: str, command: str) -> str:
    """The one line of a failed command's stderr, checked to be its error line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ringgnn {command}: error: "), err
    return lines[0]


# --- embed and predict ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A one-epoch GraphSAGE run on a 2,000-node planted graph (width 64: embed writes 512 KiB)."""
    from ringgnn.training.loop import train

    root = tmp_path_factory.mktemp("outputs")
    ringgnn.generate_sbm(root / "sbm", nodes=2000, classes=4, avg_degree=10, feature_dim=16, seed=1)
    train(root / "sbm", model="sage", out=str(root / "run"), batch_size=256, epochs=1, lr=0.01, quiet=True,
          eval_mode="sampled", log=lambda s: None)
    return root / "run"


@pytest.mark.parametrize("command, args, size, fails_at", [
    ("embed", [], "16k", "out"),                # the output's allocation (512 KiB)
    ("embed", [], "256k", "out"),
    ("embed", ["--layer", "2"], "128k", "layer"),  # the output (32 KiB) fits, layer 1's file (256 KiB) does not
    ("predict", [], "8k", "out"),               # predictions (16 KiB)
    ("predict", [], "64k", "layer"),
])
def test_a_full_disk_is_an_error_naming_the_file_and_leaves_nothing(run, disk, command, args, size, fails_at):
    d = disk(size)
    out = d / f"{command}.npy"
    r = subprocess.run([sys.executable, "-m", "ringgnn", command, str(run), "--out", str(out), "--quiet", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, f"exit {r.returncode} (-7: SIGBUS): {r.stderr}"
    line = one_error(r.stderr, command)
    if fails_at == "out":
        assert line == f"ringgnn {command}: error: writing {out}: {NO_SPACE}"
    else:  # a layer file in the hidden working directory beside the output
        assert re.fullmatch(rf"ringgnn {command}: error: writing {re.escape(str(d))}/\S+: {re.escape(NO_SPACE)}", line)
    assert os.listdir(d) == [], "no output and no hidden temporaries"
    assert not [p for p in run.iterdir() if p.name.startswith(".")]


# --- the writers' one owner ----------------------------------------------------------------------


def test_a_mapped_output_is_allocated_before_it_is_mapped(disk):
    d = disk("1m")
    a = allocated_memmap(d / "a.npy", np.float32, (1000, 50))
    assert os.stat(d / "a.npy").st_blocks * 512 >= a.offset + a.nbytes, "every byte allocated, not a sparse file"
    a[:] = 1.5
    del a
    assert (np.load(d / "a.npy") == 1.5).all()


def test_where_posix_fallocate_is_unsupported_zeros_are_written(disk, monkeypatch):
    d = disk("1m")

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    a = allocated_memmap(d / "a.npy", np.int64, (3000,))
    assert os.stat(d / "a.npy").st_blocks * 512 >= a.offset + a.nbytes
    assert not a.any()
    del a
    with pytest.raises(OSError) as e:
        allocated_memmap(d / "big.npy", np.int64, (200_000,))  # 1.6 MB on a 1 MB disk
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(d / "big.npy")
    assert sorted(os.listdir(d)) == ["a.npy"]


@pytest.mark.parametrize("shape", [(5000,), (100, 300), (0,)])
def test_the_writers_raise_enospc_naming_the_file_and_remove_it(disk, shape):
    d = disk("16k")
    fill(d, keep=8192)
    array = np.ones(shape, dtype=np.float64)
    for write in (lambda p: allocated_memmap(p, array.dtype, shape), lambda p: save_npy(p, array)):
        path = d / "x.npy"
        if array.nbytes < 4096:
            write(path)  # fits
            os.remove(path)
            continue
        with pytest.raises(OSError) as e:
            with _files.os_errors("writing", path):
                write(path)
        assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
        assert describe(e.value) == f"writing {path}: {NO_SPACE}"
        assert os.listdir(d) == ["filler"]


def test_embedding_tables_on_a_full_disk_leave_no_file(disk):
    from ringgnn.models.tables import FileTable

    d = disk("100k")  # the weights (64 KiB) fit, their first moment does not
    with pytest.raises(OSError) as e:
        FileTable(str(d / "tables"), "author", 1000, 16, create=True)
    assert describe(e.value) == f"creating the embedding table file {d}/tables/author.exp_avg.npy: {NO_SPACE}"
    assert os.listdir(d / "tables") == []


def test_from_pyg_on_a_disk_that_fills_is_an_error_naming_the_file(disk, monkeypatch):
    import torch
    from torch_geometric.data import Data

    from ringgnn.importers import pyg_io

    d = disk("4m")
    edges = pyg_io._Stager.edges

    def filled_first(self, *a, **kw):
        fill(d)
        return edges(self, *a, **kw)

    monkeypatch.setattr(pyg_io._Stager, "edges", filled_first)
    # The disk fills after the size check passed (another writer): what is left is ENOSPC itself.
    monkeypatch.setattr(ringgnn._core, "check_room", lambda *a: None)
    n = 20_000
    data = Data(edge_index=torch.randint(0, n, (2, 2 * n)), x=torch.randn(n, 8), num_nodes=n)
    with pytest.raises(OSError) as e:
        ringgnn.from_pyg(data, d / "ds")
    assert e.value.errno == errno.ENOSPC
    assert re.fullmatch(rf"writing {re.escape(str(d))}/\S+: {re.escape(NO_SPACE)}", describe(e.value))
    assert os.listdir(d) == ["filler"]


def test_generate_hetero_on_a_disk_that_fills_exits_1_and_leaves_nothing(disk, cli, monkeypatch):
    from ringgnn.data import generate as hetero_gen

    d = disk("4m")
    advance, filled = hetero_gen._advance, []

    def filled_once(*a):
        if not filled:
            fill(d)
            filled.append(d)
        advance(*a)

    monkeypatch.setattr(hetero_gen, "_advance", filled_once)
    out = d / "mag"
    r = cli("generate", "hetero", out, "--papers", 5000, "--authors", 300, "--institutions", 5, "--quiet")
    assert r.code == 1
    # The paper labels or features, mapped: the first files written after the authors' edges.
    line = one_error(r.err, "generate hetero")
    assert re.fullmatch(rf"ringgnn generate hetero: error: generating the dataset {out}: {re.escape(NO_SPACE)}"
                        rf" \(file {re.escape(str(d))}/\S+/(labels|features)\.npy\)", line), line
    assert os.listdir(d) == ["filler"]


def test_graphbolt_labels_on_a_disk_that_fills_exit_1_and_leave_nothing(disk, cli, tmp_path, monkeypatch):
    from ringgnn.importers import graphbolt

    src = tmp_path / "gb"
    src.mkdir()
    n = 50_000
    np.save(src / "edges.npy", np.stack([np.arange(n - 1), np.arange(1, n)]))
    np.save(src / "seeds.npy", np.arange(100))
    np.save(src / "labels.npy", np.arange(100) % 3)
    files = [{"name": "seeds", "format": "numpy", "path": "seeds.npy"},
             {"name": "labels", "format": "numpy", "path": "labels.npy"}]
    meta = {"dataset_name": "chain",
            "graph": {"nodes": [{"num": n}], "edges": [{"format": "numpy", "path": "edges.npy"}]},
            "tasks": [{"name": "nc", "num_classes": 3, "train_set": [{"data": files}]}]}
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta))
    d = disk("4m")
    task = graphbolt._Staging.task

    def filled_first(self, *a, **kw):
        fill(d)
        return task(self, *a, **kw)

    monkeypatch.setattr(graphbolt._Staging, "task", filled_first)
    # The disk fills after the size check passed (another writer): what is left is ENOSPC itself.
    monkeypatch.setattr(ringgnn._core, "check_room", lambda *a: None)
    r = cli("convert", src / "metadata.yaml", d / "ds", "--quiet")
    assert r.code == 1
    line = one_error(r.err, "convert")
    assert re.fullmatch(rf"ringgnn convert: error: writing {re.escape(str(d))}/\S+/labels-0\.npy: "
                        rf"{re.escape(NO_SPACE)}", line), line
    assert os.listdir(d) == ["filler"]


# --- --overwrite beside the user's files ---------------------------------------------------------


def _edges(tmp_path: Path) -> Path:
    path = tmp_path / "edges.tsv"
    path.write_text("".join(f"{i}\t{(i * 7 + 1) % 50}\n" for i in range(50)))
    return path


def _pyg(out: Path, overwrite: bool) -> Tuple[int, str]:
    """from_pyg as a command would report it: (exit status, stderr)."""
    import torch
    from torch_geometric.data import Data

    data = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), x=torch.ones(4, 2), num_nodes=4)
    try:
        ringgnn.from_pyg(data, out, overwrite=overwrite)
    except ringgnn.RingGnnError as e:
        return 1, f"ringgnn from_pyg: error: {e}\n"
    return 0, ""


def _run(cli, *args) -> Tuple[int, str]:
    r = cli(*args)
    return r.code, r.err


#: Every kind of build, each as (cli, tmp_path, out, *options) -> (exit status, stderr).
BUILDS = {
    "convert": lambda cli, tmp, out, *o: _run(cli, "convert", _edges(tmp), out, "--quiet", *o),
    "generate rmat": lambda cli, tmp, out, *o: _run(cli, "generate", "rmat", out, "--scale", 6, "--quiet", *o),
    "generate sbm": lambda cli, tmp, out, *o: _run(cli, "generate", "sbm", out, "--nodes", 200, "--classes", 2,
                                                   "--avg-degree", 4, "--feature-dim", 4, "--quiet", *o),
    "generate hetero": lambda cli, tmp, out, *o: _run(cli, "generate", "hetero", out, "--papers", 100, "--authors",
                                                      30, "--institutions", 3, "--quiet", *o),
    "from_pyg": lambda cli, tmp, out, *o: _pyg(out, bool(o)),
}


def _owned(out: Path):
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    return {"manifest.json"} | {f["path"] for f in manifest["files"].values()}


@pytest.mark.parametrize("build", BUILDS)
def test_overwrite_replaces_the_dataset_and_keeps_the_user_s_files(cli, tmp_path, build):
    out = tmp_path / "ds"
    assert BUILDS[build](cli, tmp_path, out)[0] == 0
    (out / "notes.txt").write_text("my notes")
    (out / "sub" / "raw").mkdir(parents=True)
    (out / "sub" / "raw" / "input.csv").write_text("1,2\n")
    (out / "latest").symlink_to("notes.txt")
    (out / "old.bin").write_text("not listed in the manifest: mine")
    inode = (out / "notes.txt").stat().st_ino
    code, err = BUILDS[build](cli, tmp_path, out, "--overwrite")
    assert code == 0, err
    assert sorted(os.listdir(out)) == sorted(_owned(out) | {"notes.txt", "sub", "latest", "old.bin"})
    assert (out / "notes.txt").read_text() == "my notes" and (out / "notes.txt").stat().st_ino == inode
    assert (out / "sub" / "raw" / "input.csv").read_text() == "1,2\n"
    assert os.readlink(out / "latest") == "notes.txt"
    assert (out / "old.bin").read_text() == "not listed in the manifest: mine"
    assert cli("verify", out).code == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temporaries"


@pytest.mark.parametrize("build", BUILDS)
def test_overwrite_refuses_a_folder_that_is_not_a_dataset_and_empties_nothing(cli, tmp_path, build, monkeypatch):
    from ringgnn.data import generate as hetero_gen
    from ringgnn.importers import pyg_io

    def staged(*a, **kw):
        raise AssertionError("staged before the output was checked")

    monkeypatch.setattr(pyg_io._Stager, "edges", staged)
    monkeypatch.setattr(hetero_gen, "_write_intermediates", staged)
    out = tmp_path / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("my notes")
    code, err = BUILDS[build](cli, tmp_path, out, "--overwrite")
    assert code == 1
    assert one_error(err, build) == (f"ringgnn {build}: error: {out}: refusing to overwrite, it is not a ringgnn "
                                     "dataset or an empty directory; choose another output path")
    assert sorted(os.listdir(out)) == ["notes.txt", "sub"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_user_file_named_like_a_new_dataset_file_is_refused_before_anything_is_replaced(cli, tmp_path):
    out = tmp_path / "ds"
    assert cli("convert", _edges(tmp_path), out, "--quiet").code == 0
    before = (out / "manifest.json").read_text()
    (out / "labels.bin").write_text("mine")
    np.save(tmp_path / "y.npy", np.arange(50) % 3)
    r = cli("convert", _edges(tmp_path), out, "--labels", tmp_path / "y.npy", "--quiet", "--overwrite")
    assert r.code == 1
    assert one_error(r.err, "convert") == (
        f"ringgnn convert: error: {out}/labels.bin: not part of the dataset it replaces, so --overwrite keeps it, but "
        f"the new dataset has a file of that name; move it out of {out} and run again")
    assert (out / "manifest.json").read_text() == before and (out / "labels.bin").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_user_file_that_cannot_be_linked_is_refused_before_anything_is_replaced(cli, tmp_path, disk):
    out = tmp_path / "ds"
    assert cli("convert", _edges(tmp_path), out, "--quiet").code == 0
    before = (out / "manifest.json").read_text()
    other = disk("64k", at=out / "mnt")  # another file system inside the folder: no hard links across
    (other / "data.csv").write_text("1,2\n")
    r = cli("convert", _edges(tmp_path), out, "--quiet", "--overwrite")
    assert r.code == 1
    assert one_error(r.err, "convert") == (
        f"ringgnn convert: error: {other}/data.csv: not part of the dataset it replaces, so --overwrite keeps it, but "
        f"it cannot be linked into the new dataset (Invalid cross-device link (os error 18)); move it out of {out} "
        "and run again")
    assert (out / "manifest.json").read_text() == before and (other / "data.csv").read_text() == "1,2\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
