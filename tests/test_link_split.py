"""Edge splits for link prediction (format version 2): `convert --link-split` holds out pairs from
the graph, stores every split's pairs and fixed negatives, and `verify` checks them.

The expected assignment of pairs to splits is recomputed here from the rule in docs/FORMAT.md
("Edge splits"), so these tests pin the format's promise, not just self-consistency."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from conftest import rewrite_payload
from ringgnn._core import CorruptDatasetError, InputError

M = (1 << 64) - 1


def mix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def expected_split(pair, seed: int, fractions, undirected: bool) -> str:
    """The split FORMAT.md assigns to `pair` (names in the order given, then train)."""
    a, b = pair
    if undirected and a > b:
        a, b = b, a
    base = mix64(seed ^ mix64(0x6C73706C6974))
    h = mix64((mix64(base ^ a) + b) & M)
    acc = 0.0
    for name, f in fractions:
        acc += f
        if h < min(int(acc * 2.0**64), M):
            return name
    return "train"


EDGES = [(0, 1), (0, 1), (1, 0), (2, 2), (2, 3), (3, 4), (4, 0), (1, 3), (3, 1), (0, 4), (5, 2), (4, 5), (2, 6)]


def write_edges(path: Path, edges) -> Path:
    path.write_text("".join(f"{s}\t{d}\n" for s, d in edges))
    return path


def pairs_of(edges, undirected: bool):
    out = set()
    for s, d in edges:
        if s == d:
            continue
        out.add((min(s, d), max(s, d)) if undirected else (s, d))
    return out


def graph_edges(ds: ringgnn.Dataset):
    out = []
    for v in range(ds.num_nodes):
        out.extend((int(u), v) for u in ds.neighbors(v))
    return sorted(out)


@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_held_out_pairs_leave_the_graph_exactly_as_specified(tmp_path, undirected, seed):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    fr = [("val", 0.25), ("test", 0.25)]
    m = ringgnn.convert(src, tmp_path / "ds", undirected=undirected, link_split="val=0.25,test=0.25",
                        link_negatives=3, seed=seed)
    assert m["version"] == 2
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert ds.edge_split_names == ["test", "train", "val"]
    want = {"train": set(), "val": set(), "test": set()}
    for p in pairs_of(EDGES, undirected):
        want[expected_split(p, seed, fr, undirected)].add(p)
    for name in ("train", "val", "test"):
        got = ds.edge_split(name)
        assert got.shape == (2, len(want[name])) and got.dtype == np.int64
        assert set(map(tuple, got.T.tolist())) == want[name], name
        # In the builder's order: ascending (dst, src).
        assert got.T.tolist() == sorted(got.T.tolist(), key=lambda p: (p[1], p[0]))
        assert m["edge_splits"][name] == {"edges": len(want[name]), "negatives": 0 if name == "train" else 3}
    held = want["val"] | want["test"]
    # The graph: the input (with --undirected's reverse edges) less every held-out pair, all copies.
    full = []
    for s, d in EDGES:
        full.append((s, d))
        if undirected and s != d:
            full.append((d, s))
    key = (lambda s, d: (min(s, d), max(s, d))) if undirected else (lambda s, d: (s, d))
    kept = sorted((s, d) for s, d in full if s == d or key(s, d) not in held)
    assert graph_edges(ds) == kept
    assert ds.num_edges == len(kept)
    ringgnn.verify(tmp_path / "ds")


def test_negatives_are_distinct_in_range_and_never_the_positive(tmp_path):
    rng = np.random.default_rng(3)
    edges = rng.integers(0, 50, size=(400, 2))
    np.save(tmp_path / "e.npy", edges.astype(np.int64))
    ringgnn.convert(tmp_path / "e.npy", tmp_path / "ds", link_split="test=0.5", link_negatives=10,
                    seed=5, num_nodes=50)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    pos = ds.edge_split("test")
    neg = ds.edge_negatives("test")
    assert neg.shape == (pos.shape[1], 10) and neg.dtype == np.int64
    assert ((neg >= 0) & (neg < 50)).all()
    assert (neg != pos[1][:, None]).all()
    assert all(len(set(r)) == 10 for r in neg.tolist())
    with pytest.raises(InputError, match="no stored negatives"):
        ds.edge_negatives("train")
    with pytest.raises(InputError, match="no edge split 'nope'; it has: test, train"):
        ds.edge_split("nope")


def test_negatives_are_uniform(tmp_path):
    # 20 nodes, K = 5: each node other than a row's destination appears in a row with probability
    # 5/19. Over all rows, node x's count is a sum of Bernoullis; check it against its mean.
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 20, size=(3000, 2))
    np.save(tmp_path / "e.npy", edges.astype(np.int64))
    ringgnn.convert(tmp_path / "e.npy", tmp_path / "ds", link_split="test=0.9", link_negatives=5,
                    seed=2, num_nodes=20)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    pos, neg = ds.edge_split("test"), ds.edge_negatives("test")
    n = pos.shape[1]
    assert n > 200
    counts = np.bincount(neg.ravel(), minlength=20)
    eligible = n - np.bincount(pos[1], minlength=20)  # rows whose destination is not x
    mean = eligible * 5 / 19
    sd = np.sqrt(eligible * (5 / 19) * (14 / 19))
    assert (np.abs(counts - mean) < 5 * sd).all(), (counts, mean)


def test_split_sizes_are_binomial_around_the_fractions(tmp_path):
    rng = np.random.default_rng(1)
    edges = np.unique(rng.integers(0, 3000, size=(30000, 2)), axis=0)
    edges = edges[edges[:, 0] != edges[:, 1]]
    np.save(tmp_path / "e.npy", edges)
    m = ringgnn.convert(tmp_path / "e.npy", tmp_path / "ds", link_split="val=0.05,test=0.1",
                        link_negatives=0, seed=4)
    n = len(edges)
    for name, f in (("val", 0.05), ("test", 0.1)):
        got = m["edge_splits"][name]["edges"]
        assert abs(got - f * n) < 5 * np.sqrt(n * f * (1 - f)), (name, got)
    assert sum(s["edges"] for s in m["edge_splits"].values()) == n
    assert m["num_edges"] == m["edge_splits"]["train"]["edges"]
    assert not os.path.exists(tmp_path / "ds" / "edge_negatives_val.bin")


def test_same_seed_same_dataset_whatever_the_budget(tmp_path):
    rng = np.random.default_rng(9)
    np.save(tmp_path / "e.npy", rng.integers(0, 5000, size=(200000, 2)))
    a = ringgnn.convert(tmp_path / "e.npy", tmp_path / "a", link_split="val=0.1,test=0.1",
                        link_negatives=4, seed=8, undirected=True, memory="128M", threads=1)
    b = ringgnn.convert(tmp_path / "e.npy", tmp_path / "b", link_split="val=0.1,test=0.1",
                        link_negatives=4, seed=8, undirected=True, memory="1G", threads=2)
    assert a["files"] == b["files"]
    c = ringgnn.convert(tmp_path / "e.npy", tmp_path / "c", link_split="val=0.1,test=0.1",
                        link_negatives=4, seed=9, undirected=True)
    assert c["files"]["edge_split.val"]["crc32c"] != a["files"]["edge_split.val"]["crc32c"]


@pytest.mark.parametrize(
    "spec,negatives,message",
    [
        ("train=0.8,val=0.1", 100, "the training edges are the ones not held out"),
        ("val=0.5,test=0.5", 100, "leaves no training edges"),
        ("val=0", 100, "a fraction must be above 0"),
        ("Val=0.1", 100, "split name 'Val' is not allowed"),
        ("val=0.1,test=a.npy", 100, "--link-split: split 'val=0.1,test=a.npy' mixes fractions and files"),
        ("val=0.1", 7, "--link-negatives 7 is not below the number of nodes (7)"),
    ],
)
def test_bad_link_splits_are_refused_and_write_nothing(tmp_path, spec, negatives, message):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    with pytest.raises(InputError) as e:
        ringgnn.convert(src, tmp_path / "ds", link_split=spec, link_negatives=negatives)
    assert message in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["e.tsv"]


def test_verify_finds_a_held_out_pair_in_the_graph_and_bad_negatives(tmp_path):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    ringgnn.convert(src, tmp_path / "ds", link_split="test=0.4", link_negatives=2, seed=1)
    ringgnn.verify(tmp_path / "ds")
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    test = ds.edge_split("test")
    assert test.shape[1] >= 1
    bad = tmp_path / "bad"
    # A held-out pair replaced by an edge the graph has.
    shutil.copytree(tmp_path / "ds", bad)
    s, d = graph_edges(ds)[0] if graph_edges(ds)[0][0] != graph_edges(ds)[0][1] else graph_edges(ds)[1]
    rewrite_payload(bad, "edge_split.test", np.array([s, d], dtype="<i8").tobytes())
    with pytest.raises(CorruptDatasetError, match=r"pair 0 \(%d, %d\) is held out but is still an edge" % (s, d)):
        ringgnn.verify(bad)
    # A negative equal to its row's destination.
    shutil.rmtree(bad)
    shutil.copytree(tmp_path / "ds", bad)
    rewrite_payload(bad, "edge_negatives.test", np.array([test[1, 0]], dtype="<i8").tobytes())
    with pytest.raises(CorruptDatasetError, match="negative 0 of pair 0 is .*, the pair's own destination"):
        ringgnn.verify(bad)
    # A version-1 manifest cannot have edge splits.
    shutil.rmtree(bad)
    shutil.copytree(tmp_path / "ds", bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["version"] = 1
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CorruptDatasetError, match="edge_splits is a field of format version 2"):
        ringgnn.Dataset.open(bad)


def test_a_dataset_without_edge_splits_is_version_2_and_says_so(tmp_path):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    m = ringgnn.convert(src, tmp_path / "ds")
    assert m["version"] == 2 and m["edge_splits"] == {}
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert ds.edge_split_names == []
    with pytest.raises(InputError, match="no edge split 'train'; it has: none .*--link-split"):
        ds.edge_split("train")


def test_the_cli_converts_with_a_link_split_and_reports_it(tmp_path, capsys):
    from ringgnn.cli import main

    src = write_edges(tmp_path / "e.tsv", EDGES)
    rc = main(["convert", str(src), str(tmp_path / "ds"), "--link-split", "val=0.25,test=0.25",
               "--link-negatives", "3", "--seed", "7", "--undirected", "--quiet"])
    assert rc in (0, None)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    want = sum(expected_split(p, 7, [("val", 0.25), ("test", 0.25)], True) == "test" for p in pairs_of(EDGES, True))
    assert ds.edge_split("test").shape == (2, want)
    capsys.readouterr()
    assert main(["info", str(tmp_path / "ds"), "--json"]) in (0, None)
    info = json.loads(capsys.readouterr().out)
    assert info["format_version"] == 2
    assert info["edge_splits"]["test"] == {"edges": want, "negatives": 3}
    assert info["edge_splits"]["train"]["negatives"] == 0
    assert main(["info", str(tmp_path / "ds")]) in (0, None)
    assert "(3 negatives each)" in capsys.readouterr().out
    # A bad spec is refused before anything is written, naming the option.
    rc = main(["convert", str(src), str(tmp_path / "bad"), "--link-split", "val=0.6,test=0.6", "--quiet"])
    assert rc == 1
    assert "--link-split fractions add up to 1.2" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


# --- given edge lists --------------------------------------------------------------------------


def save_pairs(path: Path, pairs, dtype=np.int64, two_by_n: bool = False) -> Path:
    a = np.array(pairs, dtype=dtype).reshape(-1, 2)
    np.save(path, a.T if two_by_n else a)
    return path


def canonical(pairs, undirected: bool):
    return {(min(s, d), max(s, d)) if undirected else (s, d) for s, d in pairs}


@pytest.mark.parametrize("undirected", [False, True])
def test_given_lists_hold_out_exactly_those_pairs(tmp_path, undirected):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    # (1, 0) is listed against (0, 1): with --undirected one pair, without it the edge (1, 0).
    val = [(1, 0), (5, 2)]
    test = [(3, 4), (2, 6), (1, 3)]
    save_pairs(tmp_path / "val.npy", val, np.int32)
    save_pairs(tmp_path / "test.npy", test, np.uint64, two_by_n=True)
    m = ringgnn.convert(src, tmp_path / "ds", undirected=undirected, link_negatives=3, seed=5,
                        link_split=f"val={tmp_path / 'val.npy'},test={tmp_path / 'test.npy'}")
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    held = canonical(val, undirected) | canonical(test, undirected)
    want = {"val": canonical(val, undirected), "test": canonical(test, undirected),
            "train": pairs_of(EDGES, undirected) - held}
    for name, pairs in want.items():
        got = ds.edge_split(name).T.tolist()
        assert set(map(tuple, got)) == pairs, name
        assert got == sorted(got, key=lambda p: (p[1], p[0]))
        assert m["edge_splits"][name] == {"edges": len(pairs), "negatives": 0 if name == "train" else 3}
    assert ds.edge_negatives("test").shape == (3, 3)
    # No held-out pair is left in the graph, in either direction when undirected.
    for s, d in held:
        assert s not in ds.neighbors(d).tolist()
        if undirected:
            assert d not in ds.neighbors(s).tolist()
    full = [(s, d) for s, d in EDGES] + ([(d, s) for s, d in EDGES if s != d] if undirected else [])
    key = (lambda s, d: (min(s, d), max(s, d))) if undirected else (lambda s, d: (s, d))
    assert graph_edges(ds) == sorted((s, d) for s, d in full if s == d or key(s, d) not in held)
    assert m["source"]["link_split"] == {"files": {"val": "val.npy", "test": "test.npy"}, "negatives": 3}
    ringgnn.verify(tmp_path / "ds")


@pytest.mark.parametrize("undirected", [False, True])
def test_given_lists_equal_to_a_fraction_split_rebuild_the_same_dataset(tmp_path, undirected):
    """The same pairs held out give the same files, negatives included, however they were chosen."""
    rng = np.random.default_rng(6)
    np.save(tmp_path / "e.npy", rng.integers(0, 300, size=(3000, 2)))
    a = ringgnn.convert(tmp_path / "e.npy", tmp_path / "a", link_split="val=0.1,test=0.2", link_negatives=5,
                        seed=3, undirected=undirected, memory="128M", threads=1)
    ds = ringgnn.Dataset.open(tmp_path / "a")
    for name in ("val", "test"):
        # Listed in another order and (undirected) orientation: the stored order is the builder's.
        pairs = ds.edge_split(name).T[::-1]
        np.save(tmp_path / f"{name}.npy", pairs[:, ::-1] if undirected else pairs)
    b = ringgnn.convert(tmp_path / "e.npy", tmp_path / "b", link_negatives=5, seed=3, undirected=undirected,
                        link_split={"test": tmp_path / "test.npy", "val": tmp_path / "val.npy"}, threads=2)
    assert a["files"] == b["files"] and a["edge_splits"] == b["edge_splits"]


def test_a_given_train_list_is_stored_as_listed_and_the_graph_keeps_the_rest(tmp_path):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    save_pairs(tmp_path / "train.npy", [(0, 4), (2, 3), (1, 0)])
    save_pairs(tmp_path / "test.npy", [(2, 6)])
    m = ringgnn.convert(src, tmp_path / "ds", link_negatives=0,
                        link_split={"train": tmp_path / "train.npy", "test": tmp_path / "test.npy"})
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert ds.edge_split_names == ["test", "train"]
    assert ds.edge_split("train").T.tolist() == [[1, 0], [2, 3], [0, 4]]
    assert m["edge_splits"]["train"] == {"edges": 3, "negatives": 0}
    assert graph_edges(ds) == sorted(e for e in EDGES if e != (2, 6))
    ringgnn.verify(tmp_path / "ds")


def test_the_cli_converts_with_given_lists(tmp_path, capsys):
    from ringgnn.cli import main

    src = write_edges(tmp_path / "e.tsv", EDGES)
    save_pairs(tmp_path / "v.npy", [(3, 4)])
    save_pairs(tmp_path / "t.npy", [(4, 0), (0, 4), (2, 6)])
    rc = main(["convert", str(src), str(tmp_path / "ds"), "--link-split",
               f"val={tmp_path / 'v.npy'},test={tmp_path / 't.npy'}", "--link-negatives", "2", "--quiet"])
    assert rc in (0, None)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    assert ds.edge_split("test").T.tolist() == [[4, 0], [0, 4], [2, 6]]
    assert ds.edge_negatives("val").shape == (1, 2)
    # The same pair listed twice with --undirected: refused, naming the file, nothing written.
    rc = main(["convert", str(src), str(tmp_path / "bad"), "--undirected", "--link-split",
               f"val={tmp_path / 'v.npy'},test={tmp_path / 't.npy'}", "--quiet"])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"--link-split test={tmp_path / 't.npy'}: the pair (0, 4) is listed more than once" in err
    assert not (tmp_path / "bad").exists()


BAD_LISTS = [
    # (val pairs or array, test pairs or array, extra options, error class, message)
    (np.zeros(3, np.int64), [(2, 6)], {}, InputError, "--link-split val: {val}: the edge array has shape (3,)"),
    (np.zeros((2, 3), np.float32), [(2, 6)], {}, InputError, "{val}: the edge array must have dtype int32"),
    (np.array([[0, 1], [3, -4]]), [(2, 6)], {}, InputError, "{val}: edge 1 (0-based) has a negative node id -4"),
    ([(0, 1), (1, 99)], [(2, 6)], {}, InputError,
     "--link-split val={val}: the pair (1, 99) has node id 99, but the graph has 7 nodes"),
    ([(0, 1), (1, 7)], [(2, 6)], {"num_nodes": 7}, InputError, "has node id 7, which is >= --num-nodes 7"),
    ([(0, 1), (2, 6)], [(2, 6)], {}, InputError,
     "--link-split: the pair (2, 6) is in both val={val} and test={test}; a pair belongs to one split"),
    ([(0, 1), (4, 3)], [(2, 6)], {}, InputError, "held-out edge (4, 3) of val={val} is not in the graph"),
    ([(0, 1)], [(2, 6), (6, 5)], {"undirected": True}, InputError,
     "held-out edge (5, 6) of test={test} is not in the graph"),
    ([(0, 1), (3, 4), (0, 1)], [(2, 6)], {}, InputError, "the pair (0, 1) is listed more than once"),
    ([(0, 1), (2, 2)], [(2, 6)], {}, InputError, "val={val}: pair 1 is the self loop (2, 2)"),
    (None, [(2, 6)], {}, FileNotFoundError, "edge list of --link-split val not found"),
]


@pytest.mark.parametrize("val,test,options,error,message", BAD_LISTS)
def test_bad_edge_lists_are_refused_naming_the_file_and_write_nothing(tmp_path, val, test, options, error,
                                                                       message):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    (tmp_path / "lists").mkdir()
    vpath, tpath = tmp_path / "lists" / "val.npy", tmp_path / "lists" / "test.npy"
    if isinstance(val, np.ndarray):
        np.save(vpath, val)
    elif val is not None:
        save_pairs(vpath, val)
    save_pairs(tpath, test)
    with pytest.raises(error) as e:
        ringgnn.convert(src, tmp_path / "ds", link_split=f"val={vpath},test={tpath}", link_negatives=2,
                        memory="128M", threads=2, **options)
    assert message.format(val=vpath, test=tpath) in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["e.tsv", "lists"]


def test_only_a_train_list_is_refused(tmp_path):
    src = write_edges(tmp_path / "e.tsv", EDGES)
    save_pairs(tmp_path / "train.npy", [(0, 1)])
    with pytest.raises(InputError, match="lists only train, so nothing is held out"):
        ringgnn.convert(src, tmp_path / "ds", link_split=f"train={tmp_path / 'train.npy'}")
    assert not (tmp_path / "ds").exists()
