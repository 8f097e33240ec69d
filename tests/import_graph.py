"""The import graph of the package's modules, read from their syntax trees (shared by the
import-cycle and the layering tests)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "tokokita_etl"
ROOT = Path(__file__).resolve().parents[1] / "include"


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its __init__)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    """module -> {imported module of the package: line of the first such import}."""
    files = module_files(root, package)
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path))
             for name, path in files.items()}
    graph: dict[str, dict[str, int]] = {name: {} for name in files}

    def add(importer: str, target: str, line: int) -> None:
        parts = target.split(".")
        for end in range(len(parts), 1, -1):  # the module and each package above it
            name = ".".join(parts[:end])
            inside = importer == name or importer.startswith(name + ".")
            if name in files and name != importer and (end == len(parts) or not inside):
                graph[importer].setdefault(name, line)

    for importer, tree in trees.items():
        is_package = files[importer].name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(importer, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = importer.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                add(importer, source, node.lineno)
                for alias in node.names:  # `from pkg import module`, unless pkg binds the name
                    sub = f"{source}.{alias.name}"
                    if sub in files and alias.name not in _top_level_names(trees[source]):
                        add(importer, sub, node.lineno)
    return graph


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write `files` (path relative to `root` -> text): a small package for a test to read."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
