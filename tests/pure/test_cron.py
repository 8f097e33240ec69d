"""Cron reader: parsing, errors, warnings, next runs, and agreement with cronsim and Airflow.

Oracles: cronsim (an independent cron implementation) for which minutes match, and the
installed Airflow's CronTriggerTimetable for what happens around DST changes.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokokita_etl.cron import (
    CronError,
    CronReport,
    CronWarning,
    explain,
    format_report,
    main,
    next_runs,
    parse,
)
from tokokita_etl.cron.timetable import _airflow_next

JKT = "Asia/Jakarta"
NY = "America/New_York"
BERLIN = "Europe/Berlin"
LORD_HOWE = "Australia/Lord_Howe"
DST_ZONES = (NY, BERLIN, LORD_HOWE)


def iso(runs: list[datetime]) -> list[str]:
    return [r.isoformat() for r in runs]


def codes(report: CronReport) -> list[str]:
    return [w.code for w in report.warnings]


def messages(report: CronReport, code: str) -> list[str]:
    return [w.message for w in report.warnings if w.code == code]


# --- expression generators ----------------------------------------------------------

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _token(rng: random.Random, field: int, value: int) -> str:
    names = {3: MONTHS, 4: DAYS}.get(field)
    if names and value != 7 and rng.random() < 0.3:  # SUN is 0, never 7
        name = names[(value - 1) % 12] if field == 3 else names[value % 7]
        return rng.choice([name, name.lower(), name.title()])
    return str(value)


def _item(rng: random.Random, field: int) -> str:
    lo, hi = BOUNDS[field]
    roll = rng.random()
    if roll < 0.25:
        return "*"
    if roll < 0.4:
        return f"*/{rng.randint(1, hi - lo + 2)}"
    a = rng.randint(lo, hi)
    if roll < 0.65 or a == hi:
        return _token(rng, field, a)
    b = rng.randint(a + 1, hi)  # a < b: cronsim reads "16-16/9" like "16/9"
    text = f"{_token(rng, field, a)}-{_token(rng, field, b)}"
    return text if roll < 0.85 else f"{text}/{rng.randint(1, hi - lo + 1)}"


def random_expression(rng: random.Random) -> str:
    fields = []
    for field in range(5):
        items = [_item(rng, field) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        if "*" in items and len(items) > 1 and rng.random() < 0.7:
            items = ["*"]
        fields.append(",".join(items))
    return " ".join(fields)


def plain_expression(rng: random.Random) -> str:
    """An expression croniter 7 (Airflow's parser) expands like Vixie cron.

    croniter reads equal ranges (``3-3``, ``fri-5``) as the whole cycle and applies the
    day-of-month/day-of-week OR rule by its own notion of '*'; both are covered by the
    croniter_differs warning and its tests, not here.
    """
    while True:
        expr = random_expression(rng)
        fields = expr.split()
        day_fields_plain = all(f == "*" or "*" not in f for f in (fields[2], fields[4]))
        if day_fields_plain and "croniter_differs" not in codes(_quiet_explain(expr)):
            return expr


def _quiet_explain(expr: str) -> CronReport:
    try:
        return explain(expr, after=datetime(2026, 1, 1), count=0, tz="UTC")
    except CronError:
        return CronReport(expr, {}, "", [CronWarning("croniter_differs", "invalid")], [])


def cronsim_runs(expr: str, after: datetime, count: int) -> list[datetime]:
    it = CronSim(expr.upper(), after)
    runs = []
    for _ in range(count):
        try:
            runs.append(next(it))
        except StopIteration:
            break
    return runs


def random_after(rng: random.Random, tz: str) -> datetime:
    return datetime(
        rng.randint(1990, 2090),
        rng.randint(1, 12),
        rng.randint(1, 28),
        rng.randint(0, 23),
        rng.randint(0, 59),
        rng.choice([0, 0, 0, 30]),
        tzinfo=ZoneInfo(tz),
    )


# --- known next runs in Asia/Jakarta ---------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("30 2 * * *", datetime(2026, 11, 5, 0, 10), "2026-11-05T02:30:00+07:00"),
        ("30 2 * * *", datetime(2026, 11, 5, 2, 30), "2026-11-06T02:30:00+07:00"),
        ("30 2 * * *", datetime(2026, 11, 5, 3, 0), "2026-11-06T02:30:00+07:00"),
        ("0 0 1 * 0", datetime(2026, 11, 5, 12, 0), "2026-11-08T00:00:00+07:00"),
    ],
)
def test_reference_outputs_in_jakarta(expr, after, expected):
    assert iso(next_runs(expr, after, 1, JKT)) == [expected]


def test_reference_expression_expands_to_the_documented_sets():
    fields = parse("30 2 * * *").fields()
    assert fields["minute"] == [30]
    assert fields["hour"] == [2]
    assert fields["dom"] == list(range(1, 32))
    assert fields["month"] == list(range(1, 13))
    assert fields["dow"] == list(range(7))


# --- syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "key", "values"),
    [
        ("0-30/10 * * * *", "minute", [0, 10, 20, 30]),
        ("*/15 * * * *", "minute", [0, 15, 30, 45]),
        ("1,5,10-12 * * * *", "minute", [1, 5, 10, 11, 12]),
        ("0 */6 * * *", "hour", [0, 6, 12, 18]),
        ("0 0 */10 * *", "dom", [1, 11, 21, 31]),
        ("0 0 * jan,Mar-may *", "month", [1, 3, 4, 5]),
        ("0 0 * * mon-FRI", "dow", [1, 2, 3, 4, 5]),
        ("0 0 * * 7", "dow", [0]),
        ("0 0 * * 0,7", "dow", [0]),
        ("0 0 * * 5-7", "dow", [0, 5, 6]),
        ("0 0 * * SUN", "dow", [0]),
        ("0 0 * * */2", "dow", [0, 2, 4, 6]),
        ("0 0 * JAN-DEC/3 *", "month", [1, 4, 7, 10]),
        ("*/100 * * * *", "minute", [0]),
    ],
)
def test_fields_expand_lists_ranges_steps_and_names(expr, key, values):
    assert parse(expr).fields()[key] == values


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros_are_expanded_in_the_report_expression(macro, expanded):
    report = explain(macro, after=datetime(2026, 1, 1), count=1, tz=JKT)
    assert report.expression == expanded
    assert report.fields == parse(expanded).fields()


def test_expression_is_normalised_to_single_spaces_and_upper_case_names():
    assert parse("  0\t9  *   * mon-fri ").expression == "0 9 * * MON-FRI"


def test_dom_and_dow_combine_with_or_when_both_are_restricted():
    runs = next_runs("0 0 1 * MON", datetime(2026, 11, 25), 3, JKT)
    assert iso(runs) == [
        "2026-11-30T00:00:00+07:00",  # a Monday
        "2026-12-01T00:00:00+07:00",  # the 1st, a Tuesday
        "2026-12-07T00:00:00+07:00",
    ]


def test_dom_and_dow_combine_with_and_when_one_starts_with_a_star():
    schedule = parse("0 0 */2 * 1")
    assert not schedule.day_or
    runs = next_runs("0 0 */2 * 1", datetime(2026, 11, 1), 3, JKT)
    assert [(r.day % 2, r.weekday()) for r in runs] == [(1, 0)] * 3


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "code", "field", "token", "fragments"),
    [
        ("", "empty", None, None, ["empty", "5 fields"]),
        ("   ", "empty", None, None, ["empty"]),
        ("* * *", "field_count", None, None, ["expected 5 fields", "got 3"]),
        ("1 2 3 4 5 6 7 8", "field_count", None, None, ["got 8"]),
        ("0 30 2 * * ?", "quartz_format", None, None, ["6 fields", "Quartz/Spring", "shift"]),
        ("0 0 12 * * ? 2026", "quartz_format", None, None, ["7 fields", "year last", "shift"]),
        ("0 12 * * ? *", "quartz_format", None, None, ["AWS EventBridge", "shift"]),
        ("0 0 L * *", "extension", "dom", "L", ["'L'", "Quartz", "day-of-month", "1-31"]),
        ("0 0 15W * *", "extension", "dom", "15W", ["'W'", "nearest weekday"]),
        ("0 0 * * MON#2", "extension", "dow", "MON#2", ["'#'", "n-th weekday"]),
        ("0 0 * * 5L", "extension", "dow", "5L", ["'L'"]),
        ("0 0 ? * MON", "extension", "dom", "?", ["'?'", "writes '*'"]),
        ("H 0 * * *", "extension", "minute", "H", ["'H'", "Jenkins"]),
        ("@reboot", "reboot", None, "@reboot", ["@reboot", "no next run"]),
        ("@quarterly", "unknown_macro", None, "@quarterly", ["0 0 1 */3 *"]),
        ("@every_5m", "unknown_macro", None, "@every_5m", ["not a cron macro"]),
        ("60 * * * *", "invalid_field", "minute", "60", ["minute", "'60'", "out of range", "0-59"]),
        ("0 24 * * *", "invalid_field", "hour", "24", ["hour", "24", "0-23"]),
        ("0 1-24/2 * * *", "invalid_field", "hour", "1-24/2", ["24 is out of range", "0-23"]),
        ("0 0 32 * *", "invalid_field", "dom", "32", ["day-of-month", "1-31"]),
        ("0 0 0 * *", "invalid_field", "dom", "0", ["day-of-month", "1-31"]),
        ("0 0 * 13 *", "invalid_field", "month", "13", ["month", "1-12 or JAN-DEC"]),
        ("0 0 * FOO *", "invalid_field", "month", "FOO", ["not a number or month name"]),
        ("0 0 * * 8", "invalid_field", "dow", "8", ["day-of-week", "0-7", "SUN-SAT"]),
        ("0 0 * * MONDAY", "invalid_field", "dow", "MONDAY", ["three-letter", "MON"]),
        ("MON * * * *", "invalid_field", "minute", "MON", ["'MON' is not a number", "0-59"]),
        ("5/15 * * * *", "invalid_field", "minute", "5/15", ["needs a range or '*'", "5-59/15"]),
        ("*/0 * * * *", "invalid_field", "minute", "*/0", ["step 0"]),
        ("*/x * * * *", "invalid_field", "minute", "*/x", ["step 'x'"]),
        ("20-10 * * * *", "invalid_field", "minute", "20-10", ["runs backwards", "0-59"]),
        ("0 0 * * MON-SUN", "invalid_field", "dow", "MON-SUN", ["backwards", "1-7"]),
        ("1,,2 * * * *", "invalid_field", "minute", "", ["empty list item"]),
        ("-5 * * * *", "invalid_field", "minute", "-5", ["missing number"]),
        ("0 0 30 2 *", "never_runs", "dom", "30", ["never runs", "February", "29"]),
        ("0 0 31 4,6,9,11 *", "never_runs", "dom", "31", ["never runs", "April", "30"]),
        ("0 0 30,31 2 */2", "never_runs", "dom", "30,31", ["never runs"]),
    ],
)
def test_invalid_expressions_raise_cron_error_naming_field_token_and_range(
    expr, code, field, token, fragments
):
    with pytest.raises(CronError) as caught:
        parse(expr)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.code, error.field, error.token) == (code, field, token)
    for fragment in fragments:
        assert fragment in str(error)


def test_unknown_time_zone_is_a_cron_error():
    for call in (
        lambda: explain("0 0 * * *", after=datetime(2026, 1, 1), tz="Mars/Olympus"),
        lambda: next_runs("0 0 * * *", datetime(2026, 1, 1), 1, "Mars/Olympus"),
        lambda: next_runs("0 0 * * *", datetime(2026, 1, 1), 1, "../etc/passwd"),
    ):
        with pytest.raises(CronError) as caught:
            call()
        assert caught.value.code == "bad_timezone"
        assert "IANA" in str(caught.value)


def test_impossible_day_is_detected_analytically_but_a_leap_day_is_allowed():
    runs = next_runs("0 0 29 2 *", datetime(2097, 3, 1), 2, "UTC")
    assert iso(runs) == ["2104-02-29T00:00:00+00:00", "2108-02-29T00:00:00+00:00"]  # 2100 is not leap


def test_impossible_dom_is_rescued_by_the_or_rule():
    runs = next_runs("0 0 30 2 1", datetime(2026, 2, 1), 1, "UTC")
    assert iso(runs) == ["2026-02-02T00:00:00+00:00"]
    assert "dom_dow_or" in codes(explain("0 0 30 2 1", after=datetime(2026, 2, 1), tz=JKT))


# --- warnings -------------------------------------------------------------------------


def test_dom_dow_or_warning_only_when_or_applies():
    assert "dom_dow_or" in codes(explain("0 0 1 * MON", after=datetime(2026, 1, 1), tz=JKT))
    message = messages(explain("0 0 1 * MON", after=datetime(2026, 1, 1), tz=JKT), "dom_dow_or")[0]
    assert "OR" in message and "Monday" in message and "day 1" in message
    for expr in ("0 0 1 * *", "0 0 * * MON", "0 0 */2 * MON", "0 0 1 * */2"):
        assert "dom_dow_or" not in codes(explain(expr, after=datetime(2026, 1, 1), tz=JKT))


def test_months_without_the_day_and_leap_day_only_schedules_are_flagged():
    skip = messages(explain("0 0 31 * *", after=datetime(2026, 1, 1), tz=JKT), "skips_months")[0]
    assert "February, April, June, September and November" in skip
    feb = messages(explain("0 0 29 * *", after=datetime(2026, 1, 1), tz=JKT), "skips_months")[0]
    assert "leap years" in feb
    leap = explain("0 0 29 2 *", after=datetime(2026, 1, 1), tz=JKT)
    assert codes(leap) == ["leap_day_only"]
    assert codes(explain("0 0 28 * *", after=datetime(2026, 1, 1), tz=JKT)) == []


def test_jakarta_has_no_dst_warnings_for_any_schedule():
    for expr in ("30 2 * * *", "* * * * *", "0 * * * *", "30 1 * * *"):
        assert codes(explain(expr, after=datetime(2026, 1, 1), tz=JKT)) == []


def test_dst_gap_warning_names_the_date_and_airflows_shifted_time_new_york():
    report = explain("30 2 * * *", after=datetime(2026, 11, 5), tz=NY)
    (gap,) = messages(report, "dst_gap")
    assert "2027-03-14" in gap
    assert "02:00 to 03:00" in gap
    assert "runs 02:30 at 03:30 (-04:00)" in gap
    assert "CronTriggerTimetable" in gap
    assert "dst_overlap" not in codes(report)  # 02:30 is not repeated in New York


def test_dst_overlap_warning_names_the_date_and_the_second_occurrence_new_york():
    report = explain("30 1 * * *", after=datetime(2026, 10, 5), tz=NY)
    (overlap,) = messages(report, "dst_overlap")
    assert "2026-11-01" in overlap
    assert "01:30 happens twice" in overlap
    assert "once, at the second occurrence (-05:00), 1 hour later" in overlap


def test_dst_warnings_in_berlin_cover_both_changes_within_one_year():
    report = explain("30 2 * * *", after=datetime(2026, 6, 1), tz=BERLIN)
    assert codes(report) == ["dst_overlap", "dst_gap"]
    assert "2026-10-25" in messages(report, "dst_overlap")[0]
    assert "2027-03-28" in messages(report, "dst_gap")[0]
    later = explain("30 2 * * *", after=datetime(2026, 10, 26), tz=BERLIN)
    assert codes(later) == ["dst_gap"]  # the next overlap, 2027-10-31, is more than a year away


def test_dst_warnings_on_lord_howe_use_the_half_hour_shift():
    gap = messages(explain("15 2 * * *", after=datetime(2026, 9, 1), tz=LORD_HOWE), "dst_gap")
    assert len(gap) == 1
    assert "2026-10-04" in gap[0]
    assert "02:00 to 02:30" in gap[0]
    assert "runs 02:15 at 02:45 (+11:00)" in gap[0]
    overlap = messages(explain("45 1 * * *", after=datetime(2027, 3, 1), tz=LORD_HOWE), "dst_overlap")
    assert "2027-04-04" in overlap[0]
    assert "from 02:00 to 01:30" in overlap[0]
    assert "second occurrence (+10:30), 30 minutes later" in overlap[0]
    assert codes(explain("30 2 * * *", after=datetime(2026, 9, 1), tz=LORD_HOWE)) == []


def test_gap_warning_lists_times_skipped_by_the_shift():
    (gap,) = messages(explain("0,30 2 * * *", after=datetime(2027, 1, 1), tz=NY), "dst_gap")
    assert "02:00 and 02:30 do not exist" in gap
    assert "runs 02:00 at 03:00" in gap
    assert "02:30 is skipped" in gap


def test_hourly_overlap_warning_says_both_occurrences_run():
    (overlap,) = messages(explain("*/15 * * * *", after=datetime(2026, 10, 1), tz=BERLIN), "dst_overlap")
    assert "02:00, 02:15, 02:30 and 02:45 happen twice" in overlap
    assert "at both occurrences" in overlap


def test_airflow_drift_warning_for_hourly_schedules_restricted_to_some_days():
    report = explain("0 * * * 1", after=datetime(2026, 9, 1), tz=NY)
    drift = messages(report, "airflow_dst_drift")
    assert any("runs at 2026-11-01 23:00 (-05:00)" in m for m in drift)
    assert any("does not run at 2027-03-15 00:00 (-04:00)" in m for m in drift)


def test_airflow_drift_warning_on_lord_howe_names_airflows_off_grid_time():
    report = explain("45 * * * *", after=datetime(2026, 9, 1), tz=LORD_HOWE)
    drift = messages(report, "airflow_dst_drift")
    assert any(
        "runs at 2026-10-04 03:15 (+11:00) and does not run at 2026-10-04 02:45 (+11:00)" in m for m in drift
    )
    (overlap,) = messages(report, "dst_overlap")
    assert overlap.count("This preview (not Airflow, see airflow_dst_drift)") == 1


def test_croniter_differs_warning_flags_expressions_airflow_reads_differently():
    equal_range = messages(explain("0 23-23 * * *", after=datetime(2026, 1, 1), tz=JKT), "croniter_differs")
    assert "hour '23-23' as 0 through 23 (standard cron: 23)" in equal_range[0]
    star_step = messages(explain("0 0 */2 * 1", after=datetime(2026, 1, 1), tz=JKT), "croniter_differs")
    assert "OR day-of-week Monday" in star_step[0]
    assert "AND Monday" in star_step[0]
    assert codes(explain("0 0 13 * 3-3", after=datetime(2026, 1, 1), tz=JKT)) == [
        "dom_dow_or",
        "croniter_differs",
    ]
    for expr in ("30 2 * * *", "0 0 1 * 0", "0 0 * * 7", "0 0 1-31 * 1", "*/5 9-17 * * 1-5"):
        assert "croniter_differs" not in codes(explain(expr, after=datetime(2026, 1, 1), tz=JKT))


def test_croniter_differs_is_silent_exactly_when_croniter_walks_the_same_minutes():
    croniter = pytest.importorskip("croniter").croniter
    rng = random.Random(4)
    silent = 0
    for _ in range(300):
        expr = random_expression(rng)
        try:
            report = explain(expr, after=datetime(2026, 1, 1), count=0, tz="UTC")
        except CronError:
            continue
        if "croniter_differs" in codes(report):
            continue
        silent += 1
        start = datetime(rng.randint(2000, 2060), rng.randint(1, 12), 1, 12)
        it = croniter(expr, start)
        theirs = [it.get_next(datetime) for _ in range(12)]
        ours = []
        current = start
        for _ in range(12):
            current = parse(expr).next_wall(current)
            ours.append(current)
        assert theirs == ours, expr
    assert silent > 150


# --- next runs and DST handling -------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    [
        # gap: the missing wall time runs shifted forward by the gap (Airflow's rule)
        (
            "30 2 * * *",
            NY,
            datetime(2027, 3, 13, 12),
            ["2027-03-14T03:30:00-04:00", "2027-03-15T02:30:00-04:00"],
        ),
        (
            "0,30 2 * * *",
            NY,
            datetime(2027, 3, 13, 12),
            ["2027-03-14T03:00:00-04:00", "2027-03-15T02:00:00-04:00"],
        ),
        (
            "15 2 * * *",
            LORD_HOWE,
            datetime(2026, 10, 3, 12),
            ["2026-10-04T02:45:00+11:00", "2026-10-05T02:15:00+11:00"],
        ),
        # overlap, fixed hour: once, at the second occurrence
        (
            "30 1 * * *",
            NY,
            datetime(2026, 10, 31, 12),
            ["2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"],
        ),
        (
            "30 2 * * *",
            BERLIN,
            datetime(2026, 10, 24, 12),
            ["2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "45 1 * * *",
            LORD_HOWE,
            datetime(2027, 4, 3, 12),
            ["2027-04-04T01:45:00+10:30", "2027-04-05T01:45:00+10:30"],
        ),
        # overlap, every hour: both occurrences
        (
            "30 * * * *",
            NY,
            datetime(2026, 11, 1, 0, 0),
            [
                "2026-11-01T00:30:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T01:30:00-05:00",
                "2026-11-01T02:30:00-05:00",
            ],
        ),
        # gap, every hour: continues in real time
        (
            "*/20 * * * *",
            NY,
            datetime(2027, 3, 14, 1, 0),
            [
                "2027-03-14T01:20:00-05:00",
                "2027-03-14T01:40:00-05:00",
                "2027-03-14T03:00:00-04:00",
                "2027-03-14T03:20:00-04:00",
            ],
        ),
        (
            "0 * * * *",
            LORD_HOWE,
            datetime(2027, 4, 4, 0, 30),
            ["2027-04-04T01:00:00+11:00", "2027-04-04T02:00:00+10:30", "2027-04-04T03:00:00+10:30"],
        ),
    ],
)
def test_next_runs_across_dst_changes(expr, tz, after, expected):
    assert iso(next_runs(expr, after, len(expected), tz)) == expected


def test_every_hour_schedule_starting_inside_the_repeated_hour_keeps_both_passes():
    zone = ZoneInfo(NY)
    first_pass = datetime(2026, 11, 1, 1, 40, tzinfo=zone)  # fold=0: -04:00
    second_pass = datetime(2026, 11, 1, 1, 10, fold=1, tzinfo=zone)
    assert iso(next_runs("*/30 * * * *", first_pass, 2, NY)) == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
    ]
    assert iso(next_runs("*/30 * * * *", second_pass, 1, NY)) == ["2026-11-01T01:30:00-05:00"]


def test_naive_after_is_wall_time_in_the_zone_and_aware_after_is_converted():
    naive = next_runs("0 9 * * *", datetime(2026, 6, 1, 8, 0), 1, NY)
    aware = next_runs("0 9 * * *", datetime(2026, 6, 1, 12, 0, tzinfo=UTC), 1, NY)  # 08:00 EDT
    assert iso(naive) == iso(aware) == ["2026-06-01T09:00:00-04:00"]
    assert naive[0].tzinfo == ZoneInfo(NY)


def test_next_runs_are_strictly_after_including_seconds():
    assert iso(next_runs("30 2 * * *", datetime(2026, 11, 5, 2, 29, 59), 1, JKT)) == [
        "2026-11-05T02:30:00+07:00"
    ]
    assert iso(next_runs("30 2 * * *", datetime(2026, 11, 5, 2, 30, 0, 1), 1, JKT)) == [
        "2026-11-06T02:30:00+07:00"
    ]
    assert next_runs("* * * * *", datetime(2026, 1, 1), 0, JKT) == []
    with pytest.raises(ValueError):
        next_runs("* * * * *", datetime(2026, 1, 1), -1, JKT)


def test_explain_near_the_end_of_the_calendar_does_not_overflow():
    report = explain("0 0 * * *", after=datetime(9999, 12, 30, 12), count=5, tz=NY)
    assert iso(report.next) == ["9999-12-31T00:00:00-05:00"]
    leap = explain("30 2 * * *", after=datetime(2028, 2, 29, 12), tz=NY)
    assert "2028-03-12" in messages(leap, "dst_gap")[0]


def test_next_runs_stop_at_the_end_of_the_calendar():
    assert iso(next_runs("0 0 31 12 *", datetime(9998, 6, 1), 5, "UTC")) == [
        "9998-12-31T00:00:00+00:00",
        "9999-12-31T00:00:00+00:00",
    ]


# --- differential tests against cronsim -----------------------------------------------


def test_next_runs_agree_with_cronsim_on_thousands_of_generated_expressions():
    rng = random.Random(20261105)
    compared = 0
    for _ in range(3000):
        expr = random_expression(rng)
        tz = rng.choice(["UTC", JKT])
        after = random_after(rng, tz)
        try:
            ours = next_runs(expr, after, 5, tz)
        except CronError as error:
            assert error.code == "never_runs", (expr, error)
            with pytest.raises(CronSimError):
                CronSim(expr.upper(), after)
            continue
        assert iso(ours) == iso(cronsim_runs(expr, after, 5)), (expr, after)
        compared += 1
    assert compared > 2900
    for impossible in ("0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 2 *", "0 0 31 2,4 */2"):
        with pytest.raises(CronError, match="never runs"):
            parse(impossible)
        with pytest.raises(CronSimError):
            CronSim(impossible, datetime(2026, 1, 1))


def test_next_runs_agree_with_cronsim_in_dst_zones_away_from_the_change_days():
    # cronsim follows Debian cron on change days (documented differences below), so only
    # runs on other days are compared, up to the horizon both lists reach.
    rng = random.Random(77)
    for _ in range(500):
        expr = random_expression(rng)
        tz = rng.choice(DST_ZONES)
        zone = ZoneInfo(tz)
        after = datetime(rng.randint(2020, 2035), rng.randint(1, 12), rng.randint(1, 28), tzinfo=zone)
        try:
            ours = next_runs(expr, after, 12, tz)
        except CronError:
            continue
        theirs = cronsim_runs(expr, after, 12)
        if not ours or not theirs:
            assert ours == theirs == [], expr
            continue
        horizon = min(ours[-1], theirs[-1])

        def ordinary(runs, horizon=horizon, zone=zone):
            return [r.astimezone(UTC) for r in runs if r <= horizon and not _change_day(r.date(), zone)]

        assert ordinary(ours) == ordinary(theirs), (expr, tz, after)


def _change_day(day: date, zone: ZoneInfo) -> bool:
    start = datetime(day.year, day.month, day.day, tzinfo=zone)
    end = datetime(day.year, day.month, day.day, 23, 59, tzinfo=zone)
    return start.utcoffset() != end.utcoffset()


@given(
    minute=st.sampled_from(["*", "*/7", "5", "0-30/10", "15,45", "10-20"]),
    hour=st.sampled_from(["*", "*/3", "2", "9-17", "0,12", "22-23"]),
    dom=st.sampled_from(["*", "1", "*/2", "15-20", "31", "29,30"]),
    month=st.sampled_from(["*", "2", "FEB-APR", "*/4", "jul,aug", "12"]),
    dow=st.sampled_from(["*", "0", "7", "MON-FRI", "*/3", "sat,sun"]),
    when=st.datetimes(min_value=datetime(1980, 1, 1), max_value=datetime(2080, 1, 1)),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_next_runs_match_cronsim_in_utc(minute, hour, dom, month, dow, when):
    expr = f"{minute} {hour} {dom} {month} {dow}"
    after = when.replace(tzinfo=UTC)
    try:
        ours = next_runs(expr, after, 4, "UTC")
    except CronError as error:
        assert error.code == "never_runs"
        with pytest.raises(CronSimError):
            CronSim(expr.upper(), after)
        return
    assert iso(ours) == iso(cronsim_runs(expr, after, 4))


def test_documented_difference_with_cronsim_in_a_dst_gap():
    after = datetime(2027, 3, 13, 12, tzinfo=ZoneInfo(NY))
    # cronsim (Debian cron): the first real minute after the gap; here: Airflow's shift.
    assert iso(cronsim_runs("30 2 * * *", after, 1)) == ["2027-03-14T03:00:00-04:00"]
    assert iso(next_runs("30 2 * * *", after, 1, NY)) == ["2027-03-14T03:30:00-04:00"]


def test_documented_difference_with_cronsim_in_a_dst_overlap():
    after = datetime(2026, 10, 31, 12, tzinfo=ZoneInfo(NY))
    # cronsim (Debian cron): the first occurrence; here: the second, as Airflow does.
    assert iso(cronsim_runs("30 1 * * *", after, 1)) == ["2026-11-01T01:30:00-04:00"]
    assert iso(next_runs("30 1 * * *", after, 1, NY)) == ["2026-11-01T01:30:00-05:00"]


def test_documented_difference_with_cronsim_on_equal_ranges_and_single_value_steps():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    # Vixie cron: 16-16/9 is {16}; cronsim reads it like 16/9 = {16, 25}.
    assert [r.day for r in cronsim_runs("0 0 16-16/9 * *", after, 2)] == [16, 25]
    assert [r.day for r in next_runs("0 0 16-16/9 * *", after, 2, "UTC")] == [16, 16]
    # cronsim accepts 5/15 as 5-59/15; Vixie cron rejects it, and so does this reader.
    assert cronsim_runs("5/15 * * * *", after, 1)[0].minute == 5
    with pytest.raises(CronError, match="5-59/15"):
        parse("5/15 * * * *")


# --- agreement with Airflow's CronTriggerTimetable ------------------------------------


@pytest.fixture(scope="module")
def airflow():
    trigger = pytest.importorskip("airflow.timetables.trigger")
    base = pytest.importorskip("airflow.timetables.base")
    pendulum = pytest.importorskip("pendulum")

    class Airflow:
        @staticmethod
        def runs(expr: str, tz: str, after: datetime, count: int) -> list[str]:
            timetable = trigger.CronTriggerTimetable(expr, timezone=tz)
            current = pendulum.instance(after.astimezone(UTC))
            out = []
            for _ in range(count):
                current = timetable._get_next(current)
                out.append(current.in_timezone(tz).isoformat())
            return out

        @staticmethod
        def next_dagrun(expr: str, tz: str, previous: datetime) -> str:
            timetable = trigger.CronTriggerTimetable(expr, timezone=tz)
            end = pendulum.instance(previous.astimezone(UTC))
            info = timetable.next_dagrun_info(
                last_automated_data_interval=base.DataInterval(end, end),
                restriction=base.TimeRestriction(earliest=None, latest=None, catchup=True),
            )
            return info.run_after.in_timezone(tz).isoformat()

    return Airflow


def _changes(tz: str) -> list[datetime]:
    zone = ZoneInfo(tz)
    found, day = [], datetime(2026, 1, 1, tzinfo=UTC)
    while day.year < 2028:
        nxt = day + timedelta(days=1)
        if day.astimezone(zone).utcoffset() != nxt.astimezone(zone).utcoffset():
            found.append(nxt)
        day = nxt
    return found


CHANGES = {tz: _changes(tz) for tz in DST_ZONES}
BEFORE = [timedelta(minutes=1), timedelta(hours=1), timedelta(hours=3), timedelta(days=1), timedelta(days=8)]


def test_reference_outputs_agree_with_airflows_next_dagrun_info(airflow):
    zone = ZoneInfo(JKT)
    assert airflow.next_dagrun("30 2 * * *", JKT, datetime(2026, 11, 5, 0, 10, tzinfo=zone)) == (
        "2026-11-05T02:30:00+07:00"
    )
    assert airflow.next_dagrun("0 0 1 * 0", JKT, datetime(2026, 11, 5, 12, tzinfo=zone)) == (
        "2026-11-08T00:00:00+07:00"
    )
    previous = datetime(2027, 3, 13, 2, 30, tzinfo=ZoneInfo(NY))
    assert airflow.next_dagrun("30 2 * * *", NY, previous) == iso(next_runs("30 2 * * *", previous, 1, NY))[0]


@pytest.mark.parametrize(
    ("expr", "tz", "after"),
    [
        ("30 2 * * *", NY, datetime(2027, 3, 13, 12)),
        ("0,30 2 * * *", NY, datetime(2027, 3, 13, 12)),
        ("30 1 * * *", NY, datetime(2026, 10, 31, 12)),
        ("30 * * * *", NY, datetime(2026, 11, 1, 0, 0)),
        ("30 *,5 * * *", NY, datetime(2026, 11, 1, 0, 0)),  # croniter: not '*', runs once
        ("30 0-23 * * *", NY, datetime(2026, 11, 1, 0, 0)),
        ("*/20 * * * *", NY, datetime(2027, 3, 14, 1, 0)),
        ("30 2 * * *", BERLIN, datetime(2026, 10, 24, 12)),
        ("30 2 * * *", BERLIN, datetime(2027, 3, 27, 12)),
        ("*/15 * * * *", BERLIN, datetime(2026, 10, 25, 1, 50)),
        ("15 2 * * *", LORD_HOWE, datetime(2026, 10, 3, 12)),
        ("45 1 * * *", LORD_HOWE, datetime(2027, 4, 3, 12)),
        ("*/10 * * * *", LORD_HOWE, datetime(2026, 10, 4, 1, 30)),
        ("*/10 * * * *", LORD_HOWE, datetime(2027, 4, 4, 1, 20)),
        ("0 0 1 * 0", JKT, datetime(2026, 11, 5, 12)),
    ],
)
def test_next_runs_match_airflow_cron_trigger_timetable(airflow, expr, tz, after):
    aware = after.replace(tzinfo=ZoneInfo(tz))
    assert iso(next_runs(expr, aware, 6, tz)) == airflow.runs(expr, tz, aware, 6)


def test_fixed_hour_schedules_match_airflow_across_dst_changes(airflow):
    rng = random.Random(7)
    checked = 0
    while checked < 200:
        expr = plain_expression(rng)
        schedule = parse(expr)
        if schedule.every_hour:
            continue
        tz = rng.choice(DST_ZONES)
        after = rng.choice(CHANGES[tz]) - rng.choice(BEFORE)
        assert iso(next_runs(expr, after, 8, tz)) == airflow.runs(expr, tz, after, 8), (expr, tz, after)
        checked += 1


def test_every_hour_schedules_match_airflow_or_carry_a_drift_warning(airflow):
    rng = random.Random(11)
    checked = differed = 0
    while checked < 200:
        fields = plain_expression(rng).split()
        fields[1] = rng.choice(["*", "*/1", "0-23"])
        if rng.random() < 0.4:
            fields[2:] = ["*", "*", "*"]
        expr = " ".join(fields)
        schedule = parse(expr)
        tz = rng.choice(DST_ZONES)
        zone = ZoneInfo(tz)
        after = rng.choice(CHANGES[tz]) - rng.choice(BEFORE)
        expected = airflow.runs(expr, tz, after, 8)
        simulated, current = [], after.astimezone(UTC)
        for _ in range(8):
            current = _airflow_next(schedule, current, zone)
            simulated.append(current.astimezone(zone).isoformat())
        assert simulated == expected, (expr, tz, after)
        ours = iso(next_runs(expr, after, 8, tz))
        every_day = len(schedule.doms) == 31 and len(schedule.dows) == 7 and len(schedule.months) == 12
        if every_day and tz != LORD_HOWE:
            assert ours == expected, (expr, tz, after)  # whole-hour shifts: no drift
        if ours != expected:
            differed += 1
            assert "airflow_dst_drift" in codes(explain(expr, after=after, count=1, tz=tz)), (expr, tz)
        checked += 1
    assert differed > 0


def test_documented_airflow_drift_on_lord_howe_is_real(airflow):
    after = datetime(2026, 10, 4, 0, 30, tzinfo=ZoneInfo(LORD_HOWE))
    assert airflow.runs("45 * * * *", LORD_HOWE, after, 3) == [
        "2026-10-04T00:45:00+10:30",
        "2026-10-04T01:45:00+10:30",
        "2026-10-04T03:15:00+11:00",  # Airflow: not minute 45
    ]
    assert iso(next_runs("45 * * * *", after, 3, LORD_HOWE))[2] == "2026-10-04T02:45:00+11:00"


def test_documented_airflow_drift_for_monday_only_hourly_is_real(airflow):
    last_monday_run = datetime(2026, 10, 26, 23, 0, tzinfo=ZoneInfo(NY))
    assert airflow.runs("0 * * * 1", NY, last_monday_run, 2) == [
        "2026-11-01T23:00:00-05:00",  # Airflow: a Sunday
        "2026-11-02T00:00:00-05:00",
    ]
    assert iso(next_runs("0 * * * 1", last_monday_run, 1, NY)) == ["2026-11-02T00:00:00-05:00"]


def test_documented_croniter_difference_is_real(airflow):
    after = datetime(2026, 11, 1, tzinfo=ZoneInfo(JKT))
    assert airflow.runs("0 0 */2 * 1", JKT, after, 2) == [
        "2026-11-02T00:00:00+07:00",
        "2026-11-03T00:00:00+07:00",  # croniter: odd day OR Monday
    ]
    assert iso(next_runs("0 0 */2 * 1", after, 2, JKT)) == [
        "2026-11-09T00:00:00+07:00",
        "2026-11-23T00:00:00+07:00",
    ]


# --- report, text and command line ----------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "description"),
    [
        ("30 2 * * *", "At 02:30 every day."),
        ("*/15 * * * *", "Every 15 minutes."),
        ("0 9 * * 1-5", "At 09:00 on Monday through Friday."),
        ("0 0 1 * *", "At 00:00 on day 1 of the month."),
        ("0 0 1 * 0", "At 00:00 on day 1 of the month or on Sunday."),
        ("@yearly", "At 00:00 on 1 January."),
        ("@hourly", "At minute 0 past every hour."),
        ("* 2 * * *", "Every minute from 02:00 through 02:59."),
        ("0 8 * 1-3 *", "At 08:00 every day in January through March."),
        ("0 0 */2 * 1", "At 00:00 on every 2nd day of the month when that day is a Monday."),
    ],
)
def test_description_is_one_sentence(expr, description):
    assert explain(expr, after=datetime(2026, 1, 1), tz=JKT).description == description


def test_report_to_json_dict_has_the_documented_shape():
    report = explain("0 0 1 * MON", after=datetime(2026, 11, 25), count=2, tz=JKT)
    data = json.loads(json.dumps(report.to_json_dict()))
    assert set(data) == {"expression", "fields", "description", "warnings", "next"}
    assert data["expression"] == "0 0 1 * MON"
    assert data["fields"]["dow"] == [1]
    assert data["warnings"][0]["code"] == "dom_dow_or"
    assert set(data["warnings"][0]) == {"code", "message"}
    assert data["next"] == ["2026-11-30T00:00:00+07:00", "2026-12-01T00:00:00+07:00"]


def test_format_report_shows_fields_meaning_description_warnings_and_runs():
    report = explain("30 2 * * *", after=datetime(2027, 3, 12), count=3, tz=NY)
    text = format_report(report, NY)
    for fragment in (
        "Expression:  30 2 * * *",
        "minute        30  minute 30",
        "hour          2   hour 2",
        "day of month  *   every day of the month",
        "month         *   every month",
        "day of week   *   every day of the week",
        "Description: At 02:30 every day.",
        "[dst_gap] 2027-03-14",
        "Next 3 runs (America/New_York):",
        "Sun 2027-03-14 03:30 (-04:00)",
    ):
        assert fragment in text


def test_the_preview_writes_four_digit_years_and_an_offsets_seconds(capsys):
    """Bug: a preview in year 1 read `Tue 1-01-02 02:30 (+07:07)`: strftime's `%Y` left the
    year unpadded, and the offset lost its seconds (Jakarta's local mean time is +07:07:12)."""
    assert main(["30 2 * * *", "--after", "0001-01-02T00:00", "--count", "1"],
                default_tz=JKT) == 0
    assert "  Tue 0001-01-02 02:30 (+07:07:12)" in capsys.readouterr().out.splitlines()


def test_a_start_outside_the_calendar_in_utc_is_an_error_not_a_traceback(capsys):
    """Bug: `cron ... --after 0001-01-01T00:00` in Jakarta ended in an OverflowError
    traceback: that wall time is before year 1 in UTC."""
    assert main(["30 2 * * *", "--after", "0001-01-01T00:00"], default_tz=JKT) == 2
    assert "start 0001-01-01T00:00:00+07:07:12 is out of range" in capsys.readouterr().err


def test_main_prints_the_report_and_exits_0(capsys):
    assert main(["30 2 * * *", "--after", "2026-11-05T00:10", "--count", "2"], default_tz=JKT) == 0
    out = capsys.readouterr().out
    assert "Thu 2026-11-05 02:30 (+07:00)" in out
    assert "Fri 2026-11-06 02:30 (+07:00)" in out


def test_main_json_output_and_default_after_from_now(capsys):
    now = datetime(2026, 11, 5, 12, 0, tzinfo=ZoneInfo(JKT))
    assert main(["0 0 1 * 0", "--json", "--count", "1"], now=lambda: now, default_tz=JKT) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["next"] == ["2026-11-08T00:00:00+07:00"]
    assert data["warnings"][0]["code"] == "dom_dow_or"


def test_main_uses_default_tz_and_accepts_an_unquoted_expression(capsys):
    assert main(["30", "2", "*", "*", "*", "--after", "2026-06-01", "--json"], default_tz=BERLIN) == 0
    assert json.loads(capsys.readouterr().out)["next"][0] == "2026-06-01T02:30:00+02:00"


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["0 24 * * *"], ["hour", "'24'", "0-23"]),
        (["0 0 30 2 *"], ["never runs"]),
        (["0 0 * * *", "--tz", "Nowhere/City"], ["unknown time zone"]),
        (["0 0 * * *", "--after", "yesterday"], ["--after", "ISO 8601"]),
        (["0 0 * * *", "--count", "0"], ["--count"]),
        ([], ["EXPR"]),
    ],
)
def test_main_exits_2_with_the_reason_on_stderr(capsys, argv, fragments):
    assert main(argv, default_tz=JKT) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for fragment in fragments:
        assert fragment in captured.err
