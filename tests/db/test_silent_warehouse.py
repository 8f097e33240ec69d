"""A warehouse that accepts TCP and never answers: the run fails within the connect timeout
with a transient WarehouseError naming the warehouse, and the date's claim is released (a
real listening socket on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli
from tokokita_etl.errors import ConfigError, WarehouseError
from tokokita_etl.settings.model import default
from tokokita_etl.warehouse.database import Warehouse

D02 = SAMPLE_DATES[0]
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A PostgreSQL URL whose server accepts connections (the kernel completes the handshake)
    and never sends a byte."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{server.getsockname()[1]}/tokokita"


def test_silent_warehouse_fails_within_the_connect_timeout_as_transient(tmp_path, silent_url):
    """Bug: a host that accepts TCP and never answers hung the run forever (no connect
    timeout)."""
    ws = Workspace(tmp_path, silent_url)
    warehouse = Warehouse.from_settings(ws.settings(db_connect_timeout_s=2))
    started = time.monotonic()
    with pytest.raises(WarehouseError) as err:
        warehouse.ensure_schema()
    assert time.monotonic() - started < 8
    assert err.value.transient
    assert warehouse.display_url in str(err.value)


def test_cli_run_against_a_silent_warehouse_fails_and_releases_its_claim(
        silent_url, tmp_path, monkeypatch, capsys):
    """Bug: the run hung forever on a silent warehouse, holding its claim; it now fails
    within the default connect timeout (db_connect_timeout_s, 10 s) as a failed attempt and
    leaves no claim behind."""
    ws = Workspace(tmp_path, silent_url)
    ws.copy_samples(D02)
    call = in_process_cli(ws, monkeypatch, capsys, CLOCK)
    started = time.monotonic()
    code, _, err = call("run", "--date", D02.isoformat())
    assert time.monotonic() - started < default("db_connect_timeout_s") + 15
    assert code == 1 and "Traceback" not in err
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][D02.isoformat()]
    assert (entry["status"], entry["failed_stage"]) == ("failed", "load")
    assert "127.0.0.1" in entry["error"] and "timeout" in entry["error"].lower(), entry["error"]
    assert list((ws.state_dir / "claims").glob("*.json")) == []


def test_timeouts_reach_postgresql_as_server_settings(pg_url):
    """The statement and lock timeouts are applied to every PostgreSQL connection, beside
    the options the URL already carries (the tests' search_path)."""
    from sqlalchemy import text

    warehouse = Warehouse(pg_url, "Asia/Jakarta", statement_timeout_s=7, lock_timeout_s=3)
    with warehouse.begin() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == "7s"
        assert conn.execute(text("SHOW lock_timeout")).scalar() == "3s"
        assert conn.execute(text("SHOW search_path")).scalar().startswith("t_")


def test_a_statement_over_the_timeout_is_a_transient_warehouse_error(pg_url):
    """A statement that runs past db_statement_timeout_s (a frozen server looks the same to
    the client) is cancelled and reported as transient, not waited on forever."""
    from sqlalchemy import text

    warehouse = Warehouse(pg_url, "Asia/Jakarta", statement_timeout_s=1)
    with pytest.raises(WarehouseError) as err, warehouse.begin() as conn:
        conn.execute(text("SELECT pg_sleep(5)"))
    assert err.value.transient
    assert "statement timeout" in str(err.value)


@pytest.mark.parametrize("name", ["db_connect_timeout_s", "db_statement_timeout_s",
                                  "db_answer_timeout_s", "db_lock_timeout_s"])
def test_timeout_settings_must_be_positive_integers(tmp_path, name):
    """A zero, negative or non-integer timeout (0 would mean no timeout on PostgreSQL) is a
    configuration error naming the setting."""
    ws = Workspace(tmp_path, "sqlite:///x.db")
    for bad in ("0", "-5", "1.5", "soon"):
        with pytest.raises(ConfigError, match=name):
            ws.settings(**{name: bad})


def test_the_answer_deadline_is_a_setting_of_its_own_not_the_statement_timeout(pg_url):
    """Bug: the client's deadline for an answer was db_statement_timeout_s plus
    db_connect_timeout_s, so with the shipped 600 s a frozen warehouse held a run (and its
    date's claim) for ten minutes. It is db_answer_timeout_s now: a wait for the server longer
    than it fails however long statement_timeout allows; a shorter one is answered."""
    from sqlalchemy import text

    warehouse = Warehouse(pg_url, "Asia/Jakarta", statement_timeout_s=600, answer_timeout_s=2)
    with warehouse.begin() as conn:
        assert conn.execute(text("SELECT pg_sleep(1), 7")).all()[0][1] == 7
    started = time.monotonic()
    with pytest.raises(WarehouseError) as err, warehouse.begin() as conn:
        conn.execute(text("SELECT pg_sleep(6)"))
    assert 1.5 < time.monotonic() - started < 5
    assert err.value.transient
    assert "no answer from the server within 2 s (db_answer_timeout_s)" in str(err.value)
