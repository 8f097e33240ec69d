"""`DailyPartitionTimetable` called as the scheduler, the backfill and the trigger call it:
Airflow's `CronPartitionTimetable` with D's local midnight as the partition date."""

from __future__ import annotations

import json
from datetime import date

import pendulum
import pytest
from airflow.timetables.base import DagRunInfo, TimeRestriction
from airflow.timetables.trigger import CronPartitionTimetable

from tokokita_airflow.timetable import DailyPartitionTimetable, PartitionDateTimetable

JKT = "Asia/Jakarta"
D02 = "2026-11-02"


def jkt(text: str):
    return pendulum.parse(text, tz=JKT)


def scheduled(timetable, earliest, count: int) -> list[DagRunInfo]:
    """The first `count` runs of a catch-up from `earliest`, as the scheduler creates them."""
    restriction = TimeRestriction(earliest=earliest, latest=None, catchup=True)
    infos, last = [], None
    while len(infos) < count:
        last = timetable.next_dagrun_info_v2(last_dagrun_info=last, restriction=restriction)
        if last is None:
            break
        infos.append(last)
    return infos


def backfill(timetable, from_date: str, to_date: str) -> list[str]:
    """The partition keys a backfill over `from_date`..`to_date` creates runs for, given as
    `airflow backfill create` parses them (UTC wall clock, re-read in the DAG's zone)."""
    return [info.partition_key for info in timetable.iter_partition_dagrun_infos(
        earliest=pendulum.parse(from_date), latest=pendulum.parse(to_date))]


def test_it_is_airflows_cron_partition_timetable_with_the_key_of_the_day_before():
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    assert isinstance(timetable, CronPartitionTimetable)
    assert timetable.partitioned and not timetable.partitioned_at_runtime
    assert timetable.summary == "30 2 * * * (processes the day before)"


def test_the_run_firing_at_d_plus_1_0230_in_jakarta_processes_d():
    first, second = scheduled(DailyPartitionTimetable("30 2 * * *", timezone=JKT),
                              jkt("2026-11-02T00:00:00"), 2)
    assert (first.run_after, first.partition_key) == (jkt("2026-11-02T02:30:00"), "2026-11-01")
    assert (second.run_after, second.partition_key) == (jkt("2026-11-03T02:30:00"), D02)
    # the partition date is D's midnight in Jakarta, as Airflow decodes a key given by hand
    assert second.partition_date == jkt("2026-11-02T00:00:00")
    assert second.data_interval is None and second.logical_date is None


def test_a_manual_key_decodes_to_the_partition_date_of_the_scheduled_run_of_that_date():
    """Regression: with the stock timetable a scheduled run's partition date was D 02:30 but
    a key given in the trigger form decoded to D 00:00, so a backfill did not see the manual
    run of D (Airflow matches runs by partition date)."""
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    run = scheduled(timetable, jkt("2026-11-03T00:00:00"), 1)[0]
    assert run.partition_key == D02
    assert timetable.resolve_partition_date(D02) == run.partition_date


def clock(monkeypatch, now):
    """The instant the timetable reads as now."""
    monkeypatch.setattr("tokokita_airflow.timetable.utcnow", lambda: now)


def test_a_backfill_covers_the_whole_days_from_d1_to_d2_inclusive(monkeypatch):
    """Regression: a backfill of 2026-11-02..2026-11-04 processed 11-01..11-03 (its range was
    the runs' fire times); Airflow's stock timetable with a 02:30 cron left out 11-04 (its
    partition date 11-04 02:30 is after the bound 11-04 00:00)."""
    clock(monkeypatch, pendulum.datetime(2026, 12, 1, 12, 0, tz="UTC"))
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    stock = CronPartitionTimetable("30 2 * * *", timezone=JKT, run_offset=-1,
                                   key_format="%Y-%m-%d")
    assert [i.partition_key for i in stock.iter_partition_dagrun_infos(
        earliest=pendulum.parse("2026-11-02"), latest=pendulum.parse("2026-11-04"))] == \
        ["2026-11-02", "2026-11-03"]
    assert backfill(timetable, "2026-11-02", "2026-11-04") == [
        "2026-11-02", "2026-11-03", "2026-11-04"]
    assert backfill(timetable, "2026-11-04", "2026-11-04") == ["2026-11-04"]
    # a bound with a time: the days whose midnight lies inside the range
    assert backfill(timetable, "2026-11-02T01:00:00", "2026-11-04T23:00:00") == [
        "2026-11-03", "2026-11-04"]
    runs = list(timetable.iter_partition_dagrun_infos(earliest=pendulum.parse("2026-11-02"),
                                                      latest=pendulum.parse("2026-11-02")))
    # each backfill run has the fire time and partition date of the scheduled run of its date
    assert runs[0].run_after == jkt("2026-11-03T02:30:00")
    assert runs[0].partition_date == timetable.resolve_partition_date(D02)


