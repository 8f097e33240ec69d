"""A city report's four stages and the lines each prints about its result.

Each is a module function of the report, the settings and the partition's key, given to the
declaration with its report bound (`stages`); `collect` reads the orders' results, the later
stages read its record from the partition's staging folder (`runner.staging`).
"""

from __future__ import annotations

from datetime import date
from functools import partial
from typing import Any

from tokokita_etl.city_report import CityReport
from tokokita_etl.errors import NoInputError
from tokokita_etl.runner.declaration import Gold, Stage
from tokokita_etl.runner.publish import publish, staged_path
from tokokita_etl.runner.settings import PipelineSettings
from tokokita_etl.runner.staging import drop_staged, read_stage
from tokokita_etl.storage import Location


def gold_location(report: CityReport, settings: PipelineSettings, key: date) -> Location:
    """Where the partition's gold file is published."""
    return Gold(report.gold_name).path(settings, key)


def collect_stage(report: CityReport, settings: PipelineSettings, key: date) -> dict[str, Any]:
    from tokokita_etl.city_report.build import collect
    from tokokita_etl.city_report.inputs import DAILY_SUMMARIES
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.runner.upstream import recorded_inputs
    from tokokita_etl.warehouse.database import Warehouse

    drop_staged(settings, key)  # a fresh run never sees a previous attempt's leftovers
    expected = recorded_inputs(DAILY_SUMMARIES, state_store(settings.upstream).read(),
                               report.grain.dates(key))
    if not any(found["checksum"] for found in expected.values()):
        # the gate refuses such a partition (`UpstreamInputs.no_input`); a stage run on its
        # own must not build an empty report either
        raise NoInputError(f"{report.of(key)} has no input: none of its {len(expected)} "
                           "orders dates has a success; nothing is built and no report is "
                           "published")
    found = collect(report, Warehouse.from_settings(settings), key, expected)
    return {"rows": found.rows, "built_from": expected, "daily_rows": found.daily_rows,
            "days": found.days, "missing": found.missing}


def load_stage(report: CityReport, settings: PipelineSettings, key: date) -> dict[str, Any]:
    from tokokita_etl.city_report.build import replace_partition
    from tokokita_etl.runner.identity import WAREHOUSE
    from tokokita_etl.warehouse.database import Warehouse

    rows = read_stage(settings, key, "collect")["rows"]
    identity = replace_partition(report, Warehouse.from_settings(settings), key, rows)
    return {"rows": len(rows), WAREHOUSE: identity}


def validate_stage(report: CityReport, settings: PipelineSettings, key: date) -> dict[str, Any]:
    from tokokita_etl.city_report.build import validate_partition, write_gold
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.warehouse.database import Warehouse

    collected = read_stage(settings, key, "collect")
    orders = state_store(settings.upstream).read()
    totals = {day: orders.entry(date.fromisoformat(day))
              for day, found in collected["built_from"].items() if found["checksum"]}
    result = validate_partition(report, Warehouse.from_settings(settings), key,
                                collected["rows"], totals)
    write_gold(report, staged_path(settings, key, report.gold_name(key)), result.pop("held"))
    return result


def publish_gold_stage(report: CityReport, settings: PipelineSettings, key: date) -> dict[str, Any]:
    rows = read_stage(settings, key, "validate")["rows"]  # only a validated partition
    staged = staged_path(settings, key, report.gold_name(key))
    target = publish(staged, gold_location(report, settings, key), report.of(key))
    return {"gold": str(target), "rows": rows}


def missing_days(built_from: dict[str, Any]) -> str:
    """`N missing` and, when there are some, which: `2 missing: 2026-11-05, 2026-11-06`."""
    days = [day for day, found in sorted(built_from.items()) if not found.get("checksum")]
    return f"{len(days)} missing" + (f": {', '.join(days)}" if days else "")


def collect_lines(report: CityReport, result: dict[str, Any], key: date) -> list[str]:
    return [f"[collect] {report.grain.unit} of {key}: {result['daily_rows']} daily summary "
            f"rows of {result['days']} done dates ({missing_days(result['built_from'])}) -> "
            f"{len(result['rows'])} kota"]


def load_lines(report: CityReport, result: dict[str, Any], key: date) -> list[str]:
    return [f"[load] {report.table_name} {key}: {result['rows']} rows replaced"]


def validate_lines(report: CityReport, result: dict[str, Any], key: date) -> list[str]:
    return [f"[validate] {'OK' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}"
            for c in result["checks"]]


def publish_lines(report: CityReport, result: dict[str, Any], key: date) -> list[str]:
    return [f"[gold] {result['gold']}"]


def stages(report: CityReport) -> tuple[Stage, ...]:
    """The report's stages, in order, each bound to `report`."""
    return (
        Stage("collect", partial(collect_stage, report), partial(collect_lines, report)),
        Stage("load", partial(load_stage, report), partial(load_lines, report),
              changes_stores=True),
        Stage("validate", partial(validate_stage, report), partial(validate_lines, report),
              changes_stores=True),
        Stage("publish_gold", partial(publish_gold_stage, report),
              partial(publish_lines, report), changes_stores=True),
    )
