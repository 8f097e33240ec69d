"""A processed partition's raw fingerprint, and whether its raw file has changed since.

A success records the fingerprint of exactly the bytes its run read (`raw` in the watermark
entry): `size`, `sha256`, and a `stamp` that is cheap to ask again (`mtime_ns:<n>` for a file,
`etag:<tag>` for an object). A look compares the stamp and the size first and reads nothing
when both are the same; otherwise it hashes the file: the same hash is a touched file, not a
change. A file that is gone is reported too. An entry without `raw` (written before fingerprints
were recorded) is never reported: its next success records one.

A change of size names the sizes; one that keeps the size (a corrected quantity) names the
content hashes (old -> new, `HASH_SHOWN` hex digits) instead of "771 -> 771 bytes". A success
of a small file (at most `LINE_DIGESTS_MAX_BYTES` and `LINE_DIGESTS_MAX_LINES`) also records a
CRC-32 of each line (`raw_lines`, 4 bytes a line, base64), and a same-size change then counts
the lines that differ, with no copy of the file kept. A larger file, or an entry without them,
shows the hashes alone.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections import Counter
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
#: the watermark field of a success that holds its small raw file's line digests
RAW_LINES = "raw_lines"
#: how many hex digits of a SHA-256 a change shows
HASH_SHOWN = 12
#: the largest file whose lines a success records digests of (a bounded, cheap second read)
LINE_DIGESTS_MAX_BYTES = 128 << 10
LINE_DIGESTS_MAX_LINES = 2048


def stamp_of_stat(stat: os.stat_result) -> str:
    """The cheap stamp of a local file."""
    return f"mtime_ns:{stat.st_mtime_ns}"


def fingerprint(size: int, sha256: str, stamp: str) -> dict[str, Any]:
    """The `raw` field of a success."""
    return {"size": size, "sha256": sha256, "stamp": stamp}


def hash_handle(handle: BinaryIO) -> str:
    """The SHA-256 of an open file from its current position to its end."""
    return hashlib.file_digest(handle, "sha256").hexdigest()


def line_digests(handle: BinaryIO) -> str | None:
    """The CRC-32 of each line of an open file (read again from its start; line ends kept,
    so any changed byte changes its line's digest), 4 bytes a line in base64; None for a
    file over `LINE_DIGESTS_MAX_BYTES` or `LINE_DIGESTS_MAX_LINES`."""
    handle.seek(0)
    data = handle.read(LINE_DIGESTS_MAX_BYTES + 1)
    if len(data) > LINE_DIGESTS_MAX_BYTES:
        return None
    lines = data.splitlines(keepends=True)
    if len(lines) > LINE_DIGESTS_MAX_LINES:
        return None
    return base64.b64encode(b"".join(zlib.crc32(line).to_bytes(4, "big") for line in lines)
                            ).decode("ascii")


def lines_differing(before: str, after: str) -> tuple[int, int]:
    """(removed, added): the lines of the file `before` described that are not in the one
    `after` describes, and the reverse, each counted as often as it occurs (moved lines are
    no change)."""
    def counted(digests: str) -> Counter[bytes]:
        raw = base64.b64decode(digests)
        return Counter(raw[n:n + 4] for n in range(0, len(raw), 4))

    old, new = counted(before), counted(after)
    return sum((old - new).values()), sum((new - old).values())


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


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class RawChange:
    """A done partition's raw file is not the one its success processed."""

    gone: bool
    recorded_size: int
    size: int | None = None
    #: the SHA-256 of the file as it is now (a changed file)
    sha256: str = ""
    #: the SHA-256 its success recorded
    recorded_sha256: str = ""
    #: (removed, added) lines (`lines_differing`), None when not counted
    lines: tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.gone:
            return "raw file gone since processed"
        if self.size != self.recorded_size:
            return f"raw changed since processed ({self.recorded_size} -> {self.size} bytes)"
        # the same size says nothing: the hashes (and the lines, when counted) are the evidence
        parts = [f"same size {self.size} bytes", f"sha256 {self.recorded_sha256[:HASH_SHOWN]} "
                                                 f"-> {self.sha256[:HASH_SHOWN]}"]
        if self.lines is not None:
            removed, added = self.lines
            changed = min(removed, added)
            counted = [f"{_plural(changed, 'line')} changed"] if changed else []
            if added > changed:
                counted.append(f"{_plural(added - changed, 'line')} added")
            if removed > changed:
                counted.append(f"{_plural(removed - changed, 'line')} removed")
            parts.append(", ".join(counted) or "the same lines in another order")
        return f"raw changed since processed ({', '.join(parts)})"


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
        return _object_change(entry, recorded, size, str(location))
    try:
        with open(Path(location), "rb") as handle:
            stat = os.fstat(handle.fileno())
            if stat.st_size == size and stamp_of_stat(stat) == recorded.get("stamp"):
                return None
            return _compared(entry, recorded, handle, stat.st_size)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return RawChange(gone=True, recorded_size=size)


def _compared(entry: Mapping[str, Any], recorded: Mapping[str, Any], handle: BinaryIO,
              now_size: int) -> RawChange | None:
    """The change of the open file `handle` from what `entry`'s success recorded, or None
    (the same bytes): its hash, and its changed lines when both sides have line digests."""
    digest = hash_handle(handle)
    if digest == recorded["sha256"]:
        return None
    before, lines = entry.get(RAW_LINES), None
    if isinstance(before, str) and before and now_size <= LINE_DIGESTS_MAX_BYTES:
        after = line_digests(handle)
        lines = lines_differing(before, after) if after is not None else None
    return RawChange(gone=False, recorded_size=int(recorded.get("size") or 0), size=now_size,
                     sha256=digest, recorded_sha256=recorded["sha256"], lines=lines)


def _object_change(entry: Mapping[str, Any], recorded: Mapping[str, Any], size: int,
                   url: str) -> RawChange | None:
    found = object_stamp(url)
    if found is None:
        return RawChange(gone=True, recorded_size=size)
    now_size, stamp = found
    if now_size == size and stamp == recorded.get("stamp"):
        return None
    fs, path = filesystem(url)
    try:
        with fs.open(path, "rb") as handle:
            return _compared(entry, recorded, handle, now_size)
    except FileNotFoundError:
        return RawChange(gone=True, recorded_size=size)


def changed_since_processed(pipeline: Pipeline, settings: Settings, entry: Mapping[str, Any],
                            day: date) -> RawChange | None:
    """`raw_change` of a date's raw file, unless `on_raw_change` is `off` (or the pipeline
    reads no raw files)."""
    if settings.on_raw_change == "off" or pipeline.raw is None:
        return None
    return raw_change(entry, pipeline.raw.path(settings, day))


def reprocess_change(pipeline: Pipeline, settings: Settings, entry: Mapping[str, Any], day: date,
                     look: Callable[[date], RawChange | None] | None = None
                     ) -> RawChange | None:
    """The change of a done date's raw file that makes it due again: only with
    `on_raw_change: reprocess` (nothing is looked at otherwise), never a file gone (its
    results stay). `look`: a date's `changed_since_processed`, when the caller keeps its
    looks."""
    if settings.on_raw_change != "reprocess" or pipeline.raw is None:
        return None
    change = changed_since_processed(pipeline, settings, entry, day) if look is None \
        else look(day)
    return None if change is None or change.gone else change


def reprocess_reasons(pipeline: Pipeline, settings: Settings, state: Watermark,
                      look: Callable[[date], RawChange | None] | None = None
                      ) -> Callable[[date], str] | None:
    """Why each done date of `state` is due again for its changed raw file (`reprocess_change`
    as text, "" for none), as `policy.due_runs` asks it; None unless `on_raw_change` is
    `reprocess` (nothing is looked at)."""
    if settings.on_raw_change != "reprocess" or pipeline.raw is None:
        return None
    return lambda day: str(reprocess_change(pipeline, settings, state.entry(day), day, look)
                           or "")
