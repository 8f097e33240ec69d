"""due_runs and the run-date rules, on real raw directories and real watermark files."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import HEADER, SAMPLE_DATES, SAMPLE_RAW
from tokokita_etl.errors import ConfigError
from tokokita_etl.orders.contract import partition_path
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.runner.policy import decide, due_runs
from tokokita_etl.runner.schedule import (
    DAILY,
    WEEKLY,
    fire_time_for_partition,
    local_today,
    parse_now,
    parse_run_date,
    partition_date_for_run,
)
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, SUCCESS, Watermark

ZONE = "Asia/Jakarta"
JKT = ZoneInfo(ZONE)


def due(state: Watermark, now: datetime, raw_dir: Path, **given) -> list[date]:
    """`due_runs` with the look-back, attempts and zone of these tests unless `given`."""
    return due_runs(state, now, ORDERS.raw.present(OrdersSettings(raw_dir=raw_dir)),
                    **{"lookback_days": 7, "max_attempts": 3, "tz": ZONE, **given})
D02, D03, D04 = SAMPLE_DATES


def at(text: str) -> datetime:
    """A Jakarta wall-clock time."""
    return datetime.fromisoformat(text).replace(tzinfo=JKT)


def make_raw(root: Path, *days: date, content: bytes | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for day in days:
        partition_path(root, day).write_bytes((HEADER + "\n").encode() if content is None else content)
    return root


def store(tmp_path: Path) -> StateStore:
    return StateStore(tmp_path / "state" / "state.json", "orders")


# -- due_runs over the sample week: empty state, then 02 and 03 done, then all done -----------

def test_reference_scenarios_empty_state_then_02_03_done_then_all_done(workspace_samples):
    raw, st_ = workspace_samples
    assert due(st_.read(), at("2026-11-05 02:30"), raw) == [D02, D03, D04]
    for day in (D02, D03):
        st_.record(day, SUCCESS, {}, datetime.now(UTC))
    assert due(st_.read(), at("2026-11-06 02:30"), raw) == [D04]
    st_.record(D04, SUCCESS, {}, datetime.now(UTC))
    assert due(st_.read(), at("2026-11-06 02:30"), raw) == []
    assert due(st_.read(), at("2026-11-07 02:30"), raw) == []


@pytest.fixture
def workspace_samples(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for day in SAMPLE_DATES:
        name = f"pesanan_{day.isoformat()}.csv"
        (raw / name).write_bytes((SAMPLE_RAW / name).read_bytes())
    return raw, store(tmp_path)


# -- the individual rules ---------------------------------------------------------------------

def test_today_is_never_due_even_when_its_partition_exists(tmp_path):
    raw = make_raw(tmp_path / "raw", date(2026, 11, 4), date(2026, 11, 5))
    assert due(Watermark({"runs": {}}), at("2026-11-05 23:59:59"), raw) == [date(2026, 11, 4)]
    assert due(Watermark({"runs": {}}), at("2026-11-06 00:00"), raw) == [
        date(2026, 11, 4), date(2026, 11, 5)]


@pytest.mark.parametrize("lookback", [1, 3, 7])
def test_the_lookback_window_includes_today_minus_lookback_and_nothing_older(tmp_path, lookback):
    today = date(2026, 11, 12)
    days = [today - timedelta(days=n) for n in range(1, 12)]
    raw = make_raw(tmp_path / "raw", *days)
    found = due(Watermark({"runs": {}}), at("2026-11-12 02:30"), raw, lookback_days=lookback)
    assert found == sorted(today - timedelta(days=n) for n in range(1, lookback + 1))
    assert found[0] == today - timedelta(days=lookback)


def test_dates_at_max_attempts_are_not_due_until_reset(tmp_path):
    raw = make_raw(tmp_path / "raw", D02, D03, D04)
    s = store(tmp_path)
    for _ in range(3):
        s.record(D02, FAILED, {}, datetime.now(UTC))
    for _ in range(2):
        s.record(D03, FAILED, {}, datetime.now(UTC))
    now = at("2026-11-05 02:30")
    assert due(s.read(), now, raw) == [D03, D04]
    assert due(s.read(), now, raw, max_attempts=4) == [D02, D03, D04]
    assert due(s.read(), now, raw, max_attempts=2) == [D04]
    s.reset_attempts(D02, now=datetime.now(UTC), by="test")
    assert due(s.read(), now, raw) == [D02, D03, D04]


def test_a_success_is_not_due_whatever_its_attempt_count(tmp_path):
    raw = make_raw(tmp_path / "raw", D02)
    s = store(tmp_path)
    s.record(D02, FAILED, {}, datetime.now(UTC))
    assert due(s.read(), at("2026-11-05 02:30"), raw) == [D02]
    s.record(D02, SUCCESS, {}, datetime.now(UTC))
    assert due(s.read(), at("2026-11-05 02:30"), raw, max_attempts=99) == []


def test_missing_zero_byte_and_in_flight_files_are_not_partitions(tmp_path):
    raw = make_raw(tmp_path / "raw", D02)
    (raw / "pesanan_2026-11-03.csv").write_bytes(b"")  # zero bytes: not a partition
    (raw / "pesanan_2026-11-04.csv.tmp").write_text(HEADER + "\n")
    (raw / "pesanan_2026-11-04.csv.part").write_text(HEADER + "\n")
    (raw / ".pesanan_2026-11-04.csv.x1y2.tmp").write_text(HEADER + "\n")
    (raw / "pesanan_2026-11-01.csv.part").write_text(HEADER + "\n")
    (raw / "PESANAN_2026-11-01.CSV").write_text(HEADER + "\n")
    (raw / "pesanan_2026-10-31.csv").mkdir()  # a directory is not a file
    now = at("2026-11-05 02:30")
    assert due(Watermark({"runs": {}}), now, raw) == [D02]
    (raw / "pesanan_2026-11-04.csv.tmp").rename(raw / "pesanan_2026-11-04.csv")  # atomic drop
    assert due(Watermark({"runs": {}}), now, raw) == [D02, D04]
    assert due(Watermark({"runs": {}}), now, tmp_path / "no-such-dir") == []


def test_the_clock_is_read_in_the_pipeline_time_zone(tmp_path):
    raw = make_raw(tmp_path / "raw", D02, D03, D04)
    empty = Watermark({"runs": {}})
    # 2026-11-04 19:30 UTC is 2026-11-05 02:30 in Jakarta
    assert due(empty, datetime(2026, 11, 4, 19, 30, tzinfo=UTC), raw) == [D02, D03, D04]
    # 2026-11-04 16:59 UTC is still 2026-11-04 in Jakarta: 04 is today
    assert due(empty, datetime(2026, 11, 4, 16, 59, tzinfo=UTC), raw) == [D02, D03]
    assert due(empty, datetime(2026, 11, 4, 16, 59, tzinfo=UTC), raw, tz="UTC") == [D02, D03]
    assert due(empty, datetime(2026, 11, 4, 19, 30, tzinfo=UTC), raw, tz="UTC") == [D02, D03]
    # a naive clock is wall time in the pipeline zone
    assert due(empty, datetime(2026, 11, 5, 2, 30), raw) == [D02, D03, D04]
    assert local_today(datetime(2026, 11, 4, 17, 0, tzinfo=UTC), tz=ZONE) == date(2026, 11, 5)


@settings(max_examples=60, deadline=None)
@given(
    present=st.sets(st.integers(min_value=0, max_value=12)),
    entries=st.dictionaries(st.integers(min_value=0, max_value=12),
                            st.tuples(st.sampled_from([SUCCESS, FAILED, "running"]),
                                      st.integers(min_value=0, max_value=5))),
    hour=st.integers(min_value=0, max_value=23),
    lookback=st.integers(min_value=1, max_value=10),
    max_attempts=st.integers(min_value=1, max_value=4),
)
def test_due_runs_is_exactly_the_documented_definition(present, entries, hour, lookback,
                                                       max_attempts):
    base = date(2026, 11, 1)
    now = datetime(2026, 11, 12, hour, 15, tzinfo=JKT)
    today = now.date()
    state = Watermark({"runs": {(base + timedelta(days=k)).isoformat():
                                {"status": status, "attempt": n}
                                for k, (status, n) in entries.items()}})
    with tempfile.TemporaryDirectory() as tmp:
        raw = make_raw(Path(tmp), *(base + timedelta(days=k) for k in present))
        got = due(state, now, raw, lookback_days=lookback, max_attempts=max_attempts)
    expected = sorted(
        base + timedelta(days=k) for k in present
        if today - timedelta(days=lookback) <= base + timedelta(days=k) < today
        and entries.get(k, ("", 0))[0] != SUCCESS
        # an entry without `failures` (written before it existed): its attempts if it failed
        and (entries[k][1] if entries.get(k, ("", 0))[0] == FAILED else 0) < max_attempts
    )
    assert got == expected


# -- the gate decision for one date -----------------------------------------------------------

def test_decide_skips_a_success_unless_forced_and_blocks_at_max_attempts():
    state = Watermark({"runs": {
        "2026-11-02": {"status": SUCCESS, "attempt": 1},
        "2026-11-03": {"status": FAILED, "attempt": 3},
        "2026-11-04": {"status": FAILED, "attempt": 2},
    }})
    assert decide(state, D02, max_attempts=3).action == "skip"
    assert "force" in decide(state, D02, max_attempts=3).reason
    assert decide(state, D02, max_attempts=3, force=True).action == "run"
    blocked = decide(state, D03, max_attempts=3)
    assert blocked.action == "blocked"
    assert "2026-11-03" in blocked.reason
    assert "--reset-attempts" in blocked.reason
    assert "manual intervention" in blocked.reason
    assert decide(state, D03, max_attempts=3, reset_attempts=True).action == "run"
    assert decide(state, D03, max_attempts=4).action == "run"
    assert decide(state, D04, max_attempts=3).action == "run"
    assert decide(state, date(2026, 11, 6), max_attempts=3).action == "run"


def test_a_done_date_whose_raw_changed_runs_like_a_forced_one_and_only_a_done_date():
    state = Watermark({"runs": {"2026-11-02": {"status": SUCCESS, "attempt": 1},
                                "2026-11-03": {"status": FAILED, "attempt": 3}}})
    why = "raw changed since processed (10 -> 12 bytes)"
    decision = decide(state, D02, max_attempts=3, inputs_changed=why)
    assert decision.action == "run"
    assert decision.reason == f"{why}: reprocessing {D02}, which already succeeded (attempt 1)"
    # a blocked date stays blocked: the reason to reprocess a done date unblocks nothing
    assert decide(state, D03, max_attempts=3, inputs_changed=why).action == "blocked"


def test_due_runs_lists_a_done_date_only_when_its_raw_changed_inside_the_lookback(tmp_path):
    state = Watermark({"runs": {d.isoformat(): {"status": SUCCESS, "attempt": 1}
                                for d in (D02, D03)}})
    raw = make_raw(tmp_path, D02, D03)
    changed = {D03: "raw changed since processed (10 -> 12 bytes)"}
    now = at("2026-11-05 10:00")
    assert due(state, now, raw) == []
    assert due(state, now, raw, inputs_changed=lambda d: changed.get(d, "")) == [D03]
    assert due(state, at("2026-11-20 10:00"), raw,
               inputs_changed=lambda d: changed.get(d, "")) == []


# -- naming run dates -------------------------------------------------------------------------

@pytest.mark.parametrize(("now", "word", "expected"), [
    (datetime(2026, 11, 5, 2, 30, tzinfo=JKT), "yesterday", date(2026, 11, 4)),
    (datetime(2026, 11, 4, 19, 30, tzinfo=UTC), "yesterday", date(2026, 11, 4)),  # 02:30 Jakarta
    (datetime(2026, 11, 4, 16, 59, tzinfo=UTC), "yesterday", date(2026, 11, 3)),  # 23:59 Jakarta
    (datetime(2026, 11, 4, 19, 30, tzinfo=UTC), "today", date(2026, 11, 5)),
    (datetime(2026, 11, 4, 19, 30, tzinfo=UTC), " Yesterday ", date(2026, 11, 4)),
    (datetime(2026, 11, 4, 19, 30, tzinfo=UTC), "2026-10-31", date(2026, 10, 31)),
    (datetime(2027, 1, 1, 3, 0, tzinfo=JKT), "yesterday", date(2026, 12, 31)),
])
def test_run_dates_resolve_against_the_jakarta_calendar(now, word, expected):
    assert parse_run_date(word, now, tz=ZONE) == expected


@pytest.mark.parametrize("bad", ["", "2026-13-01", "2026-11-31", "kemarin", "05/11/2026", "tomorrow"])
def test_a_bad_run_date_is_a_usage_error(bad):
    with pytest.raises(ConfigError) as err:
        parse_run_date(bad, datetime(2026, 11, 5, tzinfo=UTC), tz=ZONE)
    assert err.value.exit_code == 2
    assert "--date" in str(err.value)


def test_parse_now_takes_offsets_and_reads_naive_times_as_pipeline_wall_time():
    assert parse_now("2026-11-05T02:30", tz=ZONE) == datetime(2026, 11, 5, 2, 30, tzinfo=JKT)
    assert parse_now("2026-11-05 02:30:00+00:00", tz=ZONE) == datetime(2026, 11, 5, 2, 30, tzinfo=UTC)
    assert parse_now("2026-11-05T02:30", tz="UTC").utcoffset() == timedelta(0)
    with pytest.raises(ConfigError) as err:
        parse_now("besok pagi", tz=ZONE)
    assert "--now" in str(err.value)


@pytest.mark.parametrize("text", ["9999-12-31T23:00+00:00", "9999-12-31T10:00"])
def test_a_now_on_the_calendars_last_date_is_an_error_naming_it(text):
    """Bug: `due --now 9999-12-31T23:00+00:00` (and `status`) ended in an OverflowError
    traceback: the instant's date in Jakarta is past the calendar, and the next fire time
    is computed from the day after `now`'s date."""
    with pytest.raises(ConfigError) as err:
        parse_now(text, tz=ZONE)
    assert f"--now: {text!r} is out of range" in str(err.value)
    assert parse_now("0001-01-01T00:00+00:00", tz=ZONE).year == 1  # the first date is usable


