"""Print how tunekit's code is laid out: modules per folder, the largest modules, the import graph.

Run from a checkout: ``.venv/bin/python scripts/structure.py [ROOT]``. It reads the source
(every import, inside functions and under TYPE_CHECKING too) and imports nothing of tunekit,
so it measures any checkout, older ones included, side by side.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("tunekit", "tunekit_backends")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(known: dict[str, Path]) -> tuple[dict[str, set[str]], int]:
    """Each module's imports of the packages' modules, and how many sit inside functions."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    in_functions = 0
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {
            id(node)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
        }
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved and resolved != name:
                    graph[name].add(resolved)
                    in_functions += id(node) in functions and resolved.startswith("tunekit.")
    return graph, in_functions


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start, children_of_start in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(children_of_start)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def depth(graph: dict[str, set[str]], components: list[set[str]]) -> int:
    """Levels of the import graph: modules on its longest chain, a cycle counted as one level."""
    group = {m: i for i, c in enumerate(components) for m in c}
    node = {m: group.get(m, m) for m in graph}
    edges: dict[object, set[object]] = {}
    for src, targets in graph.items():
        edges.setdefault(node[src], set()).update(node[t] for t in targets if node[t] != node[src])
    memo: dict[object, int] = {}

    def longest(n: object) -> int:
        if n not in memo:
            memo[n] = 1 + max((longest(t) for t in edges.get(n, ())), default=0)
        return memo[n]

    sys.setrecursionlimit(10_000)
    return max(longest(n) for n in edges)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".", type=Path)
    root = parser.parse_args().root
    known = modules(root)
    graph, in_functions = imports(known)
    tunekit = {m: {t for t in ts if t.startswith("tunekit.")} for m, ts in graph.items() if m.startswith("tunekit.")}
    tunekit_cycles = cycles(tunekit)
    folders = Counter(str(path.parent.relative_to(root)) for path in known.values())
    sizes = sorted(((len(p.read_text(encoding="utf-8").splitlines()), m) for m, p in known.items()), reverse=True)
    print(f"modules: {len(known)} ({sum(1 for m in known if m.startswith('tunekit.') or m == 'tunekit')} in tunekit)")
    print("modules per folder: " + ", ".join(f"{folder} {count}" for folder, count in sorted(folders.items())))
    print("largest modules: " + ", ".join(f"{m} {n}" for n, m in sizes[:5]))
    print(f"lines: tunekit {sum(n for n, m in sizes if m.startswith('tunekit.') or m == 'tunekit')}")
    largest_cycle = max(map(len, tunekit_cycles), default=0)
    print(f"import cycles in tunekit: {len(tunekit_cycles)} (largest: {largest_cycle} modules)")
    print(f"imports of a tunekit module inside a function: {in_functions}")
    print(f"import graph depth (tunekit): {depth(tunekit, tunekit_cycles)} levels")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
