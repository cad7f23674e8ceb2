#!/usr/bin/env python3
"""Measure the import graph of the Python package: the figures ``docs/ARCHITECTURE.md`` quotes.

It reads the sources (``python/ringgnn`` of the work tree, or of a commit with ``--rev``) with
:mod:`ast` and runs nothing. What it counts:

- **modules**: every ``.py`` file of the package (``__init__.py`` included), and their lines;
- **arrows**: ``A -> B`` where module A imports module B of the package (one arrow per pair, however
  many import statements). ``from . import x`` points at the submodule ``x`` where there is one,
  ``from .x import y`` at ``x`` (or at ``x.y`` where that is a submodule). Importing ``a.b`` also
  runs ``a/__init__.py``; that implicit arrow is not drawn. Imports under ``if TYPE_CHECKING:`` are
  no arrows (they never run), nor are ``importlib.import_module`` calls (``ringgnn/__init__.py``'s
  lazy public names): both are counted apart;
- **load-time arrows**: those made by module-level imports (what ``import A`` runs); the others are
  **function-level** (deferred until a function runs);
- **floors**: a longest-path layering of the load-time graph (its circles condensed first): floor 1
  imports nothing of the package, a module stands one floor above the highest module it imports;
- **arrows back up**: arrows from a module to one on its own floor or above: a function-level import
  of a module above (it would close a circle if it ran at load time) or an arrow inside a circle;
- **circles**: strongly connected components of the whole graph (all arrows), more than one module;
- **function-level imports**: each import statement inside a function, classed by what deferring it
  keeps off the import path: a heavy third-party module (torch, grpc, pyarrow, ...: ``HEAVY``)
  imported directly or through the package module it names; numpy or the Rust core (``ringgnn._core``,
  which the ``ringgnn`` command defers until its Ctrl-C handler is in place); a circle (the target
  imports the importer at load time); or nothing.

Usage::

    python scripts/import_graph.py                     # the work tree's package, a markdown report
    python scripts/import_graph.py --rev 2e31343       # as it was at a commit (read with git show)
    python scripts/import_graph.py --json graph.json   # also every figure and list as JSON
    python scripts/import_graph.py --list              # also every arrow back up and deferred import
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Set, Tuple

#: Third-party modules whose import costs seconds or drags a large library in: deferring them is
#: the one reason for a function-level import (besides a circle).
HEAVY = ("torch", "torch_geometric", "grpc", "grpc_health", "grpc_tools", "google.protobuf", "pyarrow",
         "matplotlib", "tensorboard", "ogb", "pandas", "scipy")
#: What the ``ringgnn`` command defers until it handles Ctrl-C (see ``ringgnn/__init__.py``): numpy
#: and the Rust core (an extension module: ``--extension``, no node of the graph).
STARTUP = ("numpy",)
#: Modules over this many lines are listed.
MAX_LINES = 600


def _top(name: str, prefixes: Iterable[str]) -> Optional[str]:
    """The entry of ``prefixes`` that ``name`` is or lies under, or None."""
    for p in prefixes:
        if name == p or name.startswith(p + "."):
            return p
    return None


class Sources:
    """The package's files: from the work tree, or from a commit (``git show``)."""

    def __init__(self, root: str, rev: Optional[str]):
        self.root, self.rev = root, rev
        if rev is None:
            self.paths = sorted(os.path.relpath(os.path.join(d, f), root)
                                for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))
        else:
            top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, check=True, text=True,
                                 capture_output=True).stdout.strip()
            self.prefix = os.path.relpath(os.path.abspath(root), top)
            out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", self.prefix], cwd=top,
                                 check=True, text=True, capture_output=True).stdout
            self.top = top
            self.paths = sorted(os.path.relpath(p, self.prefix) for p in out.splitlines() if p.endswith(".py"))

    def read(self, path: str) -> str:
        if self.rev is None:
            with open(os.path.join(self.root, path), encoding="utf-8") as f:
                return f.read()
        return subprocess.run(["git", "show", f"{self.rev}:{self.prefix}/{path}"], cwd=self.top, check=True,
                              text=True, capture_output=True).stdout


def module_name(package: str, path: str) -> str:
    parts = path[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package] + parts)


