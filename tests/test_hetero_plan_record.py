"""The typed memory plan of a generated dataset and of the two-type cache fixture, over budgets
from nothing held to everything held, every explicit choice (backends, cache, placements already
made, measured batches, embedding tables, no times, a sampler alone), equals the plan recorded in
`tests/fixtures/plan-hetero.json`: every file's placement, reason and saving, the cache's rows
by type and what they save, and the notes.

Record it again (only when a change of the plan is meant, and say so in the commit) with
``PYTHONPATH=python python tests/test_hetero_plan_record.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import ringgnn
from ringgnn.data.generate import generate_hetero
from ringgnn.sampling.hetero import relation_fanouts
from ringgnn.sampling.plan import expected_reads, plan_hetero, relation_bytes

RECORD = Path(__file__).parent / "fixtures" / "plan-hetero.json"
GENERATED = dict(papers=600, authors=400, institutions=30, feature_dim=8, seed=5)
TABLES = {"author": 4, "institution": 2}


def summary(p: Any) -> Dict[str, Any]:
    """Everything a plan decided, as JSON values."""
    choices = {kind: {n: [c.held, c.bytes, c.saved, c.why] for n, c in group.items()}
               for kind, group in (("relations", p.relations), ("features", p.features), ("tables", p.tables))}
    cache = None if p.cache is None else dict(budget=p.cache.budget, bytes=p.cache.bytes,
                                              ids={t: [int(i) for i in v] for t, v in p.cache.ids.items()})
    return dict(budget=p.budget, process=p.process, index=p.index, room=p.room, batch_bytes=p.batch_bytes,
                batches=p.batches, disk_backend=p.disk_backend, feature_disk_backend=p.feature_disk_backend,
                cache=cache, cache_saved=p.cache_saved, notes=p.notes, times=p.times, placement=list(p.placement()),
                batch_memory=p.batch_memory, **choices)


def cases(generated: Path, typed: Path) -> Iterator[Tuple[str, Any]]:
    """(name, a function making the case's result) of every case: each is called before the next
    is drawn (the loops' variables are read then)."""
    gen = ringgnn.Dataset.open(generated)
    index = relation_bytes(gen)[0]
    for fan in ([5, 3], [10], [-1, 1]):
        fanouts = relation_fanouts(gen, fan)
        yield f"reads {fan}", lambda: [expected_reads(gen, fanouts, "paper", 64), expected_reads(gen, fanouts)]
    fanouts = relation_fanouts(gen, [5, 3])
    loader = dict(target="paper", batch_size=64, seeds=400, feature_backend="auto", process=1000)
    for room in (0, 1000, 4000, 8000, 12000, 20000, 30000, 45000, 60000, 80000, 100000, 200000):
        memory = 1000 + 2 * (room + index)
        yield f"loader room {room}", lambda: plan_hetero(gen, fanouts, memory=memory, **loader)
        yield f"sampler room {room}", lambda: plan_hetero(gen, fanouts, memory=memory, process=1000)
        yield f"tables room {room}", lambda: plan_hetero(gen, fanouts, memory=memory, tables=TABLES, **loader)
        yield f"cache room {room}", lambda: plan_hetero(gen, fanouts, memory=memory, cache=room // 3, **loader)
        yield f"measured room {room}", lambda: plan_hetero(gen, fanouts, memory=memory, batch_bytes=room // 2,
                                                           reserve=100, **loader)
    memory = 1000 + 2 * (30000 + index)
    for backend in ("memory", "pread"):
        yield f"backend {backend}", lambda: plan_hetero(gen, fanouts, memory=memory, backend=backend, **loader)
        yield f"feature_backend {backend}", lambda: plan_hetero(gen, fanouts, memory=memory,
                                                                **{**loader, "feature_backend": backend})
    yield "cache 0", lambda: plan_hetero(gen, fanouts, memory=memory, cache=0, **loader)
    yield "cache too large", lambda: plan_hetero(gen, fanouts, memory=memory, cache=10 ** 6, **loader)
    yield "budget too small", lambda: plan_hetero(gen, fanouts, memory=1000 + index, backend="memory", **loader)
    yield "batches too large", lambda: plan_hetero(gen, fanouts, memory=memory, batch_bytes=memory, **loader)
    yield "fixed relations", lambda: plan_hetero(gen, fanouts, memory=memory,
                                                 fixed_relations=("uring", ["paper:cites:paper"]), **loader)
    yield "fixed memory", lambda: plan_hetero(gen, fanouts, memory=2 * memory, fixed_relations=("memory", []), **loader)
    yield "fixed tables", lambda: plan_hetero(gen, fanouts, memory=memory, tables=TABLES,
                                              fixed_tables={"author": True, "institution": False}, **loader)
    yield "no times", lambda: plan_hetero(gen, fanouts, memory=memory, times=False, **loader)
    yield "one hop", lambda: plan_hetero(gen, relation_fanouts(gen, [10]), memory=memory, **loader)
    yield "all neighbors", lambda: plan_hetero(gen, relation_fanouts(gen, [-1, 2]), memory=memory, **loader)
    never = {**fanouts, "paper:cites:paper": [0, 0], "author:writes:paper": [0, 2]}
    yield "never read", lambda: plan_hetero(gen, never, memory=memory, **loader)
    yield "never read, dense", lambda: plan_hetero(gen, never, memory=memory, process=1000)
    typ = ringgnn.Dataset.open(typed)
    fanouts = relation_fanouts(typ, [2, 2])
    index = relation_bytes(typ)[0]
    kw = dict(target="paper", batch_size=2, seeds=5, process=0, feature_backend="auto")
    for room in range(0, 8400, 150):
        yield f"typed room {room}", lambda: plan_hetero(typ, fanouts, memory=2 * (room + index), **kw)
        yield f"typed cache {room}", lambda: plan_hetero(typ, fanouts, memory=2 * (room + index), cache=room // 2, **kw)
    yield "typed disk features", lambda: plan_hetero(typ, fanouts, memory=2 * (200 + index),
                                                     **{**kw, "feature_backend": "pread"})
    yield "typed tables", lambda: plan_hetero(typ, fanouts, memory=2 * (4200 + index), tables={"venue": 3}, **kw)


def _cases_with_errors(generated: Path, typed: Path) -> Dict[str, Any]:
    """Every case, an error recorded as [its class, its message]."""
    out: Dict[str, Any] = {}
    for name, make in cases(generated, typed):
        assert name not in out
        try:
            got = make()
        except ringgnn.InputError as e:
            got = ["InputError", str(e)]
        out[name] = got if isinstance(got, list) else summary(got)
    return json.loads(json.dumps(out))  # tuples as lists, as recorded


def _build(root: Path) -> Tuple[Path, Path]:
    from test_hetero_cache import build_typed

    generate_hetero(root / "gen", **GENERATED)
    return root / "gen", build_typed(root)


def test_the_plan_is_the_one_recorded(tmp_path):
    want = json.loads(RECORD.read_text())
    got = _cases_with_errors(*_build(tmp_path))
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    with tempfile.TemporaryDirectory() as tmp:
        got = _cases_with_errors(*_build(Path(tmp)))
        # One case a line: a change shows as the cases it changed.
        RECORD.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in got.items()) + "\n}\n")
    print(f"recorded {RECORD}")
