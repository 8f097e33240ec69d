"""What a city report is built from: each orders date's daily summary, by the checksum its
success recorded (`summary_<date>`). The orders pipeline is named by its name, looked up in
the registry when first needed."""

from __future__ import annotations

from tokokita_etl.runner.declaration import Upstream

DAILY_SUMMARIES = Upstream("orders", checksum=lambda day: f"summary_{day.isoformat()}")
