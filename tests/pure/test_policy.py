"""The attempts policy (tokokita_etl.runner.policy): every decision about one partition date."""

from __future__ import annotations

import errno
import json
import re
import tempfile
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tokokita_etl.errors import (
    BlockedError,
    ConcurrentRunError,
    ConfigError,
    DataError,
    EtlError,
    MissingPartitionError,
    StateError,
    ValidationError,
    WarehouseError,
)
from tokokita_etl.orders.contract import partition_path
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.orders.validate import VOLUME_HISTORY_DAYS, volume_warnings
from tokokita_etl.runner.policy import (
    Action,
    ErrorKind,
    SensorAction,
    at_max_attempts,
    blocked_message,
    classify,
    counts_as_attempt,
    days_back,
    decide,
    due_runs,
    failures_since_success,
    gate_decision,
    is_blocked,
    outside_lookback,
    retry_decision,
    run_conf_problem,
    sensor_decision,
    stage_decision,
    unblock_hint,
)
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, SUCCESS, Watermark

JKT = ZoneInfo("Asia/Jakarta")
DAY = date(2026, 11, 2)
MAX = 3


def at(text: str) -> datetime:
    """A Jakarta wall-clock time."""
    return datetime.fromisoformat(text).replace(tzinfo=JKT)


def one(day: date, **entry) -> Watermark:
    return Watermark({"runs": {day.isoformat(): entry}})


EMPTY = Watermark({"runs": {}})


# -- decide -------------------------------------------------------------------------------------

def test_a_date_never_processed_runs():
    decision = decide(EMPTY, DAY, max_attempts=MAX)
    assert decision.action is Action.RUN
    assert "0 of 3 attempts used" in decision.reason


def test_a_failed_date_with_attempts_left_runs_and_says_how_many_are_used():
    decision = decide(one(DAY, status=FAILED, attempt=2), DAY, max_attempts=MAX)
    assert decision.action is Action.RUN
    assert "2 of 3 attempts used" in decision.reason


def test_a_done_date_is_skipped_unless_forced():
    state = one(DAY, status=SUCCESS, attempt=1)
    skipped = decide(state, DAY, max_attempts=MAX)
    assert skipped.action is Action.SKIP
    assert f"{DAY} already succeeded" in skipped.reason
    forced = decide(state, DAY, max_attempts=MAX, force=True)
    assert forced.action is Action.RUN
    assert "force" in forced.reason


def test_a_forced_rerun_of_a_done_date_is_not_blocked_by_its_attempt_count():
    state = one(DAY, status=SUCCESS, attempt=5)
    assert decide(state, DAY, max_attempts=MAX).action is Action.SKIP
    assert decide(state, DAY, max_attempts=MAX, force=True).action is Action.RUN


def _reprocessed_three_times_then_failed(tmp_path: Path, error: str = "boom") -> StateStore:
    """A date that succeeded, was reprocessed three times (forced) and then failed once, as
    the store records it."""
    store = StateStore(tmp_path / "state.json", "orders")
    now = at("2026-11-03 02:00")
    for _ in range(4):
        store.record(DAY, SUCCESS, {}, now)
    store.record(DAY, FAILED, {"error": error, "failed_stage": "load"}, now)
    return store


def test_a_date_reprocessed_three_times_then_failing_once_is_not_blocked(tmp_path):
    """Regression: `max_attempts` counted successes too, so a date that succeeded and was
    reprocessed (force, Reprocess, Clear) was blocked by its first failure, a transient one
    included, with no Airflow retry left."""
    state = _reprocessed_three_times_then_failed(tmp_path).read()
    assert (state.attempts(DAY), failures_since_success(state.entry(DAY))) == (5, 1)
    assert not is_blocked(state, DAY, MAX)
    plain = decide(state, DAY, max_attempts=MAX)
    assert plain.action is Action.RUN
    assert "1 of 3 attempts used" in plain.reason
    assert gate_decision(state, DAY, run_type="scheduled", now=at("2026-11-03 03:00"),
                         lookback_days=7, max_attempts=MAX, tz="Asia/Jakarta").action is Action.RUN
    assert stage_decision(state, DAY, max_attempts=MAX).action is Action.RUN
    present = ORDERS.raw.present(OrdersSettings(raw_dir=_raw_with(tmp_path, DAY)))
    assert due_runs(state, at("2026-11-03 03:00"), present, 7, MAX, tz="Asia/Jakarta") == [DAY]


