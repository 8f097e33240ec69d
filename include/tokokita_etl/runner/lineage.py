"""What each stage of a pipeline reads and writes, as OpenLineage datasets (no Airflow, no
OpenLineage import: `tokokita_airflow.lineage` turns these into the provider's events). A
pipeline's `lineage` fills these references in for its stages.

Names follow the OpenLineage naming spec: a local file is namespace `file`, name its absolute
path; an object `s3://bucket/key` is namespace `s3://bucket`, name `key`; a PostgreSQL table
is namespace `postgres://host:port`, name `database.schema.table`; a SQLite table (no entry in
the spec) is namespace `sqlite://<absolute path of the database file>`, name `main.table`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def file_ref(location: Any, **known: Any) -> DatasetRef:
    """The dataset of a file (a local path or an object-storage URL), with what is known of
    it (`rows`, `size`)."""
    return DatasetRef(*location_dataset(location), **known)


def table_ref(warehouse_url: str, table: str, **known: Any) -> DatasetRef:
    """The dataset of a warehouse table, with what is known of it (`rows`, `checks`, the
    `partitions` read or written)."""
    return DatasetRef(*table_dataset(warehouse_url, table), **known)


def checks_of(result: Any) -> tuple[Check, ...]:
    """The checks a validate stage's record lists (`checks`: name, ok, detail)."""
    return tuple(Check(c["name"], bool(c["ok"]), c["detail"])
                 for c in (result or {}).get("checks", []))
