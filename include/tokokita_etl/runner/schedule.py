"""Dates: which partition a run processes, when a partition's run fires, command-line dates.

The decisions about a date (due, run, skip, blocked) are in `tokokita_etl.runner.policy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tokokita_etl.errors import ConfigError


@dataclass(frozen=True)
class Grain:
    """How a pipeline's dates make partitions. A partition is keyed by its first date: a
    day's by the day, an ISO week's (Monday to Sunday) by its Monday, a calendar month's by
    its first day. Dates are the pipeline's local dates: the grain needs no zone."""

    name: str
    #: what one partition is: `day`, `week` or `month`
    unit: str

    def start(self, day: date) -> date:
        """The key of the partition holding `day`."""
        if self.unit == "week":
            return day - timedelta(days=day.weekday())
        if self.unit == "month":
            return day.replace(day=1)
        return day

    def next(self, key: date) -> date:
        """The key of the partition after the one keyed `key`."""
        if self.unit == "month":
            return (key.replace(day=28) + timedelta(days=4)).replace(day=1)
        return key + timedelta(days=7 if self.unit == "week" else 1)

    def dates(self, key: date) -> tuple[date, ...]:
        """The dates of the partition keyed `key`."""
        return tuple(key + timedelta(days=n) for n in range((self.next(key) - key).days))

    def for_fire(self, local_fire_date: date) -> date:
        """The partition a run firing on `local_fire_date` processes: the last whole one
        before the fire date's own (D+1 -> D; a Monday -> the Monday before; any day of a
        month -> the month before)."""
        return self.start(self.start(local_fire_date) - timedelta(days=1))

    def nests_in(self, other: Grain) -> bool:
        """Whether every partition of this grain lies inside one partition of `other`: a day
        in its week and its month, a week in a week, a month in a month (a week may span two
        months)."""
        return self.unit == "day" or self == other

    @property
    def first_date_rule(self) -> str:
        """How a key of this grain reads, for an error: `a Monday`, `the first day of a
        month`, or `a date`."""
        return {"week": "a Monday", "month": "the first day of a month"}.get(self.unit, "a date")

    def check(self, key: date, what: str = "--date") -> date:
        """`key`, or a ConfigError naming `what` when it keys no partition of this grain."""
        if key != self.start(key):
            raise ConfigError(f"{what}: {key} is not the first date of a {self.name} "
                              f"partition ({self.first_date_rule}); its partition is "
                              f"{self.start(key)}")
        return key


DAILY, WEEKLY, MONTHLY = Grain("daily", "day"), Grain("weekly", "week"), Grain("monthly", "month")
#: the grains by name (a timetable's serialized grain, a declaration's)
GRAINS = {grain.name: grain for grain in (DAILY, WEEKLY, MONTHLY)}


def local_today(now: datetime, tz: str) -> date:
    """`now`'s calendar date in `tz` (a naive `now` is taken as wall time in `tz`)."""
    if now.tzinfo is None:
        return now.date()
    return now.astimezone(ZoneInfo(tz)).date()


def parse_run_date(text: str, now: datetime, tz: str) -> date:
    """`YYYY-MM-DD`, `yesterday` or `today` (relative to `now` in `tz`) to a date."""
    word = text.strip().lower()
    if word == "yesterday":
        return local_today(now, tz) - timedelta(days=1)
    if word == "today":
        return local_today(now, tz)
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"--date: expected YYYY-MM-DD, 'yesterday' or 'today', got {text!r}") \
            from None


def parse_now(text: str, tz: str) -> datetime:
    """An ISO 8601 instant; without an offset it is wall time in `tz`."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"--now: expected an ISO 8601 date-time, got {text!r}") from None
    value = value if value.tzinfo else value.replace(tzinfo=ZoneInfo(tz))
    # the day after `now`'s local date is computed from it (the next fire time): it must be
    # a date of the calendar
    try:
        today = local_today(value, tz)
    except OverflowError:
        today = None
    if today is None or today == date.max:
        raise ConfigError(f"--now: {text!r} is out of range: its date in {tz} must be before "
                          f"{date.max}")
    return value


def parse_partition_key(key: str) -> date:
    """The date a partition key names, in its one form `YYYY-MM-DD`; a ConfigError naming the
    canonical key otherwise. Python's `date.fromisoformat` also reads `20261102` and
    `2026-W45-1` as 2026-11-02: a run keyed so would process that date while Airflow's
    Partition Key filter, which compares the text, never finds it under `2026-11-02`."""
    try:
        day = date.fromisoformat(key)
    except ValueError:
        raise ConfigError(f"partition key {key!r} is not a date as YYYY-MM-DD") from None
    if day.isoformat() != key:
        raise ConfigError(f"partition key {key!r} is not a date as YYYY-MM-DD: "
                          f"use {day.isoformat()!r}")
    return day


def partition_date_for_run(anchor: datetime, tz: str, override: str | date | None = None,
                           grain: Grain = DAILY) -> date:
    """The partition a run processes: `grain.for_fire` of its fire time's local date (the day
    before, for a daily grain), unless given.

    `anchor` is the run's scheduled fire time (its logical date) or, for a run without one,
    the time it was queued; `override` is an explicit key (manual runs), which must be a
    `YYYY-MM-DD` date (`parse_partition_key`) keying a partition of `grain`.
    """
    if override:
        if isinstance(override, date):
            return grain.check(override, "partition_date")
        return grain.check(parse_partition_key(str(override)), "partition_date")
    if anchor.tzinfo is None:
        raise ValueError("anchor must be time-zone aware")
    return grain.for_fire(anchor.astimezone(ZoneInfo(tz)).date())


def fire_time_for_partition(key: date, cron: str, tz: str, grain: Grain = DAILY) -> datetime:
    """The scheduled fire time of the run that processes the partition keyed `key`: the
    first tick on the day after its last date (D+1 for a day, the next Monday for a week, the
    next month's first day for a month).

    The inverse of `partition_date_for_run` for scheduled runs (`30 2 * * *`: D+1 02:30 in `tz`).
    """
    from tokokita_etl.cron import next_runs

    after = grain.next(key)
    start = datetime.combine(after, time(0, 0), ZoneInfo(tz))
    runs = next_runs(cron, start - timedelta(microseconds=1), 1, tz)
    if not runs or partition_date_for_run(runs[0], tz, grain=grain) != key:
        raise ConfigError(f"cron {cron!r} does not fire on {after} in {tz}, "
                          f"so no scheduled run processes {key}")
    return runs[0]


def utc_now() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)
