"""Runs of one date (tokokita_etl.runner.claims): claims, how a refused run is recorded, and the
watermark record of an outcome; on real files in a temporary project folder."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tokokita_etl.errors import EXIT_BLOCKED, BlockedError, ConcurrentRunError, StateError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.pipelines import load_settings
from tokokita_etl.runner.claims import (
    claim_date,
    claim_started,
    claim_to_change,
    read_claim,
    reconcile_intent,
    release_date,
)
from tokokita_etl.runner.liveness import cli_holder_finished, cli_owner
from tokokita_etl.runner.outcomes import BLOCKED, SKIPPED, finish_failure, finish_refused
from tokokita_etl.runner.policy import Action
from tokokita_etl.runner.sequence import gate
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import FAILED, SUCCESS
from tokokita_etl.warehouse.database import Warehouse

DAY = date(2026, 11, 2)
NOW = datetime(2026, 11, 3, 19, 30, tzinfo=UTC)
HOLDER = "airflow:tokokita_orders_daily:scheduled__2026-11-02"
OTHER = "airflow:tokokita_orders_daily:manual__2026-11-03"


def never_finished(owner: str) -> bool | None:
    """A holder check that reports every holder alive."""
    return False


def make_settings(root: Path, **overrides) -> OrdersSettings:
    """OrdersSettings whose folders are all under `root` (no config file, no environment)."""
    values = {"raw_dir": "data/raw", "gold_dir": "data/gold", "quarantine_dir": "data/quarantine",
              "state_dir": "data/state", "staging_dir": "data/staging",
              "warehouse_url": "sqlite:///data/warehouse/tokokita.db", **overrides}
    return load_settings(env={}, overrides=values, cwd=root)


@pytest.fixture
def settings(tmp_path) -> OrdersSettings:
    return make_settings(tmp_path)


def write_claim(settings: OrdersSettings, day: date, text: str) -> Path:
    path = state_store(settings).claim_path(day)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- claims -------------------------------------------------------------------------------------

def test_settings_of_these_tests_point_into_the_temporary_folder(settings, tmp_path):
    assert settings.state_dir == tmp_path / "data" / "state"
    assert state_store(settings).claim_path(DAY) == tmp_path / "data/state/claims/2026-11-02.json"


def test_a_claim_records_its_owner_start_and_expiry_after_claim_ttl_hours(tmp_path):
    settings = make_settings(tmp_path, claim_ttl_hours=4)
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    claim = read_claim(settings, DAY)
    assert (claim.owner, claim.since, claim.expires) == (HOLDER, NOW, NOW + timedelta(hours=4))


def test_a_second_owner_gets_concurrent_run_error_naming_the_holder(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    with pytest.raises(ConcurrentRunError) as raised:
        claim_date(settings, DAY, OTHER, NOW + timedelta(minutes=5), never_finished)
    message = str(raised.value)
    assert f"{DAY} is being processed by {HOLDER} since 2026-11-03T19:30:00+00:00" in message
    assert str(state_store(settings).claim_path(DAY)) in message
    assert read_claim(settings, DAY).owner == HOLDER


def test_the_same_owner_reclaims_its_date_and_keeps_its_start(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    later = NOW + timedelta(minutes=10)
    claim_date(settings, DAY, HOLDER, later, never_finished)  # a retry of the same run
    claim = read_claim(settings, DAY)
    assert (claim.owner, claim.since) == (HOLDER, NOW)
    assert claim_started(settings, DAY, HOLDER, later) == NOW
    assert claim_started(settings, DAY, OTHER, later) == later


def test_an_expired_claim_is_taken_over(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    expiry = NOW + timedelta(hours=settings.claim_ttl_hours)
    with pytest.raises(ConcurrentRunError):
        claim_date(settings, DAY, OTHER, expiry - timedelta(seconds=1), never_finished)
    claim_date(settings, DAY, OTHER, expiry, never_finished)
    claim = read_claim(settings, DAY)
    assert (claim.owner, claim.since) == (OTHER, expiry)


def test_a_claim_whose_holder_has_finished_is_taken_over_at_once(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    asked = []

    def finished(owner: str) -> bool:
        asked.append(owner)
        return True

    claim_date(settings, DAY, OTHER, NOW + timedelta(minutes=1), finished)
    assert asked == [HOLDER]
    assert read_claim(settings, DAY).owner == OTHER


def test_a_holder_that_cannot_be_told_keeps_its_claim_until_it_expires(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    with pytest.raises(ConcurrentRunError):
        claim_date(settings, DAY, OTHER, NOW + timedelta(minutes=1), lambda owner: None)


def test_claims_of_different_dates_do_not_conflict(settings):
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    claim_date(settings, DAY + timedelta(days=1), OTHER, NOW, never_finished)
    assert read_claim(settings, DAY + timedelta(days=1)).owner == OTHER


def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_cli_holder_finished_is_true_for_a_dead_cli_process_on_this_host():
    owner = f"cli:{socket.gethostname()}:{dead_pid()}:2026-11-03T19:30:00+00:00"
    assert cli_holder_finished(owner) is True


def test_cli_holder_finished_is_false_for_a_live_cli_process_on_this_host():
    assert cli_holder_finished(cli_owner(NOW)) is False
    assert cli_owner(NOW) == f"cli:{socket.gethostname()}:{os.getpid()}:2026-11-03T19:30:00+00:00"


@pytest.mark.parametrize("owner", [
    "cli:another-host.example:1:2026-11-03T19:30:00+00:00",
    HOLDER,
    "cli",
    "someone-else",
])
def test_cli_holder_finished_cannot_tell_for_other_hosts_and_other_owners(owner):
    assert cli_holder_finished(owner) is None


def test_a_claim_held_by_a_dead_cli_process_is_taken_over_by_default(settings):
    dead = f"cli:{socket.gethostname()}:{dead_pid()}:2026-11-03T19:30:00+00:00"
    claim_date(settings, DAY, dead, NOW)
    claim_date(settings, DAY, OTHER, NOW + timedelta(minutes=1))
    assert read_claim(settings, DAY).owner == OTHER


def test_a_claim_held_by_a_live_cli_process_is_not_taken_over_by_default(settings):
    claim_date(settings, DAY, cli_owner(NOW), NOW)
    with pytest.raises(ConcurrentRunError, match="being processed by cli:"):
        claim_date(settings, DAY, OTHER, NOW + timedelta(minutes=1))


def valid_claim(**changes) -> dict:
    body = {"owner": HOLDER, "since": "2026-11-03T19:30:00+00:00",
            "expires": "2026-11-04T01:30:00+00:00"}
    body.update(changes)
    return body


DAMAGED = [
    pytest.param("", "invalid JSON", id="empty"),
    pytest.param("{", "invalid JSON", id="truncated"),
    pytest.param("{}", "field 'owner'", id="empty-object"),
    pytest.param("[]", "expected an object", id="list"),
    pytest.param(json.dumps(valid_claim(owner=42)), "field 'owner'", id="owner-not-a-string"),
    pytest.param(json.dumps(valid_claim(owner="")), "field 'owner'", id="owner-empty"),
    pytest.param(json.dumps({"owner": HOLDER, "since": "2026-11-03T19:30:00+00:00"}),
                 "field 'expires'", id="no-expires"),
    pytest.param(json.dumps(valid_claim(expires="tomorrow")), "field 'expires' is not an ISO 8601",
                 id="expires-not-iso"),
    pytest.param(json.dumps(valid_claim(expires="2026-11-04T01:30:00")),
                 "field 'expires' has no UTC offset", id="expires-naive"),
    pytest.param(json.dumps(valid_claim(since="2026-11-03 19:30")), "field 'since' has no UTC offset",
                 id="since-naive"),
]


@pytest.mark.parametrize(("text", "problem"), DAMAGED)
def test_a_damaged_claim_file_is_a_state_error_naming_the_file_and_the_field(settings, text,
                                                                             problem):
    """Regression: an empty claim caught mid-write let two runs of one date proceed.

    A claim file that cannot be read as a claim must stop a run, never read as "no claim".
    """
    path = write_claim(settings, DAY, text)
    with pytest.raises(StateError) as read:
        read_claim(settings, DAY)
    assert str(path) in str(read.value)
    assert problem in str(read.value)
    with pytest.raises(StateError) as claimed:
        claim_date(settings, DAY, OTHER, NOW, lambda owner: True)
    assert str(path) in str(claimed.value)
    assert path.read_text(encoding="utf-8") == text  # left for a person to look at


def test_an_unreadable_claim_file_is_a_state_error_naming_the_file(settings):
    path = state_store(settings).claim_path(DAY)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(StateError, match="cannot read the claim") as raised:
        claim_date(settings, DAY, OTHER, NOW, never_finished)
    assert str(path) in str(raised.value)


def test_release_only_removes_ones_own_claim(settings):
    release_date(settings, DAY, HOLDER)  # no claim: nothing to do
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    release_date(settings, DAY, OTHER)
    assert read_claim(settings, DAY).owner == HOLDER
    release_date(settings, DAY, HOLDER)
    assert read_claim(settings, DAY) is None
    assert not state_store(settings).claim_path(DAY).exists()


def test_release_leaves_a_damaged_claim_file_alone(settings):
    path = write_claim(settings, DAY, "")
    release_date(settings, DAY, HOLDER)
    assert path.exists()


def test_eight_threads_racing_for_one_date_have_exactly_one_winner(settings):
    barrier = threading.Barrier(8)
    outcomes: dict[str, str] = {}

    def race(n: int) -> None:
        owner = f"airflow:dag:run-{n}"
        barrier.wait()
        try:
            claim_date(settings, DAY, owner, NOW, never_finished)
            outcomes[owner] = "won"
        except ConcurrentRunError:
            outcomes[owner] = "refused"

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [owner for owner, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8
    assert len(winners) == 1
    assert read_claim(settings, DAY).owner == winners[0]


def _claim_in_process(root: str, n: int, barrier, results) -> None:
    settings = make_settings(Path(root))
    barrier.wait()
    try:
        claim_date(settings, DAY, f"airflow:dag:run-{n}", NOW, never_finished)
        results.put((n, "won"))
    except ConcurrentRunError:
        results.put((n, "refused"))


def test_eight_processes_racing_for_one_date_have_exactly_one_winner(settings, tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(8), context.Queue()
    processes = [context.Process(target=_claim_in_process, args=(str(tmp_path), n, barrier, results))
                 for n in range(8)]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=60) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    winners = [n for n, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8
    assert len(winners) == 1
    assert read_claim(settings, DAY).owner == f"airflow:dag:run-{winners[0]}"


# -- the gate -----------------------------------------------------------------------------------

def test_the_gate_claims_a_date_it_runs_and_records_a_reset_with_who_asked(settings):
    store = state_store(settings)
    for _ in range(3):
        store.record(DAY, FAILED, {"error": "boom", "failed_stage": "load"}, NOW)
    blocked = gate(ORDERS, settings, DAY, force=False, reset_attempts=False, now=NOW, by=HOLDER,
                   holder_finished=never_finished)
    assert (blocked.action, blocked.attempt) == (Action.BLOCKED, 3)
    assert read_claim(settings, DAY) is None  # a blocked run claims nothing
    reset = gate(ORDERS, settings, DAY, force=False, reset_attempts=True, now=NOW, by=HOLDER,
                 holder_finished=never_finished)
    # the failures are reset; the total of recorded outcomes is kept
    assert (reset.action, reset.attempt, reset.reset_from) == (Action.RUN, 3, 3)
    assert read_claim(settings, DAY).owner == HOLDER
    assert store.read().entry(DAY)["failures"] == 0
    assert store.read().entry(DAY)["resets"] == [
        {"at": "2026-11-03T19:30:00+00:00", "by": HOLDER, "previous_attempt": 3,
         "previous_failures": 3}]


def test_a_gate_refused_by_the_claim_does_not_reset_attempts(settings):
    store = state_store(settings)
    for _ in range(3):
        store.record(DAY, FAILED, {"error": "boom"}, NOW)
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    with pytest.raises(ConcurrentRunError):
        gate(ORDERS, settings, DAY, force=False, reset_attempts=True, now=NOW, by=OTHER,
             holder_finished=never_finished)
    assert store.read().attempts(DAY) == 3
    assert "resets" not in store.read().entry(DAY)


# -- recording outcomes -------------------------------------------------------------------------

def stage_validate(settings: OrdersSettings, day: date) -> Path:
    """The holder's staged validation record (as the validate stage leaves it)."""
    path = settings.staging_path(day) / "validate.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fact_rows": 8, "duration_ms": 3}), encoding="utf-8")
    return path


