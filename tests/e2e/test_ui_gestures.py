"""Every Airflow gesture on every state of a date (docs/operations.md), on a running Airflow.

The compose services run as local processes on throw-away PostgreSQL databases (metadata and
warehouse) and are driven through the REST API with a real login, as the UI drives them:
clear (a task alone, with downstream, the whole run), trigger (the form's defaults, a
partition key, `force`, `reset_attempts`), mark success, mark failed, delete. The
watermark, the manifests, the warehouse and the gold files are read to check what happened.

Dates are relative to today T in Jakarta when the module starts. The scheduled catch-up fires
for T-3 and T-2 only: the stack's schedule ends with the fire of T-2 (T-1 02:30), which is past
at any time of T, so no scheduled run can start while the module runs, whenever it starts.

| date | partition                       | used for                                            |
|------|---------------------------------|-----------------------------------------------------|
| T    | good                            | the form's defaults, should midnight pass meanwhile |
| T-1  | good                            | a trigger with the form's defaults processes it     |
| T-2  | none                            | missing: trigger and clear are skipped, no attempt  |
| T-3  | good, processed by its run      | clears of a done date; mark failed; delete          |
| T-4  | without the `kota` column       | fast failure, clear with attempts left, blocked,    |
|      |                                 | mark success, reset_attempts after the fix          |
| T-5  | 150,000 rows                    | two concurrent triggers of one date                 |
"""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, fire_time
from tokokita_etl.orders.pipeline import ORDERS

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
STAGES = ("extract", "transform", "load", "validate", "publish_gold")
NO_KOTA = ("order_id,order_ts,customer_id,produk,qty,harga_satuan,diskon\n"
           "TK-1,{day} 10:00:00,C1,Teh,1,1000,0\n")


def today_in_jakarta() -> date:
    return datetime.now(UTC).astimezone(ZoneInfo(JKT)).date()


class Dates:
    """T-1 .. T-5 (see the module docstring)."""

    def __init__(self, today: date) -> None:
        self.yesterday, self.missing, self.done, self.bad, self.big = (
            today - timedelta(days=n) for n in range(1, 6))


@pytest.fixture(scope="module")
def gestures(tmp_path_factory):
    """The running stack with its scheduled catch-up finished."""
    from devtools.samples import generate_partition

    today = today_in_jakarta()
    dates = Dates(today)
    # the last scheduled fire is T-1 02:30, already past: the two runs below are all there are
    stack = EphemeralStack(
        tmp_path_factory.mktemp("gestures"), start_date=dates.missing.isoformat(),
        end_date=fire_time(dates.missing).isoformat())
    try:
        stack.prepare()
        raw = stack.data / "raw"
        for day, rows in ((today, 40), (dates.yesterday, 40), (dates.done, 60),
                          (dates.big, 150_000)):
            generate_partition(raw / f"pesanan_{day}.csv", day, rows, seed=11)
        (raw / f"pesanan_{dates.bad}.csv").write_text(NO_KOTA.format(day=dates.bad))
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        scheduled = wait_for_runs(stack, "scheduled", 2)
        assert {r["partition_key"] for r in scheduled} == {str(dates.done), str(dates.missing)}
        yield stack, dates
    finally:
        stack.close()


def wait_for_runs(stack: EphemeralStack, run_type: str, count: int,
                  timeout: float = 120) -> list[dict]:
    from stack.rest import TERMINAL, wait_for

    def finished() -> list[dict] | None:
        runs = [r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == run_type]
        done = len(runs) >= count and all(r["state"] in TERMINAL for r in runs)
        return runs if done else None

    return wait_for(finished, timeout, 1, f"{count} {run_type} runs to finish")


def scheduled_run(stack: EphemeralStack, day: date) -> dict:
    return next(r for r in stack.api.dag_runs(DAG_ID)
                if r["run_type"] == "scheduled" and r["partition_key"] == str(day))


def trigger(stack: EphemeralStack, day: date, **conf) -> dict:
    """A manual run of partition `day` (its partition key) with the params `conf`, finished."""
    run = stack.api.trigger(DAG_ID, conf, partition_key=day.isoformat())
    assert run["partition_key"] == day.isoformat()
    return stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=180)


def clear(stack: EphemeralStack, run_id: str, task_ids: list[str], *, downstream: bool) -> dict:
    from stack.rest import TERMINAL, wait_for

    stack.api.clear_task_instances(DAG_ID, run_id, task_ids, only_failed=False,
                                   downstream=downstream)
    # the clear puts the run back in the queue (`reset_dag_runs`) before it answers
    wait_for(lambda: stack.api.dag_run(DAG_ID, run_id)["state"] not in TERMINAL, 10, 0.2,
             f"run {run_id} to be queued again by the clear")
    return stack.api.wait_run(DAG_ID, run_id, timeout=180)


