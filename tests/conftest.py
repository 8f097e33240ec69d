"""Shared by every test folder: the PostgreSQL server of the run, sample data and helpers.

PostgreSQL comes from ``TOKOKITA_TEST_PG_URL`` (default: the local trust server). Before any
test module is imported, `pytest_configure` creates its database when missing, or, when nothing
listens there, starts a throw-away server for the run (tests/pgserver.py) and points the
variable at it. A server that cannot be used FAILS the run, it never skips. The warehouse
fixtures (a fresh PostgreSQL schema per test, SQLite and PostgreSQL workspaces) are in
tests/db/conftest.py; `Workspace` and the command-line helpers stay here for the tests that
import them.
"""

from __future__ import annotations

# first: points AIRFLOW_HOME at a throw-away SQLite home before any test module imports airflow
import tests.airflow_support  # noqa: F401  isort: skip
import csv
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from tests import pgserver

REPO = Path(__file__).resolve().parents[1]
SAMPLE_RAW = REPO / "data" / "raw"
FAULTS = REPO / "tests" / "faults"
CONTAINERS = REPO / "tests" / "containers"
SAMPLE_DATES = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4))
BIN = Path(sys.executable).parent
CLI = BIN / "tokokita-etl"
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/tokokita_test"
# the requested server; pytest_configure replaces it with the one the run uses
PG_URL = os.environ.get("TOKOKITA_TEST_PG_URL") or DEFAULT_PG_URL
THROWAWAY_PG = pytest.StashKey["pgserver.ThrowawayServer | None"]()
HEADER = "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon"


# A configure hook rather than a wrapper script: plain `pytest` gets the same server as
# `make test`, and the exported URL reaches every subprocess the tests start.
def pytest_configure(config: pytest.Config) -> None:
    global PG_URL
    try:
        PG_URL, throwaway = pgserver.provide(PG_URL)
    except pgserver.PostgresUnavailable as exc:
        raise pytest.UsageError(str(exc)) from exc
    os.environ["TOKOKITA_TEST_PG_URL"] = PG_URL
    config.stash[THROWAWAY_PG] = throwaway


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # one folder, one marker: `make check` deselects the fault suite with `-m "not faults"`
    for item in items:
        if FAULTS in item.path.parents:
            item.add_marker(pytest.mark.faults)
    # longest first, so that the short modules fill the workers' last minutes (`make test`
    # runs with `--no-loadscope-reorder`, which keeps this order): the real containers, the
    # other modules that start servers, the fault suite, then the rest in collection order
    items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    if CONTAINERS in item.path.parents:
        return 0
    if item.get_closest_marker("e2e") is not None:
        return 1
    if FAULTS in item.path.parents:
        return 2
    return 3


def pytest_unconfigure(config: pytest.Config) -> None:
    throwaway = config.stash.get(THROWAWAY_PG, None)
    if throwaway is not None:
        throwaway.stop()
        pgserver.report(f"stopped and deleted the throw-away server at 127.0.0.1:{throwaway.port}")


# Each module's time on its worker (setup, call and teardown of its tests, a module-scoped
# stack's start and stop included), printed after the run so that a slow part of the suite
# names its modules; TOKOKITA_MODULE_TIMES sets how many (default 15, 0 for none).
MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    MODULE_SECONDS[module] = MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    shown = int(os.environ.get("TOKOKITA_MODULE_TIMES") or "15")
    modules = sorted(MODULE_SECONDS.items(), key=lambda item: -item[1])[:shown]
    if modules:
        terminalreporter.section(f"slowest {len(modules)} test modules (seconds on a worker)")
        for module, seconds in modules:
            terminalreporter.write_line(f"{seconds:8.1f}  {module}")


