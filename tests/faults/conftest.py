"""Fixtures of the fault tests.

* The warehouse fixtures of tests/db (a fresh PostgreSQL schema per test, `backend` on both
  SQLite and PostgreSQL) for the fault tests that run on both backends.
* `controlled_pg`: a throw-away PostgreSQL cluster of its own (tests/pgserver.py), separate
  from the run's server, that a test may stop (`pg_ctl stop -m immediate`), start again,
  freeze (SIGSTOP of the postmaster and every backend) and thaw. One cluster serves the
  session; each test gets it running and thawed, with a fresh database.

Quick and long modes: `TOKOKITA_FAULTS=long` (`make faults`) selects the long mode; `LONG`
below is what the fault modules read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import text

from tests import pgserver
from tests.db.conftest import backend, pg_url, workspace  # noqa: F401
from tokokita_etl.orders.checksums import fact_digest
from tokokita_etl.orders.contract import QUARANTINE_COLUMNS
from tokokita_etl.orders.schema import summary_rows
from tokokita_etl.warehouse.checksums import rows_checksum
from tokokita_etl.warehouse.database import Warehouse

LONG = os.environ.get("TOKOKITA_FAULTS") == "long"


def forced_run_past_stage(ws, day, settings: dict[str, str],
                          after: str) -> subprocess.Popen:
    """Start `python -m tokokita_etl run --date day --force` in `ws` with `settings` (env)
    on a clean staging folder, and return once stage `after` has recorded its output (or the
    run ended, or 300 s passed): the moment a test injects its fault."""
    from tests.conftest import clean_env

    staged = ws.staging / day.isoformat()
    shutil.rmtree(staged, ignore_errors=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "tokokita_etl", "run", "--date", day.isoformat(), "--force"],
        cwd=ws.root, env=clean_env(**ws.env(**settings)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (staged / f"{after}.json").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    return process


def warehouse_rows(ws, day: date) -> dict[str, tuple[int, str]]:
    """Rows and checksum of `day`'s fact, summary and karantina rows in the warehouse."""
    warehouse = Warehouse.from_settings(ws.settings())
    columns = ", ".join(QUARANTINE_COLUMNS)
    with warehouse.begin() as conn:
        fact = fact_digest(warehouse, conn, day)
        summary = list(summary_rows(warehouse, conn, day))
        karantina = [[v if v is None or isinstance(v, int) else str(v) for v in row]
                     for row in conn.execute(text(
                         f"SELECT {columns} FROM karantina WHERE order_date = :d ORDER BY line"),
                         {"d": warehouse.day_param(day)})]
    return {"fact": (fact.rows, fact.checksum),
            "summary": (len(summary), rows_checksum(summary)),
            "karantina": (len(karantina), rows_checksum(karantina))}


def final_files(ws) -> dict[str, bytes]:
    """Every file under its final name in the gold and quarantine folders (temporary and
    staged files have a dot name)."""
    return {f"{folder.name}/{path.name}": path.read_bytes()
            for folder in (ws.gold, ws.quarantine) if folder.exists()
            for path in sorted(folder.iterdir())
            if path.is_file() and not path.name.startswith(".")}


def _children(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (the postmaster's backends and helpers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class ControlledPostgres:
    """A throw-away cluster a test can break: stop it hard, start it again, freeze it."""

    def __init__(self, server: pgserver.ThrowawayServer) -> None:
        self.server = server
        self.frozen: list[int] = []
        self.stopped = False

    @property
    def port(self) -> int:
        return self.server.port

    def url(self, database: str = pgserver.MAINTENANCE_DATABASE) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh database; its SQLAlchemy URL."""
        import psycopg

        name = f"f_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop_immediately(self) -> None:
        """`pg_ctl stop -m immediate`: every backend ends at once, no shutdown checkpoint."""
        result = self.server.pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")
        assert result.returncode == 0, result.stdout + result.stderr
        self.stopped = True

    def start(self) -> None:
        """Start the stopped cluster again on its port (crash recovery runs first)."""
        log = str(self.server.data.parent / "server.log")
        result = self.server.pg_ctl("-l", log, "-o", f"-p {self.port}", "-w", "-t", "60",
                                    "start", start_new_session=True)
        assert result.returncode == 0, result.stdout + result.stderr
        self.stopped = False

    def freeze(self) -> list[int]:
        """SIGSTOP the postmaster first (no new backend is forked), then all its children."""
        pid = self.server.postmaster_pid()
        assert pid is not None, "the cluster is not running"
        os.kill(pid, signal.SIGSTOP)
        self.frozen = [pid]
        for child in _children(pid):
            try:
                os.kill(child, signal.SIGSTOP)
                self.frozen.append(child)
            except ProcessLookupError:
                pass
        return list(self.frozen)

    def thaw(self) -> None:
        """SIGCONT whatever `freeze` stopped (children first, then the postmaster)."""
        for pid in reversed(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []

    def ready(self, timeout: float = 60) -> None:
        """Wait until the cluster accepts a login."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url().replace("+psycopg", ""), connect_timeout=5):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@pytest.fixture(scope="session")
def _fault_cluster() -> Iterator[ControlledPostgres]:
    server = pgserver.ThrowawayServer(pgserver.find_binaries(), superuser="postgres")
    server.start()
    cluster = ControlledPostgres(server)
    try:
        yield cluster
    finally:
        cluster.thaw()
        server.stop()


@pytest.fixture
def controlled_pg(_fault_cluster: ControlledPostgres) -> Iterator[ControlledPostgres]:
    """The fault cluster, running and thawed at the start and at the end of the test."""
    cluster = _fault_cluster
    try:
        yield cluster
    finally:
        cluster.thaw()
        if cluster.stopped:
            cluster.start()
        cluster.ready()
