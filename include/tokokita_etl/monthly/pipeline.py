"""The monthly city report, declared: each calendar month's daily summaries per kota (in the
pipeline's zone, keyed by the month's first day), summed into `summary_bulanan` and a gold
CSV once every orders date of the month is settled, and built again when one of their
results changes."""

from __future__ import annotations

from datetime import date

from tokokita_etl.city_report import CityReport
from tokokita_etl.city_report.pipeline import city_report_pipeline
from tokokita_etl.runner.schedule import MONTHLY

REPORT = CityReport("summary_bulanan", "month_start", MONTHLY,
                    schema="tokokita_etl.monthly.schema")

MONTHLY_CITY_REPORT = city_report_pipeline(
    REPORT,
    name="monthly_city_report",
    dag_id="tokokita_monthly_city_report",
    description="TokoKita monthly city report: a month's daily summaries -> summary_bulanan "
                "-> gold",
    tags=("tokokita", "report", "monthly"),
    # the month's last day's wait window ends on the 1st in the morning: the month waits a
    # day for it and is due by noon on the 2nd. Its first run, on 2026-12-02, builds the
    # orders' first month (November 2026, from 2026-11-01)
    defaults={"cron": "0 5 2 * *", "lookback_days": 93, "wait_window_hours": 24,
              "deadline_local_time": "12:00", "start_date": date(2026, 12, 1)},
    asset=("tokokita_summary_bulanan", "tokokita://gold/summary_bulanan"),
)
