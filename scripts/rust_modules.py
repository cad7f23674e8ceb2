#!/usr/bin/env python3
"""Show a Rust crate's module graph: its modules, the arrows between them, their floors and
the import circles (strongly connected components of more than one module).

    python3 scripts/rust_modules.py crates/ringgnn-store            # one crate
    python3 scripts/rust_modules.py crates/*                         # several
    python3 scripts/rust_modules.py --tests crates/ringgnn-store     # with #[cfg(test)] modules
    python3 scripts/rust_modules.py --check crates/*                 # exit 1 on a circle that is not accepted

A module is what a `mod` declaration makes (a file, or an inline `mod x { }` block). An arrow
M -> N means code in M names an item of N by a path: `crate::n::...`, `super::...`,
`self::...`, or a path that starts with one of M's child modules. `mod n;` itself is not an
arrow (it is where N lives, not something M uses). Nor is a `pub use`: it passes a name on,
and a path through it is followed to the module that defines the item (so `crate::Error`,
re-exported by lib.rs from `error`, is an arrow to `error`; `#[macro_export]` macros are items
of the module that defines them). Paths in comments and strings are ignored. Test modules
(`#[cfg(test)]`) are left out unless --tests: tests may import across layers. The circles are
reported twice: between modules (files), the layering this project keeps, and between
top-level modules (a module with all its submodules), which also shows a parent whose children
sit on different layers.

A circle that closes only through arrows from a module up to one of its ancestors (a child using
its parent's types through `super`, which docs/ARCHITECTURE.md accepts) is reported but accepted:
`--check` exits 1 only on a circle between top-level modules, or one that remains with those
up-arrows left out (between siblings, or modules of different parents).

Floor 0 holds modules with no arrows out; a module's floor is one above the highest module it
uses (modules of one circle share a floor). Standard library only, no Cargo needed.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from import_graph import floors as layers, sccs  # beside this script: its directory is on sys.path

# ---------------------------------------------------------------------------------------------
# Tokens: identifiers and punctuation, with comments, strings and char literals dropped.

_IDENT = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")


def tokens(src: str) -> list[str]:
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not _word(src[i - 1])):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            i = n if j < 0 else j + len(end)
        elif c == '"' or (c == "b" and src.startswith('b"', i)):
            i = src.index('"', i) + 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a): a lifetime has no
            # closing quote right after its first character.
            if i + 1 < n and src[i + 1] == "\\":
                j = src.find("'", i + 2)
                i = n if j < 0 else j + 1
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
            else:
                m = _IDENT.match(src, i + 1)
                i = m.end() if m else i + 1
        elif m := _IDENT.match(src, i):
            out.append(m.group())
            i = m.end()
        elif src.startswith("::", i):
            out.append("::")
            i += 2
        elif c.isdigit():
            m = re.compile(r"[0-9][0-9A-Za-z_.]*").match(src, i)
            i = m.end()
        else:
            out.append(c)
            i += 1
    return out


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


# ---------------------------------------------------------------------------------------------
# Modules and the paths each one names.


@dataclass
class Module:
    path: tuple[str, ...]  # () is the crate root
    file: Path
    lines: int = 0
    test: bool = False
    children: dict[str, "Module"] = field(default_factory=dict)
    # names this module re-exports (`pub use ...`) or defines as an exported macro, to the path
    # they stand for
    exports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # every path the module's code names, resolved against the module tree later
    uses: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "::".join(self.path) or "crate"


class Crate:
    def __init__(self, root_dir: Path, include_tests: bool):
        self.dir = root_dir
        self.include_tests = include_tests
        src = root_dir / "src"
        root = src / "lib.rs"
        if not root.exists():
            root = src / "main.rs"
        if not root.exists():
            raise SystemExit(f"{root_dir}: no src/lib.rs or src/main.rs")
        self.modules: dict[tuple[str, ...], Module] = {}
        self.root = self._load_file((), root, test=False, owns_dir=True)

    # -- parsing ----------------------------------------------------------------------------

    def _load_file(self, path, file: Path, test: bool, owns_dir: bool) -> Module:
        text = file.read_text()
        mod = Module(path, file, lines=text.count("\n"), test=test)
        self.modules[path] = mod
        if not path:
            self.root = mod
        # Child files of `a/mod.rs` and `lib.rs` live beside them; those of `a.rs` in `a/`.
        child_dir = file.parent if owns_dir else file.parent / file.stem
        toks = tokens(text)
        self._parse(mod, toks, 0, len(toks), child_dir)
        return mod

    def _parse(self, mod: Module, toks: list[str], i: int, end: int, child_dir: Path) -> None:
        attrs_test = False
        macro_export = False
        prev = ""
        while i < end:
            t = toks[i]
            if t == "#" and i + 1 < end and toks[i + 1] in ("[", "!"):
                j = i + 1 if toks[i + 1] == "[" else i + 2
                close = _matching(toks, j)
                body = toks[j + 1 : close]
                if body[:1] == ["cfg"] and "test" in body and "not" not in body:
                    attrs_test = True
                if body == ["macro_export"]:
                    macro_export = True
                i = close + 1
                continue
            if t == "mod" and i + 2 < end and _IDENT.fullmatch(toks[i + 1]):
                name, nxt = toks[i + 1], toks[i + 2]
                test = mod.test or attrs_test
                attrs_test = macro_export = False
                if nxt == ";":
                    if not test or self.include_tests:
                        self._load_child_file(mod, name, child_dir, test)
                    i += 3
                    continue
                if nxt == "{":
                    close = _matching(toks, i + 2)
                    if not test or self.include_tests:
                        child = Module(mod.path + (name,), mod.file, test=test)
                        mod.children[name] = child
                        self.modules[child.path] = child
                        self._parse(child, toks, i + 3, close, child_dir / name)
                    i = close + 1
                    continue
            if attrs_test and not self.include_tests and t not in ("pub", "(", ")", "crate"):
                # A test-only item (fn, use, impl ...): skip it whole.
                i = _item_end(toks, i, end)
                attrs_test = macro_export = False
                continue
            if t == "macro_rules" and i + 2 < end and toks[i + 1] == "!":
                if macro_export:
                    self.root.exports[toks[i + 2]] = ("crate",) + mod.path + (toks[i + 2],)
                attrs_test = macro_export = False
                i += 3
                continue
            if t == "use":
                is_pub = prev in ("pub", ")")
                j = toks.index(";", i) + 1
                for p, alias in _use_tree(toks[i + 1 : j - 1]):
                    if is_pub and alias not in ("*", "self", "_"):
                        mod.exports[alias] = p  # a name passed on, not a use of it
                    else:
                        mod.uses.append(p)
                attrs_test = macro_export = False
                prev, i = ";", j
                continue
            if t in ("crate", "$crate", "super", "self") and i + 1 < end and toks[i + 1] == "::":
                if prev != "::":
                    j, paths = _path(toks, i, end)
                    mod.uses.extend(p for p, _ in paths)
                    prev, i = toks[j - 1], j
                    continue
            if prev != "::" and i + 1 < end and toks[i + 1] == "::" and _IDENT.fullmatch(t):
                # A path that may start at a child module (`key::Key` in builder/mod.rs); kept
                # relative and resolved once all of `mod`'s children are known.
                j, paths = _path(toks, i, end)
                mod.uses.extend(("self",) + p for p, _ in paths)
                prev, i = toks[j - 1], j
                continue
            if t in (";", "}"):
                attrs_test = macro_export = False
            prev = t
            i += 1

    def _load_child_file(self, mod: Module, name: str, child_dir: Path, test: bool) -> None:
        for cand, owns in ((child_dir / f"{name}.rs", False), (child_dir / name / "mod.rs", True)):
            if cand.exists():
                mod.children[name] = self._load_file(mod.path + (name,), cand, test, owns)
                return
        print(f"warning: {mod.file}: no file for `mod {name};`", file=sys.stderr)

    # -- resolution -------------------------------------------------------------------------

    def resolve(self, mod: Module, p: tuple[str, ...], depth: int = 0) -> Module | None:
        """The module a path named in `mod` leads to (the deepest module along it, following
        re-exports), or None for paths outside the crate."""
        if not p:
            return None
        head, rest = p[0], list(p[1:])
        if head in ("crate", "$crate"):
            cur = self.root
        elif head in ("self", "super"):
            cur = mod
            if head == "super":
                cur = self.modules.get(mod.path[:-1], self.root)
            while rest and rest[0] in ("super", "self"):
                if rest.pop(0) == "super":
                    cur = self.modules.get(cur.path[:-1], self.root)
        else:
            return None
        while rest:
            seg = rest[0]
            if seg in cur.children:
                cur = cur.children[seg]
                rest.pop(0)
            elif seg in cur.exports and depth < 16:
                # `cur` re-exports `seg`: follow the `use` path, relative to `cur`.
                return self.resolve(cur, cur.exports[seg], depth + 1) or cur
            else:
                break
        return cur

    def graph(self, top: bool = False):
        """Arrows between modules (or between top-level modules, with `top`), and for each
        arrow the paths behind it."""
        def key(m: Module) -> str:
            return (m.path[0] if m.path else "crate") if top else m.name

        arrows: dict[str, set[str]] = {key(m): set() for m in self.modules.values()}
        why: dict[tuple[str, str], set[str]] = {}
        for m in self.modules.values():
            for p in m.uses:
                target = self.resolve(m, p)
                if target is not None and key(target) != key(m):
                    arrows[key(m)].add(key(target))
                    why.setdefault((key(m), key(target)), set()).add("::".join(p))
        return arrows, why


def _matching(toks: list[str], i: int) -> int:
    """Index of the bracket closing the one at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[toks[i]]]
    i += 1
    while stack and i < len(toks):
        t = toks[i]
        if t in pairs:
            stack.append(pairs[t])
        elif t == stack[-1]:
            stack.pop()
        i += 1
    return i - 1


