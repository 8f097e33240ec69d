"""The hand-over between the stages of one run: each stage's record and staged files.

Each stage reads its input from the staging folder of date D and records its output there
(`<stage>.json` beside the Parquet files), so consecutive stages can run in different
processes. When `staging_dir` is an object-storage URL the staging folder is this machine's
working copy: each stage's new files are uploaded after it, and a stage on another machine
fetches them first (`fetch_inputs`), so consecutive stages can run on different machines.
Which stages there are, and in which order, is the pipeline's (`runner.declaration`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import EtlError
from tokokita_etl.files import write_text_atomic
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.settings.layout import join
from tokokita_etl.settings.model import Settings

#: summary lines that are warnings start with this (logged at WARNING level)
WARNING_PREFIX = "[warning]"

#: subfolders of a working copy: the raw partition fetched from object storage, the
#: validated gold file and the quarantine file before they are published to theirs
RAW_COPY, GOLD_COPY, QUARANTINE_COPY = "raw", "gold", "quarantine"


def stage_file(settings: Settings, day: date, stage: str) -> Path:
    """Where `stage` records its output for `day`."""
    return settings.staging_path(day) / f"{stage}.json"


def read_stage(settings: Settings, day: date, stage: str) -> dict[str, Any]:
    """The recorded output of a finished stage (raises if the stage has not run)."""
    path = stage_file(settings, day, stage)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EtlError(f"{path}: stage {stage!r} has not run for {day}") from None


def run_stage(pipeline: Pipeline, settings: Settings, day: date, stage: str
              ) -> tuple[dict[str, Any], list[str]]:
    """Run one stage for `day`; record its output and duration; return it with its log lines."""
    spec = pipeline.stage(stage)
    started, since = time.perf_counter(), time.time_ns()
    result = spec.run(settings, day)
    result["duration_ms"] = round((time.perf_counter() - started) * 1000)
    write_text_atomic(stage_file(settings, day, stage), json.dumps(result, indent=1) + "\n")
    if url := settings.staging_url(day):
        _push(settings.staging_path(day), url, since)
    return result, spec.lines(result, day)


def _handed_over(staging: Path) -> list[Path]:
    """The files of a working copy the next stages read: the stage records and Parquet files,
    and the validated gold file (not the fetched raw copy, nor temporary files)."""
    files = [*staging.glob("*"), *(staging / GOLD_COPY).glob("*")]
    # the staged gold file's name starts with a dot too: only temporary files stay here
    return [path for path in files if path.is_file() and not path.name.endswith(".tmp")]


def _push(staging: Path, url: str, since_ns: int) -> None:
    """Upload the files of the working copy written since `since_ns` (this stage's)."""
    from tokokita_etl.storage import upload

    for path in _handed_over(staging):
        if path.stat().st_mtime_ns >= since_ns:
            upload(path, str(join(url, path.relative_to(staging).as_posix())))


def fetch_inputs(pipeline: Pipeline, settings: Settings, day: date, stage: str) -> list[str]:
    """Make the staged inputs of `stage` present here; return the stages that must run again
    first because their records are gone (`missing_inputs`).

    With a URL `staging_dir`, the files other machines handed over are fetched into this
    machine's working copy first (those it does not have yet).
    """
    if url := settings.staging_url(day):
        from tokokita_etl.storage import download, filesystem

        staging = settings.staging_path(day)
        fs, root = filesystem(url)
        try:
            found = fs.find(root, refresh=True) if hasattr(fs, "find") else []
        except FileNotFoundError:
            found = []
        for name in found:
            relative = name[len(root):].lstrip("/")
            if relative and not (staging / relative).exists():
                download(str(join(url, relative)), staging / relative)
    return missing_inputs(pipeline, settings, day, stage)


def release_working_copy(settings: Settings, day: date) -> None:
    """Remove this machine's working copy of `day` once its stage task is over (when the
    stages hand over through object storage: everything in it was uploaded, and the next
    stage may run anywhere); nothing when the staging folder is local (it is the hand-over)."""
    if settings.staging_url(day):
        shutil.rmtree(settings.staging_path(day), ignore_errors=True)


def recorded_stages(pipeline: Pipeline, settings: Settings, day: date) -> set[str]:
    """The stages with a record for `day`, here or where the stages hand over."""
    names = pipeline.stage_names
    found = {stage for stage in names if stage_file(settings, day, stage).exists()}
    if url := settings.staging_url(day):
        from tokokita_etl.storage import names as object_names

        found |= {name.removesuffix(".json") for name in object_names(url)} & set(names)
    return found


def drop_staged(settings: Settings, day: date, *names: str) -> None:
    """Remove staged files of `day` here and where the stages hand over (all when no name
    is given)."""
    staging, url = settings.staging_path(day), settings.staging_url(day)
    if names:
        for name in names:
            # NotADirectoryError: a file where the date's staging folder goes holds nothing
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                (staging / name).unlink()
    else:
        shutil.rmtree(staging, ignore_errors=True)
    if url:
        from tokokita_etl.storage import remove_file, remove_folder

        for name in names:
            remove_file(str(join(url, name)))
        if not names:
            remove_folder(url)


def missing_inputs(pipeline: Pipeline, settings: Settings, day: date, stage: str) -> list[str]:
    """The stages before `stage` that must run again because their records are gone.

    From the first upstream stage without a record to the stage before `stage`: the stages
    are deterministic, so re-running them rebuilds identical inputs (a cleared task whose
    staging folder was removed after a success, or that runs on another machine).
    """
    names = pipeline.stage_names
    upstream = names[:names.index(pipeline.stage(stage).name)]
    for position, name in enumerate(upstream):
        if not stage_file(settings, day, name).exists():
            return list(upstream[position:])
    return []


def stage_durations(pipeline: Pipeline, settings: Settings, day: date) -> dict[str, int]:
    """Per-stage milliseconds recorded so far for `day`."""
    out = {}
    for stage in pipeline.stage_names:
        path = stage_file(settings, day, stage)
        if path.exists():
            out[stage] = json.loads(path.read_text(encoding="utf-8")).get("duration_ms", 0)
    return out


def stage_records(pipeline: Pipeline, settings: Settings, day: date) -> dict[str, dict[str, Any]]:
    """Every stage's record for `day`, by stage name (each must be there: a finished run)."""
    return {name: read_stage(settings, day, name) for name in pipeline.stage_names}
