"""`ringgnn._options`: every option parsed once, by one rule, whichever front end it came from
(the Python API or the command line); the rules the Rust core also needs are the core's."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from _sampling import path_graph

from ringgnn import InputError, _core, _options


def test_sizes_counts_and_their_argparse_forms():
    assert _options.size("512M", "memory") == 512 << 20
    assert _options.size("1g", "memory") == 1 << 30
    assert _options.size(4096, "memory") == 4096
    assert _options.size(None, "memory") is None
    for bad in ("lots", "-1", "1.5G"):
        with pytest.raises(InputError, match="is not a size"):
            _options.size(bad, "memory")
    with pytest.raises(InputError, match="memory must be >= 0 bytes"):
        _options.size(-5, "memory")
    with pytest.raises(InputError, match="cache must be an integer"):
        _options.size(1.5, "cache")
    assert _options.count(3, "threads", 1) == 3
    assert _options.count(np.int64(2), "threads", 1) == 2
    with pytest.raises(InputError, match="threads must be at least 1, not 0"):
        _options.count(0, "threads", 1)
    with pytest.raises(InputError, match="seed must be >= 0, not -1"):
        _options.count(-1, "seed")
    with pytest.raises(InputError, match="must be an integer"):
        _options.count(True, "hold", 1)
    assert _options.optional_count(None, "prefetch") is None
    assert _options.size_arg("2K") == 2048 and _options.positive_arg("3") == 3
    for arg, text in ((_options.size_arg, "x"), (_options.positive_arg, "0"), (_options.count_arg, "-2"),
                      (_options.count_arg, "two")):
        with pytest.raises(argparse.ArgumentTypeError):
            arg(text)


def test_fanouts_and_names_are_the_cores():
    assert _options.fanouts("20,15,10") == _options.fanouts([20, 15, 10]) == [20, 15, 10]
    assert _options.fanouts((-1,)) == [-1]
    assert _core.parse_fanouts("3, -1") == [3, -1]
    for bad, msg in (("10,0", "fanout 0 at hop 1"), ("", "not an integer"), ([], "empty"), ([_core.MAX_FANOUT + 1], "at hop 0")):
        with pytest.raises(InputError, match=msg):
            _options.fanouts(bad)
    assert _options.BACKENDS == ("auto", "memory", "uring", "pread") == tuple(_core.BACKENDS)
    assert _options.CACHE_POLICIES == ("presample", "degree")
    assert _options.backend("uring") == "uring"
    with pytest.raises(InputError, match="feature_backend 'ssd' is unknown; use one of auto, memory"):
        _options.backend("ssd", "feature_backend")
    with pytest.raises(InputError, match="cache_policy 'lru'"):
        _options.cache_policy("lru")


def test_seed_sets(tmp_path):
    ds = path_graph(tmp_path)
    assert _options.seeds(ds, None).tolist() == _options.seeds(ds, "all").tolist() == [0, 1, 2, 3, 4]
    np.save(tmp_path / "s.npy", np.array([4, 1], dtype=np.int32))
    got = _options.seeds(ds, tmp_path / "s.npy")
    assert got.tolist() == [4, 1] and got.dtype == np.int64
    assert _options.seeds(ds, [3, 3]).tolist() == [3, 3]
    with pytest.raises(InputError, match="no split 'train' \\(it has: no splits\\)"):
        _options.seeds(ds, "train")
    with pytest.raises(InputError, match="1-D"):
        _options.seeds(ds, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(InputError, match="integer node ids"):
        _options.seeds(ds, [0.5])
    with pytest.raises(FileNotFoundError):
        _options.seeds(ds, tmp_path / "missing.npy")


def test_reserve_defaults_to_what_the_process_holds():
    assert _options.reserve("1M") == 1 << 20
    rss = _options.process_rss()
    assert rss > 10 << 20  # Python with numpy
    assert abs(_options.reserve(None) - rss) < 64 << 20


def test_held_memory_counts_anonymous_memory_not_mapped_files(tmp_path):
    """The one measure every memory plan takes off a budget as held (``_options.held_memory``):
    anonymous memory grows it by what is touched; a file's pages, mapped and read, grow the
    resident size but not it (a cgroup can drop them)."""
    import mmap

    mib = 1 << 20
    before = _options.held_memory()
    block = np.ones(64 * mib, dtype=np.uint8)  # touched: 64 MiB of anonymous pages
    grown = _options.held_memory() - before
    assert 60 * mib <= grown <= 72 * mib, grown
    del block
    path = tmp_path / "pages"
    path.write_bytes(b"\1" * (64 * mib))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        held, rss = _options.held_memory(), _options.process_rss()
        total = sum(m[i] for i in range(0, len(m), 4096))  # every page faulted in
        assert total == 64 * mib // 4096
        assert _options.process_rss() - rss >= 60 * mib
        assert abs(_options.held_memory() - held) < 8 * mib
    assert _options.code_bytes() in (_options.CODE_BYTES, _options.CODE_BYTES_NO_TORCH)
    assert _options.code_bytes(training=True) >= _options.code_bytes()


def test_edge_pairs_of_a_typed_relation(tmp_path):
    """`--edges` of a typed relation ``S:R:D`` by the one parser of pairs (``predict --edges`` of a
    `--relation` run, HeteroLinkBatches' pairs): its splits, each end checked against its own type."""
    from conftest import tiny_writes

    ds = tiny_writes(tmp_path)  # 5 authors, 6 papers; author:writes:paper with val and test
    rel, kw = ds.relation("author:writes:paper"), dict(counts=(5, 6), types=("author", "paper"))
    assert _options.edge_pairs(rel, "test", "--edges", **kw).tolist() == [[3], [1]]
    assert _options.stored_split(rel, "test") == "test" and _options.stored_split(rel, [[3], [1]]) is None
    assert _options.edge_pairs(rel, np.array([[4, 5], [0, 1], [2, 3]]), "--edges", **kw).tolist() == [[4, 0, 2],
                                                                                                      [5, 1, 3]]
    with pytest.raises(InputError, match=r"--edges: node 5 is not a node of .*: pair 0 has source 5, but node "
                                         r"type 'author' has 5 nodes"):
        _options.edge_pairs(rel, np.array([[5], [0]]), "--edges", **kw)
    np.save(tmp_path / "p.npy", np.array([[0, 6]]))
    with pytest.raises(InputError, match=r"--edges .*p.npy: node 6 is not a node of .*: pair 0 has destination 6, "
                                         r"but node type 'paper' has 6 nodes"):
        _options.edge_pairs(rel, str(tmp_path / "p.npy"), "--edges", **kw)
    with pytest.raises(InputError, match=r"--edges 'valid': not an edge split of relation author:writes:paper of "
                                         r".* \(it has: test, train, val\) nor a .npy file"):
        _options.edge_pairs(rel, "valid", "--edges", **kw)
    with pytest.raises(FileNotFoundError, match="reading the pairs"):
        _options.edge_pairs(rel, str(tmp_path / "missing.npy"), "--edges", **kw)


def test_one_check_refuses_cuda_without_a_device(tmp_path, monkeypatch):
    # --device cuda where PyTorch sees no GPU: training, inference and the ranks under torchrun
    # are refused by one check (_options.require_cuda), with one message.
    torch = pytest.importorskip("torch")
    import ringgnn
    from ringgnn.training import distributed, loop

    ringgnn.generate_sbm(tmp_path / "sbm", nodes=60, classes=2, avg_degree=4, feature_dim=4, seed=1)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    message = "--device cuda: PyTorch sees no CUDA device here; use --device cpu"
    refusals = [lambda: _options.inference_device("cuda"), lambda: distributed.join("cuda"),
                lambda: loop.train(tmp_path / "sbm", device="cuda", out=str(tmp_path / "run"), quiet=True)]
    for refused in refusals:
        with pytest.raises(InputError) as e:
            refused()
        assert str(e.value) == message

    class Checked(Exception):
        pass

    def check():
        raise Checked

    monkeypatch.setattr(_options, "require_cuda", check)
    for refused in refusals:
        with pytest.raises(Checked):
            refused()
