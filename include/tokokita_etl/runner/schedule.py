"""Dates: which partition a run processes, when a partition's run fires, command-line dates.

The decisions about a date (due, run, skip, blocked) are in `tokokita_etl.runner.policy`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tokokita_etl.errors import ConfigError


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


def partition_date_for_run(anchor: datetime, tz: str,
                           override: str | date | None = None) -> date:
    """The partition a run processes: the day before its fire time's local date, unless given.

    `anchor` is the run's scheduled fire time (its logical date) or, for a run without one,
    the time it was queued; `override` is an explicit `YYYY-MM-DD` (manual runs).
    """
    if override:
        if isinstance(override, date):
            return override
        try:
            return date.fromisoformat(str(override).strip())
        except ValueError:
            raise ConfigError(f"partition_date: expected YYYY-MM-DD, got {override!r}") from None
    if anchor.tzinfo is None:
        raise ValueError("anchor must be time-zone aware")
    return anchor.astimezone(ZoneInfo(tz)).date() - timedelta(days=1)


def fire_time_for_partition(day: date, cron: str, tz: str) -> datetime:
    """The scheduled fire time of the run that processes `day`: the first tick on D+1.

    The inverse of `partition_date_for_run` for scheduled runs (`30 2 * * *`: D+1 02:30 in `tz`).
    """
    from tokokita_etl.cron import next_runs

    start = datetime.combine(day + timedelta(days=1), time(0, 0), ZoneInfo(tz))
    runs = next_runs(cron, start - timedelta(microseconds=1), 1, tz)
    if not runs or partition_date_for_run(runs[0], tz) != day:
        raise ConfigError(f"cron {cron!r} does not fire on {day + timedelta(days=1)} in {tz}, "
                          f"so no scheduled run processes {day}")
    return runs[0]


def utc_now() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)
