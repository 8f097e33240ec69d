"""The package's folders are layers, and an import goes only downwards. The pipeline packages
are those of the registry (`tokokita_etl.pipelines`: the package's own and the installed
ones), each the package of the module that declares its `Pipeline`:

- shared (`errors`, `files`, `storage`, `masking`, `cron`): imports only shared modules;
- `settings/` (model, value rules, sources, display, file layout): shared;
- `warehouse/` (connections, dialects, canonical checksums): settings and shared;
- `runner/` (partitions, decisions, watermark, claims, outcomes, status, publish, lineage
  references): warehouse, settings and shared, never a pipeline's package;
- each pipeline's package (`orders/`, `weekly/`, `monthly/`, the stock test pipeline): the
  runner and everything below it, and the libraries the pipelines share, never another
  pipeline's package (an upstream is named by its pipeline's name, looked up in the
  registry);
- the libraries pipelines share (`city_report/`: the city reports' table, sums, stages,
  lineage): the runner and below;
- the composition (`cli`, `pipelines`, `__main__`): anything.

The Airflow adapters (`plugins/`) serve any pipeline, so they never import a pipeline's
package or a library of them.

Read statically, as the cycle test reads imports (lazy and type-checking imports count). No
import crosses a layer: the test fails on any, naming it.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

from tests.import_graph import PACKAGE, ROOT, import_graph, write_tree

REPO = ROOT.parent
SHARED = {"errors", "files", "storage", "masking", "cron"}
COMPOSITION = {"cli", "pipelines", "__main__"}
#: the folders of the package the pipelines share, by what they share
LIBRARIES = {"city_report"}
BELOW_RUNNER = {"runner", "warehouse", "settings", "shared"}
GENERIC = {
    "shared": {"shared"},
    "settings": {"settings", "shared"},
    "warehouse": {"warehouse", "settings", "shared"},
    "runner": BELOW_RUNNER,
    "plugins": BELOW_RUNNER | {"composition"},
}

def _declaring_module(pipeline) -> str:
    """The module that declares `pipeline` (assigns it at its top level), not one that
    imports it."""
    for name, module in sorted(sys.modules.items()):
        found = [attr for attr, value in vars(module).items() if value is pipeline] \
            if module is not None and name != f"{PACKAGE}.pipelines" else []
        path = getattr(module, "__file__", None)
        if not found or not path or not path.endswith(".py"):
            continue
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        assigned = {target.id for node in tree.body if isinstance(node, ast.Assign)
                    for target in node.targets if isinstance(target, ast.Name)}
        if assigned & set(found):
            return name
    raise AssertionError(f"pipeline {pipeline.name!r}: no module declares it")


@cache
def pipeline_packages() -> dict[str, str]:
    """Each registered pipeline's package (dotted name) -> the pipeline's name: the
    registry's pipelines and the stock test pipeline (a package a user would install)."""
    import tests.stock_pipeline
    from tokokita_etl.pipelines import every

    found = {}
    for pipeline in (*every().values(), tests.stock_pipeline.STOCK):
        module = _declaring_module(pipeline)
        package = module if sys.modules[module].__file__.endswith("__init__.py") \
            else module.rsplit(".", 1)[0]
        found[package] = pipeline.name
    return found


def layer(module: str) -> str:
    """The layer of a module of the package, by its folder (or its name at the top): a
    pipeline's package is its own layer."""
    parts = module.split(".")
    if len(parts) == 1:
        return "shared"  # the package's own __init__: a docstring and a version
    top = parts[1]
    if f"{PACKAGE}.{top}" in pipeline_packages() or top in LIBRARIES:
        return top
    if top in ("runner", "warehouse", "settings"):
        return top
    if top in COMPOSITION:
        return "composition"
    if top in SHARED:
        return "shared"
    raise AssertionError(f"{module}: a module in no layer; name its layer in this test")


def allowed(importer_layer: str) -> set[str]:
    """The layers a module of `importer_layer` may import."""
    if importer_layer in GENERIC:
        return GENERIC[importer_layer]
    if importer_layer in LIBRARIES:
        return {importer_layer} | BELOW_RUNNER
    return {importer_layer} | LIBRARIES | BELOW_RUNNER  # a pipeline's package


def _without_packages_of(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The crossings, less a package whose module the same importer is already reported for
    (importing `a.b.c` imports the package `a.b` too)."""
    return {(a, b) for a, b in pairs
            if not any(x == a and y.startswith(b + ".") for x, y in pairs)}


def crossings(graph: dict[str, dict[str, int]]) -> set[tuple[str, str]]:
    """Every import from a module of one layer into a layer it may not import."""
    found = {(importer, target) for importer, imported in graph.items()
             if layer(importer) != "composition"
             for target in imported if layer(target) not in allowed(layer(importer))}
    return _without_packages_of(found)


def plugin_imports(root: Path, folder: str = "plugins") -> dict[str, set[str]]:
    """Each file of `folder` (relative path) -> the package modules it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / folder).rglob("*.py")):
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
             for module in modules if layer(module) not in allowed("plugins")}
    return _without_packages_of(found)


def test_every_module_of_the_package_imports_only_its_own_layer_and_those_below():
    graph = import_graph(ROOT, PACKAGE)
    assert {"tokokita_etl.runner.policy", "tokokita_etl.orders.extract",
            "tokokita_etl.warehouse.database"} <= set(graph)
    found = sorted(crossings(graph) | plugin_crossings(REPO))
    assert found == [], "imports against the layers (see this test's docstring):\n" + "\n".join(
        f"{a} -> {b}" for a, b in found)


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


def test_the_pipeline_packages_come_from_the_registry_and_import_no_other_pipeline():
    """The orders, the two city reports and the stock test pipeline (a package of its own,
    outside the project's package) are each a layer; the stock pipeline imports the runner
    and below only."""
    assert pipeline_packages() == {
        f"{PACKAGE}.orders": "orders", f"{PACKAGE}.weekly": "weekly_city_report",
        f"{PACKAGE}.monthly": "monthly_city_report", "tests.stock_pipeline": "stock"}
    stock = plugin_imports(REPO, "tests/stock_pipeline")
    assert stock and all(layer(module) in BELOW_RUNNER
                         for modules in stock.values() for module in modules), stock


def test_a_pipeline_package_importing_another_is_a_crossing(tmp_path):
    write_tree(tmp_path, {
        "include/tokokita_etl/__init__.py": "",
        "include/tokokita_etl/runner/__init__.py": "",
        "include/tokokita_etl/runner/declaration.py": "",
        "include/tokokita_etl/orders/__init__.py": "",
        "include/tokokita_etl/orders/schema.py": "",
        "include/tokokita_etl/weekly/__init__.py": "",
        "include/tokokita_etl/weekly/pipeline.py":
            "from tokokita_etl.runner import declaration\n"
            "from tokokita_etl.city_report import build\n"
            "def table():\n    from tokokita_etl.orders import schema\n",
        "include/tokokita_etl/city_report/__init__.py": "",
        "include/tokokita_etl/city_report/build.py": "from tokokita_etl.weekly import pipeline\n",
    })
    graph = import_graph(tmp_path / "include", PACKAGE)
    assert crossings(graph) == {
        ("tokokita_etl.weekly.pipeline", "tokokita_etl.orders.schema"),
        ("tokokita_etl.city_report.build", "tokokita_etl.weekly.pipeline")}
