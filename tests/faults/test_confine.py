"""Dataset descriptions stay inside their folder, and errors never echo a file's content
(issue 34, item 1): :mod:`ringgnn.importers._described` (paths a description names) and
:mod:`ringgnn._excerpt` (what an error may quote), through the GraphBolt and OGB importers, the
Rust edge-list reader and the CLI.

A secret file with a random marker lies outside the dataset's folder; descriptions point at it
in every way (absolute, ``..``, ``a/../..``, a symlink inside the folder, a symlinked folder) from
every kind of entry. A path that leaves the folder is refused before anything is read; a
symlink inside is followed (the documented way to use a file elsewhere), and whatever it points
at fails the conversion without its content reaching the message. Files the user names directly
are quoted, at most ``EXCERPT_CHARS`` characters of a line."""

from __future__ import annotations

import gzip
import json
import os
import re
import string
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
import ringgnn
from ringgnn import InputError, _core
from ringgnn.data import build
from ringgnn.importers._described import resolve
from ringgnn._excerpt import EXCERPT_CHARS, WITHHELD, excerpt
from ringgnn.cli import main
from ringgnn.importers.graphbolt import convert_graphbolt
from ringgnn.importers.ogb import convert_ogb

N = 4
EDGES = [(0, 1), (1, 2), (2, 3)]


def refusal(yaml_path: Path, where: str, rel: str, problem: str) -> str:
    folder = yaml_path.parent
    return (f"{yaml_path}: {where}: '{excerpt(rel)}' {problem}; paths in a dataset description stay inside its folder; "
            f"to use a file elsewhere, put a symlink to it inside the folder (ln -s /path/to/file {folder}/NAME) "
            "and name the link")