def states(stack: EphemeralStack, run_id: str) -> dict[str, str]:
    return {t: ti["state"] for t, ti in stack.api.task_instances(DAG_ID, run_id).items()}


def entry(stack: EphemeralStack, day: date) -> dict:
    return stack.watermark().get(str(day), {})


def manifests(stack: EphemeralStack, day: date) -> list[dict]:
    folder = stack.data / "state" / "runs"
    paths = sorted(folder.glob(f"run-{day}-*.json"), key=lambda p: p.stat().st_mtime_ns)
    return [json.loads(p.read_text()) for p in paths]


def gold_bytes(stack: EphemeralStack, day: date) -> bytes:
    return (stack.data / "gold" / f"summary_harian_{day}.csv").read_bytes()


def test_clearing_any_stage_or_the_whole_succeeded_run_reprocesses_it_with_identical_results(
        gestures):
    """Clear is Airflow's re-run gesture: each clear of a done date's run re-runs the cleared
    tasks (success in the grid, not skipped) as a recorded reprocess, with the checksums and
    the gold bytes of an unchanged partition."""
    stack, dates = gestures
    run = scheduled_run(stack, dates.done)
    assert run["state"] == "success"
    # Airflow's id of a partitioned run: its fire time in UTC, then its partition key
    fired = fire_time(dates.done).astimezone(UTC).isoformat()
    assert run["dag_run_id"].startswith(f"scheduled__{fired}__{dates.done}__")
    before = entry(stack, dates.done)
    gold = gold_bytes(stack, dates.done)
    assert (before["status"], before["attempt"]) == ("success", 1)

    attempt = 1
    for stage in STAGES:  # each stage with downstream, as the clear dialog preselects
        finished = clear(stack, run["dag_run_id"], [stage], downstream=True)
        assert finished["state"] == "success", stage
        cleared = STAGES[STAGES.index(stage):]
        assert {t: states(stack, run["dag_run_id"])[t] for t in cleared} == \
            dict.fromkeys(cleared, "success"), stage
        attempt += 1
        after = entry(stack, dates.done)
        assert (after["status"], after["attempt"]) == ("success", attempt), stage
        assert "in_progress" not in after, stage
        assert after["checksums"] == before["checksums"], stage
        assert gold_bytes(stack, dates.done) == gold, stage
    finished = clear(stack, run["dag_run_id"], ["wait_for_raw_partition"], downstream=True)
    assert finished["state"] == "success"  # the whole run: the gate reprocesses the date
    assert set(states(stack, run["dag_run_id"]).values()) == {"success"}
    after = entry(stack, dates.done)
    assert (after["status"], after["attempt"]) == ("success", attempt + 1)
    assert after["checksums"] == before["checksums"]
    assert gold_bytes(stack, dates.done) == gold
    last = manifests(stack, dates.done)[-1]
    assert (last["status"], last["trigger"]) == ("success", f"airflow:{DAG_ID}:{run['dag_run_id']}")
    assert str(dates.done) in stack.warehouse_dates()
    claims = stack.data / "state" / "claims"
    assert list(claims.glob("*.json")) == []


def test_a_stage_cleared_alone_leaves_the_date_needing_a_re_run_once_its_run_ended(gestures):
    """Bug: a stage cleared without its downstream tasks claimed the date and its run ended
    without releasing the claim, so `status`, `due` and the status page said the date was
    being processed until the claim's TTL; docs/operations.md says it reads *needs re-run*
    once the run has ended. Bug: the status page then said that re-run "counts as failure
    1/3" while the next run recorded none: a clear is a person's gesture, never a failure of
    the partition. Clearing the whole run then reprocesses it."""
    from tokokita_etl.runner.status import status_rows

    stack, dates = gestures
    run = scheduled_run(stack, dates.done)
    finished = clear(stack, run["dag_run_id"], ["load"], downstream=False)
    assert finished["state"] == "success"
    claims = stack.data / "state" / "claims"
    assert list(claims.glob("*.json")) == []  # released when the run ended
    intent = entry(stack, dates.done)["in_progress"]  # the load's intent: no outcome recorded
    assert intent["stopped"] == "its run ended with a stage cleared alone or marked", intent
    failures = entry(stack, dates.done)["failures"]
    [row] = [r for r in status_rows(ORDERS, stack.settings()) if r["date"] == str(dates.done)]
    assert (row["state"], row["label"]) == ("needs re-run", "needs re-run"), row
    assert "the next run records no failure" in row["reason"], row

    attempt = entry(stack, dates.done)["attempt"]
    finished = clear(stack, run["dag_run_id"], ["wait_for_raw_partition"], downstream=True)
    assert finished["state"] == "success"
    after = entry(stack, dates.done)
    assert after["status"] == "success" and "in_progress" not in after
    assert after["attempt"] >= attempt + 1 and after["failures"] == failures == 0
    [row] = [r for r in status_rows(ORDERS, stack.settings()) if r["date"] == str(dates.done)]
    assert row["label"] == "done", row


