"""One configuration on a running Airflow: every setting of the model, each given a value other
than its default (some in the YAML file that TOKOKITA_CONFIG names, the rest as TOKOKITA_*
variables, as a user sets them in the shell before starting the stack), is what the stack's
services and tasks use and what `tokokita-etl config` prints in the same shell; and the status
page keeps one address inside Airflow's UI.

The variables are handed to the stack as compose variables (`LocalTarget.compose_env`, what
the shell is to `docker compose` and `make up`): they reach the services only through
docker-compose.yaml's generated block.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import date
from pathlib import Path

import httpx
import pytest

from stack.compose import services
from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack
from stack.rest import AirflowApi
from tests.conftest import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.browser]

WEEKLY = "weekly_city_report"
#: the date the test's one run processes (no catch-up runs: the window holds no fire time)
DAY = date(2026, 11, 3)
#: the catch-up window: from 2026-11-10 to 00:30 that day, before its 03:45 fire time
START, END = "2026-11-10", "2026-11-10T00:30:00"
#: a closed local port: a ping there fails at once (a warning, never a failed run)
PING = "http://127.0.0.1:9/ping/orders?key=ping-secret"
NOTIFIERS = json.dumps([{"class": "tokokita_airflow.notifiers.WebhookNotifier",
                         "kwargs": {"url": "http://127.0.0.1:9/hook", "token": "notifier-secret"}}])


def _yaml(root: Path) -> str:
    return f"""\
cron: '45 3 * * *'
lookback_days: 11
duckdb_memory_limit: 300MB
claim_ttl_hours: 5
deadline_local_time: '07:30'
notifiers: '{NOTIFIERS}'
db_connect_timeout_s: 11
db_answer_timeout_s: 46
warehouse_conn_id: ''
object_storage_conn_id: aws_e2e
sweep_cron: '20 * * * *'
pipelines:
  orders:
    volume_min_share: 0.25
  {WEEKLY}:
    ping_url: http://127.0.0.1:9/ping/weekly?key=weekly-secret
    deadline_local_time: '08:15'
    deadline_webhook_url: http://127.0.0.1:9/deadline/weekly?token=hook-secret
  stock:
    start_date: '2100-01-04'
"""


def _variables(root: Path) -> dict[str, str]:
    """The shell's variables (the warehouse URL is added once the stack names its database)."""
    elsewhere = root / "elsewhere"
    return {
        "TOKOKITA_CONFIG": str(root / "settings.yaml"),
        "TOKOKITA_PIPELINE": "etl-pesanan-e2e",
        "TOKOKITA_TIMEZONE": "Asia/Makassar",
        "TOKOKITA_MAX_ATTEMPTS": "4",
        **{f"TOKOKITA_{name.upper()}_DIR": str(elsewhere / name)
           for name in ("raw", "gold", "quarantine", "state", "staging", "work")},
        "TOKOKITA_STATE_URL": "warehouse",
        "TOKOKITA_STATE_CONN_ID": "tokokita_warehouse",
        "TOKOKITA_WAIT_WINDOW_HOURS": "5",
        "TOKOKITA_START_DATE": START,
        "TOKOKITA_END_DATE": END,
        "TOKOKITA_VOLUME_CHECK": "fail",
        "TOKOKITA_ON_RAW_CHANGE": "reprocess",
        "TOKOKITA_PING_URL": PING,
        "TOKOKITA_DEADLINE_WEBHOOK_URL": "http://127.0.0.1:9/deadline?token=hook-secret",
        "TOKOKITA_DECLARATIONS": "stock_pipeline:STOCK",
        "TOKOKITA_DB_STATEMENT_TIMEOUT_S": "601",
        "TOKOKITA_DB_LOCK_TIMEOUT_S": "61",
        f"TOKOKITA_{WEEKLY.upper()}__CRON": "0 5 * * 1",
        f"TOKOKITA_{WEEKLY.upper()}__LOOKBACK_DAYS": "40",
        f"TOKOKITA_{WEEKLY.upper()}__MAX_ATTEMPTS": "6",
        f"TOKOKITA_{WEEKLY.upper()}__WAIT_WINDOW_HOURS": "7",
        f"TOKOKITA_{WEEKLY.upper()}__CLAIM_TTL_HOURS": "8",
        f"TOKOKITA_{WEEKLY.upper()}__START_DATE": "2100-01-04",
        f"TOKOKITA_{WEEKLY.upper()}__END_DATE": "2100-02-01",
    }


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """A stack given every setting (the YAML file and the variables), and the shell's
    variables: (stack, variables, the command line's working directory)."""
    from devtools.samples import generate_partition

    root = tmp_path_factory.mktemp("one-configuration")
    (root / "settings.yaml").write_text(_yaml(root), encoding="utf-8")
    variables = _variables(root)
    stack = EphemeralStack(root / "stack", start_date=START, end_date=END,
                           tokokita_env=variables)
    # the warehouse, named by the variable too: the stack's database, known once it exists
    variables["TOKOKITA_WAREHOUSE_URL"] = stack.target.databases["tokokita"]
    stack.target.compose_env.update(variables)
    stack.stack.services = services(stack.stack.compose_file, stack.target.interpolation_env())
    # the declared pipeline's module, importable by the services and the command line
    shutil.copytree(Path(__file__).resolve().parents[1] / "stock_pipeline", root / "stock_pipeline")
    pythonpath = f"{stack.service_env()['PYTHONPATH']}:{root}"
    stack.target.extra_env["PYTHONPATH"] = pythonpath
    variables_of_shell = {**variables, "PYTHONPATH": pythonpath}
    try:
        stack.prepare()
        raw = Path(variables["TOKOKITA_RAW_DIR"])
        raw.mkdir(parents=True, exist_ok=True)
        generate_partition(raw / f"pesanan_{DAY}.csv", DAY, 30, seed=3)
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        yield stack, variables_of_shell, root
    finally:
        stack.close()


