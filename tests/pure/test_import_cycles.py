"""No import cycle among the modules of include/tokokita_etl.

Read statically from each module's syntax tree, so that every import counts: at module level,
inside a function (a lazy import still closes a cycle, it only moves the failure to the first
call), and under `if TYPE_CHECKING:` (a type checker follows it the same way). Importing
`a.b.c` also imports the packages `a.b` and `a`, except from inside that package (a package's
modules importing each other while its `__init__` runs is how a package is built).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from tests.import_graph import PACKAGE, ROOT, import_graph, module_files, write_tree


def cycle_groups(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (the strongly
    connected components of more than one module, Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per group of `cycle_groups`: the shortest closed path from its first module."""
    return [_closed_path(graph, set(group)) for group in cycle_groups(graph)]


def _closed_path(graph: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    start = min(group)
    paths = [[start]]
    seen = {start}
    while paths:  # breadth first: the shortest way back to the start
        path = paths.pop(0)
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                return [*path, start]
            if nxt in group and nxt not in seen:
                seen.add(nxt)
                paths.append([*path, nxt])
    raise AssertionError(f"no cycle through {start}")


def describe(graph: dict[str, dict[str, int]], cycle: list[str], files: dict[str, Path]) -> str:
    steps = [f"{a} (line {graph[a][b]} of {files[a].name}) -> {b}" for a, b in pairwise(cycle)]
    return "; ".join(steps)


def test_no_module_of_the_package_imports_itself_through_others():
    graph = import_graph(ROOT, PACKAGE)
    files = module_files(ROOT, PACKAGE)
    assert len(graph) > 20 and "tokokita_etl.cron.parse" in graph
    cycles = [f"{', '.join(group)}; for example {describe(graph, cycle, files)}"
              for group, cycle in zip(cycle_groups(graph), find_cycles(graph), strict=True)]
    assert cycles == [], "modules that import each other:\n" + "\n".join(cycles)


def test_a_lazy_import_inside_a_function_closes_a_cycle(tmp_path):
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/config.py": "def check():\n    from pkg.cron import parse\n    return parse\n",
        "pkg/cron.py": "from pkg.config import check\n\ndef parse():\n    return check\n",
        "pkg/leaf.py": "import pkg.config\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.config"] == {"pkg.cron": 2}
    assert find_cycles(graph) == [["pkg.config", "pkg.cron", "pkg.config"]]


def test_type_checking_and_relative_imports_count_and_a_package_may_import_its_modules(tmp_path):
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/state.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                         "    from .state_db import Store\n"),
        "pkg/state_db.py": "from pkg import state\n",
        "pkg/sub/__init__.py": "from pkg.sub.part import name\n",
        "pkg/sub/part.py": "from pkg.sub.other import x\nname = x\n",
        "pkg/sub/other.py": "x = 1\n",
        "pkg/user.py": "from pkg.sub import name\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.user"] == {"pkg.sub": 1}
    assert graph["pkg.sub.part"] == {"pkg.sub.other": 1}  # not its own package
    assert find_cycles(graph) == [["pkg.state", "pkg.state_db", "pkg.state"]]
