"""The stage registry: name, function and summary line of each pipeline stage, in order.

Each stage reads its input from the staging folder of date D and records its output there
(`<stage>.json` beside the Parquet files), so consecutive stages can run in different
processes. When `staging_dir` is an object-storage URL the staging folder is this machine's
working copy: each stage's new files are uploaded after it, and a stage on another machine
fetches them first (`fetch_inputs`), so consecutive stages can run on different machines.
The DAG and the command line take the stage list from `STAGE_NAMES`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import EtlError, MissingPartitionError, ValidationError
from tokokita_etl.files import write_text_atomic
from tokokita_etl.settings.layout import join, partition_path
from tokokita_etl.settings.model import Settings
from tokokita_etl.storage import is_url

#: summary lines that are warnings start with this (logged at WARNING level)
WARNING_PREFIX = "[warning]"


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: what it runs and the line it prints about its result."""

    name: str
    run: Callable[[Settings, date], dict[str, Any]]
    summary: Callable[[dict[str, Any], date], list[str]]


#: subfolders of a working copy: the raw partition fetched from object storage, the
#: validated gold file and the quarantine file before they are published to theirs
RAW_COPY, GOLD_COPY, QUARANTINE_COPY = "raw", "gold", "quarantine"


def _extract(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.extract import extract

    staging = settings.staging_path(day)
    if staging.exists():
        shutil.rmtree(staging)  # a fresh run never sees a previous attempt's leftovers
    if url := settings.staging_url(day):
        from tokokita_etl.storage import remove_folder

        remove_folder(url)
    if not is_url(settings.raw_dir):
        return extract(settings.raw_dir, day, staging).to_dict()
    return _extract_object(settings, day, staging)


def _extract_object(settings: Settings, day: date, staging: Path) -> dict[str, Any]:
    """Extract a partition that is an object: fetched whole into the working copy, then read
    by the same reader as a local file; its messages and record name the object."""
    from tokokita_etl.orders.extract import extract
    from tokokita_etl.runner.inputs import object_stamp
    from tokokita_etl.storage import download

    url, local_raw = str(partition_path(settings.raw_dir, day)), staging / RAW_COPY
    local = Path(partition_path(local_raw, day))
    # asked before the download: an object replaced in between has another tag, so the next
    # look hashes it rather than take the copy's hash for it
    found = object_stamp(url)
    try:
        download(url, local)
    except FileNotFoundError:
        raise MissingPartitionError(f"{url}: partition {day} does not exist") from None
    try:
        result = extract(local_raw, day, staging).to_dict()
        if found is not None:
            result["raw"]["stamp"] = found[1]
    except EtlError as exc:
        exc.args = (str(exc).replace(str(local), url),)
        raise
    finally:
        local.unlink(missing_ok=True)
    return {**result, "file": url}


def _transform(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.transform import transform

    return transform(day, settings.staging_path(day), tz=settings.timezone,
                     memory_limit=settings.duckdb_memory_limit).to_dict()


def _load(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.load import load
    from tokokita_etl.warehouse.database import Warehouse

    warehouse = Warehouse.from_settings(settings)
    staging, target = settings.staging_path(day), settings.quarantine_path(day)
    if not is_url(target):
        return load(warehouse, day, staging, target).to_dict()
    from tokokita_etl.storage import upload

    local = staging / QUARANTINE_COPY / Path(str(target)).name
    result = load(warehouse, day, staging, local).to_dict()
    upload(local, str(target))  # after the commit, as a local file is renamed into place
    return result


def _gold_folder(settings: Settings, day: date) -> Path:
    """Where validate leaves the checked gold file: the gold folder (publishing is a rename),
    or the working copy when the gold folder is a URL (publishing is one upload)."""
    if is_url(settings.gold_dir):
        return settings.staging_path(day) / GOLD_COPY
    return Path(settings.gold_dir)


def _validate(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.validate import validate, volume_warnings
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.warehouse.database import Warehouse

    warehouse = Warehouse.from_settings(settings)
    conflicts = read_stage(settings, day, "load")["conflicts"]
    result = validate(warehouse, day, settings.staging_path(day), _gold_folder(settings, day),
                      [c["line"] for c in conflicts]).to_dict()
    warnings = volume_warnings(state_store(settings).read(), day, result["fact_rows"],
                               settings.volume_min_share)
    if warnings and settings.volume_check == "fail":
        result["checks"].append({"name": "volume", "ok": False, "detail": "; ".join(warnings)})
        raise ValidationError(f"validation failed for {day}: {'; '.join(warnings)} "
                              "(volume_check=fail)", result={**result, "warnings": []})
    result["warnings"] = warnings
    return result


def _publish_gold(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.gold import publish_gold, staged_gold_path

    read_stage(settings, day, "validate")  # only a validated run may publish
    if not is_url(settings.gold_dir):
        return {"gold": str(publish_gold(settings.gold_dir, day))}
    from tokokita_etl.storage import upload

    staged, target = staged_gold_path(_gold_folder(settings, day), day), settings.gold_path(day)
    if not staged.exists():
        raise EtlError(f"{staged}: no validated gold file to publish for {day}; run validate "
                       "first")
    upload(staged, str(target))
    staged.unlink()
    return {"gold": str(target)}


def _extract_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[extract] {Path(result['file']).name}: {result['rows']} rows, "
            f"{result['bytes']} bytes"]


def _transform_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[transform] {result['rows']} rows -> {result['valid']} valid, "
            f"{result['karantina']} karantina, {result['duplikat']} duplikat"]


def _load_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[load] MERGE fact: {result['fact']} rows ({result['removed']} removed, "
            f"{len(result['conflicts'])} in another partition); summary {day}: "
            f"{result['summary']} rows; karantina: {result['karantina']} rows"]


def _validate_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[validate] {'OK' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}"
            for c in result["checks"]] + [f"{WARNING_PREFIX} {w}" for w in result["warnings"]]


def _publish_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[gold] {result['gold']}"]


STAGES: dict[str, Stage] = {stage.name: stage for stage in (
    Stage("extract", _extract, _extract_lines),
    Stage("transform", _transform, _transform_lines),
    Stage("load", _load, _load_lines),
    Stage("validate", _validate, _validate_lines),
    Stage("publish_gold", _publish_gold, _publish_lines),
)}
STAGE_NAMES: tuple[str, ...] = tuple(STAGES)


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


def run_stage(settings: Settings, day: date, stage: str) -> tuple[dict[str, Any], list[str]]:
    """Run one stage for `day`; record its output and duration; return it with its log lines."""
    try:
        spec = STAGES[stage]
    except KeyError:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGE_NAMES)}") from None
    started, since = time.perf_counter(), time.time_ns()
    result = spec.run(settings, day)
    result["duration_ms"] = round((time.perf_counter() - started) * 1000)
    write_text_atomic(stage_file(settings, day, stage), json.dumps(result, indent=1) + "\n")
    if url := settings.staging_url(day):
        _push(settings.staging_path(day), url, since)
    return result, spec.summary(result, day)


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