@dataclass
class Workspace:
    """An isolated project directory: raw/gold/quarantine/state/staging and a warehouse URL."""

    root: Path
    warehouse_url: str

    @property
    def raw(self) -> Path:
        return self.root / "data" / "raw"

    @property
    def gold(self) -> Path:
        return self.root / "data" / "gold"

    @property
    def quarantine(self) -> Path:
        return self.root / "data" / "quarantine"

    @property
    def state_dir(self) -> Path:
        return self.root / "data" / "state"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def runs(self) -> Path:
        return self.state_dir / "runs"

    @property
    def staging(self) -> Path:
        return self.root / "data" / "staging"

    def env(self, **extra: str) -> dict[str, str]:
        """TOKOKITA_* settings pointing into this workspace (absolute paths)."""
        values = {
            "TOKOKITA_RAW_DIR": str(self.raw),
            "TOKOKITA_GOLD_DIR": str(self.gold),
            "TOKOKITA_QUARANTINE_DIR": str(self.quarantine),
            "TOKOKITA_STATE_DIR": str(self.state_dir),
            "TOKOKITA_STAGING_DIR": str(self.staging),
            "TOKOKITA_WAREHOUSE_URL": self.warehouse_url,
        }
        values.update(extra)
        return values

    def settings(self, **overrides):
        """Resolved settings for this workspace (defaults < env mapping < overrides)."""
        from tokokita_etl.settings.sources import load_settings

        return load_settings(env=self.env(), overrides=overrides, cwd=self.root)

    def copy_samples(self, *days: date) -> None:
        """Copy the bundled sample partitions (all three by default) into raw/."""
        self.raw.mkdir(parents=True, exist_ok=True)
        for day in days or SAMPLE_DATES:
            name = f"pesanan_{day.isoformat()}.csv"
            shutil.copyfile(SAMPLE_RAW / name, self.raw / name)

    def write_partition(self, day: date, text: str | bytes) -> Path:
        """Write raw partition `day` (text is written as UTF-8, bytes as is)."""
        self.raw.mkdir(parents=True, exist_ok=True)
        path = self.raw / f"pesanan_{day.isoformat()}.csv"
        data = text.encode("utf-8") if isinstance(text, str) else text
        path.write_bytes(data)
        return path

    def gold_file(self, day: date) -> Path:
        return self.gold / f"summary_harian_{day.isoformat()}.csv"

    def quarantine_file(self, day: date) -> Path:
        return self.quarantine / f"karantina_{day.isoformat()}.csv"

    def manifests(self, day: date | None = None) -> list[Path]:
        pattern = f"run-{day.isoformat()}-*.json" if day else "run-*.json"
        return sorted(self.runs.glob(pattern)) if self.runs.exists() else []

    def leftovers(self) -> list[Path]:
        """Temporary files anywhere in the workspace (there must never be any after a run)."""
        return sorted(p for pattern in ("*.tmp", "*.part") for p in self.root.rglob(pattern)
                      if p.parent != self.raw)


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without any TOKOKITA_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")}
    env.update(extra)
    return env


def run_cli(args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
            module: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real command line (`tokokita-etl ...` or `python -m tokokita_etl ...`)."""
    command = [sys.executable, "-m", "tokokita_etl", *args] if module else [str(CLI), *args]
    return subprocess.run(command, cwd=cwd, env=clean_env(**(env or {})), capture_output=True,
                          text=True, timeout=timeout, check=False)


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows as dicts."""
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def csv_text(rows: list[list[str]], *, header: str = HEADER, line_end: str = "\n") -> str:
    """A raw partition text from field lists, quoted like a normal CSV writer would."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=line_end).writerows(rows)
    return header + line_end + buffer.getvalue()


def in_process_cli(ws: Workspace, monkeypatch, capsys, clock):
    """`cli.main` in-process with only `ws`'s TOKOKITA_* settings and `ws` as the working
    directory: invoke(*args, now=clock, **env) returns (exit code, stdout, stderr)."""
    from tokokita_etl import cli

    def invoke(*args: str, now=clock, **env: str) -> tuple[int, str, str]:
        for name in [k for k in os.environ if k.startswith("TOKOKITA_")]:
            monkeypatch.delenv(name)
        for name, value in ws.env(**env).items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(ws.root)
        code = cli.main(list(args), now=lambda: now)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@dataclass(frozen=True)
class PasswordServer:
    """A throw-away PostgreSQL server that checks passwords (SCRAM) on 127.0.0.1: the test
    server trusts every login, so a wrong password is only refused here."""

    host: str
    port: int
    user: str
    password: str

    def url(self, *, password: str | None = None, database: str = "postgres") -> str:
        """Its SQLAlchemy URL with `password` (default: the right one)."""
        from sqlalchemy.engine import URL

        return URL.create("postgresql+psycopg", username=self.user,
                          password=self.password if password is None else password,
                          host=self.host, port=self.port,
                          database=database).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def password_postgres():
    """A PostgreSQL server that refuses a wrong password (started once per test session)."""
    server = pgserver.ThrowawayServer(pgserver.find_binaries(), superuser="tokokita_etl",
                                      password="right-Pa55-q8Zt")
    server.start()
    try:
        yield PasswordServer("127.0.0.1", server.port, "tokokita_etl", "right-Pa55-q8Zt")
    finally:
        server.stop()
