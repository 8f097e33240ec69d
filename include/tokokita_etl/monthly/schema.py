"""The monthly city report's warehouse table, declared on the warehouse's `metadata`
(importing this module is what makes `Warehouse.ensure_schema` create it)."""

from __future__ import annotations

from tokokita_etl.city_report.schema import city_table

summary_bulanan = city_table("summary_bulanan", "month_start")
