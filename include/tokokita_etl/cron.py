"""Read a standard five-field cron expression: validate it, explain it, preview its runs.

Syntax is Vixie/Debian cron: ``minute hour day-of-month month day-of-week`` with ``*``,
lists, ranges, steps on ranges and on ``*`` (``0-30/10``), three-letter English names
(JAN-DEC, SUN-SAT, any case), 0 and 7 both Sunday, and the macros @yearly @annually
@monthly @weekly @daily @midnight @hourly.  When day-of-month and day-of-week are both
restricted (neither starts with ``*``) a day matches if *either* matches, otherwise both
must match.  Rejected, each with its own ``CronError.code``: six or seven fields
(Quartz/Spring/EventBridge), the Quartz/Jenkins extensions ``L W # ? H``, ``@reboot``, a
step on a single value (``5/15``; croniter and cronsim read it as ``5-59/15``), backward
ranges, and schedules that can never fire (``0 0 30 2 *``).

Next runs are found by walking the expanded sets (matching days, then hours, then
minutes), never minute by minute.  Wall-clock times are matched in the time zone and
turned into instants with the rule Airflow 3's ``CronTriggerTimetable`` uses
(``airflow/timetables/_cron.py``: croniter on the naive wall clock, then pendulum's
``convert`` with ``fold=1``):

* A wall time inside a DST gap runs at the same wall time shifted forward by the gap
  length, i.e. the instant it would be at the old offset (02:30 -> 03:30 in New York,
  02:15 -> 02:45 on Lord Howe Island).  The search then resumes after that shifted
  time, so other scheduled times inside (and just after) the gap are skipped.
* A wall time repeated by a DST overlap runs once, at its second (post-transition)
  occurrence -- unless croniter collapses the hour field to ``*`` (all 24 hours, where a
  ``*`` mixed into a list such as ``*,5`` does not count): then it runs at both
  occurrences (Airflow's "fold hour" fix).

This equals Airflow's output wherever every Airflow run is a time the expression matches
(tested against the installed Airflow).  For schedules whose hour field is ``*``, Airflow
moves from one run to the next by adding the naive wall-clock difference in absolute
time; across a DST change that can land on times the expression does not match
(``45 * * * *`` runs at 03:15 on Lord Howe Island, ``0 * * * 1`` on a Sunday at 23:00 in
New York).  The preview keeps the cron times and reports what Airflow actually does in
an ``airflow_dst_drift`` warning.  croniter 7, Airflow's parser, also reads some
expressions differently from Vixie cron (``3-3`` as the whole cycle, the day OR rule for
``0 0 */2 * 1``); those get a ``croniter_differs`` warning and this module follows Vixie.

A naive ``after`` is read as a wall time in the zone (``fold=0``: the first occurrence
of a repeated time).  Returned datetimes are aware, in the zone, with ``fold`` set so
that ``isoformat()`` shows the right offset; compare them as instants (``timestamp()``),
because Python compares datetimes that share a tzinfo by wall time, ignoring ``fold``.
"""

from __future__ import annotations

import argparse
import calendar
import json
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from tokokita_etl.config import DEFAULT_TIMEZONE

__all__ = [
    "CronError",
    "CronReport",
    "CronSchedule",
    "CronWarning",
    "explain",
    "format_report",
    "main",
    "next_runs",
    "parse",
]

_TINY = timedelta(microseconds=1)
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_NAMES = tuple(calendar.month_name[1:])
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February counts 29
_FIELD_KEYS = ("minute", "hour", "dom", "month", "dow")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EXTENSIONS = {
    "?": "'?' (no specific value) is a Quartz / AWS EventBridge extension; standard cron writes '*'",
    "L": "'L' (last day of the month, or last weekday) is a Quartz extension; standard "
    "cron cannot say 'last day': run on days 28-31 and exit unless tomorrow is the 1st",
    "W": "'W' (nearest weekday) is a Quartz extension; standard cron has no equivalent: "
    "run on weekdays and check the date inside the job",
    "#": "'#' (n-th weekday of the month, e.g. MON#2) is a Quartz extension; standard cron "
    "has no equivalent: run on that weekday and check the date inside the job",
    "H": "'H' (hashed value) is a Jenkins extension; write a fixed number instead",
}