class Import:
    """One import statement's targets."""

    def __init__(self, importer: str, line: int, deferred: bool, typing_only: bool, targets: List[str],
                 external: List[str]):
        self.importer, self.line, self.deferred, self.typing_only = importer, line, deferred, typing_only
        self.targets, self.external = targets, external
        self.dodges = ""  # for a deferred import: what deferring it keeps off the load-time path


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def read_imports(package: str, modules: Set[str], extensions: Set[str], name: str, is_pkg: bool,
                 tree: ast.AST) -> Tuple[List[Import], int]:
    """The import statements of module ``name`` and its count of ``import_module`` calls."""
    found: List[Import] = []
    dynamic = 0

    def resolve(node: ast.AST) -> Tuple[List[str], List[str]]:
        inside, outside = [], []
        if isinstance(node, ast.Import):
            for a in node.names:
                if _top(a.name, extensions):
                    outside.append(a.name)
                elif _top(a.name, [package]):
                    # `import a.b.c` runs a, a.b and a.b.c; the arrow is to the deepest module.
                    inside.append(a.name if a.name in modules else _known_prefix(a.name, modules))
                else:
                    outside.append(a.name)
            return [t for t in inside if t], outside
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = name.split(".") if is_pkg else name.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
            if not _top(mod, [package]):
                return [], [mod]
        if _top(mod, extensions):
            return [], [mod]
        for a in node.names:
            sub = f"{mod}.{a.name}"
            if sub in extensions:
                outside.append(sub)
                continue
            inside.append(sub if sub in modules else (mod if mod in modules else _known_prefix(mod, modules)))
        return sorted({t for t in inside if t}), outside

    def visit(node: ast.AST, deferred: bool, typing_only: bool) -> None:
        nonlocal dynamic
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                inside, outside = resolve(child)
                found.append(Import(name, child.lineno, deferred, typing_only, inside, outside))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for c in child.body:
                    visit(ast.Module(body=[c], type_ignores=[]), deferred, True)
                for c in child.orelse:
                    visit(ast.Module(body=[c], type_ignores=[]), deferred, typing_only)
            else:
                if isinstance(child, ast.Call):
                    f = child.func
                    fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                    if fname in ("import_module", "__import__"):
                        dynamic += 1
                inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, inner, typing_only)

    visit(tree, False, False)
    return found, dynamic


