"""Fault injection: the PostgreSQL warehouse freezes (SIGSTOP of the postmaster and every
backend) while a run is loading or validating.

Regression: a run whose warehouse froze mid-statement waited forever. `db_statement_timeout_s`
is PostgreSQL's `statement_timeout`, enforced by the server, which is frozen; the host's
kernel still acknowledges the client's data and TCP keepalives (libpq keepalives and
`tcp_user_timeout` did not end a wait for a result either), so nothing on the client side
ever gave up: a forced re-run of a 300,000-row partition frozen in validate was still waiting
after 60 s with `db_statement_timeout_s=3`. The warehouse's psycopg connections now wait for
the server at most `db_answer_timeout_s` per operation, then close and fail the run with a
transient warehouse error. (That deadline was `db_statement_timeout_s +
db_connect_timeout_s` before, so with the shipped 600 s a frozen warehouse held a run and its
date's claim for ten minutes; it is a setting of its own now, 45 s by default.)

The frozen run uses `db_answer_timeout_s=5` and `db_connect_timeout_s=2` with the default
`db_statement_timeout_s` (600 s): it must end within a bounded time with one `[error]` line
naming the warehouse, recorded as a failed attempt; after SIGCONT a plain re-run succeeds with
the clean run's checksums.

Quick mode: one freeze in load, and one frozen backend per kind of wait (a statement, the
streamed checksum). `TOKOKITA_FAULTS=long`: `TOKOKITA_FREEZES` freezes of the run (default 6) at
moments spread over load and validate.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from datetime import date

import pytest
from sqlalchemy import text

from devtools.samples import generate_partition
from tests.conftest import Workspace, run_cli
from tests.faults.conftest import LONG, forced_run_past_stage
from tokokita_etl.errors import WarehouseError
from tokokita_etl.orders.checksums import fact_digest
from tokokita_etl.runner.policy import ErrorKind, classify
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import IN_PROGRESS
from tokokita_etl.warehouse.database import Warehouse

DAY = date(2026, 11, 10)
ROWS = 100_000
FREEZES = int(os.environ.get("TOKOKITA_FREEZES") or 6) if LONG else 1
ANSWER_TIMEOUT_S, CONNECT_TIMEOUT_S = 5, 2
#: the client's deadline for one answer, and the bound on the frozen run after the freeze:
#: one deadline, plus process exit and the failure record on a loaded machine
DEADLINE_S = ANSWER_TIMEOUT_S
BOUND_S = DEADLINE_S + 20
FROZEN_SETTINGS = {"TOKOKITA_DB_ANSWER_TIMEOUT_S": str(ANSWER_TIMEOUT_S),
                   "TOKOKITA_DB_CONNECT_TIMEOUT_S": str(CONNECT_TIMEOUT_S),
                   "TOKOKITA_MAX_ATTEMPTS": "1000"}
#: (stage record that shows the run inside the stage after it, seconds to wait after it)
MOMENTS = [("transform", 0.4), ("load", 0.0), ("transform", 0.0), ("load", 0.2),
           ("transform", 0.9)]


def _entry(ws: Workspace) -> dict:
    return StateStore(ws.state_file, "orders").read().entry(DAY)


@pytest.mark.parametrize("wait", ["statement", "streamed_checksum"])
def test_a_frozen_backend_fails_the_wait_within_the_client_deadline(controlled_pg, wait):
    """Bug: a statement on a frozen server waited forever (the server-side statement_timeout
    cannot fire); it now fails after db_answer_timeout_s as a transient
    error naming the warehouse, including the streamed fact checksum, whose cursor cleanup
    on the closed connection used to hide the cause."""
    warehouse = Warehouse(controlled_pg.create_database(), "Asia/Jakarta",
                          answer_timeout_s=ANSWER_TIMEOUT_S,
                          connect_timeout_s=CONNECT_TIMEOUT_S)
    warehouse.ensure_schema()
    backend = None
    try:
        started = time.monotonic()
        with pytest.raises(WarehouseError) as err, warehouse.begin() as conn:
            backend = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            os.kill(backend, signal.SIGSTOP)
            # a client that waits for ever gets its answer after BOUND_S: a failure, no hang
            thaw = threading.Timer(BOUND_S, os.kill, (backend, signal.SIGCONT))
            thaw.start()
            started = time.monotonic()
            if wait == "statement":
                conn.execute(text("SELECT COUNT(*) FROM fact_pesanan"))
            else:
                fact_digest(warehouse, conn, DAY)
        took = time.monotonic() - started
    finally:
        if backend is not None:
            thaw.cancel()
            with contextlib.suppress(ProcessLookupError):  # ended once thawed
                os.kill(backend, signal.SIGCONT)
    assert DEADLINE_S - 0.5 < took < DEADLINE_S + 5, took
    assert err.value.transient and classify(err.value) is ErrorKind.TRANSIENT
    assert str(err.value) == (
        f"warehouse {warehouse.display_url}: no answer from the server within {DEADLINE_S} s "
        "(db_answer_timeout_s); the connection was closed")


@pytest.mark.skipif(not LONG, reason="long fault mode: TOKOKITA_FAULTS=long")
def test_with_the_shipped_deadlines_a_frozen_backend_fails_the_wait_within_a_minute(
        controlled_pg):
    """Regression: with the shipped settings a frozen warehouse held a run for up to ten
    minutes (the answer deadline was db_statement_timeout_s=600 plus the connect timeout); with
    the defaults (db_answer_timeout_s) it fails within a minute."""
    from tokokita_etl.settings.model import default

    warehouse = Warehouse(controlled_pg.create_database(), "Asia/Jakarta")  # the shipped deadlines
    assert default("db_answer_timeout_s") < 60 <= default("db_statement_timeout_s")
    backend = None
    try:
        with pytest.raises(WarehouseError) as err, warehouse.begin() as conn:
            backend = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            os.kill(backend, signal.SIGSTOP)
            started = time.monotonic()
            conn.execute(text("SELECT 1"))
        took = time.monotonic() - started
    finally:
        if backend is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(backend, signal.SIGCONT)
    assert default("db_answer_timeout_s") - 0.5 < took < 60, took
    assert err.value.transient and "(db_answer_timeout_s)" in str(err.value)


def _frozen_forced_run(ws: Workspace, cluster, after: str, delay: float,
                       ) -> tuple[int | None, float, str]:
    """A forced re-run whose warehouse is frozen `delay` s after stage `after` recorded its
    output: (exit code or None when it still ran BOUND_S after the freeze, seconds from the
    freeze to its end, stderr). The cluster is thawed before returning."""
    process = forced_run_past_stage(ws, DAY, FROZEN_SETTINGS, after)
    err = ""
    try:
        time.sleep(delay)
        cluster.freeze()
        frozen_at = time.monotonic()
        try:
            _, err = process.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - frozen_at, err
        return process.returncode, time.monotonic() - frozen_at, err
    finally:
        cluster.thaw()
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_frozen_warehouse_fails_the_run_in_bounded_time_and_a_rerun_restores_it(
        tmp_path, controlled_pg):
    """Bug: a run whose warehouse froze in load or validate never ended; it now fails within
    the client deadline as a recorded, transient attempt, and after SIGCONT a re-run
    restores the clean checksums."""
    ws = Workspace(tmp_path, controlled_pg.create_database())
    display = Warehouse(ws.warehouse_url, "Asia/Jakarta").display_url
    generate_partition(ws.raw / f"pesanan_{DAY.isoformat()}.csv", DAY, ROWS, seed=5)
    clean = run_cli(["run", "--date", DAY.isoformat()], cwd=ws.root, env=ws.env(),
                    module=True, timeout=600)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    checksums, gold = _entry(ws)["checksums"], ws.gold_file(DAY).read_bytes()

    ended: list[float] = []
    failed_in: dict[str, int] = {}
    missed = 0
    for n in range(FREEZES):
        after, delay = MOMENTS[n % len(MOMENTS)]
        attempts = _entry(ws)["attempt"]
        code, took, err = _frozen_forced_run(ws, controlled_pg, after, delay)
        assert code is not None, f"the run still waited {took:.0f} s after the freeze: {err}"
        if code == 0 and LONG:  # it finished before the freeze
            missed += 1
            continue
        ended.append(took)
        assert code == 1 and "Traceback" not in err, err
        errors = [line for line in err.splitlines() if line.startswith("[error]")]
        assert len(errors) == 1, err
        assert f"warehouse {display}: " in errors[0], errors
        assert "no answer from the server" in errors[0] or "timeout" in errors[0], errors
        entry = _entry(ws)
        assert entry["status"] == "failed" and entry["attempt"] == attempts + 1, entry
        assert entry["failed_stage"] in ("load", "validate") and IN_PROGRESS not in entry, entry
        failed_in[entry["failed_stage"]] = failed_in.get(entry["failed_stage"], 0) + 1
        assert list((ws.state_dir / "claims").glob("*.json")) == []

        controlled_pg.ready()
        again = run_cli(["run", "--date", DAY.isoformat()], cwd=ws.root,
                        env=ws.env(TOKOKITA_MAX_ATTEMPTS="1000"), module=True, timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        entry = _entry(ws)
        assert entry["status"] == "success" and entry["checksums"] == checksums, entry
        assert ws.gold_file(DAY).read_bytes() == gold
    print(f"\nfreezes: {FREEZES}, failed in {failed_in}, finished before the freeze: "
          f"{missed}; seconds from freeze to exit: {[round(t, 1) for t in ended]}")
    assert sum(failed_in.values()) >= (FREEZES + 1) // 2, (failed_in, missed)
