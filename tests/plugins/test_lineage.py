"""OpenLineage events of a real run (`dag.test()` in a child process, so that the provider
reads its settings when it is imported, as an Airflow worker does), written by the provider's
file transport and asserted field by field: every stage's inputs and outputs with their
OpenLineage names, row counts, the validate checks as data-quality assertions, run states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow_support import REPO, ensure_metadata_db

pytestmark = pytest.mark.airflow

DAY = "2026-11-02"  # data/raw/EXPECTED.md: 8 rows, 771 bytes, 8 valid, 4 kota, 0 karantina


def run_dag_with_lineage(project, transport: dict | None, **settings: str) -> dict:
    ensure_metadata_db()
    env = {**os.environ, **settings, "TOKOKITA_HOME": str(project.root),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")]),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "tokokita"}
    env = {k: v for k, v in env.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE__T"))}
    if transport is not None:
        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(transport)
    done = subprocess.run([sys.executable, "-m", "tests.plugins.lineage_run", DAY], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def events(path: Path) -> dict[tuple[str, str], dict]:
    """(job name, event type) -> event."""
    found = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        found[(event["job"]["name"], event["eventType"])] = event
    return found


def test_a_run_reports_each_stage_datasets_counts_and_checks_to_openlineage(project, tmp_path):
    log = tmp_path / "openlineage.jsonl"
    run = run_dag_with_lineage(project, {"type": "file", "log_file_path": str(log),
                                         "append": True})
    assert run["state"] == "success", run
    got = events(log)
    job = "tokokita_orders_daily"
    warehouse = f"sqlite://{project.root / 'data' / 'warehouse' / 'tokokita.db'}"
    raw = ("file", str(project.raw / f"pesanan_{DAY}.csv"))
    stages = ["extract", "transform", "load", "validate", "publish_gold"]
    for task in ["wait_for_raw_partition", "check_watermark", *stages]:
        start, complete = got[(f"{job}.{task}", "START")], got[(f"{job}.{task}", "COMPLETE")]
        assert start["run"]["runId"] == complete["run"]["runId"]
        assert complete["job"]["namespace"] == "tokokita"
        parent = complete["run"]["facets"]["parent"]
        assert (parent["job"]["namespace"], parent["job"]["name"]) == ("tokokita", job)
    assert (job, "COMPLETE") in got

    def datasets(task: str, side: str) -> list[tuple]:
        facets = "inputFacets" if side == "inputs" else "outputFacets"
        return [(d["namespace"], d["name"], {k: {f: v for f, v in facet.items()
                                                 if not f.startswith("_")}
                                             for k, facet in d.get(facets, {}).items()})
                for d in got[(f"{job}.{task}", "COMPLETE")][side]]

    assert datasets("extract", "inputs") == [(*raw, {"inputStatistics": {"rowCount": 8,
                                                                         "size": 771}})]
    assert datasets("extract", "outputs") == []
    assert datasets("transform", "inputs") == [(*raw, {"inputStatistics": {"rowCount": 8}})]
    assert datasets("load", "inputs") == [(*raw, {})]
    assert datasets("load", "outputs") == [
        (warehouse, "main.fact_pesanan", {"outputStatistics": {"rowCount": 8}}),
        (warehouse, "main.summary_harian", {"outputStatistics": {"rowCount": 4}}),
        (warehouse, "main.karantina", {"outputStatistics": {"rowCount": 0}}),
        ("file", str(project.root / "data" / "quarantine" / f"karantina_{DAY}.csv"),
         {"outputStatistics": {"rowCount": 0}})]
    checked = datasets("validate", "inputs")
    assert [(ns, name) for ns, name, _ in checked] == [
        (warehouse, "main.fact_pesanan"), (warehouse, "main.summary_harian")]
    for (_, _, facets), rows in zip(checked, (8, 4), strict=True):
        assert facets["inputStatistics"] == {"rowCount": rows}
        assertions = facets["dataQualityAssertions"]["assertions"]
        assert [(a["assertion"], a["success"]) for a in assertions] == [
            ("reconcile kota", True), ("daily aggregates", True), ("gold csv", True)]
        assert assertions[0]["description"] == \
            "8 rows in 4 kota (source total 8 = target total 8)"
    assert datasets("publish_gold", "inputs") == [(warehouse, "main.summary_harian", {})]
    assert datasets("publish_gold", "outputs") == [
        ("file", str(project.gold(DAY)), {"outputStatistics": {"rowCount": 4}})]
    assert project.gold(DAY).read_text().count("\n") == 1 + 4  # header + 4 kota, as reported


def test_with_no_transport_lineage_is_off_and_the_run_emits_nothing(project, tmp_path):
    run = run_dag_with_lineage(project, None)
    assert run["state"] == "success", run
    assert not list(tmp_path.rglob("*.jsonl"))
    assert not list(REPO.glob("openlineage*.json*"))


def test_a_failed_validate_reports_its_failed_check_as_an_unsuccessful_assertion(
        project, tmp_path):
    """A zero-row partition with `volume_check: fail`: validate fails, and its FAIL event
    carries every check, the volume check with success false."""
    partition = project.raw / f"pesanan_{DAY}.csv"
    partition.write_text(partition.read_text().splitlines()[0] + "\n")
    log = tmp_path / "openlineage.jsonl"
    run = run_dag_with_lineage(project, {"type": "file", "log_file_path": str(log),
                                         "append": True}, TOKOKITA_VOLUME_CHECK="fail")
    assert run["state"] == "failed", run
    assert run["states"]["validate"] == "failed", run
    got = events(log)
    failed = got[("tokokita_orders_daily.validate", "FAIL")]
    assert ("tokokita_orders_daily.publish_gold", "COMPLETE") not in got
    for dataset in failed["inputs"]:
        facets = dataset["inputFacets"]
        assert facets["inputStatistics"]["rowCount"] == 0
        assertions = facets["dataQualityAssertions"]["assertions"]
        assert [(a["assertion"], a["success"]) for a in assertions] == [
            ("reconcile kota", True), ("daily aggregates", True), ("gold csv", True),
            ("volume", False)]
        assert "0 valid rows" in assertions[-1]["description"]
