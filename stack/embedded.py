"""The embedded default: the compose services on SQLite, with `airflow_home/` in the repository.

Same compose environment as the containers (see `stack.local`), with these local values:
Airflow's metadata in `airflow_home/airflow.db`, the warehouse in
`data/warehouse/tokokita.db` (the pipeline's default), the repository's own `dags/`,
`plugins/`, `include/`, `config/` and `data/`, the UI on http://127.0.0.1:8080 (or the next
free port; `AIRFLOW_API_PORT` picks another). Its Airflow connections (`tokokita_warehouse`:
SQLite, the warehouse file) live in the metadata database, added by airflow-init when missing,
so Admin > Connections lists them, an edit there is what the next task reads, and the form's
Test button is enabled (`stack.local`, `connections="metadata"`).
"""

from __future__ import annotations

import os
from datetime import date

from stack import REPO
from stack.local import CONNECTIONS_IN_METADATA, LocalTarget
from stack.ports import free_port

AIRFLOW_HOME = REPO / "airflow_home"
STATE_FILE = AIRFLOW_HOME / "stack.json"
#: the sample partitions are 2026-11-02..04: the catch-up of `make up` is that week, the runs
#: firing 2026-11-02..08 02:30 WIB (partitions 2026-11-01..07)
SAMPLE_WEEK = ("2026-11-02", "2026-11-08T12:00:00")
SAMPLE_FIRST_DAY = date(2026, 11, 1)
#: the Airflow compose variables a user may set in the shell, as with `docker compose`; the
#: pipeline's are every variable its settings read (`user_vars`)
AIRFLOW_USER_VARS = ("_AIRFLOW_WWW_USER_USERNAME", "_AIRFLOW_WWW_USER_PASSWORD",
                     "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET",
                     "AIRFLOW__CORE__PARALLELISM")


def user_vars() -> tuple[str, ...]:
    """The compose variables the embedded stack takes from the shell: the Airflow ones of
    `AIRFLOW_USER_VARS` and every variable the pipeline's settings read, which the compose
    file's generated block hands to every service (`stack.compose.settings_block`)."""
    from stack.compose import settings_variables

    return (*AIRFLOW_USER_VARS, *settings_variables())


def sample_week_lookback(today: date | None = None) -> int:
    """lookback_days that keeps the sample week inside the scheduled catch-up window."""
    today = today or date.today()
    return max(7, (today - SAMPLE_FIRST_DAY).days + 1)


def embedded_target(*, api_port: int | None = None, health_port: int | None = None,
                    env: dict[str, str] | None = None) -> LocalTarget:
    """The SQLite target of `make demo` / `make up`."""
    env = dict(os.environ if env is None else env)
    compose_env = {k: env[k] for k in user_vars() if k in env}
    compose_env.setdefault("TOKOKITA_START_DATE", SAMPLE_WEEK[0])
    compose_env.setdefault("TOKOKITA_END_DATE", SAMPLE_WEEK[1])
    compose_env.setdefault("TOKOKITA_LOOKBACK_DAYS", str(sample_week_lookback()))
    preferred = int(env.get("AIRFLOW_API_PORT") or 8080)
    return LocalTarget(
        airflow_home=AIRFLOW_HOME,
        databases={"airflow": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
                   "tokokita": f"sqlite:///{REPO / 'data' / 'warehouse' / 'tokokita.db'}"},
        api_port=api_port or free_port(preferred),
        scheduler_health_port=health_port or free_port(8974),
        compose_env=compose_env,
        connections=CONNECTIONS_IN_METADATA,
    )
