"""Fail if modules of scidmz import each other in a cycle (run by scripts/test.sh after lint-imports).

import-linter's layers contract only checks imports between packages; a cycle
inside one (e.g. daemon.api <-> daemon.loop, before ARCHITECTURE.md v3) goes
unseen, so this walks the module graph (grimp, import-linter's own) for
strongly connected components.
"""

from __future__ import annotations

import sys

import grimp


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (no edge is exempt)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in sorted(edges):
        if m not in index:
            visit(m)
    return out


def main() -> int:
    found = cycles(grimp.build_graph("scidmz"))
    for comp in found:
        print("import cycle: " + " <-> ".join(comp), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
