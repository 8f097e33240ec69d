"""The English description of a schedule: one sentence, and a meaning for each field."""

from __future__ import annotations

from tokokita_etl.cron.parse import CronSchedule
from tokokita_etl.cron.text import (
    _DAY_NAMES,
    _MONTH_NAMES,
    _compress,
    _days_phrase,
    _dows_phrase,
    _join,
    _ordinal,
    _plural,
    _progression,
)


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


