"""The command line: due, status, run (yesterday, blocked, reset), exit codes, `python -m`,
relative outputs under the working directory."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from tests.conftest import HEADER, REPO, SAMPLE_DATES, Workspace, in_process_cli, run_cli
from tokokita_etl import cli
from tokokita_etl.runner.stores.files import StateStore

D02, D03, D04 = SAMPLE_DATES
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)  # 2026-11-05 02:30 in Jakarta


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    """Run cli.main in-process with TOKOKITA_* pointing into the workspace; (code, out, err)."""
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def test_due_prints_the_due_dates_as_json_and_as_lines(sqlite_workspace, call):
    sqlite_workspace.copy_samples()
    assert call("due", "--now", "2026-11-05T02:30", "--json") == (
        0, '["2026-11-02", "2026-11-03", "2026-11-04"]\n', "")
    assert call("due", "--now", "2026-11-05T02:30") == (0, "2026-11-02\n2026-11-03\n2026-11-04\n", "")
    assert call("due", "--now", "2026-11-04T19:30:00+00:00", "--json")[1] == \
        '["2026-11-02", "2026-11-03", "2026-11-04"]\n'
    assert call("due", "--now", "2026-11-05T02:30", "--json", "--lookback-days", "2")[1] == \
        '["2026-11-03", "2026-11-04"]\n'
    assert call("due", "--now", "2026-11-02T23:00", "--json")[1] == "[]\n"


def test_due_follows_the_reference_scenarios_through_real_runs(sqlite_workspace, call):
    sqlite_workspace.copy_samples()
    for day in (D02, D03):
        assert call("run", "--date", day.isoformat())[0] == 0
    assert json.loads(call("due", "--now", "2026-11-06T02:30", "--json")[1]) == ["2026-11-04"]
    assert call("run", "--date", "2026-11-04")[0] == 0
    assert json.loads(call("due", "--now", "2026-11-06T02:30", "--json")[1]) == []


def test_status_json_shows_each_dates_state_with_rows_attempts_and_blocked(sqlite_workspace,
                                                                          call):
    sqlite_workspace.copy_samples()
    code, out, _ = call("status", "--json")
    assert code == 0
    assert [(r["date"], r["state"]) for r in json.loads(out)] == [
        ("2026-11-01", "missing"), ("2026-11-02", "due"), ("2026-11-03", "due"),
        ("2026-11-04", "due")]
    call("run", "--date", "2026-11-02")
    call("run", "--date", "2026-11-03")
    code, out, _ = call("status", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["date"], r["state"], r["status"], r["attempt"], r["blocked"]) for r in rows] == [
        ("2026-11-01", "missing", "", 0, False), ("2026-11-02", "done", "success", 1, False),
        ("2026-11-03", "done", "success", 1, False), ("2026-11-04", "due", "", 0, False)]
    assert rows[2]["rows"] == {"extracted": 36, "karantina": 23, "duplikat": 3, "fact": 10,
                               "summary": 4}
    assert rows[1]["gold"].endswith("summary_harian_2026-11-02.csv")
    code, out, _ = call("status")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["date", "state", "attempt"]
    assert lines[3].split()[:8] == ["2026-11-03", "done", "1", "36", "23", "3", "10", "4"]
    assert lines[1].split()[:2] == ["2026-11-01", "missing"]
    assert lines[4].split()[:2] == ["2026-11-04", "due"]


def test_run_twice_skips_with_exit_0_and_force_reprocesses_identically(sqlite_workspace, call):
    ws = sqlite_workspace
    ws.copy_samples(D02)
    assert call("run", "--date", "2026-11-02")[0] == 0
    state = ws.state_file.read_bytes()
    code, out, _ = call("run", "--date", "2026-11-02")
    assert code == 0
    assert "[skip] 2026-11-02 already succeeded (use force to reprocess)" in out
    assert "status=skipped" in out
    assert ws.state_file.read_bytes() == state
    checksums = StateStore(ws.state_file, "orders").read().entry(D02)["checksums"]
    code, out, _ = call("run", "--date", "2026-11-02", "--force")
    assert code == 0
    assert "status=success" in out
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["attempt"], entry["checksums"]) == (2, checksums)
    assert len(ws.manifests(D02)) == 3


@pytest.mark.parametrize(("clock", "expected"), [
    (datetime(2026, 11, 4, 19, 30, tzinfo=UTC), "2026-11-04"),  # 02:30 on the 5th in Jakarta
    (datetime(2026, 11, 3, 23, 0, tzinfo=UTC), "2026-11-03"),  # 06:00 on the 4th in Jakarta
])
def test_run_date_yesterday_is_the_day_before_today_in_jakarta(sqlite_workspace, call, clock,
                                                               expected):
    sqlite_workspace.copy_samples()
    code, out, _ = call("run", "--date", "yesterday", now=clock)
    assert code == 0, out
    assert f"run-{expected}-" in out
    runs = StateStore(sqlite_workspace.state_file, "orders").read().runs
    assert list(runs) == [expected]
    assert sqlite_workspace.manifests()[0].name.startswith(f"run-{expected}-")


def test_run_date_yesterday_follows_the_configured_time_zone(sqlite_workspace, call):
    sqlite_workspace.copy_samples()
    code, out, _ = call("run", "--date", "yesterday", now=datetime(2026, 11, 4, 19, 30, tzinfo=UTC),
                        TOKOKITA_TIMEZONE="UTC")
    assert code == 0, out
    assert list(StateStore(sqlite_workspace.state_file, "orders").read().runs) == ["2026-11-03"]


@pytest.mark.parametrize("args", [
    ["run", "--date", "2026-13-01"],
    ["run", "--date", "kemarin"],
    ["run"],
    ["due"],
    ["due", "--now", "nanti"],
    ["frobnicate"],
    [],
    ["run", "--date", "2026-11-02", "--max-attempts", "0"],
    ["run", "--date", "2026-11-02", "--lookback-days", "3"],
])
def test_usage_errors_exit_2_and_touch_nothing(sqlite_workspace, call, args):
    sqlite_workspace.copy_samples()
    code, _, err = call(*args)
    assert code == 2
    assert err
    assert not sqlite_workspace.state_dir.exists()
    assert not sqlite_workspace.gold.exists()


@pytest.mark.parametrize(("url", "fragment"), [
    ("mysql://x/y", "'mysql' is not supported"),
    ("::not a url::", "not a valid SQLAlchemy URL"),
])
def test_an_unsupported_warehouse_url_exits_2_without_an_attempt_or_outputs(
        sqlite_workspace, call, url, fragment):
    ws = sqlite_workspace
    ws.copy_samples(D02)
    code, out, err = call("run", "--date", "2026-11-02", "--warehouse-url", url)
    assert code == 2
    assert "warehouse_url" in err
    assert fragment in err
    assert "[extract]" not in out  # rejected before any stage ran
    assert StateStore(ws.state_file, "orders").read().attempts(D02) == 0
    assert not ws.gold.exists()
    assert not ws.quarantine.exists()
    assert ws.leftovers() == []


def test_state_export_to_a_folder_names_it_and_leaves_nothing_behind(sqlite_workspace, call):
    """Regression: `state export --output` onto an existing folder ended in a traceback."""
    ws = sqlite_workspace
    ws.copy_samples(SAMPLE_DATES[0])
    assert call("run", "--date", SAMPLE_DATES[0].isoformat())[0] == 0
    folder = ws.root / "exports"
    folder.mkdir()
    code, out, err = call("state", "export", "--output", str(folder))
    assert code == 1 and out == ""
    assert err == f"error: {folder}: cannot write the export: Is a directory\n"
    assert list(folder.iterdir()) == [] and sorted(p.name for p in ws.root.glob(".*tmp")) == []


def test_bad_date_message_names_the_option_and_the_value(call):
    code, _, err = call("run", "--date", "2026-02-30")
    assert code == 2
    assert "--date" in err
    assert "2026-02-30" in err


def test_after_max_attempts_the_date_is_blocked_with_exit_3_until_reset_attempts(
        sqlite_workspace, call):
    ws = sqlite_workspace
    ws.write_partition(D02, HEADER.replace(",diskon", "") + "\nTK-1,2026-11-02 10:00:00,C,Medan,X,1,5\n")
    for attempt in (1, 2, 3):
        code, out, _ = call("run", "--date", "2026-11-02")
        assert code == 1, out
        assert StateStore(ws.state_file, "orders").read().attempts(D02) == attempt
    state_before = ws.state_file.read_bytes()

    code, out, _ = call("run", "--date", "2026-11-02")
    assert code == 3
    assert "blocked after 3 attempts" in out
    assert "manual intervention" in out
    assert "--reset-attempts" in out
    assert ws.state_file.read_bytes() == state_before  # a blocked run records no attempt
    bodies = [json.loads(p.read_text()) for p in ws.manifests(D02)]
    assert sorted(b["status"] for b in bodies) == ["blocked", "failed", "failed", "failed"]
    assert any(b["status"] == "blocked" and b["exit_code"] == 3 and b["attempt"] == 3 for b in bodies)
    blocked = next(r for r in json.loads(call("status", "--json")[1]) if r["date"] == str(D02))
    assert (blocked["state"], blocked["label"], blocked["blocked"]) == ("blocked", "blocked 3/3",
                                                                        True)
    assert blocked["unblock"].startswith("fix the partition or the cause")
    assert 'partition key 2026-11-02 and {"reset_attempts": true}' in blocked["unblock"]
    assert "to unblock: fix the partition" in call("status")[1]
    assert json.loads(call("due", "--now", "2026-11-03T02:30", "--json")[1]) == []

    # --reset-attempts alone does not help while the partition is still broken: one more attempt
    code, out, _ = call("run", "--date", "2026-11-02", "--reset-attempts")
    assert code == 1
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["attempt"], entry["failures"]) == (4, 1)  # the total is kept
    assert [(r["by"], r["previous_failures"]) for r in entry["resets"]] == [("cli", 3)]

    ws.copy_samples(D02)  # fix the partition; the date still has attempts left
    code, out, _ = call("run", "--date", "2026-11-02")
    assert code == 0, out
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 5, 0)
    assert entry["resets"][0]["previous_attempt"] == 3
    assert entry["resets"][0]["at"]


def test_reset_attempts_unblocks_a_blocked_date_and_is_recorded_in_the_watermark(
        sqlite_workspace, call):
    ws = sqlite_workspace
    ws.write_partition(D02, b"\xff\xfe not utf-8\n")
    for _ in range(3):
        assert call("run", "--date", "2026-11-02")[0] == 1
    assert call("run", "--date", "2026-11-02")[0] == 3
    ws.copy_samples(D02)
    assert call("run", "--date", "2026-11-02")[0] == 3  # fixing the file is not enough
    code, out, _ = call("run", "--date", "2026-11-02", "--reset-attempts",
                        now=datetime(2026, 11, 5, 1, 2, 3, tzinfo=UTC))
    assert code == 0, out
    assert "failures of 2026-11-02 reset from 3 to 0 (attempt 3 kept)" in out
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    # the failures were reset; the total of recorded outcomes counts on (3 failures, 1 success)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 4, 0)
    assert entry["resets"] == [{"at": "2026-11-05T01:02:03+00:00", "by": "cli",
                                "previous_attempt": 3, "previous_failures": 3}]
    assert ws.gold_file(D02).is_file()


def test_max_attempts_flag_raises_the_limit_for_one_run(sqlite_workspace, call):
    ws = sqlite_workspace
    ws.write_partition(D02, b"\n\n")
    for _ in range(3):
        call("run", "--date", "2026-11-02")
    assert call("run", "--date", "2026-11-02")[0] == 3
    assert call("run", "--date", "2026-11-02", "--max-attempts", "4")[0] == 1
    assert call("run", "--date", "2026-11-02", "--max-attempts", "4")[0] == 3


# -- the real executables ----------------------------------------------------------------------

def test_python_dash_m_runs_the_command_line(sqlite_workspace):
    """`python -m tokokita_etl` in a real subprocess (the console script `tokokita-etl` is run
    in test_pipeline_rerun.py and test_bad_input.py)."""
    ws = sqlite_workspace
    ws.copy_samples()
    module = run_cli(["due", "--now", "2026-11-05T02:30", "--json"], cwd=ws.root, env=ws.env(),
                     module=True)
    assert (module.returncode, module.stdout) == (0, '["2026-11-02", "2026-11-03", "2026-11-04"]\n')


def test_a_run_on_sqlite_imports_no_postgresql_driver_or_dialect(sqlite_workspace):
    """Regression: every run paid for psycopg and SQLAlchemy's PostgreSQL dialect package
    (the fact index's collation was a `postgresql_ops` argument), SQLite runs included."""
    ws = sqlite_workspace
    ws.copy_samples()
    result = run_cli(["run", "--date", "2026-11-02"], cwd=ws.root,
                     env=ws.env(PYTHONPROFILEIMPORTTIME="1"), module=True)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert {"tokokita_etl.orders.load", "sqlalchemy.dialects.sqlite"} <= imported
    assert not {name for name in imported
                if name.startswith(("psycopg", "sqlalchemy.dialects.postgresql"))}


# -- relative settings through a real run (the precedence itself: tests/pure/test_config.py) --

def test_cli_run_writes_relative_outputs_under_cwd(tmp_path, monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("TOKOKITA_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "pesanan_2026-11-02.csv").write_bytes(
        (REPO / "data" / "raw" / "pesanan_2026-11-02.csv").read_bytes())
    code = cli.main(["run", "--date", "2026-11-02"], now=lambda: datetime.fromisoformat(
        "2026-11-03T01:00:00+00:00"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert (tmp_path / "data" / "gold" / "summary_harian_2026-11-02.csv").is_file()
    assert (tmp_path / "data" / "quarantine" / "karantina_2026-11-02.csv").is_file()
    assert (tmp_path / "data" / "warehouse" / "tokokita.db").is_file()
    state = json.loads((tmp_path / "data" / "state" / "state.json").read_text())
    assert state["runs"]["2026-11-02"]["gold"] == "data/gold/summary_harian_2026-11-02.csv"


@pytest.mark.parametrize("url", ["mysql://u:p@h/db", "sqlite:///:memory:"])
def test_config_refuses_a_warehouse_url_that_run_refuses(tmp_path, url):
    """Bug: `config --warehouse-url mysql://...` printed the setting and exited 0, while `run`
    refused the same URL as a configuration error."""
    done = run_cli(["config", "--warehouse-url", url], cwd=tmp_path, env={})
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("error: warehouse_url: ")
    assert done.stdout == ""


def test_config_prints_every_setting_with_its_source_and_masks_credentials(tmp_path):
    """`tokokita-etl config` through the real command line: one row per setting of the class,
    the value's source (default, the YAML file, a variable, the stack's file, a flag), and no
    password, token or secret of a URL or a notifier in what it prints."""
    from tokokita_etl.settings.model import SETTINGS

    config = tmp_path / "config" / "pipeline.yaml"
    config.parent.mkdir()
    config.write_text("lookback_days: 5\ncron: 0 4 * * *\n"
                      "deadline_webhook_url: https://hooks.example/alert?sig=rahasia-sig\n",
                      encoding="utf-8")
    (tmp_path / "airflow_home").mkdir()
    (tmp_path / "airflow_home" / "tokokita.env").write_text("TOKOKITA_CLAIM_TTL_HOURS=2\n")
    notifiers = json.dumps([{"class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
                             "kwargs": {"to": "ops@tokokita.test", "password": "rahasia-smtp",
                                        "webhook": "https://chat.example/x?token=rahasia-tok",
                                        "headers": {"Authorization": "Bearer rahasia-hdr"},
                                        "hooks": ["https://u:rahasia-list@h.example/"]}}])
    env = {"TOKOKITA_WAREHOUSE_URL": "postgresql+psycopg://etl:rahasia-db@db.example:5432/tk",
           "TOKOKITA_NOTIFIERS": notifiers, "TOKOKITA_CRON": "0 5 * * *"}
    done = run_cli(["config", "--json", "--raw-dir", "flag/raw", "--max-attempts", "4"],
                   cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "rahasia" not in done.stdout and "rahasia" not in done.stderr
    rows = {row["setting"]: (row["value"], row["source"]) for row in json.loads(done.stdout)}
    assert list(rows) == list(SETTINGS)
    assert rows["lookback_days"] == ("5", str(config))
    assert rows["cron"] == ("0 5 * * *", "TOKOKITA_CRON")
    assert rows["raw_dir"] == (str(tmp_path / "flag" / "raw"), "--raw-dir")
    assert rows["max_attempts"] == ("4", "--max-attempts")
    assert rows["claim_ttl_hours"] == (
        "2", f"{tmp_path / 'airflow_home' / 'tokokita.env'} (TOKOKITA_CLAIM_TTL_HOURS)")
    assert rows["timezone"] == ("Asia/Jakarta", "default")
    assert rows["warehouse_url"] == ("postgresql+psycopg://etl:***@db.example:5432/tk",
                                     "TOKOKITA_WAREHOUSE_URL")
    assert rows["deadline_webhook_url"][0] == "https://hooks.example/alert?sig=***"
    # nested arguments too (a bug showed a header's bearer token and a listed URL's password)
    assert json.loads(rows["notifiers"][0])[0]["kwargs"] == {
        "to": "ops@tokokita.test", "password": "***", "webhook": "https://chat.example/x?token=***",
        "headers": {"Authorization": "***"}, "hooks": ["https://u:***@h.example/"]}

    table = run_cli(["config"], cwd=tmp_path, env=env)
    assert table.returncode == 0 and "rahasia" not in table.stdout
    lines = table.stdout.splitlines()
    assert len(lines) == len(SETTINGS)
    assert lines[list(SETTINGS).index("cron")].split() == [
        "cron", "0", "5", "*", "*", "*", "TOKOKITA_CRON"]


def test_config_names_the_setting_and_source_of_a_bad_value(tmp_path):
    done = run_cli(["config"], cwd=tmp_path, env={"TOKOKITA_MAX_ATTEMPTS": "tiga"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: TOKOKITA_MAX_ATTEMPTS: max_attempts must be an integer, " \
                          "got 'tiga'\n"



def test_cron_with_unreadable_settings_says_which_zone_its_preview_uses(tmp_path):
    """Bug: with any setting invalid, `cron` previewed in Asia/Jakarta without a word, even
    when the configured zone was another."""
    env = {"TOKOKITA_TIMEZONE": "America/New_York", "TOKOKITA_MAX_ATTEMPTS": "tiga"}
    done = run_cli(["cron", "30 2 * * *", "--count", "1"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("[warning] the settings cannot be read (TOKOKITA_MAX_ATTEMPTS")
    assert "the preview is in Asia/Jakarta unless --tz gives a zone" in done.stderr
    given = run_cli(["cron", "30 2 * * *", "--count", "1", "--tz", "UTC"], cwd=tmp_path, env=env)
    assert given.returncode == 0 and given.stderr == ""
    assert "Next 1 runs (UTC)" in given.stdout


def test_status_refuses_a_negative_number_of_days(tmp_path):
    """Bug: `status --days -5` was taken, and showed an empty window without a word."""
    done = run_cli(["status", "--days", "-5"], cwd=tmp_path, env={})
    assert done.returncode == 2
    assert "--days: must be a whole number of days, 0 or more, got '-5'" in done.stderr


def test_a_run_waiting_for_a_held_state_lock_says_so_then_goes_on(sqlite_workspace):
    """Bug: while another process held `state.json.lock` (a stopped run, a hung file
    system), `run` waited without a word."""
    import subprocess
    import sys

    ws = sqlite_workspace
    ws.copy_samples(SAMPLE_DATES[0])
    ws.state_dir.mkdir(parents=True)
    lock = ws.state_dir / "state.json.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         f"f = open({str(lock)!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(6)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        done = run_cli(["run", "--date", SAMPLE_DATES[0].isoformat()], cwd=ws.root,
                       env=ws.env())
    finally:
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert f"[WARNING] waiting for {lock}: another process has held it for 2 s" in done.stderr
    assert json.loads(ws.state_file.read_text())["runs"][SAMPLE_DATES[0].isoformat()][
        "status"] == "success"