def test_a_date_reprocessed_three_times_then_failing_once_is_retried_as_its_error_class_allows(
        tmp_path):
    """Regression: the retry policy compared the total of recorded outcomes with
    `max_attempts`, so the first transient failure after three reprocesses had no retry."""
    state = _reprocessed_three_times_then_failed(tmp_path).read()
    transient = retry_decision(WarehouseError("locked", transient=True), state, DAY, MAX)
    assert transient.action is Action.RUN
    assert retry_decision(RuntimeError("boom"), state, DAY, MAX).action is Action.RUN
    assert retry_decision(DataError("no kota"), state, DAY, MAX).action is Action.SKIP


def test_forced_reruns_never_bring_a_date_closer_to_blocked(tmp_path):
    store = StateStore(tmp_path / "state.json", "orders")
    now = at("2026-11-03 02:00")
    store.record(DAY, FAILED, {"error": "x"}, now)
    store.record(DAY, FAILED, {"error": "x"}, now)
    store.record(DAY, SUCCESS, {}, now)  # the third run succeeded: failures back to 0
    for _ in range(10):
        store.record(DAY, SUCCESS, {}, now)  # reprocesses
    for failures in (1, 2):
        store.record(DAY, FAILED, {"error": "x"}, now)
        assert failures_since_success(store.read().entry(DAY)) == failures
        assert not is_blocked(store.read(), DAY, MAX)
    store.record(DAY, FAILED, {"error": "x"}, now)
    state = store.read()
    assert (state.attempts(DAY), failures_since_success(state.entry(DAY))) == (16, 3)
    assert is_blocked(state, DAY, MAX)
    assert blocked_message(state, DAY, MAX).startswith(
        "2026-11-02 is blocked after 3 attempts (max_attempts=3) that failed since its last "
        "success")
    assert retry_decision(WarehouseError("locked", transient=True), state, DAY,
                          MAX).action is Action.BLOCKED


def _raw_with(tmp_path: Path, day: date) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    partition_path(raw, day).write_bytes(b"order_id\n")
    return raw


def test_a_blocked_date_runs_only_with_reset_attempts():
    state = one(DAY, status=FAILED, attempt=3, error="boom", failed_stage="load")
    assert decide(state, DAY, max_attempts=MAX).action is Action.BLOCKED
    # force reprocesses a done date; it does not unblock a failing one
    assert decide(state, DAY, max_attempts=MAX, force=True).action is Action.BLOCKED
    reset = decide(state, DAY, max_attempts=MAX, reset_attempts=True)
    assert reset.action is Action.RUN
    assert "reset from 3 to 0" in reset.reason


def test_a_date_over_max_attempts_after_max_was_lowered_is_blocked():
    assert decide(one(DAY, status=FAILED, attempt=5), DAY, max_attempts=MAX).action \
        is Action.BLOCKED


def test_at_max_attempts_and_is_blocked_only_count_failures_up_to_max():
    assert not at_max_attempts(2, 3)
    assert at_max_attempts(3, 3)
    assert at_max_attempts(4, 3)
    assert is_blocked(one(DAY, status=FAILED, attempt=3), DAY, MAX)
    assert not is_blocked(one(DAY, status=FAILED, attempt=2), DAY, MAX)
    assert not is_blocked(one(DAY, status=SUCCESS, attempt=3), DAY, MAX)
    assert not is_blocked(EMPTY, DAY, MAX)


# -- gate and stage decisions -----------------------------------------------------------------

