"""Airflow for tests: a throw-away AIRFLOW_HOME with SQLite metadata, set before airflow is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# A pytest-xdist worker (`make check` runs two) inherits the environment of the process that
# started it, where this module has already set a home: each worker makes and sets its own,
# which the processes it starts (PYTEST_XDIST_WORKER inherited) keep.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_WORKER = _WORKER if _WORKER and os.environ.get("TOKOKITA_TEST_AIRFLOW_WORKER") != _WORKER else None
_base = os.environ.get("TOKOKITA_TEST_AIRFLOW_HOME")
if _WORKER:  # inside TOKOKITA_TEST_AIRFLOW_HOME when set
    _home = tempfile.mkdtemp(prefix=f"tokokita-airflow-{_WORKER}-", dir=_base)
    os.environ["TOKOKITA_TEST_AIRFLOW_WORKER"] = _WORKER
else:
    _home = _base or tempfile.mkdtemp(prefix="tokokita-airflow-")
AIRFLOW_ENV = {
    "AIRFLOW_HOME": _home,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
}
for _key, _value in AIRFLOW_ENV.items():
    if _WORKER and _key in ("AIRFLOW_HOME", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        os.environ[_key] = _value
    else:
        os.environ.setdefault(_key, _value)
for _path in (REPO / "plugins", REPO / "dags"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

_migrated = False


def ensure_metadata_db() -> None:
    """Create the Airflow metadata database once per test session."""
    global _migrated
    if _migrated:
        return
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
                   check=True, capture_output=True, env={**os.environ})
    _migrated = True


def fire_time(day: str):
    """The scheduled fire time (pendulum) of the run that processes `day` (`YYYY-MM-DD`)."""
    from datetime import date

    import pendulum

    from stack.ephemeral import fire_time as fire_time_of

    return pendulum.instance(fire_time_of(date.fromisoformat(day)))


def allow_deadline_alerts_in_dag_test(monkeypatch) -> None:
    """Let `dag.test()` finish a successful run of a DAG that has a `DeadlineAlert`
    (`devtools.dag_test.deadline_alert_lookup_for_dag_test`), for the test's duration."""
    from airflow.models.deadline_alert import DeadlineAlert

    from devtools.dag_test import deadline_alert_lookup_for_dag_test

    monkeypatch.setattr(DeadlineAlert, "get_by_id", deadline_alert_lookup_for_dag_test())
