"""The report on one expression: its fields, description, warnings and next runs, as data
(`explain`) and as text (`format_report`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tokokita_etl.cron.describe import _describe, _field_meaning
from tokokita_etl.cron.parse import _FIELD_KEYS, _MAX_DAYS, CronSchedule, CronWarning, parse
from tokokita_etl.cron.text import (
    _MONTH_NAMES,
    _days_phrase,
    _dows_phrase,
    _fmt_date,
    _fmt_duration,
    _fmt_instant,
    _fmt_offset,
    _fmt_times,
    _join,
    _plural,
)
from tokokita_etl.cron.timetable import (
    _TINY,
    _airflow_next,
    _croniter_warning,
    _instant,
    _iter_runs,
    _local,
    _next_run,
    _offset_at,
    _offsets,
    _to_utc,
    _transition_in,
    _wall,
    _zone,
)


@dataclass(frozen=True)
class CronReport:
    """Everything the reader says about one expression."""

    expression: str
    fields: dict[str, list[int]]
    description: str
    warnings: list[CronWarning]
    next: list[datetime]

    def to_json_dict(self) -> dict:
        """The report as plain JSON-ready data, run times in ISO 8601 with offset."""
        return {
            "expression": self.expression,
            "fields": {key: list(values) for key, values in self.fields.items()},
            "description": self.description,
            "warnings": [{"code": w.code, "message": w.message} for w in self.warnings],
            "next": [dt.isoformat() for dt in self.next],
        }


def explain(expr: str, *, after: datetime, tz: str, count: int = 6) -> CronReport:
    """Validate, describe and preview an expression, with its warnings."""
    schedule = parse(expr)
    zone = _zone(tz)
    if count < 0:
        raise ValueError("count must be 0 or more")
    start = _to_utc(after, zone)
    warnings = [_dom_dow_warning(schedule)] if schedule.day_or else []
    warnings += _month_warnings(schedule)
    warnings += _croniter_warning(schedule)
    warnings += _dst_warnings(schedule, start, zone, tz)
    return CronReport(
        expression=schedule.expression,
        fields=schedule.fields(),
        description=_describe(schedule),
        warnings=warnings,
        next=[run.astimezone(zone) for run in _iter_runs(schedule, start, zone, count)],
    )


def _matches_between(schedule: CronSchedule, start: datetime, end: datetime) -> list[datetime]:
    found = []
    wall = schedule.next_wall(start - _TINY)
    while wall is not None and wall < end:
        found.append(wall)
        wall = schedule.next_wall(wall)
    return found


def _transitions(zone: ZoneInfo, start: datetime, end: datetime):
    current, offset = start, _offset_at(start, zone)
    while current < end:
        step = min(current + timedelta(days=1), end)
        new = _offset_at(step, zone)
        if new != offset:
            yield _transition_in(current, step, zone), offset, new
        current, offset = step, new


def _dst_warnings(schedule: CronSchedule, after: datetime, zone: ZoneInfo, tz: str) -> list[CronWarning]:
    local = after.astimezone(zone)
    if local.year >= 9998:
        return []  # the calendar ends before a year has passed
    end = local.replace(year=local.year + 1, day=min(local.day, 28 if local.month == 2 else 31))
    changes = list(_transitions(zone, after, end.astimezone(UTC)))
    warnings: list[CronWarning] = []
    seen: set[tuple] = set()
    if schedule.every_hour and changes:
        # Airflow's first run after a start date is computed from that arbitrary instant.
        warnings.extend(_drift_warning(schedule, after, zone, tz, seen))
    for change, before, now in changes:
        drift = []
        if schedule.every_hour:
            last = _last_run_before(schedule, change, before, zone)
            if last is not None:
                drift = _drift_warning(schedule, last, zone, tz, seen)
        who = (
            "This preview (not Airflow, see airflow_dst_drift)"
            if drift
            else "Airflow's CronTriggerTimetable (like this preview)"
        )
        if now > before:
            warnings.extend(_gap_warning(schedule, change, before, now, zone, tz, who))
        else:
            warnings.extend(_overlap_warning(schedule, change, before, now, tz, who))
        warnings.extend(drift)
    return warnings


def _gap_warning(schedule, change, before, now, zone, tz, who) -> list[CronWarning]:
    start, end = _local(change, before), _local(change, now)
    missing = _matches_between(schedule, start, end)
    if not missing:
        return []
    run = _next_run(schedule, change - _TINY, zone)
    assert run is not None
    shifted = _wall(run, zone)
    skipped = missing[1:] + _matches_between(schedule, end, shifted)
    text = (
        f"{_fmt_date(start)}: clocks in {tz} jump from {start:%H:%M} to {end:%H:%M}, so "
        f"{_fmt_times(missing)} {_plural(missing, 'does', 'do')} not exist that day. "
        f"{who} runs {missing[0]:%H:%M} at {shifted:%H:%M} ({_fmt_offset(now)}), the "
        f"instant {missing[0]:%H:%M} would be at the old offset {_fmt_offset(before)}"
    )
    if schedule.matches(shifted):
        text += " and also a regular run time, so it runs once"
    if skipped:
        text += (
            f"; it then continues after {shifted:%H:%M}, so {_fmt_times(skipped)} "
            f"{_plural(skipped, 'is', 'are')} skipped"
        )
    return [CronWarning("dst_gap", text + ".")]


def _overlap_warning(schedule, change, before, now, tz, who) -> list[CronWarning]:
    start, end = _local(change, now), _local(change, before)
    repeated = _matches_between(schedule, start, end)
    if not repeated:
        return []
    them = "it" if len(repeated) == 1 else "each"
    text = (
        f"{_fmt_date(start)}: clocks in {tz} go back from {end:%H:%M} to {start:%H:%M}, so "
        f"{_fmt_times(repeated)} {_plural(repeated, 'happens', 'happen')} twice. "
    )
    if schedule.every_hour:
        text += (
            f"{who} runs {them} at both occurrences because the hour field covers every "
            f"hour: first at {_fmt_offset(before)}, again {_fmt_duration(before - now)} "
            f"later at {_fmt_offset(now)}."
        )
    else:
        text += (
            f"{who} runs {them} once, at the second occurrence ({_fmt_offset(now)}), "
            f"{_fmt_duration(before - now)} later than the first."
        )
    return [CronWarning("dst_overlap", text)]


def _last_run_before(schedule, change, before, zone) -> datetime | None:
    edge = _local(change, before)  # the wall clock at the change, old offset
    last = schedule.prev_wall(edge, edge.date() - timedelta(days=400))
    if last is None:
        return None
    first, second = _offsets(last, zone)
    if first <= second:
        return _instant(last, first)
    return max(t for t in (_instant(last, first), _instant(last, second)) if t < change)


def _drift_warning(schedule, start, zone, tz, seen) -> list[CronWarning]:
    """Compare Airflow's delta arithmetic with the preview for a few runs after `start`."""
    ours, airflow = [], []
    a: datetime | None = start
    b: datetime | None = start
    for _ in range(8):
        a = _airflow_next(schedule, a, zone) if a is not None else None
        b = _next_run(schedule, b, zone) if b is not None else None
        if a is None or b is None:
            break
        airflow.append(a)
        ours.append(b)
    split = next((i for i, (x, y) in enumerate(zip(airflow, ours, strict=True)) if x != y), None)
    if split is None:
        return []
    airflow, ours = airflow[split:], ours[split:]
    ours_set, airflow_set = set(ours), set(airflow)
    merge = next((t for t in airflow if t in ours_set), None)
    limit = merge if merge is not None else min(airflow[-1], ours[-1])
    extra = tuple(t for t in airflow if t < limit and t not in ours_set)
    missed = tuple(t for t in ours if t < limit and t not in airflow_set)
    if (not extra and not missed) or (extra, missed) in seen:
        return []
    seen.add((extra, missed))
    when = min(extra + missed).astimezone(zone)
    parts = []
    if extra:
        parts.append("runs at " + _join([_fmt_instant(t, zone) for t in extra]))
    if missed:
        parts.append("does not run at " + _join([_fmt_instant(t, zone) for t in missed]))
    return [
        CronWarning(
            "airflow_dst_drift",
            f"{_fmt_date(when)}: for a schedule whose hour field covers every hour, Airflow's "
            "CronTriggerTimetable adds the wall-clock distance to the previous run in "
            f"absolute time, so across this clock change in {tz} it "
            f"{' and '.join(parts)}, unlike this preview.",
        )
    ]


