"""The state of each partition date (tokokita_etl.runner.status): one rule for the page and the CLI."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.pipelines import by_name, settings_of
from tokokita_etl.runner.declaration import Column
from tokokita_etl.runner.status import (
    DateAction,
    DateState,
    date_states,
    format_cell,
    format_status,
    settled_states,
    window,
)
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import FAILED, SUCCESS

JKT = ZoneInfo("Asia/Jakarta")
TODAY = date(2026, 12, 1)


def settings_in(tmp_path) -> OrdersSettings:
    return OrdersSettings().replace(
        raw_dir=tmp_path / "raw", state_dir=tmp_path / "state",
        gold_dir=tmp_path / "gold", start_date=date(2026, 11, 1))


def at(hour: int, minute: int = 0, day: date = TODAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=JKT)


def partition(settings: OrdersSettings, day: date) -> None:
    settings.raw_dir.mkdir(parents=True, exist_ok=True)
    (settings.raw_dir / f"pesanan_{day}.csv").write_text("order_id\nTK-1\n")


def record(settings: OrdersSettings, day: date, status: str, times: int = 1, **payload) -> None:
    for _ in range(times):
        state_store(settings).record(day, status, payload, at(3))


def by_date(rows: list[dict]) -> dict[str, dict]:
    return {r["date"]: r for r in rows}


def test_the_window_is_lookback_plus_30_days_up_to_yesterday_from_the_start_date(tmp_path):
    settings = settings_in(tmp_path)
    days = window(settings, at(12))
    assert days[-1] == TODAY - timedelta(days=1)
    assert days[0] == settings.start_date  # 37 days back would be before the catch-up start
    later = window(settings, at(12, day=date(2027, 3, 1)))
    assert len(later) == settings.lookback_days + 30
    assert window(settings, at(12), days=3) == [TODAY - timedelta(days=n) for n in (3, 2, 1)]


def test_a_window_longer_than_the_calendar_starts_at_the_first_date_there_is(tmp_path):
    """Regression: `status --days 100000000` and a clock near year 1 moved dates before
    year 1 and ended in OverflowError."""
    settings = settings_in(tmp_path).replace(start_date=date(1, 1, 1))
    days = window(settings, at(12), days=100_000_000)
    assert (days[0], days[-1]) == (date(1, 1, 1), TODAY - timedelta(days=1))
    assert window(settings, at(12, day=date(1, 1, 3))) == [date(1, 1, 1), date(1, 1, 2)]


def test_each_date_gets_its_state_from_watermark_raw_folder_claims_and_policy(tmp_path):
    settings = settings_in(tmp_path)
    t = {n: TODAY - timedelta(days=n) for n in range(1, 12)}
    record(settings, t[2], SUCCESS, rows={"extracted": 10, "karantina": 2, "duplikat": 1,
                                          "fact": 7, "summary": 3},
           bruto=1000, bersih=900, gold="gold/summary_harian.csv")
    partition(settings, t[3])
    record(settings, t[4], FAILED, error="missing required column(s) kota",
           failed_stage="extract")
    partition(settings, t[4])
    record(settings, t[5], FAILED, times=3, error="bad bytes", failed_stage="extract")
    partition(settings, t[6])
    record(settings, t[7], FAILED, error="old failure", failed_stage="load",
           gold="gold/stale.csv")
    partition(settings, t[10])
    state_store(settings).claim_path(t[8]).parent.mkdir(parents=True, exist_ok=True)
    state_store(settings).claim_path(t[8]).write_text(json.dumps({
        "owner": "airflow:tokokita_orders_daily:manual__x", "since": at(3).isoformat(),
        "expires": at(9).isoformat()}))

    rows = by_date(date_states(ORDERS, settings, at(4)))  # 04:00: yesterday's run fired at 02:30
    state = {d: (r["state"], r["label"]) for d, r in rows.items()}
    assert state[str(t[1])] == ("waiting", "waiting for file")
    assert state[str(t[2])] == ("done", "done")
    assert state[str(t[3])] == ("due", "due")
    assert state[str(t[4])] == ("failed", "failed 1/3")
    assert state[str(t[5])] == ("blocked", "blocked 3/3")
    assert state[str(t[6])] == ("due", "due")
    assert state[str(t[7])] == ("failed", "failed 1/3")
    assert state[str(t[8])] == ("running", "running")
    assert state[str(t[9])] == ("missing", "missing")
    assert state[str(t[10])] == ("not processed", "not processed")  # older than the lookback
    assert rows[str(t[2])]["quarantine_share"] == 0.2
    assert (rows[str(t[2])]["bruto"], rows[str(t[2])]["bersih"]) == (1000, 900)
    assert rows[str(t[5])]["unblock"].startswith("fix the partition or the cause")
    assert f'partition key {t[5]} and {{"reset_attempts": true}}' in rows[str(t[5])]["unblock"]
    assert rows[str(t[5])]["error"] == "bad bytes"
    assert rows[str(t[8])]["holder"] == "airflow:tokokita_orders_daily:manual__x"
    assert rows[str(t[7])]["gold"] == ""  # a failed date does not show an old gold path
    assert rows[str(t[4])]["due"] is True
    assert rows[str(t[7])]["due"] is False  # its partition is gone: due_runs leaves it out
    assert "fix the partition" in format_status(ORDERS, list(rows.values()))


def test_yesterday_without_a_file_is_waiting_until_the_wait_window_ends_then_missing(tmp_path):
    settings = settings_in(tmp_path)
    yesterday = str(TODAY - timedelta(days=1))
    assert by_date(date_states(ORDERS, settings, at(1)))[yesterday]["state"] == "waiting"  # not fired
    assert by_date(date_states(ORDERS, settings, at(8, 29)))[yesterday]["state"] == "waiting"
    assert by_date(date_states(ORDERS, settings, at(8, 30)))[yesterday]["state"] == "missing"


def test_a_date_whose_run_would_fire_after_the_end_date_is_missing_not_waiting(tmp_path):
    """Bug: with `end_date` before yesterday's fire time, yesterday without a file read
    "waiting for file ... its scheduled run waits for it until ...", a run the scheduler
    never creates."""
    settings = settings_in(tmp_path).replace(end_date=TODAY - timedelta(days=7))
    yesterday = str(TODAY - timedelta(days=1))
    # (the window lists no missing date after end_date: this one is asked for by name)
    row = by_date(date_states(ORDERS, settings, at(1), dates=[TODAY - timedelta(days=1)])
                  )[yesterday]
    assert (row["state"], row["label"]) == ("missing", "missing"), row


def test_an_expired_claim_does_not_make_a_date_running(tmp_path):
    settings = settings_in(tmp_path)
    day = TODAY - timedelta(days=2)
    partition(settings, day)
    state_store(settings).claim_path(day).parent.mkdir(parents=True, exist_ok=True)
    state_store(settings).claim_path(day).write_text(json.dumps({
        "owner": "cli:elsewhere:1:x", "since": at(0).isoformat(), "expires": at(1).isoformat()}))
    assert by_date(date_states(ORDERS, settings, at(4)))[str(day)]["state"] == "due"


def test_dates_in_the_watermark_outside_the_window_are_listed_too_unless_done(tmp_path):
    """A year of done dates behind the window costs the status nothing: they are listed
    when a longer window (`days`) covers them; an older date that is not done (failed,
    blocked, needs re-run) is always listed."""
    settings = settings_in(tmp_path)
    record(settings, date(2026, 11, 2), FAILED, error="bad bytes", failed_stage="extract")
    record(settings, date(2026, 11, 3), SUCCESS)
    rows = date_states(ORDERS, settings, at(12, day=date(2027, 3, 1)))
    assert rows[0]["date"] == "2026-11-02" and rows[0]["state"] == "failed"
    assert len(rows) == settings.lookback_days + 30 + 1
    longer = by_date(date_states(ORDERS, settings, at(12, day=date(2027, 3, 1)), days=150))
    assert longer["2026-11-03"]["state"] == "done"


def test_a_due_date_names_who_runs_it_the_catch_up_or_once_it_ended_a_person(tmp_path):
    """Regression: on a stack whose catch-up had ended (end_date passed), a failed date's row
    still said "the next scheduled catch-up runs it"."""
    settings = settings_in(tmp_path)
    day = TODAY - timedelta(days=2)
    partition(settings, day)
    record(settings, day, FAILED, error="warehouse: connection refused", failed_stage="load")
    other = TODAY - timedelta(days=3)
    partition(settings, other)
    open_ended = by_date(date_states(ORDERS, settings, at(12)))
    assert open_ended[str(day)]["reason"].endswith(
        "it is due: the next scheduled catch-up runs it; last error (load): warehouse: "
        "connection refused")
    assert open_ended[str(other)]["reason"] == \
        "the partition is there: the next scheduled catch-up runs it"
    ended = settings.replace(end_date=date(2026, 11, 8))
    rows = by_date(date_states(ORDERS, ended, at(12)))
    assert "it is due: the scheduled catch-up ended at end_date 2026-11-08, so a manual run " \
           "or a backfill processes it" in rows[str(day)]["reason"]
    assert rows[str(other)]["reason"].startswith("the partition is there: the scheduled "
                                                 "catch-up ended at end_date 2026-11-08")


def test_each_date_state_names_the_actions_it_allows_and_reads_as_its_string(tmp_path):
    """A blocked date is unblocked; done, failed, needs re-run, due and not processed ones are
    reprocessed;
    waiting, missing, no-input and running ones allow nothing. The rows' JSON holds plain
    strings."""
    settings = settings_in(tmp_path)
    record(settings, TODAY - timedelta(days=2), SUCCESS, rows={"fact": 1})
    record(settings, TODAY - timedelta(days=3), FAILED, times=3, error="bad bytes")
    rows = by_date(date_states(ORDERS, settings, at(4)))
    done, blocked = rows[str(TODAY - timedelta(days=2))], rows[str(TODAY - timedelta(days=3))]
    assert (done["state"].actions, blocked["state"].actions) == (
        (DateAction.REPROCESS,), (DateAction.UNBLOCK,))
    allowed = {state.value: [a.value for a in state.actions] for state in DateState}
    assert allowed == {"done": ["reprocess"], "due": ["reprocess"], "waiting": [],
                       "missing": [], "no input": [], "running": [], "failed": ["reprocess"],
                       "needs re-run": ["reprocess"], "blocked": ["unblock"],
                       "not processed": ["reprocess"]}
    assert json.loads(json.dumps(blocked))["state"] == "blocked"



def test_a_due_dates_row_says_a_catch_up_runs_it_only_when_it_has_no_airflow_run(tmp_path):
    """Regression: a due date whose Airflow run already existed (it had failed) read "the next
    scheduled catch-up runs it", and a catch-up never creates a run that exists. The status
    page tells (it reads the DAG's runs): `has_run`."""
    settings = settings_in(tmp_path)
    day = TODAY - timedelta(days=2)
    partition(settings, day)
    record(settings, day, FAILED, error="warehouse: connection refused", failed_stage="load")
    ran = by_date(date_states(ORDERS, settings, at(12), has_run=lambda d: d == day))[str(day)]
    assert f"it is due: its Airflow run exists, so no catch-up runs it again: trigger " \
           f"tokokita_orders_daily with partition key {day}, or run " \
           f"`tokokita-etl run --date {day}`" in ran["reason"]
    not_yet = by_date(date_states(ORDERS, settings, at(12), has_run=lambda d: False))[str(day)]
    assert "it is due: the next scheduled catch-up runs it" in not_yet["reason"]


def test_no_missing_row_after_end_date_only_those_with_something_to_run(tmp_path):
    """Regression: the dates after `end_date`, which nothing schedules, were listed as
    `missing` above the useful rows (the status page and `tokokita-etl status`)."""
    end = TODAY - timedelta(days=10)
    settings = settings_in(tmp_path).replace(end_date=end)
    there, done = end + timedelta(days=2), end + timedelta(days=4)
    partition(settings, there)  # a file: a manual run or a backfill processes it
    record(settings, done, SUCCESS, gold="gold/summary_harian.csv")  # a manual run after it
    rows = date_states(ORDERS, settings, at(12))
    assert [r["date"] for r in rows if r["date"] > end.isoformat()] == [
        there.isoformat(), done.isoformat()]
    assert by_date(rows)[end.isoformat()]["state"] == DateState.MISSING
    table = format_status(ORDERS, rows)
    assert table.splitlines()[-1].startswith(done.isoformat())
    assert not any(line.startswith((str(end + timedelta(days=1)), str(TODAY - timedelta(days=1))))
                   for line in table.splitlines())


def test_the_rows_carry_the_declared_columns_formatted_by_the_runner(tmp_path):
    settings = settings_in(tmp_path)
    day = TODAY - timedelta(days=2)
    record(settings, day, SUCCESS, rows={"extracted": 36, "karantina": 23, "duplikat": 3,
                                         "fact": 10, "summary": 4},
           bruto="12345678901234567.89", bersih="2137002.00", gold="gold/x.csv")
    row = by_date(date_states(ORDERS, settings, at(4)))[str(day)]
    assert [c.label for c in ORDERS.columns] == [
        "extracted", "fact", "karantina", "duplikat", "quarantine", "bruto", "bersih"]
    # money stays exact past a float's 17 digits; a whole amount shows no cents
    assert row["cells"] == ["36", "10", "23", "3", "63.9%", "12,345,678,901,234,567.89",
                            "2,137,002"]
    assert (row["bruto"], row["quarantine_share"]) == ("12345678901234567.89", 23 / 36)


def test_a_cell_is_blank_without_a_value_and_a_count_gets_thousands_separators():
    count, money = Column("n", "n"), Column("m", "m", "money")
    share = Column("s", "s", "share", share_of=("a", "b"))
    assert [format_cell(c, None) for c in (count, money, share)] == ["", "", ""]
    assert (format_cell(count, 1234567), format_cell(money, "0.50"),
            format_cell(share, 0.0)) == ("1,234,567", "0.50", "0.0%")


def _words_follow_the_state(rows: list[dict]) -> None:
    """Each row's words are those of the state `policy.date_state` decided for it: an unblock
    action only on a blocked date, a holder only on a running one, an input's change only on
    a done or due one, and always a reason."""
    for r in rows:
        assert bool(r["unblock"]) == (r["state"] == "blocked"), r
        assert not r["holder"] or r["label"] == "running", r
        assert not (r["raw_change"] or r["inputs_change"]) or r["state"] in ("done", "due"), r
        assert r["reason"], r


def test_settledness_tells_every_date_the_state_its_status_row_shows(tmp_path):
    """`policy.settled` (what the gate, the upstream sensor and the sweep ask of an upstream
    date) and the status rows name the same state and label for every date: both are
    `policy.date_state`'s, the one rule of a date's state, which the rows only put words to."""
    settings = settings_in(tmp_path)
    t = {n: TODAY - timedelta(days=n) for n in range(1, 14)}
    record(settings, t[2], SUCCESS, rows={"extracted": 1}, gold="gold/x.csv")
    partition(settings, t[3])
    record(settings, t[4], FAILED, error="bad", failed_stage="extract")
    partition(settings, t[4])
    record(settings, t[5], FAILED, times=3, error="bad bytes", failed_stage="extract")
    partition(settings, t[6])
    partition(settings, t[10])
    record(settings, t[11], FAILED, error="lost", failed_stage="reconcile", needs_rerun=True)
    partition(settings, t[11])
    for n, body in ((8, json.dumps({"owner": "airflow:x", "since": at(3).isoformat(),
                                    "expires": at(9).isoformat()})), (12, "{not json")):
        state_store(settings).claim_path(t[n]).parent.mkdir(parents=True, exist_ok=True)
        state_store(settings).claim_path(t[n]).write_text(body)
    # (days back: state, label) while T-1's file is awaited and T-8's claim is live, then after
    held = {13: ("missing", "missing"), 12: ("running", "running (claim unreadable)"),
            11: ("needs re-run", "needs re-run"), 10: ("not processed", "not processed"),
            9: ("missing", "missing"), 8: ("running", "running"), 7: ("missing", "missing"),
            6: ("due", "due"), 5: ("blocked", "blocked 3/3"), 4: ("failed", "failed 1/3"),
            3: ("due", "due"), 2: ("done", "done"), 1: ("waiting", "waiting for file")}
    expected = {at(1): held, at(4): held,
                at(9): {**held, 8: ("missing", "missing"), 1: ("missing", "missing")}}

    for now in (at(1), at(4), at(9)):
        rows = date_states(ORDERS, settings, now)
        found = settled_states(ORDERS, settings, now, [date.fromisoformat(r["date"])
                                                        for r in rows],
                               state_store(settings).read())
        assert {r["date"]: (r["state"], r["label"]) for r in rows} == {
            str(day): (found.state, found.label) for day, found in found.items()}
        assert {str(day) for day, found in found.items() if found.settled} == {
            r["date"] for r in rows if r["state"] in ("done", "missing")}
        assert {n: (r["state"], r["label"]) for n, r in (
            ((TODAY - date.fromisoformat(r["date"])).days, r) for r in rows) if n in t} == \
            expected[now]
        _words_follow_the_state(rows)
    assert {r["state"] for r in rows} >= {"done", "due", "failed", "blocked", "running",
                                          "missing", "not processed", "needs re-run"}


def test_a_partition_built_from_upstream_results_shows_the_state_settledness_tells(tmp_path):
    """The weekly report's rows (done, due again when an orders date it was built from
    changed, waiting for an unsettled date, no input) name the state and label
    `policy.settled` tells of the same partitions, and the words of that state."""
    weekly = by_name("weekly_city_report")
    settings = settings_of(weekly, env={}, cwd=tmp_path)
    checksum = weekly.upstream.checksum
    w = [date(2026, 11, 2) + timedelta(weeks=n) for n in range(4)]
    failed, changed = w[3] + timedelta(days=2), w[2] + timedelta(days=2)

    def orders_record(day: date, status: str, when: datetime, **payload) -> None:
        state_store(settings.upstream).record(day, status, payload, when)

    for day in (key + timedelta(days=n) for key in w[1:] for n in range(7)):
        if day != failed:
            orders_record(day, SUCCESS, at(3, day=day + timedelta(days=1)),
                          checksums={checksum(day): f"first {day}"})
    orders_record(failed, FAILED, at(3, day=failed + timedelta(days=1)), error="bad")
    orders_record(changed, SUCCESS, at(5, day=TODAY - timedelta(days=2)),
                  checksums={checksum(changed): "second"})
    for key in w[1:3]:
        state_store(settings).record(key, SUCCESS, {"built_from": {
            (key + timedelta(days=n)).isoformat(): {
                "checksum": f"first {key + timedelta(days=n)}", "attempt": 1}
            for n in range(7)}}, at(5, day=key + timedelta(days=7)))

    now = at(12)
    rows = {r["date"]: r for r in date_states(weekly, settings, now)}
    found = settled_states(weekly, settings, now, [date.fromisoformat(day) for day in rows],
                           state_store(settings).read())
    assert {day: (r["state"], r["label"]) for day, r in rows.items()} == {
        str(day): (state.state, state.label) for day, state in found.items()} == {
        str(w[0]): ("no input", "no input"), str(w[1]): ("done", "done"),
        str(w[2]): ("due", "due (changed)"), str(w[3]): ("waiting", "waiting for days")}
    _words_follow_the_state(list(rows.values()))
    assert rows[str(w[2])]["inputs_change"] == f"{changed} reprocessed, checksums changed"
    assert rows[str(w[2])]["due"] is True
    assert f"{failed} (failed 1/3)" in rows[str(w[3])]["reason"]
    assert rows[str(w[0])]["reason"].startswith(f"{w[0]} has no input: all 7")
