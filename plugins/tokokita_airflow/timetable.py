"""`DailyPartitionTimetable`: Airflow's `CronPartitionTimetable`, one partition per local day
(or, with `grain="weekly"`, per ISO week keyed by its Monday; with `grain="monthly"`, per
calendar month keyed by its first day).

The run that fires on D+1 (`30 2 * * *` in the pipeline's zone: D+1 02:30) processes D, so
Airflow's `CronPartitionTimetable(cron, timezone=..., run_offset=-1, key_format="%Y-%m-%d")`
is the base: every run carries D as its partition key from its creation (scheduled, backfill,
and a manual run given the key in the trigger form), Airflow's backfill walks partition
dates, clear by partition and the runs list's Partition Key filter find a date's runs.

Three things differ from the stock timetable, each for a measured reason (docs/decisions.md):

- the partition date is D's local midnight, the instant Airflow itself gives a key it decodes
  (`resolve_partition_date`, a manual run's key) and the one its date-only bounds mean
  ("a date-only value is treated as local midnight"). The stock partition date of a 02:30
  cron is D 02:30, so `airflow backfill create --to-date D2` and a clear by partition date up
  to D2 left D2 out, and a manually triggered run of D was not found by a backfill;
- a backfill yields whole local days only, and only those whose run has fired (a date whose
  file may still be written is the scheduler's), each run at its date's fire time;
- the optional `last_fire` ends the scheduled catch-up without a DAG end date, so that a
  manual run after it still has its tasks.

`PartitionDateTimetable`, the previous name, stays registered: the DAG versions serialized
before the upgrade name it, and Airflow deserializes them to show and clear their runs.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from airflow._shared.timezones.timezone import coerce_datetime, convert_to_utc, make_aware, utcnow
from airflow.timetables.base import DagRunInfo, TimeRestriction
from airflow.timetables.trigger import CronPartitionTimetable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pendulum import DateTime

#: a partition key names its date
KEY_FORMAT = "%Y-%m-%d"


class DailyPartitionTimetable(CronPartitionTimetable):
    """Fire on `cron` in `timezone`; the run that fires on local date D+1 processes D.

    :param cron: when runs fire (`30 2 * * *`).
    :param timezone: the zone of the cron expression and of partition dates.
    :param last_fire: no scheduled run fires after this instant (None: no end).
    """

    def __init__(self, cron: str, *, timezone: Any,
                 last_fire: datetime.datetime | None = None, grain: str = "daily") -> None:
        from tokokita_etl.runner.schedule import GRAINS

        super().__init__(cron, timezone=timezone, run_offset=-1, key_format=KEY_FORMAT)
        self.last_fire = last_fire
        if grain not in GRAINS:
            raise ValueError(f"grain {grain!r}: expected one of {', '.join(GRAINS)}")
        self.grain = GRAINS[grain]

    @property
    def summary(self) -> str:
        """As the cron timetable shows itself, with the partition it processes."""
        return f"{self._expression} (processes the {self.grain.unit} " \
               "before)"

    @property
    def zone_name(self) -> str:
        """The IANA name of the zone of the schedule and of partition dates."""
        return self._timezone.name

    def _midnight(self, day: datetime.date) -> DateTime:
        """The local midnight that starts `day`, as a UTC instant."""
        return convert_to_utc(make_aware(datetime.datetime.combine(day, datetime.time()),
                                         self._timezone))

    def _get_partition_date(self, *, run_date: Any) -> DateTime:
        """The partition of the run firing at `run_date`, at its first local midnight: the
        day before its fire date (a week: the whole week before, keyed by its Monday)."""
        fire_day = coerce_datetime(run_date).in_timezone(self._timezone).date()
        return self._midnight(self.grain.for_fire(fire_day))

    def fire_time(self, day: datetime.date) -> DateTime:
        """When the run that processes the partition `day` fires: the first tick after it
        (D+1 00:00, the next Monday 00:00, when the cron does not fire in the partition that
        follows)."""
        next_midnight = self._midnight(self.grain.next(day))
        fire = self._align_to_next(next_midnight)
        if self.grain.for_fire(fire.in_timezone(self._timezone).date()) != day:
            return next_midnight
        return fire

    def iter_partition_dagrun_infos(self, *, earliest: datetime.datetime,
                                    latest: datetime.datetime) -> Iterator[DagRunInfo]:
        """One run per local day D whose midnight lies in [earliest, latest] (their wall-clock
        readings in the pipeline's zone, as Airflow reads a backfill's bounds) and whose run
        has fired, at that fire time."""
        first = self.localize_partition_datetime(earliest).in_timezone(self._timezone)
        last = self.localize_partition_datetime(latest).in_timezone(self._timezone)
        day = first.date()
        if self._midnight(day) < first:
            day += datetime.timedelta(days=1)
        if self.grain.start(day) != day:  # the first whole partition in the range
            day = self.grain.next(self.grain.start(day))
        now = utcnow()
        while self._midnight(day) <= last:
            fire = self.fire_time(day)
            if fire > now:
                return
            yield DagRunInfo(run_after=fire, data_interval=None,
                             partition_date=self._midnight(day), partition_key=day.isoformat())
            day = self.grain.next(day)

    def next_dagrun_info_v2(self, *, last_dagrun_info: DagRunInfo | None,
                            restriction: TimeRestriction) -> DagRunInfo | None:
        """The scheduler's next run, as Airflow's timetable gives it; none after `last_fire`."""
        info = super().next_dagrun_info_v2(last_dagrun_info=last_dagrun_info,
                                           restriction=restriction)
        if info is None or (self.last_fire is not None and info.run_after > self.last_fire):
            return None
        return info

    def serialize(self) -> dict[str, Any]:
        """Airflow's fields and `last_fire`."""
        data = super().serialize()
        data["last_fire"] = self.last_fire.isoformat() if self.last_fire else None
        if self.grain.unit != "day":  # a daily timetable serializes as before grains
            data["grain"] = self.grain.name
        return data

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> DailyPartitionTimetable:
        """Rebuild from `serialize()` (or from the fields `PartitionDateTimetable` wrote)."""
        from airflow._shared.timezones.timezone import parse_timezone

        last_fire = data.get("last_fire")
        return cls(data["expression"], timezone=parse_timezone(data["timezone"]),
                   last_fire=datetime.datetime.fromisoformat(last_fire) if last_fire else None,
                   grain=data.get("grain", "daily"))


class PartitionDateTimetable(DailyPartitionTimetable):
    """The timetable's name in DAG versions serialized before the upgrade to partitions."""
