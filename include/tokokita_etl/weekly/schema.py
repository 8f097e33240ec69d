"""The weekly city report's warehouse table, declared on the warehouse's `metadata`
(importing this module is what makes `Warehouse.ensure_schema` create it)."""

from __future__ import annotations

from tokokita_etl.city_report.schema import city_table

summary_mingguan = city_table("summary_mingguan", "week_start")
