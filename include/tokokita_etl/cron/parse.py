"""Parse and validate an expression, and find its standard fire times on the wall clock.

`parse` turns a five-field expression or macro into a `CronSchedule` (the expanded value sets
and how the two day fields combine) or raises `CronError` with a code, the field and the
token; `CronSchedule.next_wall` and `prev_wall` walk the sets (matching days, then hours, then
minutes) on a naive wall clock, with no time zone.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from tokokita_etl.cron.text import _MONTH_NAMES, _join, _plural

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


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


