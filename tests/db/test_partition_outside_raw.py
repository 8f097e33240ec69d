"""A raw partition must be a regular file resolving inside `raw_dir`; the content of a file
that is not CSV never reaches the watermark, the manifest or the log."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from tests.conftest import SAMPLE_DATES, SAMPLE_RAW, Workspace, in_process_cli

D02 = SAMPLE_DATES[0]
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)
SECRET = "root-secret-hash-Zq81"


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def _recorded(ws: Workspace) -> tuple[dict, dict]:
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][D02.isoformat()]
    [manifest] = ws.manifests(D02)
    return entry, json.loads(manifest.read_text(encoding="utf-8"))


def test_link_to_a_file_outside_raw_dir_is_refused_naming_link_and_target(
        sqlite_workspace, call, tmp_path):
    """Bug: a partition that was a symlink to a non-CSV file outside raw_dir was read, and its
    first line was copied into state.json's error and the manifest."""
    outside = tmp_path / "elsewhere" / "shadow"
    outside.parent.mkdir()
    outside.write_text(f"{SECRET}:x:0:0\nsecond line\n", encoding="utf-8")
    sqlite_workspace.raw.mkdir(parents=True)
    link = sqlite_workspace.raw / f"pesanan_{D02.isoformat()}.csv"
    link.symlink_to(outside)

    code, out, err = call("run", "--date", D02.isoformat())
    assert code == 1
    entry, manifest = _recorded(sqlite_workspace)
    assert entry["failed_stage"] == "extract"
    assert str(link) in entry["error"] and str(outside) in entry["error"]
    assert "outside the raw folder" in entry["error"]
    for text in (json.dumps(entry), json.dumps(manifest), out, err):
        assert SECRET not in text
    assert not sqlite_workspace.gold_file(D02).exists()


def test_link_inside_raw_dir_is_read(sqlite_workspace, call):
    """A link that stays inside raw_dir (an archive folder beside the partitions) is fine."""
    archive = sqlite_workspace.raw / "archive"
    archive.mkdir(parents=True)
    name = f"pesanan_{D02.isoformat()}.csv"
    (archive / name).write_bytes((SAMPLE_RAW / name).read_bytes())
    (sqlite_workspace.raw / name).symlink_to(archive / name)
    assert call("run", "--date", D02.isoformat())[0] == 0


def test_binary_file_content_is_not_quoted_in_the_error(sqlite_workspace, call):
    """Bug: the first line of a non-CSV file (valid UTF-8 with control characters) was quoted
    as the 'found' header in the error, so binary content reached the watermark."""
    sqlite_workspace.write_partition(
        D02, b"\x7fELF\x02\x01\x01" + SECRET.encode() + b"\x00\x00\x03\x00>\x00\n\x01\x02\n")
    code, _, err = call("run", "--date", D02.isoformat())
    assert code == 1
    entry, manifest = _recorded(sqlite_workspace)
    assert "missing required column" in entry["error"]
    assert "not shown" in entry["error"]
    for text in (json.dumps(entry), json.dumps(manifest), err):
        assert SECRET not in text and "ELF" not in text


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_partition_that_is_not_a_regular_file_is_refused_without_reading(
        sqlite_workspace, call, kind):
    """Bug: a folder gave a traceback-like IsADirectoryError and a FIFO blocked the run."""
    sqlite_workspace.raw.mkdir(parents=True)
    path = sqlite_workspace.raw / f"pesanan_{D02.isoformat()}.csv"
    if kind == "folder":
        path.mkdir()
        (path / "x").write_text("x")
    else:
        os.mkfifo(path)
    code, _, _ = call("run", "--date", D02.isoformat())
    assert code == 1
    entry, manifest = _recorded(sqlite_workspace)
    assert (entry["status"], entry["failed_stage"]) == ("failed", "extract")
    assert "not a regular file" in entry["error"] and "not a regular file" in manifest["error"]
