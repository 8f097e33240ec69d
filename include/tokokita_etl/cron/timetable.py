"""Airflow's reading of a schedule: the run instants in a time zone, and croniter's fields.

Matching wall-clock times become instants by the rule of Airflow 3's `CronTriggerTimetable`
(see the package docstring): `next_runs` is the preview. `_airflow_next` is that timetable's
own step for schedules whose hour field covers every hour, where Airflow differs from the cron
times; `_croniter_warning` compares croniter's expansion (Airflow's parser) with this reader's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tokokita_etl.cron.parse import _SPECS, CronError, CronSchedule, CronWarning, parse
from tokokita_etl.cron.text import _compress, _dows_phrase

_TINY = timedelta(microseconds=1)


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (KeyError, ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise CronError(
            "bad_timezone",
            f"unknown time zone '{tz}': use an IANA name such as Asia/Makassar or UTC",
            token=tz,
        ) from exc


def _to_utc(moment: datetime, zone: ZoneInfo) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=zone)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise CronError("bad_start", f"start {moment.isoformat()} is out of range: in UTC it "
                        "falls outside the calendar (years 1 to 9999)",
                        token=moment.isoformat()) from None


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def _offsets(wall: datetime, zone: ZoneInfo) -> tuple[timedelta, timedelta]:
    # fold=0 gives the offset before a transition, fold=1 the one after (PEP 495).
    return (
        wall.replace(tzinfo=zone).utcoffset(),  # type: ignore[return-value]
        wall.replace(tzinfo=zone, fold=1).utcoffset(),
    )


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)


def _local(instant: datetime, offset: timedelta) -> datetime:
    return (instant + offset).replace(tzinfo=None)


def _offset_at(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset()  # type: ignore[return-value]


def _transition_in(lo: datetime, hi: datetime, zone: ZoneInfo) -> datetime:
    """First whole second in (lo, hi] whose offset differs from lo's (bisection)."""
    before = _offset_at(lo, zone)
    lo_s, hi_s = int(lo.timestamp()), -int(-hi.timestamp() // 1)
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if _offset_at(datetime.fromtimestamp(mid, UTC), zone) == before:
            lo_s = mid
        else:
            hi_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def _next_run(schedule: CronSchedule, current: datetime, zone: ZoneInfo) -> datetime | None:
    """The run strictly after the UTC instant `current`, as a UTC instant."""
    wall = _wall(current, zone)
    nxt = schedule.next_wall(wall)
    if nxt is None:
        return None
    before, after = _offsets(nxt, zone)
    run = _instant(nxt, before)  # normal, or a gap: the old offset shifts the time forward
    if before > after and not (schedule.every_hour and run > current):
        run = _instant(nxt, after)  # the second occurrence of a repeated time
    if schedule.every_hour:
        first, second = _offsets(wall, zone)
        if first > second and _offset_at(current, zone) == first:
            # `current` is in the first pass of a repeated hour; the second pass starts
            # at the transition and may hold an earlier run than `nxt`.
            change = _transition_in(current, current + (first - second), zone)
            start = _wall(change, zone)
            again = schedule.next_wall(start - _TINY)
            if again is not None and again < start + (first - second):
                run = min(run, _instant(again, second))
    return run


def _airflow_next(schedule: CronSchedule, current: datetime, zone: ZoneInfo) -> datetime | None:
    """What Airflow 3's CronTriggerTimetable._get_next returns (UTC), croniter aside.

    A copy of the rule, not a call: asking the timetable needs an Airflow import, which
    include/ never has (the reader runs without Airflow); tests/pure/test_cron.py compares
    this copy with the installed CronTriggerTimetable on random expressions and zones."""
    wall = _wall(current, zone)
    nxt = schedule.next_wall(wall)
    if nxt is None:
        return None
    if schedule.every_hour:
        return current + (nxt - wall)  # pendulum adds a timedelta in absolute time
    before, after = _offsets(nxt, zone)
    return _instant(nxt, before if before < after else after)


def _iter_runs(schedule: CronSchedule, start: datetime, zone: ZoneInfo, count: int):
    current = start
    for _ in range(count):
        try:
            current = _next_run(schedule, current, zone)
        except OverflowError:
            return
        if current is None:
            return
        yield current


def next_runs(expr: str, after: datetime, count: int, tz: str) -> list[datetime]:
    """The next `count` run times strictly after `after`, aware in `tz`."""
    schedule = parse(expr)
    zone = _zone(tz)
    if count < 0:
        raise ValueError("count must be 0 or more")
    return [run.astimezone(zone) for run in _iter_runs(schedule, _to_utc(after, zone), zone, count)]


def _croniter_warning(schedule: CronSchedule) -> list[CronWarning]:
    """Flag expressions that croniter, which Airflow uses, expands differently."""
    try:
        from importlib.metadata import version

        from croniter import croniter
    except ImportError:  # croniter is optional here: the reader never depends on it
        return []
    who = f"Airflow's croniter {version('croniter')}"
    try:
        expanded = croniter(schedule.expression).expanded
    except Exception as exc:  # croniter raises several unrelated exception classes
        return [CronWarning("croniter_differs", f"{who} rejects this expression: {exc}")]
    theirs = []
    for values, spec in zip(expanded, _SPECS, strict=False):
        full = range(spec.lo, spec.hi + 1)
        found = set(full) if "*" in values else {int(v) for v in values}
        theirs.append(tuple(sorted({v % 7 for v in found} if spec.key == "dow" else found)))
    ours = (schedule.minutes, schedule.hours, schedule.doms, schedule.months, schedule.dows)
    tokens = schedule.expression.split(" ")
    details = [
        f"{spec.label} '{token}' as {_compress(t, str)} (standard cron: {_compress(o, str)})"
        for spec, token, t, o in zip(_SPECS, tokens, theirs, ours, strict=True)
        if t != o and spec.key not in ("dom", "dow")
    ]
    their_or = expanded[2][0] != "*" and expanded[4][0] != "*"
    dom_ok, dow_ok = set(theirs[2]), set(theirs[4])

    def their_day(d: int, w: int) -> bool:
        return (d in dom_ok or w in dow_ok) if their_or else (d in dom_ok and w in dow_ok)

    combos = [(d, w) for d in range(1, 32) for w in range(7)]
    if any(their_day(d, w) != schedule._combine(schedule._dom_ok[d], schedule._dow_ok[w]) for d, w in combos):
        word = "OR" if their_or else "AND"
        details.append(
            f"the days as day-of-month {_compress(theirs[2], str)} {word} day-of-week "
            f"{_dows_phrase(theirs[4])} (standard cron: {_compress(schedule.doms, str)} "
            f"{'OR' if schedule.day_or else 'AND'} {_dows_phrase(schedule.dows)})"
        )
    if not details:
        return []
    return [
        CronWarning(
            "croniter_differs",
            f"{who} reads {'; '.join(details)}, so Airflow would not run this schedule at the "
            "times previewed here. Rewrite it without equal ranges like 3-3, and with each day "
            "field either '*' or free of '*'.",
        )
    ]


