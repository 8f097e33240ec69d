"""A hand-edited `state.json` whose fields have the wrong type stops every command with exit
code 2 and a StateError naming the file, the date and the field: never a traceback, never an
attempt."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli

D02 = SAMPLE_DATES[0]
CLOCK = datetime(2026, 11, 4, 19, 30, tzinfo=UTC)
GOOD_ENTRY = {"attempt": 1, "status": "failed", "updated_at": "2026-11-03T19:30:00+00:00",
              "error": "boom", "failed_stage": "load"}

HOSTILE = [
    ("rows", "8"),
    ("rows", None),
    ("rows", {"fact": "8"}),
    ("status", {"value": "success"}),
    ("status", "done"),
    ("attempt", True),
    ("attempt", 1.5),
    ("attempt", "2"),
    ("attempt", -1),
    ("failures", "1"),
    ("failures", -2),
    ("failures", True),
    ("failures", None),
    ("checksums", ["abc"]),
    ("checksums", "abc"),
    ("warnings", "low volume"),
    ("error", 42),
    ("resets", "yesterday"),
    ("resets", [{"at": 1}]),
    ("resets", [{"at": "2026-11-03T19:30:00+00:00", "by": "cli", "previous_failures": "3"}]),
]


@pytest.fixture
def call(sqlite_workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(sqlite_workspace, monkeypatch, capsys, CLOCK)


def _write_state(ws: Workspace, field: str, value) -> str:
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    body = {"pipeline": "orders", "runs": {D02.isoformat(): {**GOOD_ENTRY,
                                                                          field: value}}}
    text = json.dumps(body, indent=2)
    ws.state_file.write_text(text, encoding="utf-8")
    return text


@pytest.mark.parametrize(("field", "value"), HOSTILE,
                         ids=[f"{f}={json.dumps(v)}" for f, v in HOSTILE])
def test_wrongly_typed_watermark_field_is_exit_2_naming_file_date_and_field(
        sqlite_workspace, call, field, value):
    """Bug: a watermark field of the wrong type (`rows` a string or null, `status` an object,
    `attempt` a bool/float/string, `resets` a string, `checksums` not an object) crashed a run
    with a traceback, or was counted on as if it were valid."""
    sqlite_workspace.copy_samples(D02)
    text = _write_state(sqlite_workspace, field, value)
    for args in (["run", "--date", D02.isoformat()],
                 ["run", "--date", D02.isoformat(), "--reset-attempts"],
                 ["run", "--date", D02.isoformat(), "--force"],
                 ["status", "--now", "2026-11-05T02:30"],
                 ["due", "--now", "2026-11-05T02:30"]):
        code, out, err = call(*args)
        assert code == 2, (args, out, err)
        assert "Traceback" not in err
        assert str(sqlite_workspace.state_file) in err
        assert D02.isoformat() in err and repr(field) in err, err
    # nothing was tried: no attempt, no manifest, no gold, the file untouched
    assert sqlite_workspace.state_file.read_text(encoding="utf-8") == text
    assert not sqlite_workspace.gold_file(D02).exists()
    assert sqlite_workspace.manifests() == []


def test_well_typed_watermark_still_runs(sqlite_workspace, call):
    """The checks accept every field a real run writes (a success after a reset)."""
    sqlite_workspace.copy_samples(D02)
    _write_state(sqlite_workspace, "attempt", 3)
    assert call("run", "--date", D02.isoformat(), "--reset-attempts")[0] == 0
    assert call("run", "--date", D02.isoformat(), "--force")[0] == 0
    assert call("status", "--now", "2026-11-05T02:30")[0] == 0
