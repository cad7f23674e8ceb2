"""`ringgnn serve` on a heterogeneous dataset: typed Sample exactly HeteroNeighborSampler's,
per-relation fanouts, Features per type, Predict/Embed equal to a local forward of the run's
model on the same sample, Info, every bad request refused with INVALID_ARGUMENT naming the
problem, what is refused at start, typed requests on a homogeneous server, and the command line.
(The homogeneous server's own behaviour is tests/test_serve.py's.)"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _sampling import needs_sampler

import ringgnn
from ringgnn import HeteroNeighborSampler, NodeType, Relation

grpc = pytest.importorskip("grpc")
torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = [needs_sampler, pytest.mark.timeout(300)]

P, A, V = 120, 80, 6  # papers (f32 features, 3 classes), authors (f16 features), venues (none)
RELATIONS = ["author:writes:paper", "paper:cites:paper", "paper:in:venue", "paper:rev_cites:paper",
             "paper:rev_writes:author", "venue:rev_in:paper"]
#: The run's training fanouts (per relation: what Predict and Embed sample with) and the server's
#: defaults (what Sample takes without fanouts): two pinned configurations.
MODEL_FANOUTS = {**{r: [3, 2] for r in RELATIONS}, "paper:rev_cites:paper": [2, 0], "venue:rev_in:paper": [1, 1]}
SERVER_FANOUTS = {**{r: [2, 2] for r in RELATIONS}, "paper:in:venue": [1, 0]}


def build(d, papers=P, seed=0):
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "px.npy", rng.normal(size=(papers, 4)).astype(np.float32))
    np.save(d / "ax.npy", rng.normal(size=(A, 3)).astype(np.float16))
    np.save(d / "py.npy", rng.integers(0, 3, papers))
    perm = rng.permutation(papers)
    split = {}
    for s, ids in (("train", perm[: papers // 2]), ("val", perm[papers // 2: 3 * papers // 4])):
        np.save(d / f"{s}.npy", np.sort(ids))
        split[s] = str(d / f"{s}.npy")

    def edges(name, src, dst):
        np.save(d / f"{name}.npy", np.stack([src, dst]))
        return d / f"{name}.npy"

    ringgnn.build_hetero(
        d / "ds",
        [NodeType("paper", papers, features=d / "px.npy", labels=d / "py.npy", split=split),
         NodeType("author", A, features=d / "ax.npy"), NodeType("venue", V)],
        [Relation("author:writes:paper", edges("writes", rng.integers(0, A, 300), rng.integers(0, papers, 300))),
         Relation("paper:cites:paper", edges("cites", rng.integers(0, papers, 300), rng.integers(0, papers, 300))),
         Relation("paper:in:venue", edges("in", np.arange(papers), rng.integers(0, V, papers)))],
        add_reverse=True)
    return d


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """The typed dataset, its rows, and a sage run trained on it for one epoch."""
    from ringgnn.training.loop import train

    d = build(tmp_path_factory.mktemp("typed"))
    ds = ringgnn.Dataset.open(d / "ds")
    assert ds.relations == RELATIONS
    train(ds, target="paper", fanouts=MODEL_FANOUTS, epochs=1, batch_size=32, hidden=8, out=str(d / "run"),
                 eval_mode="sampled", quiet=True, log=lambda s: None)
    return ds, d / "run", {"paper": np.load(d / "px.npy"), "author": np.load(d / "ax.npy")}


@pytest.fixture(scope="module", params=["rust", "grpcio"])
def server(typed, request):
    """In-process, on each frontend (the Rust one is the API's default): 2 workers, at most 64 ids
    and 3 hops per request."""
    from ringgnn.serving.server import Server

    ds, run, _ = typed
    s = Server(ds, listen="127.0.0.1:0", model=str(run), fanouts=SERVER_FANOUTS, threads=2, max_nodes=64,
               max_hops=3, frontend=request.param).start()
    yield s
    s.stop(1.0)


@pytest.fixture(scope="module")
def client(server):
    with ringgnn.Client(server.address, wait_ready=30) as c:
        yield c


def same(a: ringgnn.HeteroSample, b: ringgnn.HeteroSample) -> bool:
    arrays = ("node", "row", "col") + (("edge",) if b.edge is not None else ())
    return (a.seed_type == b.seed_type and a.num_sampled_nodes == b.num_sampled_nodes
            and a.num_sampled_edges == b.num_sampled_edges
            and all(getattr(a, k).keys() == getattr(b, k).keys()
                    and all(np.array_equal(getattr(a, k)[n], getattr(b, k)[n]) for n in getattr(b, k))
                    for k in arrays))


# --- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("nodes,node_type,fanouts,seed,replace,edge_ids", [
    ([3], "paper", None, None, False, False),  # the server's fanouts and seed
    ([3, 5, 3, 119], "paper", None, 7, False, True),  # a duplicate seed kept once
    ([0, 1, 79], "author", [2, -1], 11, True, False),  # one list for every relation, replacement
    ([5], "venue", MODEL_FANOUTS, 2**63 + 5, False, True),  # the model's configuration, another seed
    ([4, 2], "paper", {tuple(r.split(":")): [1, 0, 2] for r in RELATIONS}, 0, False, False),  # PyG keys, 0s
])
def test_typed_sample_equals_the_library(typed, client, nodes, node_type, fanouts, seed, replace, edge_ids):
    ds, _, _ = typed
    got = client.sample(nodes, fanouts, seed=seed, replace=replace, edge_ids=edge_ids, node_type=node_type)
    want = HeteroNeighborSampler(ds, fanouts or SERVER_FANOUTS, replace=replace, seed=seed or 0,
                                 with_edge_ids=edge_ids).sample(nodes, node_type)
    assert isinstance(got, ringgnn.HeteroSample)
    assert same(got, want)
    assert sum(sum(c) for c in got.num_sampled_edges.values()) > 0
    assert (got.edge is not None) == edge_ids


def test_per_relation_fanouts_shape_the_sample(typed, client):
    ds, _, _ = typed
    # One hop of every in-neighbor: each relation into paper gives exactly the lists of the file.
    s = client.sample([7, 8], {r: [-1] for r in RELATIONS}, seed=1, node_type="paper")
    for r in ("author:writes:paper", "paper:cites:paper", "paper:rev_cites:paper", "venue:rev_in:paper"):
        src = r.split(":")[0]
        for i, v in enumerate((7, 8)):
            got = sorted(s.node[src][s.row[r][s.col[r] == i]])
            assert got == sorted(ds.relation(r).neighbors(v)), (r, v)
    assert s.num_sampled_edges["paper:in:venue"] == [0]  # no venue seeds
    # A relation at 0 is not sampled at that hop; the others are.
    f = {**{r: [2, 2] for r in RELATIONS}, "author:writes:paper": [0, 2], "paper:cites:paper": [2, 0]}
    s = client.sample(list(range(0, 40, 3)), f, seed=3, node_type="paper")
    assert s.num_sampled_edges["author:writes:paper"][0] == 0 and s.num_sampled_edges["paper:cites:paper"][1] == 0
    assert s.num_sampled_edges["paper:cites:paper"][0] > 0 and s.num_sampled_edges["paper:rev_cites:paper"][1] > 0


def test_concurrent_requests_get_their_own_answers(typed, server):
    """More distinct seeds than the server keeps samplers for, from 4 clients at once."""
    ds, _, _ = typed
    jobs = [([int(v)], "paper" if i % 2 else "author", i) for i, v in enumerate(np.arange(24) * 3)]

    def work(part):
        with ringgnn.Client(server.address, wait_ready=30) as c:
            return [(n, t, s, c.sample(n, seed=s, node_type=t)) for n, t, s in part]

    with ThreadPoolExecutor(4) as pool:
        results = [r for rs in pool.map(work, [jobs[i::4] for i in range(4)]) for r in rs]
    assert len(results) == 24
    for nodes, t, seed, got in results:
        assert same(got, HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=seed).sample(nodes, t)), (nodes, t, seed)


def test_features_equal_the_types_rows(client, typed):
    _, _, rows = typed
    ids = [5, 119, 5, 0]
    got = client.features(ids, node_type="paper")
    assert got.dtype == np.float32 and np.array_equal(got, rows["paper"][ids])
    assert np.array_equal(client.features(ids, node_type="paper", stored_dtype=True), rows["paper"][ids])
    ids = [79, 1, 1]
    assert np.array_equal(client.features(ids, node_type="author"), rows["author"][ids].astype(np.float32))
    raw = client.features(ids, node_type="author", stored_dtype=True)
    assert raw.dtype == np.float16 and np.array_equal(raw.view(np.uint16), rows["author"][ids].view(np.uint16))
    with pytest.raises(ringgnn.InputError, match="node type 'venue' .* has no features"):
        client.features([0], node_type="venue")


def local_model(run):
    from ringgnn.models.checkpoints import read_checkpoint
    from ringgnn.models.hetero import HeteroModel

    _, state = read_checkpoint(str(run))
    net = HeteroModel.from_config(state["args"]["hetero"])
    net.load_state_dict(state["model"])
    return net.eval(), state["args"]["fanouts"]


def local_batch(ds, fanouts, nodes, node_type, seed):
    """The batch a HeteroLoader would make of these seeds: the sample, each type's rows."""
    from ringgnn.models.hetero import hetero_batch_to_dicts

    s = HeteroNeighborSampler(ds, fanouts, seed=seed).sample(nodes, node_type)
    x = {t: ringgnn._core.FeatureReader(ds.path, part=f"node/{t}").gather(s.node[t]) for t in ("paper", "author")}
    order = [list(dict.fromkeys(nodes)).index(v) for v in nodes]
    return hetero_batch_to_dicts(s.to_hetero_data(x)), s.batch_size, order


def test_predict_equals_a_local_forward_of_the_run(typed, client):
    ds, run, _ = typed
    net, fanouts = local_model(run)
    assert fanouts == MODEL_FANOUTS
    nodes = [10, 3, 10, 117]
    for seed in (None, 4):
        batch, bs, order = local_batch(ds, fanouts, nodes, "paper", seed or 0)
        with torch.no_grad():
            want = torch.softmax(net(*batch)[:bs], -1).numpy()[order]
        p = client.predict(nodes, seed=seed)
        assert p.probs.shape == (4, 3) and p.seed == (seed or 0)
        np.testing.assert_allclose(p.probs, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(p.probs.sum(1), 1, rtol=1e-5)
        assert np.array_equal(p.label, want.argmax(1))
    assert np.array_equal(client.predict(nodes, seed=4, node_type="paper").probs, p.probs)


@pytest.mark.parametrize("node_type,nodes", [("paper", [10, 3, 10]), ("author", [0, 79]), ("venue", [5, 0])])
def test_embed_is_the_input_of_the_last_layer(typed, client, node_type, nodes):
    """For a 2-layer model every type has rows after layer 1 (ReLU'd, as layer 2 sees them)."""
    ds, run, _ = typed
    net, fanouts = local_model(run)
    (x, edges, n_id), bs, order = local_batch(ds, fanouts, nodes, node_type, 5)
    with torch.no_grad():
        h = net.convs[0](net.inputs(x, n_id), edges)
    want = h[node_type].relu()[:bs].numpy()[order]
    got = client.embed(nodes, seed=5, node_type=node_type)
    assert got.shape == (len(nodes), 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_info_describes_the_typed_dataset(typed, client):
    ds, run, _ = typed
    info = client.info()
    assert info["node_types"] == [
        {"name": "author", "num_nodes": A, "feature_dim": 3, "feature_dtype": "f16", "num_classes": 0},
        {"name": "paper", "num_nodes": P, "feature_dim": 4, "feature_dtype": "f32", "num_classes": 3},
        {"name": "venue", "num_nodes": V, "feature_dim": 0, "feature_dtype": "", "num_classes": 0}]
    assert info["relations"] == [{"name": r, "num_edges": n} for r, n in ds.num_edges_dict.items()]
    assert (info["num_nodes"], info["num_edges"]) == (P + A + V, sum(ds.num_edges_dict.values()))
    assert info["relation_fanouts"] == SERVER_FANOUTS and info["fanouts"] == []
    assert info["model_relation_fanouts"] == MODEL_FANOUTS and info["model_target"] == "paper"
    assert (info["model"], info["model_task"], info["model_hidden"], info["model_run"]) == ("sage", "node", 8, str(run))
    assert (info["max_nodes"], info["max_hops"], info["seed"]) == (64, 3, 0)
    assert info["backend"] == "memory" and info["feature_backend"] == "memory"
    assert info["stats"]["sample_requests"] > 0 and info["stats"]["queued"] == 0



def test_requests_are_answered_in_the_engines_waves(typed):
    """Every request answered goes through one of the engine's waves: one wave each when they
    come one at a time; concurrent ones of one configuration may share a wave, each answer still
    exactly the library's."""
    from ringgnn.serving.server import Server

    ds, _, _ = typed
    s = Server(ds, listen="127.0.0.1:0", fanouts=SERVER_FANOUTS, threads=1, max_nodes=64, max_hops=3).start()
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            for i in range(3):
                c.sample([i], seed=1, node_type="paper")
            c.features([1, 2], node_type="author")
            st = s.stats()
            assert (st["sample_requests"], st["feature_requests"], st["waves"], st["wave_requests"]) == (3, 1, 4, 4)

        def work(v):
            with ringgnn.Client(s.address, wait_ready=30) as c:
                return v, c.sample([v], seed=3, node_type="paper")

        with ThreadPoolExecutor(6) as pool:
            got = list(pool.map(work, range(0, 60, 5)))
        for v, sample in got:
            assert same(sample, HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=3).sample([v], "paper")), v
        after = s.stats()
        assert after["wave_requests"] == 4 + len(got) and 4 < after["waves"] <= 4 + len(got), after
    finally:
        s.stop(1.0)


def test_a_wait_for_company_and_the_wave_size_work_as_for_a_homogeneous_dataset(typed):
    """--max-wait-ms: a request waits that long for others of its configuration, and they share
    its wave; --batch-size 1: a wave is sized for one seed, so a request of 8 seeds is larger and
    is answered alone, in its turn, exactly as the library samples it."""
    from ringgnn.serving.server import Server

    ds, _, _ = typed
    s = Server(ds, listen="127.0.0.1:0", fanouts=SERVER_FANOUTS, threads=1, max_nodes=64, max_hops=3,
               max_wait_ms=400).start()
    try:
        def work(v):
            with ringgnn.Client(s.address, wait_ready=30) as c:
                return v, c.sample([v], seed=3, node_type="paper")

        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(work, [4, 9]))
        for v, sample in got:
            assert same(sample, HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=3).sample([v], "paper")), v
        st = s.stats()
        assert (st["sample_requests"], st["waves"], st["wave_requests"]) == (2, 1, 2), st
    finally:
        s.stop(1.0)
    s = Server(ds, listen="127.0.0.1:0", fanouts=SERVER_FANOUTS, threads=1, max_nodes=64, max_hops=3,
               batch_size=1).start()
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            many = list(range(0, 80, 10))
            assert same(c.sample(many, seed=5, node_type="paper"),
                        HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=5).sample(many, "paper"))
            assert np.array_equal(c.features(many, node_type="paper"), typed[2]["paper"][many])
        st = s.stats()
        assert (st["sample_requests"], st["feature_requests"], st["waves"]) == (1, 1, 2), st
    finally:
        s.stop(1.0)


