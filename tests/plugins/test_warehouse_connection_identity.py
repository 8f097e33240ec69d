"""Inside Airflow the warehouse is the `tokokita_warehouse` connection: a connection edited to
another SQLite path is refused before anything is written, in one line naming the connection."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from tests.plugins.test_operators_execute import D02, STAGES, context, entry, gate, stage
from tokokita_airflow.connections import ConnectionProblem


def test_a_warehouse_connection_edited_to_another_sqlite_path_fails_the_gate_naming_it(
        project, monkeypatch, tmp_path):
    """Bug: SQLite creates a file at any path, so a connection edited to a wrong path ran the
    date into a new, empty warehouse and succeeded."""
    first = context()
    gate().execute(first)
    for name in STAGES:
        stage(name).execute(first)
    before = entry(D02)
    wrong = tmp_path / "elsewhere" / "tokokita.db"
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
        {"conn_type": "sqlite", "host": str(wrong)}))
    with capture_logs() as logged, pytest.raises(ConnectionProblem) as refused:
        gate().execute(context(run_id="manual__2026-11-30T02:00:00+00:00", force=True))
    # the failure, Airflow's last entry in the log: one sentence, what is wrong and what to do
    assert str(refused.value) == (
        "Airflow connection 'tokokita_warehouse' is not the warehouse the watermark describes: "
        "point it at that warehouse, or after a real loss run `tokokita-etl state reconcile`")
    # the detail: the line before it
    message = logged[-1]["event"].removeprefix("Refused: ")
    assert message.startswith("Airflow connection 'tokokita_warehouse': warehouse sqlite:///")
    assert "is not the one the watermark" in message and "\n" not in message
    assert before["warehouse"]["id"] in message
    assert not wrong.parent.exists()  # no file, no folder
    assert entry(D02) == before  # no attempt, no intent
