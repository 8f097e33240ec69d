"""The weekly city report's OpenLineage datasets name the partitions they cover: `collect`
reads the week's seven dates of `summary_harian`, `load` writes its Monday of
`summary_mingguan` (OpenLineage's partition subset facet)."""

from __future__ import annotations

from datetime import date

from openlineage.client.serde import Serde

from tokokita_airflow.lineage import operator_lineage
from tokokita_etl.pipelines import settings_of
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

WEEK = date(2026, 11, 9)


def facets(dataset) -> dict:
    return Serde.to_dict(dataset)


def test_collect_names_the_seven_dates_it_read_and_load_the_week_it_wrote(tmp_path):
    settings = settings_of(WEEKLY_CITY_REPORT, env={
        "TOKOKITA_WAREHOUSE_URL": f"sqlite:///{tmp_path}/w.db"}, cwd=tmp_path)
    collect = operator_lineage(WEEKLY_CITY_REPORT, settings, WEEK, "collect",
                               {"daily_rows": 12})
    [daily] = collect.inputs
    body = facets(daily)
    assert body["name"] == "main.summary_harian"
    assert body["inputFacets"]["inputStatistics"]["rowCount"] == 12
    partitions = body["inputFacets"]["subset"]["inputCondition"]["partitions"]
    assert [p["identifier"] for p in partitions] == [
        f"2026-11-{day:02d}" for day in range(9, 16)]
    assert partitions[0]["dimensions"] == {"order_date": "2026-11-09"}

    load = operator_lineage(WEEKLY_CITY_REPORT, settings, WEEK, "load", {"rows": 4})
    [week] = load.outputs
    body = facets(week)
    assert body["name"] == "main.summary_mingguan"
    assert body["outputFacets"]["subset"]["outputCondition"]["partitions"] == [
        {"dimensions": {"week_start": "2026-11-09"}, "identifier": "2026-11-09"}]
    gold = operator_lineage(WEEKLY_CITY_REPORT, settings, WEEK, "publish_gold", {"rows": 4})
    assert gold.outputs[0].name.endswith("summary_mingguan_2026-11-09.csv")
