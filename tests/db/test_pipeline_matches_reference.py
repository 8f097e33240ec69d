"""The pipeline and the reference implementation (devtools/reference.py) agree on a generated
partition holding every kind of dirty row and duplicates: the same gold and quarantine file
bytes, the same quarantine counts per reason and the same number of fact rows, on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path

from devtools.reference import run_reference
from devtools.samples import generate_partition
from tests.conftest import read_csv_rows
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.sequence import run_for_date

DAY = date(2026, 11, 10)


def test_pipeline_and_reference_give_the_same_gold_quarantine_counts_and_facts(workspace):
    raw = workspace.raw / f"pesanan_{DAY.isoformat()}.csv"
    generated = generate_partition(raw, DAY, 2000, seed=0)
    outcome = run_for_date(ORDERS, workspace.settings(), DAY, log=lambda _: None)
    assert outcome.exit_code == 0, outcome.error
    manifest = outcome.body
    # the reference's own tables (reference_fact, reference_summary) sit beside the pipeline's
    reference = run_reference(raw, DAY, workspace.warehouse_url, workspace.root / "reference" / "gold",
                              workspace.root / "reference" / "quarantine")

    assert workspace.gold_file(DAY).read_bytes() == Path(reference["gold"]).read_bytes()
    assert workspace.quarantine_file(DAY).read_bytes() == Path(reference["quarantine"]).read_bytes()
    pipeline_reasons = Counter(row["reason"] for row in read_csv_rows(workspace.quarantine_file(DAY)))
    reference_reasons = Counter({**reference["karantina"], "duplicate": reference["duplikat"]})
    assert +pipeline_reasons == +reference_reasons
    assert manifest["rows"]["fact"] == reference["fact"] == generated["fact"]
