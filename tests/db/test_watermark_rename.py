"""The orders' watermark, once named `etl-pesanan-tokokita`, is named `orders`: both state
stores read the former name as it is until their first write, which renames it in place
(`state.json` rewritten atomically; the rows of the three state tables in the writing
transaction) with a note naming the new name. On real files and a real PostgreSQL server."""

from __future__ import annotations

import json
import logging
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.conftest import run_cli
from tests.db.conftest import _pg_admin_conninfo
from tokokita_etl.runner.stores.database import CLAIMS, MANIFESTS, WATERMARK, DatabaseStateStore
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, FORMER_NAMES, SUCCESS, Claim

FORMER, NAME = "etl-pesanan-tokokita", "orders"
NOW = datetime(2026, 11, 3, 19, 30, tzinfo=UTC)
DONE, NEW = date(2026, 11, 2), date(2026, 11, 3)
ENTRY = {"attempt": 1, "failures": 0, "status": SUCCESS, "updated_at": "2026-11-03T19:00:00+00:00"}
MANIFEST = {"partition_date": DONE.isoformat(), "status": SUCCESS}


def test_the_orders_former_watermark_name_is_the_one_renamed():
    assert FORMER_NAMES == {NAME: FORMER}


@pytest.fixture(params=["file", pytest.param("database", marks=pytest.mark.postgres)])
def kind(request) -> str:
    return request.param


@pytest.fixture
def store(kind: str, tmp_path: Path, request) -> StateStore | DatabaseStateStore:
    """A store of `orders` (files or a fresh PostgreSQL schema) holding one done date, a
    claim and a manifest under the former name, as the earlier version wrote them."""
    if kind == "file":
        path = tmp_path / "state" / "state.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"pipeline": FORMER, "runs": {DONE.isoformat(): ENTRY}},
                                   indent=2) + "\n", encoding="utf-8")
        return StateStore(path, NAME)
    url = request.getfixturevalue("pg_url")
    store = DatabaseStateStore(url, NAME)
    store.read()  # makes the tables
    with psycopg.connect(_pg_admin_conninfo(url), autocommit=True) as conn:
        conn.execute(f"INSERT INTO {WATERMARK} VALUES (%s, %s, %s)",
                     (FORMER, DONE, json.dumps(ENTRY)))
        conn.execute(f"INSERT INTO {CLAIMS} VALUES (%s, %s, %s)",
                     (FORMER, DONE, json.dumps(Claim("run-old", NOW, NOW + timedelta(hours=24)).to_dict())))
        conn.execute(f"INSERT INTO {MANIFESTS} (pipeline, name, partition_date, body) "
                     "VALUES (%s, %s, %s, %s)", (FORMER, "run-old", DONE, json.dumps(MANIFEST)))
    return store


def stored_names(store: StateStore | DatabaseStateStore) -> set[str]:
    """The names the watermark's data is stored under (the file's `pipeline`; every row's)."""
    if isinstance(store, StateStore):
        return {json.loads(store.path.read_text(encoding="utf-8"))["pipeline"]}
    with psycopg.connect(_pg_admin_conninfo(store.database.url.render_as_string(
            hide_password=False))) as conn:
        return {row[0] for table in (WATERMARK, CLAIMS, MANIFESTS)
                for row in conn.execute(f"SELECT pipeline FROM {table}")}


def test_the_former_name_is_read_as_it_is_until_the_first_write_renames_it(store, caplog):
    caplog.set_level(logging.INFO)
    watermark = store.read()
    assert watermark.entry(DONE)["status"] == SUCCESS and watermark.data["pipeline"] == NAME
    assert store.export()["pipeline"] == NAME
    if isinstance(store, DatabaseStateStore):
        assert store.read_claim(DONE).owner == "run-old"
        assert [body["status"] for body in store.manifests(DONE)] == [SUCCESS]
        assert store.last_outcomes([DONE])[DONE] == MANIFEST
    assert stored_names(store) == {FORMER}  # reading changed nothing
    assert not any(NAME in record.getMessage() for record in caplog.records)

    store.record(NEW, FAILED, {"error": "boom", "failed_stage": "load"}, NOW)

    assert stored_names(store) == {NAME}
    notes = [record.getMessage() for record in caplog.records if FORMER in record.getMessage()]
    assert len(notes) == 1 and f"now named {NAME!r}" in notes[0]
    after = store.read()
    assert after.entry(DONE) == ENTRY and after.entry(NEW)["status"] == FAILED
    if isinstance(store, DatabaseStateStore):
        assert store.read_claim(DONE).owner == "run-old"
        assert [body["status"] for body in store.manifests(DONE)] == [SUCCESS]
    store.record(NEW, SUCCESS, {}, NOW)  # renamed once: no further note
    assert len([r for r in caplog.records if FORMER in r.getMessage()]) == 1


@pytest.mark.parametrize("kind", [pytest.param("database", marks=pytest.mark.postgres)])
def test_a_write_rolled_back_leaves_the_former_name_read_as_before(store):
    def broken(entry):
        raise RuntimeError("the change fails")

    with pytest.raises(RuntimeError):
        store.update_entry(NEW, broken)
    assert stored_names(store) == {FORMER}
    assert store.read().entry(DONE) == ENTRY
    # a claim is a write too: the rows are renamed first
    store.put_claim(NEW, Claim("run-new", NOW, NOW + timedelta(hours=24)))
    assert stored_names(store) == {NAME}
    assert store.read().entry(DONE) == ENTRY and store.read_claim(NEW).owner == "run-new"


def test_state_import_takes_a_file_with_the_former_name_and_export_writes_the_new_one(
        tmp_path, kind, request):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"pipeline": FORMER, "runs": {DONE.isoformat(): ENTRY}}),
                   encoding="utf-8")
    env = {"TOKOKITA_STATE_DIR": str(tmp_path / "state")}
    if kind == "database":
        env["TOKOKITA_STATE_URL"] = request.getfixturevalue("pg_url")
    imported = run_cli(["state", "import", str(old)], cwd=tmp_path, env=env)
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 dates" in imported.stdout
    exported = run_cli(["state", "export"], cwd=tmp_path, env=env)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout) == {"pipeline": NAME, "runs": {DONE.isoformat(): ENTRY}}
