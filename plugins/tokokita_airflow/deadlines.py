"""`ScheduledRunDeadline`: the DAG's deadline reference, registered by the TokoKita plugin.

Airflow evaluates a `DeadlineAlert`'s reference once, when it creates a run, and adds the
alert's interval; a reference that evaluates to None creates no deadline. This one asks
`tokokita_etl.runner.notify.run_deadline` (which runs get a deadline, and when it is) and answers
the midnight before that deadline, so that with the interval `notify.deadline_offset`
(`deadline_local_time` after midnight: 6 hours for 06:00) the deadline is exact and Airflow's
UI says `Must complete within 6 hours of midnight <the pipeline's zone>`.

A custom reference must be registered by a plugin (`AirflowPlugin.deadline_references`,
`plugins/tokokita_plugin.py`): the scheduler, the api-server and the dag-processor find the
class there by its import path when they read the serialized DAG.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.definitions.deadline import REFERENCE_TYPE_FIELD, BaseDeadlineReference

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(eq=False)
class ScheduledRunDeadline(BaseDeadlineReference):
    """The midnight (in `tz`) before a scheduled run's deadline, `deadline_local_time` on its
    fire date; None (no deadline) for any other run and for a run created after it."""

    deadline_local_time: str
    tz: str
    #: what Airflow passes to `_evaluate_with`
    required_kwargs: ClassVar[set[str]] = {"dag_id", "run_id"}

    def __post_init__(self) -> None:
        from zoneinfo import ZoneInfo

        try:
            time.fromisoformat(self.deadline_local_time)
        except ValueError:
            raise ValueError(f"ScheduledRunDeadline: deadline_local_time "
                             f"{self.deadline_local_time!r} is not HH:MM") from None
        ZoneInfo(self.tz)  # an unknown zone fails here, when the DAG is parsed

    @property
    def reference_name(self) -> str:
        """What Airflow's UI prints after the interval (`... within 6 hours of <this>`)."""
        return f"midnight {self.tz}"

    def serialize_reference(self) -> dict[str, Any]:
        return {REFERENCE_TYPE_FIELD: self.reference_name,
                "deadline_local_time": self.deadline_local_time, "tz": self.tz}

    @classmethod
    def deserialize_reference(cls, reference_data: dict[str, Any]) -> ScheduledRunDeadline:
        return cls(deadline_local_time=reference_data["deadline_local_time"],
                   tz=reference_data["tz"])

    def _evaluate_with(self, *, session: Session, dag_id: str, run_id: str,
                       **kwargs: Any) -> datetime | None:
        from airflow.models import DagRun
        from sqlalchemy import select

        from tokokita_etl.runner.notify import deadline_offset, run_deadline

        row = session.execute(select(DagRun.run_type, DagRun.logical_date, DagRun.run_after)
                              .where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
                              ).one_or_none()
        if row is None:
            return None
        run_type, logical_date, run_after = row
        local_time = time.fromisoformat(self.deadline_local_time)
        # a partitioned run has no logical date: its fire time is when it runs after
        deadline = run_deadline(str(getattr(run_type, "value", run_type)),
                                logical_date or run_after, datetime.now(UTC), local_time, self.tz)
        if deadline is None:
            return None
        return (deadline - deadline_offset(local_time)).astimezone(UTC)
