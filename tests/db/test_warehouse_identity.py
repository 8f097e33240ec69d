"""The watermark never describes a warehouse that is not there: a missing, empty, other or
restored older warehouse is refused before anything is written, and `state reconcile` makes
the watermark describe the present one, re-running exactly the dates it lacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import SAMPLE_DATES, Workspace, run_cli
from tests.db.conftest import _pg_admin_conninfo, _pg_connect, _pg_server_url

D02, D03, D04 = SAMPLE_DATES


def cli(ws: Workspace, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_cli(list(args), cwd=ws.root, env=ws.env(**env))


def entries(ws: Workspace, **env: str) -> dict:
    out = cli(ws, "state", "export", **env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


def sqlite_file(ws: Workspace) -> Path:
    return Path(make_url(ws.warehouse_url).database)


def done_twice(ws: Workspace, **env: str) -> dict:
    """D02 and D03 processed; the watermark's entries."""
    ws.copy_samples()
    for day in (D02, D03):
        out = cli(ws, "run", "--date", day.isoformat(), **env)
        assert out.returncode == 0, out.stdout + out.stderr
    return entries(ws, **env)


def assert_refused(out: subprocess.CompletedProcess, wanted_id: str, why: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert wanted_id in errors[0] and why in errors[0], errors[0]
    assert "state reconcile" in errors[0]


def test_a_missing_sqlite_warehouse_is_refused_and_no_file_is_created(sqlite_workspace):
    """Bug: with the warehouse file moved away, a forced run created a new, almost empty
    warehouse and succeeded, while the watermark still called the other dates done."""
    ws = sqlite_workspace
    before = done_twice(ws)
    wanted = before[D02.isoformat()]["warehouse"]["id"]
    moved = sqlite_file(ws).parent.with_name("moved")
    sqlite_file(ws).parent.rename(moved)
    state_bytes, manifests = ws.state_file.read_bytes(), ws.manifests()

    out = cli(ws, "run", "--date", D03.isoformat(), "--force")
    assert_refused(out, wanted, "its file does not exist")
    assert not sqlite_file(ws).parent.exists()  # no file, not even its folder
    assert ws.state_file.read_bytes() == state_bytes  # no attempt, no intent
    assert ws.manifests() == manifests
    for command in (["due", "--now", "2026-11-05T02:30"], ["status"]):
        out = cli(ws, *command)
        assert out.returncode == 2 and wanted in out.stderr, out.stderr
    # status ends with the sentence the status page and a refused Airflow task end with
    assert out.stderr.splitlines()[-1] == (
        "error: warehouse_url is not the warehouse the watermark describes: point it at that "
        "warehouse, or after a real loss run `tokokita-etl state reconcile`")
    assert not sqlite_file(ws).parent.exists()


def test_another_sqlite_warehouse_is_refused_and_left_unchanged(sqlite_workspace, tmp_path):
    ws = sqlite_workspace
    before = done_twice(ws)
    other = Workspace(tmp_path / "other", f"sqlite:///{tmp_path / 'other' / 'wh.db'}")
    other.copy_samples(D04)
    assert cli(other, "run", "--date", D04.isoformat()).returncode == 0
    other_bytes = sqlite_file(other).read_bytes()

    out = cli(ws, "run", "--date", D04.isoformat(), TOKOKITA_WAREHOUSE_URL=other.warehouse_url)
    assert_refused(out, before[D02.isoformat()]["warehouse"]["id"], "another warehouse")
    assert sqlite_file(other).read_bytes() == other_bytes
    assert D04.isoformat() not in entries(ws)


def test_a_restored_older_sqlite_copy_is_refused(sqlite_workspace, tmp_path):
    ws = sqlite_workspace
    ws.copy_samples()
    assert cli(ws, "run", "--date", D02.isoformat()).returncode == 0
    backup = tmp_path / "backup.db"
    shutil.copyfile(sqlite_file(ws), backup)
    assert cli(ws, "run", "--date", D03.isoformat()).returncode == 0
    shutil.copyfile(backup, sqlite_file(ws))

    out = cli(ws, "run", "--date", D04.isoformat())
    assert_refused(out, entries(ws)[D03.isoformat()]["warehouse"]["id"], "older copy")
    assert sqlite_file(ws).read_bytes() == backup.read_bytes()


@pytest.mark.postgres
@pytest.mark.parametrize("state", ["files", "database"])
def test_a_fresh_empty_postgresql_database_is_refused_and_gets_no_table(pg_url, tmp_path, state):
    """Bug: the same watermark pointed at a fresh, empty PostgreSQL database ran and
    succeeded there."""
    env = {"TOKOKITA_STATE_URL": _pg_state_url()} if state == "database" else {}
    pipeline = f"identity_{uuid.uuid4().hex[:8]}"
    env["TOKOKITA_PIPELINE"] = pipeline
    ws = Workspace(tmp_path, pg_url)
    before = done_twice(ws, **env)
    empty = _fresh_schema_url()
    try:
        out = cli(ws, "run", "--date", D04.isoformat(), TOKOKITA_WAREHOUSE_URL=empty, **env)
        assert_refused(out, before[D02.isoformat()]["warehouse"]["id"], "missing or empty")
        assert _tables(empty) == []
        assert D04.isoformat() not in entries(ws, **env)
    finally:
        _drop_schema(empty)


@pytest.mark.postgres
def test_a_postgresql_database_restored_from_an_older_dump_is_refused_then_reconciled(
        pg_url, tmp_path):
    """The restored warehouse lacks D03: refused; `state reconcile` keeps D02 done and marks
    D03 needs re-run, without a failure; the next runs reload exactly D03, with the checksums
    of its clean run."""
    ws = Workspace(tmp_path, pg_url)
    ws.copy_samples()
    assert cli(ws, "run", "--date", D02.isoformat()).returncode == 0
    dump = tmp_path / "warehouse.dump"
    schema = _schema_of(pg_url)
    subprocess.run(["pg_dump", "-Fc", "-n", schema, "-f", str(dump),
                    _pg_admin_conninfo(_pg_server_url())], check=True, timeout=60)
    assert cli(ws, "run", "--date", D03.isoformat()).returncode == 0
    clean = entries(ws)
    with _pg_connect(_pg_server_url()) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    subprocess.run(["pg_restore", "-d", _pg_admin_conninfo(_pg_server_url()), str(dump)],
                   check=True, timeout=60)

    out = cli(ws, "run", "--date", D04.isoformat())
    assert_refused(out, clean[D03.isoformat()]["warehouse"]["id"], "older copy")

    out = cli(ws, "state", "reconcile")
    assert out.returncode == 0, out.stderr
    assert "1 done dates it holds as recorded stay done; 1 need a re-run" in out.stdout
    assert f"needs re-run: {D03}" in out.stdout
    after = entries(ws)
    assert after[D02.isoformat()]["status"] == "success"
    assert after[D03.isoformat()]["status"] == "failed"
    assert after[D03.isoformat()]["failures"] == 0  # no failure of the partition
    status = cli(ws, "status", "--now", "2026-11-05T09:00")
    assert status.returncode == 0, status.stderr
    line = next(row for row in status.stdout.splitlines() if row.startswith(str(D03)))
    assert "needs re-run" in line
    due = cli(ws, "due", "--now", "2026-11-05T02:30")
    assert due.stdout.split() == [D03.isoformat(), D04.isoformat()]

    for day in (D02, D03):
        out = cli(ws, "run", "--date", day.isoformat())
        assert out.returncode == 0, out.stdout + out.stderr
    rerun = entries(ws)
    assert rerun[D03.isoformat()]["checksums"] == clean[D03.isoformat()]["checksums"]
    assert rerun[D02.isoformat()]["attempt"] == 1  # kept, not re-run
    assert rerun[D03.isoformat()]["attempt"] == 2


def test_reconcile_after_a_lost_sqlite_file_creates_the_warehouse_and_reloads_every_date(
        sqlite_workspace):
    ws = sqlite_workspace
    clean = done_twice(ws)
    sqlite_file(ws).unlink()
    out = cli(ws, "state", "reconcile")
    assert out.returncode == 0, out.stderr
    assert "(created)" in out.stdout and "2 need a re-run" in out.stdout
    for day in (D02, D03):
        assert cli(ws, "run", "--date", day.isoformat()).returncode == 0
    after = entries(ws)
    for day in (D02, D03):
        assert after[day.isoformat()]["checksums"] == clean[day.isoformat()]["checksums"]
        assert after[day.isoformat()]["warehouse"]["id"] != clean[day.isoformat()]["warehouse"]["id"]


def test_a_watermark_from_before_identities_adopts_its_warehouse_but_not_a_missing_one(
        sqlite_workspace):
    """Entries recorded before warehouse identities name none: the present warehouse, with
    its tables, is taken (and given an identity); a missing one is still refused."""
    ws = sqlite_workspace
    done_twice(ws)
    import sqlite3

    with sqlite3.connect(sqlite_file(ws)) as conn:
        conn.execute("DROP TABLE warehouse_identity")
    data = json.loads(ws.state_file.read_text(encoding="utf-8"))
    for entry in data["runs"].values():
        entry.pop("warehouse")
    ws.state_file.write_text(json.dumps(data), encoding="utf-8")

    assert cli(ws, "run", "--date", D04.isoformat()).returncode == 0
    adopted = entries(ws)
    assert adopted[D04.isoformat()]["warehouse"]["revision"] == 1

    for entry in data["runs"].values():
        entry.pop("warehouse", None)
    ws.state_file.write_text(json.dumps(data), encoding="utf-8")
    sqlite_file(ws).unlink()
    out = cli(ws, "run", "--date", D04.isoformat(), "--force")
    assert out.returncode == 2 and "missing or empty" in out.stderr, out.stderr
    assert not sqlite_file(ws).exists()


def _schema_of(url: str) -> str:
    options = make_url(url).query["options"]
    return options.split("search_path=", 1)[1]


def _fresh_schema_url() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with _pg_connect(_pg_server_url()) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return make_url(_pg_server_url()).update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


def _drop_schema(url: str) -> None:
    with _pg_connect(_pg_server_url()) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{_schema_of(url)}" CASCADE')


def _tables(url: str) -> list[str]:
    with _pg_connect(_pg_server_url()) as conn:
        return [row[0] for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (_schema_of(url),))]


