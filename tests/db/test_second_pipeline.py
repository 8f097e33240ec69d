"""A second pipeline declared beside the orders (`tests/stock_pipeline/`, named by the
`declarations` setting) runs from the same commands, on the same folders and warehouse, with a
watermark of its own: what is done to one pipeline's dates never touches the other's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli

D02, D03, D04 = (day.isoformat() for day in SAMPLE_DATES)
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)  # 2026-11-05 02:30 in Jakarta
DECLARED = {"TOKOKITA_DECLARATIONS": "stock_pipeline:STOCK"}


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    invoke = in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)
    return lambda *args, **env: invoke(*args, **{**DECLARED, **env})


def _stock_file(ws: Workspace, day: str, text: str = "sku,qty\nB-2,3\nA-1,4\nB-2,1\n") -> None:
    (ws.raw / f"stok_{day}.csv").write_text(text, encoding="utf-8")


def _bytes(ws: Workspace) -> dict[str, bytes]:
    """Every file of the orders' state (not the stock pipeline's folder) and gold files."""
    stock = ws.state_dir / "stock"
    return {str(p.relative_to(ws.root)): p.read_bytes()
            for folder in (ws.state_dir, ws.gold) for p in sorted(folder.rglob("*"))
            if p.is_file() and stock not in p.parents and not p.name.startswith("stok_")}


def test_two_pipelines_run_side_by_side_with_their_own_watermarks(sqlite_workspace, call):
    ws = sqlite_workspace
    ws.copy_samples()
    _stock_file(ws, D02)
    assert call("run", "--date", D02)[0] == 0
    code, out, err = call("run", "--pipeline", "stock", "--date", D02)
    assert code == 0, err
    assert "[count] 2026-11-02: 2 skus" in out
    assert (ws.gold / f"stok_harian_{D02}.csv").read_text() == "sku,qty\nA-1,4\nB-2,4\n"

    stock = json.loads((ws.state_dir / "stock" / "state.json").read_text())
    orders = json.loads(ws.state_file.read_text())
    assert stock["pipeline"] == "stock" and list(stock["runs"]) == [D02]
    assert orders["pipeline"] == "orders" and list(orders["runs"]) == [D02]
    assert stock["runs"][D02]["rows"] == {"extracted": 2, "summary": 2}

    # each pipeline's due dates are its own: the orders have three files, the stock one
    assert call("due", "--now", "2026-11-05T02:30")[1] == f"{D03}\n{D04}\n"
    assert call("due", "--pipeline", "stock", "--now", "2026-11-05T02:30")[1] == ""
    _stock_file(ws, D03)
    assert call("due", "--pipeline", "stock", "--now", "2026-11-05T02:30")[1] == f"{D03}\n"
    # at 02:30 in Jakarta the stock's run of D04 (its cron: 03:00) has not fired yet
    rows = json.loads(call("status", "--pipeline", "stock", "--json")[1])
    assert {r["date"]: r["state"] for r in rows if r["date"] in (D02, D03, D04)} == {
        D02: "done", D03: "due", D04: "waiting"}
    # its table shows its own counts, not the orders' columns
    text = call("status", "--pipeline", "stock", "--days", "4")[1].splitlines()
    assert text[0].split() == ["date", "state", "attempt", "extracted", "note"]
    assert [line.split()[:4] for line in text if line.startswith(D02)] == [
        [D02, "done", "1", "2"]]


def test_a_forced_run_or_a_blocked_date_of_one_pipeline_leaves_the_other_alone(
        sqlite_workspace, call):
    ws = sqlite_workspace
    ws.copy_samples()
    _stock_file(ws, D02)
    assert call("run", "--date", D02)[0] == 0
    before = _bytes(ws)

    assert call("run", "--pipeline", "stock", "--date", D02)[0] == 0
    assert call("run", "--pipeline", "stock", "--date", D02, "--force")[0] == 0
    _stock_file(ws, D03, "sku,qty\nA-1,many\n")  # a bad row: each run is a failed attempt
    for _ in range(3):
        code, _, err = call("run", "--pipeline", "stock", "--date", D03)
        assert code == 1 and f"stok_{D03}.csv: line 2: expected sku,qty" in err, err
    code, out, _ = call("run", "--pipeline", "stock", "--date", D03)
    assert code == 3 and "blocked after 3 attempts" in out, out
    # the way out it names runs this pipeline's date, not the orders'
    assert f"`tokokita-etl run --pipeline stock --date {D03} --reset-attempts`" in out, out
    [row] = [r for r in json.loads(call("status", "--pipeline", "stock", "--json")[1])
             if r["date"] == D03]
    assert f"tokokita-etl run --pipeline stock --date {D03} --reset-attempts" in row["unblock"]

    assert _bytes(ws) == before  # the orders' watermark, manifests and gold: untouched
    assert call("run", "--date", D03)[0] == 0  # D03 of the orders is not blocked
    stock = json.loads((ws.state_dir / "stock" / "state.json").read_text())
    assert stock["runs"][D02]["attempt"] == 2 and stock["runs"][D03]["failures"] == 3


def test_state_export_and_config_name_the_pipeline_they_act_on(sqlite_workspace, call):
    ws = sqlite_workspace
    ws.copy_samples()
    _stock_file(ws, D02)
    assert call("run", "--pipeline", "stock", "--date", D02)[0] == 0
    exported = json.loads(call("state", "export", "--pipeline", "stock")[1])
    assert exported["pipeline"] == "stock" and list(exported["runs"]) == [D02]
    assert json.loads(call("state", "export")[1])["runs"] == {}
    settings = {row["setting"]: row for row in
                json.loads(call("config", "--pipeline", "stock", "--json")[1])}
    assert settings["cron"]["value"] == "0 3 * * *"
    assert settings["cron"]["source"] == "the declaration of pipeline 'stock'"
    assert settings["state_dir"]["value"] == str(ws.state_dir / "stock")
    code, _, err = call("due", "--pipeline", "stock", "--now", "2026-11-05T02:30",
                        TOKOKITA_DECLARATIONS="")
    assert code == 2 and ("unknown pipeline 'stock'; pipelines: monthly_city_report, orders, "
                          "weekly_city_report") in err
