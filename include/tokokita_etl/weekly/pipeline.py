"""The weekly city report, declared: each ISO week's daily summaries per kota, summed into
`summary_mingguan` and a gold CSV once its seven orders dates are settled, and built again
when one of their results changes."""

from __future__ import annotations

from datetime import date

from tokokita_etl.city_report import CityReport
from tokokita_etl.city_report.pipeline import city_report_pipeline
from tokokita_etl.runner.schedule import WEEKLY

REPORT = CityReport("summary_mingguan", "week_start", WEEKLY, schema="tokokita_etl.weekly.schema")

WEEKLY_CITY_REPORT = city_report_pipeline(
    REPORT,
    name="weekly_city_report",
    dag_id="tokokita_weekly_city_report",
    description="TokoKita weekly city report: seven daily summaries -> summary_mingguan -> gold",
    tags=("tokokita", "report", "weekly"),
    # Sunday's orders wait window ends on Monday morning: the week waits a day for it, and
    # is due by noon on Monday. Its first run, on 2026-11-09, builds the orders' first whole
    # week (from 2026-11-02)
    defaults={"cron": "0 4 * * 1", "lookback_days": 35, "wait_window_hours": 24,
              "deadline_local_time": "12:00", "start_date": date(2026, 11, 9)},
    asset=("tokokita_summary_mingguan", "tokokita://gold/summary_mingguan"),
)
