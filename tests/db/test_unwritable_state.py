"""A state folder that cannot take the watermark or the manifests stops the run before any
stage: a StateError (exit 2, not an attempt), nothing loaded or published."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli

D02, D03 = SAMPLE_DATES[:2]
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def _fact_rows(ws: Workspace, day) -> int:
    with sqlite3.connect(ws.warehouse_url.removeprefix("sqlite:///")) as conn:
        return conn.execute("SELECT count(*) FROM fact_pesanan WHERE order_date = ?",
                            (day.isoformat(),)).fetchone()[0]


def test_full_state_disk_stops_the_run_before_anything_is_loaded_or_published(
        sqlite_workspace, call, monkeypatch):
    """Bug: with room for the claim but not for state.json, the gold file was published and
    the fact rows loaded while the watermark recorded nothing."""
    ws = sqlite_workspace
    ws.copy_samples(D02, D03)
    assert call("run", "--date", D02.isoformat())[0] == 0
    before = ws.state_file.read_bytes()
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst) == ws.state_file:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    code, _, err = call("run", "--date", D03.isoformat())
    assert code == 2, err
    assert str(ws.state_file) in err and "No space left on device" in err
    assert "Traceback" not in err
    assert not ws.gold_file(D03).exists()
    assert _fact_rows(ws, D03) == 0
    assert ws.state_file.read_bytes() == before
    assert list((ws.state_dir / "claims").glob("*.json")) == []
    assert ws.leftovers() == []

    monkeypatch.setattr(os, "replace", real_replace)  # room again: the date runs
    assert call("run", "--date", D03.isoformat())[0] == 0
    assert json.loads(ws.state_file.read_text())["runs"][D03.isoformat()]["attempt"] == 1


@pytest.mark.parametrize("first_run", [False, True])
def test_runs_folder_that_is_a_file_is_exit_2_before_any_stage(sqlite_workspace, call,
                                                               first_run):
    """Bug: a `runs` that was a file (or an unwritable folder) gave a traceback and an
    attempt recorded after the gold file was published."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    ws.state_dir.mkdir(parents=True)
    if first_run:
        ws.state_file.write_text('{"pipeline": "orders", "runs": {}}\n')
    ws.runs.write_text("not a folder\n")
    before = ws.state_file.read_bytes() if first_run else None
    code, _, err = call("run", "--date", D02.isoformat())
    assert code == 2, err
    assert str(ws.runs) in err and "Traceback" not in err
    assert not ws.gold_file(D02).exists()
    assert (ws.state_file.read_bytes() if ws.state_file.exists() else None) == before
    assert list((ws.state_dir / "claims").glob("*.json")) == []


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` unwritable for this process: a read-only bind mount of itself for root (root
    writes into any folder whatever its mode), its mode otherwise."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_read_only_runs_folder_is_exit_2_before_any_stage(sqlite_workspace, call):
    """Bug: an unwritable manifests folder failed the run only after the gold was published."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    ws.runs.mkdir(parents=True)
    with read_only(ws.runs):
        code, _, err = call("run", "--date", D02.isoformat())
    assert code == 2 and str(ws.runs) in err, err
    assert "Traceback" not in err
    assert not ws.gold_file(D02).exists()
    assert list((ws.state_dir / "claims").glob("*.json")) == []
