"""Bad input through the command line: clear message, exit code, nothing half-written.

Each case starts from a workspace where 2026-11-02 was already processed successfully (so there
is a watermark, a gold file, a quarantine file and warehouse rows to protect), breaks one thing
and re-runs 2026-11-02 with --force (or a fresh date) through the real command line.

Exit codes (errors.py, cli.py): 1 = a failed run recorded as a failed attempt; 1 without an
attempt for a missing partition; 2 = usage/config/corrupt state; 3 = blocked.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.conftest import HEADER, SAMPLE_RAW, Workspace, in_process_cli, run_cli
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.schema import fact_rows, summary_rows
from tokokita_etl.runner.sequence import run_for_date
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.warehouse.database import Warehouse

D02 = date(2026, 11, 2)
CLOCK = datetime(2026, 11, 3, 19, 30, tzinfo=UTC)
SAMPLE_02 = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_text()


@dataclass
class Snapshot:
    state: bytes
    outputs: dict[str, bytes]
    rows: tuple
    manifests: list[str]


def snapshot(ws: Workspace, day: date = D02) -> Snapshot:
    outputs = {str(p.relative_to(ws.root)): p.read_bytes()
               for folder in (ws.gold, ws.quarantine) if folder.exists()
               for p in sorted(folder.iterdir())}
    wh = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        rows = (list(fact_rows(wh, conn, day)), list(summary_rows(wh, conn, day)))
    return Snapshot(ws.state_file.read_bytes(), outputs, rows, [p.name for p in ws.manifests()])


@pytest.fixture
def loaded(sqlite_workspace: Workspace) -> Workspace:
    """2026-11-02 processed once, successfully."""
    sqlite_workspace.copy_samples(D02)
    assert run_for_date(ORDERS, sqlite_workspace.settings(), D02, log=lambda _: None).status == "success"
    return sqlite_workspace


@pytest.fixture
def call(loaded: Workspace, monkeypatch, capsys):
    """cli.main in-process with TOKOKITA_* pointing into the workspace; returns (code, out+err)."""
    invoke = in_process_cli(loaded, monkeypatch, capsys, CLOCK)

    def combined(*args: str, **env: str) -> tuple[int, str]:
        code, out, err = invoke(*args, **env)
        return code, out + err

    return combined


def assert_untouched_outputs(ws: Workspace, before: Snapshot) -> None:
    after = snapshot(ws)
    assert after.outputs == before.outputs  # no new/changed gold or quarantine file
    assert after.rows == before.rows  # warehouse rows of the date unchanged
    assert ws.leftovers() == []
    assert not list(ws.gold.glob(".*"))  # no staged gold file left behind


def assert_failed_attempt(ws: Workspace, before: Snapshot, *fragments: str) -> dict:
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["status"], entry["attempt"]) == ("failed", 2)
    for fragment in fragments:
        assert fragment in entry["error"]
    new = [p for p in ws.manifests() if p.name not in before.manifests]
    assert len(new) == 1
    body = json.loads(new[0].read_text())
    assert (body["status"], body["exit_code"], body["attempt"]) == ("failed", 1, 2)
    return entry


PARTITION_FAILURES = [
    pytest.param(SAMPLE_02.replace(",diskon\n", ",discount\n", 1).encode(),
                 ["pesanan_2026-11-02.csv", "missing required column", "diskon"],
                 id="missing-column"),
    pytest.param(SAMPLE_02.encode().replace(b"Bandung", b"Band\xffung", 1),
                 ["pesanan_2026-11-02.csv", "not valid UTF-8", "line 3"],
                 id="undecodable"),
    pytest.param(b"\n\n\r\n", ["pesanan_2026-11-02.csv", "no header"], id="only-blank-lines"),
    pytest.param(b'order_id,"order_ts\n', ["pesanan_2026-11-02.csv", "header"], id="broken-header"),
]


@pytest.mark.parametrize(("content", "fragments"), PARTITION_FAILURES)
def test_an_unusable_partition_fails_the_run_as_one_attempt_and_loads_nothing(
        loaded, call, content, fragments):
    before = snapshot(loaded)
    loaded.write_partition(D02, content)
    code, output = call("run", "--date", "2026-11-02", "--force")
    assert code == 1
    for fragment in fragments:
        assert fragment in output
    assert "status=failed" in output
    entry = assert_failed_attempt(loaded, before, *fragments)
    assert entry["failed_stage"] == "extract"
    assert_untouched_outputs(loaded, before)


@pytest.mark.parametrize(("content", "fragment"), [
    pytest.param(None, "does not exist", id="missing-partition"),
    pytest.param(b"", "empty (0 bytes)", id="zero-byte-file"),
])
def test_a_missing_or_empty_partition_exits_1_without_recording_an_attempt(
        loaded, call, content, fragment):
    before = snapshot(loaded)
    path = loaded.raw / "pesanan_2026-11-02.csv"
    path.unlink()
    if content is not None:
        path.write_bytes(content)
    code, output = call("run", "--date", "2026-11-02", "--force")
    assert code == 1
    assert "pesanan_2026-11-02.csv" in output
    assert fragment in output
    assert loaded.state_file.read_bytes() == before.state  # no attempt, watermark untouched
    new = [p for p in loaded.manifests() if p.name not in before.manifests]
    assert [json.loads(p.read_text())["status"] for p in new] == ["missing"]
    assert_untouched_outputs(loaded, before)
    # a fresh date without a partition behaves the same
    code, output = call("run", "--date", "2026-11-09")
    assert code == 1
    assert "pesanan_2026-11-09.csv" in output
    assert loaded.state_file.read_bytes() == before.state


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_warehouse_fails_the_run_as_one_attempt_naming_the_warehouse(loaded, call):
    before = snapshot(loaded)
    port = closed_port()
    url = f"postgresql+psycopg://postgres:rahasia@127.0.0.1:{port}/tokokita_test"
    code, output = call("run", "--date", "2026-11-02", "--force", "--warehouse-url", url)
    assert code == 1
    assert f"127.0.0.1:{port}" in output
    assert "rahasia" not in output  # the password is never printed
    assert "status=failed" in output
    entry = assert_failed_attempt(loaded, before, f"127.0.0.1:{port}")
    assert entry["failed_stage"] == "load"
    assert "rahasia" not in loaded.state_file.read_text()
    assert_untouched_outputs(loaded, before)


TRUNCATED = b'{"pipeline": "orders", "runs": {"2026-11-02": {"attempt": 1,'
RUN_FORCE = ("run", "--date", "2026-11-02", "--force")


@pytest.mark.parametrize(("corrupt", "command"), [
    pytest.param(TRUNCATED, RUN_FORCE, id="truncated-run"),
    pytest.param(b"", RUN_FORCE, id="empty-run"),
    pytest.param(b'{"runs": {"2026-11-02": {"attempt": "satu"}}}', RUN_FORCE, id="bad-entry-run"),
    pytest.param(TRUNCATED, ("run", "--date", "2026-11-02", "--reset-attempts"), id="reset"),
    pytest.param(TRUNCATED, ("due", "--now", "2026-11-05T02:30"), id="due"),
    pytest.param(TRUNCATED, ("status", "--json"), id="status"),
])
def test_a_corrupt_watermark_exits_2_and_is_never_reset(loaded, call, corrupt, command):
    loaded.state_file.write_bytes(corrupt)
    before = snapshot(loaded)
    code, output = call(*command)
    assert code == 2
    assert str(loaded.state_file) in output
    assert "corrupt watermark" in output
    assert loaded.state_file.read_bytes() == corrupt  # byte for byte, never reset
    assert_untouched_outputs(loaded, before)
    assert [p.name for p in loaded.manifests()] == before.manifests


def test_a_header_only_partition_is_not_bad_input_it_empties_the_date(loaded, call):
    loaded.write_partition(D02, HEADER + "\n")
    code, output = call("run", "--date", "2026-11-02", "--force")
    assert code == 0, output
    assert loaded.gold_file(D02).read_text() == "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"
    assert snapshot(loaded).rows == ([], [])


def test_bad_input_through_the_real_executable(loaded: Workspace, tmp_path: Path):
    """The console script in a subprocess: exit code, message and untouched watermark."""
    before = snapshot(loaded)
    loaded.write_partition(D02, SAMPLE_02.replace("order_id,", "id_pesanan,", 1))
    proc = run_cli(["run", "--date", "2026-11-02", "--force"], cwd=loaded.root, env=loaded.env())
    assert proc.returncode == 1
    assert "pesanan_2026-11-02.csv" in proc.stderr  # the [error] line goes to stderr
    assert "order_id" in proc.stderr
    assert_failed_attempt(loaded, before, "order_id")
    assert_untouched_outputs(loaded, before)

    failed_state = loaded.state_file.read_bytes()
    loaded.state_file.write_bytes(failed_state[:-10])
    proc = run_cli(["run", "--date", "2026-11-02", "--force"], cwd=loaded.root, env=loaded.env())
    assert proc.returncode == 2
    assert "state.json" in proc.stderr
    assert loaded.state_file.read_bytes() == failed_state[:-10]
