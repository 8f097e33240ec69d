"""First runs of many dates at once on an empty PostgreSQL warehouse all succeed (real
processes, a fresh schema)."""

from __future__ import annotations

import json
import subprocess
from datetime import date, timedelta

import pytest

from devtools.samples import generate_partition
from tests.conftest import CLI, Workspace, clean_env

DATES = [date(2026, 11, 10) + timedelta(days=n) for n in range(8)]


@pytest.mark.postgres
def test_eight_first_runs_at_once_on_an_empty_postgresql_warehouse_all_succeed(tmp_path, pg_url):
    """Bug: first runs on an empty PostgreSQL warehouse raced on schema creation: with 8 dates
    at once, runs failed with `duplicate key value violates unique constraint
    "pg_type_typname_nsp_index"`."""
    ws = Workspace(tmp_path, pg_url)
    for day in DATES:
        generate_partition(ws.raw / f"pesanan_{day.isoformat()}.csv", day, 50, seed=day.day)
    env = clean_env(**ws.env())
    procs = [subprocess.Popen([str(CLI), "run", "--date", day.isoformat()], cwd=ws.root,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for day in DATES]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    for day, (code, out, err) in zip(DATES, results, strict=True):
        assert code == 0, (day, out, err)
    runs = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"]
    assert {d: (e["status"], e["attempt"]) for d, e in runs.items()} == {
        day.isoformat(): ("success", 1) for day in DATES}


def _create_schema(url: str, barrier, results) -> None:
    from tokokita_etl.errors import WarehouseError
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.warehouse.database import Warehouse

    ORDERS.declare_tables()  # the tables a first run creates with the identity
    warehouse = Warehouse(url, "Asia/Jakarta")
    with warehouse.engine.connect():
        pass  # connected before the barrier: the creates start together
    barrier.wait(timeout=60)
    try:
        warehouse.ensure_schema()
        results.put("ok")
    except WarehouseError as exc:
        results.put(str(exc))


@pytest.mark.postgres
def test_eight_processes_creating_the_schema_at_the_same_instant_all_succeed(pg_url):
    """Bug: `ensure_schema` was check-then-create without a lock, so first runs released at
    the same instant failed on `pg_type_typname_nsp_index` (the CLI test above starts real
    runs, whose start-up staggers them; this one lines the creates up on a barrier)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(8), context.Queue()
    procs = [context.Process(target=_create_schema, args=(pg_url, barrier, results))
             for _ in range(8)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert outcomes == ["ok"] * 8
