"""The watermark (one entry per partition date), the claims and the rules by which a run's events
change an entry, the same for every state store.

Two stores hold them with the same fields and rules:

- `tokokita_etl.runner.stores.files.StateStore`: files under `state_dir` (`state.json`,
  `claims/D.json`, `runs/*.json`), each read-modify-write under an exclusive `flock`, each
  write atomic. The default, for one machine (or workers sharing one POSIX folder).
- `tokokita_etl.runner.stores.database.DatabaseStateStore`: tables in PostgreSQL
  (`state_url`), each update one transaction holding the date's row lock, claims under the
  date's advisory lock: exclusive across machines, no shared folder needed.

`tokokita_etl.runner.stores.state_store(settings)` picks one; the runs, the status and the
command line go through it (the tests also build a file store directly).
"""

from __future__ import annotations

import json
import logging
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from tokokita_etl.errors import StateError

log = logging.getLogger(__name__)

SUCCESS = "success"
FAILED = "failed"
#: fields that describe one run's outcome: a new success or failure replaces them all
RUN_OUTCOME_FIELDS = ("error", "failed_stage", "warnings", "needs_rerun")
#: fields a success records only sometimes (a small raw file's line digests,
#: `runner.inputs.RAW_LINES`): a new success replaces them, or drops them when it has none
SUCCESS_ONLY_FIELDS = ("raw_lines",)
#: watermarks once stored under another name: the name -> the one it was stored under. The
#: stores read the former name until their first write, which renames it in the same atomic
#: step (`state.json` rewritten, or one transaction), noting the new name
FORMER_NAMES = {"orders": "etl-pesanan-tokokita"}
#: the intent record of a run that is changing the date's warehouse rows and gold file:
#: written by the gate before the first stage, removed by the run's success or failure record
#: (docs/data-contract.md, "Watermark"); while it is there the entry is not a success
IN_PROGRESS = "in_progress"
#: the intent fields of a run stopped from outside (a person's mark): why, and after how many
#: clears of the run
STOPPED, STOPPED_CLEARS = "stopped", "stopped_clears"
#: in a stopped run's intent record: the stage that was running when it was stopped
STOPPED_STAGE = "stopped_stage"
#: the entry field naming the warehouse a date's recorded outcome describes
WAREHOUSE = "warehouse"


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


def _intent_problem(value: Any) -> str | None:
    if not isinstance(value, dict) or any(
            not isinstance(value.get(name), str) for name in ("run", "stage", "since")):
        return "must be an object with 'run', 'stage' and 'since' (strings)"
    return None


_FIELD_RULES[IN_PROGRESS] = _intent_problem
_FIELD_RULES["needs_rerun"] = lambda v: None if isinstance(v, bool) else "must be a boolean"
_FIELD_RULES["raw"] = lambda v: None if isinstance(v, dict) and _is_count(v.get("size")) and all(
    isinstance(v.get(name), str) for name in ("sha256", "stamp")) else \
    "must be an object with 'size' (a count), 'sha256' and 'stamp' (strings)"
_FIELD_RULES["raw_lines"] = lambda v: None if isinstance(v, str) else \
    "must be a string (base64 line digests)"
_FIELD_RULES["warehouse"] = lambda v: None if isinstance(v, dict) and isinstance(
    v.get("id"), str) and _is_count(v.get("revision")) else \
    "must be an object with 'id' (a string) and 'revision' (a count)"


#: what `Summary` takes from one entry: whether it is a success, whether it is unsettled (not a
#: success, or a run's intent on it), and the warehouse it names (id, revision) or (None, 0)
EntryFacts = tuple[bool, bool, str | None, int]


def entry_facts(entry: Mapping[str, Any]) -> EntryFacts:
    """What `Summary` counts of a (checked) entry."""
    success = entry.get("status") == SUCCESS
    named = entry.get(WAREHOUSE)
    return (success, not success or entry.get(IN_PROGRESS) is not None,
            named["id"] if named else None, named["revision"] if named else 0)