def _page_json(stack: EphemeralStack, path: str, **params: str):
    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with httpx.Client(base_url=stack.target.api_url, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        answer = client.get(path, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.mark.parametrize("pipeline", ["orders", WEEKLY])
def test_every_setting_the_services_use_is_what_tokokita_etl_config_prints_in_the_shell(
        configured, pipeline):
    stack, shell, root = configured
    query = {} if pipeline == "orders" else {"pipeline": pipeline}
    page = {row["setting"]: (row["value"], row["source"])
            for row in _page_json(stack, "/tokokita/settings.json", **query)}
    cli = run_cli(["config", "--json", "--pipeline", pipeline], cwd=root, env=shell)
    assert cli.returncode == 0, cli.stderr
    printed = {row["setting"]: (row["value"], row["source"]) for row in json.loads(cli.stdout)}

    # the tasks read the state database from the connection `state_conn_id` names (the
    # warehouse's): the page says so; the command line has no Airflow connection
    assert page.pop("state_url")[1] == "Airflow connection 'tokokita_warehouse' (state_conn_id)"
    assert printed.pop("state_url") == ("warehouse", "TOKOKITA_STATE_URL")
    assert page == printed
    defaults = sorted(name for name, (_, source) in page.items() if source == "default")
    assert defaults == [], f"settings left at their default: {defaults}"
    sources = {source for _, source in page.values()}
    assert str(root / "settings.yaml") in sources or \
        f"{root / 'settings.yaml'} (pipelines.{WEEKLY})" in sources
    assert "notifier-secret" not in json.dumps(page) and "ping-secret" not in json.dumps(page)
    if pipeline == "orders":
        assert page["on_raw_change"] == ("reprocess", "TOKOKITA_ON_RAW_CHANGE")
        assert page["cron"] == ("45 3 * * *", str(root / "settings.yaml"))
        assert page["volume_min_share"] == ("0.25", f"{root / 'settings.yaml'} (pipelines.orders)")
    else:
        assert page["lookback_days"] == ("40", f"TOKOKITA_{WEEKLY.upper()}__LOOKBACK_DAYS")
        assert page["deadline_local_time"] == ("08:15",
                                               f"{root / 'settings.yaml'} (pipelines.{WEEKLY})")
        # its class is the runner's: none of the orders' own settings
        assert not {"on_raw_change", "volume_check", "duckdb_memory_limit"} & set(page)


def test_the_dag_processor_and_a_task_use_the_same_settings_as_the_command_line(configured):
    """The DAG's schedule (cron, zone) as Airflow parsed it; one run of DAY writes where the
    variables say (raw, gold, the state in the warehouse under the pipeline's name), and
    `tokokita-etl status` in the same shell reads it back done."""
    stack, shell, root = configured
    dag = stack.api.dag(DAG_ID)
    assert "45 3 * * *" in json.dumps(dag), dag
    run = stack.api.trigger(DAG_ID, partition_key=str(DAY))
    finished = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=240)
    assert finished["state"] == "success", stack.api.task_instances(DAG_ID, run["dag_run_id"])
    gold = Path(shell["TOKOKITA_GOLD_DIR"]) / f"summary_harian_{DAY}.csv"
    assert gold.is_file()
    assert not (stack.data / "gold").exists() or not any((stack.data / "gold").iterdir())

    status = run_cli(["status", "--json", "--days", "60"], cwd=root, env=shell)
    assert status.returncode == 0, status.stderr
    rows = {row["date"]: row for row in json.loads(status.stdout)}
    assert rows[str(DAY)]["state"] == "done", rows[str(DAY)]
    watermark = stack.watermark()
    assert watermark[str(DAY)]["status"] == "success"


def test_the_status_page_keeps_one_address_through_a_reload_a_tab_and_back(configured):
    """Regression: inside Airflow's UI the page's address became /plugin/tokokita/tokokita/
    (Airflow's nav external view mirrors the framed page's own path, /tokokita/, below
    /plugin/<url_route>), another address than the menu's, kept by a reload or Back. It stays
    the menu's, /plugin/tokokita, with the pipeline tab, which a reload opens again."""
    from playwright.sync_api import expect

    from tests.browser import chromium, open_status_page

    stack, _, _ = configured
    base = stack.target.api_url
    token = AirflowApi(base, USERNAME, PASSWORD).login()
    orders = re.compile(re.escape(f"{base}/plugin/tokokita") + "$")
    weekly = re.compile(re.escape(f"{base}/plugin/tokokita?pipeline={WEEKLY}") + "$")

    def shown(tab: str):
        frame = page.frame_locator("iframe")
        frame.locator(f"#tab-{tab}[aria-current=page]").wait_for(timeout=60_000)
        frame.locator("#dates").wait_for()
        return frame

    with chromium() as browser:
        context, page, _ = open_status_page(browser, base, token)
        shown("orders")
        expect(page).to_have_url(orders)
        page.reload()
        shown("orders")
        expect(page).to_have_url(orders)
        shown("orders").locator(f"#tab-{WEEKLY}").click()
        shown(WEEKLY)
        expect(page).to_have_url(weekly)
        page.go_back()
        shown("orders")
        expect(page).to_have_url(orders)
        shown("orders").locator(f"#tab-{WEEKLY}").click()
        shown(WEEKLY)
        page.reload()  # the tab named by the address is opened again
        shown(WEEKLY)
        expect(page).to_have_url(weekly)
        shown(WEEKLY).locator("#tab-orders").click()
        shown("orders")
        expect(page).to_have_url(orders)
        context.close()