class CronError(ValueError):
    """An expression, time zone or argument that cannot be read."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, token: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.token = token


@dataclass(frozen=True)
class CronWarning:
    """Something valid but surprising about a schedule."""

    code: str
    message: str


@dataclass(frozen=True)
class _Spec:
    key: str
    label: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()
    first_name: int = 0  # value of names[0]

    @property
    def allowed(self) -> str:
        text = f"{self.lo}-{self.hi}"
        if self.key == "dow":
            text += " (0 and 7 are Sunday)"
        if self.names:
            text += f" or {self.names[0]}-{self.names[-1]}"
        return text


_SPECS = (
    _Spec("minute", "minute", 0, 59),
    _Spec("hour", "hour", 0, 23),
    _Spec("dom", "day-of-month", 1, 31),
    _Spec("month", "month", 1, 12, _MONTHS, 1),
    _Spec("dow", "day-of-week", 0, 7, _DAYS, 0),
)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed expression: the expanded value sets and how the two day fields combine."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    doms: tuple[int, ...]
    months: tuple[int, ...]
    dows: tuple[int, ...]
    dom_star: bool
    dow_star: bool
    every_hour: bool  # Airflow's fold-hour switch, see _airflow_every_hour
    _dom_ok: tuple[bool, ...] = field(init=False, repr=False, compare=False)
    _month_ok: tuple[bool, ...] = field(init=False, repr=False, compare=False)
    _dow_ok: tuple[bool, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_dom_ok", tuple(d in self.doms for d in range(32)))
        object.__setattr__(self, "_month_ok", tuple(m in self.months for m in range(13)))
        object.__setattr__(self, "_dow_ok", tuple(d in self.dows for d in range(7)))

    @property
    def day_or(self) -> bool:
        """True when a day matches on day-of-month OR day-of-week (both restricted)."""
        return not (self.dom_star or self.dow_star)

    def fields(self) -> dict[str, list[int]]:
        """The expanded sets keyed minute, hour, dom, month, dow (Sunday 0)."""
        values = (self.minutes, self.hours, self.doms, self.months, self.dows)
        return {key: list(v) for key, v in zip(_FIELD_KEYS, values, strict=True)}

    def day_matches(self, day: date) -> bool:
        """Whether the schedule fires at some time on this calendar day."""
        if not self._month_ok[day.month]:
            return False
        return self._combine(self._dom_ok[day.day], self._dow_ok[(day.weekday() + 1) % 7])

    def matches(self, wall: datetime) -> bool:
        """Whether a wall-clock minute matches the expression."""
        return wall.minute in self.minutes and wall.hour in self.hours and self.day_matches(wall)

    def next_wall(self, after: datetime) -> datetime | None:
        """First matching naive wall-clock minute strictly after the naive `after`."""
        day = after.date()
        if self.day_matches(day):
            hm = self._time_after(after.hour, after.minute)
            if hm is not None:
                return datetime(day.year, day.month, day.day, *hm)
        nxt = self._next_day(day)
        if nxt is None:
            return None
        return datetime(nxt.year, nxt.month, nxt.day, self.hours[0], self.minutes[0])

    def prev_wall(self, before: datetime, earliest: date) -> datetime | None:
        """Last matching naive wall-clock minute strictly before `before`, not before `earliest`."""
        day = before.date()
        if self.day_matches(day):
            inclusive = bool(before.second or before.microsecond)
            hm = self._time_before(before.hour, before.minute, inclusive)
            if hm is not None:
                return datetime(day.year, day.month, day.day, *hm)
        while day > earliest:
            day -= timedelta(days=1)
            if self.day_matches(day):
                return datetime(day.year, day.month, day.day, self.hours[-1], self.minutes[-1])
        return None

    def _combine(self, dom_ok: bool, dow_ok: bool) -> bool:
        return (dom_ok or dow_ok) if self.day_or else (dom_ok and dow_ok)

    def _time_after(self, hour: int, minute: int) -> tuple[int, int] | None:
        hours, minutes = self.hours, self.minutes
        i = bisect_left(hours, hour)
        if i < len(hours) and hours[i] == hour:
            j = bisect_right(minutes, minute)
            if j < len(minutes):
                return hour, minutes[j]
            i += 1
        return (hours[i], minutes[0]) if i < len(hours) else None

    def _time_before(self, hour: int, minute: int, inclusive: bool) -> tuple[int, int] | None:
        hours, minutes = self.hours, self.minutes
        i = bisect_right(hours, hour) - 1
        if i >= 0 and hours[i] == hour:
            j = (bisect_right if inclusive else bisect_left)(minutes, minute) - 1
            if j >= 0:
                return hour, minutes[j]
            i -= 1
        return (hours[i], minutes[-1]) if i >= 0 else None

    def _next_day(self, day: date) -> date | None:
        year, month, start = day.year, day.month, day.day + 1
        dom_ok, dow_ok, day_or = self._dom_ok, self._dow_ok, self.day_or
        while year <= 9999:
            if self._month_ok[month]:
                ndays = calendar.monthrange(year, month)[1]
                if start <= ndays:
                    dow = (date(year, month, start).weekday() + 1) % 7
                    for d in range(start, ndays + 1):
                        if (dom_ok[d] or dow_ok[dow]) if day_or else (dom_ok[d] and dow_ok[dow]):
                            return date(year, month, d)
                        dow = dow + 1 if dow < 6 else 0
            month, start = month + 1, 1
            if month == 13:
                year, month = year + 1, 1
        return None


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


# --- parsing -------------------------------------------------------------------------


def parse(expr: str) -> CronSchedule:
    """Parse and validate a five-field expression or macro; raise CronError."""
    text = " ".join(expr.split())
    if not text:
        raise CronError("empty", "the cron expression is empty; expected 5 fields " + _LAYOUT)
    if text.startswith("@"):
        text = _expand_macro(text)
    parts = text.split(" ")
    if len(parts) in (6, 7):
        raise CronError("quartz_format", _quartz_message(parts))
    if len(parts) != 5:
        raise CronError(
            "field_count",
            f"expected 5 fields {_LAYOUT}, got {len(parts)}: '{text}'",
        )
    sets = [_parse_field(p, spec) for p, spec in zip(parts, _SPECS, strict=True)]
    parts = [p.upper() for p in parts]
    minutes, hours, doms, months, dows = sets
    schedule = CronSchedule(
        expression=" ".join(parts),
        minutes=minutes,
        hours=hours,
        doms=doms,
        months=months,
        dows=tuple(sorted({d % 7 for d in dows})),
        dom_star=parts[2].startswith("*"),
        dow_star=parts[4].startswith("*"),
        every_hour=_airflow_every_hour(parts[1]),
    )
    _check_runs(schedule)
    return schedule


_LAYOUT = "(minute hour day-of-month month day-of-week)"


def _airflow_every_hour(text: str) -> bool:
    # Airflow switches DST handling on croniter's expanded hour field being ['*']:
    # croniter collapses a field to '*' when its items number 24, and a bare '*' list
    # item counts as one item ("*,5" stays a two-item list).
    items = text.split(",")
    rest = [item for item in items if item != "*"]
    if not rest:
        return True
    return len(_parse_field(",".join(rest), _SPECS[1])) + (len(rest) < len(items)) == 24


def _expand_macro(text: str) -> str:
    name = text.lower()
    if name in _MACROS:
        return _MACROS[name]
    if name == "@reboot":
        raise CronError(
            "reboot",
            "@reboot runs once when the cron daemon starts, not on a schedule, so it has "
            "no next run; Airflow has no equivalent (use a manually triggered DAG)",
            token=name,
        )
    hint = ""
    if name == "@quarterly":
        hint = " (Airflow alone accepts @quarterly; standard cron: 0 0 1 */3 *)"
    elif name == "@once":
        hint = " (@once is an Airflow schedule, not a cron expression)"
    raise CronError(
        "unknown_macro",
        f"'{text}' is not a cron macro{hint}; known: {', '.join(_MACROS)}",
        token=text,
    )


def _quartz_message(parts: list[str]) -> str:
    n = len(parts)
    if n == 6 and "?" in (parts[2], parts[4]) and _looks_like_year(parts[5]):
        origin = "an AWS EventBridge expression (minute hour day-of-month month day-of-week year)"
    else:
        origin = (
            "a Quartz/Spring expression (seconds first"
            + (", year last)" if n == 7 else ")")
            + " or an AWS EventBridge one (year last)"
        )
    return (
        f"{n} fields: this looks like {origin}. Standard cron has 5 fields {_LAYOUT}; "
        "read as cron every field would shift by one position and fire at the wrong time, "
        "so drop the seconds (Quartz/Spring) or the year (EventBridge) field and replace "
        "'?' with '*'"
    )


def _looks_like_year(text: str) -> bool:
    return text == "*" or all(p.isdigit() and len(p) == 4 for p in text.replace("-", ",").split(","))


def _field_error(spec: _Spec, text: str, token: str, problem: str, code: str = "invalid_field"):
    where = f" in '{token}'" if token != text else ""
    return CronError(
        code,
        f"{spec.label} field '{text}': {problem}{where} (allowed {spec.allowed})",
        field=spec.key,
        token=token,
    )


def _parse_field(text: str, spec: _Spec) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise _field_error(spec, text, item, "empty list item")
        _check_extension(spec, text, item)
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()):
                raise _field_error(spec, text, item, f"step '{step_text}' is not a whole number")
            step = int(step_text)
            if step == 0:
                raise _field_error(spec, text, item, "step 0 never advances; use 1 or more")
        if base == "*":
            lo, hi = spec.lo, spec.hi
        elif "-" in base:
            first, _, last = base.partition("-")
            lo, hi = _value(spec, text, item, first), _value(spec, text, item, last)
            if lo > hi:
                hint = " (write Sunday as 7 at the end: 1-7)" if spec.key == "dow" else ""
                raise _field_error(spec, text, item, f"range {first}-{last} runs backwards{hint}")
        else:
            lo = hi = _value(spec, text, item, base)
            if slash:
                raise _field_error(
                    spec,
                    text,
                    item,
                    f"a step needs a range or '*': write {base}-{spec.hi}/{step} (or */{step})",
                )
        values.update(range(lo, hi + 1, step))
    return tuple(sorted(values))


def _value(spec: _Spec, text: str, item: str, token: str) -> int:
    if token.isascii() and token.isdigit():
        number = int(token)
        if not spec.lo <= number <= spec.hi:
            raise _field_error(spec, text, item, f"{number} is out of range")
        return number
    name = token.upper()
    if name in spec.names:
        return spec.names.index(name) + spec.first_name
    if not token:
        raise _field_error(spec, text, item, "missing number")
    if len(name) > 3 and name[:3] in spec.names:
        raise _field_error(spec, text, item, f"'{token}': use three-letter names like {name[:3]}")
    kind = {"month": "month name", "dow": "day name"}.get(spec.key)
    what = f"a number or {kind}" if kind else "a number"
    raise _field_error(spec, text, item, f"'{token}' is not {what}")


def _check_extension(spec: _Spec, text: str, item: str) -> None:
    stripped = item.upper()
    for name in _MONTHS + _DAYS:
        stripped = stripped.replace(name, "")
    for mark in ("?", "#", "L", "W", "H"):
        if mark in stripped:
            raise _field_error(spec, text, item, _EXTENSIONS[mark], code="extension")


def _check_runs(schedule: CronSchedule) -> None:
    # Every weekday occurs in every month, and over the years each (month, day) falls on
    # each weekday, so a schedule is impossible only when no allowed month has an
    # allowed day of month (day-of-week can rescue it only under the OR rule).
    if schedule.day_or:
        return
    if any(d <= _MAX_DAYS[m] for m in schedule.months for d in schedule.doms):
        return
    months = _join([_MONTH_NAMES[m - 1] for m in schedule.months])
    raise CronError(
        "never_runs",
        f"this schedule never runs: {months} never {_plural(schedule.months, 'has', 'have')} "
        f"day {_join([str(d) for d in schedule.doms], 'or')} "
        "(day-of-month field, allowed 1-31; February has at most 29 days, April, June, "
        "September and November 30)",
        field="dom",
        token=schedule.expression.split(" ")[2],
    )


# --- time zones and run times --------------------------------------------------------


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (KeyError, ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise CronError(
            "bad_timezone",
            f"unknown time zone '{tz}': use an IANA name such as Asia/Jakarta or UTC",
            token=tz,
        ) from exc


def _to_utc(moment: datetime, zone: ZoneInfo) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC)


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
    """What Airflow 3's CronTriggerTimetable._get_next returns (UTC), croniter aside."""
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


