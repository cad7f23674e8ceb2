"""Builds that store original node ids refuse a repeated one before the dataset exists
(docs/FORMAT.md, "Original node ids"): ``convert`` and ``build_hetero`` with ``node_ids``, with
the same check as ``ringgnn verify``, within ``memory``; nothing is left behind. The importers
that assign dense ids (``convert edges.parquet``, typed tables) store each id they number once,
so no repeat can come through them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import numpy as np
import pytest

import ringgnn
from ringgnn import NodeType, Relation

from conftest import assert_nothing_left
from test_verify_ids import int_ids, str_ids

ADVICE = (
    "each original id must name one node, or lookups by original id (predict --nodes, an importer's joins) "
    "are ambiguous: remove the repeat from the input (or give one of the two nodes another id) and build again"
)


def path_edges(tmp: Path, n: int) -> Path:
    edges = tmp / "e.npy"
    np.save(edges, np.stack([np.arange(n - 1), np.arange(1, n)], axis=1).astype(np.int64))
    return edges


def left(tmp: Path) -> List[str]:
    """Entries of ``tmp/out``, where the builds below write (their temporaries would show)."""
    return sorted(os.listdir(tmp / "out"))


def test_convert_refuses_a_repeated_integer_id(tmp_path):
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "ds"
    ids = int_ids(tmp_path, "n", [10, -7, 5_000_000_000, -7, 3])
    with pytest.raises(ringgnn.InputError) as e:
        ringgnn.convert(path_edges(tmp_path, 5), out, node_ids=ids)
    assert str(e.value) == (f"{ids[1]}: nodes 1 and 3 (entries 1 and 3 of the file, counted from 0) both have "
                            f"the original id -7; {ADVICE}")
    assert_nothing_left(out)
    assert left(tmp_path) == []
    # distinct ids build
    ok = int_ids(tmp_path, "n", [10, -7, 5_000_000_000, 7, 3])
    ringgnn.convert(path_edges(tmp_path, 5), out, node_ids=ok)
    assert list(ringgnn.Dataset.open(out).node_ids()) == [10, -7, 5_000_000_000, 7, 3]


def test_convert_refuses_a_repeated_string_id(tmp_path):
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "ds"
    ids = str_ids(tmp_path, "n", ["a", "tab\there", "b", "tab\there"])
    with pytest.raises(ringgnn.InputError) as e:
        ringgnn.convert(path_edges(tmp_path, 4), out, node_ids=ids)
    assert str(e.value) == (f"{ids[1]} (offsets into {ids[2]}): nodes 1 and 3 (entries 1 and 3 of the file, "
                            f'counted from 0) both have the original id "tab\\there"; {ADVICE}')
    assert_nothing_left(out)
    assert left(tmp_path) == []


def test_a_heterogeneous_build_refuses_a_repeat_within_a_type_only(tmp_path):
    edges = tmp_path / "buys.csv"
    edges.write_text("0,0\n1,1\n")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "het"

    def build(users: tuple, items: tuple) -> None:
        ringgnn.build_hetero(out, [NodeType("user", 3, node_ids=users), NodeType("item", 2, node_ids=items)],
                             [Relation("user:buys:item", edges)])

    # the same ids in two types name two nodes
    build(int_ids(tmp_path, "u", [1, 2, 3]), int_ids(tmp_path, "i", [2, 1]))
    assert list(ringgnn.Dataset.open(out).node_ids("item")) == [2, 1]
    ringgnn.verify(out)
    import shutil

    shutil.rmtree(out)
    items = str_ids(tmp_path, "i", ["é", "é"])
    with pytest.raises(ringgnn.InputError) as e:
        build(int_ids(tmp_path, "u", [1, 2, 3]), items)
    assert str(e.value) == (f"node type 'item': {items[1]} (offsets into {items[2]}): nodes 0 and 1 (entries 0 "
                            f'and 1 of the file, counted from 0) both have the original id "é"; {ADVICE}')
    assert_nothing_left(out)
    assert left(tmp_path) == []


# 1.5M ids take 24 MB to sort, more than --memory 128M leaves beyond the builder's 112 MiB.
N_BIG = 1_500_000


def test_ids_beyond_the_budget_are_sorted_in_the_builds_directory_and_removed(tmp_path):
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "ds"
    ids = np.random.default_rng(0).permutation(np.arange(N_BIG, dtype=np.int64) * 1_000_003)
    ids[1_400_000] = ids[5]
    with pytest.raises(ringgnn.InputError, match=f"nodes 5 and 1400000 \\(entries 5 and 1400000 of the file, "
                                                 f"counted from 0\\) both have the original id {ids[5]}; "):
        ringgnn.convert(path_edges(tmp_path, N_BIG), out, memory="128M", node_ids=int_ids(tmp_path, "n", ids))
    assert_nothing_left(out)
    assert left(tmp_path) == []
