"""Pings and the one-line run summary from the command line, against a real HTTP server on
127.0.0.1: start, success and fail pings with the summary as body, a ping server that is
down or failing never fails a run, `--log-format json`, and the deadline alert's callback."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli
from tests.ping_server import PingServer, closed_port_url
from tokokita_etl.runner.notify import deadline_after, deadline_missed, ping_target

D02, D03, D04 = SAMPLE_DATES
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)  # 2026-11-05 02:30 in Jakarta
SUMMARY_FIELDS = {"event", "pipeline", "run_id", "trigger", "partition_date", "status",
                  "started_at", "finished_at", "duration_ms", "attempt", "exit_code", "rows",
                  "bruto", "bersih", "warnings"}


@pytest.fixture
def server():
    srv = PingServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def manifest_of(ws: Workspace, day) -> dict:
    (path,) = sorted(ws.runs.glob(f"run-{day.isoformat()}-*.json"))
    return json.loads(path.read_text())


def test_a_successful_cli_run_pings_start_then_success_with_its_summary_line(
        sqlite_workspace, call, server):
    sqlite_workspace.copy_samples(D02)
    code, _, _ = call("run", "--date", "2026-11-02", TOKOKITA_PING_URL=f"{server.url}/ping/abc")
    assert code == 0
    assert [(r.method, r.path) for r in server.received] == [
        ("POST", "/ping/abc/start"), ("POST", "/ping/abc")]
    start = json.loads(server.received[0].body)
    assert (start["event"], start["partition_date"], start["trigger"]) == (
        "tokokita_run_start", "2026-11-02", "cli")
    summary = json.loads(server.received[1].body)
    assert "\n" not in server.received[1].body
    assert summary == manifest_of(sqlite_workspace, D02)["summary"]
    assert (summary["status"], summary["partition_date"], summary["trigger"]) == (
        "success", "2026-11-02", "cli")
    assert summary["rows"] == manifest_of(sqlite_workspace, D02)["rows"]
    assert set(summary["rows"]) == {"extracted", "karantina", "duplikat", "fact", "summary"}
    # money stays exact decimal strings
    assert isinstance(summary["bruto"], str) and isinstance(summary["bersih"], str)
    assert summary["bruto"].count(".") == 1 and len(summary["bruto"].split(".")[1]) == 2


def test_a_failed_cli_run_pings_fail_with_the_error_in_its_summary(sqlite_workspace, call,
                                                                     server):
    sqlite_workspace.write_partition(D03, "order_id,order_ts,customer_id,produk,qty,"
                                          "harga_satuan,diskon\n1,2026-11-03T10:00:00+07:00,"
                                          "c1,teh,1,1000,0\n")
    code, _, _ = call("run", "--date", "2026-11-03", TOKOKITA_PING_URL=server.url)
    assert code != 0
    assert server.paths() == ["/start", "/fail"]
    summary = json.loads(server.received[1].body)
    assert summary["status"] == "failed"
    assert "kota" in summary["error"]
    assert (summary["bruto"], summary["bersih"], summary["rows"]) == (None, None, {})


def test_a_blocked_date_pings_fail_and_a_date_already_done_pings_nothing(
        sqlite_workspace, call, server):
    sqlite_workspace.copy_samples(D02)
    assert call("run", "--date", "2026-11-02")[0] == 0  # no ping_url: nothing sent
    assert server.received == []
    assert call("run", "--date", "2026-11-02", TOKOKITA_PING_URL=server.url)[0] == 0
    assert server.received == []  # skipped: already succeeded
    sqlite_workspace.write_partition(D04, "not,a,partition\n1,2,3\n")
    for _ in range(3):
        call("run", "--date", "2026-11-04", TOKOKITA_MAX_ATTEMPTS="3")
    server.received.clear()
    code, _, _ = call("run", "--date", "2026-11-04", TOKOKITA_PING_URL=server.url)
    assert code != 0
    assert server.paths() == ["/fail"]
    assert json.loads(server.received[0].body)["status"] == "blocked"


def test_with_the_ping_server_down_the_run_succeeds_and_a_warning_is_printed(
        sqlite_workspace, call):
    sqlite_workspace.copy_samples(D02)
    url = closed_port_url()
    code, _, err = call("run", "--date", "2026-11-02", TOKOKITA_PING_URL=url)
    assert code == 0
    assert manifest_of(sqlite_workspace, D02)["status"] == "success"
    assert f"[warning] ping start to {url}/start failed" in err
    assert f"[warning] ping success to {url} failed" in err
    assert "the run goes on" in err


def test_a_failed_pings_warning_masks_the_query_string_of_its_url(sqlite_workspace, call):
    """Bug: `config` masked a ping URL's query values, but the warning of a failed ping
    printed them (`?key=...`) in full."""
    sqlite_workspace.copy_samples(D02)
    url = closed_port_url() + "/ping/abc?key=rahasia"
    code, _, err = call("run", "--date", "2026-11-02", TOKOKITA_PING_URL=url)
    assert code == 0
    assert "ping start to " in err and "key=***" in err
    assert "rahasia" not in err


def test_a_ping_server_answering_500_is_a_warning_not_a_failed_run(sqlite_workspace, call,
                                                                   server):
    server.status = 500
    sqlite_workspace.copy_samples(D02)
    code, _, err = call("run", "--date", "2026-11-02", TOKOKITA_PING_URL=server.url)
    assert code == 0
    assert server.paths() == ["/start", "/"]
    assert "ping success" in err and "500" in err


def test_log_format_json_prints_one_parseable_summary_line_on_stdout(sqlite_workspace, call):
    sqlite_workspace.copy_samples(D02)
    code, out, err = call("run", "--date", "2026-11-02", "--log-format", "json")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1, out
    summary = json.loads(lines[0])
    assert set(summary) >= SUMMARY_FIELDS
    assert summary == manifest_of(sqlite_workspace, D02)["summary"]
    assert summary["run_id"] == manifest_of(sqlite_workspace, D02)["summary"]["run_id"]
    assert summary["run_id"].startswith("run-2026-11-02-")
    started = datetime.fromisoformat(summary["started_at"])
    finished = datetime.fromisoformat(summary["finished_at"])
    assert started.utcoffset() is not None and finished >= started
    assert summary["duration_ms"] >= 0
    assert "[done]" in err  # the progress lines go to stderr
    # the text format prints no JSON line
    code, out, _ = call("run", "--date", "2026-11-03")
    assert not [line for line in out.splitlines() if line.startswith("{")]


def test_a_low_volume_run_carries_its_warning_in_the_ping_body_and_the_json_line(
        sqlite_workspace, call, server):
    sqlite_workspace.copy_samples(D02, D03)
    for day in ("2026-11-02", "2026-11-03"):
        assert call("run", "--date", day)[0] == 0
    header = (sqlite_workspace.raw / "pesanan_2026-11-02.csv").read_text().splitlines()[0]
    sqlite_workspace.write_partition(D04, header + "\n")
    code, out, _ = call("run", "--date", "2026-11-04", "--log-format", "json",
                        TOKOKITA_PING_URL=server.url)
    assert code == 0
    line = json.loads(out.splitlines()[0])
    assert line["warnings"] and line["status"] == "success"
    assert json.loads(server.received[-1].body)["warnings"] == line["warnings"]
    assert manifest_of(sqlite_workspace, D04)["warnings"] == line["warnings"]


def test_ping_targets_follow_the_healthchecks_convention():
    assert ping_target("https://hc.example/ping/abc", "start") == "https://hc.example/ping/abc/start"
    assert ping_target("https://hc.example/ping/abc/", "success") == "https://hc.example/ping/abc"
    assert ping_target("https://hc.example/p?k=1", "fail") == "https://hc.example/p/fail?k=1"


def test_the_deadline_falls_at_the_local_time_after_the_fire_time():
    jkt = ZoneInfo("Asia/Jakarta")
    fire = datetime(2026, 11, 3, 2, 30, tzinfo=jkt)
    assert deadline_after(fire, time(6, 0), "Asia/Jakarta") - fire == \
        timedelta(hours=3, minutes=30)
    assert deadline_after(fire, time(2, 31), "Asia/Jakarta") - fire == timedelta(minutes=1)
    assert deadline_after(fire, time(1, 0), "Asia/Jakarta") - fire == \
        timedelta(hours=22, minutes=30)


def test_the_deadline_callback_posts_json_to_the_webhook_and_survives_it_being_down(server):
    context = {"dag_run": {"dag_id": "tokokita_orders_daily",
                           "dag_run_id": "scheduled__2026-11-03__2026-11-03T19:30:00+00:00",
                           "logical_date": "2026-11-03T19:30:00Z", "state": "running",
                           "partition_key": None},
               "deadline": {"id": "x", "deadline_time": "2026-11-03T23:00:00+00:00"}}
    sent = asyncio.run(deadline_missed(dag_id="tokokita_orders_daily",
                                       webhook_url=f"{server.url}/hook", context=context,
                                       tz="Asia/Jakarta", deadline_local_time="06:00"))
    (got,) = server.received
    assert (got.path, got.content_type) == ("/hook", "application/json")
    body = json.loads(got.body)
    assert body == sent
    assert (body["event"], body["partition_date"], body["deadline_local_time"]) == (
        "tokokita_deadline_missed", "2026-11-03", "06:00 Asia/Jakarta")
    down = asyncio.run(deadline_missed(webhook_url=closed_port_url(), context=context,
                                       tz="Asia/Jakarta", deadline_local_time="06:00"))
    assert "webhook_error" in down
