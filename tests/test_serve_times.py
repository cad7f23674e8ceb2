"""`ringgnn serve` at a time (issue 36): Sample, Predict, Embed and Score with `time` (and
`seed_times`, one per node), homogeneous and typed, on each gRPC frontend. Exact samples on
docs/FORMAT.md's example worked by hand, requests at different times in one wave, hot pages that
cannot leak a newer edge, the model's answers equal to the model on the sampler's sample at the
time, and every refusal naming its field."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _sampling import needs_sampler

import _temporal

import ringgnn
from ringgnn.data import build

grpc = pytest.importorskip("grpc")
torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = [needs_sampler, pytest.mark.timeout(300)]

R = "node:to:node"
FRONTENDS = ["rust", "grpcio"]


def serve(ds, **kw):
    from ringgnn.serving.server import Server

    return Server(ds, listen="127.0.0.1:0", **{"threads": 2, **kw}).start()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """docs/FORMAT.md's example: edges 2->1, 7->1, 0->1, 1->1, 3->0 at times 5, 3, 3, 9, -4, so
    node 1's list is (3, 0), (3, 7), (5, 2), (9, 1) and node 0's (-4, 3); and the same graph
    without times."""
    d = _temporal.example(tmp_path_factory.mktemp("tiny"))
    build.convert(d / "e.txt", d / "plain")
    return d


@pytest.fixture(scope="module", params=[(f, b) for f in FRONTENDS for b in ("memory", "pread")],
                ids=lambda p: "-".join(p))
def tiny_server(tiny, request):
    """The example served by each frontend, from memory and from disk through hot pages."""
    frontend, backend = request.param
    s = serve(tiny / "ds", fanouts=[-1, -1], backend=backend, neighbor_cache="1M" if backend == "pread" else None,
              frontend=frontend)
    yield s
    s.stop(1.0)


@pytest.fixture(scope="module")
def tiny_client(tiny_server):
    with ringgnn.Client(tiny_server.address, wait_ready=30) as c:
        yield c


def test_a_request_sees_exactly_the_edges_up_to_its_time(tiny_client):
    c = tiny_client
    # Without a time: every edge (the present), as the library's NeighborSampler.
    plain = c.sample([1])
    assert plain.node.tolist() == [1, 0, 7, 2, 3] and plain.seed_time is None
    # At 9, every edge too (the one-type typed sample), each node at time 9.
    s = c.sample([1], time=9)
    assert s.node.tolist() == [1, 0, 7, 2, 3] and s.seed_time.tolist() == [9] * 5
    assert s.row.tolist() == [1, 2, 3, 0, 4] and s.col.tolist() == [0, 0, 0, 0, 1]
    # At 3: the two edges at time 3 (time <= T, as PyG), then 0's edge at -4 at hop 2.
    s = c.sample([1], time=3)
    assert s.node.tolist() == [1, 0, 7, 3] and s.seed_time.tolist() == [3] * 4
    assert s.row.tolist() == [1, 2, 3] and s.col.tolist() == [0, 0, 1]
    assert s.num_sampled_nodes == [1, 2, 1] and s.num_sampled_edges == [2, 1] and s.batch_size == 1
    # At 2, before every edge into 1: the seed alone. At -4, node 0 still has its edge from 3.
    s = c.sample([1], time=2)
    assert s.node.tolist() == [1] and s.row.size == 0 and s.num_sampled_edges == [0, 0]
    s = c.sample([0], time=-4, edge_ids=True)
    assert s.node.tolist() == [0, 3] and s.edge.tolist() == [0] and s.seed_time.tolist() == [-4, -4]
    assert c.sample([0], time=-5).node.tolist() == [0]
    # The hot pages that served the requests at 9 served those at 3 and 2: nothing newer leaked;
    # and a request without a time is again the present.
    assert c.sample([1]).node.tolist() == plain.node.tolist()


def test_seeds_at_their_own_times_get_disjoint_subgraphs(tiny, tiny_client):
    # 1 at 3 and at 9, 0 at 3: two subgraphs; node 1 twice in the seeds (one per time).
    s = tiny_client.sample([1, 1, 0], [1], seed=5, seed_times=[3, 9, 3])
    want = ringgnn.HeteroNeighborSampler(tiny / "ds", [1], seed=5).sample([1, 1, 0], "node", input_time=[3, 9, 3])
    assert s.node.tolist() == want.node["node"].tolist() and s.seed_time.tolist() == want.seed_time["node"].tolist()
    assert s.row.tolist() == want.row[R].tolist() and s.col.tolist() == want.col[R].tolist()
    assert s.node[:3].tolist() == [1, 1, 0] and s.seed_time[:3].tolist() == [3, 9, 3] and s.batch_size == 3
    # Each edge joins two nodes of one subgraph, and no edge (by its id: its position in the
    # neighbor file, that of its time) is newer than its subgraph's time.
    assert all(s.seed_time[r] == s.seed_time[c] for r, c in zip(s.row, s.col))
    e = tiny_client.sample([1, 1, 0], [1], seed=5, seed_times=[3, 9, 3], edge_ids=True)
    m = ringgnn.Dataset.open(tiny / "ds").manifest
    edge_times = np.fromfile(tiny / "ds" / m["files"]["edge_times"]["path"], dtype="<i8")
    assert e.edge.size == 3 and all(edge_times[p] <= e.seed_time[c] for p, c in zip(e.edge, e.col))


@pytest.fixture(scope="module")
def sbm(tmp_path_factory):
    """A 2,000-node SBM with uniform edge and node times in [0, 1000)."""
    return _temporal.timed_sbm(tmp_path_factory.mktemp("sbm") / "g", 2000, 4)


def test_requests_at_different_times_in_one_wave_get_their_own_subgraphs(sbm):
    """Concurrent requests for one node at three times and without one wait for each other (a
    long --max-wait-ms) and share waves; each gets exactly its own time's subgraph, the
    library's."""
    fanouts = [4, 3]
    want = {None: ringgnn.NeighborSampler(sbm, fanouts).sample([7])}
    for t in (200, 600, 999):
        want[t] = ringgnn.HeteroNeighborSampler(sbm, fanouts).sample([7], "node", input_time=t)
    assert len({len(w.node["node"]) for t, w in want.items() if t}) == 3  # three different subgraphs
    for frontend in FRONTENDS:
        s = serve(sbm, fanouts=fanouts, threads=1, max_wait_ms=50, backend="pread", frontend=frontend)
        try:
            start = threading.Barrier(12)

            def work(t):
                with ringgnn.Client(s.address, wait_ready=30) as c:
                    start.wait()
                    return t, c.sample([7], time=t)

            with ThreadPoolExecutor(12) as pool:
                got = list(pool.map(work, [200, 600, 999, None] * 3))
            for t, sample in got:
                w = want[t]
                if t is None:
                    assert sample.node.tolist() == w.node.tolist() and sample.seed_time is None
                else:
                    assert sample.node.tolist() == w.node["node"].tolist()
                    assert sample.row.tolist() == w.row[R].tolist() and sample.seed_time.tolist() == [t] * len(w.node["node"])
            st = s.stats()
            assert st["wave_requests"] == 12 and st["waves"] < 12, st  # some waves held several
        finally:
            s.stop(1.0)


