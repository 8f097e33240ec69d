"""docker-compose.yaml in real containers: both profiles, built and driven as a user would.

A Docker engine of this test's own (tests/containers/engine.py) builds the images the compose
file names from stand-ins (tests/containers/images/, on a debootstrap'ed Debian bookworm: no
container registry is reachable), then, for the default stack and for the scale-out profile
(`--env-file config/scale-out.env`: CeleryExecutor, two workers, redis, the object store),
in a copy of the project's tracked files:

`docker-compose build`, `up -d`, every service healthy; then through public interfaces only
(the REST API with a password login, `docker-compose run airflow-cli ...`): the DAG loaded
without import errors, the scheduler's catch-up processing exactly the dates `due_runs`
names, a REST-triggered run of the sample partition 2026-11-02 whose gold equals the one the
command line writes on the host, an `airflow backfill create` of a date whose partition came
late; `down -v` leaving no container and no volume. The scale-out run also checks that the
stages of one run ran on both worker containers and that no worker mounts a data folder.

Dates are relative to the real clock (the gate's lookback uses it): T is today in Jakarta.
Partitions T-3, T-2 (and T-1 once its run has fired) are there before `up`, T-4's arrives
after the catch-up and is backfilled.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stack import REPO
from stack.ephemeral import (
    DAG_ID,
    NO_REPORT_CATCHUPS,
    PASSWORD,
    USERNAME,
    WORKERS,
    fire_time,
    last_fired_day,
    partition_day,
)
from stack.ports import free_port
from stack.rest import AirflowApi, wait_for
from tests.containers.engine import CONTAINER_REPORT

pytestmark = pytest.mark.e2e

#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
COMPOSE = shutil.which("docker-compose", path="/usr/bin:/bin")
PROJECT_IMAGE = "tokokita-airflow:3.3.2"
#: the project's tracked files a clone has, copied for each run (outputs stay in the copy)
TRACKED = ("Dockerfile", ".dockerignore", "docker-compose.yaml", "requirements.txt",
           "requirements-runtime.txt", "constraints.txt", "stack", "dags", "plugins", "include",
           "config", "data/raw")
STAGES = ("extract", "transform", "load", "validate", "publish_gold")
SAMPLE_DAY = date(2026, 11, 2)  # a tracked sample partition (data/raw/EXPECTED.md)
SAMPLE_TOTALS = (Decimal("3542000.00"), Decimal("3092000.00"), 4)  # bruto, bersih, rows
LONG_RUNNING = ("postgres", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                "airflow-triggerer")
SCALE_OUT = ("redis", "object-store", *WORKERS)
TEST_TOOLS = ("pytest", "hypothesis", "playwright", "cronsim", "moto", "ruff", "cfn-lint",
              "sympy", "docker", "responses")
#: `up -d` to every service healthy (the workers' first health checks wait for the api-server)
HEALTHY_TIMEOUT_S = 420


# -- the project copy and its compose commands -------------------------------------------------

class Stack:
    """One compose project (a copy of the tracked files) on the test's engine."""

    def __init__(self, engine, root: Path, name: str, *, scale_out: bool, env: dict[str, str]):
        self.engine = engine
        self.root = root
        self.name = name
        self.scale_out = scale_out
        self.port = free_port()
        self.env = {**engine.env, "COMPOSE_PROJECT_NAME": name,
                    "AIRFLOW_API_PORT": str(self.port), **env}
        self.api = AirflowApi(f"http://127.0.0.1:{self.port}", USERNAME, PASSWORD)

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> \
            subprocess.CompletedProcess:
        env_file = ["--env-file", "config/scale-out.env"] if self.scale_out else []
        done = subprocess.run([COMPOSE, *env_file, *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)[:300]} exited "
                                 f"{done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}")
        return done

    def cli(self, *args: str, timeout: float = 300) -> str:
        """`docker-compose run --rm airflow-cli ARGS` (the entrypoint's command handling)."""
        return self.compose("run", "--rm", "-T", "airflow-cli", *args, timeout=timeout).stdout

    def containers(self) -> dict[str, dict]:
        """This project's containers by service: `docker inspect` of each."""
        ids = self.engine.docker("ps", "-a", "-q", "--filter",
                                 f"label=com.docker.compose.project={self.name}").stdout.split()
        if not ids:
            return {}
        found = json.loads(self.engine.docker("inspect", *ids).stdout)
        by_service: dict[str, dict] = {}
        for info in found:
            service = info["Config"]["Labels"]["com.docker.compose.service"]
            if info["Config"]["Labels"].get("com.docker.compose.oneoff") == "True":
                continue
            by_service[service] = info
        return by_service

    def logs(self, services: list[str] | None = None, tail: int = 60) -> str:
        done = self.compose("logs", "--no-color", "--tail", str(tail), *(services or []),
                            timeout=120, check=False)
        return (done.stdout + done.stderr)[-12000:]

    def wait_healthy(self, timeout: float = HEALTHY_TIMEOUT_S) -> float:
        """Every long-running service healthy and airflow-init done; seconds it took."""
        wanted = (*LONG_RUNNING, *(SCALE_OUT if self.scale_out else ()))
        started = time.monotonic()

        def probe():
            infos = self.containers()
            init = infos.get("airflow-init")
            if init and init["State"]["Status"] == "exited" and init["State"]["ExitCode"] != 0:
                raise AssertionError(f"airflow-init exited {init['State']['ExitCode']}:\n"
                                     + self.logs(["airflow-init"], tail=80))
            waiting = [name for name in wanted if name not in infos
                       or (infos[name]["State"].get("Health") or {}).get("Status") != "healthy"]
            return not waiting and init and init["State"]["Status"] == "exited"

        try:
            wait_for(probe, timeout, 2, "every service healthy")
        except TimeoutError:
            infos = self.containers()
            states = {name: (info["State"]["Status"],
                             (info["State"].get("Health") or {}).get("Status"))
                      for name, info in infos.items()}
            bad = [name for name in wanted if states.get(name, ("", ""))[1] != "healthy"]
            raise AssertionError(f"not healthy after {timeout:.0f}s: {states}\n"
                                 + self.logs(bad or None, tail=80)) from None
        return time.monotonic() - started

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "20", timeout=300,
                     check=False)

    @contextmanager
    def explained(self) -> Iterator[None]:
        """On failure, add the state and the logs of the project's containers."""
        try:
            yield
        except Exception as exc:
            states = {name: info["State"]["Status"] for name, info in self.containers().items()}
            raise AssertionError(f"{exc}\n\ncontainers: {states}\n{self.logs()}") from exc


