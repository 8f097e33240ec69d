"""The settings of a pipeline declared beside the orders: its own settings from its own
section of each source, the shared ones from the top level, its folders apart; and the
`declarations` setting that names such pipelines."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import date
from pathlib import Path

import pytest
from stock_pipeline import STOCK

from tokokita_etl.errors import ConfigError
from tokokita_etl.pipelines import by_dag_id, by_name, declared, every, load_settings, settings_of
from tokokita_etl.runner.declaration import Pipeline

DECLARED = "stock_pipeline:STOCK"


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_another_pipelines_own_settings_come_from_its_section_and_the_shared_from_the_top(
        tmp_path):
    config = _yaml(tmp_path, "cron: '45 1 * * *'\nlookback_days: 9\ntimezone: Asia/Makassar\n"
                             "pipelines:\n  stock:\n    lookback_days: 4\n")
    env = {"TOKOKITA_MAX_ATTEMPTS": "8", "TOKOKITA_STOCK__MAX_ATTEMPTS": "2",
           "TOKOKITA_WAREHOUSE_URL": "sqlite:///wh.db"}
    stock = settings_of(STOCK, config_path=config, env=env, cwd=tmp_path)
    orders = settings_of(by_name("orders"), config_path=config, env=env, cwd=tmp_path)

    assert (stock.cron, stock.lookback_days, stock.max_attempts) == ("0 3 * * *", 4, 2)
    assert (orders.cron, orders.lookback_days, orders.max_attempts) == ("45 1 * * *", 9, 8)
    assert stock.timezone == orders.timezone == "Asia/Makassar"
    assert stock.warehouse_url == orders.warehouse_url == f"sqlite:///{tmp_path}/wh.db"
    assert stock.source("cron") == "the declaration of pipeline 'stock'"
    assert stock.source("lookback_days") == f"{config} (pipelines.stock)"
    assert stock.source("max_attempts") == "TOKOKITA_STOCK__MAX_ATTEMPTS"
    assert stock.source("timezone") == str(config)
    assert stock.source("start_date") == "default"


def test_another_pipeline_keeps_its_watermark_claims_and_hand_over_in_folders_of_its_own(
        tmp_path):
    stock = settings_of(STOCK, env={}, cwd=tmp_path)
    orders = settings_of(by_name("orders"), env={}, cwd=tmp_path)
    assert stock.pipeline == "stock" and orders.pipeline == "orders"
    assert stock.state_file == orders.state_dir / "stock" / "state.json"
    assert stock.staging_path(date(2026, 11, 2)) == \
        orders.staging_dir / "stock" / "2026-11-02"
    assert stock.work_dir == orders.work_dir / "stock"
    assert (stock.raw_dir, stock.gold_dir) == (orders.raw_dir, orders.gold_dir)


def test_a_flag_sets_the_pipeline_it_is_given_for(tmp_path):
    stock = settings_of(STOCK, env={"TOKOKITA_CRON": "0 9 * * *"}, cwd=tmp_path,
                        overrides={"lookback_days": 2})
    assert (stock.cron, stock.lookback_days, stock.source("lookback_days")) == (
        "0 3 * * *", 2, "--lookback-days")


@pytest.mark.parametrize(("text", "problem"), [
    ("pipelines:\n  stock:\n    timezone: UTC\n",
     r"pipelines\.stock\.timezone: timezone is shared by every pipeline; set it at the top level"),
    ("pipelines:\n  stock:\n    pipeline: other\n",
     r"pipelines\.stock\.pipeline: a pipeline's watermark is named after it"),
    ("pipelines:\n  stock:\n    crn: '0 3 * * *'\n",
     r"pipelines\.stock: unknown setting 'crn'"),
    ("pipelines:\n  stock: 3\n", r"pipelines\.stock must be a mapping of settings"),
    ("pipelines: [stock]\n", r"pipelines must map pipeline names to their settings"),
])
def test_a_wrong_pipeline_section_is_an_error_naming_the_file_and_key(tmp_path, text, problem):
    config = _yaml(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"{config}: {problem}"):
        settings_of(STOCK, config_path=config, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=problem):  # the orders read the same file
        load_settings(config, env={}, cwd=tmp_path)


def test_a_bad_value_in_a_pipeline_section_names_its_source(tmp_path):
    with pytest.raises(ConfigError, match=r"TOKOKITA_STOCK__LOOKBACK_DAYS: lookback_days"):
        settings_of(STOCK, env={"TOKOKITA_STOCK__LOOKBACK_DAYS": "many"}, cwd=tmp_path)


def test_declarations_add_pipelines_by_name_and_dag_id():
    assert declared(DECLARED) == (STOCK,)
    assert list(every(DECLARED)) == ["orders", "weekly_city_report", "monthly_city_report",
                                      "stock"]
    assert by_name("stock", DECLARED) is STOCK
    assert by_dag_id("tokokita_stock_daily", DECLARED) is STOCK
    with pytest.raises(ConfigError, match="unknown pipeline 'stock'; pipelines: "
                                          "monthly_city_report, orders, weekly_city_report"):
        by_name("stock")


@pytest.mark.parametrize(("declarations", "problem"), [
    ("no_such_module:STOCK", "cannot import 'no_such_module:STOCK'"),
    ("stock_pipeline:NOPE", "cannot import 'stock_pipeline:NOPE'"),
    ("stock_pipeline:RAW", "'stock_pipeline:RAW' is a RawFiles, not a Pipeline"),
    ("stock_pipeline:STOCK,stock_pipeline:STOCK", "'stock_pipeline:STOCK' repeats the pipeline 'stock'"),
    ("tokokita_etl.orders.pipeline:ORDERS",
     "'tokokita_etl.orders.pipeline:ORDERS' repeats the pipeline 'orders'"),
])
def test_a_declaration_that_cannot_be_used_is_named(declarations, problem):
    with pytest.raises(ConfigError, match=f"declarations: {problem}"):
        declared(declarations)


def test_the_declarations_setting_takes_module_colon_name_entries(tmp_path):
    assert load_settings(env={"TOKOKITA_DECLARATIONS": f"{DECLARED}, a.b:C"},
                         cwd=tmp_path).declarations == f"{DECLARED}, a.b:C"
    with pytest.raises(ConfigError, match="TOKOKITA_DECLARATIONS: declarations: expected "
                                          "module:NAME entries"):
        load_settings(env={"TOKOKITA_DECLARATIONS": "stock_pipeline"}, cwd=tmp_path)


@pytest.mark.parametrize("name", ["Stock", "stock-count", "claims", "runs"])
def test_a_pipeline_name_that_cannot_name_its_variables_and_folder_is_refused(name):
    with pytest.raises(ConfigError, match=f"pipeline name '{name}': expected a lower-case"):
        Pipeline(name, "dag", "", STOCK.stages, outcome=dict, raw=STOCK.raw)


# -- the settings split: shared, the runner's, a pipeline's own ---------------------------------

def test_config_of_the_weekly_report_lists_the_shared_settings_and_its_own_only(
        tmp_path, monkeypatch, capsys):
    from tokokita_etl import cli
    from tokokita_etl.orders.settings import OrdersSettings
    from tokokita_etl.runner.settings import RUNNER_SETTINGS
    from tokokita_etl.settings.model import SHARED_SETTINGS

    for var in [var for var in os.environ if var.startswith("TOKOKITA_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["config", "--pipeline", "weekly_city_report", "--json"]) == 0
    listed = [row["setting"] for row in json.loads(capsys.readouterr().out)]
    assert listed == [*SHARED_SETTINGS, *RUNNER_SETTINGS]
    orders_own = {"duckdb_memory_limit", "volume_min_share", "volume_check", "on_raw_change"}
    assert set(OrdersSettings.own_fields()) == orders_own
    assert not orders_own & set(listed)
    assert cli.main(["config", "--json"]) == 0  # the orders': theirs too
    assert orders_own <= {row["setting"] for row in json.loads(capsys.readouterr().out)}


def test_a_top_level_orders_setting_is_read_as_the_orders_section_with_a_note(
        tmp_path, caplog, monkeypatch):
    from tokokita_etl.settings import sources

    monkeypatch.setattr(sources, "_NOTED", set())  # a note is said once a process
    config = _yaml(tmp_path, "volume_check: fail\ncron: '0 4 * * *'\n")
    env = {"TOKOKITA_DUCKDB_MEMORY_LIMIT": "1GB"}
    with caplog.at_level(logging.WARNING, logger="tokokita_etl.settings.sources"):
        orders = settings_of(by_name("orders"), config_path=config, env=env, cwd=tmp_path)
    assert (orders.volume_check, orders.source("volume_check")) == ("fail", str(config))
    assert (orders.duckdb_memory_limit, orders.source("duckdb_memory_limit")) == \
        ("1GB", "TOKOKITA_DUCKDB_MEMORY_LIMIT")
    assert orders.cron == "0 4 * * *"
    notes = [record.getMessage() for record in caplog.records]
    assert any(f"{config} sets volume_check at the top level" in note
               and "move it to pipelines.orders.volume_check" in note for note in notes), notes
    assert any("TOKOKITA_DUCKDB_MEMORY_LIMIT sets duckdb_memory_limit" in note
               and "name it TOKOKITA_ORDERS__DUCKDB_MEMORY_LIMIT" in note for note in notes)
    assert not any(" cron " in note for note in notes)  # the runner's: no note
    weekly = settings_of(by_name("weekly_city_report"), config_path=config, env=env,
                         cwd=tmp_path)
    assert not hasattr(weekly, "volume_check") and weekly.cron == "0 4 * * 1"


def test_the_orders_section_wins_over_their_top_level_in_the_same_source(tmp_path):
    config = _yaml(tmp_path, "volume_check: fail\npipelines:\n  orders:\n"
                             "    volume_check: warn\n    lookback_days: 3\n")
    orders = settings_of(by_name("orders"), config_path=config, cwd=tmp_path,
                         env={"TOKOKITA_ORDERS__VOLUME_MIN_SHARE": "0.25"})
    assert (orders.volume_check, orders.source("volume_check")) == (
        "warn", f"{config} (pipelines.orders)")
    assert (orders.lookback_days, orders.volume_min_share) == (3, 0.25)
    assert orders.source("volume_min_share") == "TOKOKITA_ORDERS__VOLUME_MIN_SHARE"


def test_a_field_a_pipelines_class_lacks_in_its_section_is_refused_naming_file_and_field(
        tmp_path):
    config = _yaml(tmp_path, "pipelines:\n  weekly_city_report:\n    volume_check: fail\n")
    with pytest.raises(ConfigError, match=rf"{config}: pipelines\.weekly_city_report: unknown "
                                          r"setting 'volume_check'"):
        settings_of(by_name("weekly_city_report"), config_path=config, env={}, cwd=tmp_path)
    # the orders, reading the same file, leave the weekly report's section to it
    assert settings_of(by_name("orders"), config_path=config, env={}, cwd=tmp_path).cron


def _shelf_module(tmp_path: Path, monkeypatch, module: str = "shelf_pipeline") -> str:
    """A module `module` in `tmp_path` declaring the pipeline `shelf` with a settings field
    of its own (`shelf_min`); its `declarations` entry."""
    (tmp_path / f"{module}.py").write_text(
        "from tokokita_etl.runner.declaration import Pipeline, RawFiles, Stage\n"
        "from tokokita_etl.runner.settings import RawInputSettings\n\n\n"
        "class ShelfSettings(RawInputSettings):\n"
        "    shelf_min: int = 1\n\n\n"
        "SHELF = Pipeline('shelf', 'shelf_dag', 'a shelf count',\n"
        "                 (Stage('count', lambda settings, day: {}, lambda record, day: []),),\n"
        "                 outcome=dict, raw=RawFiles('raw_dir', lambda day: f'shelf_{day}.csv'),\n"
        "                 settings=ShelfSettings)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{module}:SHELF"


def test_a_declared_pipelines_own_setting_in_its_section_is_known_to_every_pipelines_settings(
        tmp_path, monkeypatch):
    """The bug: the settings a section of another pipeline may hold were the package's and
    the installed pipelines' only, so the orders' settings refused the section of a pipeline
    the `declarations` setting names as holding an unknown setting."""
    entry = _shelf_module(tmp_path, monkeypatch)
    config = _yaml(tmp_path, f"declarations: '{entry}'\nlookback_days: 9\n"
                             "pipelines:\n  shelf:\n    shelf_min: 5\n    lookback_days: 2\n")
    orders = load_settings(config, env={}, cwd=tmp_path)
    shelf = settings_of(by_name("shelf", orders.declarations), config_path=config, env={},
                        cwd=tmp_path)
    weekly = settings_of(by_name("weekly_city_report"), config_path=config, env={},
                         cwd=tmp_path)

    assert orders.lookback_days == 9 and not hasattr(orders, "shelf_min")
    assert (shelf.shelf_min, shelf.lookback_days) == (5, 2)
    assert shelf.source("shelf_min") == f"{config} (pipelines.shelf)"
    assert weekly.lookback_days == 35
    # declared through the environment, the same
    env = {"TOKOKITA_DECLARATIONS": entry}
    config = _yaml(tmp_path, "pipelines:\n  shelf:\n    shelf_min: 5\n")
    assert load_settings(config, env=env, cwd=tmp_path).declarations == entry


def test_an_unknown_setting_in_a_declared_pipelines_section_is_still_refused_naming_file_and_key(
        tmp_path, monkeypatch):
    entry = _shelf_module(tmp_path, monkeypatch)
    config = _yaml(tmp_path, f"declarations: '{entry}'\n"
                             "pipelines:\n  shelf:\n    shelf_mn: 5\n")
    with pytest.raises(ConfigError, match=rf"{config}: pipelines\.shelf: unknown setting "
                                          r"'shelf_mn'; the settings of any pipeline: .*"
                                          r"'shelf_min'"):
        load_settings(config, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=rf"{config}: pipelines\.shelf: unknown setting "
                                          r"'shelf_mn'; the settings of pipeline 'shelf'"):
        settings_of(by_name("shelf", entry), config_path=config, env={}, cwd=tmp_path)
    # without the declaration the section's setting is no pipeline's
    config = _yaml(tmp_path, "pipelines:\n  shelf:\n    shelf_min: 5\n")
    with pytest.raises(ConfigError, match=rf"{config}: pipelines\.shelf: unknown setting "
                                          r"'shelf_min'"):
        load_settings(config, env={}, cwd=tmp_path)


def test_the_declared_modules_are_imported_only_for_a_setting_no_other_pipeline_has(
        tmp_path, monkeypatch):
    entry = _shelf_module(tmp_path, monkeypatch, "shelf_never_imported")
    config = _yaml(tmp_path, f"declarations: '{entry}'\npipelines:\n  shelf:\n"
                             "    lookback_days: 2\n  orders:\n    volume_check: fail\n")
    weekly = settings_of(by_name("weekly_city_report"), config_path=config, env={},
                         cwd=tmp_path)
    assert weekly.declarations == entry and "shelf_never_imported" not in sys.modules
    # a declaration that cannot be imported is not imported for those sections either
    env = {"TOKOKITA_DECLARATIONS": "not_installed_anywhere:PIPELINE"}
    assert load_settings(config, env=env, cwd=tmp_path).cron
    config = _yaml(tmp_path, "pipelines:\n  shelf:\n    shelf_min: 5\n")
    with pytest.raises(ConfigError, match="declarations: cannot import "
                                          "'not_installed_anywhere:PIPELINE'"):
        load_settings(config, env=env, cwd=tmp_path)