def test_force_on_a_succeeded_date_is_not_blocked_by_its_attempt_count():
    """Regression: three forced re-runs of a good date (3 recorded successes) blocked it."""
    state = Watermark({"runs": {"2026-11-02": {"status": SUCCESS, "attempt": 3}}})
    assert decide(state, D02, max_attempts=3).action == "skip"
    assert decide(state, D02, max_attempts=3, force=True).action == "run"


@given(st.dates(min_value=date(2000, 1, 3), max_value=date(2099, 12, 20)))
def test_a_week_is_keyed_by_its_monday_and_holds_monday_to_sunday(day):
    key = WEEKLY.start(day)
    week = WEEKLY.dates(key)
    assert key.weekday() == 0 and day in week and len(week) == 7
    assert [d.weekday() for d in week] == list(range(7))
    assert WEEKLY.check(key) == key
    assert DAILY.start(day) == day and DAILY.dates(day) == (day,)


@pytest.mark.parametrize(("grain", "fire", "key"), [
    (DAILY, "2026-11-03 02:30", date(2026, 11, 2)),
    (WEEKLY, "2026-11-09 04:00", date(2026, 11, 2)),   # a Monday: the week before
    (WEEKLY, "2026-11-15 04:00", date(2026, 11, 2)),   # a Sunday: still the last whole week
    (WEEKLY, "2026-11-16 00:30", date(2026, 11, 9)),
])
def test_a_fire_time_processes_the_last_whole_partition_before_its_own(grain, fire, key):
    assert partition_date_for_run(at(fire).astimezone(UTC), ZONE, grain=grain) == key


