"""Settings: defaults < YAML file < TOKOKITA_* environment < command-line flags; paths vs cwd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import HEADER, REPO
from tokokita_etl import cli
from tokokita_etl.errors import ConfigError
from tokokita_etl.orders.contract import gold_path
from tokokita_etl.orders.gold import staged_gold_path
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.orders.transform import duckdb_config
from tokokita_etl.pipelines import load_settings
from tokokita_etl.settings.layout import partition_file_exists
from tokokita_etl.settings.model import default

#: the orders' settings: the shared ones, the runner's and their own
SETTINGS = OrdersSettings.model_fields


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_without_a_config_file_the_defaults_apply_resolved_against_cwd(tmp_path):
    s = load_settings(env={}, cwd=tmp_path)
    assert (s.timezone, s.lookback_days, s.max_attempts, s.cron) == ("Asia/Jakarta", 7, 3, "30 2 * * *")
    assert s.raw_dir == tmp_path / "data" / "raw"
    assert s.gold_dir == tmp_path / "data" / "gold"
    assert s.state_file == tmp_path / "data" / "state" / "state.json"
    assert s.warehouse_url == f"sqlite:///{tmp_path}/data/warehouse/tokokita.db"


def test_the_repository_config_file_leaves_every_setting_at_its_default():
    s = load_settings(env={}, cwd=REPO)
    assert s == load_settings(env={}, cwd=REPO, config_path=REPO / "config" / "pipeline.yaml")
    plain = [name for name, setting in SETTINGS.items()
             if not isinstance(setting.default, Path) and name != "warehouse_url"]
    assert {name: getattr(s, name) for name in plain} == \
        {name: default(name, OrdersSettings) for name in plain}
    assert s.raw_dir == REPO / "data" / "raw"


def test_yaml_is_overridden_by_environment_which_is_overridden_by_flags(tmp_path):
    write_yaml(tmp_path / "config" / "pipeline.yaml",
               "raw_dir: yaml/raw\ngold_dir: yaml/gold\nstate_dir: yaml/state\n"
               "lookback_days: 5\nmax_attempts: 4\ntimezone: UTC\n")
    env = {"TOKOKITA_RAW_DIR": "env/raw", "TOKOKITA_GOLD_DIR": "env/gold",
           "TOKOKITA_LOOKBACK_DAYS": "6", "TOKOKITA_WAREHOUSE_URL": "sqlite:///env.db"}
    s = load_settings(env=env, cwd=tmp_path, overrides={"raw_dir": "flag/raw", "max_attempts": None})
    assert s.raw_dir == tmp_path / "flag" / "raw"  # flag beats env and YAML
    assert s.gold_dir == tmp_path / "env" / "gold"  # env beats YAML
    assert s.state_dir == tmp_path / "yaml" / "state"  # YAML beats the default
    assert s.lookback_days == 6
    assert s.max_attempts == 4  # an unset flag (None) does not override
    assert s.timezone == "UTC"
    assert s.warehouse_url == f"sqlite:///{tmp_path}/env.db"
    assert s.staging_dir == tmp_path / "data" / "staging"


def test_relative_paths_resolve_against_cwd_not_the_config_file_folder(tmp_path):
    config = write_yaml(tmp_path / "elsewhere" / "deep" / "etl.yaml",
                        "raw_dir: data/raw\nwarehouse_url: sqlite:///wh/tokokita.db\n")
    cwd = tmp_path / "work"
    s = load_settings(config, env={}, cwd=cwd)
    assert s.raw_dir == cwd / "data" / "raw"
    assert s.warehouse_url == f"sqlite:///{cwd}/wh/tokokita.db"
    assert load_settings(env={"TOKOKITA_CONFIG": str(config)}, cwd=cwd).raw_dir == cwd / "data" / "raw"


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:////abs/path.db", "sqlite:////abs/path.db"),
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("postgresql+psycopg://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
])
def test_absolute_and_non_file_warehouse_urls_are_left_alone(tmp_path, url, expected):
    assert load_settings(env={"TOKOKITA_WAREHOUSE_URL": url}, cwd=tmp_path).warehouse_url == expected


def test_absolute_paths_are_kept(tmp_path):
    s = load_settings(env={"TOKOKITA_RAW_DIR": "/srv/raw"}, cwd=tmp_path)
    assert s.raw_dir == Path("/srv/raw")


@pytest.mark.parametrize(("yaml_text", "env", "fragment"), [
    ("lookback_days: banyak\n", {}, "lookback_days must be an integer"),
    ("max_attempts: 0\n", {}, "max_attempts must be >= 1"),
    ("typo_setting: 1\n", {}, "unknown setting 'typo_setting'"),
    ("- a\n- b\n", {}, "must be a mapping"),
    ("raw_dir: [unclosed\n", {}, "cannot read config"),
    ("timezone: Asia/Jakartaa\n", {}, "unknown time zone"),
    ("", {"TOKOKITA_MAX_ATTEMPTS": "tiga"}, "TOKOKITA_MAX_ATTEMPTS"),
    ("", {"TOKOKITA_TIMEZONE": "Mars/Olympus"}, "unknown time zone"),
    ("raw_dir: ''\n", {}, "raw_dir must be a non-empty path"),
])
def test_bad_settings_are_usage_errors_naming_their_source(tmp_path, yaml_text, env, fragment):
    config = write_yaml(tmp_path / "config" / "pipeline.yaml", yaml_text)
    with pytest.raises(ConfigError) as err:
        load_settings(env=env, cwd=tmp_path)
    assert err.value.exit_code == 2
    assert fragment in str(err.value)
    if "time zone" in fragment:
        assert "timezone" in str(err.value)  # names the setting
    elif not env:
        assert str(config) in str(err.value)


@pytest.mark.parametrize("name", ["posixrules", "localtime", "posix/Asia/Jakarta",
                                  "right/Asia/Jakarta"])
def test_a_zone_folders_file_that_names_no_zone_is_an_unknown_time_zone(tmp_path, name):
    """Bug: `posixrules` and `localtime` passed the settings check (ZoneInfo opens them), then
    every run failed in transform with DuckDB's "Unknown TimeZone", counted as a failed
    attempt, instead of a configuration error."""
    with pytest.raises(ConfigError) as err:
        load_settings(env={"TOKOKITA_TIMEZONE": name}, cwd=tmp_path)
    assert err.value.exit_code == 2
    assert f"unknown time zone {name!r}" in str(err.value)


def test_every_zone_the_settings_accept_is_one_duckdb_knows():
    """The settings' check and DuckDB (transform) agree on each zone the zone folder holds."""
    import zoneinfo

    import duckdb

    from tokokita_etl.settings.values import timezone_problem

    with duckdb.connect() as con:
        known = {row[0] for row in con.execute("SELECT name FROM pg_timezone_names()").fetchall()}
    accepted = {name for name in zoneinfo.available_timezones() if timezone_problem(name) is None}
    assert "Asia/Jakarta" in accepted
    assert accepted <= known, sorted(accepted - known)


