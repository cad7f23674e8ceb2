"""Datasets written by every released format version stay readable (lance's rule).

`tests/fixtures/v1-tiny` was built by ringgnn 0.1.0 (format version 1) with:
    printf '0 1\\n2 1\\n1 2\\n3 3\\n4 0\\n2 1\\n' > edges.txt
    ringgnn convert edges.txt v1-tiny --num-nodes 6 --features x.npy --labels y.npy \\
        --split train=tr.npy,val=va.npy,test=te.npy
with x = arange(18).reshape(6, 3) / 4 (float32), y = [0, 1, 2, 1, -1, 0], train [0, 1, 2],
val [3], test [5]. Never regenerate it: a new format version gets a new fixture beside it.

`tests/fixtures/v2-tiny` (format version 2: edge splits) was built on 2026-11-25 with:
    printf '0 1\n0 1\n1 0\n2 2\n2 3\n3 4\n4 0\n1 3\n3 1\n0 4\n5 2\n4 5\n2 6\n' > edges.txt
    ringgnn.convert('edges.txt', 'v2-tiny', link_split='val=0.2,test=0.3', link_negatives=2, seed=3)

`tests/fixtures/v2-hetero-tiny` (format version 2: typed nodes and relations) was built on
2026-11-25 with:
    printf '0,0\n1,0\n1,1\n2,3\n' > writes.csv; printf '1,0\n2,0\n3,1\n0,2\n' > cites.csv
    ringgnn.build_hetero('v2-hetero-tiny',
        [NodeType('paper', 4, features='x.npy', labels='y.npy', split={'train': 'tr.npy', 'test': 'te.npy'}),
         NodeType('author', 3)],
        [Relation('author:writes:paper', 'writes.csv'), Relation('paper:cites:paper', 'cites.csv')],
        add_reverse=True, source={'command': 'test fixture'})
with x = arange(8).reshape(4, 2) / 2 (float32), y = [0, 1, -1, 1], train [0, 1], test [3].

`tests/fixtures/v2-node-ids-tiny` (format version 2: original node ids, string) was built on
2026-11-26 with:
    printf 'src,dst\nbob,alice\nzo\xc3\xab,bob\nalice,zo\xc3\xab\n,bob\n' > edges.csv
    ringgnn.importers.tables.convert_table('edges.csv', 'v2-node-ids-tiny', src='src', dst='dst')
(ids "", "alice", "bob", "zoë": one bucket, so dense ids follow the ids' byte order).
"""
from pathlib import Path

import numpy as np
import pytest

import ringgnn
from ringgnn import cli

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def v1():
    return ringgnn.Dataset.open(FIXTURES / "v1-tiny")


def test_v1_counts(v1):
    assert (v1.num_nodes, v1.num_edges, v1.feature_dim, v1.num_classes) == (6, 6, 3, 3)


def test_v1_graph(v1):
    want = {0: [4], 1: [0, 2, 2], 2: [1], 3: [3], 4: [], 5: []}
    for v, nbrs in want.items():
        assert v1.neighbors(v).tolist() == nbrs
    indptr = np.fromfile(FIXTURES / "v1-tiny" / "indptr.bin", dtype="<u8", count=7)
    assert indptr.tolist() == [0, 1, 4, 5, 6, 6, 6]


def test_v1_labels_splits_features(v1):
    assert v1.labels.tolist() == [0, 1, 2, 1, -1, 0]
    assert v1.split("train").tolist() == [0, 1, 2]
    assert v1.split("val").tolist() == [3]
    assert v1.split("test").tolist() == [5]
    # f32 rows of 12 bytes, 341 per page: all six rows are back to back on page 0.
    raw = np.fromfile(FIXTURES / "v1-tiny" / "features.bin", dtype="<f4", count=18).reshape(6, 3)
    np.testing.assert_array_equal(raw, np.arange(18, dtype=np.float32).reshape(6, 3) / 4)


def test_v1_verifies():
    assert cli.main(["verify", str(FIXTURES / "v1-tiny"), "--quiet"]) in (0, None)