def test_info_says_whether_the_dataset_has_times(tiny, tiny_client):
    assert tiny_client.info()["has_times"] is True
    for frontend in FRONTENDS:
        s = serve(tiny / "plain", fanouts=[2], frontend=frontend)
        try:
            with ringgnn.Client(s.address, wait_ready=30) as c:
                assert c.info()["has_times"] is False
        finally:
            s.stop(1.0)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_times_refused_naming_the_field(tiny, tiny_client, frontend):
    c = tiny_client
    with pytest.raises(ringgnn.InputError, match="time .*or seed_times .*not both"):
        c.sample([1], time=3, seed_times=[3])
    with pytest.raises(ringgnn.InputError, match="seed_times has 1 times for 2 node ids"):
        c.sample([1, 0], seed_times=[3])
    with pytest.raises(ringgnn.InputError, match="seed_times must be a 1-D sequence of integer"):
        c.sample([1], seed_times=[1.5])
    with pytest.raises(ringgnn.InputError, match="time: 2.5 is not an integer"):
        c.sample([1], time=2.5)
    assert c.sample([1], time=3).node.tolist() == [1, 0, 7, 3]  # the server goes on
    s = serve(tiny / "plain", fanouts=[2], frontend=frontend)
    try:
        with ringgnn.Client(s.address, wait_ready=30) as p:
            with pytest.raises(ringgnn.InputError, match="^Sample at .*: time: the dataset has no edge or node times"):
                p.sample([1], time=3)
            with pytest.raises(ringgnn.InputError, match="seed_times: the dataset has no edge or node times"):
                p.sample([1], seed_times=[3])
            assert p.sample([1]).node[0] == 1
    finally:
        s.stop(1.0)