def test_a_backfill_leaves_out_the_dates_whose_run_has_not_fired(monkeypatch):
    clock(monkeypatch, pendulum.datetime(2026, 11, 4, 12, 0, tz="UTC"))
    # 2026-11-04 19:00 Jakarta: 11-03's run fired at 02:30; 11-04's fires tomorrow
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    assert backfill(timetable, "2026-11-01", "2026-11-10") == [
        "2026-11-01", "2026-11-02", "2026-11-03"]


def test_last_fire_ends_the_scheduled_runs():
    last_fire = jkt("2026-11-03T02:30:00")
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT, last_fire=last_fire)
    fired = [info.run_after for info in scheduled(timetable, jkt("2026-11-02T00:00:00"), 10)]
    assert fired == [jkt("2026-11-02T02:30:00"), last_fire]


@pytest.mark.parametrize("cls", [DailyPartitionTimetable, PartitionDateTimetable])
def test_the_timetable_round_trips_through_serialization_with_and_without_last_fire(cls):
    for last_fire in (None, jkt("2026-11-10T02:30:00")):
        timetable = cls("30 2 * * *", timezone=JKT, last_fire=last_fire)
        data = timetable.serialize()
        again = cls.deserialize(json.loads(json.dumps(data)))
        assert again.serialize() == data
        assert again.last_fire == last_fire


def test_a_dag_version_serialized_before_partitions_deserializes_as_partitioned():
    """The DAG versions stored before the upgrade name `PartitionDateTimetable` with the
    fields of Airflow's CronTriggerTimetable; Airflow deserializes them to show and clear
    their runs."""
    old = {"expression": "30 2 * * *", "timezone": JKT, "interval": 0.0,
           "run_immediately": False, "last_fire": None}
    timetable = PartitionDateTimetable.deserialize(old)
    assert timetable.partitioned
    assert scheduled(timetable, jkt("2026-11-03T00:00:00"), 1)[0].partition_key == D02


def test_the_run_ids_are_airflows_own_with_the_partition_key():
    from airflow.utils.types import DagRunType

    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    fire = jkt("2026-11-03T02:30:00")
    run_id = timetable.generate_run_id(run_type=DagRunType.SCHEDULED, run_after=fire,
                                       data_interval=None, partition_key=D02)
    assert run_id.startswith(f"scheduled__2026-11-03T02:30:00+07:00__{D02}__")
    assert date.fromisoformat(run_id.split("__")[2]) == date(2026, 11, 2)


def test_a_weekly_timetable_keys_each_run_by_the_monday_of_the_week_before_it_fires():
    timetable = DailyPartitionTimetable("0 4 * * 1", timezone=JKT, grain="weekly")
    assert timetable.summary == "0 4 * * 1 (processes the week before)"
    runs = scheduled(timetable, jkt("2026-11-09T00:00"), 3)
    assert [(r.run_after.in_timezone(JKT).isoformat(), r.partition_key) for r in runs] == [
        ("2026-11-09T04:00:00+07:00", "2026-11-02"), ("2026-11-16T04:00:00+07:00", "2026-11-09"),
        ("2026-11-23T04:00:00+07:00", "2026-11-16")]
    assert runs[0].partition_date == jkt("2026-11-02T00:00")
    assert timetable.fire_time(date(2026, 11, 9)) == jkt("2026-11-16T04:00")
    # another weekday's cron still builds the last whole week before it fires
    tuesday = DailyPartitionTimetable("0 6 * * 2", timezone=JKT, grain="weekly")
    assert scheduled(tuesday, jkt("2026-11-09T00:00"), 1)[0].partition_key == "2026-11-02"
    assert tuesday.fire_time(date(2026, 11, 2)) == jkt("2026-11-10T06:00")


def test_a_weekly_backfill_makes_one_run_per_monday_in_its_range_and_serializes_its_grain():
    timetable = DailyPartitionTimetable("0 4 * * 1", timezone=JKT, grain="weekly")
    assert backfill(timetable, "2026-11-04", "2026-11-23") == [
        "2026-11-09", "2026-11-16", "2026-11-23"]
    fields = timetable.serialize()
    assert fields["grain"] == "weekly"
    again = DailyPartitionTimetable.deserialize(json.loads(json.dumps(fields)))
    assert again.grain.name == "weekly" and again.serialize() == fields
    assert "grain" not in DailyPartitionTimetable("30 2 * * *", timezone=JKT).serialize()
    with pytest.raises(ValueError, match="grain 'quarterly': expected one of daily, weekly, "
                                         "monthly"):
        DailyPartitionTimetable("0 4 1 * *", timezone=JKT, grain="quarterly")


def test_a_monthly_backfill_makes_one_run_per_whole_month_in_its_range_keyed_by_its_first_day():
    timetable = DailyPartitionTimetable("0 5 2 * *", timezone=JKT, grain="monthly")
    assert timetable.summary == "0 5 2 * * (processes the month before)"
    assert backfill(timetable, "2026-08-15", "2026-11-30") == [
        "2026-09-01", "2026-10-01", "2026-11-01"]
    assert timetable.fire_time(date(2026, 11, 1)) == jkt("2026-12-02T05:00")
    fields = timetable.serialize()
    assert fields["grain"] == "monthly"
    assert DailyPartitionTimetable.deserialize(json.loads(json.dumps(fields))).serialize() == fields