# --- warnings ------------------------------------------------------------------------


def _fmt_offset(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _fmt_instant(instant: datetime, zone: ZoneInfo) -> str:
    local = instant.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M} ({_fmt_offset(local.utcoffset())})"  # type: ignore[arg-type]


def _fmt_times(walls: list[datetime]) -> str:
    if len(walls) > 5:
        return f"the {len(walls)} times from {walls[0]:%H:%M} to {walls[-1]:%H:%M}"
    return _join([f"{w:%H:%M}" for w in walls])


def _fmt_duration(delta: timedelta) -> str:
    minutes = int(abs(delta).total_seconds()) // 60
    if minutes % 60 == 0:
        return "1 hour" if minutes == 60 else f"{minutes // 60} hours"
    return f"{minutes} minutes"


def _join(items: list[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _plural(items, one: str, many: str) -> str:
    return one if len(items) == 1 else many


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
        f"{start:%Y-%m-%d}: clocks in {tz} jump from {start:%H:%M} to {end:%H:%M}, so "
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
        f"{start:%Y-%m-%d}: clocks in {tz} go back from {end:%H:%M} to {start:%H:%M}, so "
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
            f"{when:%Y-%m-%d}: for a schedule whose hour field covers every hour, Airflow's "
            "CronTriggerTimetable adds the wall-clock distance to the previous run in "
            f"absolute time, so across this clock change in {tz} it "
            f"{' and '.join(parts)}, unlike this preview.",
        )
    ]


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


