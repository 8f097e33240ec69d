"""The runner's grains (day, ISO week, calendar month): their keys, dates and fire rule, and
that they agree with the partition mappers Airflow 3.3 ships (`StartOfWeekMapper`,
`StartOfMonthMapper`, `RollupMapper` with `WeekWindow` / `MonthWindow`) over two years of
dates, so that a pipeline declared with a grain means what Airflow's vocabulary means."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from airflow.partition_mappers.base import RollupMapper
from airflow.partition_mappers.temporal import StartOfMonthMapper, StartOfWeekMapper
from airflow.partition_mappers.window import MonthWindow, WeekWindow

from tokokita_etl.errors import ConfigError
from tokokita_etl.runner.schedule import (
    DAILY,
    GRAINS,
    MONTHLY,
    WEEKLY,
    fire_time_for_partition,
    partition_date_for_run,
)

ZONE = "Asia/Jakarta"
TWO_YEARS = [date(2026, 1, 1) + timedelta(days=n) for n in range(731)]
KEY = "%Y-%m-%d"


@pytest.mark.parametrize(("grain", "mapper", "window"), [
    (WEEKLY, StartOfWeekMapper, WeekWindow), (MONTHLY, StartOfMonthMapper, MonthWindow)])
def test_a_grain_keys_and_spans_its_partitions_as_airflows_partition_mappers_do(
        grain, mapper, window):
    to_key = mapper(timezone=ZONE, input_format=KEY, output_format=KEY)
    rollup = RollupMapper(upstream_mapper=to_key, window=window())
    for day in TWO_YEARS:
        key = grain.start(day)
        assert to_key.to_downstream(day.isoformat()) == key.isoformat(), day
        if key == day:
            assert rollup.to_upstream(key.isoformat()) == \
                {d.isoformat() for d in grain.dates(key)}, key


def test_a_month_is_keyed_by_its_first_day_and_holds_each_of_its_dates():
    assert MONTHLY.start(date(2026, 11, 30)) == date(2026, 11, 1)
    assert MONTHLY.dates(date(2026, 2, 1))[-1] == date(2026, 2, 28)
    assert len(MONTHLY.dates(date(2028, 2, 1))) == 29
    assert len(MONTHLY.dates(date(2026, 12, 1))) == 31
    assert MONTHLY.next(date(2026, 12, 1)) == date(2027, 1, 1)
    for day in TWO_YEARS:
        for grain in (DAILY, WEEKLY, MONTHLY):
            key = grain.start(day)
            assert day in grain.dates(key)
            assert grain.next(key) == key + timedelta(days=len(grain.dates(key)))


def test_a_run_processes_the_last_whole_partition_before_its_fire_date():
    assert DAILY.for_fire(date(2026, 11, 3)) == date(2026, 11, 2)
    assert WEEKLY.for_fire(date(2026, 11, 9)) == date(2026, 11, 2)
    assert WEEKLY.for_fire(date(2026, 11, 15)) == date(2026, 11, 2)
    assert MONTHLY.for_fire(date(2026, 12, 2)) == date(2026, 11, 1)
    assert MONTHLY.for_fire(date(2027, 1, 1)) == date(2026, 12, 1)
    assert MONTHLY.for_fire(date(2027, 3, 31)) == date(2027, 2, 1)


def test_a_monthly_run_on_the_second_at_five_processes_the_month_before_and_back():
    jakarta = ZoneInfo(ZONE)
    fire = fire_time_for_partition(date(2026, 11, 1), "0 5 2 * *", ZONE, MONTHLY)
    assert fire == datetime(2026, 12, 2, 5, 0, tzinfo=jakarta)
    assert partition_date_for_run(fire, ZONE, grain=MONTHLY) == date(2026, 11, 1)
    assert partition_date_for_run(fire, ZONE, "2026-10-01", grain=MONTHLY) == date(2026, 10, 1)


def test_a_date_that_starts_no_month_is_refused_naming_the_months_first_day():
    with pytest.raises(ConfigError) as refused:
        MONTHLY.check(date(2026, 11, 5))
    assert str(refused.value) == ("--date: 2026-11-05 is not the first date of a monthly "
                                  "partition (the first day of a month); its partition is "
                                  "2026-11-01")
    assert MONTHLY.check(date(2026, 11, 1)) == date(2026, 11, 1)


def test_a_day_nests_in_every_grain_and_a_week_not_in_a_month():
    assert all(DAILY.nests_in(grain) for grain in GRAINS.values())
    assert WEEKLY.nests_in(WEEKLY) and MONTHLY.nests_in(MONTHLY)
    assert not WEEKLY.nests_in(MONTHLY)
    assert not MONTHLY.nests_in(WEEKLY)
