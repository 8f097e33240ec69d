"""The orders pipeline's five stages and the lines each prints about its result.

Each is a plain function of the settings and the partition date that reads its input from
the date's staging folder (`runner.staging`) and returns its record; the declaration
(`orders.pipeline`) puts them in order.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import EtlError, MissingPartitionError, ValidationError
from tokokita_etl.orders.contract import gold_path, partition_path, quarantine_path
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.runner.staging import (
    GOLD_COPY,
    QUARANTINE_COPY,
    RAW_COPY,
    WARNING_PREFIX,
    read_stage,
)
from tokokita_etl.storage import is_url


def extract_stage(settings: OrdersSettings, day: date) -> dict[str, Any]:
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


def _extract_object(settings: OrdersSettings, day: date, staging: Path) -> dict[str, Any]:
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


def transform_stage(settings: OrdersSettings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.transform import transform

    return transform(day, settings.staging_path(day), tz=settings.timezone,
                     memory_limit=settings.duckdb_memory_limit).to_dict()


def load_stage(settings: OrdersSettings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.load import load
    from tokokita_etl.warehouse.database import Warehouse

    warehouse = Warehouse.from_settings(settings)
    staging, target = settings.staging_path(day), quarantine_path(settings.quarantine_dir, day)
    if not is_url(target):
        return load(warehouse, day, staging, target).to_dict()
    from tokokita_etl.storage import upload

    local = staging / QUARANTINE_COPY / Path(str(target)).name
    result = load(warehouse, day, staging, local).to_dict()
    upload(local, str(target))  # after the commit, as a local file is renamed into place
    return result


def _gold_folder(settings: OrdersSettings, day: date) -> Path:
    """Where validate leaves the checked gold file: the gold folder (publishing is a rename),
    or the working copy when the gold folder is a URL (publishing is one upload)."""
    if is_url(settings.gold_dir):
        return settings.staging_path(day) / GOLD_COPY
    return Path(settings.gold_dir)


def validate_stage(settings: OrdersSettings, day: date) -> dict[str, Any]:
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


def publish_gold_stage(settings: OrdersSettings, day: date) -> dict[str, Any]:
    from tokokita_etl.orders.gold import staged_gold_path
    from tokokita_etl.runner.publish import publish

    # only a validated run may publish; the gold file has a row per summary row
    rows = read_stage(settings, day, "validate")["summary_rows"]
    staged = staged_gold_path(_gold_folder(settings, day), day)
    return {"gold": str(publish(staged, gold_path(settings.gold_dir, day), str(day))), "rows": rows}


def extract_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[extract] {Path(result['file']).name}: {result['rows']} rows, "
            f"{result['bytes']} bytes"]


def transform_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[transform] {result['rows']} rows -> {result['valid']} valid, "
            f"{result['karantina']} karantina, {result['duplikat']} duplikat"]


def load_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[load] MERGE fact: {result['fact']} rows ({result['removed']} removed, "
            f"{len(result['conflicts'])} in another partition); summary {day}: "
            f"{result['summary']} rows; karantina: {result['karantina']} rows"]


def validate_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[validate] {'OK' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}"
            for c in result["checks"]] + [f"{WARNING_PREFIX} {w}" for w in result["warnings"]]


def publish_lines(result: dict[str, Any], day: date) -> list[str]:
    return [f"[gold] {result['gold']}"]
