"""Phrasing shared by the cron reader's errors, warnings and descriptions: lists, plurals,
value ranges, names of months and days, offsets, durations."""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

_MONTH_NAMES = tuple(calendar.month_name[1:])
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _join(items: list[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _plural(items, one: str, many: str) -> str:
    return one if len(items) == 1 else many


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


def _fmt_offset(offset: timedelta) -> str:
    """`+07:00`; with its seconds where it has any (a local mean time: `+07:07:12`)."""
    seconds = int(offset.total_seconds())
    hours, rest = divmod(abs(seconds), 3600)
    minutes, rest = divmod(rest, 60)
    text = f"{'+' if seconds >= 0 else '-'}{hours:02d}:{minutes:02d}"
    return f"{text}:{rest:02d}" if rest else text


def _fmt_date(moment: date | datetime) -> str:
    """`YYYY-MM-DD` with a four-digit year (strftime's `%Y` writes year 1 as `1` here)."""
    return (moment.date() if isinstance(moment, datetime) else moment).isoformat()


def _fmt_instant(instant: datetime, zone: ZoneInfo) -> str:
    local = instant.astimezone(zone)
    return f"{_fmt_date(local)} {local:%H:%M} ({_fmt_offset(local.utcoffset())})"  # type: ignore[arg-type]


def _fmt_times(walls: list[datetime]) -> str:
    if len(walls) > 5:
        return f"the {len(walls)} times from {walls[0]:%H:%M} to {walls[-1]:%H:%M}"
    return _join([f"{w:%H:%M}" for w in walls])


def _fmt_duration(delta: timedelta) -> str:
    minutes = int(abs(delta).total_seconds()) // 60
    if minutes % 60 == 0:
        return "1 hour" if minutes == 60 else f"{minutes // 60} hours"
    return f"{minutes} minutes"


