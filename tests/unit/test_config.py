"""Settings: defaults < YAML file < TOKOKITA_* environment < command-line flags; paths vs cwd."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import HEADER, REPO
from tokokita_etl import cli
from tokokita_etl.config import Settings, load_settings
from tokokita_etl.errors import ConfigError


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
    assert s.runs_dir == tmp_path / "data" / "state" / "runs"
    assert s.warehouse_url == f"sqlite:///{tmp_path}/data/warehouse/tokokita.db"


def test_the_repository_config_file_matches_the_documented_defaults():
    s = load_settings(env={}, cwd=REPO)
    assert s == load_settings(env={}, cwd=REPO, config_path=REPO / "config" / "pipeline.yaml")
    assert (s.pipeline, s.cron, s.timezone, s.lookback_days, s.max_attempts) == (
        Settings.pipeline, Settings.cron, Settings.timezone, Settings.lookback_days,
        Settings.max_attempts)
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


def test_an_explicit_config_file_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings("nope.yaml", env={}, cwd=tmp_path)
    assert "nope.yaml" in str(err.value)
    with pytest.raises(ConfigError):
        load_settings(env={"TOKOKITA_CONFIG": "missing.yaml"}, cwd=tmp_path)


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
