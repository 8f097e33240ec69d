"""A pipeline's gold file, published atomically: what readers of the gold folder see is the
previous file or the new one, never a part of it.

Validate writes the checked file as a staged CSV (`write_csv` at `staged_path`): beside its
final name in a local gold folder, so publishing is a rename; in the run's working copy when
the gold folder is an object-storage URL, so publishing is one upload (put), then a look at
the object that it arrived whole (verify) before the staged copy goes.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import EtlError
from tokokita_etl.files import atomic_writer
from tokokita_etl.runner.staging import GOLD_COPY
from tokokita_etl.settings.model import Settings
from tokokita_etl.storage import Location, file_size, is_url, upload

#: the prefix of a validated gold file waiting to be published beside its final name
STAGED_PREFIX = ".staged-"


def staged_name(name: str) -> str:
    """The staged file's name of the gold file `name`."""
    return f"{STAGED_PREFIX}{name}"


def staged_path(settings: Settings, day: date, name: str) -> Path:
    """Where validate leaves the checked gold file `name` of the partition `day`: in the gold
    folder (publishing is a rename), or in the run's working copy when the gold folder is a
    URL (publishing is an upload)."""
    folder = settings.staging_path(day) / GOLD_COPY if is_url(settings.gold_dir) \
        else Path(settings.gold_dir)
    return folder / staged_name(name)


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write `header` and `rows` as a CSV (`\\n` line ends), atomically."""
    with atomic_writer(path, newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def publish(staged: Path, target: Location, what: str) -> Location:
    """Put the validated `staged` file at `target` (`what`: the partition, as an error names
    it) and return `target`: a rename on a local disk; on object storage an upload, checked
    to have arrived whole (a ConnectionError, transient, keeps the staged copy for a retry)."""
    if not staged.exists():
        raise EtlError(f"{staged}: no validated gold file to publish for {what}; run validate "
                       "first")
    if not is_url(target):
        os.replace(staged, target)
        return target
    size = staged.stat().st_size
    upload(staged, str(target))
    if (found := file_size(target)) != size:
        raise ConnectionError(f"{target}: the uploaded object holds {found} bytes, the "
                              f"validated file {size}: not published; a retry uploads it again")
    staged.unlink()
    return target