def test_a_folder_whose_path_is_not_utf8_is_a_configuration_error(tmp_path):
    """Bug: a raw folder whose path held a byte that is not UTF-8 (`$'/srv/\\xffraw'`) was
    accepted; a missing or failed partition then crashed writing its manifest
    (UnicodeEncodeError), leaving the date `needs re-run`, one more failure per night."""
    with pytest.raises(ConfigError) as err:
        load_settings(env={"TOKOKITA_RAW_DIR": "/srv/\udcffraw"}, cwd=tmp_path)
    assert err.value.exit_code == 2
    assert "raw_dir must be a path in UTF-8" in str(err.value)


def test_an_explicit_config_file_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings("nope.yaml", env={}, cwd=tmp_path)
    assert "nope.yaml" in str(err.value)
    with pytest.raises(ConfigError):
        load_settings(env={"TOKOKITA_CONFIG": "missing.yaml"}, cwd=tmp_path)


# -- the settings beyond folders and the schedule ----------------------------------------------

def test_every_setting_has_a_tokokita_environment_variable():
    from tokokita_etl.pipelines import setting_variables

    ENV_VARS = {var: name.removeprefix("orders.") for var, name in setting_variables().items()
                if "__" not in var and var != "TOKOKITA_CONFIG"}
    assert {f"TOKOKITA_{name.upper()}": name for name in OrdersSettings.model_fields} == ENV_VARS
    for var in ("TOKOKITA_DUCKDB_MEMORY_LIMIT", "TOKOKITA_START_DATE", "TOKOKITA_END_DATE",
                "TOKOKITA_WAIT_WINDOW_HOURS", "TOKOKITA_CLAIM_TTL_HOURS", "TOKOKITA_CRON",
                "TOKOKITA_VOLUME_MIN_SHARE", "TOKOKITA_VOLUME_CHECK", "TOKOKITA_PING_URL"):
        assert var in ENV_VARS


