"""Fault injection: a full disk under the gold, quarantine, staging and state folders.

Each case mounts a small tmpfs of its own over one folder of a workspace whose date D has
succeeded once, copies the folder's files onto it, fills it up (or leaves a little room, so
that the run gets part of the way) and runs `tokokita-etl run --date D --force` as a real
process. Mounting needs root (CAP_SYS_ADMIN); without it the module is skipped, and
tests/db/test_unwritable_state.py still injects ENOSPC into the state folder's writes.

After the failure, on both backends:

- the run exits 1 (2 when the state folder is full: nothing can be recorded, so no stage
  runs) with one `[error]` line that names the file it could not write and says
  `No space left on device`, and no traceback;
- the watermark records one failed attempt at the stage that hit the full folder, no intent
  and no claim are left (a full state folder records nothing and leaves D as it was);
- the warehouse holds D's rows as the clean run left them, every file under its final name
  in the gold and quarantine folders has the clean run's bytes, and no temporary file is
  left behind on the full folder;
- once there is room again, a plain run (or a forced one when D is still done) succeeds
  with the clean run's checksums and gold file.

Found by this module: a full disk's error named no file (`OSError(28, 'No space left on
device')`; the OS reports a failed write without a name) and DuckDB's full staging folder
was an unexpected error rather than the transient ENOSPC it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devtools.samples import generate_partition
from tests.conftest import Workspace, run_cli
from tests.faults.conftest import LONG, final_files, warehouse_rows
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, IN_PROGRESS, SUCCESS

DAY = date(2026, 11, 10)
ROWS = 100_000 if LONG else 20_000
PAGE = 4096
FILLER = ".filler"


@dataclass(frozen=True)
class Case:
    folder: str  # a Workspace attribute
    #: bytes left free on the full folder (0: nothing fits)
    free: int
    #: the stages that may meet the full folder first
    stages: tuple[str, ...]
    exit_code: int = 1


CASES = {
    "gold": Case("gold", 0, ("validate", "publish_gold")),
    "quarantine": Case("quarantine", 0, ("load",)),
    "staging_from_the_start": Case("staging", 0, ("extract",)),
    # room for the extracted rows but not for everything transform writes after them
    "staging_in_transform": Case("staging", 0, ("transform",)),
    "state": Case("state_dir", 0, (), exit_code=2),
    # room for the gate's check (a file of state.json's size) and the claim, not for the
    # state.json that holds the run's intent (its free room is measured on the folder)
    "state_room_for_the_claim_only": Case("state_dir", 0, (), exit_code=2),
}


def _mount_tmpfs(path: Path, size: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")


def _fill(path: Path, free: int) -> None:
    """Write a filler file on `path`'s filesystem until it is full, then give back `free`
    bytes (rounded up to whole pages)."""
    filler = path / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * PAGE)
    except OSError:
        pass
    finally:
        os.close(fd)
    if free:
        pages = -(-free // PAGE)
        os.truncate(filler, max(0, filler.stat().st_size - pages * PAGE))


@contextlib.contextmanager
def full_folder(path: Path, free: int) -> Iterator[None]:
    """`path` on a tmpfs of its own holding a copy of its files and `free` bytes of room;
    the folder's own files are back once the block ends (the tmpfs is unmounted)."""
    size = sum(p.stat().st_size + PAGE for p in path.rglob("*") if p.is_file())
    size += 64 * PAGE + free
    saved = path.with_name(path.name + ".saved")
    shutil.copytree(path, saved) if path.exists() else saved.mkdir()
    _mount_tmpfs(path, size)
    try:
        shutil.copytree(saved, path, dirs_exist_ok=True)
        _fill(path, free)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)
        shutil.rmtree(saved)