def copy_project(root: Path) -> None:
    for rel in TRACKED:
        source, target = REPO / rel, root / rel
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info", "*.tmp", "*.part"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def write_partition(raw: Path, day: date, seed: int) -> str:
    from devtools.samples import generate_partition

    path = raw / f"pesanan_{day.isoformat()}.csv"
    generate_partition(path, day, 40, seed=seed)
    path.chmod(0o644)
    return path.name


def wait_past_midnight(margin_s: float = 900) -> None:
    """The lookback counts from Jakarta's date: never run across its midnight."""
    local = datetime.now(UTC).astimezone(ZoneInfo(JKT))
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(),
                                tzinfo=ZoneInfo(JKT))
    left = (midnight - local).total_seconds()
    if left < margin_s:
        time.sleep(left + 5)


def host_cli_gold(day: date) -> bytes:
    """The gold file of the sample partition as the command line writes it on the host."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data" / "raw").mkdir(parents=True)
        name = f"pesanan_{day.isoformat()}.csv"
        shutil.copy(REPO / "data" / "raw" / name, Path(tmp) / "data" / "raw" / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")}
        done = subprocess.run([sys.executable, "-m", "tokokita_etl", "run", "--date",
                               day.isoformat()], cwd=tmp, env=env, capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return (Path(tmp) / "data" / "gold" / f"summary_harian_{day.isoformat()}.csv").read_bytes()


def totals(gold: bytes) -> tuple[Decimal, Decimal, int]:
    rows = list(csv.DictReader(io.StringIO(gold.decode("utf-8"))))
    return (sum(Decimal(r["bruto"]) for r in rows),
            sum(Decimal(r["bersih"]) for r in rows), len(rows))


def readable_by_nobody(path: Path) -> bool:
    """Whether an unprivileged other account (uid/gid 65534) can read the file."""
    done = subprocess.run(["cat", str(path)], user=65534, group=65534, extra_groups=[],
                          capture_output=True, timeout=30, check=False)
    return done.returncode == 0 and done.stdout == path.read_bytes()


# -- REST helpers --------------------------------------------------------------------------

def states(api: AirflowApi, run: dict) -> dict[str, str]:
    return {task: ti["state"] for task, ti in api.task_instances(DAG_ID, run["dag_run_id"]).items()}


def wait_runs(api: AirflowApi, days: list[date], run_type: str, timeout: float) -> dict[date, dict]:
    """The finished runs of `run_type` for `days`, by partition date."""
    def probe():
        runs = {partition_day(r): r for r in api.dag_runs(DAG_ID, run_type=[run_type])}
        done = {d: r for d, r in runs.items() if d in days and r["state"] in ("success", "failed")}
        return done if len(done) == len(days) else None

    return wait_for(probe, timeout, 3, f"{run_type} runs of {[d.isoformat() for d in days]}")


# -- the test ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def build_dir():
    """A world-traversable folder for the project copies (other accounts read their gold)."""
    path = Path(tempfile.mkdtemp(prefix="tokokita-compose-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def expected_sample_gold() -> bytes:
    gold = host_cli_gold(SAMPLE_DAY)
    assert totals(gold) == SAMPLE_TOTALS  # data/raw/EXPECTED.md
    return gold


@pytest.mark.skipif(not COMPOSE, reason="docker-compose is not installed (apt-get install "
                    "docker-compose; .ci/run does)")
@pytest.mark.parametrize("profile", ["default", "scale-out"])
def test_the_compose_stack_runs_in_containers(engine, build_dir, expected_sample_gold, profile):
    wait_past_midnight()
    scale_out = profile == "scale-out"
    root = build_dir / profile
    copy_project(root)
    raw = root / "data" / "raw"
    now = datetime.now(UTC)
    today = now.astimezone(ZoneInfo(JKT)).date()
    last_day = last_fired_day(now)
    t = lambda minus: today - timedelta(days=minus)  # noqa: E731
    catchup_days = [t(4) + timedelta(days=n) for n in range((last_day - t(4)).days + 1)]
    for seed, day in enumerate(d for d in catchup_days if d != t(4)):
        write_partition(raw, day, seed)
    tracked_owners = {p: (p.stat().st_uid, p.stat().st_gid) for p in [root / "data", *raw.rglob("*")]}

    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.orders.settings import OrdersSettings
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.watermark import Watermark

    due = due_runs(Watermark({"runs": {}}), now, ORDERS.raw.present(OrdersSettings(raw_dir=raw)),
                   7, 3, tz=JKT)
    assert due == [d for d in catchup_days if d != t(4)]

    stack = Stack(engine, root, f"tokokita-ctest-{profile}", scale_out=scale_out, env={
        # the first scheduled run is T-4's (fires T-3 02:30), the last the latest fired
        "TOKOKITA_START_DATE": t(3).isoformat(),
        "TOKOKITA_END_DATE": fire_time(last_day).isoformat(),
        # the city reports' catch-ups are tested on the local stack, not here
        **NO_REPORT_CATCHUPS})
    key = profile.replace("-", "_")
    started = time.monotonic()
    try:
        with stack.explained():
            built = time.monotonic()
            stack.compose("build", timeout=1800)
            CONTAINER_REPORT[f"{key}_build_s"] = round(time.monotonic() - built, 1)
            if scale_out:  # raw partitions go to the object store before the scheduler starts
                stack.compose("up", "-d", "object-store", timeout=300)
                out = stack.cli("python", "-c", UPLOAD, "s3://tokokita/raw",
                                *sorted(p.name for p in raw.glob("pesanan_*.csv")))
                assert "uploaded" in out, out
            up = time.monotonic()
            stack.compose("up", "-d", timeout=600)
            stack.wait_healthy()
            CONTAINER_REPORT[f"{key}_up_to_healthy_s"] = round(time.monotonic() - up, 1)
            exercise(stack, raw, catchup_days, due, t, expected_sample_gold, key)
            if not scale_out:
                gold = sorted((root / "data" / "gold").glob("summary_harian_*.csv"))
                assert gold
                for path in gold:
                    mode = stat.S_IMODE(path.stat().st_mode)
                    assert mode == 0o644, f"{path.name}: mode {mode:o}, not 0644 (umask 022)"
                    assert readable_by_nobody(path), f"{path} is not readable by another user"
            else:
                check_workers(stack, root)
            assert {p: (p.stat().st_uid, p.stat().st_gid) for p in tracked_owners} == \
                tracked_owners, "the stack changed the owner of tracked files"
    finally:
        stack.api.close()
        stack.down()
        CONTAINER_REPORT[f"{key}_total_s"] = round(time.monotonic() - started, 1)
    assert stack.containers() == {}
    volumes = engine.docker("volume", "ls", "-q", "--filter",
                            f"label=com.docker.compose.project={stack.name}").stdout.split()
    assert volumes == [], f"down -v left volumes: {volumes}"


#: the object store through the container's `aws_default` connection (AIRFLOW_CONN_AWS_DEFAULT),
#: as the tasks reach it: the services have no AWS variable
UPLOAD = """
import os, sys
from pathlib import Path
from stack.connections import storage_options
from tokokita_etl.storage import filesystem, use_options
use_options("s3", storage_options(os.environ))
fs, root = filesystem(sys.argv[1])
bucket = root.split("/", 1)[0]
if not fs.exists(bucket):
    fs.mkdir(bucket)
