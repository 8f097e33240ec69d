"""The package's folders are layers, and an import goes only downwards.

- shared (`errors`, `files`, `storage`, `masking`, `cron`): imports only shared modules;
- `settings/` (model, value rules, sources, display, file layout): shared;
- `warehouse/` (connections, dialects, canonical checksums): settings and shared;
- `runner/` (partitions, decisions, watermark, claims, outcomes, status): warehouse,
  settings and shared, never a pipeline's domain;
- `orders/` (the orders pipeline's domain): the runner and everything below it;
- `city_report/` (what the city reports share: their table, sums, stages, lineage): the
  orders (what they are built from) and below;
- `weekly/`, `monthly/` (the weekly and the monthly city report): `city_report/` and below;
- the composition (`cli`, `pipelines`, `__main__`): anything.

The Airflow adapters (`plugins/`) serve any pipeline, so they never import a domain.

Read statically, as the cycle test reads imports (lazy and type-checking imports count). An
import that crosses a layer would be listed by name below, and the test fails on a new
crossing and on a listed one that is gone, so the list only shrinks; it is empty.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.import_graph import PACKAGE, ROOT, import_graph, write_tree

REPO = ROOT.parent
SHARED = {"errors", "files", "storage", "masking", "cron"}
COMPOSITION = {"cli", "pipelines", "__main__"}
ALLOWED = {
    "shared": {"shared"},
    "settings": {"settings", "shared"},
    "warehouse": {"warehouse", "settings", "shared"},
    "runner": {"runner", "warehouse", "settings", "shared"},
    "orders": {"orders", "runner", "warehouse", "settings", "shared"},
    # the city reports are built from the orders' results
    "city_report": {"city_report", "orders", "runner", "warehouse", "settings", "shared"},
    "weekly": {"weekly", "city_report", "runner", "warehouse", "settings", "shared"},
    "monthly": {"monthly", "city_report", "runner", "warehouse", "settings", "shared"},
    "plugins": {"runner", "warehouse", "settings", "shared", "composition"},
}

#: crossings not yet removed (importer, imported module)
KNOWN_CROSSINGS: set[tuple[str, str]] = set()


def layer(module: str) -> str:
    """The layer of a module of the package, by its folder (or its name at the top)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "shared"  # the package's own __init__: a docstring and a version
    top = parts[1]
    if top in ("runner", "orders", "city_report", "weekly", "monthly", "warehouse", "settings"):
        return top
    if top in COMPOSITION:
        return "composition"
    if top in SHARED:
        return "shared"
    raise AssertionError(f"{module}: a module in no layer; name its layer in this test")


def _without_packages_of(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The crossings, less a package whose module the same importer is already reported for
    (importing `a.b.c` imports the package `a.b` too)."""
    return {(a, b) for a, b in pairs
            if not any(x == a and y.startswith(b + ".") for x, y in pairs)}


def crossings(graph: dict[str, dict[str, int]]) -> set[tuple[str, str]]:
    """Every import from a module of one layer into a layer it may not import."""
    found = {(importer, target) for importer, imported in graph.items()
             if layer(importer) != "composition"
             for target in imported if layer(target) not in ALLOWED[layer(importer)]}
    return _without_packages_of(found)


def plugin_imports(root: Path) -> dict[str, set[str]]:
    """Each plugin file (relative path) -> the package modules it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / "plugins").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names = found.setdefault(str(path.relative_to(root)), set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module]
                if node.module == PACKAGE:
                    modules = [f"{PACKAGE}.{alias.name}" for alias in node.names]
                elif node.module.count(".") == 1:  # `from tokokita_etl.orders import stages`
                    modules += [f"{node.module}.{alias.name}" for alias in node.names]
                names.update(m for m in modules if m.startswith(PACKAGE + "."))
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names if a.name.startswith(PACKAGE + "."))
    return found


def plugin_crossings(root: Path) -> set[tuple[str, str]]:
    found = {(path, module) for path, modules in plugin_imports(root).items()
             for module in modules if layer(module) not in ALLOWED["plugins"]}
    return _without_packages_of(found)


def test_every_module_of_the_package_imports_only_its_own_layer_and_those_below():
    graph = import_graph(ROOT, PACKAGE)
    assert {"tokokita_etl.runner.policy", "tokokita_etl.orders.extract",
            "tokokita_etl.warehouse.database"} <= set(graph)
    found = crossings(graph) | plugin_crossings(REPO)
    new = sorted(found - KNOWN_CROSSINGS)
    gone = sorted(KNOWN_CROSSINGS - found)
    assert new == [], "imports against the layers (see this test's docstring):\n" + "\n".join(
        f"{a} -> {b}" for a, b in new)
    assert gone == [], "listed crossings that are gone: take them off KNOWN_CROSSINGS\n" + "\n".join(
        f"{a} -> {b}" for a, b in gone)


def test_a_runner_module_importing_a_domain_is_a_crossing_even_inside_a_function(tmp_path):
    write_tree(tmp_path, {
        "include/tokokita_etl/__init__.py": "",
        "include/tokokita_etl/runner/__init__.py": "",
        "include/tokokita_etl/runner/status.py":
            "def rows():\n    from tokokita_etl.orders.stages import STAGES\n    return STAGES\n",
        "include/tokokita_etl/orders/__init__.py": "",
        "include/tokokita_etl/orders/stages.py": "from tokokita_etl.runner import status\n",
        "include/tokokita_etl/errors.py": "",
        "plugins/adapter.py": "from tokokita_etl.orders import stages\n",
    })
    graph = import_graph(tmp_path / "include", PACKAGE)
    assert crossings(graph) == {("tokokita_etl.runner.status", "tokokita_etl.orders.stages")}
    assert plugin_crossings(tmp_path) == {("plugins/adapter.py", "tokokita_etl.orders.stages")}


def test_the_readme_layout_table_names_each_folder_of_the_package_and_nothing_else():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = {cell.strip("`/") for row in table.splitlines() if row.startswith("| `")
              for cell in row.split("|")[1].replace(",", " ").split() if cell.startswith("`")}
    folders = {str(path.parent.relative_to(REPO))
               for path in (REPO / "include" / PACKAGE).glob("*/__init__.py")}
    assert folders, "no folder of the package found"
    named = {path for path in listed if path.startswith(f"include/{PACKAGE}")}
    assert named == folders | {f"include/{PACKAGE}"}
    assert [path for path in listed if not (REPO / path).exists()] == []
