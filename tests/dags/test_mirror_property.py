"""The mirror property: the dates the DAG's catch-up runs process == `due_runs` at that clock.

Runs come from the DAG's real timetable (as the scheduler creates them with catchup); each run
goes through the same sensor and gate decisions the operators apply.
"""

from __future__ import annotations

import json
import tempfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pendulum
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.airflow_support import REPO

JKT = ZoneInfo("Asia/Jakarta")
WAIT_WINDOW = timedelta(hours=6)


@pytest.fixture(scope="module")
def timetable():
    """The scheduler's view of the DAG's timetable."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.encoders import coerce_to_core_timetable

    return coerce_to_core_timetable(DagBag(str(REPO / "dags")).dags["tokokita_orders_daily"].timetable)


def created_runs(timetable, start: datetime, now: datetime) -> list[tuple[datetime, date]]:
    """Fire times and partition keys of the scheduled runs Airflow has created by `now`
    (catchup from `start`), through the entry point the scheduler calls."""
    from airflow.timetables.base import TimeRestriction

    restriction = TimeRestriction(earliest=pendulum.instance(start), latest=None, catchup=True)
    runs, last = [], None
    while True:
        last = timetable.next_dagrun_info_v2(last_dagrun_info=last, restriction=restriction)
        if last is None or last.run_after > now:
            return runs
        runs.append((last.run_after, date.fromisoformat(last.partition_key)))


def processed_dates(timetable, store, raw_dir: Path, now: datetime, start: datetime,
                    lookback: int, max_attempts: int) -> list[date]:
    """What those runs process: sensor decision, then gate decision, per run."""
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import gate_decision, sensor_decision
    from tokokita_etl.runner.schedule import partition_date_for_run
    from tokokita_etl.settings.model import Settings

    out = []
    for fire, day in created_runs(timetable, start, now):
        assert day == partition_date_for_run(fire, "Asia/Jakarta")  # the run at D+1 does D
        seen = sensor_decision(present=ORDERS.raw.exists(Settings(raw_dir=raw_dir), day),
                               run_type="scheduled", fire_time=fire, now=now,
                               wait_window=WAIT_WINDOW)
        if seen != "present":
            continue
        decision = gate_decision(store.read(), day, run_type="scheduled", now=now,
                                 lookback_days=lookback, max_attempts=max_attempts, tz="Asia/Jakarta")
        if decision.action == "run":
            out.append(day)
    return sorted(out)


clock_days = st.sampled_from([date(2026, 11, 5), date(2026, 12, 31), date(2027, 1, 1),
                              date(2027, 2, 28), date(2028, 2, 29), date(2028, 3, 1),
                              date(2026, 11, 30)])
clock_times = st.one_of(
    st.sampled_from([time(2, 29, 59), time(2, 30), time(2, 30, 1), time(0, 0), time(23, 59, 59)]),
    st.times())
entries = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["success", "failed"]), st.integers(min_value=0, max_value=5)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day=clock_days, at=clock_times, utc_clock=st.booleans(),
       lookback=st.integers(min_value=1, max_value=10),
       max_attempts=st.integers(min_value=1, max_value=4),
       present=st.lists(st.booleans(), min_size=16, max_size=16),
       states=st.lists(entries, min_size=16, max_size=16))
def test_catchup_runs_process_exactly_the_due_dates(timetable, day, at, utc_clock, lookback,
                                                    max_attempts, present, states):
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.stores.files import StateStore
    from tokokita_etl.settings.model import Settings

    now = datetime.combine(day, at, tzinfo=JKT)
    if utc_clock:
        now = now.astimezone(ZoneInfo("UTC"))
    with tempfile.TemporaryDirectory() as tmp:
        raw, runs = Path(tmp) / "raw", {}
        raw.mkdir()
        for offset, (has_file, entry) in enumerate(zip(present, states, strict=True)):
            d = day - timedelta(days=offset)
            if has_file:
                (raw / f"pesanan_{d.isoformat()}.csv").write_text("order_id\n1\n")
            if entry:
                runs[d.isoformat()] = {"status": entry[0], "attempt": entry[1]}
        (Path(tmp) / "state.json").write_text(json.dumps({"pipeline": "p", "runs": runs}))
        store = StateStore(Path(tmp) / "state.json", "orders")
        start = datetime.combine(day - timedelta(days=20), time(0, 0), tzinfo=JKT)

        airflow_dates = processed_dates(timetable, store, raw, now, start, lookback, max_attempts)
        due = due_runs(store.read(), now, ORDERS.raw.present(Settings(raw_dir=raw)), lookback,
                       max_attempts, tz="Asia/Jakarta")

    local = now.astimezone(JKT)
    if local.time() < time(2, 30):
        # documented: due_runs lists yesterday from midnight, its Airflow run fires at 02:30
        due = [d for d in due if d != local.date() - timedelta(days=1)]
    assert airflow_dates == due