for name in sys.argv[2:]:
    fs.put_file(str(Path("/opt/airflow/data/raw") / name), f"{root}/{name}")
print("uploaded", len(sys.argv) - 2)
"""

READ_GOLD = """
import json, os, sys
from stack.connections import storage_options
from tokokita_etl.storage import filesystem, use_options
use_options("s3", storage_options(os.environ))
fs, root = filesystem(sys.argv[1])
print(json.dumps({p.rsplit("/", 1)[-1]: fs.cat_file(p).decode() for p in fs.ls(root)}))
"""


def gold_files(stack: Stack) -> dict[str, bytes]:
    if stack.scale_out:
        out = stack.cli("python", "-c", READ_GOLD, "s3://tokokita/gold")
        return {k: v.encode() for k, v in json.loads(out.strip().splitlines()[-1]).items()}
    return {p.name: p.read_bytes() for p in (stack.root / "data" / "gold").glob("*.csv")}


def exercise(stack: Stack, raw: Path, catchup_days: list[date], due: list[date], t,
             expected_sample_gold: bytes, key: str) -> None:
    api = stack.api
    api.login()  # the compose file's default login, written by airflow-init
    dag = api.wait_dag(DAG_ID, timeout=180)
    assert dag["dag_id"] == DAG_ID
    errors = api.get("/importErrors")
    assert errors["total_entries"] == 0, errors

    # the scheduler's own catch-up: one run per fire time, the due dates processed
    started = time.monotonic()
    runs = wait_runs(api, catchup_days, "scheduled", timeout=420)
    CONTAINER_REPORT[f"{key}_catchup_s"] = round(time.monotonic() - started, 1)
    processed = sorted(d for d, r in runs.items() if states(api, r).get("publish_gold") == "success")
    assert processed == due, {d.isoformat(): states(api, r) for d, r in runs.items()}
    assert all(r["state"] == "success" for r in runs.values())
    assert states(api, runs[t(4)])["wait_for_raw_partition"] == "skipped"  # no partition yet
    gold = gold_files(stack)
    assert {f"summary_harian_{d.isoformat()}.csv" for d in due} <= set(gold)

    # one REST-triggered run of the sample partition: the command line's gold
    run = api.trigger(DAG_ID, partition_key=SAMPLE_DAY.isoformat())
    finished = api.wait_run(DAG_ID, run["dag_run_id"], timeout=300, poll=2)
    assert finished["state"] == "success", states(api, finished)
    assert states(api, finished)["publish_gold"] == "success"
    sample = gold_files(stack)[f"summary_harian_{SAMPLE_DAY.isoformat()}.csv"]
    assert sample == expected_sample_gold
    assert totals(sample) == SAMPLE_TOTALS

    # T-4's partition arrives late: `airflow backfill create` through the airflow-cli service
    name = write_partition(raw, t(4), seed=99)
    if stack.scale_out:
        assert "uploaded" in stack.cli("python", "-c", UPLOAD, "s3://tokokita/raw", name)
    started = time.monotonic()
    out = stack.cli("backfill", "create", "--dag-id", DAG_ID,
                    "--from-date", t(4).isoformat(), "--to-date", t(4).isoformat(),
                    "--reprocess-behavior", "completed")
    backfill = wait_runs(api, [t(4)], "backfill", timeout=300)[t(4)]
    CONTAINER_REPORT[f"{key}_backfill_s"] = round(time.monotonic() - started, 1)
    assert backfill["state"] == "success", (out[-2000:], states(api, backfill))
    assert states(api, backfill)["publish_gold"] == "success"
    assert f"summary_harian_{t(4).isoformat()}.csv" in gold_files(stack)


def check_workers(stack: Stack, root: Path) -> None:
    """The stages of one run ran on both worker containers; no worker mounts a data folder."""
    infos = stack.containers()
    hosts = {infos[w]["Config"]["Hostname"]: w for w in WORKERS}
    by_run = {}
    for run in stack.api.dag_runs(DAG_ID):
        instances = stack.api.task_instances(DAG_ID, run["dag_run_id"])
        ran = {task: ti.get("hostname") or "" for task, ti in instances.items()
               if task in STAGES and ti["state"] == "success"}
        if len(ran) == len(STAGES):
            by_run[run["dag_run_id"]] = {task: next(
                (w for h, w in hosts.items() if host.startswith(h)), host)
                for task, host in ran.items()}
    assert by_run, "no run processed a partition"
    assert {w for ran in by_run.values() for w in ran.values()} == set(WORKERS), by_run
    split = [run_id for run_id, ran in by_run.items() if len(set(ran.values())) == 2]
    assert split, f"no run had its stages on both worker containers: {by_run}"
    CONTAINER_REPORT["scale_out_runs_split_across_workers"] = f"{len(split)} of {len(by_run)}"
    for worker in WORKERS:
        targets = sorted(m["Destination"] for m in infos[worker]["Mounts"])
        assert targets == [f"/opt/airflow/{f}" for f in ("config", "dags", "include", "plugins")], \
            (worker, targets)
    # the data folder the other services mount got no data of the runs
    outputs = [p for p in (root / "data").rglob("*") if p.is_file() and "raw" not in p.parts]
    assert outputs == [], outputs


def test_the_image_has_only_runtime_requirements_and_fails_on_a_conflict_it_causes(engine):
    """Regression: the image carried playwright, moto[server] and their dependencies (a
    1.17 GB image), and its build ignored the conflicts pip install printed."""
    # the image docker-compose.yaml builds (cached layers when the compose test built it)
    engine.docker("build", "-t", PROJECT_IMAGE, str(REPO), timeout=1800)
    frozen = engine.docker("run", "--rm", "--entrypoint", "pip", PROJECT_IMAGE, "list",
                           "--format=freeze").stdout
    names = {line.split("==")[0].lower() for line in frozen.splitlines() if "==" in line}
    assert {"duckdb", "pyarrow", "s3fs", "apache-airflow-providers-celery"} <= names
    assert names.isdisjoint(TEST_TOOLS), sorted(names & set(TEST_TOOLS))
    CONTAINER_REPORT["image_size_mb"] = round(engine.image_size(PROJECT_IMAGE) / 1e6)
    CONTAINER_REPORT["image_packages"] = len(names)

    # the build's check, in the built image: a package requiring what the project pinned
    # otherwise (duckdb 2.0.1) is a conflict the project causes; one already in the base is not
    probe = (
        'site=$(python -c "import site, sysconfig; print(site.getusersitepackages() '
        "if site.ENABLE_USER_SITE else sysconfig.get_paths()['purelib'])\")\n"
        'mkdir -p "$site/tokokita_probe-1.0.dist-info"\n'
        'printf "Metadata-Version: 2.1\\nName: tokokita-probe\\nVersion: 1.0\\n'
        'Requires-Dist: duckdb<1\\n" > "$site/tokokita_probe-1.0.dist-info/METADATA"\n')
    caused = engine.docker("run", "--rm", "--entrypoint", "sh", PROJECT_IMAGE, "-c",
                           ": > /tmp/base.txt\n" + probe
                           + "sh /opt/airflow/stack/pip-check.sh compare /tmp/base.txt",
                           check=False)
    assert caused.returncode == 1, caused.stdout + caused.stderr
    assert "break packages of the image" in caused.stderr
    assert "tokokita-probe 1.0 has requirement duckdb<1" in caused.stderr
    own = engine.docker("run", "--rm", "--entrypoint", "sh", PROJECT_IMAGE, "-c", probe
                        + "sh /opt/airflow/stack/pip-check.sh record /tmp/base.txt\n"
                        + "sh /opt/airflow/stack/pip-check.sh compare /tmp/base.txt",
                        check=False)
    assert own.returncode == 0, own.stdout + own.stderr
    assert "the base image's own (not caused by this project): tokokita-probe" in own.stdout
