"""Gold, quarantine and state files are created as a plain open() creates a file: mode 0666
less the umask, so another account can read them under the usual umask 022 (0644).

Regression: they were written through `mkstemp` and kept its 0600, in every way of running.
The command line and the embedded stack (`make demo`) are checked here; the compose stack in
containers in tests/containers/test_compose_in_containers.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from stack import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="reads as another account (uid 65534)")

NOBODY = 65534


@pytest.fixture
def open_dir():
    """A folder every account may enter (pytest's own temporary folders are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="tokokita-modes-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def with_umask(umask: int, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOKOKITA_", "AIRFLOW", "_AIRFLOW"))}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False,
                          preexec_fn=lambda: os.umask(umask), **kwargs)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def readable_by_nobody(path: Path) -> bool:
    done = subprocess.run(["cat", str(path)], user=NOBODY, group=NOBODY, extra_groups=[],
                          capture_output=True, timeout=30, check=False)
    return done.returncode == 0 and done.stdout == path.read_bytes()


def cli_run(root: Path, umask: int) -> Path:
    (root / "data" / "raw").mkdir(parents=True)
    shutil.copy(REPO / "data" / "raw" / "pesanan_2026-11-03.csv", root / "data" / "raw")
    done = with_umask(umask, [sys.executable, "-m", "tokokita_etl", "run", "--date",
                              "2026-11-03"], cwd=root, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "data"


def test_command_line_outputs_follow_the_umask_and_another_user_reads_the_gold(open_dir):
    data = cli_run(open_dir, 0o022)
    outputs = [data / "gold" / "summary_harian_2026-11-03.csv",
               data / "quarantine" / "karantina_2026-11-03.csv", data / "state" / "state.json",
               *(data / "state" / "runs").glob("*.json")]
    assert len(outputs) > 3  # a run manifest too
    assert {p.name: oct(mode(p)) for p in outputs} == {p.name: "0o644" for p in outputs}
    assert readable_by_nobody(outputs[0])
    assert readable_by_nobody(outputs[1])


def test_a_stricter_umask_keeps_the_gold_private(open_dir):
    data = cli_run(open_dir, 0o077)
    gold = data / "gold" / "summary_harian_2026-11-03.csv"
    assert mode(gold) == 0o600
    assert not readable_by_nobody(gold)


@pytest.mark.airflow
@pytest.mark.e2e  # `stack demo` starts a running Airflow stack
def test_embedded_stack_gold_files_are_readable_by_another_user(open_dir):
    for rel in ("dags", "plugins", "include", "config", "stack", "data/raw",
                "docker-compose.yaml", "pyproject.toml"):
        source, target = REPO / rel, open_dir / rel
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, target)
    done = with_umask(0o022, [sys.executable, "-m", "stack", "demo"], cwd=open_dir, timeout=420)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    gold = sorted((open_dir / "data" / "gold").glob("summary_harian_*.csv"))
    assert [p.name for p in gold] == [f"summary_harian_2026-11-0{d}.csv" for d in (2, 3, 4)]
    for path in gold:
        assert mode(path) == 0o644, (path.name, oct(mode(path)))
        assert readable_by_nobody(path), path
    quarantine = sorted((open_dir / "data" / "quarantine").glob("*.csv"))
    assert quarantine and all(mode(p) == 0o644 for p in quarantine)
