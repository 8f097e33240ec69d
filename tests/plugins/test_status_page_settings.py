"""The status page's settings view against real Airflow in this process (its auth manager, the
warehouse's Airflow connection) and the real command line: one display, one set of values."""

from __future__ import annotations

import json
import os

import pytest

from tests.airflow_support import ensure_metadata_db
from tests.conftest import run_cli

pytestmark = pytest.mark.airflow

#: given as variables to both the page's process and the command line
VARIABLES = {"TOKOKITA_ON_RAW_CHANGE": "reprocess",
             "TOKOKITA_PING_URL": "https://hc.example/ping/abc?key=s3cret",
             "TOKOKITA_WEEKLY_CITY_REPORT__LOOKBACK_DAYS": "40"}
#: given in the YAML file
YAML = ("volume_check: fail\nclaim_ttl_hours: 9\n"
        "pipelines:\n  weekly_city_report:\n    max_attempts: 5\n")


@pytest.fixture
def client(project, monkeypatch):
    """A client of the page mounted at /tokokita as the api-server mounts it, signed in as
    an admin; the project has VARIABLES set and YAML in its config/pipeline.yaml."""
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from tokokita_plugin import TokokitaPlugin

    ensure_metadata_db()
    (project.root / "config" / "pipeline.yaml").write_text(YAML, encoding="utf-8")
    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    server = FastAPI()
    server.mount("/tokokita", TokokitaPlugin.fastapi_apps[0]["app"])
    token = init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="ana", role="admin"))
    return TestClient(server, follow_redirects=False,
                      headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize("pipeline", ["orders", "weekly_city_report"])
def test_the_settings_view_shows_what_tokokita_etl_config_prints_with_the_same_sources(
        client, project, pipeline):
    query = {} if pipeline == "orders" else {"pipeline": pipeline}
    answer = client.get("/tokokita/settings.json", params=query)
    assert answer.status_code == 200, answer.text
    page = {row["setting"]: (row["value"], row["source"]) for row in answer.json()}

    cli = run_cli(["config", "--json", "--pipeline", pipeline], cwd=project.root,
                  env={**VARIABLES, "TOKOKITA_HOME": str(project.root)})
    assert cli.returncode == 0, cli.stderr
    printed = {row["setting"]: (row["value"], row["source"]) for row in json.loads(cli.stdout)}

    # the tasks take the warehouse from its Airflow connection: the same file here
    warehouse = page.pop("warehouse_url")
    assert warehouse == (printed.pop("warehouse_url")[0],
                         "Airflow connection 'tokokita_warehouse' (warehouse_conn_id)")
    assert page == printed
    if pipeline == "orders":
        assert page["ping_url"][0] == "https://hc.example/ping/abc?key=***"  # masked alike
        assert page["on_raw_change"] == ("reprocess", "TOKOKITA_ON_RAW_CHANGE")
        assert page["volume_check"] == ("fail", str(project.root / "config" / "pipeline.yaml"))
    else:
        assert page["lookback_days"] == ("40", "TOKOKITA_WEEKLY_CITY_REPORT__LOOKBACK_DAYS")
        assert page["max_attempts"][0] == "5"
        assert page["claim_ttl_hours"][0] == "6"  # the orders' own value is not its
    assert os.environ["TOKOKITA_ON_RAW_CHANGE"] == "reprocess"


def test_the_settings_page_is_a_table_linked_from_the_status_page(client):
    page = client.get("/tokokita/")
    assert page.status_code == 200, page.text
    assert "href='/tokokita/settings'" in page.text
    settings = client.get("/tokokita/settings")
    assert settings.status_code == 200, settings.text
    assert "<tr id='s-on_raw_change'><td>on_raw_change</td><td><code>reprocess</code></td>" \
           "<td>TOKOKITA_ON_RAW_CHANGE</td></tr>" in settings.text
    assert "s3cret" not in settings.text
    weekly = client.get("/tokokita/settings", params={"pipeline": "weekly_city_report"})
    assert weekly.status_code == 200 and "href='/tokokita/?pipeline=weekly_city_report'" \
        in weekly.text


def test_the_page_keeps_the_address_of_the_plugins_own_url_route():
    """The page's script keeps Airflow's address at /plugin/<url_route> (see
    tests/e2e/test_one_configuration.py): it must name the plugin's route and the page's
    own path, or it keeps nothing."""
    from tokokita_plugin import TokokitaPlugin

    from tokokita_airflow.status_page.auth import PREFIX
    from tokokita_airflow.status_page.render import CSP, LINKS_SCRIPT, LINKS_SCRIPT_HASH

    [view] = TokokitaPlugin.external_views
    assert view["href"] == f"{PREFIX}/" and view["destination"] == "nav"
    assert f'var ROUTE = "/plugin/{view["url_route"]}";' in LINKS_SCRIPT
    assert f'var PAGE = "{PREFIX}/";' in LINKS_SCRIPT
    assert f"'sha256-{LINKS_SCRIPT_HASH}'" in CSP


def test_a_tab_without_partitions_says_so_in_its_own_unit(client, monkeypatch):
    """Regression: the summary line of a pipeline with nothing in its window read
    "no dates: ." (an empty count after the colon)."""
    monkeypatch.setenv("TOKOKITA_MONTHLY_CITY_REPORT__START_DATE", "2100-01-01")
    answer = client.get("/tokokita/", params={"pipeline": "monthly_city_report"})
    assert answer.status_code == 200, answer.text
    assert "No months yet." in answer.text
    assert ": ." not in answer.text