def test_a_refused_run_leaves_the_holders_staged_validation_in_place(settings):
    """Regression: a refused second run deleted the holder's validate record, so the holder's
    publish failed."""
    validate = stage_validate(settings, DAY)
    claim_date(settings, DAY, HOLDER, NOW, never_finished)
    with pytest.raises(ConcurrentRunError) as refused:
        claim_date(settings, DAY, OTHER, NOW, never_finished)
    outcome = finish_refused(settings, DAY, refused.value, status=SKIPPED, started=NOW, now=NOW,
                             trigger=OTHER)
    assert validate.exists()
    assert json.loads(validate.read_text())["fact_rows"] == 8
    manifest = outcome.body
    assert manifest["status"] == "skipped"
    assert manifest["trigger"] == OTHER
    assert HOLDER in manifest["error"]
    assert not settings.state_file.exists()  # the watermark is untouched
    assert read_claim(settings, DAY).owner == HOLDER


def test_a_blocked_refusal_writes_a_blocked_manifest_with_exit_3_and_no_attempt(settings):
    store = state_store(settings)
    for _ in range(3):
        store.record(DAY, FAILED, {"error": "boom"}, NOW)
    validate = stage_validate(settings, DAY)
    outcome = finish_refused(settings, DAY, BlockedError("2026-11-02 is blocked"), status=BLOCKED,
                             started=NOW, now=NOW, trigger=OTHER)
    manifest = outcome.body
    assert (manifest["status"], manifest["exit_code"], manifest["attempt"]) == ("blocked",
                                                                                EXIT_BLOCKED, 3)
    assert outcome.run_id == "run-2026-11-02-193000"
    assert store.read().attempts(DAY) == 3
    assert validate.exists()


