"""What reading the warehouse from an Airflow connection costs a task: the settings a task
uses (`tokokita_airflow.runtime.pipeline_settings`, the warehouse URL read from
`AIRFLOW_CONN_TOKOKITA_WAREHOUSE` through Airflow's connection API) against the same settings
with the URL configured (`configured_settings`, no connection read), alternated in one
process, each call timed; the extra time of the connection path is then set against a
100k-row run of the pipeline (`--run-s`, from RESULTS.md).

A connection kept in Airflow's metadata database (created in the UI or through the REST
API) is fetched by a running task from the API server instead: one request per task, which
this benchmark does not time.

    python -m bench.bench_connections [--calls 300] [--run-s 1.4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measure(calls: int) -> dict[str, float]:
    """Median seconds of one call of each path, alternated."""
    sys.path[:0] = [str(REPO / "plugins"), str(REPO / "include")]
    with tempfile.TemporaryDirectory() as root:
        os.environ["TOKOKITA_HOME"] = root
        os.environ["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"] = json.dumps(
            {"conn_type": "postgres", "host": "db.example", "port": 5432, "login": "etl",
             "password": "s3cret-value", "schema": "tokokita"})
        from tokokita_airflow.runtime import configured_settings, pipeline_settings

        assert pipeline_settings().warehouse_url.startswith("postgresql+psycopg://etl:")
        timings: dict[str, list[float]] = {"configured": [], "connection": []}
        for _ in range(calls):
            for name, read in (("configured", configured_settings),
                               ("connection", pipeline_settings)):
                started = time.perf_counter()
                read()
                timings[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in timings.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--run-s", type=float, default=1.4,
                        help="seconds of a 100k-row run, to set the extra time against")
    args = parser.parse_args(argv)
    medians = measure(args.calls)
    extra = medians["connection"] - medians["configured"]
    # a run reads its settings once per task: seven tasks
    share = 7 * extra / args.run_s
    print(json.dumps({
        "configured_ms": round(medians["configured"] * 1000, 3),
        "connection_ms": round(medians["connection"] * 1000, 3),
        "extra_ms_per_task": round(extra * 1000, 3),
        "share_of_a_100k_run": round(share, 5),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
