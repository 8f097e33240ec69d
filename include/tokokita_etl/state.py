"""The JSON watermark (`state.json`): one entry per partition date, locked and atomic."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
import tempfile
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from tokokita_etl.config import Settings
from tokokita_etl.errors import StateError
from tokokita_etl.files import atomic_writer, locked, write_text_atomic

SUCCESS = "success"
FAILED = "failed"
#: fields that describe one run's outcome: a new success or failure replaces them all
RUN_OUTCOME_FIELDS = ("error", "failed_stage", "warnings")
#: the intent record of a run that is changing the date's warehouse rows and gold file:
#: written by the gate before the first stage, removed by the run's success or failure record
#: (docs/data-contract.md, "Watermark"); while it is there the entry is not a success
IN_PROGRESS = "in_progress"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return f"{_json_kind(value)} {text if len(text) <= 60 else text[:57] + '...'}"


def _reset_problem(value: Any) -> str | None:
    if not isinstance(value, list):
        return "must be an array of reset objects"
    for reset in value:
        if not isinstance(reset, dict) or not isinstance(reset.get("at", ""), str) \
                or not isinstance(reset.get("by", ""), str) \
                or not _is_count(reset.get("previous_attempt", 0)):
            return ("must be an array of objects with 'at' and 'by' (strings) and "
                    "'previous_attempt' (a count)")
    return None


#: what each known field of an entry must be (unknown fields are kept as they are); checked
#: when the file is read, so a hand-edited watermark fails every run with a StateError naming
#: the field instead of a traceback deep inside a stage
_FIELD_RULES: dict[str, Callable[[Any], str | None]] = {
    "attempt": lambda v: None if _is_count(v) else "must be a count (an integer >= 0)",
    "status": lambda v: None if v in (SUCCESS, FAILED) else f"must be {SUCCESS!r} or {FAILED!r}",
    "rows": lambda v: None if isinstance(v, dict) and all(_is_count(n) for n in v.values())
    else "must be an object of counts (integers >= 0)",
    "checksums": lambda v: None if isinstance(v, dict)
    and all(isinstance(c, str) for c in v.values()) else "must be an object of strings",
    "warnings": lambda v: None if isinstance(v, list) and all(isinstance(w, str) for w in v)
    else "must be an array of strings",
    "resets": _reset_problem,
    **{name: (lambda v: None if isinstance(v, str) else "must be a string")
       for name in ("updated_at", "gold", "error", "failed_stage")},
    **{name: (lambda v: None if isinstance(v, str | int | float) and not isinstance(v, bool)
              else "must be an amount (a string such as \"12500.00\")")
       for name in ("bruto", "bersih")},
}


def cli_holder_finished(owner: str) -> bool | None:
    """Whether a command-line run `owner` (`cli:host:pid:start`) on this host has exited
    (None: not a command-line run of this host, so not ours to tell)."""
    parts = owner.split(":", 3)
    if len(parts) < 3 or parts[0] != "cli" or parts[1] != socket.gethostname():
        return None
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, PermissionError):
        return None
    return False


def _intent_problem(value: Any) -> str | None:
    if not isinstance(value, dict) or any(
            not isinstance(value.get(name), str) for name in ("run", "stage", "since")):
        return "must be an object with 'run', 'stage' and 'since' (strings)"
    return None


_FIELD_RULES[IN_PROGRESS] = _intent_problem


def _field_problem(name: str, value: Any) -> str | None:
    rule = _FIELD_RULES.get(name)
    return rule(value) if rule else None


class Watermark:
    """A read-only snapshot of the watermark document."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def runs(self) -> dict[str, dict[str, Any]]:
        """Entries by ISO date."""
        return self.data["runs"]

    def entry(self, day: date | str) -> dict[str, Any]:
        """The entry for `day` (empty when unknown)."""
        return self.runs.get(str(day), {})

    def has_success(self, day: date | str) -> bool:
        """Whether `day`'s last recorded outcome is a success that still describes the
        warehouse: not when an intent record of a run known to have ended stands beside it
        (that run may have replaced the rows: the date needs a re-run). A live run's intent
        (a forced re-run of a done date, whose own stages decide with this) keeps the success
        until the run records its outcome; the gate reconciles the intents of runs that are
        gone whatever their kind (`runs.reconcile_intent`)."""
        entry = self.entry(day)
        if entry.get("status") != SUCCESS:
            return False
        intent = entry.get(IN_PROGRESS)
        return intent is None or cli_holder_finished(intent["run"]) is not True

    def intent(self, day: date | str) -> dict[str, str] | None:
        """The intent record (`run`, `stage`, `since`) of a run that has not recorded its
        outcome for `day`, or None."""
        return self.entry(day).get(IN_PROGRESS)

    def attempts(self, day: date | str) -> int:
        """Recorded attempts for `day` (successes and failures; skips do not count)."""
        return int(self.entry(day).get("attempt", 0))


