"""benchmarks/ab.py, the same-run A/B driver: a trivial command through both sides, the table's
shape, the figures it reads and the ratio of the medians (no timing is asserted)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

AB = Path(__file__).resolve().parent.parent / "benchmarks" / "ab.py"


def _module():
    sys.path.insert(0, str(AB.parent))
    try:
        spec = importlib.util.spec_from_file_location("ab_bench", AB)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(AB.parent))


def test_two_trees_alternate_with_a_table_and_json(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, v in ((a, 2.0), (b, 3.0)):
        d.mkdir()
        (d / "abprobe.py").write_text(f"V = {v}\n")
    code = "import time, abprobe; time.sleep(0.01); print('figure', abprobe.V)"
    out = tmp_path / "ab.json"
    r = subprocess.run([sys.executable, str(AB), "--a", str(a), "--b", str(b), "--labels", "old,new", "--rounds", "3",
                        "--warmup", "1", "--figure", r"v=figure ([0-9.]+)", "--json", str(out), "--name", "probe",
                        "--", "python", "-c", code], capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert lines[0] == "### probe"
    head = next(i for i, ln in enumerate(lines) if ln.startswith("| measure"))
    assert lines[head] == ("| measure | old (median of 3) | new (median of 3) | new / old | per round (median) "
                           "| old runs | new runs |")
    assert lines[head + 1] == "|---|---:|---:|---:|---:|---|---|"
    rows = {c[0]: c for c in (ln.strip("| ").split(" | ") for ln in lines[head + 2:] if ln.startswith("| "))}
    assert list(rows) == ["wall_s", "v", "peak_rss"]
    assert rows["v"][1:7] == ["2.000", "3.000", "1.500", "1.500", "2.000, 2.000, 2.000", "3.000, 3.000, 3.000"]
    doc = json.loads(lines[-1])
    assert doc == json.loads(out.read_text())
    assert doc["labels"] == ["old", "new"] and doc["rounds"] == 3 and doc["warmup"] == 1
    # Round 0 is the warm-up; A goes first in even rounds, B in odd ones.
    assert [x["round"] for x in doc["runs"]["old"]] == [1, 2, 3]
    order = [json.loads(ln)["side"] for ln in r.stderr.splitlines() if ln.startswith("{")]
    assert order == ["old", "new", "new", "old", "old", "new", "new", "old"]
    v = next(s for s in doc["summary"] if s["measure"] == "v")
    assert v["ratio"] == 1.5 and v["a_runs"] == [2.0] * 3


def test_summary_ratio_is_of_the_medians():
    ab = _module()
    runs = {"A": [{"t": 1.0}, {"t": 4.0}, {"t": 2.0}], "B": [{"t": 3.0}, {"t": 1.0}, {"t": 5.0}, {"t": None}]}
    (row,) = ab.summarize(runs, ["A", "B"], ["t"])
    assert (row["a"], row["b"], row["ratio"]) == (2.0, 3.0, 1.5)
    assert row["b_runs"] == [3.0, 1.0, 5.0]
    assert row["paired"] == 2.5  # rounds' own ratios 3.0, 0.25, 2.5
    (row,) = ab.summarize({"A": [{"t": 2.0}], "B": [{"t": 3.0}, {"t": 1.0}]}, ["A", "B"], ["t"])
    assert row["paired"] is None and row["ratio"] == 1.0
    assert ab.figure(r"s=([0-9.]+)", "s=1 s=2.5", "s=9") == 2.5
    assert ab.figure(r"s=([0-9.]+)", "none", "s=9") == 9.0
    assert ab.figure(r"s=([0-9.]+)", "", "") is None
    assert ab.memcap_fields("x\nmemcap: cap=100 bytes peak=? bytes failcnt=0 oom_kills=1 exit=0\n") == dict(
        cap=100, failcnt=0, oom_kills=1, exit=0)


def test_placeholders_and_memcap_prefix():
    ab = _module()
    argv = ab.command(["ringgnn", "train", "--out", "/tmp/r-{label}-{round}"], "new", "/t", 2, "480M", True)
    assert argv[1:4] == ["--drop-caches", "480M", "--"]
    assert argv[4:] == [sys.executable, "-m", "ringgnn", "train", "--out", "/tmp/r-new-2"]
    assert ab.command(["python", "x.py", "{tree}"], "A", "/t", 0, None, False) == [sys.executable, "x.py", "/t"]


def test_a_failing_side_stops_with_its_output(tmp_path):
    r = subprocess.run([sys.executable, str(AB), "--a", str(tmp_path), "--b", str(tmp_path), "--rounds", "1", "--",
                        "python", "-c", "import sys; print('broken'); sys.exit(3)"], capture_output=True, text=True)
    assert r.returncode == 1
    assert "A failed (3)" in r.stderr and "broken" in r.stderr


@pytest.mark.parametrize("bad", [["--labels", "A"], ["--labels", "A,A"], ["--drop-caches"], []])
def test_bad_arguments_are_refused(tmp_path, bad):
    cmd = [] if bad == [] else ["--", "true"]
    r = subprocess.run([sys.executable, str(AB), "--a", str(tmp_path), "--b", str(tmp_path), *bad, *cmd],
                       capture_output=True, text=True)
    assert r.returncode == 2
