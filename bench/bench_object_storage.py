"""One partition through the command line with local folders and with object storage.

    python -m bench --object-storage [--rows 1000000]

Both sides run `tokokita-etl run --date D` in a new process on the same generated partition,
each on a fresh PostgreSQL warehouse. Local: raw, staging, gold, quarantine and state as
folders (the default). Object storage: the four data folders as `s3://` URLs on a local
S3-compatible server (moto in server mode, started for the run) and the state in the
warehouse's database (`state_url: warehouse`), as the scale-out profile has them. Reports
each wall time, the ratio, and whether both published the same gold file and checksums.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench.harness import REPO, Warehouses
from devtools.object_store import s3_server
from devtools.samples import generate_partition
from tokokita_etl.orders.contract import partition_path

DAY = date(2026, 11, 2)
BUCKET = "tokokita-bench"
AWS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
       "AWS_DEFAULT_REGION": "us-east-1"}


def _run(env: dict[str, str], cwd: Path) -> tuple[float, str]:
    cli = Path(sys.executable).with_name("tokokita-etl")
    started = time.perf_counter()
    proc = subprocess.run([str(cli), "run", "--date", DAY.isoformat(), "--log-format", "json"],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def bench_object_storage(rows: int, pg_url: str) -> dict:
    """Both sides on one partition, and the ratio."""
    work = Path(tempfile.mkdtemp(prefix="tokokita-bench-s3-"))
    warehouses = Warehouses("postgresql", work, pg_url)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("TOKOKITA_", "AWS_"))}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO / "include"), base.get("PYTHONPATH", "")])
    try:
        raw = partition_path(work / "raw", DAY)
        generate_partition(raw, DAY, rows, seed=1)
        local_env = {**base, "TOKOKITA_RAW_DIR": str(work / "raw"),
                     "TOKOKITA_GOLD_DIR": str(work / "gold"),
                     "TOKOKITA_QUARANTINE_DIR": str(work / "quarantine"),
                     "TOKOKITA_STATE_DIR": str(work / "state"),
                     "TOKOKITA_STAGING_DIR": str(work / "staging"),
                     "TOKOKITA_WAREHOUSE_URL": warehouses.fresh("local_folders")}
        local_s, _ = _run(local_env, work)
        local_gold = (work / "gold" / f"summary_harian_{DAY.isoformat()}.csv").read_bytes()
        local_state = json.loads((work / "state" / "state.json").read_text(encoding="utf-8"))

        with s3_server(work / "moto.log") as server:
            endpoint = server.endpoint
            s3_env = {**base, **AWS, "AWS_ENDPOINT_URL": endpoint,
                      **{f"TOKOKITA_{name.upper()}_DIR": f"s3://{BUCKET}/{name}"
                         for name in ("raw", "staging", "gold", "quarantine")},
                      "TOKOKITA_WORK_DIR": str(work / "work"),
                      "TOKOKITA_STATE_DIR": str(work / "unused-state"),
                      "TOKOKITA_STATE_URL": "warehouse",
                      "TOKOKITA_WAREHOUSE_URL": warehouses.fresh("object_storage")}
            os.environ.update({**AWS, "AWS_ENDPOINT_URL": endpoint})
            from tokokita_etl.storage import filesystem, upload

            fs, _ = filesystem(f"s3://{BUCKET}/raw")
            fs.mkdir(BUCKET)
            upload(raw, f"s3://{BUCKET}/raw/{raw.name}")
            s3_s, _ = _run(s3_env, work)
            fs, key = filesystem(f"s3://{BUCKET}/gold/summary_harian_{DAY.isoformat()}.csv")
            s3_gold = fs.cat_file(key)
            exported = subprocess.run([str(Path(sys.executable).with_name("tokokita-etl")),
                                       "state", "export"], cwd=work, env=s3_env,
                                      capture_output=True, text=True, check=True).stdout
            s3_state = json.loads(exported)
        return {
            "rows": rows, "partition_mib": round(raw.stat().st_size / 2**20, 1),
            "local_folders_s": round(local_s, 2), "object_storage_s": round(s3_s, 2),
            "object_storage_vs_local": round(s3_s / local_s, 2),
            "identical_gold": s3_gold == local_gold,
            "identical_checksums": s3_state["runs"][DAY.isoformat()]["checksums"]
            == local_state["runs"][DAY.isoformat()]["checksums"],
        }
    finally:
        warehouses.drop_all()
        shutil.rmtree(work, ignore_errors=True)