def _run(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    return run_cli(["run", "--date", DAY.isoformat(), *args], cwd=ws.root, env=ws.env(),
                   timeout=600)


def _entry(ws: Workspace) -> dict:
    return StateStore(ws.state_file, "orders").read().entry(DAY)


def _leftovers(folder: Path) -> list[str]:
    """Temporary files (dot names) left on `folder`, the filler aside."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*")
                  if p.is_file() and p.name != FILLER and not p.name.endswith(".lock"))


def _transform_room(ws: Workspace) -> int:
    """Bytes that hold the extracted rows of D and little more: measured on a run of its
    own (staging is dropped after a success, so it is run with the stages kept)."""
    from tokokita_etl.runner.staging import run_stage

    settings = ws.settings(staging_dir=ws.root / "measure")
    run_stage(ORDERS, settings, DAY, "extract")
    staged = settings.staging_path(DAY)
    used = sum(p.stat().st_size + PAGE for p in staged.rglob("*") if p.is_file())
    shutil.rmtree(ws.root / "measure")
    return used + 16 * PAGE


def _state_file_room(ws: Workspace) -> int:
    """The pages of state.json: the gate's check takes as many (a temporary file of its
    size, then removed) and the claim takes one page, so the state.json with the intent (the
    old one is there until its rename) no longer fits."""
    return -(-ws.state_file.stat().st_size // PAGE) * PAGE


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_full_folder_fails_the_run_cleanly_and_loses_nothing(workspace, case):
    """Regression (state_room_for_the_claim_only): with room in the state folder for the
    claim but not for state.json, the gate's intent record raised `OSError: [Errno 28] No
    space left on device` with a traceback (exit 1) and left the claim behind."""
    ws = workspace
    spec = CASES[case]
    generate_partition(ws.raw / f"pesanan_{DAY.isoformat()}.csv", DAY, ROWS, seed=5)
    done = _run(ws)
    assert done.returncode == 0, done.stdout + done.stderr
    clean_entry, clean_files = _entry(ws), final_files(ws)
    clean_rows = warehouse_rows(ws, DAY)
    folder = getattr(ws, spec.folder)
    free = _transform_room(ws) if case == "staging_in_transform" else \
        _state_file_room(ws) if case == "state_room_for_the_claim_only" else spec.free

    with full_folder(folder, free):
        failed = _run(ws, "--force")
        assert failed.returncode == spec.exit_code, failed.stdout + failed.stderr
        assert "Traceback" not in failed.stderr
        [error] = [line for line in failed.stderr.splitlines()
                   if line.startswith(("[error]", "error:"))]
        assert "No space left on device" in error and str(folder) in error, error
        entry = _entry(ws) if spec.folder != "state_dir" else None
        assert _leftovers(folder) == []
        if spec.folder == "staging":
            for staged in folder.rglob("*.parquet"):  # a final name holds a whole file
                pq.read_metadata(staged)
    if entry is not None:
        assert (entry["status"], entry["attempt"]) == (FAILED, 2)
        assert entry["failed_stage"] in spec.stages, entry
        assert "No space left on device" in entry["error"] and str(folder) in entry["error"]
        assert IN_PROGRESS not in entry
    else:  # the state on disk is the one before the run: D is still done
        assert _entry(ws) == clean_entry and clean_entry["status"] == SUCCESS
    assert not list((ws.state_dir / "claims").glob("*.json"))
    assert warehouse_rows(ws, DAY) == clean_rows
    assert final_files(ws) == clean_files

    again = _run(ws, *(("--force",) if entry is None else ()))
    assert again.returncode == 0, again.stdout + again.stderr
    assert _entry(ws)["checksums"] == clean_entry["checksums"]
    assert final_files(ws) == clean_files
    assert warehouse_rows(ws, DAY) == clean_rows
    assert "status=success" in again.stdout


def test_a_full_staging_folder_in_transform_is_the_transient_no_space_error(workspace):
    """Regression: DuckDB's write error on a full staging folder was an unexpected error
    (`IOException`), not the transient ENOSPC that Airflow retries while attempts are left."""
    from tokokita_etl.runner.policy import ErrorKind, classify
    from tokokita_etl.runner.staging import run_stage

    ws = workspace
    generate_partition(ws.raw / f"pesanan_{DAY.isoformat()}.csv", DAY, ROWS, seed=5)
    ws.staging.mkdir(parents=True, exist_ok=True)
    room = _transform_room(ws)
    with full_folder(ws.staging, room):
        run_stage(ORDERS, ws.settings(), DAY, "extract")
        with pytest.raises(OSError) as raised:
            run_stage(ORDERS, ws.settings(), DAY, "transform")
    assert raised.value.errno == errno.ENOSPC
    assert str(ws.staging) in str(raised.value)
    assert classify(raised.value) is ErrorKind.TRANSIENT
