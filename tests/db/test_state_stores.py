"""The two state stores (tokokita_etl.runner.stores.files: state.json and its folders;
tokokita_etl.runner.stores.database: PostgreSQL tables) hold the same fields under the same
rules: each test runs on both, on real files and a real PostgreSQL server, from several
processes where concurrency is the point."""

from __future__ import annotations

import json
import multiprocessing
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.conftest import SAMPLE_DATES, Workspace, run_cli
from tests.db.conftest import _pg_admin_conninfo, _pg_server_url
from tokokita_etl.errors import ConcurrentRunError, StateError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.pipelines import load_settings
from tokokita_etl.runner.claims import claim_date, read_claim, release_date
from tokokita_etl.runner.sequence import gate
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.stores.database import CLAIMS, MANIFESTS, WATERMARK
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, SUCCESS

NOW = datetime(2026, 11, 3, 19, 30, tzinfo=UTC)
DAYS = [date(2026, 11, 1) + timedelta(days=n) for n in range(8)]


def never_finished(owner: str) -> bool | None:
    return False


def make_settings(root: Path, kind: str, pipeline: str) -> OrdersSettings:
    """OrdersSettings under `root` whose state is files (`file`) or PostgreSQL tables (`database`)."""
    values = {"state_dir": "data/state", "staging_dir": "data/staging", "raw_dir": "data/raw",
              "pipeline": pipeline,
              "state_url": _pg_server_url() if kind == "database" else None}
    return load_settings(env={}, overrides=values, cwd=root)


def _delete_pipeline(pipeline: str) -> None:
    with psycopg.connect(_pg_admin_conninfo(_pg_server_url()), autocommit=True) as conn:
        for table in (WATERMARK, CLAIMS, MANIFESTS):
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]:
                conn.execute(f"DELETE FROM {table} WHERE pipeline = %s", (pipeline,))


