"""Running the DAG with Airflow's `dag.test()`, for the tests and the benchmarks alike."""

from __future__ import annotations

from typing import Any


def deadline_alert_lookup_for_dag_test() -> classmethod:
    """A `DeadlineAlert.get_by_id` that lets `dag.test()` finish a successful run of a DAG
    that has a `DeadlineAlert`.

    Airflow 3.3.2's `dag.test()` serializes the DAG in memory, so its `dag.deadline` holds the
    encoded alerts where `DagRun.update_state` expects `deadline_alert` ids, and a run that
    succeeds crashes (apache/airflow#73428, fix proposed in apache/airflow#73430). Only an
    encoded alert is answered with the unsaved alert it encodes, as that fix does; an id is
    looked up as before, as the scheduler's DAG always has them.
    """
    from airflow.models.deadline_alert import DeadlineAlert

    lookup = DeadlineAlert.get_by_id

    def get_by_id(cls, deadline_alert_id: Any, **kwargs: Any) -> Any:
        if isinstance(deadline_alert_id, dict):
            encoded = deadline_alert_id.get("__var", deadline_alert_id)
            return cls(reference=encoded["reference"], interval=encoded["interval"],
                       callback_def=encoded["callback"], name=encoded.get("name"))
        return lookup(deadline_alert_id, **kwargs)

    return classmethod(get_by_id)
