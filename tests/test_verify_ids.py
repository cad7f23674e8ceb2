"""`ringgnn verify`: each original node id occurs once (docs/FORMAT.md, "Original node ids"),
checked within --memory, with the sorted runs of ids that do not fit removed afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import pytest

import ringgnn
from ringgnn import NodeType, Relation

ADVICE = (
    "each original id must name one node, or lookups by original id (predict --nodes, an importer's joins) "
    "are ambiguous. The importer that wrote this dataset should have refused the duplicate: remove it from "
    "the input and import it again"
)


def int_ids(tmp: Path, name: str, ids: Sequence[int], dtype: str = "i64") -> tuple:
    path = tmp / f"{name}.ids"
    np.asarray(ids, dtype="<i8" if dtype == "i64" else "<u8").tofile(path)
    return (dtype, path, None)


def str_ids(tmp: Path, name: str, ids: Sequence[str]) -> tuple:
    data = [s.encode() for s in ids]
    np.concatenate([[0], np.cumsum([len(b) for b in data])]).astype("<u8").tofile(tmp / f"{name}.ids")
    (tmp / f"{name}.bytes").write_bytes(b"".join(data))
    return ("str", tmp / f"{name}.ids", tmp / f"{name}.bytes")


def dataset(tmp: Path, node_ids: tuple, n: int) -> Path:
    """A path through ``n`` nodes with these original ids (stored after the build, which refuses
    a repeated id: verify must find it in a dataset that has one all the same)."""
    edges = tmp / "e.npy"
    np.save(edges, np.stack([np.arange(n - 1), np.arange(1, n)]).astype(np.int64))
    out = tmp / "ds"
    ringgnn.convert(edges, out, num_nodes=n, overwrite=True)
    store_ids(out, node_ids)
    return out


def store_ids(ds: Path, node_ids: tuple, node_type: Optional[str] = None) -> None:
    """Store ``node_ids`` (an importer's files) in built dataset ``ds`` (for ``node_type``) as
    docs/FORMAT.md lays them out: each file padded to a page, its size and checksum in the
    manifest."""
    m = json.loads((ds / "manifest.json").read_text())
    holder, key, prefix = (m, "", "") if node_type is None else (m["node_types"][node_type],
                                                                 f"node.{node_type}.", f"{node_type}_")
    dtype, ids, data = node_ids
    for name, src in (("node_ids", ids), ("node_id_bytes", data)):
        if src is None:
            continue
        payload = Path(src).read_bytes()
        path = f"{prefix}{name}.bin"
        (ds / path).write_bytes(payload + bytes(-len(payload) % 4096))
        size, crc = ringgnn._core.file_crc32c(str(ds / path))
        m["files"][key + name] = {"path": path, "bytes": size, "payload_bytes": len(payload), "crc32c": crc}
    holder["node_ids"] = {"dtype": dtype, "bytes": 0 if data is None else os.path.getsize(data)}
    (ds / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")


def ids_file(ds: Path, key: str = "node_ids") -> Path:
    return ds / ringgnn.read_manifest(ds)["files"][key]["path"]


def temporaries(*dirs: Path) -> List[str]:
    return [n for d in dirs for n in os.listdir(d) if "ringgnn-tmp" in n]


def test_a_duplicate_integer_id_is_reported_with_both_nodes(cli, tmp_path):
    ds = dataset(tmp_path, int_ids(tmp_path, "n", [10, -7, 5_000_000_000, -7, 3]), 5)
    r = cli("verify", ds, "--quiet")
    assert r.code == 1 and r.out == ""
    assert r.err == (f"ringgnn verify: error: {ids_file(ds)}: nodes 1 and 3 both have the original id -7; "
                     f"{ADVICE}\n")
    with pytest.raises(ringgnn.CorruptDatasetError, match="nodes 1 and 3 both have the original id -7"):
        ringgnn.verify(ds)
    # distinct ids pass, nothing spilled
    ds = dataset(tmp_path, int_ids(tmp_path, "n", [10, 2**64 - 7, 5_000_000_000, 7, 3], "u64"), 5)
    r = cli("verify", ds)
    assert r.code == 0 and r.out.startswith(f"ok: {ds} (") and "spilled" not in r.out, r.err
    assert ringgnn.verify(ds)["spilled_bytes"] == 0


def test_a_duplicate_string_id_is_reported_printable(cli, tmp_path):
    ds = dataset(tmp_path, str_ids(tmp_path, "n", ["a", "tab\there", "b", "tab\there"]), 4)
    r = cli("verify", ds, "-q")
    assert r.code == 1
    assert r.err == (f"ringgnn verify: error: {ids_file(ds)}: nodes 1 and 3 both have the original id "
                     f'"tab\\there"; {ADVICE}\n')


def test_heterogeneous_ids_are_checked_per_type(cli, tmp_path):
    edges = tmp_path / "buys.csv"
    edges.write_text("0,0\n1,1\n")

    def build(users: tuple, items: tuple) -> Path:
        out = tmp_path / "het"
        ringgnn.build_hetero(out, [NodeType("user", 3), NodeType("item", 2)],
                             [Relation("user:buys:item", edges)], overwrite=True)
        store_ids(out, users, "user")
        store_ids(out, items, "item")
        return out

    # the same id in two types names two nodes
    het = build(int_ids(tmp_path, "u", [1, 2, 3]), int_ids(tmp_path, "i", [2, 1]))
    assert cli("verify", het, "-q").code == 0
    het = build(int_ids(tmp_path, "u", [1, 2, 3]), str_ids(tmp_path, "i", ["é", "é"]))
    r = cli("verify", het, "-q")
    assert r.code == 1
    assert r.err == (f"ringgnn verify: error: {ids_file(het, 'node.item.node_ids')}: node/item: nodes 0 and 1 "
                     f'both have the original id "é"; {ADVICE}\n')


# 1.5M ids take 24 MB to sort, more than --memory 112M leaves (16 MiB beyond verify's 96 MiB).
N_BIG = 1_500_000


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("big")
    ids = np.random.default_rng(0).permutation(np.arange(N_BIG, dtype=np.int64) * 1_000_003)
    return dataset(tmp, int_ids(tmp, "n", ids), N_BIG)


def test_ids_beyond_the_budget_are_sorted_on_disk_and_cleaned_up(cli, big, tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    r = cli("verify", big, "--memory", "112M", "--spill-dir", spill)
    assert r.code == 0, r.err
    # two runs (1 Mi ids and the rest), 16 bytes an id, each padded to a page
    assert "; 22.9 MiB of sorted original ids spilled to disk)" in r.out, r.out
    assert ringgnn.verify(big, memory="112M", spill_dir=spill)["spilled_bytes"] == N_BIG * 16 // 4096 * 4096 + 4096
    assert os.listdir(spill) == []
    # beside the dataset by default; gone after an error too
    ids = np.fromfile(ids_file(big), dtype="<i8", count=N_BIG)
    ids[1_400_000] = ids[5]
    (tmp_path / "d").mkdir()
    ds = dataset(tmp_path / "d", int_ids(tmp_path, "d", ids), N_BIG)
    r = cli("verify", ds, "--memory", "112M", "-q")
    assert r.code == 1 and f"nodes 5 and 1400000 both have the original id {ids[5]}; " in r.err, r.err
    assert temporaries(tmp_path / "d", ds) == []
    # budgets and directories are checked before anything is read
    r = cli("verify", ds, "--memory", "100M")
    assert r.code == 1 and "--memory 104857600 bytes is too small; verify needs at least 112M" in r.err
    r = cli("verify", ds, "--spill-dir", tmp_path / "nope")
    assert r.code == 1 and "nope: the directory for the temporary files (--spill-dir) does not exist" in r.err
