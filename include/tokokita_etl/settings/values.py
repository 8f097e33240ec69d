"""The rule each setting's value must follow: each raises `_rule` ("<name> <text>") or
`_problem` ("<name>: <text>"), and the annotated types the model's fields are made of.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import PlainValidator
from pydantic_core import PydanticCustomError

from tokokita_etl.cron import CronError, parse
from tokokita_etl.storage import Location

# -- the value rules: each raises `_rule` ("<name> <text>") or `_problem` ("<name>: <text>") --

def _rule(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_rule", "{text}", {"text": text})


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_problem", "{text}", {"text": text})


def _count(value: Any, maximum: int | None = None) -> int:
    """A whole number >= 1 (a YAML true or 2.5 is not one), at most `maximum`."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise _rule(f"must be an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _rule(f"must be an integer, got {value!r}") from None
    if number < 1:
        raise _rule(f"must be >= 1, got {number}")
    if maximum is not None and number > maximum:
        raise _rule(f"must be <= {maximum}, got {number}")
    return number


def _share(value: Any) -> float:
    """A number from 0 to 1."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise _rule(f"must be a number from 0 to 1, got {value!r}") from None
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise _rule(f"must be from 0 to 1, got {value!r}")
    return number


def _catchup_date(value: Any, *, optional: bool = False) -> date | None:
    """A date, or a date-time for a bound inside a day (naive: wall time in `timezone`)."""
    if optional and value in (None, ""):
        return None
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        for parse_iso in (date.fromisoformat, datetime.fromisoformat):
            try:
                return parse_iso(value.strip())
            except ValueError:
                pass
    expected = "an ISO 8601 date or date-time" + (" (or empty)" if optional else "")
    raise _rule(f"must be {expected}, got {value!r}")


def _url_folder_problem(url: str) -> str | None:
    import fsspec

    scheme = url.split("://", 1)[0]
    if scheme not in fsspec.available_protocols():
        return f"unknown storage scheme {scheme!r} in {url!r}"
    return None


def _folder(value: Any, *, urls: bool = True) -> Location:
    """A local folder (a Path) or, when `urls`, an object-storage URL (a str, no trailing /)."""
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise _rule(f"must be a non-empty path, got {value!r}")
    try:
        # the folder is written into messages, manifests and the watermark, which are UTF-8
        os.fspath(value).encode("utf-8")
    except UnicodeEncodeError:
        raise _rule(f"must be a path in UTF-8, got {value!r}") from None
    if isinstance(value, str) and "://" in value:
        if not urls:
            raise _rule(f"must be a local folder, got the URL {value!r}")
        if problem := _url_folder_problem(value):
            raise _rule(problem)
        return value.rstrip("/")
    return Path(value)


def text_rule(*, empty: bool = False, choices: tuple[str, ...] = (),
          problem: Callable[[str], str | None] | None = None) -> PlainValidator:
    """A string setting: non-empty unless `empty`, one of `choices`, no `problem`."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or not (value or empty):
            raise _rule(f"must be a non-empty string, got {value!r}")
        if value and choices and value not in choices:
            raise _rule(f"must be one of {', '.join(choices)}, got {value!r}")
        if value and problem and (found := problem(value)):
            raise _problem(found)
        return value

    return PlainValidator(check)


def cron_problem(expr: str) -> str | None:
    try:
        parse(expr)
    except CronError as exc:
        return str(exc)
    return None


#: files of the zone folder that ZoneInfo opens but that name no zone of the database (the
#: ones `zoneinfo.available_timezones` leaves out, and the host's `localtime` link); DuckDB
#: rejects them. Checked by name: `available_timezones` walks the folder, 0.05 s a call.
_NOT_ZONES = re.compile(r"(posixrules|localtime|(posix|right)/.*)", re.IGNORECASE)


def timezone_problem(name: str) -> str | None:
    if _NOT_ZONES.fullmatch(name):
        return f"unknown time zone {name!r} (a file of the zone folder, not a zone's name)"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r}"
    return None


# DuckDB's memory_limit: a number and a unit (K, KB, KiB ... T, TB, TiB) or a share of the RAM
_DUCKDB_SIZE = re.compile(r"[0-9]+(\.[0-9]+)?\s*([KMGT](i?B)?|%)", re.IGNORECASE)


def duckdb_size_problem(size: str) -> str | None:
    if _DUCKDB_SIZE.fullmatch(size.strip()):
        return None
    return f"expected a DuckDB size such as 400MB, 2GB or 1GiB, got {size!r}"