@pytest.fixture
def v2():
    return ringgnn.Dataset.open(FIXTURES / "v2-tiny")


def test_v2_edge_splits(v2):
    assert v2.edge_split_names == ["test", "train", "val"]
    assert v2.edge_split("val").T.tolist() == [[4, 0], [5, 2], [1, 3]]
    assert v2.edge_split("test").T.tolist() == [[2, 3], [3, 4]]
    assert v2.edge_split("train").T.tolist() == [[1, 0], [0, 1], [3, 1], [0, 4], [4, 5], [2, 6]]
    assert v2.edge_negatives("val").tolist() == [[2, 6], [4, 0], [2, 1]]
    assert v2.edge_negatives("test").tolist() == [[0, 5], [5, 6]]


def test_v2_graph_is_the_training_graph(v2):
    assert [v2.neighbors(v).tolist() for v in range(7)] == [[1], [0, 0, 3], [2], [], [0], [4], [2]]
    assert (v2.num_nodes, v2.num_edges) == (7, 8)


def test_v2_verifies():
    assert cli.main(["verify", str(FIXTURES / "v2-tiny"), "--quiet"]) in (0, None)


def test_v2_hetero_reads_byte_for_byte():
    d = FIXTURES / "v2-hetero-tiny"
    ds = ringgnn.Dataset.open(d)
    assert isinstance(ds, ringgnn.HeteroDataset)
    assert ds.num_nodes_dict == {"author": 3, "paper": 4}
    files = ds.manifest["files"]

    def raw(key, dtype, count):
        return np.fromfile(d / files[key]["path"], dtype=dtype, count=count).tolist()

    # author:writes:paper over the 4 papers; paper:rev_writes:author over the 3 authors (its
    # offset index cut from the 5 rows the build ran over).
    assert raw("relation.author:writes:paper.indptr", "<u8", 5) == [0, 2, 3, 3, 4]
    assert raw("relation.author:writes:paper.indices", "<u4", 4) == [0, 1, 1, 2]
    assert files["relation.paper:rev_writes:author.indptr"]["payload_bytes"] == 4 * 8
    assert raw("relation.paper:rev_writes:author.indptr", "<u8", 4) == [0, 1, 3, 4]
    assert raw("relation.paper:rev_writes:author.indices", "<u4", 4) == [0, 0, 1, 3]
    assert raw("relation.paper:cites:paper.indices", "<u4", 4) == [1, 2, 3, 0]
    paper = ds.node_type("paper")
    assert paper.labels.tolist() == [0, 1, -1, 1]
    assert paper.split("train").tolist() == [0, 1] and paper.split("test").tolist() == [3]
    assert raw("node.paper.features", "<f4", 8) == (np.arange(8) / 2).tolist()
    assert ds.manifest["relations"]["paper:rev_writes:author"]["degree"]["max"] == 2


def test_v2_hetero_verifies():
    assert cli.main(["verify", str(FIXTURES / "v2-hetero-tiny"), "--quiet"]) in (0, None)


def test_v2_node_ids_read_byte_for_byte():
    d = FIXTURES / "v2-node-ids-tiny"
    ds = ringgnn.Dataset.open(d)
    assert ds.manifest["node_ids"] == {"dtype": "str", "bytes": 12}
    assert ds.node_ids().tolist() == ["", "alice", "bob", "zoë"]
    assert ds.node_ids([3, 0]).tolist() == ["zoë", ""]
    # offsets [V + 1] u64 into the UTF-8 bytes
    assert np.fromfile(d / "node_ids.bin", dtype="<u8", count=5).tolist() == [0, 0, 5, 8, 12]
    assert (d / "node_id_bytes.bin").read_bytes()[:12] == "alicebobzoë".encode()
    # bob -> alice, zoë -> bob, alice -> zoë, "" -> bob
    assert [ds.neighbors(v).tolist() for v in range(4)] == [[], [2], [0, 3], [1]]
    assert cli.main(["verify", str(d), "--quiet"]) in (0, None)
