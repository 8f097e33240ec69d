"""The status page's chart (`render.chart`, `templates/chart.svg`): its series are those the
pipeline declares (`Pipeline.chart`), named by their columns' keys; the page names no
pipeline's rows."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from tokokita_airflow.status_page import render
from tokokita_etl.errors import ConfigError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.declaration import Chart, Column, Pipeline, RawFiles, Stage
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

COLUMNS = (Column("counted", "counted"), Column("short", "short"),
           Column("short_share", "shortfall", "share", share_of=("short", "counted")),
           Column("value", "stock value", "money"))


def _stock(chart: Chart | None) -> Pipeline:
    """A daily stock count with its own columns and `chart`."""
    return Pipeline("stock", "stock_dag", "a daily stock count",
                    (Stage("count", lambda settings, day: {}, lambda record, day: []),),
                    outcome=dict, raw=RawFiles("raw_dir", lambda day: f"stok_{day}.csv"),
                    columns=COLUMNS, chart=chart)


def _rows(days: int) -> list[dict]:
    """Status rows of the stock pipeline, one date without a success; each row also holds
    the orders' keys, which its chart must not read."""
    rows = []
    for n in range(days):
        day = (date(2026, 10, 20) + timedelta(days=n)).isoformat()
        done = n != 2
        rows.append({"date": day,
                     "rows": {"counted": 40 + n, "short": n, "fact": 999} if done else None,
                     "short_share": n / (40 + n) if done else None,
                     "value": f"{1000 + 100 * n}.00" if done else None,
                     "fact": 999, "bersih": "5.00", "quarantine_share": 0.5})
    return rows


def _svg(chart: dict) -> str:
    template = render.ENV.from_string(
        '{% from "chart.svg" import chart_svg %}{{ chart_svg(chart) }}')
    return template.render(chart=chart)


def test_a_declared_pipelines_chart_draws_its_own_series_with_its_columns_labels():
    pipeline = _stock(Chart(bars="counted", share="short_share", money="value",
                            labels={"counted": "skus counted"}))
    chart = render.chart(_rows(5), pipeline)
    svg = _svg(chart)

    assert chart["title"] == "daily skus counted, shortfall share and stock value"
    assert chart["top_bar"] == 44  # its count, not the orders' fact rows (999)
    assert len(re.findall(r"<rect class='counted' ", svg)) == 4  # a bar per success
    assert "class='fact'" not in svg and "class='bersih'" not in svg
    assert [s["cls"] for s in chart["series"]] == ["share", "value"]
    assert [len(s["points"]) for s in chart["series"]] == [4, 4]
    assert [key["label"] for key in chart["legend"]] == [
        "skus counted per date (bars, left axis, max 44)",
        "shortfall share of the counted rows (right axis)",
        "stock value per date (scaled to its maximum, 1,400)"]
    assert "<title>2026-10-24: 44 skus counted</title>" in svg
    assert "aria-label='daily skus counted, shortfall share and stock value'" in svg
    assert ">100%</text>" in svg
    # the share line: 0 % at the bottom of the plot, its first date's share 0
    assert chart["series"][0]["points"][0][1] == chart["top"] + chart["plot_h"]


def test_a_chart_of_bars_alone_has_no_lines_and_no_right_axis():
    chart = render.chart(_rows(3), _stock(Chart(bars="counted")))
    svg = _svg(chart)
    assert chart["series"] == [] and len(chart["legend"]) == 1
    assert chart["title"] == "daily counted"
    assert "%</text>" not in svg and "<polyline" not in svg


def test_a_pipeline_that_declares_no_chart_gets_none_even_with_the_orders_keys_in_its_rows():
    assert render.chart(_rows(5), _stock(None)) is None
    assert WEEKLY_CITY_REPORT.chart is None
    weekly_rows = [{"date": "2026-11-02", "rows": {"days": 7, "missing": 0, "kota": 3},
                    "bruto": "1200.00", "bersih": "1000.00"}]
    assert render.chart(weekly_rows, WEEKLY_CITY_REPORT) is None


def test_the_orders_chart_keeps_its_bars_lines_and_legend():
    rows = [{"date": f"2026-11-0{n}", "rows": {"extracted": 100, "fact": 90 + n},
             "quarantine_share": 0.1, "bersih": f"{1000 * n}.50"} for n in range(1, 4)]
    chart = render.chart(rows, ORDERS)
    svg = _svg(chart)
    assert chart["title"] == "daily valid rows, quarantine share and bersih"
    assert [key["label"] for key in chart["legend"]] == [
        "valid rows per date (bars, left axis, max 93)",
        "quarantine share of the extracted rows (right axis)",
        "bersih per date (scaled to its maximum, 3,000.50)"]
    assert svg.count("<rect class='fact' ") == 3 and "<title>2026-11-03: 93 valid rows</title>" in svg
    assert "<polyline class='share' " in svg and "<polyline class='bersih' " in svg
    assert render.chart([], ORDERS) is None
    assert render.chart([{"date": "2026-11-01", "rows": None}], ORDERS) is None


@pytest.mark.parametrize(("chart", "problem"), [
    (Chart(bars="fact"), "its chart's bars 'fact' is no count column"),
    (Chart(bars="value"), "its chart's bars 'value' is no count column"),
    (Chart(bars="counted", share="short"), "its chart's share 'short' is no share column"),
    (Chart(bars="counted", money="counted"), "its chart's money 'counted' is no money column"),
])
def test_a_chart_whose_series_is_no_column_of_its_kind_is_refused_naming_it(chart, problem):
    with pytest.raises(ConfigError, match=f"pipeline 'stock': {problem}"):
        _stock(chart)
