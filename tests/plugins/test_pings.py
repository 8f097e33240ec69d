"""Pings and the run's summary line from the Airflow tasks (`dag.test()`), received by a real
HTTP server on 127.0.0.1: the gate pings start, publish_gold success, a stage that fails for
good pings fail; a ping server that is down never fails the run."""

from __future__ import annotations

import json

import pytest

from tests.airflow_support import fire_time
from tests.ping_server import closed_port_url

pytestmark = pytest.mark.airflow



def manifest(project, day: str) -> dict:
    return json.loads(project.manifests(day)[-1].read_text())


def test_a_dag_run_pings_start_from_the_gate_and_success_from_publish_gold(
        project, run_dag, pings):
    dr, states = run_dag(fire_time("2026-11-02"))
    assert dr.state == "success", states
    assert pings.paths() == ["/ping/abc/start", "/ping/abc"]
    start = json.loads(pings.received[0].body)
    assert start["partition_date"] == "2026-11-02"
    assert dr.run_id in start["trigger"]
    summary = json.loads(pings.received[1].body)
    assert summary == manifest(project, "2026-11-02")["summary"]
    assert (summary["status"], summary["partition_date"]) == ("success", "2026-11-02")
    assert dr.run_id in summary["trigger"]
    assert isinstance(summary["bruto"], str) and isinstance(summary["bersih"], str)


def test_a_partition_failure_pings_fail_once_with_the_error_in_its_summary(
        project, run_dag, pings):
    (project.raw / "pesanan_2026-11-03.csv").write_text(
        "order_id,order_ts,customer_id,produk,qty,harga_satuan,diskon\n"
        "1,2026-11-03T10:00:00+07:00,c1,teh,1,1000,0\n")
    dr, states = run_dag(fire_time("2026-11-03"))
    assert dr.state == "failed", states
    assert pings.paths() == ["/ping/abc/start", "/ping/abc/fail"]
    summary = json.loads(pings.received[1].body)
    assert summary["status"] == "failed" and "kota" in summary["error"]
    assert summary == manifest(project, "2026-11-03")["summary"]


def test_a_blocked_date_pings_fail_from_the_gate_without_a_start(project, run_dag, pings,
                                                                 monkeypatch):
    (project.raw / "pesanan_2026-11-04.csv").write_text("not,a,partition\n1,2,3\n")
    monkeypatch.setenv("TOKOKITA_MAX_ATTEMPTS", "1")
    project.fail_from_the_command_line("2026-11-04", 1)
    pings.received.clear()
    _, states = run_dag(None, partition_key="2026-11-04")
    assert states["check_watermark"][0] == "failed", states
    assert pings.paths() == ["/ping/abc/fail"]
    assert json.loads(pings.received[0].body)["status"] == "blocked"


def test_with_the_ping_server_down_the_dag_run_still_succeeds(project, run_dag, monkeypatch):
    monkeypatch.setenv("TOKOKITA_PING_URL", closed_port_url())
    dr, states = run_dag(fire_time("2026-11-02"))
    assert dr.state == "success", states
    assert manifest(project, "2026-11-02")["status"] == "success"