def _item_end(toks: list[str], i: int, end: int) -> int:
    """Index just past the item starting at toks[i]: its `;` or its closing brace."""
    while i < end:
        t = toks[i]
        if t == ";":
            return i + 1
        if t in "([":
            i = _matching(toks, i) + 1
            continue
        if t == "{":
            return _matching(toks, i) + 1
        i += 1
    return end


def _path(toks: list[str], i: int, end: int):
    """Parse the path (or use tree) starting at toks[i]; return where it ends and its leaves."""
    segs: list[str] = []
    while i < end:
        t = toks[i]
        if t == "{":
            close = _matching(toks, i)
            leaves = []
            for sub in _split_commas(toks[i + 1 : close]):
                _, sub_leaves = _path(sub, 0, len(sub))
                # `a::{self, b}`: `self` names `a` itself
                leaves += [(tuple(segs) + (p if p != ("self",) else ()), a if p != ("self",)
                            else segs[-1]) for p, a in sub_leaves]
            return close + 1, leaves
        if t == "*" or _IDENT.fullmatch(t):
            segs.append(t)
            i += 1
            if i + 1 < end and toks[i] == "as":
                return i + 2, [(tuple(segs), toks[i + 1])]
            if i < end and toks[i] == "::":
                i += 1
                continue
        break
    leaf = segs[-1] if segs else ""
    if leaf == "self" and len(segs) > 1:
        segs.pop()
        leaf = segs[-1]
    return i, [(tuple(segs), leaf)] if segs else []


