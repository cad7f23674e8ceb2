"""Task tables (issue 36, tasks at a time): rows of (node, time, label) as the train/val/test sets
of node classification (``ringgnn.training.task_table``), homogeneous and typed datasets. Exact
batches on docs/FORMAT.md's example (a node recurring at several times gets a subgraph and a label
per row), a planted graph whose label changes with time that only sampling at the rows' times
learns, what the run records and resumes, and every bad table."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ringgnn
from ringgnn import InputError
from ringgnn.data import build
from ringgnn.training.loop import train
from ringgnn.training.task_table import read_task_tables, seed_of_row

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("torch_geometric")

FAST = dict(fanouts=[10], layers=1, hidden=16, batch_size=100, epochs=4, lr=0.02, dropout=0.0, threads=1,
            quiet=True, log=lambda s: None)


def table(path, **cols):
    pq.write_table(pa.table(cols), path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """docs/FORMAT.md's example (edges 2->1, 7->1, 0->1, 1->1, 3->0 at times 5, 3, 3, 9, -4), with
    features and neither labels nor splits; and the same graph without times."""
    d = tmp_path_factory.mktemp("tiny")
    (d / "e.txt").write_text("2 1\n7 1\n0 1\n1 1\n3 0\n")
    np.save(d / "t.npy", np.array([5, 3, 3, 9, -4], dtype=np.int64))
    np.save(d / "x.npy", np.eye(8, dtype=np.float32))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "t.npy", features=d / "x.npy")
    build.convert(d / "e.txt", d / "plain", features=d / "x.npy")
    return d


def batches(ds, tables, split, **kw):
    """(n_id, seed_time or None, batch_size, row, y, row_seed) of each batch of ``split``."""
    loader = tables.loader(ringgnn.Dataset.open(ds), [-1, -1], "node", split, **dict(dict(shuffle=False), **kw))
    out = []
    for b in loader:
        s = b["node"]
        out.append((s.n_id.tolist(), s.seed_time.tolist() if "seed_time" in s else None, s.batch_size,
                    s.row.tolist(), s.y.tolist(), s.row_seed.tolist()))
    return out


def test_rows_at_their_times_get_their_own_subgraphs_and_labels(tiny, tmp_path):
    # Node 1 at times 2, 9, 3 and again at 9 (another label), node 0 at 3.
    tr = table(tmp_path / "train.parquet", node=[1, 1, 0, 1, 1], time=[2, 9, 3, 3, 9], label=[0, 2, 1, 1, 0])
    va = table(tmp_path / "val.parquet", node=[1], time=[4], label=[3])
    ds = ringgnn.Dataset.open(tiny / "ds")
    t = read_task_tables(ds, "node", {"train": tr, "val": va})
    assert t.classes == 4 and t.timed and t.eval_splits == ("val",)
    assert t.splits["train"].node.tolist() == [1, 1, 0, 1, 1] and t.splits["train"].label.dtype == np.int32
    [(n_id, st, bs, row, y, row_seed)] = batches(tiny / "ds", t, "train", batch_size=10)
    # Seeds (1, 2), (1, 9), (0, 3), (1, 3): the fifth row, (1, 9) again, shares the second's seed.
    assert bs == 4 and n_id[:4] == [1, 1, 0, 1] and st[:4] == [2, 9, 3, 3]
    assert row == [0, 1, 2, 3, 4] and y == [0, 2, 1, 1, 0] and row_seed == [0, 1, 2, 3, 1]
    # At 2 node 1 has no edge yet; at 9 all four (0, 7, 2 and itself, the seed); at 3 the two of time 3.
    assert n_id[4:] == [0, 7, 2, 3, 7, 3] and st[4:] == [9, 9, 9, 3, 3, 9]
    # Shuffled and cut into batches of 2: each batch carries its own rows' labels.
    got = batches(tiny / "ds", t, "train", batch_size=2, shuffle=True, seed=3)
    assert sorted(r for b in got for r in b[3]) == [0, 1, 2, 3, 4]
    for n_id, st, bs, row, y, row_seed in got:
        tr_rows = t.splits["train"]
        assert y == tr_rows.label[row].tolist()
        assert [n_id[i] for i in row_seed] == tr_rows.node[row].tolist()
        assert [st[i] for i in row_seed] == tr_rows.time[row].tolist()
    [(n_id, st, bs, row, y, row_seed)] = batches(tiny / "ds", t, "val")
    assert n_id == [1, 0, 7, 3] and st == [4] * 4 and y == [3]


def test_rows_without_times(tiny, tmp_path):
    """A dataset without times: the time column is not needed, rows are seeds without times, and
    rows of one node share its seed (each with its own label)."""
    (tmp_path / "train.csv").write_text("node,label\n1,0\n0,1\n1,2\n")
    (tmp_path / "val.csv").write_text("node,label\n3,1\n")
    ds = ringgnn.Dataset.open(tiny / "plain")
    t = read_task_tables(ds, "node", f"train={tmp_path / 'train.csv'},val={tmp_path / 'val.csv'}")
    assert not t.timed and t.splits["train"].time is None and t.record()["columns"]["time"] is None
    [(n_id, st, bs, row, y, row_seed)] = batches(tiny / "plain", t, "train")
    assert st is None and bs == 2 and n_id[:2] == [1, 0] and y == [0, 1, 2] and row_seed == [0, 1, 0]
    # With --ignore-time on a dataset with times: the same, the time column unread.
    t = read_task_tables(ringgnn.Dataset.open(tiny / "ds"), "node",
                         f"train={tmp_path / 'train.csv'},val={tmp_path / 'val.csv'}", ignore_time=True)
    assert not t.timed


def test_seed_of_row():
    assert seed_of_row(np.array([5, 2, 9]), np.array([9, 5, 9, 2])).tolist() == [2, 0, 2, 1]
    times = (np.array([3, 1, 3]), np.array([3, 3, 1]))
    assert seed_of_row(np.array([4, 4, 7]), np.array([7, 4, 4]), times).tolist() == [2, 0, 1]
    with pytest.raises(RuntimeError, match="not among its batch's seeds"):
        seed_of_row(np.array([4]), np.array([5]))


def switching(d, n=400, k=5):
    """A graph whose nodes' class changes with time: into each node, ``k`` edges from nodes of
    group 0 at times in [0, 100) and ``k`` from nodes of group 1 at times in [500, 600); a node's
    feature is its own group (one-hot), independent of everything else. Each node has two rows,
    class 0 at a time in [100, 400) (its past holds group-0 neighbors only) and class 1 at a time
    in [600, 1000): only a row's own time tells them apart. Nodes 0-239 are train rows, 240-319
    val, 320-399 test. Built homogeneous (with random labels of 3 classes and a node split, which
    the rows replace), and typed (papers citing papers, with authors writing them; no labels)."""
    rng = np.random.default_rng(5)
    group = rng.integers(0, 2, n)
    by = [np.flatnonzero(group == g) for g in (0, 1)]
    src = np.concatenate([np.concatenate([rng.choice(by[0], k), rng.choice(by[1], k)]) for _ in range(n)])
    dst = np.repeat(np.arange(n), 2 * k)
    et = np.concatenate([np.concatenate([rng.integers(0, 100, k), rng.integers(500, 600, k)]) for _ in range(n)])
    d.mkdir(parents=True, exist_ok=True)
    np.savetxt(d / "e.txt", np.stack([src, dst], 1), fmt="%d")
    np.save(d / "edges.npy", np.stack([src, dst], 1))
    np.save(d / "et.npy", et.astype(np.int64))
    np.save(d / "x.npy", np.eye(2, dtype=np.float32)[group])
    np.save(d / "y.npy", rng.integers(0, 3, n))
    build.convert(d / "e.txt", d / "ds", edge_time=d / "et.npy", features=d / "x.npy", labels=d / "y.npy",
                  split="train=0.6,val=0.2,test=0.2")
    np.save(d / "writes.npy", np.stack([np.arange(n) % 20, np.arange(n)], 1))
    build.build_hetero(d / "h", [build.NodeType("paper", n, features=d / "x.npy"), build.NodeType("author", 20)],
                       [build.Relation("paper:cites:paper", d / "edges.npy", edge_time=d / "et.npy"),
                        build.Relation("author:writes:paper", d / "writes.npy")], seed=1)
    early, late = rng.integers(100, 400, n), rng.integers(600, 1000, n)
    spec = {}
    for split, lo, hi in (("train", 0, 240), ("val", 240, 320), ("test", 320, 400)):
        v = np.arange(lo, hi)
        spec[split] = table(d / f"{split}.parquet", node=np.concatenate([v, v]),
                            time=np.concatenate([early[v], late[v]]),
                            label=np.repeat(np.array([0, 1], dtype=np.int64), len(v)))
    return d, spec


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    return switching(tmp_path_factory.mktemp("switch"))


def test_learns_from_task_tables_and_ignore_time_cannot(switch, tmp_path):
    d, spec = switch
    lines = []
    m = train(d / "ds", out=tmp_path / "at", task_table=spec, **dict(FAST, log=lines.append))
    assert m["temporal"] is True and m["layerwise"] is None and "heterogeneous" not in m
    assert any(s.startswith("task table: rows train 480, val 160, test 160, 2 classes") for s in lines)
    rec = m["args"]["task_table"]
    assert rec["columns"] == dict(node="node", time="time", label="label") and rec["classes"] == 2
    assert rec["train"]["rows"] == 480 and rec["train"]["path"] == os.path.abspath(spec["train"])
    assert rec["train"]["bytes"] == os.path.getsize(spec["train"]) and len(rec["train"]["crc32c"]) == 8
    with open(tmp_path / "at" / "metrics.json") as f:
        assert json.load(f)["args"]["task_table"] == rec
    leak = train(d / "ds", out=tmp_path / "no", task_table=spec, ignore_time=True, **FAST)
    assert leak["temporal"] is False and leak["layerwise"] is None
    # At its time each row sees its class; without times a node's two rows (classes 0 and 1) look alike.
    at, blind = m["best_val_acc"], leak["best_val_acc"]
    assert at > 0.9 and blind < 0.65, (at, blind)
    assert m["test_acc"] > 0.9


def test_typed_dataset(switch, tmp_path):
    d, spec = switch
    m = train(d / "h", target="paper", out=tmp_path / "r", task_table=spec, **FAST)
    assert m["temporal"] is True and m["heterogeneous"] is True and m["target"] == "paper"
    assert m["args"]["task_table"]["classes"] == 2
    assert m["best_val_acc"] > 0.8, m["best_val_acc"]
    with pytest.raises(InputError, match="is heterogeneous: give --target TYPE, the node type of the task table"):
        train(d / "h", out=tmp_path / "bad", task_table=spec, **FAST)
    with pytest.raises(InputError, match="out of range: node type 'author' has 20 nodes"):
        train(d / "h", target="author", out=tmp_path / "bad", task_table=spec, **FAST)
    assert not os.path.exists(tmp_path / "bad")


def test_resume_checks_the_tables(switch, tmp_path):
    d, spec = switch
    out = tmp_path / "r"
    np.save(tmp_path / "t.npy", np.full(400, 1000, np.int64))
    train(d / "ds", out=out, task_table=spec, **dict(FAST, epochs=1))
    # The same tables, copied elsewhere: the same run.
    moved = {s: tmp_path / f"{s}.parquet" for s in spec}
    for s, p in spec.items():
        moved[s].write_bytes(p.read_bytes())
    m = train(d / "ds", out=out, resume=True, task_table=moved, **dict(FAST, epochs=2))
    assert [e["epoch"] for e in m["epochs"]] == [0, 1]
    t = pq.read_table(spec["val"])
    pq.write_table(t.set_column(2, "label", pa.array(t.column("label").to_numpy()[::-1].copy())), moved["val"])
    with pytest.raises(InputError, match=r"trained on other task tables \(they differ in val \(.*val.parquet\)\)"):
        train(d / "ds", out=out, resume=True, task_table=moved, **dict(FAST, epochs=3))
    with pytest.raises(InputError, match="trained on other task tables .*differ in columns"):
        train(d / "ds", out=out, resume=True, task_table=spec, task_label_column="node", **dict(FAST, epochs=3))
    with pytest.raises(InputError, match="was trained on task tables; resume it with the same --task-table"):
        train(d / "ds", out=out, resume=True, seed_time=tmp_path / "t.npy", **dict(FAST, epochs=3))
    # And a run without them, resumed with them.
    train(d / "ds", out=tmp_path / "s", seed_time=tmp_path / "t.npy", **dict(FAST, epochs=1))
    with pytest.raises(InputError, match="was trained without task tables; resume it without --task-table"):
        train(d / "ds", out=tmp_path / "s", resume=True, task_table=spec, **dict(FAST, epochs=2))


def test_refused_options(switch, tiny, tmp_path):
    d, spec = switch
    out = tmp_path / "bad"
    np.save(tmp_path / "t.npy", np.zeros(400, np.int64))
    for kw, words in ((dict(seed_time=tmp_path / "t.npy"), "--seed-time gives each node .* give one of them"),
                      (dict(task="link"), "--task-table gives node classification's rows; --task link"),
                      (dict(eval_mode="layerwise"), "--eval layerwise: "),
                      (dict(model="gcn"), "--model gcn: a run on task tables trains on the typed engine, whose "
                                          "models are sage, rgcn; use one of them$"),
                      (dict(cache_policy="degree"), "--cache-policy: not available for runs on task tables "
                                                    r"\(on the typed engine\) .*; leave it out$")):
        with pytest.raises(InputError, match=words):
            train(d / "ds", out=out, task_table=spec, **dict(FAST, **kw))
    # A table with times on a dataset without: refused (nothing to sample at) unless --ignore-time.
    tr = table(tmp_path / "tr.parquet", node=[1, 0], time=[2, 3], label=[0, 1])
    two = {"train": tr, "val": tr}
    with pytest.raises(InputError, match=f"{tr}: column 'time' .*has no edge or node times.*--ignore-time"):
        train(tiny / "plain", out=out, task_table=two, **FAST)
    m = train(tiny / "plain", out=tmp_path / "ok", task_table=two, ignore_time=True, **dict(FAST, epochs=1))
    assert m["temporal"] is False and m["args"]["task_table"]["columns"]["time"] is None
    assert not os.path.exists(out)


@pytest.mark.parametrize("cols, words", [
    (dict(node=[0, 8], time=[1, 1], label=[0, 1]), "column 'node' .*: row 1 is node 8, out of range: node type "
                                                   r"'node' has 8 nodes \(ids 0 to 7\)"),
    (dict(node=[-1, 0], time=[1, 1], label=[0, 1]), "column 'node' .*: row 0 is node -1, out of range"),
    (dict(node=pa.array([0, 1], pa.uint8()), time=[1, 1], label=pa.array([0, 1], pa.uint16())), None),
    (dict(node=[0, None], time=[1, 1], label=[0, 1]), "column 'node': row 1 is empty"),
    (dict(node=[0, 1], time=[1, None], label=[0, 1]), r"column 'time' \(--task-time-column\): row 1 has no time"),
    (dict(node=[0, 1], time=[1, 1], label=[0, None]), r"column 'label' \(--task-label-column\): row 1 has no label"),
    (dict(node=[0, 1], time=[1, 1], label=[0, -2]), "column 'label' .*: row 1 is label -2; labels are class ids"),
    (dict(node=[0, 1], time=[1, 1], label=[0, 1 << 31]), "column 'label' .*: row 1 is label 2147483648"),
    (dict(node=[0.0, 1.5], time=[1, 1], label=[0, 1]), r"column 'node' \(--task-node-column\) holds double "
                                                       r"\(row 1 is 1.5\); node ids .* must be integers"),
    (dict(node=[0, 1], time=[1, 1], label=[0.0, 1.0]), r"column 'label' .*holds double; labels .*must be integers"),
    (dict(node=["a", "b"], time=[1, 1], label=[0, 1]), "column 'node' .*holds string; node ids"),
    (dict(node=[0, 1], time=[1.5, 1], label=[0, 1]), r"column 'time' .*holds double \(row 0 is 1.5\); times must be "
                                                     "integers"),
    (dict(node=[0, 1], label=[0, 1]), r"no column 'time' \(--task-time-column\); it has: node, label"),
    (dict(node=[0, 1], time=[1, 1]), r"no column 'label' \(--task-label-column\)"),
    (dict(id=[0, 1], time=[1, 1], label=[0, 1]), r"no column 'node' \(--task-node-column\)"),
    (dict(node=pa.array([], pa.int64()), time=pa.array([], pa.int64()), label=pa.array([], pa.int64())),
     "the table has no rows"),
])
def test_bad_tables(tiny, tmp_path, cols, words):
    ds = ringgnn.Dataset.open(tiny / "ds")
    good = table(tmp_path / "good.parquet", node=[0], time=[1], label=[0])
    bad = table(tmp_path / "bad.parquet", **cols)
    if words is None:
        assert read_task_tables(ds, "node", {"train": bad, "val": good}).splits["train"].node.tolist() == [0, 1]
        return
    with pytest.raises(InputError, match=f"^{bad}: {words}"):
        read_task_tables(ds, "node", {"train": bad, "val": good})


def test_bad_csv_and_specs(tiny, tmp_path):
    ds = ringgnn.Dataset.open(tiny / "ds")
    good = table(tmp_path / "good.parquet", node=[0], time=[1], label=[0])
    (tmp_path / "t.csv").write_text("node,time,label\n0,1,0\n1,,1\n")
    with pytest.raises(InputError, match=f"^{tmp_path / 't.csv'}: column 'time' .*line 3 has no time"):
        read_task_tables(ds, "node", {"train": tmp_path / "t.csv", "val": good})
    (tmp_path / "f.csv").write_text("node,time,label\n0,1,0\n1,1,2.5\n")
    with pytest.raises(InputError, match=r"column 'label' .*holds double \(line 3 is 2.5\)"):
        read_task_tables(ds, "node", {"train": tmp_path / "f.csv", "val": good})
    ts = table(tmp_path / "ts.parquet", node=[0], time=pa.array([1], pa.timestamp("ms")), label=[0])
    tus = table(tmp_path / "tus.parquet", node=[0], time=pa.array([1], pa.timestamp("us")), label=[0])
    assert read_task_tables(ds, "node", {"train": ts, "val": ts}).splits["train"].time.tolist() == [1]
    with pytest.raises(InputError, match="holds times in ms and .*tus.parquet's in us; give the tables one unit"):
        read_task_tables(ds, "node", {"train": ts, "val": tus})
    for spec, words in (("train=a.parquet", "no val table"), ("val=a.parquet,test=b.parquet", "no train table"),
                        ("train=a,val=b,dev=c", "unknown split dev"), ("train=0.5,val=0.5", "files, not fractions"),
                        ("train", "give SPLIT=FILE pairs"), ({"train": good, "val": good, "train2": good}, "unknown")):
        with pytest.raises(InputError, match=f"--task-table .*{words}"):
            read_task_tables(ds, "node", spec)
    with pytest.raises(FileNotFoundError):
        read_task_tables(ds, "node", {"train": tmp_path / "missing.parquet", "val": good})


def test_cli(switch, tmp_path):
    d, spec = switch
    base = [sys.executable, "-m", "ringgnn", "train", str(d / "ds"), "--fanouts", "5", "--layers", "1", "--hidden",
            "8", "--epochs", "1", "--threads", "1", "--json"]
    arg = ",".join(f"{s}={p}" for s, p in spec.items())
    r = subprocess.run(base + ["--out", str(tmp_path / "r"), "--task-table", arg], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["temporal"] is True and m["args"]["task_table"]["test"]["rows"] == 160
    r = subprocess.run(base + ["--out", str(tmp_path / "r2"), "--task-table", arg, "--task-label-column", "lbl"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no column 'lbl' (--task-label-column)" in r.stderr
    assert not os.path.exists(tmp_path / "r2")
    r = subprocess.run([sys.executable, "-m", "ringgnn", "train", "--help"], capture_output=True, text=True)
    assert all(o in r.stdout for o in ("--task-table", "--task-node-column", "--task-time-column",
                                       "--task-label-column"))