def _known_prefix(name: str, modules: Set[str]) -> Optional[str]:
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def sccs(nodes: Iterable[str], edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def floors(nodes: List[str], edges: Dict[str, Set[str]]) -> Dict[str, int]:
    """Longest-path layering (floor 1 = imports nothing), circles condensed to one node."""
    comp_of = {}
    for i, comp in enumerate(sccs(nodes, edges)):
        for m in comp:
            comp_of[m] = i
    cedges: Dict[int, Set[int]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            if comp_of[a] != comp_of[b]:
                cedges[comp_of[a]].add(comp_of[b])
    memo: Dict[int, int] = {}

    def floor(c: int) -> int:
        if c not in memo:
            memo[c] = 1 + max((floor(d) for d in cedges[c]), default=0)
        return memo[c]

    sys.setrecursionlimit(max(1000, 10 * len(nodes)))
    return {m: floor(comp_of[m]) for m in nodes}


def closure(start: str, edges: Dict[str, Set[str]]) -> Set[str]:
    seen, todo = {start}, [start]
    while todo:
        for b in edges.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def code_lines(text: str, tree: ast.AST) -> int:
    """Lines of code: neither blank, nor a comment alone, nor part of a docstring (a module's,
    class's or function's)."""
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            d = n.body[0]
            if isinstance(d, ast.Expr) and isinstance(d.value, ast.Constant) and isinstance(d.value.value, str):
                skip.update(range(d.lineno, d.end_lineno + 1))
    return sum(1 for i, ln in enumerate(text.splitlines(), 1)
               if i not in skip and ln.strip() and not ln.strip().startswith("#"))


def measure(root: str, package: str, rev: Optional[str], extensions: Iterable[str] = ("_core",)) -> dict:
    src = Sources(root, rev)
    lines: Dict[str, int] = {}
    code: Dict[str, int] = {}
    paths: Dict[str, str] = {}
    trees = {}
    for p in src.paths:
        name = module_name(package, p)
        text = src.read(p)
        lines[name] = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        paths[name] = p
        trees[name] = ast.parse(text, filename=p)
        code[name] = code_lines(text, trees[name])
    modules = set(lines)
    ext = {f"{package}.{e}" for e in extensions}
    imports: List[Import] = []
    dynamic = {}
    for name in sorted(modules):
        found, dyn = read_imports(package, modules, ext, name, paths[name].endswith("__init__.py"), trees[name])
        imports += found
        if dyn:
            dynamic[name] = dyn
    load: Dict[str, Set[str]] = defaultdict(set)
    every: Dict[str, Set[str]] = defaultdict(set)
    typed: Dict[str, Set[str]] = defaultdict(set)  # every arrow and those under TYPE_CHECKING
    for imp in imports:
        typed[imp.importer].update(t for t in imp.targets if t != imp.importer)
    external_load: Dict[str, Set[str]] = defaultdict(set)
    for imp in imports:
        if imp.typing_only:
            continue
        for t in imp.targets:
            if t != imp.importer:
                every[imp.importer].add(t)
                if not imp.deferred:
                    load[imp.importer].add(t)
        if not imp.deferred:
            external_load[imp.importer].update(imp.external)
    nodes = sorted(modules)
    floor = floors(nodes, load)
    circles = [c for c in sccs(nodes, every) if len(c) > 1]
    load_circles = [c for c in sccs(nodes, load) if len(c) > 1]
    typed_circles = [c for c in sccs(nodes, typed) if len(c) > 1]
    cli = f"{package}.cli"
    into_cli = sorted((a, b) for a, bs in typed.items() for b in bs
                      if _top(b, [cli]) and not _top(a, [cli, f"{package}.__main__"]))
    arrows = sorted((a, b) for a, bs in every.items() for b in bs)
    circle_of = {m: i for i, c in enumerate(circles) for m in c}
    back_up = [(a, b) for a, b in arrows
               if floor[b] > floor[a] or (a in circle_of and circle_of[a] == circle_of.get(b))]

    def heavy_at_load(m: str) -> Set[str]:
        """What importing package module ``m`` loads of HEAVY/STARTUP (and the core)."""
        got = set()
        for n in closure(m, load):
            for e in external_load.get(n, ()):
                t = _top(e, HEAVY + STARTUP + tuple(ext))
                if t:
                    got.add(t)
        return got

    deferred = [imp for imp in imports if imp.deferred and not imp.typing_only]
    for imp in deferred:
        mine = heavy_at_load(imp.importer)
        theirs: Set[str] = set()
        for e in imp.external:
            t = _top(e, HEAVY + STARTUP + tuple(ext))
            if t:
                theirs.add(t)
        for t in imp.targets:
            theirs |= heavy_at_load(t)
        kept = theirs - mine
        heavy = sorted(k for k in kept if _top(k, HEAVY))
        if heavy:
            imp.dodges = "heavy: " + ", ".join(heavy)
        elif kept:
            imp.dodges = "start-up: " + ", ".join(sorted(kept))
        elif any(imp.importer in closure(t, load) for t in imp.targets):
            imp.dodges = "circle"
        else:
            imp.dodges = "nothing"
    # Subpackages (``ringgnn.data``, ...): the arrows between them, and their circles; the package's
    # own top-level modules (``ringgnn._files``, ...) are one group, "(top)"; ``__main__`` is its own.
    subs = {m.split(".")[1] for m in modules if m.count(".") >= 2}

    def group(m: str) -> str:
        parts = m.split(".")
        if m == f"{package}.__main__":
            return "__main__"
        return parts[1] if len(parts) > 1 and parts[1] in subs else "(top)"

    between: Dict[Tuple[str, str], List[str]] = defaultdict(list)
    for a, b in arrows:
        if group(a) != group(b):
            between[(group(a), group(b))].append(f"{a} -> {b}")
    gedges: Dict[str, Set[str]] = defaultdict(set)
    for ga, gb in between:
        gedges[ga].add(gb)
    group_circles = [c for c in sccs(sorted({group(m) for m in modules}), gedges) if len(c) > 1]
    kinds: Dict[str, Dict[str, int]] = {"package": defaultdict(int), "outside": defaultdict(int)}
    for imp in deferred:
        kinds["package" if imp.targets else "outside"][imp.dodges.split(":")[0]] += 1
    return {
        "rev": rev or "work tree",
        "root": root,
        "modules": len(modules),
        "lines": sum(lines.values()),
        "code_lines": sum(code.values()),
        "floors": max(floor.values(), default=0),
        "floors_all_arrows": max(floors(nodes, every).values(), default=0),
        "arrows": len(arrows),
        "load_time_arrows": sum(len(bs) for bs in load.values()),
        "arrows_back_up": len(back_up),
        "circles": circles,
        "load_time_circles": load_circles,
        "circles_with_type_checking": typed_circles,
        "imports_of_cli_from_outside": into_cli,
        "subpackage_arrows": {f"{a} -> {b}": v for (a, b), v in sorted(between.items())},
        "subpackage_circles": group_circles,
        "function_level_imports": len(deferred),
        "function_level_pairs": len({(imp.importer, t) for imp in deferred for t in imp.targets + imp.external}),
        "function_level_of_package_modules": sum(kinds["package"].values()),
        "function_level_by_reason": {k: dict(sorted(v.items())) for k, v in kinds.items()},
        "type_checking_imports": sum(1 for imp in imports if imp.typing_only),
        "import_module_calls": dynamic,
        "over_max_lines": sorted(((m, n) for m, n in lines.items() if n > MAX_LINES), key=lambda x: -x[1]),
        "per_module": {m: {"path": paths[m], "lines": lines[m], "floor": floor[m],
                           "imports": sorted(every.get(m, ()))} for m in nodes},
        "back_up": back_up,
        "function_level": [{"module": imp.importer, "line": imp.line, "imports": imp.targets + imp.external,
                            "dodges": imp.dodges} for imp in deferred],
    }


def report(r: dict, show_list: bool) -> str:
    out = [f"# Import graph of {r['root']} ({r['rev']})", ""]
    out += ["| figure | value |", "|---|---|"]
    out += [f"| modules | {r['modules']} |", f"| lines (of code: no docstrings, comments or blank lines) | {r['lines']} ({r['code_lines']}) |", f"| floors of load-time imports (of every import) | {r['floors']} ({r['floors_all_arrows']}) |",
            f"| import arrows (load-time) | {r['arrows']} ({r['load_time_arrows']}) |",
            f"| arrows back up | {r['arrows_back_up']} |",
            f"| circles (load-time; counting TYPE_CHECKING imports) | {len(r['circles'])} "
            f"({len(r['load_time_circles'])}; {len(r['circles_with_type_checking'])}) |",
            f"| function-level imports (distinct module pairs) | {r['function_level_imports']} "
            f"({r['function_level_pairs']}) |"]
    for where, kinds in r["function_level_by_reason"].items():
        n = sum(kinds.values())
        out.append(f"| &nbsp; of {where} modules | {n}: " + ", ".join(
            f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) + " |")
    out.append(f"| subpackage arrows (circles) | {len(r['subpackage_arrows'])} ({len(r['subpackage_circles'])}) |")
    out.append(f"| imports of cli/ from outside it | {len(r['imports_of_cli_from_outside'])} |")
    out.append(f"| modules over {MAX_LINES} lines | {len(r['over_max_lines'])} |")
    out.append("")
    out.append("Function-level imports are classed by what deferring them keeps off the load-time path: heavy "
               "(torch, grpc, pyarrow, ...), start-up (numpy, the core: the command's Ctrl-C handler comes "
               "first), circle, or nothing.")
    out.append("")
    for c in r["circles"]:
        out.append("- circle: " + " <-> ".join(c))
    for c in r["circles_with_type_checking"]:
        if c not in r["circles"]:
            out.append("- circle through TYPE_CHECKING imports: " + " <-> ".join(c))
    for a, b in r["imports_of_cli_from_outside"]:
        out.append(f"- {a} imports {b} (nothing outside cli/ should)")
    for m, n in r["over_max_lines"]:
        out.append(f"- over {MAX_LINES} lines: {m} ({n})")
    for c in r["subpackage_circles"]:
        out.append("- subpackage circle: " + " <-> ".join(c))
    if r["subpackage_arrows"]:
        out += ["", "Arrows between subpackages (module arrows):", ""]
        for k, v in r["subpackage_arrows"].items():
            out.append(f"- {k}: {len(v)}" + (f" ({'; '.join(v)})" if show_list else ""))
    out += ["", "Floors, top down:", ""]
    by_floor: Dict[int, List[str]] = defaultdict(list)
    for m, d in r["per_module"].items():
        by_floor[d["floor"]].append(f"{m} {d['lines']}")
    for f in sorted(by_floor, reverse=True):
        out.append(f"- floor {f}: " + ", ".join(sorted(by_floor[f])))
    if show_list:
        out += ["", "Arrows back up (importer floor -> imported floor):", ""]
        pm = r["per_module"]
        for a, b in r["back_up"]:
            out.append(f"- {a} ({pm[a]['floor']}) -> {b} ({pm[b]['floor']})")
        out += ["", "Function-level imports:", ""]
        for f in r["function_level"]:
            out.append(f"- {f['module']}:{f['line']} {', '.join(f['imports'])}: dodges {f['dodges']}")
    return "\n".join(out) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=os.path.join(here, "..", "python", "ringgnn"), help="the package's folder")
    p.add_argument("--package", default="ringgnn", help="the package's import name")
    p.add_argument("--extension", action="append", default=None,
                   help="a compiled submodule (no .py file; default _core): an outside module, like numpy")
    p.add_argument("--rev", help="measure the package as it is at this commit instead of the work tree")
    p.add_argument("--json", metavar="FILE", help="also write every figure and list as JSON to FILE ('-': stdout)")
    p.add_argument("--list", action="store_true", help="also list every arrow back up and function-level import")
    args = p.parse_args(argv)
    r = measure(os.path.normpath(args.root), args.package, args.rev, args.extension or ["_core"])
    if args.json == "-":
        json.dump(r, sys.stdout, indent=1)
        print()
        return 0
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1)
    sys.stdout.write(report(r, args.list))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
