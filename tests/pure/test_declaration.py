"""A pipeline declaration (`runner.declaration`): the orders pipeline as one, the rules a
declaration must follow, the registry and the commands' `--pipeline`."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime

import pytest

from tokokita_etl import cli
from tokokita_etl.errors import ConfigError
from tokokita_etl.monthly.pipeline import MONTHLY_CITY_REPORT
from tokokita_etl.orders.pipeline import ORDERS, success_fields
from tokokita_etl.pipelines import (
    DEFAULT,
    PIPELINES,
    by_dag_id,
    by_name,
    declared,
    upstream_first,
)
from tokokita_etl.runner.declaration import Column, Pipeline, RawFiles, Stage, Upstream
from tokokita_etl.runner.schedule import MONTHLY, WEEKLY
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

STOCK_FILES = RawFiles("raw_dir", lambda day: f"stok_{day.isoformat()}.csv")


def _run(settings, day: date) -> dict:
    return {}


def _lines(record: dict, day: date) -> list[str]:
    return []


def stage(name: str, *, changes: bool = False) -> Stage:
    return Stage(name, _run, _lines, changes_stores=changes)


def test_the_orders_pipeline_is_one_declaration_of_its_five_stages():
    assert ORDERS.stage_names == ("extract", "transform", "load", "validate", "publish_gold")
    assert [s.changes_stores for s in ORDERS.stages] == [False, False, True, True, True]
    assert (ORDERS.name, ORDERS.dag_id, ORDERS.outcome) == (
        "orders", "tokokita_orders_daily", success_fields)
    assert (DEFAULT, by_name("orders"), by_dag_id("tokokita_orders_daily")) == ("orders", ORDERS,
                                                                                 ORDERS)
    assert PIPELINES == {"orders": ORDERS, "weekly_city_report": WEEKLY_CITY_REPORT,
                         "monthly_city_report": MONTHLY_CITY_REPORT}
    assert by_dag_id("another_dag") is None


def test_the_weekly_city_report_is_built_from_the_orders_daily_summaries_by_week():
    weekly = by_name("weekly_city_report")
    assert weekly is WEEKLY_CITY_REPORT and by_dag_id("tokokita_weekly_city_report") is weekly
    assert weekly.stage_names == ("collect", "load", "validate", "publish_gold")
    assert weekly.raw is None and weekly.upstream.pipeline is ORDERS
    assert weekly.upstream.checksum(date(2026, 11, 11)) == "summary_2026-11-11"
    assert weekly.grain.name == "weekly" and weekly.defaults["cron"] == "0 4 * * 1"


def test_a_pipeline_declares_exactly_one_input_and_an_upstream_whose_partitions_nest_in_its_own():
    with pytest.raises(ConfigError, match="declare one input"):
        Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict)
    with pytest.raises(ConfigError, match="declare one input"):
        Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict, raw=STOCK_FILES,
                 upstream=Upstream(ORDERS, checksum=str))
    with pytest.raises(ConfigError, match="a weekly partition of its upstream "
                                          "'weekly_city_report' does not lie inside one daily"):
        Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict,
                 upstream=Upstream(WEEKLY_CITY_REPORT, checksum=str))
    with pytest.raises(ConfigError, match="a weekly partition of its upstream "
                                          "'weekly_city_report' does not lie inside one monthly"):
        Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict, grain=MONTHLY,
                 upstream=Upstream(WEEKLY_CITY_REPORT, checksum=str))
    monthly = Pipeline("monthly", "monthly_dag", "", (stage("a"),), outcome=dict,
                       grain=MONTHLY, upstream=Upstream(ORDERS, checksum=str))
    assert monthly.upstream.pipeline is ORDERS


def test_an_upstream_named_by_name_is_the_registered_pipeline_looked_up_when_first_asked_for():
    from tokokita_etl.city_report.inputs import DAILY_SUMMARIES

    assert DAILY_SUMMARIES.source == "orders"  # the city reports import no orders module
    assert WEEKLY_CITY_REPORT.upstream.source == MONTHLY_CITY_REPORT.upstream.source == "orders"
    assert MONTHLY_CITY_REPORT.upstream.pipeline is ORDERS
    weekly = Pipeline("weekly", "weekly_dag", "", (stage("a"),), outcome=dict,
                      grain=WEEKLY, upstream=Upstream("orders", checksum=str))
    assert weekly.upstream.name == "orders" and weekly.upstream.pipeline is ORDERS


def test_an_upstream_name_no_pipeline_has_or_whose_partitions_do_not_nest_is_refused_on_lookup():
    """Declaring it does not look the name up (the registry imports the packages that name
    it); asking for its declaration does, naming the pipeline and its upstream."""
    unknown = Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict,
                       upstream=Upstream("nowhere", checksum=str))
    assert unknown.upstream.name == "nowhere"
    with pytest.raises(ConfigError, match="pipeline 'bad': its upstream 'nowhere' is no "
                                          "registered pipeline"):
        _ = unknown.upstream.pipeline
    finer = Pipeline("bad", "bad_dag", "", (stage("a"),), outcome=dict,
                     upstream=Upstream("weekly_city_report", checksum=str))
    with pytest.raises(ConfigError, match="pipeline 'bad': a weekly partition of its upstream "
                                          "'weekly_city_report' does not lie inside one daily"):
        _ = finer.upstream.pipeline


def test_a_declared_pipeline_may_name_another_declared_one_as_its_upstream(tmp_path,
                                                                          monkeypatch):
    (tmp_path / "shelves.py").write_text(
        "from tokokita_etl.runner.declaration import Pipeline, RawFiles, Stage, Upstream\n"
        "from tokokita_etl.runner.schedule import WEEKLY\n"
        "STAGES = (Stage('a', lambda settings, day: {}, lambda record, day: []),)\n"
        "SHELF = Pipeline('shelf', 'shelf_dag', '', STAGES, outcome=dict,\n"
        "                 raw=RawFiles('raw_dir', lambda day: f'shelf_{day}.csv'))\n"
        "SHELF_WEEKLY = Pipeline('shelf_weekly', 'shelf_weekly_dag', '', STAGES, outcome=dict,\n"
        "                        grain=WEEKLY, upstream=Upstream('shelf', checksum=str))\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    shelf, weekly = declared("shelves:SHELF,shelves:SHELF_WEEKLY")
    assert weekly.upstream.pipeline is shelf
    assert [p.name for p in upstream_first([weekly, shelf])] == ["shelf", "shelf_weekly"]


def test_a_run_that_ends_before_the_first_stage_that_changes_a_store_left_every_store_alone():
    assert [ORDERS.before_changes(name) for name in ORDERS.stage_names] == [
        True, True, False, False, False]
    weekly_shaped = Pipeline("weekly", "weekly_dag", "a week of daily results",
                             (stage("collect"), stage("load", changes=True),
                              stage("validate"), stage("publish_gold", changes=True)),
                             outcome=dict, raw=STOCK_FILES)
    assert [weekly_shaped.before_changes(n) for n in weekly_shaped.stage_names] == [
        True, False, False, False]


@pytest.mark.parametrize(("stages", "problem"), [
    ((), "pipeline 'bad': no stages"),
    ((stage("extract"), stage("extract")), "stage names repeat: extract, extract"),
    ((stage("load", changes=True),), "its first stage 'load' changes a store"),
])
def test_a_declaration_that_breaks_a_rule_is_refused_naming_it(stages, problem):
    with pytest.raises(ConfigError, match=problem):
        Pipeline("bad", "bad_dag", "", stages, outcome=dict, raw=STOCK_FILES)


def test_an_unknown_stage_or_pipeline_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown stage 'lod'; stages: extract, transform, load, "
                                         "validate, publish_gold"):
        ORDERS.stage("lod")
    with pytest.raises(ConfigError, match="unknown pipeline 'nope'; pipelines: "
                                          "monthly_city_report, orders, weekly_city_report"):
        by_name("nope")


def test_every_command_takes_pipeline_and_an_unknown_one_exits_2_naming_the_known(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("TOKOKITA_")]:
        monkeypatch.delenv(name)

    def at() -> datetime:
        return datetime(2026, 11, 5, 3, 0, tzinfo=UTC)

    for args in (["due", "--now", "2026-11-05T10:00:00+07:00"], ["status"],
                 ["run", "--date", "2026-11-02"], ["config"],
                 ["state", "export"]):
        code = cli.main([*args, "--pipeline", "nope"], now=at)
        err = capsys.readouterr().err
        assert code == 2, args
        assert ("unknown pipeline 'nope'; pipelines: monthly_city_report, orders, "
                "weekly_city_report") in err, (args, err)
    assert cli.main(["due", "--pipeline", "orders", "--now", "2026-11-05T10:00:00+07:00"],
                    now=at) == 0


def test_a_share_column_and_only_a_share_names_the_counts_it_divides():
    with pytest.raises(ConfigError, match="share_of"):
        Column("quarantine_share", "quarantine", "share")
    with pytest.raises(ConfigError, match="share_of"):
        Column("bruto", "bruto", "money", share_of=("a", "b"))
    with pytest.raises(ConfigError, match="kind 'amount'"):
        Column("bruto", "bruto", "amount")  # type: ignore[arg-type]