# --- descriptions --------------------------------------------------------------------


def _progression(values: tuple[int, ...]) -> int | None:
    if len(values) < 3:
        return None
    step = values[1] - values[0]
    if step < 2 or any(b - a != step for a, b in pairwise(values)):
        return None
    return step


def _compress(values: tuple[int, ...], name: Callable[[int], str]) -> str:
    """'1-5, 7 and 9' style text, consecutive runs of three or more as ranges."""
    chunks, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            chunks.append(f"{name(values[i])} through {name(values[j])}")
        else:
            chunks.extend(name(v) for v in values[i : j + 1])
        i = j + 1
    return _join(chunks)


def _days_phrase(doms: tuple[int, ...]) -> str:
    step = _progression(doms)
    if step and doms[0] == 1 and doms[-1] + step > 31:
        return f"every {_ordinal(step)} day"
    return f"{_plural(doms, 'day', 'days')} {_compress(doms, str)}"


def _dows_phrase(dows: tuple[int, ...]) -> str:
    return _compress(dows, lambda d: _DAY_NAMES[d])


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _every(values: tuple[int, ...], size: int) -> int | None:
    """n when the values are exactly 0, n, 2n ... and n divides the cycle evenly."""
    if len(values) < 2 or values[0] != 0 or size % values[1]:
        return None
    return values[1] if values == tuple(range(0, size, values[1])) else None


