"""`ringgnn serve` and `ringgnn.Client`: real servers on loopback ports, answers equal to the
library's, concurrency, every kind of bad input, backpressure, deadlines, vanishing clients,
SIGTERM with requests in flight, bounded threads and memory, and a client generated from the
shipped .proto."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from _sampling import needs_sampler

import ringgnn

grpc = pytest.importorskip("grpc")
torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = [needs_sampler, pytest.mark.timeout(300)]

FANOUTS = [4, 3]


class Served:
    """A `ringgnn serve` subprocess on 127.0.0.1 and a free port."""

    def __init__(self, tmp: Path, *args: str):
        self.log = tmp / f"serve-{time.monotonic_ns()}.err"
        cmd = [sys.executable, "-m", "ringgnn", "serve", *args, "--listen", "127.0.0.1:0"]
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        self.stdout = []
        for line in self.proc.stdout:
            self.stdout.append(line)
            if "listening on" in line:
                self.address = line.split("listening on ")[1].strip()
                break
        else:
            self.proc.wait()
            raise AssertionError(f"server did not start (exit {self.proc.returncode}): {self.log.read_text()}")
        # Keep reading stdout so the server never blocks on a full pipe.
        self._reader = threading.Thread(target=lambda: self.stdout.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    def client(self, **kw) -> ringgnn.Client:
        return ringgnn.Client(self.address, wait_ready=30, **kw)

    def status(self) -> dict:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines())
        return {"threads": int(fields["Threads"]), "rss": int(fields["VmRSS"].split()[0]) << 10}

    def terminate(self) -> None:
        self.terminated = True
        self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> int:
        if not getattr(self, "terminated", False):
            self.terminate()
        code = self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        self.proc.stdout.close()
        return code


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small SBM dataset (f16 features) and a GraphSAGE run trained on it."""
    tmp = tmp_path_factory.mktemp("serve")
    ringgnn.generate_sbm(tmp / "ds", nodes=3000, classes=4, avg_degree=8, feature_dim=12,
                         feature_dtype="f16", seed=1)
    run = tmp / "run"
    from ringgnn.cli import main

    assert main(["train", str(tmp / "ds"), "--epochs", "2", "--fanouts", ",".join(map(str, FANOUTS)), "--hidden",
                 "16", "--out", str(run), "--quiet"]) == 0
    return tmp, ringgnn.Dataset.open(tmp / "ds"), run


@pytest.fixture(scope="module", params=["rust", "grpcio"])
def served(trained, request):
    """The main server, with each gRPC frontend: the model, rows read from disk (pread, no
    cache), 2 workers, requests up to 512 seeds at fanouts 5,5 (the largest the memory plan is
    made for)."""
    tmp, ds, run = trained
    s = Served(tmp, ds.path, "--model", str(run), "--backend", "pread", "--cache", "0", "--threads", "2",
               "--fanouts", "5,5", "--batch-size", "512", "--frontend", request.param)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(served):
    with served.client() as c:
        yield c


def rows_from_file(ds: ringgnn.Dataset, ids) -> np.ndarray:
    """Stored rows (f16 here) read from the file by the padding rule of docs/FORMAT.md."""
    f = ds.manifest["features"]
    assert f["dtype"] == "f16"
    raw = np.fromfile(f"{ds.path}/{ds.manifest['files']['features']['path']}", dtype=np.uint8)
    rpp, rb = f["rows_per_page"], f["row_bytes"]
    ids = np.asarray(ids, dtype=np.int64)
    offs = (ids // rpp) * 4096 + (ids % rpp) * rb
    return np.stack([raw[o: o + rb].view("<f2") for o in offs])


def same(a: ringgnn.SampledSubgraph, b: ringgnn.SampledSubgraph) -> bool:
    return (all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("node", "row", "col"))
            and a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges
            and a.batch_size == b.batch_size)


# --- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("nodes,fanouts,seed,replace", [
    ([7], [5, 5], 0, False), ([7], None, 3, False), ([1, 2, 3, 2, 1], [10, 2, 1], 11, False),
    ([0], [-1], 5, False), ([2999, 5], [3, 3], 2**63 + 5, True), (list(range(0, 3000, 7)), [2], 9, False)])