def test_a_weekly_partition_fires_on_the_monday_after_it_and_maps_back():
    fire = fire_time_for_partition(date(2026, 11, 2), "0 4 * * 1", ZONE, WEEKLY)
    assert fire == at("2026-11-09 04:00")
    assert partition_date_for_run(fire, ZONE, grain=WEEKLY) == date(2026, 11, 2)
    with pytest.raises(ConfigError, match=r"does not fire on 2026-11-10"):
        fire_time_for_partition(date(2026, 11, 3), "0 4 * * 2", ZONE, WEEKLY)


def test_a_date_that_keys_no_week_is_refused_naming_its_monday():
    with pytest.raises(ConfigError, match=r"--date: 2026-11-04 is not the first date of a "
                                          r"weekly partition \(a Monday\); its partition is "
                                          r"2026-11-02"):
        WEEKLY.check(date(2026, 11, 4))
    with pytest.raises(ConfigError, match=r"partition_date: 2026-11-05 is not the first date"):
        partition_date_for_run(at("2026-11-09 04:00"), ZONE, "2026-11-05", grain=WEEKLY)


@pytest.mark.parametrize(("grain", "key", "canonical"), [
    (DAILY, "20261102", "2026-11-02"),
    (DAILY, "2026-W45-1", "2026-11-02"),
    (WEEKLY, "2026-W45", "2026-11-02"),
    (WEEKLY, "20261102", "2026-11-02"),
])
def test_a_partition_key_in_another_iso_form_is_refused_naming_the_canonical_key(
        grain, key, canonical):
    """Bug: Python 3.11's date.fromisoformat reads `20261102`, `2026-W45-1` and `2026-W45` as
    2026-11-02, so a run keyed so processed that date under a key no filter finds."""
    with pytest.raises(ConfigError, match=rf"^partition key '{key}' is not a date as "
                                          rf"YYYY-MM-DD: use '{canonical}'$"):
        partition_date_for_run(at("2026-11-09 04:00"), ZONE, key, grain=grain)
    assert partition_date_for_run(at("2026-11-09 04:00"), ZONE, canonical,
                                  grain=grain) == date(2026, 11, 2)
