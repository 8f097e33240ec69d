"""`tokokita-etl run ... | head -1`: a reader that closes stdout early must not fail the run
(real processes, real pipes)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date, timedelta

import pytest

from tests.conftest import CLI, SAMPLE_DATES, Workspace, clean_env

D02 = SAMPLE_DATES[0]


def _assert_succeeded(ws: Workspace, day: date, stderr: str) -> None:
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][day.isoformat()]
    assert (entry["status"], entry["attempt"]) == ("success", 1)
    assert ws.gold_file(day).exists()
    [manifest] = ws.manifests(day)
    assert json.loads(manifest.read_text(encoding="utf-8"))["status"] == "success"


def test_run_whose_stdout_reader_has_gone_still_succeeds_without_an_attempt_failure(
        sqlite_workspace):
    """Bug: with stdout's reader gone, the run's own progress logging raised BrokenPipeError,
    so the run failed and recorded a failed attempt."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line: every write is EPIPE
    try:
        proc = subprocess.run([str(CLI), "run", "--date", D02.isoformat()], cwd=ws.root,
                              env=clean_env(**ws.env()), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    _assert_succeeded(ws, D02, proc.stderr)


def test_run_piped_into_head_one_succeeds(sqlite_workspace):
    """Bug: `tokokita-etl run ... | head -1` failed the run and recorded an attempt."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    proc = subprocess.run(
        ["bash", "-c", f'set -o pipefail; "{CLI}" run --date {D02.isoformat()} | head -1'],
        cwd=ws.root, env=clean_env(**ws.env()), capture_output=True, text=True, timeout=120,
        check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 1
    _assert_succeeded(ws, D02, proc.stderr)


def _piped_into_head(ws: Workspace, args: str, lines: int = 3) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f'set -o pipefail; "{CLI}" {args} | head -{lines}'],
        cwd=ws.root, env=clean_env(**ws.env()), capture_output=True, text=True, timeout=120,
        check=False)


def test_every_command_piped_into_head_ends_without_a_broken_pipe_traceback(sqlite_workspace):
    """Bug: `tokokita-etl status | head -3` ended with a BrokenPipeError traceback (exit 1);
    `run` had been fixed for it, the other commands had not."""
    ws = sqlite_workspace
    # a watermark of 3,000 failed dates: outputs far longer than a pipe's buffer (64 KiB), so
    # the writer is still writing when `head` has gone
    first = date(2015, 1, 1)
    runs = {(first + timedelta(days=n)).isoformat(): {
        "attempt": 1, "failures": 1, "status": "failed", "updated_at": "2026-11-03T19:30:00+00:00",
        "error": "extract: missing column 'kota'", "failed_stage": "extract"}
        for n in range(3000)}
    ws.state_dir.mkdir(parents=True)
    ws.state_file.write_text(json.dumps({"pipeline": "orders", "runs": runs}),
                             encoding="utf-8")
    commands = {
        "status --now 2026-11-05T03:00": "date",
        "status --now 2026-11-05T03:00 --json": "[",
        "state export": "{",
    }
    for args, start in commands.items():
        proc = _piped_into_head(ws, args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, \
            (args, proc.stderr)
        assert proc.stdout.startswith(start), (args, proc.stdout)
        assert len(proc.stdout.splitlines()) == 3


@pytest.mark.parametrize("args", [
    ["status", "--now", "2026-11-05T03:00"],
    ["status", "--now", "2026-11-05T03:00", "--json"],
    ["due", "--now", "2026-11-05T03:00"],
    ["state", "export"],
    ["cron", "30 2 * * *"],
], ids=" ".join)
def test_a_command_whose_stdout_reader_has_gone_before_the_first_line_exits_0_quietly(
        sqlite_workspace, args):
    """Bug: with stdout's reader gone, `status` (and every command but `run`) raised
    BrokenPipeError: a traceback and exit 1."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write is EPIPE
    try:
        proc = subprocess.run([str(CLI), *args], cwd=ws.root,
                              env=clean_env(**ws.env()), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def _run_with(ws: Workspace, day: date, **streams) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "run", "--date", day.isoformat()], cwd=ws.root,
                          env=clean_env(**ws.env()), text=True, timeout=120, check=False,
                          **streams)


def test_run_whose_stdout_is_a_full_disk_succeeds_and_says_so_on_stderr(sqlite_workspace):
    """Bug: with stdout on a full disk (a log file, `>/dev/full`) the first progress line
    raised ENOSPC inside the stages: a successful run was recorded as a failed attempt in
    extract, or, failing at the summary line, as a second failed manifest after its success."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    with open("/dev/full", "w") as full:
        proc = _run_with(ws, D02, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    assert "stdout failed ([Errno 28] No space left on device)" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][D02.isoformat()]
    assert (entry["status"], entry["attempt"]) == ("success", 1)
    assert ws.gold_file(D02).exists()
    [manifest] = ws.manifests(D02)
    assert json.loads(manifest.read_text(encoding="utf-8"))["status"] == "success"


def test_failing_run_whose_stderr_is_a_full_disk_still_records_its_failure(sqlite_workspace):
    """Bug: with stderr on a full disk, a run's `[error]` line raised ENOSPC in the error
    handler: no failure and no manifest were recorded, and the date was left `needs re-run`."""
    ws = sqlite_workspace
    ws.write_partition(D02, "x\n")  # no required column: extract fails
    with open("/dev/full", "w") as full:
        proc = _run_with(ws, D02, stdout=subprocess.DEVNULL, stderr=full)
    assert proc.returncode == 1
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][D02.isoformat()]
    assert (entry["status"], entry["failures"], entry["failed_stage"]) == ("failed", 1, "extract")
    [manifest] = ws.manifests(D02)
    assert json.loads(manifest.read_text(encoding="utf-8"))["status"] == "failed"


def test_run_started_with_stdout_closed_succeeds_with_exit_code_0(sqlite_workspace):
    """Bug: `tokokita-etl run ... >&-` succeeded but ended with exit 1 and an AttributeError
    traceback from flushing a stdout that Python had never opened."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    proc = subprocess.run(
        ["bash", "-c", f'"{CLI}" run --date {D02.isoformat()} >&-'], cwd=ws.root,
        env=clean_env(**ws.env()), stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    _assert_succeeded(ws, D02, proc.stderr)