def test_sample_equals_the_library(trained, client, nodes, fanouts, seed, replace):
    _, ds, _ = trained
    got = client.sample(nodes, fanouts, seed=seed, replace=replace, edge_ids=True)
    want = ringgnn.NeighborSampler(ds, fanouts or [5, 5], replace=replace, seed=seed, with_edge_ids=True).sample(nodes)
    assert same(got, want) and np.array_equal(got.edge, want.edge)
    assert got.num_edges > 0


def test_sample_without_a_seed_uses_the_servers_and_is_repeatable(trained, client):
    _, ds, _ = trained
    a, b = client.sample([42]), client.sample([42])
    assert same(a, b) and same(a, ringgnn.NeighborSampler(ds, [5, 5], seed=0).sample([42]))
    assert not same(a, client.sample([42], seed=1))


def test_features_equal_the_file(trained, client):
    _, ds, _ = trained
    ids = [5, 2999, 5, 0, 1234]
    stored = rows_from_file(ds, ids)
    f32 = client.features(ids)
    assert f32.dtype == np.float32 and f32.shape == (5, 12)
    assert np.array_equal(f32, stored.astype(np.float32))
    raw = client.features(ids, stored_dtype=True)
    assert raw.dtype == np.float16 and np.array_equal(raw, stored)


def library_inference(ds, run, nodes, seed):
    """Predict/Embed computed in-process: the sampler with the model's fanouts and seed, the
    file's rows, the checkpoint's model."""
    from ringgnn.serving.model import Model

    model = Model(str(run), ds)
    uniq = list(dict.fromkeys(nodes))
    sub = ringgnn.NeighborSampler(ds, model.fanouts, seed=seed).sample(uniq)
    x = rows_from_file(ds, sub.node).astype(np.float32)
    logits, hidden = model.run({"row": sub.row, "col": sub.col, "num_sampled_nodes": sub.num_sampled_nodes,
                                "num_sampled_edges": sub.num_sampled_edges}, x)
    order = [uniq.index(v) for v in nodes]
    return torch.softmax(logits, -1).numpy()[order], hidden.numpy()[order]


def test_predict_and_embed_equal_the_library(trained, client):
    _, ds, run = trained
    nodes = [10, 3, 10, 2500]
    probs, hidden = library_inference(ds, run, nodes, seed=4)
    p = client.predict(nodes, seed=4)
    assert p.probs.shape == (4, ds.num_classes) and p.seed == 4
    np.testing.assert_allclose(p.probs, probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p.probs.sum(1), 1, rtol=1e-5)
    assert np.array_equal(p.label, probs.argmax(1))
    e = client.embed(nodes, seed=4)
    assert e.shape == (4, 16)
    np.testing.assert_allclose(e, hidden, rtol=1e-5, atol=1e-6)
    # Predictions of the (briefly) trained model beat chance (0.25) on the test split.
    test = ds.split("test")[:300]
    assert (client.predict(test).label == ds.labels[test]).mean() > 0.35


def test_info_describes_what_is_served(trained, served, client):
    _, ds, run = trained
    info = client.info()
    assert (info["num_nodes"], info["num_edges"], info["feature_dim"], info["feature_dtype"],
            info["num_classes"]) == (ds.num_nodes, ds.num_edges, 12, "f16", 4)
    assert info["fanouts"] == [5, 5] and info["seed"] == 0
    assert info["model"] == "sage" and info["model_fanouts"] == FANOUTS and info["model_hidden"] == 16
    assert info["max_nodes"] == 4096 and info["max_hops"] == 6 and info["version"] == ringgnn.__version__
    assert info["backend"] == "pread" and info["feature_backend"] == "pread"
    st = info["stats"]
    assert st["sample_requests"] > 0 and st["reads"] > 0
    # Every answered request's latency is in the histogram (bucket 0 holds the fastest).
    assert len(st["latency_buckets"]) == 140 and sum(st["latency_buckets"]) > 0


