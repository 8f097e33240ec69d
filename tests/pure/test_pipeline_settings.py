"""The settings of a pipeline declared beside the orders: its own settings from its own
section of each source, the shared ones from the top level, its folders apart; and the
`declarations` setting that names such pipelines."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from stock_pipeline import STOCK

from tokokita_etl.errors import ConfigError
from tokokita_etl.pipelines import by_dag_id, by_name, declared, every, settings_of
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.settings.sources import load_settings

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