def fetch_inputs(settings: Settings, day: date, stage: str) -> list[str]:
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
    return missing_inputs(settings, day, stage)


def release_working_copy(settings: Settings, day: date) -> None:
    """Remove this machine's working copy of `day` once its stage task is over (when the
    stages hand over through object storage: everything in it was uploaded, and the next
    stage may run anywhere); nothing when the staging folder is local (it is the hand-over)."""
    if settings.staging_url(day):
        shutil.rmtree(settings.staging_path(day), ignore_errors=True)


def recorded_stages(settings: Settings, day: date) -> set[str]:
    """The stages with a record for `day`, here or where the stages hand over."""
    found = {stage for stage in STAGE_NAMES if stage_file(settings, day, stage).exists()}
    if url := settings.staging_url(day):
        from tokokita_etl.storage import names

        found |= {name.removesuffix(".json") for name in names(url)} & set(STAGE_NAMES)
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


def missing_inputs(settings: Settings, day: date, stage: str) -> list[str]:
    """The stages before `stage` that must run again because their records are gone.

    From the first upstream stage without a record to the stage before `stage`: the stages
    are deterministic, so re-running them rebuilds identical inputs (a cleared task whose
    staging folder was removed after a success, or that runs on another machine).
    """
    upstream = STAGE_NAMES[:STAGE_NAMES.index(stage)]
    for position, name in enumerate(upstream):
        if not stage_file(settings, day, name).exists():
            return list(upstream[position:])
    return []


def stage_durations(settings: Settings, day: date) -> dict[str, int]:
    """Per-stage milliseconds recorded so far for `day`."""
    out = {}
    for stage in STAGE_NAMES:
        path = stage_file(settings, day, stage)
        if path.exists():
            out[stage] = json.loads(path.read_text(encoding="utf-8")).get("duration_ms", 0)
    return out
