"""`PartitionDateTimetable`: a cron trigger timetable whose scheduled runs carry their date.

Airflow shows a run's partition key in the run's header and in the runs list (column
"Partition Key"), so the scheduler's runs get D (`YYYY-MM-DD`) as their partition key, and
their run ids name it too (`scheduled__2026-11-02__2026-11-02T19:30:00+00:00`), which the
grid's tooltip shows. Backfill and manual runs get their key when they start
(`tokokita_airflow.listeners`): Airflow's backfill treats run infos with a partition key as
partition-only runs (a reprocessed date would get a second run with the same logical date),
and names its runs itself. `partitioned_at_runtime` is what lets a run of a cron timetable
hold a key. The optional `last_fire` ends the scheduled catch-up without a DAG end date, so
a manual run after it still has its tasks.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.trigger import CronTriggerTimetable
from airflow.utils.types import DagRunType


class PartitionDateTimetable(CronTriggerTimetable):
    """Fire on `cron` in `timezone`; the run that fires on D+1 processes D.

    :param cron: when runs fire (`30 2 * * *`).
    :param timezone: the zone of the cron expression and of partition dates.
    :param last_fire: no scheduled run fires after this instant (None: no end).
    """

    partitioned_at_runtime = True

    def __init__(self, cron: str, *, timezone: Any,
                 last_fire: datetime.datetime | None = None) -> None:
        super().__init__(cron, timezone=timezone)
        self.last_fire = last_fire

    @property
    def summary(self) -> str:
        """As the cron timetable shows itself, with the partition it processes."""
        return f"{self._expression} (processes the day before)"

    @property
    def zone_name(self) -> str:
        """The IANA name of the zone of the schedule and of partition dates."""
        return self._timezone.name

    def partition_key(self, run_after: datetime.datetime) -> str:
        """D of the run firing at `run_after`, as `YYYY-MM-DD`."""
        from tokokita_etl.schedule import partition_date_for_run

        return partition_date_for_run(run_after, self.zone_name).isoformat()

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        """The cron timetable's next run; none after `last_fire`."""
        info = super().next_dagrun_info(
            last_automated_data_interval=last_automated_data_interval, restriction=restriction)
        if info is None or (self.last_fire is not None and info.run_after > self.last_fire):
            return None
        return info

    def next_run_info_from_dag_model(self, *, dag_model: Any) -> DagRunInfo | None:
        """The run the scheduler creates next, with D as its partition key."""
        info = super().next_run_info_from_dag_model(dag_model=dag_model)
        if info is None:
            return None
        return info._replace(partition_key=self.partition_key(info.run_after))

    def next_dagrun_info_v2(self, *, last_dagrun_info: DagRunInfo | None,
                            restriction: TimeRestriction) -> DagRunInfo | None:
        """As `next_dagrun_info`, from the last run's fire time.

        Airflow gives a run with a partition key no data interval, so the last run is
        placed by its `run_after` (this timetable's data intervals are exact instants).
        """
        last = None
        if last_dagrun_info is not None:
            last = last_dagrun_info.data_interval or DataInterval.exact(last_dagrun_info.run_after)
        return self.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)

    def generate_run_id(self, *, run_type: DagRunType, run_after: Any,
                        data_interval: DataInterval | None, **extra: Any) -> str:
        """`<type>__<partition key>__<fire time>` when the run has a partition key."""
        key = extra.get("partition_key")
        if key and run_type is DagRunType.SCHEDULED:
            return run_type.generate_run_id(suffix=f"{key}__{run_after.isoformat()}")
        return super().generate_run_id(run_type=run_type, run_after=run_after,
                                       data_interval=data_interval, **extra)

    def serialize(self) -> dict[str, Any]:
        """The cron timetable's fields and `last_fire`."""
        data = super().serialize()
        data["last_fire"] = self.last_fire.isoformat() if self.last_fire else None
        return data

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> PartitionDateTimetable:
        """Rebuild from `serialize()`."""
        last_fire = data.get("last_fire")
        return cls(data["expression"], timezone=data["timezone"],
                   last_fire=datetime.datetime.fromisoformat(last_fire) if last_fire else None)
