"""The weekly city report's four stages and the lines each prints about its result.

Each is a plain function of the settings and the week's Monday; `collect` reads the orders'
results, the later stages read its record from the week's staging folder (`runner.staging`).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import EtlError, NoInputError
from tokokita_etl.runner.staging import GOLD_COPY, drop_staged, read_stage
from tokokita_etl.settings.layout import join
from tokokita_etl.settings.model import Settings
from tokokita_etl.storage import Location, is_url

#: the prefix of a validated gold file waiting to be published beside its final name
STAGED_PREFIX = ".staged-"


def gold_location(settings: Settings, week_start: date) -> Location:
    """Where the week's gold file is published."""
    from tokokita_etl.weekly.build import gold_name

    return join(settings.gold_dir, gold_name(week_start))


def _staged_gold(settings: Settings, week_start: date) -> Path:
    """Where validate leaves the checked gold file: beside its final name (publishing is a
    rename), or in the working copy when the gold folder is a URL (publishing is an upload)."""
    from tokokita_etl.weekly.build import gold_name

    folder = settings.staging_path(week_start) / GOLD_COPY if is_url(settings.gold_dir) \
        else Path(settings.gold_dir)
    return folder / f"{STAGED_PREFIX}{gold_name(week_start)}"


def collect_stage(settings: Settings, week_start: date) -> dict[str, Any]:
    from tokokita_etl.runner.schedule import WEEKLY
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.runner.upstream import recorded_inputs
    from tokokita_etl.warehouse.database import Warehouse
    from tokokita_etl.weekly.build import collect
    from tokokita_etl.weekly.inputs import DAILY_SUMMARIES

    drop_staged(settings, week_start)  # a fresh run never sees a previous attempt's leftovers
    expected = recorded_inputs(DAILY_SUMMARIES, state_store(settings.upstream).read(),
                               WEEKLY.dates(week_start))
    if not any(found["checksum"] for found in expected.values()):
        # the gate refuses such a week (`UpstreamInputs.no_input`); a stage run on its own
        # must not build an empty report either
        raise NoInputError(f"the week of {week_start} has no input: none of its 7 orders "
                           "dates has a success; nothing is built and no report is published")
    found = collect(Warehouse.from_settings(settings), week_start, expected)
    return {"rows": found.rows, "built_from": expected, "daily_rows": found.daily_rows,
            "days": found.days, "missing": found.missing}


def load_stage(settings: Settings, week_start: date) -> dict[str, Any]:
    from tokokita_etl.runner.identity import WAREHOUSE
    from tokokita_etl.warehouse.database import Warehouse
    from tokokita_etl.weekly.build import replace_week

    rows = read_stage(settings, week_start, "collect")["rows"]
    identity = replace_week(Warehouse.from_settings(settings), week_start, rows)
    return {"rows": len(rows), WAREHOUSE: identity}


def validate_stage(settings: Settings, week_start: date) -> dict[str, Any]:
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.warehouse.database import Warehouse
    from tokokita_etl.weekly.build import validate_week, write_gold

    collected = read_stage(settings, week_start, "collect")
    orders = state_store(settings.upstream).read()
    totals = {day: orders.entry(date.fromisoformat(day))
              for day, found in collected["built_from"].items() if found["checksum"]}
    result = validate_week(Warehouse.from_settings(settings), week_start, collected["rows"],
                           totals)
    write_gold(_staged_gold(settings, week_start), result.pop("held"))
    return result


def publish_gold_stage(settings: Settings, week_start: date) -> dict[str, Any]:
    rows = read_stage(settings, week_start, "validate")["rows"]  # only a validated week
    staged, target = _staged_gold(settings, week_start), gold_location(settings, week_start)
    if not staged.exists():
        raise EtlError(f"{staged}: no validated gold file to publish for the week of "
                       f"{week_start}; run validate first")
    if is_url(target):
        from tokokita_etl.storage import upload

        upload(staged, str(target))
        staged.unlink()
    else:
        staged.replace(Path(target))
    return {"gold": str(target), "rows": rows}


def missing_days(built_from: dict[str, Any]) -> str:
    """`N missing` and, when there are some, which: `2 missing: 2026-11-05, 2026-11-06`."""
    days = [day for day, found in sorted(built_from.items()) if not found.get("checksum")]
    return f"{len(days)} missing" + (f": {', '.join(days)}" if days else "")


def collect_lines(result: dict[str, Any], week_start: date) -> list[str]:
    return [f"[collect] week of {week_start}: {result['daily_rows']} daily summary rows of "
            f"{result['days']} done dates ({missing_days(result['built_from'])}) -> "
            f"{len(result['rows'])} kota"]


def load_lines(result: dict[str, Any], week_start: date) -> list[str]:
    return [f"[load] summary_mingguan {week_start}: {result['rows']} rows replaced"]


def validate_lines(result: dict[str, Any], week_start: date) -> list[str]:
    return [f"[validate] {'OK' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}"
            for c in result["checks"]]


def publish_lines(result: dict[str, Any], week_start: date) -> list[str]:
    return [f"[gold] {result['gold']}"]
