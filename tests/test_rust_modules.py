"""``scripts/rust_modules.py --check`` on tiny crates written here: a circle between a module and
its children through ``super`` (which docs/ARCHITECTURE.md accepts) passes; one between siblings,
or between top-level modules, fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "rust_modules.py"


def _crate(root: Path, files: dict) -> Path:
    (root / "Cargo.toml").parent.mkdir(parents=True, exist_ok=True)
    (root / "Cargo.toml").write_text('[package]\nname = "t"\n')
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _check(crate: Path):
    return subprocess.run([sys.executable, str(SCRIPT), "--check", str(crate)], capture_output=True, text=True)


# `a` uses its children's items and they use `a`'s types through `super`.
PARENT = {
    "lib.rs": "mod a;\nmod b;\n",
    "a/mod.rs": "mod c;\nmod d;\npub struct X;\nfn f() { c::g(); d::h(); }\n",
    "a/c.rs": "pub fn g() -> super::X { super::X }\n",
    "a/d.rs": "pub fn h() -> super::X { super::X }\n",
    "b.rs": "fn k() -> crate::a::X { crate::a::X }\n",
}


def test_a_circle_through_the_parent_passes(tmp_path):
    r = _check(_crate(tmp_path / "t", PARENT))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "circle 1 (3 modules, only through arrows up to a parent): a a::c a::d" in r.stdout
    assert "1 circle(s) between modules (1 only through a child's arrows to its parent), 0 between top-level" \
        in r.stdout


def test_a_circle_between_siblings_fails(tmp_path):
    files = dict(PARENT, **{"a/d.rs": "pub fn h() -> super::X { super::c::g() }\n",
                            "a/c.rs": "pub fn g() -> super::X { super::d::h() }\n"})
    r = _check(_crate(tmp_path / "t", files))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "0 only through a child's arrows to its parent" in r.stdout


def test_a_circle_between_top_level_modules_fails(tmp_path):
    files = dict(PARENT, **{"a/d.rs": "pub fn h() -> super::X { crate::b::k(); super::X }\n"})
    r = _check(_crate(tmp_path / "t", files))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "circle between top-level modules: a b" in r.stdout