def test_health_service_says_serving(served):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(served.address) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for name in ("", "ringgnn.v1.RingGnn"):
            r = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_a_client_generated_from_the_shipped_proto(trained, served, tmp_path):
    """What a user of another language does: generate stubs from ringgnn/serve.proto with protoc
    (here grpc_tools') and call the server with them."""
    from grpc_tools import protoc

    proto = Path(ringgnn.__file__).parent / "serve.proto"
    assert protoc.main(["protoc", f"-I{proto.parent}", f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
                        str(proto)]) == 0
    code = f"""
import grpc, serve_pb2 as pb, serve_pb2_grpc as rpc
with grpc.insecure_channel({served.address!r}) as ch:
    stub = rpc.RingGnnStub(ch)
    r = stub.Sample(pb.SampleRequest(nodes=[7], fanouts=[5, 5], seed=0), timeout=30)
    print(list(r.node)); print(list(r.row)); print(list(r.num_sampled_nodes))
    print(stub.Info(pb.InfoRequest(), timeout=30).num_nodes)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    node, row, counts, n = out.stdout.splitlines()
    want = ringgnn.NeighborSampler(trained[1], [5, 5], seed=0).sample([7])
    assert node == str(want.node.tolist()) and row == str(want.row.tolist())
    assert counts == str(list(want.num_sampled_nodes)) and int(n) == 3000


def test_concurrent_clients_get_their_own_answers(trained, served):
    _, ds, _ = trained
    sampler = ringgnn.NeighborSampler(ds, [5, 5], seed=0)
    jobs = [([int(v)], int(s)) for v, s in zip(np.random.default_rng(0).integers(0, 3000, 400), range(400))]

    def work(part):
        with served.client() as c:
            return [(nodes, seed, c.sample(nodes, seed=seed)) for nodes, seed in part]

    with ThreadPoolExecutor(16) as pool:
        results = [r for rs in pool.map(work, [jobs[i::16] for i in range(16)]) for r in rs]
    assert len(results) == 400
    for nodes, seed, got in results:
        sampler_s = ringgnn.NeighborSampler(ds, [5, 5], seed=seed)
        assert same(got, sampler_s.sample(nodes)), (nodes, seed)
    assert sampler is not None


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("call,args,kwargs,message", [
    ("sample", ([-1],), {}, "out of range"),
    ("sample", ([3000],), {}, "out of range"),
    ("sample", ([2**62],), {}, "out of range"),
    ("sample", ([],), {}, "no node ids"),
    ("sample", (list(range(4097)),), {}, "at most 4096"),
    ("sample", ([1], [0]), {}, "fanout"),
    ("sample", ([1], [-7, 2]), {}, "fanout -7"),
    ("sample", ([1], [5] * 7), {}, "7 fanouts"),
    # With replacement a request's bound is not capped by the graph's edges, the plan's (drawn
    # without replacement at the default fanouts) is: 3000 seeds x 1000 x 1000 cannot fit.
    ("sample", (list(range(3000)), [1000, 1000]), {"replace": True}, "at most"),
    ("features", ([-5],), {}, "out of range"),
    ("features", ([],), {}, "no node ids"),
    ("features", (list(range(5000)),), {}, "at most 4096"),
    ("predict", ([3000],), {}, "out of range"),
    ("embed", ([],), {}, "no node ids"),
])
def test_bad_requests_get_invalid_argument_and_the_server_goes_on(client, call, args, kwargs, message):
    with pytest.raises(ringgnn.InputError, match=message):
        getattr(client, call)(*args, **kwargs)
    assert client.sample([1], [2]).num_sampled_nodes[0] == 1



def test_a_request_within_max_nodes_is_answered_by_default_whatever_its_size(trained):
    """Issue 20, case 5: with default options, a request of 100 nodes at the default fanouts was
    refused because the memory plan was made for one batch of 64 seeds. Requests up to --max-nodes
    are now answered (equal to the library's; one larger than a wave alone, in the room held for
    the largest request), one more id is refused with INVALID_ARGUMENT naming --max-nodes, and only
    a full queue is RESOURCE_EXHAUSTED."""
    tmp, ds, _ = trained
    # Fanouts 2,2: a 64-seed batch's upper bound (384 edges) is far below the graph's, so the
    # old plan refused 100 seeds (600 edges); --max-nodes 300 keeps the plan small.
    s = Served(tmp, ds.path, "--fanouts", "2,2", "--max-nodes", "300", "--backend", "pread")
    try:
        pb, _ = ringgnn.serving.rpc.protos()
        with s.client() as c, grpc.insecure_channel(s.address) as ch:
            for nodes, fanouts in [(list(range(0, 3000, 30)), [2, 2]), (list(range(0, 3000, 10)), None),
                                   (list(range(5, 3000, 10)), [2, 1])]:
                got = c.sample(nodes, fanouts, seed=4)
                want = ringgnn.NeighborSampler(ds, fanouts or [2, 2], seed=4).sample(nodes)
                assert same(got, want), (len(nodes), fanouts)
                assert got.num_sampled_nodes[0] == len(nodes)
            assert np.array_equal(c.features(list(range(300)), stored_dtype=True), rows_from_file(ds, range(300)))
            raw = ch.unary_unary("/ringgnn.v1.RingGnn/Sample", request_serializer=pb.SampleRequest.SerializeToString,
                                 response_deserializer=pb.SampleReply.FromString)
            with pytest.raises(grpc.RpcError) as e:
                raw(pb.SampleRequest(nodes=list(range(301)), fanouts=[2, 2]), timeout=30)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
            assert "at most 300 (the server's --max-nodes)" in e.value.details()
            assert len(raw(pb.SampleRequest(nodes=list(range(300)), fanouts=[2, 2]), timeout=30).node) >= 300
            assert c.info()["stats"]["busy"] == 0
    finally:
        assert s.stop() == 0


def test_a_budget_that_cannot_hold_max_nodes_refuses_to_start(tmp_path):
    """--memory must hold the plan, with the room of one request of --max-nodes ids: the server
    does not start, and says what it needs and what to change (rather than refusing requests
    later); with fewer nodes it starts."""
    ringgnn.generate_sbm(tmp_path / "ds", nodes=40_000, classes=2, avg_degree=20, feature_dim=2, seed=1)
    # The neighbor file in memory (3 MB): the plan is the upper bounds, not measured. 4096 seeds
    # at 20,20 may take the whole graph (800k edges: about 60 MB of state and 13 MB per answer),
    # one seed at most 420 edges; no hot pages to lend the room, so it is held beside them, once
    # (160M, refused while every worker held it, now starts: 120M does not).
    args = [str(tmp_path / "ds"), "--fanouts", "20,20", "--backend", "memory", "--threads", "2", "--memory", "120M",
            "--max-concurrent", "4"]
    out = subprocess.run([sys.executable, "-m", "ringgnn", "serve", *args, "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    for want in ("memory=120.0 MiB is too small", "4096 node ids (--max-nodes)", "raise --memory", "lower --max-nodes"):
        assert want in out.stderr, (want, out.stderr)
    assert "Traceback" not in out.stderr
    s = Served(tmp_path, *args, "--max-nodes", "1")
    try:
        with s.client() as c:
            assert c.sample([7]).num_sampled_nodes[0] == 1
    finally:
        assert s.stop() == 0

def test_a_request_of_max_nodes_ids_is_answered_alone_and_the_plan_says_where(tmp_path):
    """Issue 34, item 11: the workers are sized for waves of --batch-size seeds (default 64), not
    for --max-nodes each. A request of --max-nodes ids is answered alone, exactly as the library
    samples it, in room the hot neighbor pages lend it; with too few hot pages to lend, in room
    held once beside them. The plan printed at start says which, not a cost per epoch."""
    ringgnn.generate_sbm(tmp_path / "ds", nodes=40_000, classes=2, avg_degree=20, feature_dim=2, seed=1)
    ds = ringgnn.Dataset.open(tmp_path / "ds")
    nodes = list(range(0, 40_000, 40))  # 1000 ids: --max-nodes
    want = ringgnn.NeighborSampler(ds, [3], seed=4).sample(nodes)
    common = [str(tmp_path / "ds"), "--fanouts", "3", "--backend", "pread", "--threads", "2", "--memory", "256M",
              "--max-nodes", "1000", "--max-concurrent", "8"]
    for extra, where in [([], "that the hot neighbor pages lend it until it is answered"),
                         (["--neighbor-cache", "64K"], "of the caller's reserve (the hot neighbor pages are too few "
                                                       "to lend it)")]:
        s = Served(tmp_path, *common, *extra)
        try:
            plan = "".join(s.stdout)
            assert ("chosen by the server: each of its workers holds a wave of up to 64 seeds (--batch-size) at "
                    "fanouts [3]; a larger request, up to 1000 ids (--max-nodes), is sampled alone, one at a time, "
                    "in ") in plan, plan
            assert where in plan and "per epoch" not in plan, plan
            with s.client() as c:
                for _ in range(2):  # the room is given back, and taken again
                    got = c.sample(nodes, seed=4)
                    assert same(got, want) and got.num_sampled_nodes[0] == 1000
                assert same(c.sample([7], seed=4), ringgnn.NeighborSampler(ds, [3], seed=4).sample([7]))
                st = c.info()["stats"]
                assert (st["busy"], st["failed"]) == (0, 0), st
        finally:
            assert s.stop() == 0


def test_an_absurd_fanout_takes_all_neighbors(trained, client):
    got = client.sample([1], [2**31 - 1, 1], seed=3)
    assert same(got, ringgnn.NeighborSampler(trained[1], [-1, 1], seed=3).sample([1]))


def test_malformed_messages_get_a_status(served, client):
    with grpc.insecure_channel(served.address) as ch:
        raw = ch.unary_unary("/ringgnn.v1.RingGnn/Sample", request_serializer=None, response_deserializer=None)
        for garbage in (b"\xff\xff\xff\xff garbage", b"\x0a\x05\x01", b"\x08\xff"):
            with pytest.raises(grpc.RpcError) as e:
                raw(garbage, timeout=10)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
            assert "malformed ringgnn.v1.SampleRequest" in e.value.details()
        unknown = ch.unary_unary("/ringgnn.v1.RingGnn/Nope", request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as e:
            unknown(b"", timeout=10)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert client.sample([1], [2]).num_sampled_nodes[0] == 1


def test_garbage_bytes_slow_and_vanishing_clients_do_not_hurt_others(served, client):
    host, port = served.address.rsplit(":", 1)
    garbage = socket.create_connection((host, int(port)))
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
    silent = socket.create_connection((host, int(port)))  # connects and never speaks
    half = socket.create_connection((host, int(port)))
    half.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")  # an HTTP/2 preface, then nothing
    for _ in range(3):
        ch = grpc.insecure_channel(served.address)
        futures = [ch.unary_unary("/ringgnn.v1.RingGnn/Sample", request_serializer=None,
                                  response_deserializer=None).future(b"\x08\x01", timeout=10) for _ in range(20)]
        ch.close()  # goes away with its requests in flight
        assert all(f.done() for f in futures)
    assert client.sample([7], [5, 5], seed=0).num_sampled_nodes[0] == 1
    for s in (garbage, silent, half):
        s.close()
    assert client.features([1]).shape == (1, 12)
    assert served.proc.poll() is None


def test_predict_without_a_model_and_features_without_features(trained, tmp_path):
    tmp, ds, run = trained
    ringgnn.generate_rmat(tmp_path / "rmat", scale=8, edge_factor=4, seed=0)
    plain = ringgnn.Dataset.open(tmp_path / "rmat")
    s = Served(tmp_path, plain.path)
    try:
        with s.client() as c:
            with pytest.raises(ringgnn.InputError, match="no model"):
                c.predict([1])
            with pytest.raises(ringgnn.InputError, match="no node features"):
                c.features([1])
            assert c.info()["feature_dim"] == 0 and c.info()["model"] == ""
            assert same(c.sample([3], [4, 4], seed=2), ringgnn.NeighborSampler(plain, [4, 4], seed=2).sample([3]))
    finally:
        assert s.stop() == 0


# --- load, deadlines, shutdown ------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow(trained):
    """A server whose waves wait 400 ms for company, with room for 2 requests at a time."""
    tmp, ds, _ = trained
    s = Served(tmp, ds.path, "--max-wait-ms", "400", "--max-concurrent", "2", "--fanouts", "3")
    yield s
    assert s.stop() == 0


def test_a_full_server_answers_resource_exhausted_then_recovers(slow):
    with slow.client() as c:
        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(c.sample, [i]) for i in range(10)]
            outcomes = []
            for f in futures:
                try:
                    outcomes.append(f.result().num_sampled_nodes[0])
                except ringgnn.BusyError as e:
                    outcomes.append(str(e))
        assert outcomes.count(1) >= 1 and sum(isinstance(o, str) for o in outcomes) >= 1, outcomes
        assert all("limit" in o or "busy" in o for o in outcomes if isinstance(o, str)), outcomes
        for i in range(3):  # then serves again, one at a time
            assert c.sample([i]).num_sampled_nodes[0] == 1


def test_deadlines_and_vanished_clients_end_their_work(slow, trained):
    with slow.client() as c:
        before = c.info()["stats"]
        with pytest.raises(ringgnn.DeadlineExceededError):
            c.sample([1], timeout=0.05)
        # A client process killed while its request waits in a wave.
        code = f"import ringgnn; ringgnn.Client({slow.address!r}, wait_ready=30).sample([2])"
        p = subprocess.Popen([sys.executable, "-c", code])
        deadline = time.monotonic() + 60
        while c.info()["stats"]["sample_requests"] < before["sample_requests"] + 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        p.kill()
        p.wait()
        while time.monotonic() < deadline:
            after = c.info()["stats"]
            if after["deadline_exceeded"] + after["cancelled"] >= before["deadline_exceeded"] + before["cancelled"] + 2:
                break
            time.sleep(0.05)
        assert after["cancelled"] >= before["cancelled"] + 1, (before, after)
        assert after["deadline_exceeded"] >= before["deadline_exceeded"] + 1, (before, after)
        assert c.sample([3]).num_sampled_nodes[0] == 1


def test_sigterm_lets_requests_in_flight_finish_and_exits_0(trained):
    tmp, ds, _ = trained
    s = Served(tmp, ds.path, "--max-wait-ms", "1500", "--fanouts", "3,3")
    with s.client() as c:
        c.sample([0])
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(c.sample, [i], seed=i) for i in range(6)]
            deadline = time.monotonic() + 30
            while c.info()["stats"]["sample_requests"] < 7 and time.monotonic() < deadline:
                time.sleep(0.01)  # until all of them wait in the engine's wave
            assert not any(f.done() for f in futures)
            s.terminate()
            got = [f.result(timeout=60) for f in futures]
        for i, g in enumerate(got):
            assert same(g, ringgnn.NeighborSampler(ds, [3, 3], seed=i).sample([i]))
        assert s.stop() == 0
        with pytest.raises((ConnectionError, ringgnn.ShuttingDownError)):
            c.sample([0], timeout=5)
    assert "stopped after 7 sample" in s.log.read_text()


def test_threads_and_memory_stay_bounded(served, trained):
    rng = np.random.default_rng(1)

    def burst(n):
        def work(k):
            with served.client() as c:
                for i in range(n):
                    v = int(rng.integers(0, 3000))
                    kind = (i + k) % 4
                    if kind == 0:
                        c.sample([v], seed=i)
                    elif kind == 1:
                        c.features([v, (v + 1) % 3000])
                    elif kind == 2:
                        c.predict([v])
                    else:
                        with pytest.raises(ringgnn.InputError):
                            c.sample([v + 3000])
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(8)))

    burst(100)
    warm = served.status()
    burst(400)  # 3200 more requests
    after = served.status()
    # Requests run on a pool of at most --handlers threads (32 here), started on demand: the
    # count may creep toward that bound as bursts meet, never with the number of requests
    # (3200 here). The rest is fixed: Python, the gRPC runtime, PyTorch's pool. Under a loaded
    # machine (the whole suite on 2 cores) the warm count was seen at 49, one over 32 + 16 and
    # not growing; what must hold is that 3200 more requests add at most a few pool threads.
    assert after["threads"] - warm["threads"] <= 8, (warm, after)
    assert after["threads"] <= 32 + 24, (warm, after)
    assert after["rss"] - warm["rss"] < 48 << 20, (warm, after)


def test_cli_errors(trained, tmp_path):
    tmp, ds, run = trained
    cases = [
        ([str(tmp_path / "missing")], "missing"),
        ([ds.path, "--model", str(tmp_path)], "no best.pt"),
        ([ds.path, "--listen", "256.1.1.1:99999"], "--listen"),
        ([ds.path, "--fanouts", "0"], "fanout"),
        ([ds.path, "--max-wait-ms", "inf"], "--max-wait-ms"),
        ([ds.path, "--max-wait-ms", "-1"], "--max-wait-ms"),
    ]
    for args, message in cases:
        out = subprocess.run([sys.executable, "-m", "ringgnn", "serve", *args], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 1 and message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr
    # The port is taken, for either frontend.
    s = Served(tmp, ds.path)
    try:
        for frontend in ("rust", "grpcio"):
            out = subprocess.run([sys.executable, "-m", "ringgnn", "serve", ds.path, "--listen", s.address,
                                  "--frontend", frontend], capture_output=True, text=True, timeout=120)
            assert out.returncode == 1 and "cannot listen" in out.stderr, (frontend, out.stderr)
    finally:
        assert s.stop() == 0
    # The API checks the frontend too (the command line's choices never let a wrong one through).
    from ringgnn.serving.server import Server

    with pytest.raises(ringgnn.InputError, match="--frontend must be one of rust, grpcio"):
        Server(ds.path, frontend="tonic")