class StateStore:
    """The watermark file with an exclusive lock around every read-modify-write."""

    def __init__(self, path: Path, pipeline: str = "etl-pesanan-tokokita") -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.pipeline = pipeline

    def read(self) -> Watermark:
        """Load the current watermark (an empty one when the file does not exist yet)."""
        return Watermark(self._load())

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.lock_path)

    def _load(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"pipeline": self.pipeline, "runs": {}}
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(f"{self.path}: cannot read the watermark: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(
                f"{self.path}: corrupt watermark (invalid JSON at line {exc.lineno}, "
                f"column {exc.colno}: {exc.msg}); fix or restore it by hand, "
                "it is never reset automatically"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
            raise StateError(f"{self.path}: corrupt watermark: expected an object with 'runs'")
        for key, entry in data["runs"].items():
            try:
                date.fromisoformat(key)
            except ValueError:
                raise StateError(f"{self.path}: corrupt watermark: bad date key {key!r}") from None
            if not isinstance(entry, dict):
                raise StateError(f"{self.path}: corrupt watermark: bad entry for {key}: it "
                                 f"must be an object, got {_json_kind(entry)}")
            for name, value in entry.items():
                problem = _field_problem(name, value)
                if problem:
                    raise StateError(
                        f"{self.path}: corrupt watermark: bad entry for {key}: field {name!r} {problem}, got "
                        f"{_shown(value)}; fix or restore it by hand, it is never reset "
                        "automatically")
        return data

    def check_writable(self) -> None:
        """StateError unless the watermark can be written now: an existing file is rewritten
        with the same bytes (temporary file, fsync, rename: what `update` does), a missing
        one is probed with a temporary sibling. Run before any stage, so a full or read-only
        state folder stops the run before anything is loaded or published."""
        try:
            with self._locked():
                try:
                    current = self.path.read_bytes()
                except FileNotFoundError:
                    current = None
                if current is not None:
                    with atomic_writer(self.path, mode="wb") as handle:
                        handle.write(current)
                else:
                    fd, probe = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                                 dir=self.path.parent)
                    try:
                        os.write(fd, json.dumps({"pipeline": self.pipeline, "runs": {}})
                                 .encode())
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                        os.unlink(probe)
        except OSError as exc:
            raise StateError(
                f"{self.path}: the watermark cannot be written ({exc.strerror or exc}); "
                "nothing was run: free space or fix the permissions, then run again") from None

    def update(self, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to the document under the lock and save it atomically."""
        with self._locked():
            data = self._load()
            before = copy.deepcopy(data)
            result = mutate(data)
            if data != before:
                write_text_atomic(
                    self.path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
                    + "\n"
                )
            return result

    def record(self, day: date, status: str, payload: dict[str, Any], now: datetime) -> int:
        """Record a success or failure for `day`: attempt += 1. Returns the new attempt."""

        def mutate(data: dict[str, Any]) -> int:
            entry = data["runs"].setdefault(day.isoformat(), {})
            entry["attempt"] = int(entry.get("attempt", 0)) + 1
            entry["status"] = status
            entry["updated_at"] = now.isoformat(timespec="seconds")
            for key in (*RUN_OUTCOME_FIELDS, IN_PROGRESS):
                entry.pop(key, None)
            for key, value in payload.items():
                if key != "attempt" and not (key == "warnings" and not value):
                    entry[key] = value
            data["runs"] = dict(sorted(data["runs"].items()))
            return entry["attempt"]

        return self.update(mutate)

    def begin(self, day: date, run: str, stage: str, now: datetime) -> None:
        """Write `run`'s intent record for `day` before its first stage changes anything."""

        def mutate(data: dict[str, Any]) -> None:
            entry = data["runs"].setdefault(day.isoformat(), {})
            entry[IN_PROGRESS] = {"run": run, "stage": stage,
                                  "since": now.isoformat(timespec="seconds")}
            data["runs"] = dict(sorted(data["runs"].items()))

        self.update(mutate)

    def clear_intent(self, day: date) -> None:
        """Drop `day`'s intent record (its run ended before changing the warehouse)."""

        def mutate(data: dict[str, Any]) -> None:
            entry = data["runs"].get(day.isoformat())
            if entry is not None:
                entry.pop(IN_PROGRESS, None)
                if not entry:
                    del data["runs"][day.isoformat()]

        self.update(mutate)

    def reset_attempts(self, day: date, *, now: datetime, by: str) -> int:
        """Set `day`'s attempts to 0, recording when and by whom. Returns the previous count."""

        def mutate(data: dict[str, Any]) -> int:
            entry = data["runs"].setdefault(day.isoformat(), {})
            previous = int(entry.get("attempt", 0))
            entry["attempt"] = 0
            entry.setdefault("resets", []).append(
                {"at": now.isoformat(timespec="seconds"), "by": by, "previous_attempt": previous}
            )
            entry["updated_at"] = now.isoformat(timespec="seconds")
            data["runs"] = dict(sorted(data["runs"].items()))
            return previous

        return self.update(mutate)


def state_store(settings: Settings) -> StateStore:
    """The watermark store of these settings."""
    return StateStore(settings.state_file, settings.pipeline)
