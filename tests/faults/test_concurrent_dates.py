"""Fault injection: eight dates run at once, as eight `tokokita-etl run` processes sharing one
warehouse and one state folder, round after round.

The watermark is one JSON file that every run rewrites (its gate's intent, its outcome), and
the warehouse serialises the loads of different dates (SQLite's write lock, a table lock on
PostgreSQL). Round 1 is every date's first run; the later rounds are `--force` re-runs. After
each round, on both backends:

* no lost watermark update: each date's entry is a success whose attempt count is the number
  of rounds so far (every run counted), with no intent record left;
* no duplicated or lost fact row: the date's fact rows in the warehouse are the generator's
  count of valid orders, which is also the watermark's `rows.fact`;
* the checksums of every date are the same in every round;
* no claim file is left in `state_dir/claims/`, and every run wrote its own success manifest.

Quick mode: 2 rounds of 2,000-row partitions. `TOKOKITA_FAULTS=long`: 5 rounds of 20,000-row
partitions (`TOKOKITA_ROUNDS` overrides the rounds).
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date, timedelta

from sqlalchemy import text

from devtools.samples import generate_partition
from tests.conftest import CLI, Workspace, clean_env
from tests.faults.conftest import LONG
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import IN_PROGRESS
from tokokita_etl.warehouse.database import Warehouse

DATES = [date(2026, 11, 10) + timedelta(days=n) for n in range(8)]
ROUNDS = int(os.environ.get("TOKOKITA_ROUNDS") or (5 if LONG else 2))
ROWS = 20_000 if LONG else 2_000


def _round(ws: Workspace, force: bool) -> list[tuple[date, int, str, str]]:
    """Start one run per date at once; (date, exit code, stdout, stderr) of each."""
    env = clean_env(**ws.env())
    procs = [(day, subprocess.Popen(
        [str(CLI), "run", "--date", day.isoformat(), *(["--force"] if force else [])],
        cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for day in DATES]
    results = []
    for day, proc in procs:
        out, err = proc.communicate(timeout=600)
        results.append((day, proc.returncode, out, err))
    return results


def _fact_rows(warehouse: Warehouse) -> dict[str, int]:
    with warehouse.begin() as conn:
        rows = conn.execute(text(
            "SELECT order_date, COUNT(*) FROM fact_pesanan GROUP BY order_date")).all()
    return {str(day): int(n) for day, n in rows}


def test_eight_dates_at_once_for_several_rounds_lose_no_update_and_no_row(workspace):
    """Guards the shared watermark and the warehouse against concurrent runs of different
    dates: a lost read-modify-write of state.json shows as a wrong attempt count or a missing
    entry, a load that ran twice or not at all as a wrong fact count, an unserialised merge as
    a changed checksum."""
    ws = workspace
    expected = {}
    for day in DATES:
        counts = generate_partition(ws.raw / f"pesanan_{day.isoformat()}.csv", day, ROWS,
                                    seed=day.day)
        expected[day.isoformat()] = counts["fact"]
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    first_checksums: dict[str, dict] = {}
    for number in range(1, ROUNDS + 1):
        results = _round(ws, force=number > 1)
        failed = [(day, code, err[-800:]) for day, code, _, err in results if code != 0]
        assert not failed, f"round {number}: {failed}"

        runs = StateStore(ws.state_file, "orders").read().runs
        assert sorted(runs) == sorted(expected), f"round {number}: entries lost: {sorted(runs)}"
        for day, entry in runs.items():
            assert entry["status"] == "success", (number, day, entry)
            assert entry["attempt"] == number, f"round {number}: {day}: lost update: {entry}"
            assert IN_PROGRESS not in entry, (number, day, entry)
            assert entry["rows"]["fact"] == expected[day], (number, day, entry["rows"])
            first_checksums.setdefault(day, entry["checksums"])
            assert entry["checksums"] == first_checksums[day], f"round {number}: {day}"
        assert _fact_rows(warehouse) == expected, f"round {number}"
        assert list((ws.state_dir / "claims").glob("*.json")) == [], f"round {number}"
        for day in DATES:
            manifests = [json.loads(p.read_text(encoding="utf-8")) for p in ws.manifests(day)]
            assert [m["status"] for m in manifests] == ["success"] * number, (number, day)
    assert ws.leftovers() == []