@pytest.fixture
def pipeline() -> Iterator[str]:
    """A pipeline name of this test alone (the state tables are keyed by pipeline)."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    _delete_pipeline(name)


@pytest.fixture(params=["file", pytest.param("database", marks=pytest.mark.postgres)])
def kind(request) -> str:
    return request.param


@pytest.fixture
def settings(tmp_path: Path, kind: str, pipeline: str) -> OrdersSettings:
    return make_settings(tmp_path, kind, pipeline)


def _history(settings: OrdersSettings) -> None:
    """One sequence of every kind of watermark change."""
    store = state_store(settings)
    day, other = DAYS[0], DAYS[1]
    store.begin(day, "run-a", "extract", NOW)
    store.record(day, FAILED, {"error": "load: warehouse unreachable", "failed_stage": "load"},
                 NOW)
    store.record(day, FAILED, {"error": "boom", "failed_stage": "validate"}, NOW)
    store.reset_attempts(day, now=NOW, by="ops@example.com")
    store.begin(day, "run-b", "extract", NOW)
    store.record(day, SUCCESS, {"rows": {"fact": 8}, "checksums": {"fact": "ab"},
                                "bruto": "12500.00", "bersih": "12000.50", "gold": "g.csv",
                                "warnings": ["low volume: 8 rows"]}, NOW)
    store.begin(other, "run-c", "extract", NOW)
    store.clear_intent(other)  # an entry left empty goes away
    store.begin(DAYS[2], "run-d", "extract", NOW)


def test_the_same_changes_give_the_same_watermark_document_in_both_stores(tmp_path, pipeline):
    files = make_settings(tmp_path / "files", "file", pipeline)
    database = make_settings(tmp_path / "db", "database", pipeline)
    _history(files)
    _history(database)
    on_file = json.loads(files.state_file.read_text(encoding="utf-8"))
    assert state_store(database).export() == on_file
    # field order too: `state export` writes what state.json holds
    assert json.dumps(state_store(database).export()) == json.dumps(on_file)
    assert not database.state_file.exists()


def test_a_watermark_entry_reads_back_with_its_attempts_status_and_intent(settings):
    _history(settings)
    state = state_store(settings).read()
    # two failures, a reset (of the failures: the total is kept), a success
    assert state.has_success(DAYS[0]) and state.attempts(DAYS[0]) == 3
    assert state.entry(DAYS[0])["failures"] == 0
    assert state.entry(DAYS[0])["resets"] == [
        {"at": NOW.isoformat(timespec="seconds"), "by": "ops@example.com", "previous_attempt": 2,
         "previous_failures": 2}]
    assert DAYS[1].isoformat() not in state.runs
    assert state.intent(DAYS[2])["run"] == "run-d"


def test_resetting_the_attempts_of_a_date_never_recorded_makes_no_entry(settings):
    """Bug: `run --reset-attempts` of a date with no entry (and no partition) left an entry
    with no status and no attempt, which `status` could not describe and which made a later
    `state import` of that date fail."""
    store = state_store(settings)
    assert store.reset_attempts(DAYS[3], now=NOW, by="cli") is None
    assert DAYS[3].isoformat() not in store.read().runs
    assert store.export()["runs"] == {}


def test_a_damaged_entry_in_the_state_table_is_an_error_naming_the_table_date_and_field(
        tmp_path, pipeline):
    settings = make_settings(tmp_path, "database", pipeline)
    state_store(settings).record(DAYS[0], FAILED, {"error": "x"}, NOW)
    with psycopg.connect(_pg_admin_conninfo(_pg_server_url()), autocommit=True) as conn:
        conn.execute(f"UPDATE {WATERMARK} SET entry = '{{\"attempt\": \"two\"}}' "
                     "WHERE pipeline = %s", (pipeline,))
    with pytest.raises(StateError) as error:
        state_store(settings).read()
    message = str(error.value)
    assert WATERMARK in message and "2026-11-01" in message
    assert "'attempt'" in message and "must be a count" in message
    with pytest.raises(StateError):  # and it is never overwritten by an update
        state_store(settings).record(DAYS[0], FAILED, {"error": "y"}, NOW)


def _record_many(root: str, kind: str, pipeline: str, own: str, shared: str, times: int,
                 barrier) -> None:
    settings = make_settings(Path(root), kind, pipeline)
    store = state_store(settings)
    barrier.wait()
    for n in range(times):
        store.record(date.fromisoformat(own), FAILED, {"error": f"e{n}"}, NOW)
        store.record(date.fromisoformat(shared), FAILED, {"error": f"e{n}"}, NOW)


def test_eight_processes_updating_their_dates_and_one_shared_date_lose_no_update(
        settings, tmp_path, kind, pipeline):
    context = multiprocessing.get_context("fork")
    barrier, times, shared = context.Barrier(8), 15, date(2026, 10, 31)
    processes = [context.Process(target=_record_many, args=(
        str(tmp_path), kind, pipeline, day.isoformat(), shared.isoformat(), times, barrier))
        for day in DAYS]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    state = state_store(settings).read()
    assert [state.attempts(day) for day in DAYS] == [times] * 8
    assert state.attempts(shared) == 8 * times


def _claim(root: str, kind: str, pipeline: str, n: int, barrier, results) -> None:
    settings = make_settings(Path(root), kind, pipeline)
    barrier.wait()
    try:
        claim_date(settings, DAYS[0], f"airflow:dag:run-{n}", NOW, never_finished)
        results.put((n, "won"))
    except ConcurrentRunError as exc:
        results.put((n, str(exc)))


def test_eight_processes_racing_for_one_date_have_exactly_one_winner(
        settings, tmp_path, kind, pipeline):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(8), context.Queue()
    processes = [context.Process(target=_claim, args=(str(tmp_path), kind, pipeline, n, barrier,
                                                      results)) for n in range(8)]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=60) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    winners = [n for n, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8 and len(winners) == 1
    assert read_claim(settings, DAYS[0]).owner == f"airflow:dag:run-{winners[0]}"
    refusal = next(outcome for outcome in outcomes.values() if outcome != "won")
    assert f"run-{winners[0]}" in refusal and state_store(settings).claim_location(DAYS[0]) \
        in refusal
    release_date(settings, DAYS[0], f"airflow:dag:run-{winners[0]}")
    assert read_claim(settings, DAYS[0]) is None


def test_an_expired_claim_is_taken_over_and_a_release_by_another_owner_changes_nothing(settings):
    claim_date(settings, DAYS[0], "holder", NOW, never_finished)
    release_date(settings, DAYS[0], "someone-else")
    assert read_claim(settings, DAYS[0]).owner == "holder"
    later = NOW + timedelta(hours=settings.claim_ttl_hours, seconds=1)
    claim_date(settings, DAYS[0], "next", later, never_finished)
    claim = read_claim(settings, DAYS[0])
    assert (claim.owner, claim.since) == ("next", later)


def test_the_gate_decides_the_same_on_both_stores(settings):
    store = state_store(settings)
    for _ in range(settings.max_attempts):
        store.record(DAYS[0], FAILED, {"error": "boom"}, NOW)
    blocked = gate(ORDERS, settings, DAYS[0], force=False, reset_attempts=False, now=NOW, by="me")
    assert blocked.action.value == "blocked"
    unblocked = gate(ORDERS, settings, DAYS[0], force=False, reset_attempts=True, now=NOW, by="me")
    # the failures since the last success are reset; the total of outcomes is kept
    assert (unblocked.action.value, unblocked.reset_from, unblocked.attempt) == ("run", 3, 3)
    assert store.read().entry(DAYS[0])["failures"] == 0
    assert store.read().intent(DAYS[0])["run"] == "me"


def test_a_manifest_name_is_never_reused_and_the_newest_comes_first(settings):
    store = state_store(settings)
    bodies = [{"partition_date": DAYS[0].isoformat(), "status": status}
              for status in ("failed", "success")]
    names = [store.write_manifest("run-2026-11-01-193000", body)[0] for body in bodies]
    assert names == ["run-2026-11-01-193000", "run-2026-11-01-193000-2"]
    assert [body["status"] for body in store.manifests(DAYS[0])] == ["success", "failed"]
    assert list(store.manifests(DAYS[1])) == []


@pytest.mark.postgres
def test_state_json_moves_into_the_database_and_exports_back_byte_for_byte(
        sqlite_workspace: Workspace, pipeline):
    ws = sqlite_workspace
    ws.copy_samples()
    env = ws.env(TOKOKITA_PIPELINE=pipeline)
    for day in SAMPLE_DATES:
        assert run_cli(["run", "--date", day.isoformat()], cwd=ws.root, env=env).returncode == 0
    on_file = ws.state_file.read_text(encoding="utf-8")
    db_env = {**env, "TOKOKITA_STATE_URL": _pg_server_url()}
    imported = run_cli(["state", "import", str(ws.state_file)], cwd=ws.root, env=db_env)
    assert imported.returncode == 0, imported.stderr
    assert f"imported {len(SAMPLE_DATES)} dates" in imported.stdout
    exported = run_cli(["state", "export"], cwd=ws.root, env=db_env)
    assert exported.stdout == on_file
    target = ws.root / "exported.json"
    assert run_cli(["state", "export", "--output", str(target)], cwd=ws.root,
                   env=db_env).returncode == 0
    assert target.read_text(encoding="utf-8") == on_file
    again = run_cli(["state", "import", str(ws.state_file)], cwd=ws.root, env=db_env)
    assert again.returncode == 2
    assert "already holds entries for 2026-11-02, 2026-11-03, 2026-11-04" in again.stderr
    assert run_cli(["state", "export"], cwd=ws.root, env=db_env).stdout == on_file
    due = run_cli(["due", "--now", "2026-11-05T03:00"], cwd=ws.root, env=db_env)
    assert due.stdout == ""  # the imported dates are done


def test_importing_a_damaged_state_file_names_it_and_imports_nothing(tmp_path, kind, pipeline):
    bad = tmp_path / "state.json"
    bad.write_text('{"runs": {"2026-11-01": {"status": "fine"}}}', encoding="utf-8")
    env = {"TOKOKITA_PIPELINE": pipeline, "TOKOKITA_STATE_DIR": str(tmp_path / "state")}
    if kind == "database":
        env["TOKOKITA_STATE_URL"] = _pg_server_url()
    result = run_cli(["state", "import", str(bad)], cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert str(bad) in result.stderr and "'status'" in result.stderr
    assert state_store(make_settings(tmp_path, kind, pipeline)).read().runs == {}


def test_importing_another_pipelines_watermark_is_refused(tmp_path, kind, pipeline):
    """Bug: `state import` took a watermark whose `pipeline` names another pipeline."""
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"pipeline": "another-pipeline", "runs": {"2026-11-01": {
        "attempt": 1, "failures": 0, "status": "success",
        "updated_at": "2026-11-02T00:00:00+00:00"}}}), encoding="utf-8")
    env = {"TOKOKITA_PIPELINE": pipeline, "TOKOKITA_STATE_DIR": str(tmp_path / "state")}
    if kind == "database":
        env["TOKOKITA_STATE_URL"] = _pg_server_url()
    result = run_cli(["state", "import", str(other)], cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert f"holds the watermark of pipeline 'another-pipeline', not of {pipeline!r}" in \
        result.stderr
    assert state_store(make_settings(tmp_path, kind, pipeline)).read().runs == {}


@pytest.mark.postgres
def test_a_run_with_its_state_in_the_warehouse_database_writes_no_state_files(
        pg_url, tmp_path, pipeline):
    ws = Workspace(tmp_path, pg_url)
    ws.copy_samples(SAMPLE_DATES[1])
    env = ws.env(TOKOKITA_STATE_URL="warehouse", TOKOKITA_PIPELINE=pipeline)
    day = SAMPLE_DATES[1].isoformat()
    first = run_cli(["run", "--date", day], cwd=ws.root, env=env)
    assert first.returncode == 0, first.stderr
    second = run_cli(["run", "--date", day], cwd=ws.root, env=env)
    assert second.returncode == 0 and "skip" in second.stdout.lower()
    assert not ws.state_dir.exists()
    settings = ws.settings(state_url="warehouse", pipeline=pipeline)
    entry = state_store(settings).read().entry(SAMPLE_DATES[1])
    assert (entry["status"], entry["attempt"]) == (SUCCESS, 1)
    assert [body["status"] for body in state_store(settings).manifests(SAMPLE_DATES[1])] == [
        "skipped", "success"]
    status = run_cli(["status", "--json", "--now", "2026-11-04T03:00"], cwd=ws.root, env=env)
    row = next(r for r in json.loads(status.stdout) if r["date"] == day)
    assert row["state"] == "done" and row["duration_s"] is not None
    # the same checksums as the file store's run of the same partition
    files = Workspace(tmp_path / "files", pg_url)
    files.copy_samples(SAMPLE_DATES[1])
    assert run_cli(["run", "--date", day, "--force"], cwd=files.root,
                   env=files.env()).returncode == 0
    file_entry = StateStore(files.state_file, "orders").read().entry(day)
    assert file_entry["checksums"] == entry["checksums"]


def test_state_url_warehouse_with_an_sqlite_warehouse_is_a_configuration_error(tmp_path):
    from tokokita_etl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"state_url 'warehouse'.*needs a PostgreSQL"):
        load_settings(env={"TOKOKITA_STATE_URL": "warehouse"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"state_url.*postgresql://"):
        load_settings(env={"TOKOKITA_STATE_URL": "mysql://x"}, cwd=tmp_path)


@pytest.mark.postgres
def test_a_read_only_state_database_stops_the_run_before_any_stage(tmp_path, pipeline):
    from sqlalchemy.engine import make_url

    from tokokita_etl.runner.claims import check_writable

    writable = make_settings(tmp_path, "database", pipeline)
    state_store(writable).read()  # the tables exist
    read_only = make_url(_pg_server_url()).update_query_dict(
        {"options": "-cdefault_transaction_read_only=on"}).render_as_string(hide_password=False)
    settings = load_settings(env={}, overrides={"state_url": read_only, "pipeline": pipeline},
                             cwd=tmp_path)
    state_store(settings).read()  # reading works
    with pytest.raises(StateError, match="the state cannot be written"):
        check_writable(settings)


# -- a year of history ---------------------------------------------------------------------


def test_the_file_store_rewrites_state_json_as_json_dumps_writes_it_entry_after_entry(
        tmp_path, pipeline):
    """The file store keeps each entry's text between its writes and serialises only the
    changed one: the file stays byte for byte `json.dumps(document, indent=2)`, whatever the
    order of the changes (an entry added before others, one changed in the middle, one
    removed), and so does `state export`."""
    settings = make_settings(tmp_path, "file", pipeline)
    store = state_store(settings)
    for day in (DAYS[3], DAYS[1], DAYS[5]):
        store.record(day, SUCCESS, {"rows": {"fact": 3}, "warnings": ["a \"quoted\"\nline é"]},
                     NOW)
    store.begin(DAYS[1], "run-b", "extract", NOW)
    store.reset_attempts(DAYS[0], now=NOW, by="ops")  # no entry: nothing is written
    store.update_entry(DAYS[5], lambda entry: entry.clear())
    store.record(DAYS[0], FAILED, {"error": "boom"}, NOW)
    text = settings.state_file.read_text(encoding="utf-8")
    document = json.loads(text)
    assert list(document["runs"]) == [str(day) for day in (DAYS[0], DAYS[1], DAYS[3])]
    assert document["runs"][str(DAYS[1])]["in_progress"]["run"] == "run-b"
    assert text == json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    exported = run_cli(["state", "export"], cwd=tmp_path,
                       env={"TOKOKITA_STATE_DIR": "data/state", "TOKOKITA_RAW_DIR": "data/raw",
                            "TOKOKITA_STAGING_DIR": "data/staging",
                            "TOKOKITA_PIPELINE": pipeline})
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == text


def test_a_change_written_by_another_process_is_read_and_kept_by_the_next_update(
        tmp_path, pipeline):
    """Regression guard for the file store's reuse of the document it last read: another
    process's write (here a hand edit) changes the file's bytes, so the next read and the
    next update see it (no update of another process is lost), and a damaged edit is the
    usual error naming the file, not the document read before."""
    settings = make_settings(tmp_path, "file", pipeline)
    store = state_store(settings)
    store.record(DAYS[0], SUCCESS, {}, NOW)
    store.record(DAYS[1], FAILED, {"error": "boom"}, NOW)
    assert store.read().attempts(DAYS[1]) == 1
    edited = json.loads(settings.state_file.read_text(encoding="utf-8"))
    edited["runs"][str(DAYS[1])]["attempt"] = 5
    settings.state_file.write_text(json.dumps(edited, indent=2), encoding="utf-8")
    assert store.read().attempts(DAYS[1]) == 5
    store.record(DAYS[2], SUCCESS, {}, NOW)
    on_file = json.loads(settings.state_file.read_text(encoding="utf-8"))["runs"]
    assert (on_file[str(DAYS[1])]["attempt"], on_file[str(DAYS[2])]["attempt"]) == (5, 1)
    settings.state_file.write_text(
        settings.state_file.read_text(encoding="utf-8").replace('"attempt": 5', '"attempt": -5'),
        encoding="utf-8")
    with pytest.raises(StateError, match=rf"{settings.state_file}: corrupt watermark: bad "
                                         rf"entry for {DAYS[1]}: field 'attempt'"):
        store.read()
    with pytest.raises(StateError, match="corrupt watermark"):
        store.record(DAYS[3], SUCCESS, {}, NOW)


def test_a_reader_changing_its_watermark_leaves_the_stores_document_as_it_is(settings):
    """The file store hands every reader the document it last read (not a copy per read):
    `settled_watermark`, which counts a gone run's failure in its own view, must not change
    what the next reader gets."""
    from tokokita_etl.runner.claims import settled_watermark

    store = state_store(settings)
    store.begin(DAYS[0], "run-gone", "load", NOW)  # no claim: the run is gone
    assert settled_watermark(settings, NOW, never_finished).entry(DAYS[0])["failures"] == 1
    assert "failures" not in store.read().entry(DAYS[0])


def test_the_last_outcome_and_the_claim_of_many_dates_are_read_at_once(settings):
    """What the status rows read per date (the newest manifest with an outcome, the claim)
    comes in one look at the store, with the same answers as a look per date."""
    store = state_store(settings)
    for name, day, status in (("a", DAYS[0], "success"), ("b", DAYS[0], "skipped"),
                              ("c", DAYS[1], "skipped"), ("d", DAYS[3], "failed")):
        store.write_manifest(f"run-{day}-{name}",
                             {"partition_date": str(day), "status": status, "run": name})
    outcomes = store.last_outcomes(DAYS)
    assert {day: body["run"] for day, body in outcomes.items()} == {DAYS[0]: "a", DAYS[3]: "d"}
    assert store.last_outcomes([]) == {}
    claim_date(settings, DAYS[2], "run-c", NOW, never_finished)
    claims = store.claims(DAYS)
    assert list(claims) == [DAYS[2]] and claims[DAYS[2]] == read_claim(settings, DAYS[2])


def _as_a_new_process() -> None:
    """Forget the documents this process has read or written (a process of its own)."""
    from tokokita_etl.runner.stores import files

    files._SEEN.clear()


def test_a_new_process_reads_one_date_of_a_year_of_dates_without_parsing_the_others(
        tmp_path, pipeline):
    """Regression: the file store's gate took 2.46 times as long after a year of dates as
    after ten (bench/bench_history.py): every process parsed and checked all of
    `state.json`, and the warehouse check counted every entry. The index beside it gives a
    new process the entry it reads and the summary of all of them, the same as a whole parse
    gives, and nothing else is parsed."""
    from tokokita_etl.runner.stores import files
    from tokokita_etl.runner.watermark import Summary

    settings = make_settings(tmp_path, "file", pipeline)
    store = state_store(settings)
    days = [date(2025, 1, 1) + timedelta(days=n) for n in range(365)]
    store.import_entries({"pipeline": pipeline, "runs": {
        str(day): {"attempt": 1, "failures": 0, "status": SUCCESS, "rows": {"fact": n},
                   "warehouse": {"id": "w1", "revision": n + 1}}
        for n, day in enumerate(days)}})
    store.record(days[100], FAILED, {"error": "boom é", "failed_stage": "load"}, NOW)
    store.begin(days[-1], "run-z", "extract", NOW)
    expected = Summary(364, {"w1": 365}, (str(days[100]), str(days[-1])))

    _as_a_new_process()
    watermark = store.read()
    assert watermark.entry(days[200])["rows"] == {"fact": 200}
    assert watermark.intent(days[-1])["run"] == "run-z"
    assert watermark.summary() == expected
    assert list(files._SEEN[settings.state_file].values) == [str(days[200]), str(days[-1])]
    _as_a_new_process()
    assert store.export() == json.loads(settings.state_file.read_text(encoding="utf-8"))

    settings.state_file.with_name("state.json.index").unlink()
    _as_a_new_process()
    whole = store.read()
    assert len(files._SEEN[settings.state_file].values) == 365  # parsed whole
    assert whole.summary() == expected
    assert dict(whole.runs) == dict(watermark.runs)


def test_an_index_of_other_bytes_is_not_read_and_the_next_write_writes_it_again(
        tmp_path, pipeline):
    """A copy of `state.json` put back by hand, and a damaged index, leave an index that
    does not describe the file's bytes (as would a crash between the two writes): the file
    is read whole, as it says, and the next write writes the index of its own bytes."""
    import hashlib

    settings = make_settings(tmp_path, "file", pipeline)
    store = state_store(settings)
    index = settings.state_file.with_name("state.json.index")
    store.record(DAYS[0], SUCCESS, {"warehouse": {"id": "w1", "revision": 1}}, NOW)
    restored = settings.state_file.read_bytes()
    store.record(DAYS[1], FAILED, {"error": "boom"}, NOW)
    settings.state_file.write_bytes(restored)
    _as_a_new_process()
    assert list(store.read().runs) == [str(DAYS[0])]
    assert store.read().summary().unsettled == ()

    index.write_text('{"sha256": "damaged\n', encoding="utf-8")
    _as_a_new_process()
    assert store.read().attempts(DAYS[0]) == 1
    store.record(DAYS[2], SUCCESS, {"warehouse": {"id": "w1", "revision": 2}}, NOW)
    first = json.loads(index.read_bytes().split(b"\n")[0])
    assert first["sha256"] == hashlib.sha256(settings.state_file.read_bytes()).hexdigest()
    _as_a_new_process()
    assert store.read().summary().revisions == {"w1": 2}
    assert [p.name for p in settings.state_file.parent.iterdir() if p.name.endswith(".tmp")] \
        == []


def test_the_gates_writability_check_leaves_state_json_as_it_is(tmp_path, pipeline):
    """The check before any stage takes the room a rewrite of `state.json` takes without
    rewriting it: its cost does not grow with the watermark."""
    from tokokita_etl.runner.claims import check_writable

    settings = make_settings(tmp_path, "file", pipeline)
    state_store(settings).record(DAYS[0], SUCCESS, {}, NOW)
    stat = settings.state_file.stat()
    check_writable(settings)
    after = settings.state_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert sorted(p.name for p in settings.state_file.parent.iterdir()) == [
        "runs", "state.json", "state.json.index", "state.json.lock"]