def _time_phrase(s: CronSchedule) -> str:
    minutes, hours = s.minutes, s.hours
    every_hour = len(hours) == 24
    if len(minutes) * len(hours) <= 4 and not every_hour:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes])
    if len(minutes) == 60:
        what = "every minute"
    elif step := _every(minutes, 60):
        what = f"every {step} minutes"
    else:
        what = f"at {_plural(minutes, 'minute', 'minutes')} {_compress(minutes, str)}"
    fixed = what.startswith("at")
    if every_hour:
        return f"{what} past every hour" if fixed else what
    if step := _every(hours, 24):
        return f"{what} {'past' if fixed else 'during'} every {_ordinal(step)} hour"
    if fixed:
        return f"{what} past {_plural(hours, 'hour', 'hours')} {_compress(hours, str)}"
    if len(hours) == 1:
        return f"{what} from {hours[0]:02d}:00 through {hours[0]:02d}:59"
    return f"{what} during hours {_compress(hours, str)}"


def _day_phrase(s: CronSchedule) -> str | None:
    dom_all, dow_all = len(s.doms) == 31, len(s.dows) == 7
    if s.day_or:
        if dom_all or dow_all:
            return None
        return f"on {_days_phrase(s.doms)} of the month or on {_dows_phrase(s.dows)}"
    if dom_all and dow_all:
        return None
    if dom_all:
        return f"on {_dows_phrase(s.dows)}"
    if dow_all and len(s.months) == 1 and not _progression(s.doms):
        return f"on {_compress(s.doms, str)} {_MONTH_NAMES[s.months[0] - 1]}"
    if dow_all:
        return f"on {_days_phrase(s.doms)} of the month"
    weekdays = _join([_DAY_NAMES[d] for d in s.dows], "or")
    return f"on {_days_phrase(s.doms)} of the month when that day is a {weekdays}"