def test_the_new_settings_have_their_documented_defaults(tmp_path):
    s = load_settings(env={}, cwd=tmp_path)
    assert (s.duckdb_memory_limit, s.wait_window_hours, s.claim_ttl_hours) == ("400MB", 6, 6)
    assert (s.start_date, s.end_date) == (date(2026, 11, 1), None)
    assert (s.volume_min_share, s.volume_check, s.ping_url) == (0.5, "warn", "")
    assert s.timezone == "Asia/Jakarta"


def test_the_new_settings_are_read_from_yaml_and_environment(tmp_path):
    write_yaml(tmp_path / "config" / "pipeline.yaml",
               "duckdb_memory_limit: 1GiB\nclaim_ttl_hours: 2\nvolume_min_share: 0.25\n"
               "volume_check: fail\nping_url: https://ping.example/abc\n"
               "start_date: 2026-10-01\nend_date: 2026-11-08T12:00:00\n")
    s = load_settings(env={}, cwd=tmp_path)
    assert (s.duckdb_memory_limit, s.claim_ttl_hours, s.volume_min_share) == ("1GiB", 2, 0.25)
    assert (s.volume_check, s.ping_url) == ("fail", "https://ping.example/abc")
    assert (s.start_date, s.end_date) == (date(2026, 10, 1), datetime(2026, 11, 8, 12))
    s = load_settings(env={"TOKOKITA_DUCKDB_MEMORY_LIMIT": "2GB", "TOKOKITA_VOLUME_MIN_SHARE": "0",
                           "TOKOKITA_END_DATE": "2026-11-30", "TOKOKITA_WAIT_WINDOW_HOURS": "12"},
                      cwd=tmp_path)
    assert (s.duckdb_memory_limit, s.volume_min_share, s.end_date, s.wait_window_hours) == (
        "2GB", 0.0, date(2026, 11, 30), 12)


def test_an_empty_end_date_means_no_end(tmp_path):
    write_yaml(tmp_path / "config" / "pipeline.yaml", "end_date: null\nping_url: ''\n")
    s = load_settings(env={"TOKOKITA_END_DATE": ""}, cwd=tmp_path)
    assert (s.end_date, s.ping_url) == (None, "")


def test_transform_bounds_duckdb_by_the_duckdb_memory_limit_setting(tmp_path):
    limit = load_settings(env={"TOKOKITA_DUCKDB_MEMORY_LIMIT": "1GB"}, cwd=tmp_path) \
        .duckdb_memory_limit
    assert duckdb_config(tmp_path, limit) == {"memory_limit": "1GB",
                                               "temp_directory": str(tmp_path / "duckdb.tmp")}


@pytest.mark.parametrize(("source", "name", "value", "fragment"), [
    ("yaml", "cron", "61 * * * *", "minute field '61'"),
    ("env", "cron", "0 0 30 2 *", "never runs"),
    ("env", "cron", "0 0 * * * *", "6 fields"),
    ("yaml", "volume_min_share", "1.5", "must be from 0 to 1"),
    ("env", "volume_min_share", "-0.1", "must be from 0 to 1"),
    ("env", "volume_min_share", "nan", "must be from 0 to 1"),
    ("yaml", "volume_min_share", "half", "must be a number from 0 to 1"),
    ("yaml", "volume_min_share", "true", "must be a number"),
    ("env", "volume_check", "stop", "must be one of warn, fail"),
    ("yaml", "ping_url", "ftp://ping.example", "http:// or https:// URL"),
    ("env", "duckdb_memory_limit", "lots", "DuckDB size"),
    ("yaml", "start_date", "2026-13-01", "ISO 8601 date"),
    ("env", "end_date", "next week", "ISO 8601 date or date-time (or empty)"),
    ("env", "wait_window_hours", "0", "must be >= 1"),
    # regression: values past these overflowed the clocks and dates they move (a traceback)
    ("env", "wait_window_hours", "1000000000", "must be <= 8784, got 1000000000"),
    ("env", "claim_ttl_hours", "100000000", "must be <= 8784, got 100000000"),
    ("yaml", "lookback_days", "1000000", "must be <= 36600, got 1000000"),
    ("yaml", "claim_ttl_hours", "enam", "must be an integer"),
    ("yaml", "claim_ttl_hours", "true", "must be an integer"),
])
def test_bad_new_settings_are_errors_naming_the_setting_and_the_source(
        tmp_path, source, name, value, fragment):
    config = write_yaml(tmp_path / "config" / "pipeline.yaml",
                        f"{name}: {value}\n" if source == "yaml" else "")
    var = f"TOKOKITA_{name.upper()}"
    with pytest.raises(ConfigError) as err:
        load_settings(env={var: value} if source == "env" else {}, cwd=tmp_path)
    message = str(err.value)
    assert err.value.exit_code == 2
    assert fragment in message and name in message
    assert (str(config) if source == "yaml" else var) in message