def _use_tree(toks: list[str]):
    if toks[:1] == ["::"]:
        toks = toks[1:]
    _, leaves = _path(toks, 0, len(toks))
    return [(("self",) + p if p[0] not in ("crate", "$crate", "self", "super") else p, a)
            for p, a in leaves]


def _split_commas(toks: list[str]) -> list[list[str]]:
    out, cur, depth = [], [], 0
    for t in toks:
        if t in "({[":
            depth += 1
        elif t in ")}]":
            depth -= 1
        if t == "," and depth == 0:
            out.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        out.append(cur)
    return out


# ---------------------------------------------------------------------------------------------
# Strongly connected components and floors: the Python import graph's (scripts/import_graph.py).


def components(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The modules' circles and lone modules, dependencies first."""
    return sccs(arrows, arrows)


def floors(arrows: dict[str, set[str]]) -> dict[str, int]:
    """Longest-path layering from floor 0 (uses nothing), circles condensed."""
    return {m: f - 1 for m, f in layers(sorted(arrows), arrows).items()}


def without_up_arrows(arrows: dict[str, set[str]]) -> dict[str, set[str]]:
    """``arrows`` less those from a module to one of its ancestors (`a::b::c` -> `a`, `a::b`)."""
    def up(m: str, d: str) -> bool:
        return d == "crate" or m.startswith(d + "::")

    return {m: {d for d in ds if not up(m, d)} for m, ds in arrows.items()}


def report(crate_dir: Path, include_tests: bool, why: bool) -> int:
    """Print the crate's graph; return its circles that ``--check`` refuses (see the module docs)."""
    crate = Crate(crate_dir, include_tests)
    arrows, paths = crate.graph()
    comps = components(arrows)
    circles = [c for c in comps if len(c) > 1]
    refused = [c for c in components(without_up_arrows(arrows)) if len(c) > 1]
    floor = floors(arrows)
    top_arrows, _ = crate.graph(top=True)
    top_circles = [c for c in components(top_arrows) if len(c) > 1]
    lines = {m.name: m.lines for m in crate.modules.values()}
    n_arrows = sum(len(v) for v in arrows.values())
    print(f"# {crate_dir}: {len(arrows)} modules, {n_arrows} arrows, "
          f"{max(floor.values()) + 1} floors, {len(circles)} circle(s) between modules "
          f"({len(circles) - len(refused)} only through a child's arrows to its parent), "
          f"{len(top_circles)} between top-level modules")
    for f in range(max(floor.values()), -1, -1):
        print(f"floor {f}:")
        for m in sorted(x for x in arrows if floor[x] == f):
            deps = ", ".join(sorted(arrows[m])) or "-"
            print(f"  {m} ({lines[m]} lines) -> {deps}")
            if why:
                for d in sorted(arrows[m]):
                    print(f"      {d}: {', '.join(sorted(paths[m, d]))}")
    for k, c in enumerate(circles, 1):
        accepted = not any(set(r) <= set(c) for r in refused)
        print(f"circle {k} ({len(c)} modules{', only through arrows up to a parent' if accepted else ''}): "
              f"{' '.join(c)}")
        inside = set(c)
        for m in c:
            for d in sorted(arrows[m] & inside):
                print(f"    {m} -> {d}: {', '.join(sorted(paths[m, d]))}")
    for c in top_circles:
        print(f"circle between top-level modules: {' '.join(c)}")
    print()
    return len(refused) + len(top_circles)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("crates", nargs="+", type=Path, help="crate folders (with Cargo.toml)")
    ap.add_argument("--tests", action="store_true", help="include #[cfg(test)] modules")
    ap.add_argument("--why", action="store_true", help="list the paths behind every arrow")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a crate has a circle between top-level modules, or between sibling (or "
                    "unrelated) modules; circles that close only through a child's arrows up to its parent "
                    "(`super::` uses of the parent's types) are accepted")
    args = ap.parse_args()
    total = 0
    for d in args.crates:
        if (d / "Cargo.toml").exists():
            total += report(d, args.tests, args.why)
    if args.check and total:
        sys.exit(1)


if __name__ == "__main__":
    main()