def _describe(s: CronSchedule) -> str:
    time = _time_phrase(s)
    day = _day_phrase(s)
    parts = [time]
    if day:
        parts.append(day)
    elif " past " not in time and time.startswith("at"):
        parts.append("every day")
    if len(s.months) < 12 and not (day and day.endswith(_MONTH_NAMES[s.months[0] - 1])):
        parts.append("in " + _compress(s.months, lambda m: _MONTH_NAMES[m - 1]))
    sentence = " ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def _field_meaning(key: str, values: list[int]) -> str:
    full = {"minute": 60, "hour": 24, "dom": 31, "month": 12, "dow": 7}[key]
    if len(values) == full:
        return {
            "minute": "every minute",
            "hour": "every hour",
            "dom": "every day of the month",
            "month": "every month",
            "dow": "every day of the week",
        }[key]
    vals = tuple(values)
    if key == "month":
        return _compress(vals, lambda m: _MONTH_NAMES[m - 1])
    if key == "dow":
        return _dows_phrase(vals)
    label = {"minute": "minute", "hour": "hour", "dom": "day"}[key]
    text = f"{label if len(vals) == 1 else label + 's'} {_compress(vals, str)}"
    step = _progression(vals)
    return f"every {_ordinal(step)} {label}: {text}" if step else text


# --- report --------------------------------------------------------------------------


def explain(expr: str, *, after: datetime, count: int = 6,
            tz: str = DEFAULT_TIMEZONE) -> CronReport:
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
        lines.append(f"  {run:%a %Y-%m-%d %H:%M} ({_fmt_offset(run.utcoffset())})")  # type: ignore[arg-type]
    return "\n".join(lines)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 1000, got '{text}'")
    return value


def main(
    argv: list[str] | None = None,
    *,
    default_tz: str = DEFAULT_TIMEZONE,
    now: Callable[[], datetime] | None = None,
) -> int:
    """Command line: print the report for EXPR; 0 when valid, 2 when not."""
    parser = argparse.ArgumentParser(
        prog="cron", description="Validate, explain and preview a five-field cron expression."
    )
    parser.add_argument("expr", nargs="+", metavar="EXPR", help="cron expression, quoted")
    parser.add_argument("--after", help="ISO 8601 start (default: now); naive means in --tz")
    parser.add_argument("--count", type=_count, default=6, help="how many runs (default 6)")
    parser.add_argument("--tz", default=default_tz, help=f"IANA time zone (default {default_tz})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return exc.code if isinstance(exc.code, int) else 2
    if args.after is None:
        after = (now or (lambda: datetime.now(UTC)))()
    else:
        try:
            after = datetime.fromisoformat(args.after)
        except ValueError:
            print(f"error: --after '{args.after}' is not an ISO 8601 date-time", file=sys.stderr)
            return 2
    try:
        report = explain(" ".join(args.expr), after=after, count=args.count, tz=args.tz)
    except CronError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_report(report, args.tz))
    return 0