def test_an_end_date_before_the_start_date_is_an_error_naming_both(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings(env={"TOKOKITA_START_DATE": "2026-11-05",
                           "TOKOKITA_END_DATE": "2026-11-04T23:59:59"}, cwd=tmp_path)
    assert "end_date 2026-11-04T23:59:59 (TOKOKITA_END_DATE) is before start_date 2026-11-05 " \
           "(TOKOKITA_START_DATE)" in str(err.value)
    # the same instant is a window of one moment, not an error
    assert load_settings(env={"TOKOKITA_END_DATE": "2026-11-01"}, cwd=tmp_path).end_date


# -- what the DAG reads when it is parsed: the same settings ----------------------------------

def test_the_catchup_window_is_aware_datetimes_in_the_pipeline_zone(tmp_path):
    s = load_settings(env={}, cwd=tmp_path)
    jakarta = ZoneInfo("Asia/Jakarta")
    assert s.catchup_start == datetime(2026, 11, 1, tzinfo=jakarta)
    assert (s.catchup_end, s.wait_window) == (None, timedelta(hours=6))
    s = load_settings(env={
        "TOKOKITA_CRON": "0 3 * * *", "TOKOKITA_TIMEZONE": "UTC",
        "TOKOKITA_START_DATE": "2026-11-02", "TOKOKITA_END_DATE": "2026-11-08T12:00:00",
        "TOKOKITA_WAIT_WINDOW_HOURS": "2"}, cwd=tmp_path)
    utc = ZoneInfo("UTC")
    assert (s.catchup_start, s.catchup_end) == (
        datetime(2026, 11, 2, tzinfo=utc), datetime(2026, 11, 8, 12, tzinfo=utc))
    assert s.wait_window == timedelta(hours=2)
    # an offset keeps its instant
    end = load_settings(env={"TOKOKITA_END_DATE": "2026-11-08T02:30:00+00:00"},
                        cwd=tmp_path).catchup_end
    assert end.isoformat() == "2026-11-08T09:30:00+07:00"


def test_the_dag_settings_come_from_the_yaml_file_too(tmp_path):
    """Regression: the DAG file read only the environment, so a schedule written in
    config/pipeline.yaml was ignored by Airflow (the file had to repeat the defaults)."""
    write_yaml(tmp_path / "config" / "pipeline.yaml",
               "cron: 0 4 * * *\ntimezone: UTC\nstart_date: 2026-10-01\nwait_window_hours: 3\n"
               "deadline_local_time: '07:30'\n")
    s = load_settings(env={}, cwd=tmp_path)
    assert (s.cron, s.timezone, s.wait_window, s.deadline_time.isoformat()) == (
        "0 4 * * *", "UTC", timedelta(hours=3), "07:30:00")
    assert s.catchup_start == datetime(2026, 10, 1, tzinfo=ZoneInfo("UTC"))
    assert load_settings(env={"TOKOKITA_CRON": "0 5 * * *"}, cwd=tmp_path).cron == "0 5 * * *"


@pytest.mark.parametrize(("env", "fragment"), [
    ({"TOKOKITA_CRON": "0 0 31 2 *"}, "TOKOKITA_CRON: cron: this schedule never runs"),
    ({"TOKOKITA_CRON": "0 0 ? * MON"}, "TOKOKITA_CRON: cron:"),
    ({"TOKOKITA_TIMEZONE": "Asia/Jakartaa"}, "TOKOKITA_TIMEZONE: timezone: unknown time zone"),
    ({"TOKOKITA_START_DATE": "1 Nov"}, "TOKOKITA_START_DATE: start_date must be"),
    ({"TOKOKITA_START_DATE": "2026-11-09", "TOKOKITA_END_DATE": "2026-11-08"},
     "end_date 2026-11-08 (TOKOKITA_END_DATE) is before start_date"),
    ({"TOKOKITA_WAIT_WINDOW_HOURS": "-1"}, "TOKOKITA_WAIT_WINDOW_HOURS: wait_window_hours"),
])
def test_a_bad_schedule_setting_is_an_error_naming_the_variable(tmp_path, env, fragment):
    with pytest.raises(ConfigError) as err:
        load_settings(env=env, cwd=tmp_path)
    assert fragment in str(err.value)


def test_reading_the_settings_imports_nothing_heavy(tmp_path):
    probe = ("import sys; from tokokita_etl.pipelines import load_settings; "
             "load_settings(); print(sorted(m for m in ('pyarrow', 'duckdb', "
             "'sqlalchemy', 'psycopg', 'fsspec') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")}
    write_yaml(tmp_path / "config" / "pipeline.yaml", "cron: 0 4 * * *\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- Settings.replace and where each value came from -------------------------------------------

def test_replace_returns_a_validated_copy_and_keeps_the_original(tmp_path):
    s = load_settings(env={}, cwd=tmp_path)
    url = "postgresql+psycopg://etl:rahasia@db.example:5432/tokokita"
    changed = s.replace(warehouse_url=url, state_url="warehouse")
    assert (changed.warehouse_url, changed.state_db_url) == (url, url)
    assert s.warehouse_url == f"sqlite:///{tmp_path}/data/warehouse/tokokita.db"
    assert changed.raw_dir == s.raw_dir and changed != s and hash(changed) != hash(s)
    assert changed.source("warehouse_url") == "Settings.replace"
    assert changed.source("raw_dir") == s.source("raw_dir") == "default"
    with pytest.raises(ConfigError, match=r"^Settings.replace: max_attempts must be >= 1, got 0$"):
        s.replace(max_attempts=0)
    with pytest.raises(ConfigError, match=r"state_url 'warehouse' \(Settings.replace\) needs a "
                                          "PostgreSQL warehouse_url"):
        s.replace(state_url="warehouse")
    with pytest.raises(ConfigError, match=r"Settings\.replace: unknown setting 'warehouse'"):
        s.replace(warehouse="x")


def test_settings_are_immutable_and_equal_by_value(tmp_path):
    s = load_settings(env={}, cwd=tmp_path)
    with pytest.raises(ValueError, match="frozen"):
        s.lookback_days = 2
    assert s == load_settings(env={"TOKOKITA_LOOKBACK_DAYS": "7"}, cwd=tmp_path)
    assert len({s, load_settings(env={}, cwd=tmp_path)}) == 1


def test_each_value_records_its_source(tmp_path):
    config = write_yaml(tmp_path / "config" / "pipeline.yaml", "lookback_days: 5\ncron: 0 4 * * *\n")
    s = load_settings(env={"TOKOKITA_CRON": "0 5 * * *", "TOKOKITA_PING_URL": ""}, cwd=tmp_path,
                      overrides={"raw_dir": "flag/raw", "gold_dir": None},
                      stack={"TOKOKITA_GOLD_DIR": "stack/gold", "TOKOKITA_CRON": "0 6 * * *"})
    assert s.source("lookback_days") == str(config)
    assert s.source("cron") == "TOKOKITA_CRON"  # the environment beats the stack's file
    assert s.source("raw_dir") == "--raw-dir"
    assert s.source("gold_dir") == f"{tmp_path / 'airflow_home' / 'tokokita.env'} (TOKOKITA_GOLD_DIR)"
    assert s.gold_dir == tmp_path / "stack" / "gold"
    assert s.source("ping_url") == s.source("max_attempts") == "default"  # empty: not set
    with pytest.raises(ConfigError, match=r"airflow_home/tokokita.env \(TOKOKITA_LOOKBACK_DAYS\): "
                                          "lookback_days must be an integer"):
        load_settings(env={}, cwd=tmp_path, stack={"TOKOKITA_LOOKBACK_DAYS": "x"})


# -- names kept in one place ------------------------------------------------------------------

def test_a_partition_exists_when_its_file_is_there_and_not_empty(tmp_path):
    day = date(2026, 11, 2)
    path = ORDERS.raw.path(OrdersSettings(raw_dir=tmp_path), day)
    assert not partition_file_exists(path) and not ORDERS.raw.exists(OrdersSettings(raw_dir=tmp_path), day)
    path.write_bytes(b"")
    assert not partition_file_exists(path) and not ORDERS.raw.exists(OrdersSettings(raw_dir=tmp_path), day)
    path.write_text(HEADER + "\n")
    assert partition_file_exists(path) and partition_file_exists(str(path))
    assert ORDERS.raw.exists(OrdersSettings(raw_dir=tmp_path), day)
    path.unlink()
    path.mkdir()
    assert not partition_file_exists(path)


def test_the_gold_file_name_is_defined_once(tmp_path):
    day = date(2026, 11, 2)
    assert ORDERS.gold.path(OrdersSettings(gold_dir=tmp_path), day) == gold_path(tmp_path, day) \
        == tmp_path / "summary_harian_2026-11-02.csv"
    assert staged_gold_path(tmp_path, day) == tmp_path / ".staged-summary_harian_2026-11-02.csv"


# -- the same precedence through the command line ----------------------------------------------

def test_cli_uses_yaml_then_env_then_flags_and_resolves_relative_paths_against_cwd(
        tmp_path, monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("TOKOKITA_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    for folder, day in (("yaml_raw", "2026-11-01"), ("env_raw", "2026-11-02"), ("flag_raw", "2026-11-03")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"pesanan_{day}.csv").write_text(HEADER + "\n")
    write_yaml(tmp_path / "config" / "pipeline.yaml",
               "raw_dir: yaml_raw\nstate_dir: st\nlookback_days: 2\n")
    now = "2026-11-04T02:30"

    def due(*flags: str) -> list[str]:
        assert cli.main(["due", "--now", now, "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    assert due() == []  # yaml_raw has 2026-11-01, outside lookback 2
    assert due("--lookback-days", "3") == ["2026-11-01"]
    monkeypatch.setenv("TOKOKITA_RAW_DIR", "env_raw")
    assert due() == ["2026-11-02"]
    monkeypatch.setenv("TOKOKITA_LOOKBACK_DAYS", "1")
    assert due() == []
    assert due("--raw-dir", "flag_raw") == ["2026-11-03"]
    assert due("--raw-dir", str(tmp_path / "env_raw"), "--lookback-days", "5") == ["2026-11-02"]
    monkeypatch.chdir(tmp_path / "yaml_raw")  # a different cwd: no config file, relative paths move
    assert due("--raw-dir", ".", "--lookback-days", "5") == ["2026-11-01"]


def test_an_edited_config_file_is_read_again(tmp_path):
    """The file's settings are kept while the file is unchanged (the DAG processor reads them
    at every parse); an edit, even one that keeps its size, is read."""
    config = write_yaml(tmp_path / "config" / "pipeline.yaml", "lookback_days: 5\n")
    assert load_settings(env={}, cwd=tmp_path).lookback_days == 5
    stat = config.stat()
    config.write_text("lookback_days: 6\n", encoding="utf-8")
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_settings(env={}, cwd=tmp_path).lookback_days == 6


def _docs_tables() -> dict[str, list[list[str]]]:
    """docs/configuration.md's tables of the settings, by their heading's title."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    part = text.split("## Pipeline settings", 1)[1].split("\n## ", 1)[0]
    tables = {}
    for section in part.split("\n### ")[1:]:
        title, _, body = section.partition("\n")
        table = next(block for block in body.split("\n\n") if block.startswith("| setting"))
        tables[title] = [[cell.strip() for cell in line.strip("|").split("|")]
                         for line in table.splitlines()[2:]]
    return tables


def test_the_settings_tables_of_the_docs_are_the_classes():
    """docs/configuration.md's tables list exactly the classes' settings, in their order, with
    their defaults, variables and the flags the command line has: the shared ones, the
    runner's, the orders' own."""
    import argparse

    from tokokita_etl.runner.settings import RUNNER_SETTINGS
    from tokokita_etl.settings.model import SHARED_SETTINGS

    tables = _docs_tables()
    expected = {"Shared settings": SHARED_SETTINGS,
                "The runner's settings of every pipeline": RUNNER_SETTINGS,
                "The orders' own settings": OrdersSettings.own_fields()}
    assert {title: [row[0] for row in rows] for title, rows in tables.items()} == \
        {title: [f"`{name}`" for name in names] for title, names in expected.items()}
    parser = cli._parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {option for command in commands.choices.values() for action in command._actions
             for option in action.option_strings}
    for title, rows in tables.items():
        for row in rows:
            name = row[0].strip("`")
            value = default(name, OrdersSettings)
            if value is None or value == "":
                shown = "none" if value is None else "empty"
            else:
                shown = f"`{value.isoformat() if isinstance(value, date) else value}`"
            variable = f"`TOKOKITA_{name.upper()}`"
            if title != "Shared settings" and name != "pipeline":
                variable = f"`TOKOKITA_ORDERS__{name.upper()}`, {variable}" \
                    if name in RUNNER_SETTINGS else \
                    f"`TOKOKITA_ORDERS__{name.upper()}` (older: {variable})"
            assert (row[1], row[2]) == (shown, variable), name
            flag = f"--{name.replace('_', '-')}"
            if name == "pipeline":  # `--pipeline` names the declared pipeline, not this setting
                assert row[3] == "" and "`--pipeline NAME` is another thing" in row[4], row
                continue
            assert row[3].startswith(f"`{flag}`") == (flag in flags), name


def test_the_models_list_every_variable_they_read_and_an_empty_one_is_not_set(tmp_path):
    from tokokita_etl.pipelines import PIPELINES, setting_variables
    from tokokita_etl.runner.settings import PipelineSettings
    from tokokita_etl.settings.model import SHARED_SETTINGS

    weekly = PIPELINES["weekly_city_report"]
    variables = setting_variables([PIPELINES["orders"], weekly])
    own = [name for name in PipelineSettings.model_fields
           if name not in SHARED_SETTINGS and name != "pipeline"]
    assert list(variables)[:2] == ["TOKOKITA_CONFIG", "TOKOKITA_TIMEZONE"]
    assert {variables[f"TOKOKITA_{name.upper()}"] for name in SHARED_SETTINGS} == \
        set(SHARED_SETTINGS)
    assert {variables[f"TOKOKITA_{name.upper()}"] for name in SETTINGS
            if name not in SHARED_SETTINGS} == \
        {f"orders.{name}" for name in SETTINGS if name not in SHARED_SETTINGS}
    assert {variables[f"TOKOKITA_WEEKLY_CITY_REPORT__{name.upper()}"] for name in own} \
        == {f"weekly_city_report.{name}" for name in own}
    assert "TOKOKITA_WEEKLY_CITY_REPORT__VOLUME_CHECK" not in variables
    assert variables["TOKOKITA_ORDERS__VOLUME_CHECK"] == "orders.volume_check"
    assert len(variables) == 1 + len(SETTINGS) + (len(SETTINGS) - len(SHARED_SETTINGS) - 1) \
        + len(own)
    assert "TOKOKITA_MONTHLY_CITY_REPORT__CRON" in setting_variables()
    empty = dict.fromkeys(variables, "")
    assert load_settings(env=empty, cwd=tmp_path) == load_settings(env={}, cwd=tmp_path)


def test_the_runner_settings_sources_checks_sections_against_are_the_runners():
    from tokokita_etl.runner.settings import RUNNER_SETTINGS
    from tokokita_etl.settings.sources import RUNNER_NAMES

    assert (*RUNNER_NAMES,) == tuple(name for name in RUNNER_SETTINGS if name != "pipeline")


def test_the_stacks_yaml_file_is_read_when_the_environment_names_none(tmp_path):
    """The local stack may have been started with TOKOKITA_CONFIG naming another file: the
    command line in its project folder reads that one, as the stack's services do."""
    other = tmp_path / "other.yaml"
    other.write_text("lookback_days: 12\n")
    stack = {"TOKOKITA_CONFIG": str(other)}
    s = load_settings(env={}, cwd=tmp_path, stack=stack)
    assert (s.lookback_days, s.source("lookback_days")) == (12, str(other))
    mine = tmp_path / "mine.yaml"
    mine.write_text("lookback_days: 13\n")
    assert load_settings(env={"TOKOKITA_CONFIG": str(mine)}, cwd=tmp_path,
                         stack=stack).lookback_days == 13