def test_clearing_a_done_run_over_a_corrected_partition_loads_and_publishes_the_new_result(
        gestures):
    from devtools.samples import generate_partition

    stack, dates = gestures
    run = scheduled_run(stack, dates.done)
    before = entry(stack, dates.done)
    gold = gold_bytes(stack, dates.done)
    generate_partition(stack.data / "raw" / f"pesanan_{dates.done}.csv", dates.done, 45, seed=23)
    finished = clear(stack, run["dag_run_id"], ["load"], downstream=True)
    assert finished["state"] == "success"
    after = entry(stack, dates.done)
    assert (after["status"], after["rows"]["extracted"]) == ("success", 45)
    assert after["checksums"] != before["checksums"]
    assert gold_bytes(stack, dates.done) != gold


def test_a_date_reprocessed_many_times_then_failing_once_is_not_blocked(gestures):
    """Regression: `attempt` counted successes too, so a date cleared or forced twice was
    blocked 3/3 by its first failure; blocking counts the failures since the last success."""
    from devtools.samples import generate_partition

    stack, dates = gestures
    run = scheduled_run(stack, dates.done)
    forced = trigger(stack, dates.done, force=True)
    assert forced["state"] == "success"
    before = entry(stack, dates.done)
    assert before["attempt"] >= 4 and before["failures"] == 0  # the clears and the force
    raw = stack.data / "raw" / f"pesanan_{dates.done}.csv"
    raw.write_text(NO_KOTA.format(day=dates.done))
    failed = clear(stack, run["dag_run_id"], ["wait_for_raw_partition"], downstream=True)
    assert failed["state"] == "failed"
    tries = stack.api.tries(DAG_ID, run["dag_run_id"], "extract")
    assert tries[-1]["state"] == "failed"  # the partition's fault: not retried by Airflow
    after = entry(stack, dates.done)
    assert (after["status"], after["attempt"], after["failures"]) == (
        "failed", before["attempt"] + 1, 1)
    from tokokita_etl.runner.status import date_states

    [row] = date_states(ORDERS, stack.settings(), datetime.now(UTC), dates=[dates.done])
    assert (row["state"], row["failures"]) == ("failed", 1)  # not blocked
    generate_partition(raw, dates.done, 60, seed=11)
    fixed = clear(stack, run["dag_run_id"], ["wait_for_raw_partition"], downstream=True)
    assert fixed["state"] == "success"  # not blocked: the next run processes it
    assert (entry(stack, dates.done)["status"], entry(stack, dates.done)["failures"]) == (
        "success", 0)


def test_trigger_with_the_forms_defaults_processes_yesterday_in_jakarta(gestures):
    """The trigger form's defaults, as Airflow 3.3 sends them for a partitioned DAG (no
    logical date, no partition key, the params' defaults), process yesterday in Jakarta.
    Regression: the form's default logical date ("now") made a task-less green run."""
    stack, _ = gestures
    before = today_in_jakarta() - timedelta(days=1)  # T-1, or T once midnight has passed
    run = stack.api.request("POST", f"/dags/{DAG_ID}/dagRuns", expect=(200,), json={
        "logical_date": None, "partition_key": None,
        "conf": {"force": False, "reset_attempts": False}})
    assert (run["logical_date"], run["partition_key"]) == (None, None)
    finished = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=180)
    after = today_in_jakarta() - timedelta(days=1)
    assert finished["state"] == "success"
    assert states(stack, run["dag_run_id"])["publish_gold"] == "success"
    assert "success" in {entry(stack, day).get("status") for day in (before, after)}


def test_a_missing_partition_is_skipped_on_trigger_and_on_clear_without_an_attempt(gestures):
    stack, dates = gestures
    run = trigger(stack, dates.missing)
    assert run["state"] == "success"
    assert states(stack, run["dag_run_id"])["wait_for_raw_partition"] == "skipped"
    finished = clear(stack, run["dag_run_id"], ["extract"], downstream=True)
    assert finished["state"] == "success"
    assert states(stack, run["dag_run_id"])["extract"] == "skipped"
    assert entry(stack, dates.missing) == {}