def _month_warnings(schedule: CronSchedule) -> list[CronWarning]:
    if schedule.day_or or min(schedule.doms) <= 28:
        return []
    first = min(schedule.doms)
    if first == 29 and all(m == 2 or first > _MAX_DAYS[m] for m in schedule.months):
        return [
            CronWarning(
                "leap_day_only",
                "this schedule can only fire on 29 February, so it runs only in leap "
                "years (about once every four years)",
            )
        ]
    never = [_MONTH_NAMES[m - 1] for m in schedule.months if first > _MAX_DAYS[m]]
    text = f"no run in months without day {first}"
    if never:
        text += f": {_join(never)} never {_plural(never, 'has', 'have')} one"
    if 2 in schedule.months and first == 29:
        text += "; February only in leap years"
    return [CronWarning("skips_months", text)]


def _dom_dow_warning(schedule: CronSchedule) -> CronWarning:
    dom, dow = schedule.expression.split(" ")[2], schedule.expression.split(" ")[4]
    return CronWarning(
        "dom_dow_or",
        f"day-of-month '{dom}' and day-of-week '{dow}' are both restricted, so cron runs on "
        f"{_days_phrase(schedule.doms)} of the month OR on {_dows_phrase(schedule.dows)}, not "
        "only when both match. Make one of them '*' to use the other alone; to require both, "
        "schedule one and check the other inside the job.",
    )


_LABELS = ("minute", "hour", "day of month", "month", "day of week")


def format_report(report: CronReport, tz: str) -> str:
    """The report as human-readable text."""
    lines = [f"Expression:  {report.expression}", "Fields:"]
    tokens = report.expression.split(" ")
    width = max(len(t) for t in tokens)
    for key, label, token in zip(_FIELD_KEYS, _LABELS, tokens, strict=True):
        lines.append(f"  {label:<13} {token:<{width}}  {_field_meaning(key, report.fields[key])}")
    lines.append(f"Description: {report.description}")
    if report.warnings:
        lines.append("Warnings:")
        lines.extend(f"  [{w.code}] {w.message}" for w in report.warnings)
    else:
        lines.append("Warnings:    none")
    lines.append(f"Next {len(report.next)} runs ({tz}):")
    for run in report.next:
        lines.append(f"  {run:%a} {_fmt_date(run)} {run:%H:%M} ({_fmt_offset(run.utcoffset())})")  # type: ignore[arg-type]
    return "\n".join(lines)