def test_relations_read_from_disk_keep_their_hot_pages(typed):
    """With --backend pread every neighbor file is read from disk, through --neighbor-cache bytes
    of hot pages: the same request again finds its pages there, and the answers are unchanged."""
    from ringgnn.serving.server import Server

    ds, _, rows = typed
    s = Server(ds, listen="127.0.0.1:0", fanouts=SERVER_FANOUTS, threads=1, backend="pread",
               neighbor_cache="4M").start()
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c:
            info = c.info()
            assert info["backend"] == "pread" and info["feature_backend"] == "pread"
            want = HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=2).sample([7, 9], "paper")
            assert same(c.sample([7, 9], seed=2, node_type="paper"), want)
            first = c.info()["stats"]
            assert first["page_misses"] > 0 and first["pages_cached"] > 0 and first["reads"] > 0, first
            assert same(c.sample([7, 9], seed=2, node_type="paper"), want)
            second = c.info()["stats"]
            assert second["page_hits"] > first["page_hits"] and second["page_misses"] == first["page_misses"], second
            assert np.array_equal(c.features([3, 1], node_type="paper"), rows["paper"][[3, 1]])
    finally:
        s.stop(1.0)


def test_the_plan_counts_the_room_of_a_request_larger_than_a_wave(typed, monkeypatch):
    """A request larger than a wave (here 64 ids against waves of one seed) is answered in a room
    of its own: lent by the hot neighbor pages when they hold it, else counted by the memory plan
    as held (its ``process``), exactly the engine's ``large_room``; none when every request fits a
    wave."""
    from ringgnn import _options
    from ringgnn.serving.server import Server

    ds, _, _ = typed
    monkeypatch.setattr(_options, "held_memory", lambda: 100 << 20)
    monkeypatch.setattr(_options, "code_bytes", lambda training=False: 0)

    def plan(**kw):
        s = Server(ds, listen="127.0.0.1:0", fanouts=SERVER_FANOUTS, threads=1, max_nodes=64, max_hops=3,
                   memory="1G", **kw)
        try:
            return s.engine.large_room, s.memory_plan.process
        finally:
            s.stop(1.0)

    (room, lent), process = plan(backend="memory", batch_size=1)
    assert room > 0 and not lent and process == (100 << 20) + room
    assert plan(backend="memory", batch_size=64) == ((0, False), 100 << 20)
    (room, lent), process = plan(backend="pread", neighbor_cache="64M", batch_size=1)
    assert room > 0 and lent and process == 100 << 20