@dataclass(frozen=True)
class Summary:
    """What the readers of every date of a watermark need from it: the done dates (a
    success recorded) counted, the highest revision recorded of each warehouse id, and the
    dates that are unsettled (not a success, or a run's intent on them), in the document's
    order."""

    done: int
    revisions: dict[str, int]
    unsettled: tuple[str, ...]

    @classmethod
    def of(cls, facts: Iterable[tuple[str, EntryFacts]]) -> Summary:
        """The summary of the entries' facts (`entry_facts`), by date."""
        done, revisions, unsettled = 0, {}, []
        for key, (success, unsettled_one, wid, revision) in facts:
            done += success
            if unsettled_one:
                unsettled.append(key)
            if wid is not None:
                revisions[wid] = max(revisions.get(wid, 0), revision)
        return cls(done, revisions, tuple(unsettled))


class Watermark:
    """A read-only snapshot of the watermark document.

    `ended_runs` names runs known to have ended without recording their outcome (their
    intent record stands but they hold no live claim: `intent_run_ended`); `runs.
    settled_watermark` reads the claims to fill it in. `summary`: the entries' `Summary`,
    when the store already has it (the file store keeps it beside `state.json`), else it is
    counted from the entries when asked.
    """

    def __init__(self, data: dict[str, Any], ended_runs: frozenset[str] = frozenset(),
                 summary: Summary | None = None) -> None:
        self.data = data
        self.ended_runs = ended_runs
        self._summary = summary

    @property
    def runs(self) -> Mapping[str, dict[str, Any]]:
        """Entries by ISO date."""
        return self.data["runs"]

    def summary(self) -> Summary:
        """The done dates, the warehouses and the unsettled dates of every entry."""
        if self._summary is None:
            self._summary = Summary.of((key, entry_facts(entry))
                                       for key, entry in self.runs.items())
        return self._summary

    def with_entries(self, changed: dict[str, dict[str, Any]],
                     ended_runs: frozenset[str]) -> Watermark:
        """This watermark with the entries of `changed` in place of its own (none copied),
        each with the `entry_facts` of the one it replaces (the summary is kept)."""
        return Watermark({**self.data, "runs": ChainMap(changed, self.runs)}, ended_runs,
                         self._summary)

    def entry(self, day: date | str) -> dict[str, Any]:
        """The entry for `day` (empty when unknown)."""
        return self.runs.get(str(day), {})

    def has_success(self, day: date | str) -> bool:
        """Whether `day`'s last recorded outcome is a success that still describes the
        warehouse: not when an intent record of a run known to have ended (`ended_runs`)
        stands beside it (that run may have replaced the rows: the date needs a re-run). A
        live run's intent (a forced re-run of a done date, whose own stages decide with this)
        keeps the success until the run records its outcome. Pure: which runs have ended is
        asked before (`claims.settled_watermark`), and the gate reconciles the intents of runs
        that are gone before it decides (`claims.reconcile_intent`)."""
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
        rule = _FIELD_RULES.get(name)
        problem = rule(value) if rule is not None else None
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


def note_renamed(where: str, former: str, name: str) -> None:
    """Log the one-line note of a watermark renamed from `former` to `name` at `where`."""
    log.info("%s: the watermark %r is now named %r (renamed in place)", where, former, name)


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
    for key in (*RUN_OUTCOME_FIELDS, IN_PROGRESS, *(SUCCESS_ONLY_FIELDS
                                                       if status == SUCCESS else ())):
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
                     run: str | None = None, stage: str | None = None) -> bool:
        """Note on the intent record for `day` (of `run`, else whichever stands: the claim
        holder's, the caller) that its run was stopped from outside (not a failure of the
        partition), after `clears` clears of the run: its later stages of that clear skip,
        and the next gate of another run records the date as needing a re-run without
        counting a failure (`claims.reconcile_intent`), at `stage`, the stage stopped (when
        known). An intent already stopped keeps its reason. Returns whether it noted it."""

        def mutate(entry: dict[str, Any]) -> bool:
            intent = entry.get(IN_PROGRESS)
            if intent is None or intent.get(STOPPED) or run not in (None, intent["run"]):
                return False
            intent[STOPPED] = why
            intent[STOPPED_CLEARS] = clears
            if stage:
                intent[STOPPED_STAGE] = stage
            return True

        return self.update_entry(day, mutate)

    def clear_stopped(self, day: date) -> None:
        """Drop the stop noted on `day`'s intent record: its run was cleared and runs again."""

        def mutate(entry: dict[str, Any]) -> None:
            for key in (STOPPED, STOPPED_CLEARS, STOPPED_STAGE):
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
