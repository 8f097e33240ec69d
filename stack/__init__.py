"""Run the docker-compose stack's services without Docker (tests, `make up`, `make demo`).

`stack.compose` reads docker-compose.yaml; `stack.local` turns a compose service into a
local process with the same command and environment; `stack.init` is the airflow-init
service; `stack.rest` is a small client of Airflow's REST API; `stack.ephemeral` is a
throw-away running stack on its own databases (end-to-end tests, the catch-up benchmark);
`stack.demo` and `stack.__main__` are `make demo`, `make up` and `make down`. This package
imports Airflow only inside the processes it starts (the pipeline package include/tokokita_etl
never does).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yaml"
