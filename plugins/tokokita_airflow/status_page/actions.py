"""Reprocess and Unblock: a DAG run created in this process by Airflow's own REST trigger.

The api-server's `POST /api/v2/dags/{dag_id}/dagRuns` is `trigger_dag_run` behind two
dependencies: the permission check (here `auth.CAN_ACT`, the same question to the same auth
manager) and the audit log entry (`trigger_dag_run`, committed first, as Airflow's
`action_logging` commits it whether or not the run is created). This module calls the
endpoint's function with the signed-in user, so the run is made, validated and recorded as a
REST trigger makes it, and nothing goes back over the network to this server.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from fastapi import HTTPException, Request

from tokokita_etl.runner.status import DateAction

#: what each action adds to the run's conf
CONF = {DateAction.REPROCESS: {"force": True}, DateAction.UNBLOCK: {"reset_attempts": True}}


def run_request(action: str, day: str) -> dict[str, Any]:
    """The REST trigger body of the run `action` creates for `day`: the date as its partition
    key, the action's flag as its conf (400 naming the bad field)."""
    from datetime import date

    if action not in CONF:
        raise HTTPException(400, f"Unknown action {action!r}: reprocess or unblock")
    try:
        parsed = date.fromisoformat(day)
    except ValueError:
        raise HTTPException(400, f"Bad date {day!r}: expected YYYY-MM-DD") from None
    return {"logical_date": None, "partition_key": parsed.isoformat(),
            "conf": dict(CONF[DateAction(action)])}


@cache
def _dag_bag():
    """The serialized DAGs, cached as the api-server caches them for its own routes."""
    from airflow.api_fastapi.common.dagbag import create_dag_bag

    return create_dag_bag()


def trigger(request: Request, user: Any, dag_id: str, body: dict[str, Any]) -> str:
    """Create the manual run of DAG `dag_id` of the REST trigger `body` (`run_request`) as
    `user`, as the REST trigger does; its run id."""
    from airflow.api_fastapi.core_api.datamodels.dag_run import TriggerDAGRunPostBody
    from airflow.api_fastapi.core_api.routes.public.dag_run import trigger_dag_run
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    with create_session() as session:  # the audit log entry the REST call writes
        session.add(Log(event="trigger_dag_run", owner=user.get_name(),
                        owner_display_name=user.get_name(), dag_id=dag_id,
                        extra=json.dumps({**body, "method": "POST"})))
    post = TriggerDAGRunPostBody(**body)
    try:
        with create_session() as session:
            run = trigger_dag_run(dag_id, post, _dag_bag(), user, session, request)
            return run.run_id
    except HTTPException as exc:
        raise HTTPException(exc.status_code, f"Airflow refused the run: {exc.detail}") from exc
