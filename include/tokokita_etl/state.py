"""The run state: the watermark (one entry per partition date), the per-date claims and the
run manifests, in one of two stores with the same fields and rules.

- `StateStore`: files under `state_dir` (`state.json`, `claims/D.json`, `runs/*.json`), each
  read-modify-write under an exclusive `flock`, each write atomic. The default, for one
  machine (or workers sharing one POSIX folder).
- `tokokita_etl.state_db.DatabaseStateStore`: tables in PostgreSQL (`state_url`), each
  update one transaction holding the date's row lock, claims under the date's advisory lock:
  exclusive across machines, no shared folder needed.

`tokokita_etl.stores.state_store(settings)` picks one; the runs, the status and the command
line go through it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from tokokita_etl.errors import StateError
from tokokita_etl.files import atomic_writer, locked, write_new_atomic, write_text_atomic

SUCCESS = "success"
FAILED = "failed"
#: fields that describe one run's outcome: a new success or failure replaces them all
RUN_OUTCOME_FIELDS = ("error", "failed_stage", "warnings", "needs_rerun")
#: the intent record of a run that is changing the date's warehouse rows and gold file:
#: written by the gate before the first stage, removed by the run's success or failure record
#: (docs/data-contract.md, "Watermark"); while it is there the entry is not a success
IN_PROGRESS = "in_progress"
#: the intent fields of a run stopped from outside (a person's mark): why, and after how many
#: clears of the run
STOPPED, STOPPED_CLEARS = "stopped", "stopped_clears"


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
                or not _is_count(reset.get("previous_attempt", 0)) \
                or not _is_count(reset.get("previous_failures", 0)):
            return ("must be an array of objects with 'at' and 'by' (strings) and "
                    "'previous_attempt' and 'previous_failures' (counts)")
    return None


#: what each known field of an entry must be (unknown fields are kept as they are); checked
#: when the file is read, so a hand-edited watermark fails every run with a StateError naming
#: the field instead of a traceback deep inside a stage
_FIELD_RULES: dict[str, Callable[[Any], str | None]] = {
    **{name: (lambda v: None if _is_count(v) else "must be a count (an integer >= 0)")
       for name in ("attempt", "failures")},
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
_FIELD_RULES["needs_rerun"] = lambda v: None if isinstance(v, bool) else "must be a boolean"
_FIELD_RULES["warehouse"] = lambda v: None if isinstance(v, dict) and isinstance(
    v.get("id"), str) and _is_count(v.get("revision")) else \
    "must be an object with 'id' (a string) and 'revision' (a count)"


def _field_problem(name: str, value: Any) -> str | None:
    rule = _FIELD_RULES.get(name)
    return rule(value) if rule else None


class Watermark:
    """A read-only snapshot of the watermark document.

    `ended_runs` names runs known to have ended without recording their outcome (their
    intent record stands but they hold no live claim: `intent_run_ended`); `runs.
    settled_watermark` reads the claims to fill it in.
    """

    def __init__(self, data: dict[str, Any], ended_runs: frozenset[str] = frozenset()) -> None:
        self.data = data
        self.ended_runs = ended_runs

    @property
    def runs(self) -> dict[str, dict[str, Any]]:
        """Entries by ISO date."""
        return self.data["runs"]

    def entry(self, day: date | str) -> dict[str, Any]:
        """The entry for `day` (empty when unknown)."""
        return self.runs.get(str(day), {})

    def has_success(self, day: date | str) -> bool:
        """Whether `day`'s last recorded outcome is a success that still describes the
        warehouse: not when an intent record of a run known to have ended (`ended_runs`)
        stands beside it (that run may have replaced the rows: the date needs a re-run). A
        live run's intent (a forced re-run of a done date, whose own stages decide with this)
        keeps the success until the run records its outcome. Pure: which runs have ended is
        asked before (`runs.settled_watermark`), and the gate reconciles the intents of runs
        that are gone before it decides (`runs.reconcile_intent`)."""
        entry = self.entry(day)
        if entry.get("status") != SUCCESS:
            return False
        intent = entry.get(IN_PROGRESS)
        return intent is None or intent["run"] not in self.ended_runs

    def intent(self, day: date | str) -> dict[str, str] | None:
        """The intent record (`run`, `stage`, `since`) of a run that has not recorded its
        outcome for `day`, or None."""
        return self.entry(day).get(IN_PROGRESS)

    def attempts(self, day: date | str) -> int:
        """Recorded outcomes for `day` (successes and failures; skips do not count): the
        total, not what `max_attempts` counts (`failures_since_success`)."""
        return int(self.entry(day).get("attempt", 0))


#: answers whether the claim holder `owner` has finished (True), is alive (False) or cannot
#: be told (None: the claim's expiry decides)
HolderCheck = Callable[[str], "bool | None"]


@dataclass(frozen=True)
class Claim:
    """Who holds a date, since when, until when."""

    owner: str
    since: datetime
    expires: datetime

    def live(self, now: datetime, holder_finished: HolderCheck) -> bool:
        """Whether the holder still holds the date: unexpired, and not known to have ended
        (None from `holder_finished`, cannot tell, leaves it to the expiry)."""
        return self.expires > now and holder_finished(self.owner) is not True

    def to_dict(self) -> dict[str, str]:
        """The claim as its JSON record holds it."""
        return {"owner": self.owner, "since": self.since.isoformat(timespec="seconds"),
                "expires": self.expires.isoformat(timespec="seconds")}


def intent_run_ended(intent: dict[str, str], claim: Claim | None, now: datetime,
                     holder_finished: HolderCheck) -> bool:
    """Whether the run of an intent record has ended without recording its outcome: a live
    run holds its date's claim from its gate to its outcome record, so a run that no longer
    holds it live (released by a failure callback, expired, or its holder known to have
    ended) is gone."""
    return claim is None or claim.owner != intent["run"] or not claim.live(now, holder_finished)


def parse_claim(data: Any, where: str) -> Claim:
    """A claim from its JSON record; StateError naming `where` and the field when damaged."""
    if not isinstance(data, dict):
        raise StateError(f"{where}: corrupt claim: expected an object")
    values = {}
    for name in ("owner", "since", "expires"):
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise StateError(f"{where}: corrupt claim: field {name!r} must be a non-empty string")
        values[name] = value
    moments = {}
    for name in ("since", "expires"):
        try:
            moments[name] = datetime.fromisoformat(values[name])
        except ValueError:
            raise StateError(f"{where}: corrupt claim: field {name!r} is not an ISO 8601 "
                             f"date-time: {values[name]!r}") from None
        if moments[name].tzinfo is None:
            raise StateError(f"{where}: corrupt claim: field {name!r} has no UTC offset")
    return Claim(values["owner"], moments["since"], moments["expires"])


def check_entry(where: str, key: str, entry: Any) -> None:
    """StateError unless `entry` is a valid watermark entry for date `key`; the message names
    `where` (the file or table), the date and the field."""
    try:
        date.fromisoformat(key)
    except ValueError:
        raise StateError(f"{where}: corrupt watermark: bad date key {key!r}") from None
    if not isinstance(entry, dict):
        raise StateError(f"{where}: corrupt watermark: bad entry for {key}: it "
                         f"must be an object, got {_json_kind(entry)}")
    for name, value in entry.items():
        problem = _field_problem(name, value)
        if problem:
            raise StateError(
                f"{where}: corrupt watermark: bad entry for {key}: field {name!r} {problem}, "
                f"got {_shown(value)}; fix or restore it by hand, it is never reset "
                "automatically")


def check_document(where: str, data: Any) -> dict[str, Any]:
    """`data` if it is a valid watermark document (`state.json`'s format), else StateError."""
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        raise StateError(f"{where}: corrupt watermark: expected an object with 'runs'")
    for key, entry in data["runs"].items():
        check_entry(where, key, entry)
    return data


def failures_since_success(entry: Mapping[str, Any]) -> int:
    """The failures recorded for a date since its last success: what `max_attempts` counts
    (`policy.is_blocked`).

    The entry's `failures` (0 after a success, +1 per recorded failure, 0 again after
    `reset_attempts`). An entry written before that field existed counts its `attempt` when
    its last outcome is a failure (those were the attempts that blocked it before) and 0
    when it is a success. Successes (forced re-runs, reprocesses) never count.
    """
    if "failures" in entry:
        return int(entry["failures"])
    return int(entry.get("attempt", 0)) if entry.get("status") == FAILED else 0


def _record(entry: dict[str, Any], status: str, payload: dict[str, Any], now: datetime) -> int:
    failures = failures_since_success(entry)  # (derived from the entry as it was)
    entry["attempt"] = int(entry.get("attempt", 0)) + 1
    entry["failures"] = 0 if status == SUCCESS else failures + 1
    entry["status"] = status
    entry["updated_at"] = now.isoformat(timespec="seconds")
    for key in (*RUN_OUTCOME_FIELDS, IN_PROGRESS):
        entry.pop(key, None)
    for key, value in payload.items():
        if key not in ("attempt", "failures") and not (key == "warnings" and not value):
            entry[key] = value
    return entry["attempt"]


class WatermarkRules:
    """How a run's events change one date's entry; the same for every store, which only
    provides `update_entry` (one date's entry changed under that date's lock)."""

    def update_entry(self, day: date, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to `day`'s entry (a new empty one when unknown) under the lock and
        save it; an entry left empty is removed. Returns what `mutate` returns."""
        raise NotImplementedError

    def record(self, day: date, status: str, payload: dict[str, Any], now: datetime) -> int:
        """Record a success or failure for `day`: attempt += 1, and failures (since the last
        success) back to 0 or += 1. Returns the new attempt."""
        return self.update_entry(day, lambda entry: _record(entry, status, payload, now))

    def begin(self, day: date, run: str, stage: str, now: datetime) -> None:
        """Write `run`'s intent record for `day` before its first stage changes anything."""

        def mutate(entry: dict[str, Any]) -> None:
            entry[IN_PROGRESS] = {"run": run, "stage": stage,
                                  "since": now.isoformat(timespec="seconds")}

        self.update_entry(day, mutate)

    def record_needs_rerun(self, day: date, why: str, stage: str, now: datetime) -> None:
        """Record that `day` needs a re-run for a reason that is no failure of the partition
        (a run stopped from outside, a warehouse reconciled after a loss): failed, with its
        attempts and failures since the last success unchanged; the intent record goes."""

        def mutate(entry: dict[str, Any]) -> None:
            entry["failures"] = failures_since_success(entry)
            entry["status"] = FAILED
            entry["error"] = why
            entry["failed_stage"] = stage
            entry["needs_rerun"] = True
            entry["updated_at"] = now.isoformat(timespec="seconds")
            for key in ("warehouse", "gold", "warnings", IN_PROGRESS):
                entry.pop(key, None)

        self.update_entry(day, mutate)

    def mark_stopped(self, day: date, why: str, clears: int = 0, *,
                     run: str | None = None) -> bool:
        """Note on the intent record for `day` (of `run`, else whichever stands: the claim
        holder's, the caller) that its run was stopped from outside (not a failure of the
        partition), after `clears` clears of the run: its later stages of that clear skip,
        and the next gate of another run records the date as needing a re-run without
        counting a failure (`runs.reconcile_intent`). An intent already stopped keeps its
        reason. Returns whether it noted it."""

        def mutate(entry: dict[str, Any]) -> bool:
            intent = entry.get(IN_PROGRESS)
            if intent is None or intent.get(STOPPED) or run not in (None, intent["run"]):
                return False
            intent[STOPPED] = why
            intent[STOPPED_CLEARS] = clears
            return True

        return self.update_entry(day, mutate)

    def clear_stopped(self, day: date) -> None:
        """Drop the stop noted on `day`'s intent record: its run was cleared and runs again."""

        def mutate(entry: dict[str, Any]) -> None:
            for key in (STOPPED, STOPPED_CLEARS):
                entry.get(IN_PROGRESS, {}).pop(key, None)

        self.update_entry(day, mutate)

    def clear_intent(self, day: date) -> None:
        """Drop `day`'s intent record (its run ended before changing the warehouse)."""
        self.update_entry(day, lambda entry: entry.pop(IN_PROGRESS, None))

    def reset_attempts(self, day: date, *, now: datetime, by: str) -> int | None:
        """Set `day`'s failures since its last success to 0 (what `max_attempts` counts),
        recording when, by whom and the previous values; `attempt`, the total of recorded
        outcomes, is kept. Returns the previous failures; None for a date the watermark has
        no entry for (nothing to reset, and no entry is made)."""

        def mutate(entry: dict[str, Any]) -> int | None:
            if not entry:
                return None
            previous = failures_since_success(entry)
            entry["failures"] = 0
            entry.setdefault("resets", []).append(
                {"at": now.isoformat(timespec="seconds"), "by": by,
                 "previous_attempt": int(entry.get("attempt", 0)),
                 "previous_failures": previous})
            entry["updated_at"] = now.isoformat(timespec="seconds")
            return previous

        return self.update_entry(day, mutate)


class StateStore(WatermarkRules):
    """The file store: `state.json` with an exclusive lock around every read-modify-write,
    one claim file per date (`claims/D.json`) and one manifest file per run (`runs/`), all
    beside the watermark."""

    def __init__(self, path: Path, pipeline: str) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.pipeline = pipeline
        self.claims_dir = self.path.parent / "claims"
        self.runs_dir = self.path.parent / "runs"

    @property
    def location(self) -> str:
        """Where the watermark is, for messages."""
        return str(self.path)

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
        return check_document(str(self.path), data)

    def check_writable(self) -> None:
        """StateError unless the watermark and the manifests folder can be written now: an
        existing watermark is rewritten with the same bytes (temporary file, fsync, rename:
        what `update` does), a missing one and the manifests folder are probed with a
        temporary file. Run before any stage, so a full or read-only state folder stops the
        run before anything is loaded or published."""
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
                    _probe(self.path.parent, self.path.name,
                           json.dumps({"pipeline": self.pipeline, "runs": {}}).encode())
        except OSError as exc:
            raise StateError(
                f"{self.path}: the watermark cannot be written ({exc.strerror or exc}); "
                "nothing was run: free space or fix the permissions, then run again") from None
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            _probe(self.runs_dir, "probe", b"{}\n")
        except OSError as exc:
            raise StateError(f"{self.runs_dir}: the run manifests folder cannot be written "
                             f"({exc.strerror or exc}); nothing was run") from None

    def update(self, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to the document under the lock and save it atomically."""
        with self._locked():
            data = self._load()
            before = copy.deepcopy(data)
            result = mutate(data)
            if data != before:
                try:
                    write_text_atomic(self.path, json.dumps(
                        data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")
                except OSError as exc:  # the folder filled up (or turned read-only) since
                    # check_writable: the change is not recorded, and the file is as it was
                    raise StateError(
                        f"{self.path}: the watermark cannot be written "
                        f"({exc.strerror or exc}); it is unchanged: free space or fix the "
                        "permissions, then run again") from None
            return result

    def update_entry(self, day: date, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        def change(data: dict[str, Any]) -> Any:
            key = day.isoformat()
            entry = data["runs"].setdefault(key, {})
            result = mutate(entry)
            if not entry:
                del data["runs"][key]
            data["runs"] = dict(sorted(data["runs"].items()))
            return result

        return self.update(change)

    def export(self) -> dict[str, Any]:
        """The watermark document (`state.json`'s format)."""
        return self._load()

    def import_entries(self, data: dict[str, Any]) -> list[str]:
        """Add the entries of a watermark document; StateError naming the dates that already
        have an entry here (nothing is imported then). Returns the imported dates."""

        def add(current: dict[str, Any]) -> list[str]:
            clash = sorted(set(current["runs"]) & set(data["runs"]))
            if clash:
                raise StateError(f"{self.path}: already holds entries for {', '.join(clash)}; "
                                 "nothing was imported")
            current["runs"] = dict(sorted({**current["runs"], **data["runs"]}.items()))
            return sorted(data["runs"])

        return self.update(add)

    # -- claims --------------------------------------------------------------------------

    def claim_location(self, day: date) -> str:
        """Where `day`'s claim is, for messages."""
        return str(self.claim_path(day))

    def claim_path(self, day: date) -> Path:
        """The claim file of `day`."""
        return self.claims_dir / f"{day.isoformat()}.json"

    @contextlib.contextmanager
    def date_locked(self, day: date) -> Iterator[None]:
        """Every look at a claim and its change happen under one lock of the claims folder."""
        with locked(self.claims_dir / ".lock"):
            yield

    def read_claim(self, day: date) -> Claim | None:
        """The current claim of `day`, or None; a damaged claim is a StateError naming it."""
        path = self.claim_path(day)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(f"{path}: cannot read the claim: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(f"{path}: corrupt claim (invalid JSON: {exc.msg}); delete it if "
                             "no run of this date is in progress") from None
        return parse_claim(data, str(path))

    def put_claim(self, day: date, claim: Claim) -> None:
        """Write `day`'s claim (call under `date_locked`)."""
        try:
            write_text_atomic(self.claim_path(day), json.dumps(claim.to_dict()))
        except OSError as exc:
            raise StateError(f"{self.claim_path(day)}: the claim cannot be written "
                             f"({exc.strerror or exc}); nothing was run: free space or fix "
                             "the permissions, then run again") from None

    def drop_claim(self, day: date) -> None:
        """Remove `day`'s claim (call under `date_locked`)."""
        self.claim_path(day).unlink(missing_ok=True)

    # -- manifests -----------------------------------------------------------------------

    def write_manifest(self, name: str, body: dict[str, Any]) -> tuple[str, str]:
        """Write a run's manifest as `runs/<name>.json` (or `<name>-2.json`...: never
        replaces one); returns its final name and where it went."""
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        try:
            path = write_new_atomic(self.runs_dir / f"{name}.json", text)
        except OSError as exc:
            raise StateError(f"{self.runs_dir / name}.json: the run manifest cannot be "
                             f"written ({exc.strerror or exc}): free space or fix the "
                             "permissions") from None
        return path.stem, str(path)

    def manifests(self, day: date) -> Iterator[dict[str, Any]]:
        """The manifests of `day`, newest first (unreadable ones are passed over)."""
        paths = sorted(self.runs_dir.glob(f"run-{day.isoformat()}-*.json"),
                       key=lambda path: path.stat().st_mtime_ns, reverse=True)
        for path in paths:
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(body, dict):
                yield body


def _probe(folder: Path, name: str, content: bytes) -> None:
    """Write, fsync and remove a temporary file in `folder` (OSError when it cannot)."""
    fd, probe = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)

