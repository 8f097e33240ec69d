"""Which partition dates are due, and how run dates are named on the command line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tokokita_etl.config import partition_exists
from tokokita_etl.errors import ConfigError
from tokokita_etl.state import Watermark

DEFAULT_TZ = "Asia/Jakarta"


def local_today(now: datetime, tz: str = DEFAULT_TZ) -> date:
    """`now`'s calendar date in `tz` (a naive `now` is taken as wall time in `tz`)."""
    if now.tzinfo is None:
        return now.date()
    return now.astimezone(ZoneInfo(tz)).date()


def due_runs(
    state: Watermark,
    now: datetime,
    raw_dir: Path,
    lookback_days: int = 7,
    max_attempts: int = 3,
    *,
    tz: str = DEFAULT_TZ,
) -> list[date]:
    """Past dates inside the lookback window with a partition, no success, attempts < max."""
    today = local_today(now, tz)
    due = []
    for offset in range(1, lookback_days + 1):
        day = today - timedelta(days=offset)
        if not partition_exists(raw_dir, day):
            continue
        if state.has_success(day) or state.attempts(day) >= max_attempts:
            continue
        due.append(day)
    return sorted(due)


@dataclass(frozen=True)
class Decision:
    """What a run for one date does, decided from its watermark entry."""

    action: str  # "run", "skip" or "blocked"
    reason: str


def decide(state: Watermark, day: date, *, max_attempts: int, force: bool = False,
           reset_attempts: bool = False) -> Decision:
    """Apply the watermark rules to one date: skip if done, block at max attempts, else run.

    Max attempts stops retrying a date that keeps failing; a forced re-run of a date whose
    last run succeeded is a deliberate act and is not blocked by its attempt count.
    """
    succeeded = state.has_success(day)
    if succeeded and not force:
        return Decision("skip", f"{day} already succeeded (use force to reprocess)")
    attempts = 0 if reset_attempts else state.attempts(day)
    if attempts >= max_attempts and not succeeded:
        return Decision(
            "blocked",
            f"{day} is blocked after {attempts} attempts (max_attempts={max_attempts}) and "
            "needs manual intervention: fix the partition or the cause, then re-run with "
            "reset_attempts (CLI: --reset-attempts; Airflow: trigger with "
            '{"reset_attempts": true})',
        )
    return Decision("run", f"{day} has {attempts} of {max_attempts} attempts")


def parse_run_date(text: str, now: datetime, tz: str = DEFAULT_TZ) -> date:
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


def parse_now(text: str, tz: str = DEFAULT_TZ) -> datetime:
    """An ISO 8601 instant; without an offset it is wall time in `tz`."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"--now: expected an ISO 8601 date-time, got {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=ZoneInfo(tz))


def partition_date_for_run(anchor: datetime, tz: str = DEFAULT_TZ,
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


def outside_lookback(day: date, now: datetime, lookback_days: int, tz: str = DEFAULT_TZ) -> bool:
    """Whether `day` is older than the lookback window at `now` (due_runs would not list it)."""
    return day < local_today(now, tz) - timedelta(days=lookback_days)


def sensor_decision(*, present: bool, run_type: str, fire_time: datetime, now: datetime,
                    wait_window: timedelta) -> str:
    """`present`, `wait` (only a scheduled run inside its window) or `skip` (no file: not our job)."""
    if present:
        return "present"
    if run_type == "scheduled" and now < fire_time + wait_window:
        return "wait"
    return "skip"


def gate_decision(state: Watermark, day: date, *, run_type: str, now: datetime,
                  lookback_days: int, max_attempts: int, force: bool = False,
                  reset_attempts: bool = False, tz: str = DEFAULT_TZ) -> Decision:
    """The gate's rule for one run: the lookback applies to scheduled runs, then `decide`."""
    if run_type == "scheduled" and outside_lookback(day, now, lookback_days, tz):
        return Decision("skip", f"{day} is older than lookback_days={lookback_days}: a scheduled "
                                "catch-up does not process it (use a backfill or a manual trigger)")
    return decide(state, day, max_attempts=max_attempts, force=force,
                  reset_attempts=reset_attempts)
