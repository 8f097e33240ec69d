"""What a city report is built from: each orders date's daily summary, by the checksum its
success recorded (`summary_<date>`)."""

from __future__ import annotations

from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.declaration import Upstream

DAILY_SUMMARIES = Upstream(ORDERS, checksum=lambda day: f"summary_{day.isoformat()}")