def test_a_bad_partition_fails_in_seconds_then_blocks_and_reset_attempts_recovers(gestures):
    stack, dates = gestures
    started = time.monotonic()
    run = trigger(stack, dates.bad)
    seconds_to_failure = time.monotonic() - started
    assert run["state"] == "failed"
    extract = stack.api.tries(DAG_ID, run["dag_run_id"], "extract")
    assert [t["state"] for t in extract] == ["failed"]  # the partition's fault: no retry
    first = entry(stack, dates.bad)
    assert (first["status"], first["attempt"], first["failed_stage"]) == ("failed", 1, "extract")
    assert "kota" in first["error"]
    print(f"\nbad partition to failed run: {seconds_to_failure:.1f} s (trigger included)")

    # clear the failed stage with attempts left: it runs again, one more attempt
    assert clear(stack, run["dag_run_id"], ["extract"], downstream=True)["state"] == "failed"
    assert entry(stack, dates.bad)["attempt"] == 2

    # mark the failed run as success: Airflow's record only, the date is still failed and due
    stack.api.request("PATCH", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}", expect=(200,),
                      json={"state": "success"})
    assert entry(stack, dates.bad)["status"] == "failed"
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.stores import state_store

    settings = stack.settings()
    assert dates.bad in due_runs(state_store(settings).read(), datetime.now(UTC),
                                 ORDERS.raw.present(settings), settings.lookback_days,
                                 settings.max_attempts, tz=settings.timezone)

    assert trigger(stack, dates.bad)["state"] == "failed"  # attempt 3
    blocked = trigger(stack, dates.bad, force=True)
    assert blocked["state"] == "failed"
    assert states(stack, blocked["dag_run_id"])["check_watermark"] == "failed"
    assert entry(stack, dates.bad)["attempt"] == 3
    refused = manifests(stack, dates.bad)[-1]
    assert refused["status"] == "blocked"
    assert f'partition key {dates.bad} and {{"reset_attempts": true}}' in refused["error"]
    # a cleared stage of the blocked date fails at once, without a 4th attempt
    assert clear(stack, blocked["dag_run_id"], ["extract"], downstream=True)["state"] == "failed"
    assert entry(stack, dates.bad)["attempt"] == 3

    from devtools.samples import generate_partition

    generate_partition(stack.data / "raw" / f"pesanan_{dates.bad}.csv", dates.bad, 30, seed=5)
    assert trigger(stack, dates.bad, reset_attempts=True)["state"] == "success"
    fixed = entry(stack, dates.bad)
    # the reset set the failures to 0 and kept the total (three failures, then the success)
    assert (fixed["status"], fixed["attempt"], fixed["failures"]) == ("success", 4, 0)
    assert "error" not in fixed and "failed_stage" not in fixed
    assert fixed["resets"][-1]["previous_failures"] == 3


def test_two_concurrent_triggers_of_one_date_one_processes_the_other_is_skipped(gestures):
    stack, dates = gestures
    first = stack.api.trigger(DAG_ID, partition_key=str(dates.big))
    second = stack.api.trigger(DAG_ID, partition_key=str(dates.big))
    runs = [stack.api.wait_run(DAG_ID, r["dag_run_id"], timeout=240) for r in (first, second)]
    assert [r["state"] for r in runs] == ["success", "success"]  # never a red run
    published = [r for r in runs if states(stack, r["dag_run_id"])["publish_gold"] == "success"]
    assert len(published) == 1
    other = next(r for r in runs if r is not published[0])
    assert states(stack, other["dag_run_id"])["check_watermark"] == "skipped"
    done = entry(stack, dates.big)
    assert (done["status"], done["attempt"]) == ("success", 1)
    statuses = [m["status"] for m in manifests(stack, dates.big)]
    assert sorted(statuses) == ["skipped", "success"]
    skipped = next(m for m in manifests(stack, dates.big) if m["status"] == "skipped")
    holder = f"airflow:{DAG_ID}:{published[0]['dag_run_id']}"
    assert f"{dates.big} is being processed by {holder}" in skipped["error"]
    claims = stack.data / "state" / "claims"
    assert list(claims.glob("*.json")) == []  # the claim did not outlive its run


def test_mark_failed_and_delete_leave_the_watermark_warehouse_and_gold_alone(gestures):
    stack, dates = gestures
    run = scheduled_run(stack, dates.done)
    before = entry(stack, dates.done)
    stack.api.request("PATCH", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}", expect=(200,),
                      json={"state": "failed"})
    assert entry(stack, dates.done) == before
    stack.api.request("DELETE", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}", expect=(204,))
    assert entry(stack, dates.done) == before
    assert str(dates.done) in stack.warehouse_dates()
    assert str(dates.done) in stack.gold_dates()
