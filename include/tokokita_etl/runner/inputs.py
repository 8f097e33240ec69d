"""A processed partition's raw fingerprint, and whether its raw file has changed since.

A success records the fingerprint of exactly the bytes its run read (`raw` in the watermark
entry): `size`, `sha256`, and a `stamp` that is cheap to ask again (`mtime_ns:<n>` for a file,
`etag:<tag>` for an object). A look compares the stamp and the size first and reads nothing
when both are the same; otherwise it hashes the file: the same hash is a touched file, not a
change. A file that is gone is reported too. An entry without `raw` (written before fingerprints
were recorded) is never reported: its next success records one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tokokita_etl.settings.model import Settings
from tokokita_etl.storage import Location, filesystem, is_url, object_info

if TYPE_CHECKING:
    from tokokita_etl.runner.declaration import Pipeline
    from tokokita_etl.runner.watermark import Watermark

#: the watermark field of a success that holds the raw fingerprint
RAW = "raw"


def stamp_of_stat(stat: os.stat_result) -> str:
    """The cheap stamp of a local file."""
    return f"mtime_ns:{stat.st_mtime_ns}"


def fingerprint(size: int, sha256: str, stamp: str) -> dict[str, Any]:
    """The `raw` field of a success."""
    return {"size": size, "sha256": sha256, "stamp": stamp}


def hash_handle(handle: BinaryIO) -> str:
    """The SHA-256 of an open file from its current position to its end."""
    return hashlib.file_digest(handle, "sha256").hexdigest()


def file_fingerprint(handle: BinaryIO) -> dict[str, Any]:
    """The fingerprint of an open local file, read whole from the start."""
    stat = os.fstat(handle.fileno())
    handle.seek(0)
    return fingerprint(stat.st_size, hash_handle(handle), stamp_of_stat(stat))


def object_stamp(url: str) -> tuple[int, str] | None:
    """The size and `etag:` stamp of the object at `url`, None when there is none."""
    info = object_info(url)
    if info is None:
        return None
    tag = str(info.get("ETag") or info.get("etag") or "").strip('"')
    return int(info.get("size") or 0), f"etag:{tag}"


@dataclass(frozen=True)
class RawChange:
    """A done partition's raw file is not the one its success processed."""

    gone: bool
    recorded_size: int
    size: int | None = None
    #: the SHA-256 of the file as it is now (a changed file)
    sha256: str = ""

    def __str__(self) -> str:
        if self.gone:
            return "raw file gone since processed"
        return f"raw changed since processed ({self.recorded_size} -> {self.size} bytes)"


def _recorded(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    raw = entry.get(RAW)
    if isinstance(raw, Mapping) and isinstance(raw.get("sha256"), str):
        return raw
    return None


def raw_change(entry: Mapping[str, Any], location: Location) -> RawChange | None:
    """Whether the raw file at `location` differs from the one `entry`'s success recorded
    (None: the same bytes, or no fingerprint recorded)."""
    recorded = _recorded(entry)
    if recorded is None:
        return None
    size = int(recorded.get("size") or 0)
    if is_url(location):
        return _object_change(recorded, size, str(location))
    try:
        with open(Path(location), "rb") as handle:
            stat = os.fstat(handle.fileno())
            if stat.st_size == size and stamp_of_stat(stat) == recorded.get("stamp"):
                return None
            digest = hash_handle(handle)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return RawChange(gone=True, recorded_size=size)
    return None if digest == recorded["sha256"] else RawChange(gone=False, recorded_size=size,
                                                                   size=stat.st_size,
                                                                   sha256=digest)


def _object_change(recorded: Mapping[str, Any], size: int, url: str) -> RawChange | None:
    found = object_stamp(url)
    if found is None:
        return RawChange(gone=True, recorded_size=size)
    now_size, stamp = found
    if now_size == size and stamp == recorded.get("stamp"):
        return None
    fs, path = filesystem(url)
    try:
        with fs.open(path, "rb") as handle:
            digest = hash_handle(handle)
    except FileNotFoundError:
        return RawChange(gone=True, recorded_size=size)
    return None if digest == recorded["sha256"] else RawChange(gone=False, recorded_size=size,
                                                                   size=now_size, sha256=digest)


def changed_since_processed(pipeline: Pipeline, settings: Settings, entry: Mapping[str, Any],
                            day: date) -> RawChange | None:
    """`raw_change` of a date's raw file, unless `on_raw_change` is `off` (or the pipeline
    reads no raw files)."""
    if settings.on_raw_change == "off" or pipeline.raw is None:
        return None
    return raw_change(entry, pipeline.raw.path(settings, day))


def change_to_reprocess(pipeline: Pipeline, settings: Settings, entry: Mapping[str, Any],
                        day: date) -> RawChange | None:
    """With `on_raw_change: reprocess`, the change of a done date's raw file since its
    success; None otherwise (a file gone is never reprocessed: its results stay)."""
    if settings.on_raw_change != "reprocess":
        return None
    change = changed_since_processed(pipeline, settings, entry, day)
    return change if change is not None and not change.gone else None


def reason_to_reprocess(settings: Settings, change: RawChange | None) -> str:
    """Why a done date whose raw file shows `change` is to be reprocessed (`policy.decide`'s
    `inputs_changed`), or "": only with `on_raw_change: reprocess`, never for a file gone."""
    if settings.on_raw_change != "reprocess" or change is None or change.gone:
        return ""
    return str(change)


def reprocess_reason(pipeline: Pipeline, settings: Settings, entry: Mapping[str, Any],
                     day: date) -> str:
    """`reason_to_reprocess` of a done date's raw file (not looked at unless
    `on_raw_change` is `reprocess`)."""
    if settings.on_raw_change != "reprocess":
        return ""
    return reason_to_reprocess(settings, changed_since_processed(pipeline, settings, entry, day))


def raw_changed_of(pipeline: Pipeline, settings: Settings, state: Watermark,
                   look: Callable[[date], RawChange | None] | None = None
                   ) -> Callable[[date], str] | None:
    """`reprocess_reason` of a date of `state`, as `policy.due_runs` asks it; None unless
    `on_raw_change` is `reprocess` (nothing is looked at). `look`: a date's
    `changed_since_processed`, when the caller keeps its looks (the status rows look once)."""
    if settings.on_raw_change != "reprocess" or pipeline.raw is None:
        return None
    if look is None:
        return lambda day: reprocess_reason(pipeline, settings, state.entry(day), day)
    return lambda day: reason_to_reprocess(settings, look(day))
