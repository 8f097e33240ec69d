"""The watermark (state.json): recording, resets, corrupt files, and concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, date, datetime

import pytest

from tests.conftest import clean_env
from tokokita_etl.errors import StateError
from tokokita_etl.runner.policy import failures_since_success
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, SUCCESS

DAY = date(2026, 11, 2)
NOW = datetime(2026, 11, 3, 19, 30, tzinfo=UTC)


def test_a_missing_state_file_reads_as_an_empty_watermark_and_is_not_created(tmp_path):
    store = StateStore(tmp_path / "state" / "state.json", "orders")
    state = store.read()
    assert state.runs == {}
    assert state.attempts(DAY) == 0
    assert not state.has_success(DAY)
    assert not store.path.exists()


def test_every_recorded_success_and_failure_adds_one_attempt(tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    assert store.record(DAY, FAILED, {"error": "boom", "failed_stage": "load"}, NOW) == 1
    assert store.record(DAY, FAILED, {"error": "boom again"}, NOW) == 2
    assert store.record(DAY, SUCCESS, {"rows": {"fact": 8}, "attempt": 99}, NOW) == 3
    entry = store.read().entry(DAY)
    assert entry["attempt"] == 3  # a payload cannot overwrite the attempt counter
    assert entry["status"] == "success"
    assert entry["rows"] == {"fact": 8}
    assert "error" not in entry  # a success clears the previous failure's message
    assert entry["updated_at"] == "2026-11-03T19:30:00+00:00"
    data = json.loads(store.path.read_text())
    assert data["pipeline"] == "orders"


def test_entries_are_kept_in_date_order(tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    for day in (date(2026, 11, 4), date(2026, 11, 2), date(2026, 11, 3)):
        store.record(day, SUCCESS, {}, NOW)
    assert list(json.loads(store.path.read_text())["runs"]) == [
        "2026-11-02", "2026-11-03", "2026-11-04"]


def test_reset_attempts_zeroes_the_failures_keeps_the_total_and_records_when_by_whom_and_from_what(
        tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    for _ in range(3):
        store.record(DAY, FAILED, {"error": "x"}, NOW)
    later = datetime(2026, 11, 4, 1, 0, tzinfo=UTC)
    assert store.reset_attempts(DAY, now=later, by="cli") == 3
    entry = store.read().entry(DAY)
    assert (entry["attempt"], entry["failures"]) == (3, 0)
    assert entry["status"] == "failed"
    assert entry["resets"] == [{"at": "2026-11-04T01:00:00+00:00", "by": "cli",
                                "previous_attempt": 3, "previous_failures": 3}]
    store.record(DAY, FAILED, {}, later)
    store.reset_attempts(DAY, now=later, by="airflow:manual__1")
    assert [(r["previous_attempt"], r["previous_failures"])
            for r in store.read().entry(DAY)["resets"]] == [(3, 3), (4, 1)]


def test_failures_count_since_the_last_success_and_the_attempt_total_counts_every_outcome(
        tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    outcomes = [SUCCESS, SUCCESS, SUCCESS, FAILED, FAILED, SUCCESS, FAILED]
    seen = []
    for n, status in enumerate(outcomes, start=1):
        assert store.record(DAY, status, {}, NOW) == n
        entry = store.read().entry(DAY)
        seen.append((entry["attempt"], entry["failures"]))
    assert seen == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 2), (6, 0), (7, 1)]


@pytest.mark.parametrize(("entry", "failures"), [
    pytest.param({"status": FAILED, "attempt": 2}, 2, id="failed"),
    pytest.param({"status": SUCCESS, "attempt": 4}, 0, id="success"),
    pytest.param({"attempt": 1}, 0, id="no-outcome"),
])
def test_an_entry_written_before_the_failures_field_counts_on_from_its_derived_value(
        tmp_path, entry, failures):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"runs": {DAY.isoformat(): entry}}), encoding="utf-8")
    store = StateStore(path, "orders")
    assert failures_since_success(store.read().entry(DAY)) == failures
    store.record(DAY, FAILED, {}, NOW)
    assert store.read().entry(DAY)["failures"] == failures + 1


def test_an_update_that_changes_nothing_does_not_rewrite_the_file(tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    store.record(DAY, SUCCESS, {}, NOW)
    before = (store.path.read_bytes(), store.path.stat().st_mtime_ns, store.path.stat().st_ino)
    time.sleep(0.01)
    assert store.update(lambda data: len(data["runs"])) == 1
    assert (store.path.read_bytes(), store.path.stat().st_mtime_ns, store.path.stat().st_ino) == before


CORRUPT = [
    pytest.param(b'{"pipeline": "x", "runs": {', "invalid JSON", id="truncated"),
    pytest.param(b"", "invalid JSON", id="empty"),
    pytest.param(b"[]", "expected an object", id="list"),
    pytest.param(b'{"runs": []}', "expected an object", id="runs-not-object"),
    pytest.param(b'{"pipeline": "x"}', "expected an object", id="no-runs"),
    pytest.param(b'{"runs": {"02-11-2026": {"attempt": 1}}}', "bad date key", id="bad-key"),
    pytest.param(b'{"runs": {"2026-11-02": {"attempt": "1"}}}', "bad entry", id="attempt-text"),
    pytest.param(b'{"runs": {"2026-11-02": 3}}', "bad entry", id="entry-not-object"),
    pytest.param(b'{"runs": {}}\xff', "cannot read", id="not-utf8"),
]


@pytest.mark.parametrize(("content", "fragment"), CORRUPT)
def test_a_corrupt_watermark_is_an_error_naming_the_file_and_is_never_reset(
        tmp_path, content, fragment):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    store = StateStore(path, "orders")
    for action in (store.read,
                   lambda: store.record(DAY, SUCCESS, {}, NOW),
                   lambda: store.reset_attempts(DAY, now=NOW, by="test")):
        with pytest.raises(StateError) as err:
            action()
        assert str(path) in str(err.value)
        assert fragment in str(err.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.lock"]


WORKER = r"""
import sys, time
from datetime import UTC, date, datetime
from pathlib import Path
from tokokita_etl.runner.stores.files import StateStore

path, day, rounds, go = sys.argv[1], date.fromisoformat(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
shared = date(2026, 1, 1)
store = StateStore(Path(path), "orders")
while not go.exists():
    time.sleep(0.001)
for i in range(rounds):
    now = datetime.now(UTC)
    store.record(day, "failed" if i % 2 else "success", {"rows": {"fact": i}}, now)
    if i % 5 == 0:
        store.record(shared, "failed", {"by": str(day)}, now)
"""


def test_concurrent_processes_recording_different_dates_lose_no_update(tmp_path):
    processes, rounds = 8, 50
    path = tmp_path / "state" / "state.json"
    go = tmp_path / "go"
    days = [date(2026, 11, 1 + i) for i in range(processes)]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), day.isoformat(),
                                 str(rounds), str(go)],
                                env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
               for day in days]
    go.touch()
    snapshots = 0
    while any(w.poll() is None for w in workers):
        if path.exists():  # a reader never sees a half-written file
            json.loads(path.read_text(encoding="utf-8"))
            snapshots += 1
        time.sleep(0.002)
    for w in workers:
        _, err = w.communicate()
        assert w.returncode == 0, err
    state = StateStore(path, "orders").read()
    for day in days:
        assert state.attempts(day) == rounds, day
        assert state.entry(day)["rows"] == {"fact": rounds - 1}
    assert state.attempts(date(2026, 1, 1)) == processes * rounds // 5
    assert len(state.runs) == processes + 1
    assert snapshots > 0
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
