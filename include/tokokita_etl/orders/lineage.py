"""What each stage reads and writes, as OpenLineage datasets (no Airflow, no OpenLineage
import: `tokokita_airflow.lineage` turns these into the provider's events).

Names follow the OpenLineage naming spec: a local file is namespace `file`, name its absolute
path; an object `s3://bucket/key` is namespace `s3://bucket`, name `key`; a PostgreSQL table
is namespace `postgres://host:port`, name `database.schema.table`; a SQLite table (no entry in
the spec) is namespace `sqlite://<absolute path of the database file>`, name `main.table`.

| stage | inputs | outputs |
|---|---|---|
| extract | the raw partition (rows, bytes) | |
| transform | the raw partition (rows) | |
| load | the raw partition | `fact_pesanan`, `summary_harian`, `karantina` (rows of D), |
| | | the quarantine file (rows) |
| validate | `fact_pesanan`, `summary_harian` (rows of D, the checks as assertions) | |
| publish_gold | `summary_harian` | the gold file (rows) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.orders.schema import fact_pesanan, karantina, summary_harian

#: the warehouse tables a run writes, as the warehouse declares them
FACT, SUMMARY, QUARANTINE = (table.name for table in (fact_pesanan, summary_harian, karantina))


@dataclass(frozen=True)
class Check:
    """One validation check of a dataset: an OpenLineage data-quality assertion."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class DatasetRef:
    """One dataset a stage read or wrote, with what it knows of it."""

    namespace: str
    name: str
    rows: int | None = None
    size: int | None = None
    checks: tuple[Check, ...] = ()
    #: the partitions of a table it read or wrote, as (column, value) pairs (empty: the
    #: whole dataset, or not said)
    partitions: tuple[tuple[str, str], ...] = ()


def location_dataset(location: Any) -> tuple[str, str]:
    """(namespace, name) of a file: a local path or an object-storage URL."""
    text = str(location)
    if "://" in text:
        scheme, rest = text.split("://", 1)
        if scheme == "file":
            return "file", str(Path(rest).resolve())
        bucket, _, key = rest.partition("/")
        return f"{scheme}://{bucket}", key
    return "file", str(Path(text).resolve())


def table_dataset(warehouse_url: str, table: str) -> tuple[str, str]:
    """(namespace, name) of warehouse table `table` (PostgreSQL or SQLite)."""
    from sqlalchemy.engine import make_url

    url = make_url(warehouse_url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ":memory:"
        path = database if database == ":memory:" else str(Path(database).resolve())
        return f"sqlite://{path}", f"main.{table}"
    schema = "public"
    options = url.query.get("options")
    for option in ([options] if isinstance(options, str) else list(options or [])):
        for part in option.split():
            if part.startswith("-csearch_path="):
                schema = part.split("=", 1)[1].split(",")[0].strip() or schema
    return f"postgres://{url.host or 'localhost'}:{url.port or 5432}", \
        f"{url.database}.{schema}.{table}"


def stage_lineage(settings: Any, day: date, stage: str, result: Mapping[str, Any] | None
                  ) -> tuple[list[DatasetRef], list[DatasetRef]]:
    """(inputs, outputs) of `stage` for `day`; `result` is the stage's record (None: the stage
    did not finish, so the datasets come without counts)."""
    result = result or {}

    def file(location: Any, **known: Any) -> DatasetRef:
        return DatasetRef(*location_dataset(location), **known)

    def table(name: str, **known: Any) -> DatasetRef:
        return DatasetRef(*table_dataset(settings.warehouse_url, name), **known)

    raw = settings.partition_path(day)
    if stage == "extract":
        return [file(raw, rows=result.get("rows"), size=result.get("bytes"))], []
    if stage == "transform":
        return [file(raw, rows=result.get("rows"))], []
    if stage == "load":
        return [file(raw)], [table(FACT, rows=result.get("fact")),
                             table(SUMMARY, rows=result.get("summary")),
                             table(QUARANTINE, rows=result.get("karantina")),
                             file(settings.quarantine_path(day), rows=result.get("karantina"))]
    if stage == "validate":
        checks = tuple(Check(c["name"], bool(c["ok"]), c["detail"])
                       for c in result.get("checks", []))
        return [table(FACT, rows=result.get("fact_rows"), checks=checks),
                table(SUMMARY, rows=result.get("summary_rows"), checks=checks)], []
    if stage == "publish_gold":
        return [table(SUMMARY)], [file(settings.gold_path(day), rows=result.get("rows"))]
    raise ValueError(f"unknown stage {stage!r}")
