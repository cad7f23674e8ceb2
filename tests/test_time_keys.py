"""The time keys beside every edge-time file (docs/FORMAT.md "Time keys"): written by `convert
--edge-time`, `generate --edge-time`, `from_pyg` with times and typed builds (each relation with
times, its reverse too), each key the bucket of its entry's time; `verify` accepts them and
rejects damaged ones naming the file; a dataset without them (the v3 fixture) still verifies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn import _core

from conftest import rewrite_payload, write_text

HEADER = 524288  # 65,536 int64 bounds
BUCKETS = 65536

# 4 edges into node 1 at times 5, 3, 3, 9 from sources 2, 7, 0, 1; one into node 0 at -4.
EDGES = [(2, 1), (7, 1), (0, 1), (1, 1), (3, 0)]
TIMES = [5, 3, 3, 9, -4]


def key_of(bounds: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The largest j with bounds[j] <= t; -1 where t is below every bound."""
    return np.searchsorted(bounds, t, side="right") - 1


def keys(out: Path, prefix: str = "", num_edges: int | None = None):
    """The bounds, keys and times of the dataset at `out` (of relation files `prefix`, like
    `relation.S:R:D.`), after checking the keys file's manifest entry and that every key is the
    bucket of its entry's time."""
    m = json.loads((out / "manifest.json").read_text())
    if num_edges is None:
        num_edges = m["num_edges"]
    files = m["files"]
    entry = files[prefix + "edge_time_keys"]
    raw = (out / entry["path"]).read_bytes()
    assert entry["payload_bytes"] == HEADER + 2 * num_edges
    assert entry["bytes"] == len(raw) == -(-entry["payload_bytes"] // 4096) * 4096
    assert not any(raw[entry["payload_bytes"]:])
    bounds = np.frombuffer(raw[:HEADER], dtype="<i8")
    k = np.frombuffer(raw[HEADER:HEADER + 2 * num_edges], dtype="<u2")
    times = np.fromfile(out / files[prefix + "edge_times"]["path"], dtype="<i8")[:num_edges]
    assert (np.diff(bounds) >= 0).all()
    if num_edges:
        assert bounds[0] == times.min()
    assert (k == key_of(bounds, times)).all()
    assert _core.file_crc32c(out / entry["path"]) == (len(raw), entry["crc32c"])
    return bounds, k.tolist(), times


@pytest.fixture
def tiny(cli, tmp_path):
    np.save(tmp_path / "t.npy", np.array(TIMES, dtype=np.int64))
    out = tmp_path / "ds"
    assert cli("convert", write_text(tmp_path / "e.tsv", EDGES), out, "-q", "--edge-time", tmp_path / "t.npy").code == 0
    return out


def test_convert_writes_the_keys_of_each_entry(cli, tiny):
    bounds, k, times = keys(tiny)
    # Entries: -4 (node 0), then 3, 3, 5, 9 (node 1). The sample is all five times, so
    # B[j] = sorted[j * 5 // 65536], and each time's key is the last bucket whose bound it is.
    assert times.tolist() == [-4, 3, 3, 5, 9]
    assert k == [13107, 39321, 39321, 52428, 65535]
    assert bounds[[0, 13107, 13108, 39321, 39322, 52428, 52429, 65535]].tolist() == [-4, -4, 3, 3, 5, 5, 9, 9]
    m = json.loads((tiny / "manifest.json").read_text())
    assert m["files"]["edge_time_keys"]["path"] == "edge_time_keys.bin" and m["version"] == 3
    assert cli("verify", tiny, "-q").code == 0


def test_verify_rejects_damaged_keys_naming_the_file(cli, tiny):
    raw = bytearray((tiny / "edge_time_keys.bin").read_bytes())
    raw[HEADER + 4:HEADER + 6] = np.uint16(39322).tobytes()  # entry 2, time 3
    (tiny / "edge_time_keys.bin").write_bytes(bytes(raw))
    r = cli("verify", tiny, "-q")
    assert r.code == 1 and "edge_time_keys.bin" in r.err and "checksum" in r.err, r.err
    # With the checksum recorded again, the key itself is wrong.
    rewrite_payload(tiny, "edge_time_keys", bytes(raw[:HEADER + 10]))
    r = cli("verify", tiny, "-q")
    assert r.code == 1 and "edge_time_keys.bin" in r.err, r.err
    assert "entry 2 has key 39322, but its time 3 in " in r.err and "is in bucket 39321" in r.err, r.err


def test_verify_rejects_bounds_out_of_order_and_a_short_file(cli, tiny, tmp_path):
    raw = bytearray((tiny / "edge_time_keys.bin").read_bytes())
    raw[300 * 8:301 * 8] = np.int64(-100).tobytes()
    rewrite_payload(tiny, "edge_time_keys", bytes(raw[:HEADER]))
    r = cli("verify", tiny, "-q")
    assert r.code == 1 and "edge_time_keys.bin" in r.err, r.err
    assert "time key bound 300 is -100, below bound 299's -4" in r.err, r.err

    (tiny / "edge_time_keys.bin").write_bytes(bytes(raw[:HEADER]))
    r = cli("verify", tiny, "-q")
    assert r.code == 1 and "edge_time_keys.bin" in r.err and "524288 bytes on disk" in r.err, r.err
    (tiny / "edge_time_keys.bin").unlink()
    r = cli("verify", tiny, "-q")
    assert r.code == 1 and "edge_time_keys.bin: missing" in r.err, r.err


def test_no_edge_left_no_keys(cli, tmp_path):
    np.save(tmp_path / "t.npy", np.array([1, 2], dtype=np.int64))
    out = tmp_path / "ds"
    r = cli("convert", write_text(tmp_path / "e.tsv", [(0, 0), (1, 1)]), out, "-q", "--edge-time",
            tmp_path / "t.npy", "--self-loops", "drop", "--num-nodes", "2")
    assert r.code == 0, r.err
    m = json.loads((out / "manifest.json").read_text())
    assert not {"edge_times", "edge_time_keys"} & set(m["files"])
    assert not (out / "edge_time_keys.bin").exists()


def test_generate_writes_keys(cli, tmp_path):
    for gen, args in (("rmat", ["--scale", "9", "--seed", "3"]), ("sbm", ["--nodes", "300", "--classes", "3", "--avg-degree", "4", "--feature-dim", "2"])):
        for name in ("a", "b"):
            assert cli("generate", gen, tmp_path / f"{gen}{name}", *args, "-q", "--edge-time", "uniform",
                       "--time-range=-50,50").code == 0
        a, b = tmp_path / f"{gen}a", tmp_path / f"{gen}b"
        bounds, k, times = keys(a)
        assert len(k) > 500 and bounds[-1] == times.max() and -50 <= times.min()
        assert (a / "edge_time_keys.bin").read_bytes() == (b / "edge_time_keys.bin").read_bytes()
        assert cli("verify", a, "-q").code == 0
    # Growth times: E distinct times, so no two buckets share a time when E <= 65,536.
    assert cli("generate", "rmat", tmp_path / "g", "--scale", "8", "-q", "--edge-time", "growth").code == 0
    _, k, times = keys(tmp_path / "g")
    order = np.argsort(times)
    assert (np.diff(np.asarray(k)[order]) > 0).all()


def test_typed_builds_write_keys_per_relation(cli, tmp_path):
    from ringgnn.data.build import NodeType, Relation, build_hetero

    write_text(tmp_path / "buys.csv", [(0, 0), (1, 0), (1, 2)], sep=",")
    write_text(tmp_path / "knows.csv", [(0, 1)], sep=",")
    np.save(tmp_path / "et.npy", np.array([7, 2, 5], dtype=np.int64))
    rels = [Relation("user:buys:item", tmp_path / "buys.csv", edge_time=tmp_path / "et.npy"),
            Relation("user:knows:user", tmp_path / "knows.csv")]
    m = build_hetero(tmp_path / "h", [NodeType("user", 2), NodeType("item", 3)], rels, add_reverse=True)
    for r in ("user:buys:item", "item:rev_buys:user"):
        _, k, times = keys(tmp_path / "h", f"relation.{r}.", m["relations"][r]["num_edges"])
        assert sorted(times.tolist()) == [2, 5, 7] and len(k) == 3
        assert m["files"][f"relation.{r}.edge_time_keys"]["path"].endswith("_edge_time_keys.bin")
    assert "relation.user:knows:user.edge_time_keys" not in m["files"]
    assert cli("verify", tmp_path / "h", "-q").code == 0


def test_from_pyg_with_times_writes_keys(tmp_path):
    torch = pytest.importorskip("torch")
    Data = pytest.importorskip("torch_geometric.data").Data
    data = Data(edge_index=torch.tensor([[2, 4, 0, 3], [1, 1, 1, 0]]), num_nodes=5)
    data.edge_time = torch.tensor([5, 3, 3, -4])
    ringgnn.from_pyg(data, tmp_path / "out")
    _, k, times = keys(tmp_path / "out")
    assert times.tolist() == [-4, 3, 3, 5] and len(k) == 4
    ringgnn.verify(tmp_path / "out")


def test_a_dataset_without_keys_still_verifies_and_samples(cli):
    out = Path(__file__).parent / "fixtures" / "v3-times-tiny"
    m = json.loads((out / "manifest.json").read_text())
    assert "edge_time_keys" not in m["files"]
    assert cli("verify", out, "-q").code == 0
    ds = ringgnn.Dataset.open(out)
    assert ds.has_times
