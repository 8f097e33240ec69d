"""The real-container test's engine: started once for the module, stopped and the host restored
afterwards (also when a test fails); skipped with the reason only where no engine can start."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.containers.engine import CONTAINER_REPORT, DockerEngine, EngineUnavailable


@pytest.fixture(scope="session")
def engine():
    """A running Docker engine of this test's own, with the stand-in images built."""
    workdir = Path(tempfile.mkdtemp(prefix="tokokita-docker-"))
    engine = DockerEngine(workdir)
    try:
        engine.start()
    except EngineUnavailable as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip(f"no Docker engine can start here: {exc}")
    try:
        started = time.monotonic()
        took = engine.build_standins()
        CONTAINER_REPORT["standin_build_s"] = {k: round(v, 1) for k, v in took.items()}
        CONTAINER_REPORT["standins_total_s"] = round(time.monotonic() - started, 1)
        yield engine
    finally:
        differs = engine.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not differs, "the host was not restored after the engine stopped: " + \
            "; ".join(differs)


def pytest_terminal_summary(terminalreporter):
    if CONTAINER_REPORT:
        terminalreporter.section("real-container stack")
        for key, value in CONTAINER_REPORT.items():
            terminalreporter.write_line(f"{key}: {value}")
