"""City reports built from the orders' daily summaries: each partition of a report (a week, a
month) is its dates' `summary_harian` rows summed per kota into the report's own table and
gold CSV, once its dates are settled, and built again when one of their results changes.

A report is declared by its own package (`weekly/`, `monthly/`) with a `CityReport` (its
table and grain) and `city_report_pipeline`; what they share is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from tokokita_etl.runner.schedule import Grain


@dataclass(frozen=True)
class CityReport:
    """One city report: its warehouse table (declared by the module `schema`, keyed by
    `key_column` and kota) and the grain of its partitions.

    Cheap to make: the table is looked up when a stage runs (SQLAlchemy is not imported when
    a DAG file is parsed)."""

    table_name: str
    key_column: str
    grain: Grain
    #: the module that declares the table on the warehouse's metadata
    schema: str

    def table(self):
        """The report's SQLAlchemy table (importing its schema module)."""
        import importlib

        from tokokita_etl.warehouse.schema import metadata

        importlib.import_module(self.schema)
        return metadata.tables[self.table_name]

    def gold_name(self, key: date) -> str:
        """The gold file of a partition: `<table>_<key>.csv`."""
        return f"{self.table_name}_{key.isoformat()}.csv"

    def checksum_name(self, key: date) -> str:
        """The key of a partition's checksum in its watermark entry: `<table>_<key>`."""
        return f"{self.table_name}_{key.isoformat()}"

    def of(self, key: date) -> str:
        """A partition, as the lines and errors name it: `the week of 2026-11-02`."""
        return f"the {self.grain.unit} of {key}"
