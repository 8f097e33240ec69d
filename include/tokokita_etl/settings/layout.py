"""Where files are, from the folders the settings name (each pipeline names its own files in
its declaration), and the catch-up bounds as instants in the pipeline's zone.
"""

from __future__ import annotations

from datetime import date, datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

from tokokita_etl.storage import Location, file_size, is_url


def join(location: Location, name: str) -> Location:
    """`name` inside the folder `location` (a Path for a local folder, a URL for a URL)."""
    if is_url(location):
        return f"{str(location).rstrip('/')}/{name}"
    return Path(location) / name


def partition_file_exists(path: Location) -> bool:
    """Whether a partition file is there: it exists and is non-empty (a file, or an object
    when `path` is a URL)."""
    if is_url(path):
        return bool(file_size(path))
    try:
        path = Path(path)
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def catchup_bound(bound: date, tz: str) -> datetime:
    """A catch-up bound as an aware datetime: a date is its midnight in `tz`, a naive
    date-time is wall time in `tz`, an aware one keeps its instant."""
    zone = ZoneInfo(tz)
    if not isinstance(bound, datetime):
        return datetime.combine(bound, time(), tzinfo=zone)
    if bound.tzinfo is None:
        return bound.replace(tzinfo=zone)
    return bound.astimezone(zone)