def test_a_scheduled_run_skips_a_date_older_than_the_lookback_a_manual_run_does_not():
    now = at("2026-11-20 02:30")  # today is 2026-11-20 in Jakarta
    oldest_in = date(2026, 11, 13)  # today - 7
    too_old = date(2026, 11, 12)
    for kind in ("scheduled", "manual", "backfill"):
        assert gate_decision(EMPTY, oldest_in, run_type=kind, now=now, lookback_days=7,
                             max_attempts=MAX, tz="Asia/Jakarta").action is Action.RUN
    skipped = gate_decision(EMPTY, too_old, run_type="scheduled", now=now, lookback_days=7,
                            max_attempts=MAX, tz="Asia/Jakarta")
    assert skipped.action is Action.SKIP
    assert "lookback_days=7" in skipped.reason
    for kind in ("manual", "backfill"):
        assert gate_decision(EMPTY, too_old, run_type=kind, now=now, lookback_days=7,
                             max_attempts=MAX, tz="Asia/Jakarta").action is Action.RUN


def test_the_gate_applies_the_watermark_rules_with_force_and_reset_attempts():
    now = at("2026-11-03 02:30")
    done = one(DAY, status=SUCCESS, attempt=1)
    blocked = one(DAY, status=FAILED, attempt=3)
    common = {"run_type": "scheduled", "now": now, "lookback_days": 7, "max_attempts": MAX,
              "tz": "Asia/Jakarta"}
    assert gate_decision(done, DAY, **common).action is Action.SKIP
    assert gate_decision(done, DAY, force=True, **common).action is Action.RUN
    assert gate_decision(blocked, DAY, **common).action is Action.BLOCKED
    assert gate_decision(blocked, DAY, reset_attempts=True, **common).action is Action.RUN


def test_the_gate_takes_today_from_the_pipeline_time_zone():
    # 2026-11-12 18:00 UTC is already 2026-11-13 01:00 in Jakarta: 2026-11-05 is today - 8
    now = datetime.fromisoformat("2026-11-12T18:00:00+00:00")
    old = date(2026, 11, 5)
    assert gate_decision(EMPTY, old, run_type="scheduled", now=now, lookback_days=7,
                         max_attempts=MAX, tz="Asia/Jakarta").action is Action.SKIP
    assert gate_decision(EMPTY, old, run_type="scheduled", now=now, lookback_days=7,
                         max_attempts=MAX, tz="UTC").action is Action.RUN


def test_a_cleared_stage_of_a_done_date_reprocesses_it_and_of_a_blocked_date_is_blocked():
    done = one(DAY, status=SUCCESS, attempt=1)
    cleared = stage_decision(done, DAY, max_attempts=MAX, cleared=True)
    assert cleared.action is Action.RUN
    assert cleared.reason.startswith(f"clear: reprocessing {DAY}")
    assert stage_decision(done, DAY, max_attempts=MAX).action is Action.SKIP
    blocked = stage_decision(one(DAY, status=FAILED, attempt=3, error="x"), DAY, max_attempts=MAX,
                             cleared=True)
    assert blocked.action is Action.BLOCKED
    assert "--reset-attempts" in blocked.reason


def test_a_cleared_scheduled_run_of_a_date_older_than_the_lookback_is_not_skipped():
    now = datetime.fromisoformat("2026-11-20T02:30:00+07:00")
    old = date(2026, 11, 2)
    done = one(old, status=SUCCESS, attempt=1)
    assert gate_decision(done, old, run_type="scheduled", now=now, lookback_days=7,
                         max_attempts=MAX, tz="Asia/Jakarta").action is Action.SKIP
    decision = gate_decision(done, old, run_type="scheduled", now=now, lookback_days=7,
                             max_attempts=MAX, cleared=True, tz="Asia/Jakarta")
    assert (decision.action, decision.reason.split(":")[0]) == (Action.RUN, "clear")


def test_a_backfill_may_not_name_one_partition_date_another_run_only_its_own_key():
    assert run_conf_problem("backfill", {"partition_date": "2026-11-02"}, "2026-11-02"
                            ).startswith("a backfill processes each run's own date")
    assert run_conf_problem("backfill", {"partition_date": None, "force": True},
                            "2026-11-02") is None
    # a manual run made before partitions: its conf and its key name the same date
    assert run_conf_problem("manual", {"partition_date": "2026-11-02"}, "2026-11-02") is None
    assert "trigger the run with partition key 2026-11-02" in run_conf_problem(
        "manual", {"partition_date": "2026-11-02"}, None)
    assert "trigger the run with partition key 2026-11-02" in run_conf_problem(
        "manual", {"partition_date": "2026-11-02"}, "2026-11-30")
    assert run_conf_problem("scheduled", None, "2026-11-02") is None