def graphbolt_dir(root: Path) -> dict:
    """A homogeneous GraphBolt dataset under ``root``: csv edges, a feature, one task."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "edges.csv").write_text("".join(f"{s},{d}\n" for s, d in EDGES))
    np.save(root / "feat.npy", np.arange(N * 2, dtype=np.float32).reshape(N, 2))
    np.save(root / "train.npy", np.array([0, 1]))
    np.save(root / "train_labels.npy", np.array([1, 0]))
    np.save(root / "val.npy", np.array([2]))
    return {
        "graph": {"nodes": [{"num": N}], "edges": [{"format": "csv", "path": "edges.csv"}]},
        "feature_data": [{"domain": "node", "name": "feat", "format": "numpy", "path": "feat.npy"}],
        "tasks": [{"name": "nc", "num_classes": 2,
                   "train_set": [{"data": [{"name": "seeds", "format": "numpy", "path": "train.npy"},
                                           {"name": "labels", "format": "numpy", "path": "train_labels.npy"}]}],
                   "validation_set": [{"data": [{"name": "seeds", "format": "numpy", "path": "val.npy"}]}]}],
    }


#: Each kind of entry that names a file: (field, the entry in the metadata, its formats).
ENTRIES = {
    "graph.edges[0]": (lambda m: m["graph"]["edges"][0], ("csv", "numpy", "torch")),
    "feature_data[0]": (lambda m: m["feature_data"][0], ("numpy", "torch")),
    "tasks[0].train_set[0].data[0]": (lambda m: m["tasks"][0]["train_set"][0]["data"][0], ("numpy", "torch")),
    "tasks[0].train_set[0].data[1]": (lambda m: m["tasks"][0]["train_set"][0]["data"][1], ("numpy", "torch")),
    "tasks[0].validation_set[0].data[0]": (lambda m: m["tasks"][0]["validation_set"][0]["data"][0],
                                           ("numpy", "torch")),
}


def write(root: Path, meta: dict) -> Path:
    path = root / "metadata.yaml"
    path.write_text(yaml.safe_dump(meta))
    return path


def assert_nothing_left(parent: Path, out: Path):
    assert not out.exists()
    assert not [p.name for p in parent.iterdir() if "ringgnn-tmp" in p.name]


# --- the owner: resolve ----------------------------------------------------------------------


def test_resolve_keeps_paths_inside_and_normalises(tmp_path):
    f = str(tmp_path)
    assert resolve(f, "a/b.npy", "x") == os.path.join(f, "a", "b.npy")
    assert resolve(f, "./a/../b.npy", "x") == os.path.join(f, "b.npy")  # the kernel never walks the '..'
    assert resolve(f, "a//b/", "x") == os.path.join(f, "a", "b")
    assert resolve(f, "..b", "x") == os.path.join(f, "..b")  # a name starting with dots is a name
    for rel, problem in [("/etc/shadow", "is an absolute path"), ("//etc/passwd", "is an absolute path"),
                         ("../x", "climbs out of the folder with '..'"), ("..", "climbs out of the folder with '..'"),
                         ("a/../../x", "climbs out of the folder with '..'"),
                         ("a/b/../../../etc/passwd", "climbs out of the folder with '..'"),
                         ("x\0y", "holds a NUL character")]:
        with pytest.raises(InputError) as e:
            resolve(f, rel, "d/metadata.yaml: graph.edges[0].path")
        assert str(e.value) == (
            f"d/metadata.yaml: graph.edges[0].path: '{excerpt(rel)}' {problem}; paths in a dataset description "
            f"stay inside its folder; to use a file elsewhere, put a symlink to it inside the folder "
            f"(ln -s /path/to/file {f}/NAME) and name the link")


def test_excerpt_is_short_and_escaped():
    assert excerpt("abc") == "abc"
    assert excerpt(b"a\tb\x00") == "a\\tb\\x00"
    long = "y" * 500
    assert excerpt(long) == "y" * EXCERPT_CHARS + "..."
    assert 40 <= EXCERPT_CHARS <= 60


# --- hostile GraphBolt descriptions ------------------------------------------------------------


@pytest.mark.parametrize("field", list(ENTRIES))
@pytest.mark.parametrize("how", ["absolute", "dotdot", "inner_dotdot", "through_link"])
def test_paths_that_leave_the_folder_are_refused_before_reading(tmp_path, field, how):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:*:20228:0:99999:7:::\n")
    src = tmp_path / "ds"
    meta = graphbolt_dir(src)
    (src / "sub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", src / "link")  # a symlinked folder inside is fine, climbing out of it is not
    rel = {"absolute": str(secret), "dotdot": "../secret.txt", "inner_dotdot": "sub/../../secret.txt",
           "through_link": "link/../../secret.txt"}[how]
    ENTRIES[field][0](meta)["path"] = rel
    path = write(src, meta)
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        convert_graphbolt(path, out, threads=1)
    problem = "is an absolute path" if how == "absolute" else "climbs out of the folder with '..'"
    assert str(e.value) == refusal(path, f"{field}.path", rel, problem)
    assert "root:" not in str(e.value)
    assert_nothing_left(tmp_path, out)


def test_the_cli_refuses_with_one_line(tmp_path, capsys):
    src = tmp_path / "ds"
    meta = graphbolt_dir(src)
    meta["graph"]["edges"][0]["path"] = "../../../../../../etc/passwd"
    path = write(src, meta)
    assert main(["convert", str(src), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ringgnn convert: error: " + refusal(path, "graph.edges[0].path", "../../../../../../etc/passwd",
                                                          "climbs out of the folder with '..'")]


def test_symlinks_inside_the_folder_are_followed(tmp_path):
    """The documented way to use a file elsewhere: a link inside the folder, to a file or to a
    folder; 'link/../x' is the folder's own x, never the link target's neighbour."""
    src = tmp_path / "ds"
    meta = graphbolt_dir(src)
    far = tmp_path / "far" / "data"
    far.mkdir(parents=True)
    feat = np.full((N, 3), 2.5, dtype=np.float32)
    np.save(far / "feat.npy", feat)
    np.save(far.parent / "train.npy", np.array([3, 2]))  # what the kernel would reach by walking link/..
    os.symlink(far / "feat.npy", src / "feat-link.npy")
    os.symlink(far, src / "data")
    (src / "edges.csv").rename(far / "edges.csv")
    meta["graph"]["edges"][0]["path"] = "data/edges.csv"
    meta["feature_data"][0]["path"] = "feat-link.npy"
    meta["tasks"][0]["train_set"][0]["data"][0]["path"] = "data/../train.npy"
    out = tmp_path / "out"
    convert_graphbolt(write(src, meta), out, threads=1)
    ds = ringgnn.Dataset.open(out)
    assert ds.num_edges == len(EDGES)
    assert ds.split("train").tolist() == [0, 1]  # ds/train.npy, not far/train.npy
    np.testing.assert_array_equal(_core.FeatureReader(os.fspath(out)).gather(np.arange(N, dtype=np.int64)), feat)


# --- a link inside to a secret: the conversion fails, the secret stays out of the message ----


SECRET_TEXT = "root:*:20228:0:99999:7:::\nFOO=secret123 {marker}\n"


def _pointing(src: Path, meta: dict, field: str, fmt: str, secret: Path) -> Path:
    entry = ENTRIES[field][0](meta)
    os.symlink(secret, src / "innocent")
    entry["path"], entry["format"] = "innocent", fmt
    return write(src, meta)


@pytest.mark.parametrize("field,fmt", [(f, fmt) for f, (_, fmts) in ENTRIES.items() for fmt in fmts])
def test_a_link_to_a_secret_fails_without_quoting_it(tmp_path, field, fmt):
    marker = "Zq7SecretMarker"
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_TEXT.format(marker=marker))
    src = tmp_path / "ds"
    path = _pointing(src, graphbolt_dir(src), field, fmt, secret)
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        convert_graphbolt(path, out, threads=1)
    text = str(e.value)
    assert marker not in text and "root:" not in text and "FOO" not in text, text
    assert str(src / "innocent") in text or f"{field}" in text, text
    assert_nothing_left(tmp_path, out)


def test_a_described_edge_file_names_its_line(tmp_path):
    src = tmp_path / "ds"
    meta = graphbolt_dir(src)
    (src / "edges.csv").write_text("0,1\n1,2\nFOO=secret123\n")
    with pytest.raises(InputError) as e:
        convert_graphbolt(write(src, meta), tmp_path / "out", threads=1)
    assert str(e.value) == (
        f"{src / 'edges.csv'} line 3: expected 2 integer node ids; each line must start with a source and a "
        "destination id (integers >= 0) separated by spaces, a tab or a comma, and comment lines start with # or % "
        "(the line is not quoted: the dataset named this file, not you)")


# --- OGB folders: the user names the folder, not its files -----------------------------------


def gz(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def ogb_dir(root: Path) -> Path:
    gz(root / "raw" / "edge.csv.gz", "".join(f"{s},{d}\n" for s, d in EDGES))
    gz(root / "raw" / "num-node-list.csv.gz", f"{N}\n")
    gz(root / "raw" / "num-edge-list.csv.gz", f"{len(EDGES)}\n")
    gz(root / "raw" / "node-feat.csv.gz", "".join("0.5,1.5\n" for _ in range(N)))
    return root


def ogb_mag_dir(root: Path) -> Path:
    raw = root / "raw"
    gz(raw / "num-node-dict.csv.gz", "author,paper\n2,3\n")
    gz(raw / "triplet-type-list.csv.gz", "author,writes,paper\n")
    gz(raw / "relations" / "author___writes___paper" / "edge.csv.gz", "0,1\n1,2\n")
    gz(raw / "relations" / "author___writes___paper" / "num-edge-list.csv.gz", "2\n")
    return root


#: An OGB file, replaced by a link to the secret (plain text, or the secret gzip-compressed).
OGB_FILES = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/node-feat.csv.gz"]
MAG_FILES = ["raw/num-node-dict.csv.gz", "raw/triplet-type-list.csv.gz",
             "raw/relations/author___writes___paper/edge.csv.gz"]


def test_ogb_type_names_cannot_climb_out(tmp_path):
    root = ogb_mag_dir(tmp_path / "mag")
    gz(root / "raw" / "num-node-dict.csv.gz", "author,../../../../x\n2,3\n")
    gz(root / "raw" / "triplet-type-list.csv.gz", "author,writes,../../../../x\n")
    with pytest.raises(InputError) as e:
        convert_ogb(root, tmp_path / "out")
    raw = root / "raw"
    assert str(e.value) == (
        f"{raw / 'triplet-type-list.csv.gz'}: relation 'author,writes,../../../../x': "
        "'relations/author___writes___../../../../x/edge.csv.gz' climbs out of the folder with '..'; paths in a "
        f"dataset description stay inside its folder; to use a file elsewhere, put a symlink to it inside the "
        f"folder (ln -s /path/to/file {raw}/NAME) and name the link")
    assert_nothing_left(tmp_path, tmp_path / "out")


# --- the property: no importer's error holds a byte run of a secret outside the folder -------

MARKERS = st.text(string.ascii_letters, min_size=10, max_size=24).map(lambda s: "Zq" + s)
LINES = st.sampled_from(["{m}", "{m},{m}", "1,{m}", "{m} 2", "root:x:0:0:{m}:/root:/bin/bash", "FOO={m}",
                         "%%MatrixMarket {m} x", "# {m}", "7,8,{m}", "\t{m}\t", "{m}" * 8, "1 2\n{m}", "{m}\n1,2"])


def _secret(tmp_path: Path, marker: str, lines, compress: bool) -> Path:
    text = "".join(line.format(m=marker) + "\n" for line in lines)
    secret = tmp_path / ("secret.gz" if compress else "secret.txt")
    if compress:
        gz(secret, text)
    else:
        secret.write_text(text)
    return secret


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(marker=MARKERS, lines=st.lists(LINES, min_size=1, max_size=4), compress=st.booleans(),
       target=st.sampled_from(
           [("graphbolt", f, fmt, how) for f, (_, fmts) in ENTRIES.items() for fmt in fmts
            for how in ("absolute", "dotdot", "inner", "link")]
           + [("ogb", f, None, "link") for f in OGB_FILES] + [("mag", f, None, "link") for f in MAG_FILES]))
# A CSV of only a '#' line once made numpy warn "input contained no data" instead of an error.
@example(marker="s3cr3t", lines=["# {m}"], compress=True, target=("ogb", "raw/node-feat.csv.gz", None, "link"))
def test_no_importer_error_holds_a_secret_outside_the_folder(tmp_path_factory, marker, lines, compress, target):
    tmp = tmp_path_factory.mktemp("p")
    secret = _secret(tmp, marker, lines, compress)
    kind, field, fmt, how = target
    out = tmp / "out"
    if kind == "graphbolt":
        src = tmp / "ds"
        meta = graphbolt_dir(src)
        (src / "sub").mkdir()
        if how == "link":
            path = _pointing(src, meta, field, fmt, secret)
        else:
            entry = ENTRIES[field][0](meta)
            entry["format"] = fmt
            entry["path"] = {"absolute": str(secret), "dotdot": f"../{secret.name}",
                             "inner": f"sub/./../../{secret.name}"}[how]
            path = write(src, meta)
        run = lambda: convert_graphbolt(path, out, threads=1)  # noqa: E731
    else:
        root = ogb_dir(tmp / "ogb") if kind == "ogb" else ogb_mag_dir(tmp / "mag")
        os.remove(root / field)
        os.symlink(secret, root / field)
        run = lambda: convert_ogb(root, out)  # noqa: E731
    try:
        run()
    except (InputError, OSError) as e:
        text = str(e)
    else:  # a secret that happens to be a valid file of that kind: its content was data, not a message
        return
    assert marker not in text, text
    assert "root:" not in text and "FOO=" not in text, text
    content = secret.read_text() if not compress else gzip.decompress(secret.read_bytes()).decode()
    assert _longest_shared(text.replace(str(tmp), ""), content) < 8, text  # not even a piece of a line
    assert_nothing_left(tmp, out)


# --- files the user names directly: quoted, at most EXCERPT_CHARS characters -----------------


def _longest_shared(a: str, b: str) -> int:
    """The length of the longest substring of ``a`` that is also in ``b``."""
    best = 0
    for i in range(len(a)):
        while i + best < len(a) and a[i:i + best + 1] in b:
            best += 1
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1,
                    max_size=300).filter(lambda s: not re.match(r"\s*[#%]", s) and re.search(r"[^\d\s,]", s)),
       suffix=st.sampled_from(["txt", "csv"]))
def test_a_named_file_is_quoted_at_most_an_excerpt(tmp_path_factory, line, suffix):
    tmp = tmp_path_factory.mktemp("q")
    edges = tmp / f"e.{suffix}"
    edges.write_text(f"0 1\n{line}\n", encoding="utf-8")
    try:
        build.convert(edges, tmp / "out", format="text", threads=1)
    except InputError as e:
        text = str(e)
    else:  # "0 1 x": an edge and an ignored third column
        return
    assert f"{edges} line 2: " in text
    if "expected 2 integer node ids" in text:
        assert re.search(r"found '(.*)'; each line", text, re.S)
        assert _longest_shared(text.replace(str(edges), ""), line) <= EXCERPT_CHARS + 1, text
    assert WITHHELD not in text and "not quoted" not in text


@pytest.mark.parametrize("table", ["csv", "parquet"])
def test_a_named_table_is_quoted_at_most_an_excerpt(tmp_path, table, cli):
    pytest.importorskip("pyarrow")
    line = "secret-" + "x" * 300
    path = tmp_path / f"edges.{table}"
    if table == "csv":
        path.write_text(f"src,dst\n1,2\n{line}\n")
    else:
        path.write_text(line)  # not Parquet at all
    r = cli("convert", path, tmp_path / "out", "--from", "table", "--src", "src", "--dst", "dst")
    assert r.code == 1, r
    if table == "csv":
        assert "secret-x" in r.err  # the user's own file: an excerpt helps
    assert _longest_shared(r.err, line) <= EXCERPT_CHARS + 1, r.err


# --- a ringgnn dataset's own manifest names plain file names only ----------------------------


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/etc/shadow", "sub/indices.bin", "../" * 40 + "x"])
def test_a_dataset_manifest_names_files_inside_it(tmp_path, cli, name):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n")
    out = tmp_path / "ds"
    build.convert(edges, out, progress=False)
    m = json.loads((out / "manifest.json").read_text())
    m["files"]["indices"]["path"] = name
    (out / "manifest.json").write_text(json.dumps(m))
    for command in ("info", "verify"):
        r = cli(command, out)
        assert r.code == 1
        assert r.err == (f"ringgnn {command}: error: {out / 'manifest.json'}: files.indices.path '{excerpt(name)}' "
                         "must be a plain file name\n")