# --- bad input ----------------------------------------------------------------------------------

OTHERS = {r: [1] for r in RELATIONS[1:]}


@pytest.mark.parametrize("call,fields,message", [
    ("Sample", dict(nodes=[1]), "node_type is required: .* heterogeneous dataset"),
    ("Sample", dict(nodes=[1], node_type="venues"), "node_type 'venues' is not a node type"),
    ("Sample", dict(nodes=[P], node_type="paper"), f"node {P} of type 'paper' is out of range"),
    ("Sample", dict(nodes=[-1], node_type="author"), "node -1 of type 'author' is out of range"),
    ("Sample", dict(nodes=[V], node_type="venue"), f"node {V} of type 'venue' is out of range"),
    ("Sample", dict(nodes=[], node_type="paper"), "no node ids"),
    ("Sample", dict(nodes=list(range(65)), node_type="paper"), "65 node ids .* at most 64"),
    ("Sample", dict(nodes=[1], node_type="paper", relation_fanouts={**OTHERS, "paper:likes:paper": [1]}),
     "unknown relation 'paper:likes:paper'"),
    ("Sample", dict(nodes=[1], node_type="paper", relation_fanouts=OTHERS), "no entry for relation.* author:writes:paper"),
    ("Sample", dict(nodes=[1], node_type="paper", relation_fanouts={**OTHERS, RELATIONS[0]: [1, 1]}),
     "same number of hops"),
    ("Sample", dict(nodes=[1], node_type="paper", fanouts=[1], relation_fanouts={**OTHERS, RELATIONS[0]: [1]}),
     "not both"),
    ("Sample", dict(nodes=[1], node_type="paper", fanouts=[1, 1, 1, 1]), "4 fanouts: give 1 to 3"),
    ("Sample", dict(nodes=[1], node_type="paper", fanouts=[0]), "fanout 0"),
    ("Sample", dict(nodes=list(range(64)), node_type="paper", fanouts=[-1, -1, -1]), "may sample up to"),
    ("Features", dict(nodes=[1]), "node_type is required"),
    ("Features", dict(nodes=[A], node_type="author"), f"node {A} of type 'author' is out of range"),
    ("Predict", dict(nodes=[1], node_type="author"), "classifies nodes of its target type 'paper' only"),
    ("Predict", dict(nodes=[P]), f"node {P} of type 'paper' is out of range"),
    ("Embed", dict(nodes=[1], node_type="journal"), "node_type 'journal' is not a node type"),
    ("Embed", dict(nodes=[V], node_type="venue"), "out of range"),
])
def test_bad_requests_get_invalid_argument_and_the_server_goes_on(server, client, call, fields, message):
    from ringgnn.serving.rpc import protos

    pb, services = protos()
    request = {"Sample": pb.SampleRequest, "Features": pb.FeaturesRequest}.get(call, pb.PredictRequest)
    fields = dict(fields)  # the case's own dict, shared by both frontends' runs
    rf = fields.pop("relation_fanouts", {})
    req = request(**fields)
    for r, hops in rf.items():
        req.relation_fanouts[r].hops.extend(hops)
    with grpc.insecure_channel(server.address) as ch:
        with pytest.raises(grpc.RpcError) as e:
            getattr(services.RingGnnStub(ch), call)(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert re.search(message, e.value.details()), e.value.details()
    assert client.sample([1], [1], node_type="paper").batch_size == 1


def test_score_is_refused_for_a_typed_model(client):
    with pytest.raises(ringgnn.InputError, match="Score needs a link model"):
        client.score([1], [2])


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    """A small homogeneous dataset and a run trained on it for one epoch."""
    from ringgnn.training.loop import train

    d = tmp_path_factory.mktemp("homo")
    ringgnn.generate_sbm(d / "ds", nodes=300, classes=3, avg_degree=5, feature_dim=4, seed=1)
    train(d / "ds", fanouts=[3, 2], epochs=1, hidden=8, batch_size=64, out=str(d / "run"), quiet=True,
          log=lambda s: None)
    return ringgnn.Dataset.open(d / "ds"), d / "run"


@pytest.mark.parametrize("frontend", ["rust", "grpcio"])
def test_typed_requests_on_a_homogeneous_server(homo, frontend):
    from ringgnn.serving.server import Server
    from ringgnn.serving.rpc import protos

    ds, run = homo
    s = Server(ds, listen="127.0.0.1:0", model=str(run), threads=1, max_nodes=64, frontend=frontend).start()
    pb, services = protos()
    try:
        with ringgnn.Client(s.address, wait_ready=30) as c, grpc.insecure_channel(s.address) as ch:
            stub = services.RingGnnStub(ch)
            refused = [("Predict", pb.PredictRequest(nodes=[1], node_type="paper")),
                       ("Embed", pb.PredictRequest(nodes=[1], node_type="paper"))]
            if frontend == "grpcio":  # the Rust frontend serves Sample and Features without reading them
                refused += [("Sample", pb.SampleRequest(nodes=[1], node_type="paper")),
                            ("Sample", pb.SampleRequest(nodes=[1], relation_fanouts={"a:b:c": pb.Fanouts(hops=[1])})),
                            ("Features", pb.FeaturesRequest(nodes=[1], node_type="paper"))]
            for call, req in refused:
                with pytest.raises(grpc.RpcError) as e:
                    getattr(stub, call)(req, timeout=30)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (call, e.value.details())
                assert "is a homogeneous dataset" in e.value.details(), (call, e.value.details())
            # The client refuses what a server ignored.
            with pytest.raises(ringgnn.InputError, match="homogeneous"):
                c.sample([1], [2], node_type="paper")
            with pytest.raises(ringgnn.InputError, match="homogeneous"):
                c.features([1], node_type="paper")
            with pytest.raises(ringgnn.InputError, match="give node_type"):
                c.sample([1], {"a:b:c": [2]})
            # Untyped requests are served as before.
            want = ringgnn.NeighborSampler(ds, [3, 2], seed=2).sample([1, 7])
            got = c.sample([1, 7], seed=2)
            assert np.array_equal(got.node, want.node) and np.array_equal(got.row, want.row)
            assert c.predict([1, 7]).probs.shape == (2, 3)
    finally:
        s.stop(1.0)


def test_what_is_refused_at_start(typed, homo, tmp_path):
    from ringgnn.serving.server import Server

    ds, run, _ = typed
    hds, hrun = homo
    other = ringgnn.Dataset.open(build(tmp_path / "other", papers=100, seed=1) / "ds")
    cases = [
        (dict(dataset=ds, cache="1M"), "--cache: not available for a heterogeneous"),
        (dict(dataset=ds, model=str(hrun)), "is a homogeneous run; .* is heterogeneous"),
        (dict(dataset=hds, model=str(run)), "is a heterogeneous run .* is homogeneous"),
        (dict(dataset=other, model=str(run)), "node type 'paper' had 120 nodes .* has 100"),
        (dict(dataset=ds, fanouts='{"paper:cites:paper": [1'), "--fanouts .* not a JSON object"),
        (dict(dataset=ds, fanouts={"paper:x:paper": [1]}), "unknown relation 'paper:x:paper'"),
        (dict(dataset=ds, fanouts=[2, 2, 2, 2], max_hops=3), "4 hops, more than --max-hops 3"),
        (dict(dataset=hds, fanouts={"a:b:c": [1]}), "homogeneous dataset"),
    ]
    for kw, message in cases:
        with pytest.raises(ringgnn.InputError, match=message):
            Server(kw.pop("dataset"), listen="127.0.0.1:0", **kw)


def test_the_command_line_serves_a_typed_dataset(typed):
    ds, run, _ = typed
    cmd = [sys.executable, "-m", "ringgnn", "serve", ds.path, "--model", str(run), "--threads", "1",
           "--fanouts", json.dumps(SERVER_FANOUTS), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "listening on" in line:
                break
        assert "listening on" in lines[-1], (lines, proc.stderr.read() if proc.poll() is not None else "")
        assert "(gRPC: rust)" in "".join(lines) and "heterogeneous: 3 node types" in "".join(lines)
        with ringgnn.Client(lines[-1].split("listening on ")[1].strip(), wait_ready=30) as c:
            got = c.sample([9], seed=2, node_type="paper")
        assert same(got, HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=2).sample([9], "paper"))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped after 1 sample and 0 feature requests" in err


def test_both_engines_answer_one_interface(typed, homo):
    """``_core.Engine`` and ``_core.HeteroEngine`` share their base (``ServedEngine``: seed,
    limits, readers, counters) and their calls' shape: ``sample(nodes, node_type=..., rows=...)``
    and ``features(nodes, node_type=...)``, a homogeneous engine taking no node type and a
    typed one requiring it."""
    from ringgnn import _core

    ds, _, rows = typed
    typed_engine = _core.HeteroEngine(ds.path, list(SERVER_FANOUTS.items()), seed=7, max_nodes=50, max_hops=3)
    homo_ds, _ = homo
    homo_engine = _core.Engine(homo_ds.path, [3, 2], seed=7, max_nodes=50, max_hops=3)
    try:
        for e in (typed_engine, homo_engine):
            assert isinstance(e, _core.ServedEngine)
            assert (e.seed, e.max_nodes, e.max_hops) == (7, 50, 3)
            assert isinstance(e.backend, str) and e.large_room[0] >= 0
            with pytest.raises(ringgnn.InputError, match=r"^51 node ids in one request: at most 50 \(the server's"):
                e.check_count(51)
        nodes = np.array([3, 1, 3], dtype=np.int64)

        s = typed_engine.sample(nodes, node_type="paper")
        want = HeteroNeighborSampler(ds, SERVER_FANOUTS, seed=7).sample([3, 1, 3], "paper")
        assert all(np.array_equal(s["node"][t], want.node[t]) for t in want.node)
        s2, x = typed_engine.sample(nodes, node_type="paper", rows=True)
        assert all(np.array_equal(s2["node"][t], s["node"][t]) for t in s["node"])
        assert sorted(x) == ["author", "paper"]
        assert np.array_equal(x["paper"], rows["paper"][s["node"]["paper"]])
        got = typed_engine.features(nodes, node_type="author")
        assert np.array_equal(got, rows["author"][nodes].astype(np.float32))
        assert typed_engine.feature_info == [(3, "f16"), (4, "f32"), None]
        for call in (typed_engine.sample, typed_engine.features):
            with pytest.raises(ringgnn.InputError,
                               match=r"^node_type is required \(the dataset has: author, paper, venue\)$"):
                call(nodes)

        h = homo_engine.sample(nodes)
        h2, hx = homo_engine.sample(nodes, rows=True)
        assert np.array_equal(h2["node"], h["node"]) and np.array_equal(h2["row"], h["row"])
        assert hx.dtype == np.float32 and hx.shape == (len(h["node"]), 4)
        assert np.array_equal(hx[: 2], homo_engine.features(np.array([3, 1], dtype=np.int64)))
        for call in (homo_engine.sample, homo_engine.features):
            with pytest.raises(ringgnn.InputError, match="^node_type 'paper': the dataset is homogeneous "
                               r"\(no node types\); leave node_type out$"):
                call(nodes, node_type="paper")
        st = homo_engine.stats()
        assert (st["sample_requests"], st["feature_requests"]) == (2, 1)
    finally:
        typed_engine.close()
        homo_engine.close()


def test_a_damaged_dataset_raises_corrupt_dataset_error(tmp_path):
    """A dataset damaged after the engine opened it, or whose manifest lies, reaches Python from
    either engine as ``CorruptDatasetError`` (as from the samplers and loaders), naming the file."""
    import shutil

    from ringgnn import _core

    def spoil(ds_dir):
        # Every neighbor file's entries made 2^32 - 1 (no node has that id), its size kept.
        files = [p for p in ds_dir.rglob("*.bin") if "indices" in p.name]
        assert files
        for p in files:
            p.write_bytes(b"\xff" * p.stat().st_size)

    d = build(tmp_path / "typed")
    typed_engine = _core.HeteroEngine(str(d / "ds"), list(SERVER_FANOUTS.items()), backend="pread", seed=7)
    ringgnn.generate_sbm(tmp_path / "homo", nodes=300, classes=3, avg_degree=5, feature_dim=4, seed=1)
    homo_engine = _core.Engine(str(tmp_path / "homo"), [3, 2], backend="pread", seed=7)
    try:
        nodes = np.array([3, 1], dtype=np.int64)
        typed_engine.sample(nodes, node_type="paper")
        homo_engine.sample(nodes)
        spoil(d / "ds")
        spoil(tmp_path / "homo")
        with pytest.raises(ringgnn.CorruptDatasetError, match=r"entry \d+ of the neighbor file .* run `ringgnn verify"):
            typed_engine.sample(nodes, node_type="paper")
        with pytest.raises(ringgnn.CorruptDatasetError):
            homo_engine.sample(nodes)
    finally:
        typed_engine.close()
        homo_engine.close()
    # A manifest that lies about the size of a file: refused when the engine opens.
    lie = tmp_path / "lie"
    shutil.copytree(d / "ds", lie)
    m = json.loads((lie / "manifest.json").read_text())
    m["node_types"]["paper"]["num_nodes"] = 2 * P
    (lie / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ringgnn.CorruptDatasetError):
        _core.HeteroEngine(str(lie), list(SERVER_FANOUTS.items()), backend="pread")