def test_a_cleared_stage_runs_for_a_forced_run_or_a_date_with_attempts_left():
    assert stage_decision(one(DAY, status=SUCCESS, attempt=1), DAY, max_attempts=MAX,
                          force=True).action is Action.RUN
    assert stage_decision(one(DAY, status=FAILED, attempt=2), DAY, max_attempts=MAX).action \
        is Action.RUN
    assert stage_decision(EMPTY, DAY, max_attempts=MAX).action is Action.RUN


# -- sensor -------------------------------------------------------------------------------------

def test_a_present_partition_is_present_for_every_run_type_at_any_time():
    fire = at("2026-11-03 02:30")
    for kind in ("scheduled", "manual", "backfill", "asset_triggered"):
        for now in (fire, fire + timedelta(days=30)):
            assert sensor_decision(present=True, run_type=kind, fire_time=fire, now=now,
                                   wait_window=timedelta(hours=6)) is SensorAction.PRESENT


def test_only_a_scheduled_run_waits_for_a_missing_partition_and_only_inside_its_window():
    fire, window = at("2026-11-03 02:30"), timedelta(hours=6)

    def decision(kind: str, now: datetime) -> SensorAction:
        return sensor_decision(present=False, run_type=kind, fire_time=fire, now=now,
                               wait_window=window)

    assert decision("scheduled", fire) is SensorAction.WAIT
    assert decision("scheduled", fire + window - timedelta(seconds=1)) is SensorAction.WAIT
    assert decision("scheduled", fire + window) is SensorAction.SKIP
    for kind in ("manual", "backfill", "asset_triggered"):
        assert decision(kind, fire) is SensorAction.SKIP


# -- failures: classification and retries -------------------------------------------------------

CLASSIFIED = [
    (DataError("missing column qty"), ErrorKind.PARTITION),
    (ValidationError("checksum mismatch"), ErrorKind.PARTITION),
    (WarehouseError("connection refused", transient=True), ErrorKind.TRANSIENT),
    (OSError(errno.ENOSPC, "No space left on device"), ErrorKind.TRANSIENT),
    (OSError(errno.ECONNREFUSED, "Connection refused"), ErrorKind.TRANSIENT),
    (ConnectionError("the API server did not answer"), ErrorKind.TRANSIENT),  # no errno
    (MissingPartitionError("no file"), ErrorKind.NOT_AN_ATTEMPT),
    (ConfigError("bad setting"), ErrorKind.NOT_AN_ATTEMPT),
    (StateError("corrupt watermark"), ErrorKind.NOT_AN_ATTEMPT),
    (BlockedError("blocked"), ErrorKind.NOT_AN_ATTEMPT),
    (ConcurrentRunError("held by another run"), ErrorKind.NOT_AN_ATTEMPT),
    (WarehouseError("duplicate key value"), ErrorKind.UNEXPECTED),
    (OSError(errno.EACCES, "Permission denied"), ErrorKind.UNEXPECTED),
    (RuntimeError("bug"), ErrorKind.UNEXPECTED),
    (EtlError("stage 'load' has not run"), ErrorKind.UNEXPECTED),
]


@pytest.mark.parametrize(("error", "kind"), CLASSIFIED, ids=lambda v: type(v).__name__
                         if isinstance(v, BaseException) else str(v))
def test_each_error_is_classified_and_only_not_an_attempt_errors_use_no_attempt(error, kind):
    assert classify(error) is kind
    assert counts_as_attempt(error) is (kind is not ErrorKind.NOT_AN_ATTEMPT)


def test_partition_errors_are_not_retried_transient_ones_are_while_attempts_are_left():
    one_used = one(DAY, status=FAILED, attempt=1)
    for error in (DataError("missing column qty"), ValidationError("summary mismatch")):
        decision = retry_decision(error, one_used, DAY, MAX)
        assert decision.action is Action.SKIP
        assert "partition" in decision.reason
    for error in (WarehouseError("locked", transient=True), OSError(errno.ENOSPC, "full"),
                  RuntimeError("bug")):
        assert retry_decision(error, one_used, DAY, MAX).action is Action.RUN
        assert retry_decision(error, one(DAY, status=FAILED, attempt=2), DAY, MAX).action \
            is Action.RUN
    for error in (MissingPartitionError("no file"), ConcurrentRunError("held")):
        assert retry_decision(error, one_used, DAY, MAX).action is Action.SKIP