def local_time_problem(text: str) -> str | None:
    if re.fullmatch(r"[0-9]{2}:[0-9]{2}", text):
        hours, minutes = int(text[:2]), int(text[3:])
        if hours < 24 and minutes < 60:
            return None
    return f"expected a local time HH:MM (00:00 to 23:59), got {text!r}"


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return None
    return f"expected an http:// or https:// URL, got {url!r}"


#: what a notifier can be told: a run started processing its date, succeeded, failed for
#: good (or was blocked), succeeded a date whose previous outcome was a failure, found
#: nothing to build (a partition whose upstream dates are all missing), or a scheduled run
#: missed its deadline
NOTIFIER_EVENTS = ("start", "success", "failure", "recovered", "no_input", "deadline")
#: the events a configured notifier gets unless its `on` says otherwise
DEFAULT_NOTIFIER_EVENTS = ("failure", "recovered", "no_input", "deadline")


def parse_notifiers(text: str) -> list[dict[str, Any]]:
    """The `notifiers` setting: a JSON list of `{"class": "package.module.Class", "kwargs":
    {...}, "on": [events]}` (`kwargs` and `on` optional; `on` defaults to
    `DEFAULT_NOTIFIER_EVENTS`), each normalised to all three keys. ValueError names the entry
    and field that is wrong. Nothing is imported: the classes are resolved when alerting."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                         'expected a list like [{"class": "package.module.Notifier", '
                         '"kwargs": {}}]') from None
    if not isinstance(data, list):
        raise ValueError(f"must be a JSON list of notifiers, got {type(data).__name__}")
    specs = []
    for index, item in enumerate(data):
        where = f"notifier [{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object, got {json.dumps(item)}")
        if unknown := sorted(set(item) - {"class", "kwargs", "on"}):
            raise ValueError(f"{where} has unknown field(s) {', '.join(unknown)}; fields: "
                             "class, kwargs, on")
        path = item.get("class")
        if not isinstance(path, str) or "." not in path or not all(
                part.isidentifier() for part in path.split(".")):
            raise ValueError(f"{where} class must be an import path like "
                             f"package.module.Notifier, got {json.dumps(path)}")
        kwargs = item.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise ValueError(f"{where} kwargs must be an object, got {json.dumps(kwargs)}")
        events = item.get("on", list(DEFAULT_NOTIFIER_EVENTS))
        if not isinstance(events, list) or not events or any(
                event not in NOTIFIER_EVENTS for event in events):
            raise ValueError(f"{where} on must be a non-empty list of "
                             f"{', '.join(NOTIFIER_EVENTS)}, got {json.dumps(events)}")
        specs.append({"class": path, "kwargs": kwargs, "on": list(events)})
    return specs


def notifiers_problem(text: str) -> str | None:
    try:
        parse_notifiers(text)
    except ValueError as exc:
        return str(exc)
    return None


def declarations_problem(text: str) -> str | None:
    """`module:NAME[,module:NAME...]`: where more pipeline declarations are (imported when
    the registry is asked for them)."""
    for item in (part.strip() for part in text.split(",")):
        module, _, name = item.partition(":")
        if not (module and name and all(p.isidentifier() for p in module.split("."))
                and name.isidentifier()):
            return f"expected module:NAME entries separated by commas, got {item!r}"
    return None


def state_url_problem(url: str) -> str | None:
    if url == "warehouse" or urlsplit(url).scheme.split("+")[0] in ("postgresql", "postgres"):
        return None
    return f"expected empty, 'warehouse' or a postgresql:// URL, got {url!r}"


Count = Annotated[int, PlainValidator(_count)]
#: a span of dates or hours that dates and clocks are moved by: bounded so that the moved
#: date stays a date (a lookback of a million days or a claim of 10^8 hours overflowed)
MAX_DAYS = 36_600  # about a hundred years
MAX_HOURS = 8_784  # a leap year
Days = Annotated[int, PlainValidator(lambda value: _count(value, maximum=MAX_DAYS))]
Hours = Annotated[int, PlainValidator(lambda value: _count(value, maximum=MAX_HOURS))]
Share = Annotated[float, PlainValidator(_share)]
CatchupDate = Annotated[date, PlainValidator(_catchup_date)]
OptionalCatchupDate = Annotated[date | None, PlainValidator(
    lambda value: _catchup_date(value, optional=True))]
Folder = Annotated[Location, PlainValidator(_folder)]
LocalFolder = Annotated[Path, PlainValidator(lambda value: _folder(value, urls=False))]
Text = Annotated[str, text_rule()]
OptionalText = Annotated[str, text_rule(empty=True)]
HttpUrl = Annotated[str, text_rule(empty=True, problem=_url_problem)]