def test_the_rust_frontends_sample_reply_parses_with_the_shipped_proto(tiny, tiny_server):
    """The engine encodes a homogeneous reply itself (wire.rs): its seed_time is the .proto's."""
    from ringgnn.serving.rpc import protos

    pb, _ = protos()
    r = tiny_server.engine.sample(np.array([1, 0]), fanouts=[1], seed=3, seed_times=[3, 9], reply=True)
    m = pb.SampleReply.FromString(r)
    want = ringgnn.HeteroNeighborSampler(tiny / "ds", [1], seed=3).sample([1, 0], "node", input_time=[3, 9])
    assert list(m.node) == want.node["node"].tolist() and list(m.seed_time) == want.seed_time["node"].tolist()
    # The seeds, then what 1 at 3 reaches (0 or 7) and what 0 at 9 reaches (3).
    assert list(m.node)[:2] == [1, 0] and m.node[2] in (0, 7) and m.node[3] == 3
    assert list(m.seed_time) == [3, 9, 3, 9]


# --- the model's calls ------------------------------------------------------------------------------

FAST = dict(fanouts=[3], layers=1, hidden=8, batch_size=100, epochs=1, dropout=0.0, threads=1, quiet=True,
            log=lambda s: None)


def planted(d, n=300, k=4):
    """:func:`_temporal.planted`'s graph (300 nodes, ``k`` = 4) as ``ds`` (homogeneous) and the same
    as a typed dataset ``h`` (papers citing papers)."""
    _temporal.planted(d, n, k)
    build.build_hetero(d / "h", [
        build.NodeType("paper", n, features=d / "x.npy", labels=d / "y.npy", split=_temporal.PLANTED_SPLIT,
                       node_time=d / "nt.npy")],
        [build.Relation("paper:cites:paper", d / "e.npy", edge_time=d / "et.npy")], seed=1)
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The planted graph and a run on each kind: a homogeneous node run, a typed one (at times),
    and a homogeneous link run."""
    from ringgnn.training.loop import train

    d = planted(tmp_path_factory.mktemp("planted"))
    # A homogeneous run (trained on every edge), and one at times: the one-type typed kind's.
    train(d / "ds", out=d / "node", ignore_time=True, **FAST)
    train(d / "ds", out=d / "one_type", **FAST)
    train(d / "h", target="paper", out=d / "typed", **FAST)
    # Link prediction at times does not train yet (a time-split dataset): a link model of the
    # graph without times, served on the graph with them.
    build.convert(d / "e.txt", d / "links", features=d / "x.npy", link_split="val=0.1,test=0.1", seed=1)
    train(d / "links", out=d / "link", task="link", **FAST)
    return d


def homogeneous_at(ds, run, nodes, times, seed):
    """Predict's probabilities and Embed's rows computed in-process: the typed sampler at the
    times (the one-type case) with the model's fanouts and seed, the dataset's rows, the
    checkpoint's model."""
    from ringgnn.serving.model import Model

    ds = ringgnn.Dataset.open(ds)
    model = Model(str(run), ds)
    keys = list(dict.fromkeys(zip(nodes, times)))
    s = ringgnn.HeteroNeighborSampler(ds, model.fanouts, seed=seed).sample(
        [v for v, _ in keys], "node", input_time=[t for _, t in keys])
    x = ringgnn._core.FeatureReader(ds.path).gather(s.node["node"])
    logits, hidden = model.run({"row": s.row[R], "col": s.col[R], "num_sampled_nodes": s.num_sampled_nodes["node"],
                                "num_sampled_edges": s.num_sampled_edges[R]}, x)
    order = [keys.index(k) for k in zip(nodes, times)]
    return torch.softmax(logits, -1).numpy()[order], hidden.numpy()[order]


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_predict_and_embed_at_times_equal_the_model_on_the_sample_at_those_times(runs, frontend):
    s = serve(runs / "ds", model=str(runs / "node"), frontend=frontend)
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            nodes = [10, 3, 10, 250]
            for kw, times in ((dict(time=400), [400] * 4), (dict(seed_times=[150, 700, 900, 700]), [150, 700, 900, 700])):
                probs, hidden = homogeneous_at(runs / "ds", runs / "node", nodes, times, seed=4)
                p = c.predict(nodes, seed=4, **kw)
                assert p.seed_time.tolist() == times and p.probs.shape == (4, 2)
                np.testing.assert_allclose(p.probs, probs, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(c.embed(nodes, seed=4, **kw), hidden, rtol=1e-5, atol=1e-6)
            # Node 10 at two times is two rows, each its time's: at 150 it has fewer edges than at 900.
            p = c.predict([10, 10], seed=4, seed_times=[150, 1100])
            assert p.seed_time.tolist() == [150, 1100]
            # Without a time: the present, as before.
            assert c.predict(nodes, seed=4).seed_time is None
            with pytest.raises(ringgnn.InputError, match="seed_times has 1 times for 2 node ids"):
                c.predict([1, 2], seed_times=[5])
            with pytest.raises(ringgnn.InputError, match="not both"):
                c.embed([1], time=1, seed_times=[5])
    finally:
        s.stop(1.0)


def test_typed_sample_and_predict_at_times(runs):
    from ringgnn.models.checkpoints import read_checkpoint
    from ringgnn.serving.model import HeteroModelRun

    ds = ringgnn.Dataset.open(runs / "h")
    rel = "paper:cites:paper"
    for frontend in FRONTENDS:
        s = serve(ds, model=str(runs / "typed"), fanouts=[3, 2], frontend=frontend)
        try:
            with ringgnn.Client(s.address, wait_ready=30) as c:
                assert c.info()["has_times"] is True
                got = c.sample([5, 7, 5], seed=2, node_type="paper", seed_times=[300, 300, 800])
                want = ringgnn.HeteroNeighborSampler(ds, [3, 2], seed=2).sample([5, 7, 5], "paper",
                                                                                  input_time=[300, 300, 800])
                assert got.node["paper"].tolist() == want.node["paper"].tolist()
                assert got.row[rel].tolist() == want.row[rel].tolist() and got.col[rel].tolist() == want.col[rel].tolist()
                assert got.seed_time["paper"].tolist() == want.seed_time["paper"].tolist()
                assert got.node["paper"][:3].tolist() == [5, 7, 5] and got.seed_time["paper"][:3].tolist() == [300] * 2 + [800]
                assert c.sample([5], node_type="paper").seed_time is None
                # Predict at 500 is the model on the sampler's sample at 500.
                model = HeteroModelRun(str(runs / "typed"), ds, read_checkpoint(str(runs / "typed")))
                smp = ringgnn.HeteroNeighborSampler(ds, model.fanouts, seed=1).sample([9, 4], "paper", input_time=500)
                x = {"paper": ringgnn._core.FeatureReader(ds.path, part="node/paper").gather(smp.node["paper"])}
                logits, _ = model.run(smp, x)
                p = c.predict([9, 4], seed=1, time=500)
                np.testing.assert_allclose(p.probs, torch.softmax(logits[:2], -1).numpy(), rtol=1e-5, atol=1e-6)
                assert p.seed_time.tolist() == [500, 500]
                with pytest.raises(ringgnn.InputError, match="seed_times has 2 times for 1 node ids"):
                    c.sample([5], node_type="paper", seed_times=[1, 2])
        finally:
            s.stop(1.0)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_a_homogeneous_dataset_with_its_run_at_times_is_served_as_its_one_type_case(runs, frontend):
    """`ringgnn train DS` at times makes a one-type typed run; `serve DS --model RUN` serves DS
    as that one-type case: Predict at a time is the model on the sampler's sample at that time,
    Sample names the type."""
    from ringgnn.models.checkpoints import read_checkpoint
    from ringgnn.serving.model import HeteroModelRun

    ds = ringgnn.Dataset.open(runs / "ds")
    s = serve(ds, model=str(runs / "one_type"), frontend=frontend)
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            model = HeteroModelRun(str(runs / "one_type"), ds, read_checkpoint(str(runs / "one_type")))
            smp = ringgnn.HeteroNeighborSampler(ds, model.fanouts, seed=1).sample([9, 4], "node", input_time=500)
            logits, _ = model.run(smp, {"node": ringgnn._core.FeatureReader(ds.path).gather(smp.node["node"])})
            p = c.predict([9, 4], seed=1, time=500)
            np.testing.assert_allclose(p.probs, torch.softmax(logits[:2], -1).numpy(), rtol=1e-5, atol=1e-6)
            assert p.seed_time.tolist() == [500, 500] and c.predict([9, 4], seed=1).seed_time is None
            got = c.sample([5], seed=2, node_type="node", time=300)
            want = ringgnn.HeteroNeighborSampler(ds, [3], seed=2).sample([5], "node", input_time=300)
            assert got.node["node"].tolist() == want.node["node"].tolist()
            with pytest.raises(ringgnn.InputError, match="served as its one-type case .*give node_type 'node'"):
                c.sample([5], time=300)
    finally:
        s.stop(1.0)
    with pytest.raises(ringgnn.InputError, match="--cache: not available .* typed run of its one type"):
        serve(ds, model=str(runs / "one_type"), cache="1M")


def test_typed_dataset_without_times_refuses_a_time(tmp_path):
    np.save(tmp_path / "e.npy", np.array([[0, 1], [1, 2]], dtype=np.int64))
    build.build_hetero(tmp_path / "h", [build.NodeType("paper", 3)],
                       [build.Relation("paper:cites:paper", tmp_path / "e.npy")])
    s = serve(tmp_path / "h", fanouts=[2])
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            assert c.info()["has_times"] is False
            with pytest.raises(ringgnn.InputError, match="time: the dataset has no edge or node times"):
                c.sample([1], node_type="paper", time=3)
    finally:
        s.stop(1.0)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_score_at_a_time(runs, frontend):
    s = serve(runs / "ds", model=str(runs / "link"), frontend=frontend)
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            src, dst = [1, 5, 1], [2, 9, 7]
            at = c.score(src, dst, seed=3, time=500)
            # The endpoints' embeddings at 500 (Embed of a link model is what its decoder scores).
            from ringgnn.serving.model import Model

            model = Model(str(runs / "link"), ringgnn.Dataset.open(runs / "ds"))
            nodes = sorted(set(src + dst))
            z = torch.from_numpy(c.embed(nodes, seed=3, time=500))
            want = model.score(z[[nodes.index(v) for v in src]], z[[nodes.index(v) for v in dst]]).numpy()
            np.testing.assert_allclose(at, want, rtol=1e-5, atol=1e-5)
            assert not np.allclose(c.score(src, dst, seed=3, time=150), c.score(src, dst, seed=3))
    finally:
        s.stop(1.0)


def test_cli_temporal_strategy(tiny, tmp_path):
    """`ringgnn serve --temporal-strategy last` takes the most recent edges."""
    s = serve(tiny / "ds", fanouts=[2], temporal_strategy="last")
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            assert c.sample([1], time=9).node.tolist() == [1, 2]  # times 5 and 9 (1 is the seed)
            assert c.sample([1], time=4).node.tolist() == [1, 0, 7]  # both at time 3
    finally:
        s.stop(1.0)
    from ringgnn.cli import main

    with pytest.raises(SystemExit):
        main(["serve", str(tiny / "ds"), "--temporal-strategy", "first"])


def _time_files_cut(src, dst):
    """A copy of the dataset ``src`` at ``dst`` whose time files are cut to 8 bytes (and the
    manifest records that size, so the dataset opens): a server that opens one of them fails."""
    import json
    import shutil

    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    cut = [f for k, f in m["files"].items() if k.endswith("times")]
    assert cut
    for f in cut:
        os.truncate(dst / f["path"], 8)
        f["bytes"] = f["payload_bytes"] = 8
    (dst / "manifest.json").write_text(json.dumps(m, indent=2))
    return dst


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_a_server_with_ignore_time_opens_no_time_file(tiny, tmp_path, frontend):
    """`serve --ignore-time` on a dataset with times (homogeneous, and typed with edge and node
    times): it opens none of the time files (it serves a copy without them, which a server with
    times cannot open), its typed plan counts no edge times, Sample answers without times what
    a server with times answers, and a request at a time is refused saying why."""
    np.save(tmp_path / "e.npy", np.array([[0, 1], [1, 2], [2, 0], [2, 1]], dtype=np.int64))
    np.save(tmp_path / "et.npy", np.array([4, 1, 3, 2], dtype=np.int64))
    np.save(tmp_path / "nt.npy", np.array([5, 5, 5], dtype=np.int64))
    build.build_hetero(tmp_path / "h", [build.NodeType("paper", 3, node_time=tmp_path / "nt.npy")],
                       [build.Relation("paper:cites:paper", tmp_path / "e.npy", edge_time=tmp_path / "et.npy")])
    for src, kw in ((tiny / "ds", {}), (tmp_path / "h", {"node_type": "paper"})):
        bare = _time_files_cut(src, tmp_path / f"{src.name}-bare")
        with pytest.raises(ringgnn.RingGnnError, match=r"_times\.bin: "):
            serve(bare, fanouts=[-1, -1], frontend=frontend).stop(1.0)
        timed = serve(src, fanouts=[-1, -1], frontend=frontend)
        s = serve(bare, fanouts=[-1, -1], frontend=frontend, ignore_time=True)
        try:
            assert s.engine.has_times is False and "(--ignore-time): every edge is sampled" in s.describe()
            if kw:
                # 4 bytes an edge (u32 ids), not 12 (with the edge times held beside them).
                assert s.memory_plan.relations["paper:cites:paper"].bytes == 4 * 4
                assert timed.memory_plan.relations["paper:cites:paper"].bytes == 12 * 4
            with ringgnn.Client(s.address, wait_ready=30) as c, ringgnn.Client(timed.address, wait_ready=30) as t:
                assert c.info()["has_times"] is False and t.info()["has_times"] is True
                for seeds in ([1], [0, 2]):
                    got, want = c.sample(seeds, seed=3, **kw), t.sample(seeds, seed=3, **kw)
                    assert got.seed_time is None
                    assert repr(got.node) == repr(want.node) and repr(got.row) == repr(want.row)
                    assert repr(got.col) == repr(want.col)
                with pytest.raises(ringgnn.InputError, match="time: this server samples without times "
                                   r"\(started with --ignore-time\)"):
                    c.sample([1], time=3, **kw)
                with pytest.raises(ringgnn.InputError, match="seed_times: this server samples without times"):
                    c.sample([1], seed_times=[3], **kw)
        finally:
            s.stop(1.0)
            timed.stop(1.0)


def test_cli_ignore_time(tiny):
    from ringgnn.cli import build_parser

    args = build_parser().parse_args(["serve", str(tiny / "ds"), "--ignore-time"])
    assert args.ignore_time is True