def _pg_state_url() -> str:
    return _pg_server_url()



def test_the_probe_looks_for_the_tables_the_declared_schemas_register(workspace):
    """A warehouse made before identities is told from an empty one by the partitioned
    tables the pipeline's schema module (and its upstream's) declares, not by a name the
    runner knows."""
    from sqlalchemy import text

    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.identity import Presence, partition_tables, present
    from tokokita_etl.warehouse.database import Warehouse
    from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

    orders = partition_tables([ORDERS])
    assert orders == ("fact_pesanan", "karantina", "summary_harian")
    assert partition_tables([WEEKLY_CITY_REPORT]) == tuple(sorted((*orders, "summary_mingguan")))
    warehouse = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    if warehouse.is_sqlite:
        sqlite_file(workspace).parent.mkdir(parents=True, exist_ok=True)
    with warehouse.begin(label="warehouse") as conn:
        conn.execute(text("CREATE TABLE unrelated (x TEXT)"))
    assert present(warehouse, orders).presence is Presence.EMPTY
    with warehouse.begin(label="warehouse") as conn:
        conn.execute(text("CREATE TABLE summary_mingguan (week_start TEXT)"))
    assert present(warehouse, orders).presence is Presence.EMPTY
    assert present(warehouse, partition_tables([WEEKLY_CITY_REPORT])).presence \
        is Presence.UNMARKED