def test_the_holders_failure_drops_its_staged_validation_so_nothing_unvalidated_is_published(
        settings):
    validate = stage_validate(settings, DAY)
    outcome = finish_failure(ORDERS, settings, DAY, RuntimeError("boom"), stage="publish_gold",
                             started=NOW, now=NOW, trigger=HOLDER)
    assert not validate.exists()
    assert (outcome.status, outcome.attempt) == ("failed", 1)
    assert state_store(settings).read().entry(DAY)["failed_stage"] == "publish_gold"


def test_manifests_of_runs_started_in_the_same_second_are_never_overwritten(settings):
    error = ConcurrentRunError("held")
    first = finish_refused(settings, DAY, error, status=SKIPPED, started=NOW, now=NOW,
                           trigger=OTHER)
    second = finish_refused(settings, DAY, error, status=SKIPPED, started=NOW, now=NOW,
                            trigger=OTHER)
    assert first.manifest != second.manifest
    assert second.run_id == "run-2026-11-02-193000-2"


def test_a_recorded_success_clears_a_stale_error_failed_stage_and_warnings(settings):
    store = state_store(settings)
    store.record(DAY, FAILED, {"error": "warehouse locked", "failed_stage": "load",
                               "warnings": ["2026-11-02: 0 valid rows"]}, NOW)
    assert store.read().entry(DAY)["warnings"] == ["2026-11-02: 0 valid rows"]
    attempt = store.record(DAY, SUCCESS, {"rows": {"fact": 8}, "warnings": []},
                           NOW + timedelta(hours=1))
    entry = store.read().entry(DAY)
    assert attempt == 2
    assert entry["status"] == "success"
    assert not {"error", "failed_stage", "warnings"} & set(entry)
    assert entry["rows"] == {"fact": 8}


