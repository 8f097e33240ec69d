"""`make demo`: process every sample partition on the embedded defaults, then show the results."""

from __future__ import annotations

import re
import sys
from datetime import date

from tokokita_etl.config import Settings, load_settings
from tokokita_etl.pipeline import run_for_date
from tokokita_etl.status import format_status, status_rows

PARTITION_RE = re.compile(r"^pesanan_(\d{4}-\d{2}-\d{2})\.csv$")


def partition_dates(settings: Settings) -> list[date]:
    """Dates of the partitions present in the raw folder."""
    found = []
    for path in settings.raw_dir.glob("pesanan_*.csv"):
        match = PARTITION_RE.match(path.name)
        if match and path.stat().st_size > 0:
            found.append(date.fromisoformat(match.group(1)))
    return sorted(found)


def main() -> int:
    """Run the pipeline for each sample date (done dates are skipped), print status and gold."""
    settings = load_settings()
    print(f"warehouse: {settings.warehouse_url}\nraw:       {settings.raw_dir}\n")
    worst = 0
    for day in partition_dates(settings):
        worst = max(worst, run_for_date(settings, day).exit_code)
        print()
    print(format_status(status_rows(settings)))
    print("\ngold files:")
    for path in sorted(settings.gold_dir.glob("summary_harian_*.csv")):
        print(f"  {path}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
