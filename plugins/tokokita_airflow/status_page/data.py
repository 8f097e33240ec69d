"""The page's rows: each date's state (`tokokita_etl.runner.status.date_states`) with the DAG's runs."""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import cache
from typing import Any


def _airflow_runs(session, dag_id: str, settings, since: date, grain=None
                  ) -> dict[str, list[dict[str, Any]]]:
    """The runs of DAG `dag_id` by partition date D (newest first), with their failed task if
    any."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    from tokokita_airflow.runtime import flag, partition_date_of
    from tokokita_etl.errors import EtlError

    runs = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                           .order_by(DagRun.run_after.desc()).limit(1000)).all()
    # the task whose log holds a run's reason: its failed task, else the first skipped task
    # that ran (the sensor that found no file, the gate that found the date done); a task
    # skipped because an upstream one was has no log
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    if runs:
        rows = session.execute(
            select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.state)
            .where(TaskInstance.dag_id == dag_id,
                   TaskInstance.state.in_(("failed", "skipped")),
                   TaskInstance.start_date.is_not(None))
            .order_by(TaskInstance.start_date)).all()
        for run_id, task_id, state in rows:
            (failed if state == "failed" else skipped).setdefault(run_id, task_id)
    by_day: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        conf = run.conf or {}
        try:
            day = partition_date_of(run, settings.timezone, grain)
        except (EtlError, ValueError):
            continue
        if day < since:
            continue
        flags = [k for k in ("force", "reset_attempts") if flag(conf.get(k))]
        by_day.setdefault(day.isoformat(), []).append({
            "run_id": run.run_id, "run_type": str(getattr(run.run_type, "value", run.run_type)),
            "state": str(getattr(run.state, "value", run.state)), "flags": flags,
            "task": failed.get(run.run_id) or skipped.get(run.run_id, "check_watermark"),
            "failed": run.run_id in failed})
    return by_day


def warehouse_problem(pipeline) -> dict[str, str] | None:
    """Why every run of `pipeline` is refused on its warehouse, or None: `sentence`, the one
    its runs' logs end with (`outcomes.identity_refusal`, naming the Airflow connection), and
    `detail` (`status.warehouse_problem`); a state that cannot be read is the rows' error,
    not this."""
    from tokokita_airflow.connections import ConnectionProblem
    from tokokita_airflow.runtime import pipeline_settings
    from tokokita_etl.errors import EtlError
    from tokokita_etl.runner.outcomes import identity_refusal
    from tokokita_etl.runner.status import warehouse_problem as problem

    try:
        settings = pipeline_settings(pipeline)
        detail = problem(pipeline, settings)
    except (EtlError, ConnectionProblem):
        return None
    if detail is None:
        return None
    source = (f"Airflow connection {settings.warehouse_conn_id!r}"
              if settings.warehouse_conn_id else "warehouse_url")
    return {"sentence": identity_refusal(source), "detail": detail}


def status_rows(pipeline, days: int | None) -> list[dict[str, Any]]:
    """`pipeline`'s row per date, oldest first (`date_states`), each with its `airflow_runs`."""
    from airflow.utils.session import create_session
    from fastapi import HTTPException

    from tokokita_airflow.connections import ConnectionProblem, named
    from tokokita_airflow.runtime import pipeline_settings
    from tokokita_etl.errors import EtlError
    from tokokita_etl.runner.status import date_states

    @cache
    def runs() -> dict[str, list[dict[str, Any]]]:
        with create_session() as session:
            return _airflow_runs(session, pipeline.dag_id, settings, date.min, pipeline.grain)

    try:
        settings = pipeline_settings(pipeline)
        # a due date's row says whether a catch-up or a person runs it: the runs are read
        # once, when a row first asks (the watermark's errors come first)
        rows = date_states(pipeline, settings, datetime.now(UTC), days,
                           has_run=lambda day: day.isoformat() in runs())
    except (EtlError, ConnectionProblem) as exc:  # a damaged watermark, a missing connection,
        # a refused login: named, as the command line names it (never with a password)
        raise HTTPException(status_code=503, detail=str(named(exc))) from None
    by_day = runs()
    for row in rows:
        row["airflow_runs"] = by_day.get(row["date"], [])
    return rows


#: a setting the tasks read from an Airflow connection -> the setting naming that connection
FROM_CONNECTIONS = {"warehouse_url": "warehouse_conn_id", "state_url": "state_conn_id"}


def settings_rows(pipeline) -> list[dict[str, str]]:
    """`pipeline`'s effective settings as its tasks read them, each `{"setting", "value",
    "source"}` as `tokokita-etl config --pipeline NAME --json` prints them (the same
    `settings.show.shown`, credentials masked alike); a URL the tasks take from an Airflow
    connection says so as its source."""
    from fastapi import HTTPException

    from tokokita_airflow.connections import ConnectionProblem, named
    from tokokita_airflow.runtime import pipeline_settings
    from tokokita_etl.errors import EtlError
    from tokokita_etl.settings.model import REPLACE_SOURCE
    from tokokita_etl.settings.show import shown

    try:
        settings = pipeline_settings(pipeline)
    except (EtlError, ConnectionProblem) as exc:
        raise HTTPException(status_code=503, detail=str(named(exc))) from None
    rows = []
    for name, value, source in shown(settings):
        if name in FROM_CONNECTIONS and source == REPLACE_SOURCE:
            conn_id = FROM_CONNECTIONS[name]
            source = f"Airflow connection {getattr(settings, conn_id)!r} ({conn_id})"
        rows.append({"setting": name, "value": value, "source": source})
    return rows
