"""plugins/: what Airflow loads from the plugins folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.airflow_support import REPO

#: Airflow's own plugin loading, as a task process does it (the task SDK's plugins manager),
#: in a fresh interpreter: the plugins it found, its import errors, and the top-level modules
#: the loading added
_LOAD = """
import json, sys
before = set(sys.modules)
from airflow.sdk import plugins_manager
plugins, errors = plugins_manager._get_plugins()
added = sorted(m for m in set(sys.modules) - before if "." not in m)
print(json.dumps({"plugins": [type(p).__name__ for p in plugins], "errors": errors,
                  "added": added}))
"""


def _load_plugins(*python_flags: str) -> tuple[dict, str]:
    """`_LOAD` with the repository's plugins folder: what it printed, and all its output."""
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins")}
    result = subprocess.run([sys.executable, *python_flags, "-c", _LOAD], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stdout + result.stderr


def test_airflow_loads_the_plugin_file_alone_and_its_package_by_import():
    """Regression: Airflow executed every .py file under plugins/ as a top-level module of its
    own (`routes`, `operators`, `connections`, `__init__`, ...) in every process that loads
    plugins, each task process included: the package's modules ran twice, and bare names
    such as `retry` or `lineage` shadowed any library of that name."""
    loaded, _ = _load_plugins()
    assert "TokokitaPlugin" in loaded["plugins"]
    assert loaded["errors"] == {}
    package_files = {path.stem for path in (REPO / "plugins" / "tokokita_airflow").rglob("*.py")}
    assert package_files >= {"__init__", "operators", "routes", "connections"}
    assert "tokokita_plugin" in loaded["added"] and "tokokita_airflow" in loaded["added"]
    assert not package_files & set(loaded["added"]), loaded["added"]


def test_reading_the_plugins_folders_ignore_file_warns_of_nothing():
    """Regression: with pathspec 1.x, Airflow 3.3's reading of `.airflowignore` logged a
    DeprecationWarning (GitWildMatchPattern) in every process that loads plugins, each
    task's log included; pathspec is pinned below 1."""
    assert (REPO / "plugins" / ".airflowignore").is_file()
    _, output = _load_plugins("-W", "default")
    assert "Warning" not in output, output[-3000:]