def test_no_retry_once_the_recorded_failure_used_the_last_attempt():
    out_of_attempts = one(DAY, status=FAILED, attempt=3)
    decision = retry_decision(WarehouseError("locked", transient=True), out_of_attempts, DAY, MAX)
    assert decision.action is Action.BLOCKED
    assert "3 recorded failures since its last success" in decision.reason
    assert "max_attempts=3" in decision.reason


# -- the blocked message ----------------------------------------------------------------------

def test_blocked_message_names_the_exact_unblock_action_with_the_partition_date():
    state = one(DAY, status=FAILED, attempt=3, error="missing column qty", failed_stage="extract")
    message = blocked_message(state, DAY, MAX)
    assert message.startswith("2026-11-02 is blocked after 3 attempts (max_attempts=3) that "
                              "failed since its last success")
    assert "last error (extract): missing column qty" in message
    assert "`tokokita-etl run --date 2026-11-02 --reset-attempts`" in message
    conf = re.search(r"trigger the DAG with partition key 2026-11-02 and (\{.*\})", message)
    assert conf is not None, message
    assert json.loads(conf.group(1)) == {"reset_attempts": True}
    assert message.endswith(unblock_hint(DAY))


def test_blocked_message_without_a_recorded_error_names_no_last_error():
    message = blocked_message(one(DAY, status=FAILED, attempt=3), DAY, MAX)
    assert "last error" not in message
    assert "--date 2026-11-02 --reset-attempts" in message


# -- volume warnings ----------------------------------------------------------------------------

def history(day: date, facts: dict[int, int], status: str = SUCCESS) -> dict:
    """Watermark entries `offset days before day -> fact rows`."""
    return {(day - timedelta(days=offset)).isoformat(): {"status": status, "attempt": 1,
                                                         "rows": {"fact": fact}}
            for offset, fact in facts.items()}


def test_volume_warnings_for_zero_rows_and_below_a_share_of_the_trailing_median():
    # zero rows always warn, even without any history
    assert volume_warnings(EMPTY, DAY, 0, 0.5) == [
        f"{DAY}: 0 valid rows (every row was quarantined, or the partition is empty)"]
    # no history: only the zero check applies
    assert volume_warnings(EMPTY, DAY, 1, 0.5) == []
    # the median of 10, 20, 30 is 20: below 0.5 * 20 = 10 warns, 10 does not
    state = Watermark({"runs": history(DAY, {1: 10, 2: 20, 3: 30})})
    assert volume_warnings(state, DAY, 10, 0.5) == []
    [warning] = volume_warnings(state, DAY, 9, 0.5)
    assert warning.startswith(f"{DAY}: 9 valid rows, below 0.5 of the median 20 of the 3 earlier "
                              "successful dates in the last 7 days")


def test_the_volume_median_is_over_the_seven_days_before_only():
    assert VOLUME_HISTORY_DAYS == 7
    runs = history(DAY, {1: 100, 7: 100, 8: 1, 9: 1, 10: 1})  # 8+ days before: outside
    runs.update(history(DAY, {-1: 1, 0: 1}))  # the date itself and later dates do not count
    state = Watermark({"runs": runs})
    [warning] = volume_warnings(state, DAY, 49, 0.5)
    assert "median 100 of the 2 earlier" in warning
    assert volume_warnings(state, DAY, 50, 0.5) == []


def test_the_volume_median_counts_only_successful_dates_with_a_fact_count():
    runs = history(DAY, {1: 100, 2: 100})
    runs.update(history(DAY, {3: 1, 4: 1, 5: 1}, status=FAILED))
    runs[(DAY - timedelta(days=6)).isoformat()] = {"status": SUCCESS, "attempt": 1}  # no rows
    runs[(DAY - timedelta(days=7)).isoformat()] = {"status": SUCCESS, "attempt": 1,
                                                   "rows": {"fact": "many"}}
    state = Watermark({"runs": runs})
    [warning] = volume_warnings(state, DAY, 10, 0.5)
    assert "median 100 of the 2 earlier successful dates" in warning


