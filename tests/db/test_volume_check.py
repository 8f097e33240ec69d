"""Empty or fully quarantined partitions are not silent: a warning, or a validate failure."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from tests.conftest import Workspace, in_process_cli

D01, D02 = date(2026, 11, 1), date(2026, 11, 2)
CLOCK = datetime(2026, 11, 3, 3, 0, tzinfo=UTC)
#: eight rows, every one quarantined (no kota)
ALL_QUARANTINED = "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n" + "".join(
    f"TK-{n},2026-11-02 10:00:00,C{n},,Teh,1,1000,0\n" for n in range(8))


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def test_a_fully_quarantined_partition_succeeds_with_a_warning_in_log_manifest_and_status(
        sqlite_workspace, call):
    """Regression: a partition whose 8 rows were all quarantined ran green and published an
    empty gold file with no warning."""
    ws = sqlite_workspace
    ws.write_partition(D02, ALL_QUARANTINED)
    code, out, err = call("run", "--date", str(D02))
    assert code == 0, out + err
    assert "[warning] 2026-11-02: 0 valid rows" in err
    manifest = json.loads(ws.manifests(D02)[-1].read_text())
    assert manifest["status"] == "success"
    assert manifest["warnings"] == ["2026-11-02: 0 valid rows (every row was quarantined, "
                                    "or the partition is empty)"]
    entry = json.loads(ws.state_file.read_text())["runs"][str(D02)]
    assert entry["warnings"] == manifest["warnings"]
    code, out, _ = call("status")
    assert code == 0 and "warning: 2026-11-02: 0 valid rows" in out
    status = json.loads(call("status", "--json")[1])
    assert next(r for r in status if r["date"] == str(D02))["warnings"] == manifest["warnings"]


def test_volume_check_fail_turns_a_low_volume_run_into_a_validate_failure(sqlite_workspace,
                                                                           call):
    ws = sqlite_workspace
    ws.copy_samples(D02)
    ws.write_partition(D01, (ws.raw / "pesanan_2026-11-02.csv").read_text()
                       .replace("2026-11-02", "2026-11-01"))
    assert call("run", "--date", str(D01))[0] == 0  # 8 valid rows: the trailing median
    # one valid row of eight: below half the trailing median of 8
    ws.write_partition(D02, ALL_QUARANTINED.replace("TK-0,2026-11-02 10:00:00,C0,,",
                                                    "TK-0,2026-11-02 10:00:00,C0,Bandung,"))
    code, out, err = call("run", "--date", str(D02), TOKOKITA_VOLUME_CHECK="fail")
    assert code == 1, out + err
    assert "below 0.5 of the median 8" in err
    entry = json.loads(ws.state_file.read_text())["runs"][str(D02)]
    assert (entry["status"], entry["attempt"], entry["failed_stage"]) == ("failed", 1, "validate")
    assert "volume_check=fail" in entry["error"]
    assert not ws.gold_file(D02).exists()

    # with the default (warn) the same partition succeeds; the stale error fields go
    code, out, err = call("run", "--date", str(D02))
    assert code == 0, out + err
    entry = json.loads(ws.state_file.read_text())["runs"][str(D02)]
    assert (entry["status"], entry["attempt"]) == ("success", 2)
    assert "error" not in entry and "failed_stage" not in entry
    assert entry["warnings"] and "below 0.5 of the median 8" in entry["warnings"][0]
