"""The stage registry: name, function and summary line of each pipeline stage, in order.

Each stage reads its input from the staging folder of date D and records its output there
(`<stage>.json` beside the Parquet files), so consecutive stages can run in different
processes. The DAG, the command line and the tests take the stage list from `STAGE_NAMES`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.config import Settings
from tokokita_etl.errors import EtlError, ValidationError
from tokokita_etl.files import write_text_atomic

#: summary lines that are warnings start with this (logged at WARNING level)
WARNING_PREFIX = "[warning]"


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: what it runs and the line it prints about its result."""

    name: str
    run: Callable[[Settings, date], dict[str, Any]]
    summary: Callable[[dict[str, Any], date], list[str]]


def _extract(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.extract import extract

    staging = settings.staging_path(day)
    if staging.exists():
        shutil.rmtree(staging)  # a fresh run never sees a previous attempt's leftovers
    return extract(settings.raw_dir, day, staging).to_dict()


def _transform(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.transform import transform

    return transform(day, settings.staging_path(day), tz=settings.timezone,
                     memory_limit=settings.duckdb_memory_limit).to_dict()


def _load(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.load import load
    from tokokita_etl.warehouse import Warehouse

    warehouse = Warehouse.from_settings(settings)
    return load(warehouse, day, settings.staging_path(day), settings.quarantine_path(day)).to_dict()


def _validate(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.policy import volume_warnings
    from tokokita_etl.state import state_store
    from tokokita_etl.validate import validate
    from tokokita_etl.warehouse import Warehouse

    warehouse = Warehouse.from_settings(settings)
    conflicts = read_stage(settings, day, "load")["conflicts"]
    result = validate(warehouse, day, settings.staging_path(day), settings.gold_dir,
                      [c["line"] for c in conflicts]).to_dict()
    warnings = volume_warnings(state_store(settings).read(), day, result["fact_rows"],
                               settings.volume_min_share)
    if warnings and settings.volume_check == "fail":
        raise ValidationError(f"validation failed for {day}: {'; '.join(warnings)} "
                              "(volume_check=fail)")
    result["warnings"] = warnings
    return result


def _publish_gold(settings: Settings, day: date) -> dict[str, Any]:
    from tokokita_etl.gold import publish_gold

    read_stage(settings, day, "validate")  # only a validated run may publish
    return {"gold": str(publish_gold(settings.gold_dir, day))}


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
    started = time.perf_counter()
    result = spec.run(settings, day)
    result["duration_ms"] = round((time.perf_counter() - started) * 1000)
    write_text_atomic(stage_file(settings, day, stage), json.dumps(result, indent=1) + "\n")
    return result, spec.summary(result, day)


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