def test_only_failed_history_means_no_volume_warning_except_for_zero_rows():
    state = Watermark({"runs": history(DAY, {1: 100, 2: 100}, status=FAILED)})
    assert volume_warnings(state, DAY, 1, 0.5) == []
    assert len(volume_warnings(state, DAY, 0, 0.5)) == 1


# -- due_runs is decide() over the lookback window ----------------------------------------------

ENTRIES = st.one_of(
    st.none(),
    st.builds(lambda n: {"status": SUCCESS, "attempt": n}, st.integers(1, 5)),
    st.builds(lambda n: {"status": FAILED, "attempt": n}, st.integers(1, 5)),
    st.builds(lambda n: {"attempt": n}, st.integers(0, 5)),  # reset, or never finished
    # entries with the failures since the last success beside the total
    st.builds(lambda n, f: {"status": SUCCESS, "attempt": n + f, "failures": 0},
              st.integers(1, 5), st.integers(0, 3)),
    st.builds(lambda n, f: {"status": FAILED, "attempt": n + f, "failures": f},
              st.integers(0, 5), st.integers(1, 5)),
)
FILES = st.sampled_from(["none", "empty", "data"])


@hypothesis_settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])
@given(lookback=st.integers(1, 8), max_attempts=st.integers(1, 4),
       days=st.lists(st.tuples(ENTRIES, FILES), min_size=12, max_size=12),
       hour=st.integers(0, 23))
def test_due_runs_lists_exactly_the_dates_in_the_lookback_with_a_partition_that_decide_runs(
        lookback, max_attempts, days, hour):
    now = at(f"2026-11-20 {hour:02d}:15")
    today = date(2026, 11, 20)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        for offset, (entry, file) in enumerate(days):  # offset 0 is today, 11 is today - 11
            day = today - timedelta(days=offset)
            if entry is not None:
                runs[day.isoformat()] = entry
            if file != "none":
                partition_path(raw, day).write_bytes(b"" if file == "empty" else b"order_id\n")
        state = Watermark({"runs": runs})
        due = due_runs(state, now, ORDERS.raw.present(OrdersSettings(raw_dir=raw)), lookback_days=lookback,
                       max_attempts=max_attempts, tz="Asia/Jakarta")

    window = [today - timedelta(days=n) for n in range(1, lookback + 1)]
    with_partition = [d for offset, (_, file) in enumerate(days)
                      if file == "data" and (d := today - timedelta(days=offset)) in window]
    expected = sorted(d for d in with_partition
                      if decide(state, d, max_attempts=max_attempts).action is Action.RUN)
    assert due == expected
    # the same set by the rules themselves: not succeeded and fewer failures since the last
    # success than max_attempts (an entry without `failures`: its attempts if it failed)
    def failures(entry: dict) -> int:
        if "failures" in entry:
            return entry["failures"]
        return entry.get("attempt", 0) if entry.get("status") == FAILED else 0

    assert due == sorted(d for d in with_partition if not state.has_success(d)
                         and failures(state.entry(d)) < max_attempts)


def test_windows_reaching_back_past_year_1_stop_at_its_first_date():
    """Regression: `due --now 0001-01-01T00:00` and a run of 0001-01-01 (its volume
    history) moved dates before year 1 and ended in OverflowError."""
    first = date(1, 1, 1)
    assert days_back(date(1, 1, 3), 7) == first
    assert days_back(date(2026, 11, 20), 7) == date(2026, 11, 13)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        partition_path(raw, first).write_bytes(b"order_id\n")
        state = Watermark({"runs": {}})
        now = datetime(1, 1, 2, 12, tzinfo=ZoneInfo("UTC"))
        assert due_runs(state, now, ORDERS.raw.present(OrdersSettings(raw_dir=raw)), lookback_days=7,
                        max_attempts=3, tz="UTC") == [first]
    assert not outside_lookback(first, now, 7, "UTC")
    assert volume_warnings(state, first, 5, 0.5) == []