def test_a_recorded_failure_replaces_the_previous_runs_outcome_fields(settings):
    store = state_store(settings)
    store.record(DAY, SUCCESS, {"warnings": ["low volume"]}, NOW)
    store.record(DAY, FAILED, {"error": "checksum mismatch", "failed_stage": "validate"}, NOW)
    entry = store.read().entry(DAY)
    assert entry["error"] == "checksum mismatch"
    assert "warnings" not in entry


# -- claim_to_change: the intent before any change, whatever was reconciled --------------------

def test_a_stage_that_claims_a_date_whose_intent_another_gate_reconciled_writes_its_own_intent(
        settings):
    """Regression guard for the rule "every run that changes a store writes its intent first":
    a stage task that claims the date on its own (a retry, a cleared task) after another gate
    had turned its run's intent into a failure changed the warehouse with no intent of its
    own in the entry."""
    store = state_store(settings)
    Warehouse.from_settings(settings).ensure_schema()  # (the success's run made it)
    store.record(DAY, SUCCESS, {}, NOW)
    assert gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by=HOLDER,
                holder_finished=never_finished).action is Action.RUN
    release_date(settings, DAY, HOLDER)  # its task failed: the failure callback freed D
    reconcile_intent(ORDERS, settings, DAY, NOW, never_finished, owner=OTHER)  # another run's gate
    assert store.read().intent(DAY) is None
    assert claim_to_change(ORDERS, settings, DAY, HOLDER, "load", NOW, never_finished) is None
    intent = store.read().intent(DAY)
    assert (intent["run"], intent["stage"]) == (HOLDER, "load")
    assert read_claim(settings, DAY).owner == HOLDER


def test_claim_to_change_records_a_gone_runs_intent_as_interrupted_instead_of_overwriting_it(
        settings):
    store = state_store(settings)
    store.record(DAY, SUCCESS, {}, NOW)
    store.begin(DAY, OTHER, "extract", NOW)  # OTHER is gone: it holds no claim
    claim_to_change(ORDERS, settings, DAY, HOLDER, "extract", NOW, never_finished)
    entry = store.read().entry(DAY)
    assert entry["status"] == FAILED and entry["failures"] == 1
    assert OTHER in entry["error"] and entry["in_progress"]["run"] == HOLDER


def test_claim_to_change_keeps_the_runs_own_intent_and_its_start(settings):
    store = state_store(settings)
    claim_to_change(ORDERS, settings, DAY, HOLDER, "extract", NOW, never_finished)
    later = NOW + timedelta(minutes=5)
    claim_to_change(ORDERS, settings, DAY, HOLDER, "load", later, never_finished)  # its retry
    assert store.read().intent(DAY) == {"run": HOLDER, "stage": "extract",
                                        "since": NOW.isoformat(timespec="seconds")}
    assert "failures" not in store.read().entry(DAY)  # nothing was recorded as a failure
