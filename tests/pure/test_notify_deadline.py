"""Which runs get a deadline, when it is, and how it is worded (`tokokita_etl.runner.notify`)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tokokita_etl.runner.notify import (
    deadline_after,
    deadline_message,
    deadline_offset,
    deadline_wording,
    run_deadline,
)

JKT = "Asia/Jakarta"
SIX = time(6, 0)
#: the run of 2026-11-02 fires at 2026-11-03 02:30 Jakarta (19:30 UTC the day before)
FIRE = datetime(2026, 11, 3, 2, 30, tzinfo=ZoneInfo(JKT))
DEADLINE = datetime(2026, 11, 3, 6, 0, tzinfo=ZoneInfo(JKT))


def test_a_scheduled_runs_deadline_is_deadline_local_time_on_its_fire_date():
    assert deadline_after(FIRE, SIX, JKT) == DEADLINE
    assert deadline_after(FIRE.astimezone(UTC), SIX, JKT) == DEADLINE
    # a time not after the fire time on its day: the next day's
    assert deadline_after(FIRE, time(1, 0), JKT) == datetime(2026, 11, 4, 1, 0,
                                                             tzinfo=ZoneInfo(JKT))
    assert deadline_after(FIRE, time(2, 30), JKT) == datetime(2026, 11, 4, 2, 30,
                                                              tzinfo=ZoneInfo(JKT))


def test_a_scheduled_run_created_before_its_deadline_gets_it():
    assert run_deadline("scheduled", FIRE, FIRE, SIX, JKT) == DEADLINE
    # created late (a busy scheduler) but still before 06:00: it still has its deadline
    late = DEADLINE - timedelta(seconds=1)
    assert run_deadline("scheduled", FIRE.astimezone(UTC), late, SIX, JKT) == DEADLINE


def test_a_scheduled_run_created_at_or_after_its_deadline_gets_none():
    """Regression: every catch-up run (`make demo`, `make up`) was created after its deadline
    and showed a red Missed badge in Airflow's UI."""
    assert run_deadline("scheduled", FIRE, DEADLINE, SIX, JKT) is None
    assert run_deadline("scheduled", FIRE, datetime(2026, 12, 1, 3, 0, tzinfo=UTC), SIX,
                        JKT) is None


@pytest.mark.parametrize("run_type", ["manual", "backfill", "asset_triggered",
                                      "asset_materialization"])
def test_runs_other_than_scheduled_get_no_deadline(run_type):
    """Regression: a failed manual run with a logical date showed an Upcoming deadline."""
    assert run_deadline(run_type, FIRE, FIRE, SIX, JKT) is None


def test_a_run_without_a_fire_time_gets_no_deadline():
    assert run_deadline("scheduled", None, FIRE, SIX, JKT) is None


def test_a_naive_time_is_refused_with_both_values_named():
    with pytest.raises(ValueError, match=r"aware datetimes.*2026, 11, 3, 2, 30"):
        run_deadline("scheduled", FIRE.replace(tzinfo=None), FIRE, SIX, JKT)


def test_the_alerts_interval_after_its_midnight_reference_lands_on_the_deadline():
    assert deadline_offset(SIX) == timedelta(hours=6)
    assert deadline_offset(time(14, 7)) == timedelta(hours=14, minutes=7)
    # what the reference answers (the midnight before the deadline) plus the interval
    midnight = DEADLINE - deadline_offset(SIX)
    assert midnight == datetime(2026, 11, 3, 0, 0, tzinfo=ZoneInfo(JKT))


def test_the_deadline_is_worded_with_its_day_relative_to_the_fire_date():
    start = datetime(2026, 11, 1, tzinfo=ZoneInfo(JKT))
    assert deadline_wording("30 2 * * *", JKT, start, SIX) == \
        "succeeded by 06:00 Asia/Jakarta on the fire date"
    assert deadline_wording("30 2 * * *", JKT, start, time(1, 0)) == \
        "succeeded by 01:00 Asia/Jakarta the day after the fire date"


def test_the_alerts_message_names_the_deadlines_local_date():
    context = {"dag_run": {"logical_date": "2026-11-02T19:30:00Z", "run_type": "scheduled",
                           "partition_key": "2026-11-02"},
               "deadline": {"deadline_time": "2026-11-02T23:00:00+00:00"}}
    message = deadline_message(context, dag_id="d", tz=JKT, deadline_local_time="06:00")
    assert message["message"] == ("the run for 2026-11-02 has not succeeded by 06:00 "
                                  "Asia/Jakarta on 2026-11-03 (its fire date)")
