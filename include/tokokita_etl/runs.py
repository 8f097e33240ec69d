"""Runs of one partition date: the claim, the gate, and how a run's outcome is recorded.

A run claims its date before any stage runs, so two runs of one date never interleave; the
claim names its holder and expires. Every run ends with a manifest (`runs/run-D-HHMMSS.json`,
never overwritten); a success or a failure that counts also updates the watermark.
"""

from __future__ import annotations

import copy
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from tokokita_etl.config import Settings, is_url
from tokokita_etl.errors import (
    EXIT_BLOCKED,
    EXIT_FAILED,
    EXIT_OK,
    BlockedError,
    ConcurrentRunError,
    MissingPartitionError,
    RunStoppedError,
    StateError,
)
from tokokita_etl.identity import WAREHOUSE, ensure, verify
from tokokita_etl.notify import run_summary
from tokokita_etl.policy import (
    Action,
    Decision,
    counts_as_attempt,
    failures_since_success,
    gate_decision,
    stage_decision,
)
from tokokita_etl.stages import (
    STAGE_NAMES,
    drop_staged,
    read_stage,
    recorded_stages,
    stage_durations,
)
from tokokita_etl.state import (
    FAILED,
    IN_PROGRESS,
    STOPPED,
    STOPPED_CLEARS,
    SUCCESS,
    Claim,
    HolderCheck,
    StateStore,
    Watermark,
    cli_holder_finished,
    intent_run_ended,
)
from tokokita_etl.stores import state_store

#: a run status in manifests; the watermark only ever holds success or failed (`STOPPED`: a
#: run stopped from outside, such as a person's mark in Airflow)
SKIPPED, BLOCKED, MISSING = "skipped", "blocked", "missing"


def utc_now() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)


# -- per-date claim: two runs of the same date never interleave --------------------------------

def cli_owner(started: datetime) -> str:
    """The claim owner of a command-line run: host and process, so a dead one is detected."""
    return f"cli:{socket.gethostname()}:{os.getpid()}:{started.isoformat(timespec='seconds')}"


def read_claim(settings: Settings, day: date) -> Claim | None:
    """The current claim of `day`, or None; a damaged claim is a StateError naming it."""
    return state_store(settings).read_claim(day)


def claim_date(settings: Settings, day: date, owner: str, now: datetime,
               holder_finished: HolderCheck = cli_holder_finished) -> None:
    """Claim `day` for `owner`; ConcurrentRunError when another live run holds it.

    A claim is taken over when it is `owner`'s own (a retry or a cleared task of the same
    run), when it expired, or when `holder_finished` says its holder has ended.
    """
    store = state_store(settings)
    with store.date_locked(day):
        held = store.read_claim(day)
        if held is not None and held.owner != owner and held.live(now, holder_finished):
            raise ConcurrentRunError(
                f"{day} is being processed by {held.owner} since "
                f"{held.since.isoformat(timespec='seconds')}; this run does not interleave "
                f"with it (claim {store.claim_location(day)}, expires "
                f"{held.expires.isoformat(timespec='seconds')})")
        # a retry or a cleared task of the holder keeps its start; the expiry is renewed
        since = held.since if held is not None and held.owner == owner else now
        store.put_claim(day, Claim(owner, since, now + timedelta(hours=settings.claim_ttl_hours)))


def claim_started(settings: Settings, day: date, owner: str, default: datetime) -> datetime:
    """When `owner` claimed `day` (the run's start), or `default`."""
    try:
        held = read_claim(settings, day)
    except StateError:
        return default
    return held.since if held is not None and held.owner == owner else default


def stop_ended_run(settings: Settings, day: date, owner: str, why: str, clears: int) -> bool:
    """A run that ended well (on Airflow: its DAG run succeeded) while its intent on `day`
    still stands (a stage cleared alone, a stage marked success): mark the intent stopped
    (`StateStore.mark_stopped`), so the date needs a re-run that counts no failure. Returns
    whether it did."""
    return state_store(settings).mark_stopped(day, why, clears, run=owner)


def release_date(settings: Settings, day: date, owner: str) -> None:
    """Release `owner`'s claim on `day` (no-op when it holds none)."""
    store = state_store(settings)
    with store.date_locked(day):
        try:
            held = store.read_claim(day)
        except StateError:
            return
        if held is not None and held.owner == owner:
            store.drop_claim(day)


# -- intent record: a run that crashed between the stores ---------------------------------------

#: stages that change nothing outside the staging folder: a run that ends in one of them
#: leaves the warehouse and the gold file as they were
STAGES_BEFORE_LOAD = STAGE_NAMES[:STAGE_NAMES.index("load")]


def interrupted_stage(settings: Settings, day: date) -> str:
    """The first stage without a record in `day`'s staging folder (the one a crashed run was
    in), or the last stage when all have one (it ended before recording its outcome)."""
    recorded = recorded_stages(settings, day)
    for stage in STAGE_NAMES:
        if stage not in recorded:
            return stage
    return STAGE_NAMES[-1]


def _claim_or_none(store: StateStore, day: date) -> Claim | None:
    """`day`'s claim; a damaged one holds nothing for an intent (the gate's own claim
    reports the damage)."""
    try:
        return store.read_claim(day)
    except StateError:
        return None


def reconcile_intent(settings: Settings, day: date, now: datetime,
                     holder_finished: HolderCheck = cli_holder_finished,
                     owner: str | None = None) -> str | None:
    """Record the run that left an intent on `day` and is gone as a failure (an attempt).

    The intent's run is alive while it holds the date's claim, unexpired, and
    `holder_finished` does not say it ended. Otherwise it ended without recording an outcome
    (killed, machine lost) somewhere between its gate and its record: the warehouse and the
    gold file may hold part of its work, so the date needs a re-run, whatever the entry said
    before. An intent of `owner` itself (its gate again: a retry or a cleared task) stays.
    Returns the recorded error, or None when there was nothing to reconcile.
    """
    store = state_store(settings)
    with store.date_locked(day):
        intent = store.read().intent(day)
        if intent is None or intent["run"] == owner:
            return None
        if not intent_run_ended(intent, _claim_or_none(store, day), now, holder_finished):
            return None
        stage = interrupted_stage(settings, day)
        if intent.get(STOPPED):
            message = (f"run {intent['run']} was stopped: {intent[STOPPED]}; the warehouse "
                       f"rows and the gold file of {day} may hold part of its work: it needs "
                       "a re-run (not a failure of the partition)")
            store.record_needs_rerun(day, message, stage, now)
            return message
        message = (f"interrupted: run {intent['run']} (started {intent['since']}) ended during "
                   f"{stage} without recording its outcome; the warehouse rows and the gold "
                   f"file of {day} may hold part of its work: the date needs a re-run")
        store.record(day, FAILED, {"error": message, "failed_stage": stage}, now)
        return message


def settled_watermark(settings: Settings, now: datetime,
                      holder_finished: HolderCheck = cli_holder_finished) -> Watermark:
    """The watermark as the next gate of each date will find it once it has reconciled:
    the runs that left an intent and are gone (`intent_run_ended`) are marked as ended, so a
    date whose forced re-run died is due and not done, and each such run counts as the one
    failure `reconcile_intent` will record (`failures` + 1; the intent stays, so readers can
    name the run), so a date that this failure blocks is blocked here too, not due. Reads
    only: `due`, `status` and the page agree with what the next run does."""
    store = state_store(settings)
    state = store.read()
    data = copy.deepcopy(state.data)
    ended = set()
    for iso, entry in state.runs.items():
        intent = entry.get(IN_PROGRESS)
        if intent is None:
            continue
        if intent_run_ended(intent, _claim_or_none(store, date.fromisoformat(iso)), now,
                            holder_finished):
            ended.add(intent["run"])
            if not intent.get(STOPPED):  # a stopped run is recorded without a failure
                data["runs"][iso]["failures"] = failures_since_success(entry) + 1
    return Watermark(data, frozenset(ended))


def claim_to_change(settings: Settings, day: date, owner: str, stage: str, now: datetime,
                    holder_finished: HolderCheck = cli_holder_finished, *,
                    reset_by: str | None = None) -> int | None:
    """Claim `day` for `owner`, which is about to change a store, and make sure that its
    intent record is in `day`'s entry before it does: every run that changes the warehouse
    or the gold file writes its intent first, whatever its gate reconciled or decided before
    (docs/data-contract.md, "Every run that changes a store writes its intent first").

    The gate calls it once it decided to run, and so does a stage task that claims the date
    on its own (a retry, a cleared task, a stage whose gate's intent another gate has since
    reconciled). An intent of `owner` already there stays (its `since` is the run's start);
    one of another run that is gone is recorded as interrupted first (`reconcile_intent`: it
    no longer holds the claim), never overwritten. `reset_by`: reset the date's failures
    (reset_attempts) before, recorded as by it. ConcurrentRunError when another live run
    holds the date. Returns the failures the reset set to 0, else None.
    """
    claim_date(settings, day, owner, now, holder_finished)
    store = state_store(settings)
    try:
        reconcile_intent(settings, day, now, holder_finished, owner)
        reset_from = store.reset_attempts(day, now=now, by=reset_by) if reset_by is not None \
            else None
        intent = store.read().intent(day)
        if intent is None or intent["run"] != owner:
            # before the first change: a run that dies before its outcome record leaves it,
            # and the next gate of the date records the date as interrupted (reconcile_intent)
            store.begin(day, owner, stage, now)
        elif intent.get(STOPPED):  # the run, stopped before, was cleared: it runs again
            store.clear_stopped(day)
    except StateError:
        # the watermark cannot take the record (a full state folder): the run changes
        # nothing, so it does not keep the date either
        release_date(settings, day, owner)
        raise
    return reset_from


# -- gate --------------------------------------------------------------------------------------

def check_writable(settings: Settings) -> None:
    """StateError (exit 2, not an attempt) unless the state store (watermark, claims,
    manifests) can be written: checked before any stage, so a run never loads or publishes
    what it cannot record."""
    state_store(settings).check_writable()


def _asked_once(holder_finished: HolderCheck) -> HolderCheck:
    """`holder_finished` asked at most once per holder (one gate asks about one holder)."""
    answers: dict[str, bool | None] = {}

    def ask(owner: str) -> bool | None:
        if owner not in answers:
            answers[owner] = holder_finished(owner)
        return answers[owner]

    return ask


@dataclass
class GateResult:
    """The gate's decision for one run of date D."""

    action: Action
    message: str
    #: recorded outcomes of the date (successes and failures)
    attempt: int
    #: the failures since the last success before `reset_attempts` set them to 0
    reset_from: int | None = None
    #: what the gate recorded about an earlier run of the date that ended without its
    #: outcome (the date needed a re-run), or None
    reconciled: str | None = None


def gate(settings: Settings, day: date, *, force: bool, reset_attempts: bool, now: datetime,
         by: str, run_type: str = "manual", owner: str | None = None, cleared: bool = False,
         holder_finished: HolderCheck = cli_holder_finished) -> GateResult:
    """Apply the watermark rules for `day`; when it runs, claim it and apply a requested reset.

    `by` is recorded with a reset; `owner` holds the claim (default: `by`); `cleared`: a
    person cleared the run (a reprocess of a done date, `policy.decide`). Raises
    ConcurrentRunError when another live run holds the date.
    """
    store = state_store(settings)
    check_writable(settings)
    found = verify(settings, store.read(), where=store.location)
    holder_finished = _asked_once(holder_finished)  # the intent's and the claim's holder
    reconciled = reconcile_intent(settings, day, now, holder_finished, owner or by)
    decision = gate_decision(store.read(), day, run_type=run_type, now=now,
                             lookback_days=settings.lookback_days,
                             max_attempts=settings.max_attempts, force=force,
                             reset_attempts=reset_attempts, cleared=cleared,
                             tz=settings.timezone)
    reset_from = None
    if decision.action is Action.RUN:
        ensure(settings, found)
        reset_from = claim_to_change(settings, day, owner or by, STAGE_NAMES[0], now,
                                     holder_finished, reset_by=by if reset_attempts else None)
    return GateResult(decision.action, decision.reason, store.read().attempts(day), reset_from,
                      reconciled)


def enter_stage(settings: Settings, day: date, *, stage: str, owner: str, force: bool,
                cleared: bool, now: datetime, clears: int = 0,
                holder_finished: HolderCheck = cli_holder_finished) -> Decision:
    """The gate of one stage task: a cleared stage runs without its run's gate, so it applies
    the same rules (`policy.stage_decision`) and, when it runs, holds the claim and has its
    run's intent on `day` before it changes anything.

    A stage of a run whose gate decided to process the date finds its run's intent there; a
    retry, or a cleared stage after that run's outcome record (a reprocess of a done date, a
    re-run of a failed one), writes it (`claim_to_change`). Raises ConcurrentRunError when
    another live run holds the date. A stage of a run that was stopped from outside (a
    person's mark) after as many clears (`clears`) as it has now is skipped: the person
    stopped the run; clearing it again runs it.
    """
    store = state_store(settings)
    watermark = store.read()
    found = verify(settings, watermark, where=store.location)
    intent = watermark.intent(day)
    if intent is not None and intent["run"] == owner and intent.get(STOPPED) \
            and int(intent.get(STOPPED_CLEARS, 0)) >= clears:
        return Decision(Action.SKIP, f"an earlier stage of this run was stopped "
                                     f"({intent[STOPPED]}): {day} needs a re-run; clear the "
                                     "run or trigger the date to run it")
    holder_finished = _asked_once(holder_finished)
    reconcile_intent(settings, day, now, holder_finished, owner)
    decision = stage_decision(store.read(), day, max_attempts=settings.max_attempts,
                              force=force, cleared=cleared)
    if decision.action is Action.RUN:
        ensure(settings, found)
        claim_to_change(settings, day, owner, stage, now, holder_finished)
    return decision


# -- outcomes and manifests --------------------------------------------------------------------

@dataclass
class RunOutcome:
    """How one run of one date ended."""

    run_id: str
    status: str  # success | skipped | failed | blocked | missing
    exit_code: int
    attempt: int
    #: where its manifest went (a file, or a row of the state database)
    manifest: str
    #: the manifest's content
    body: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    entry: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, Any]:
        """The run's one-line summary (`notify.run_summary`), as its manifest holds it."""
        return self.body.get("summary", {})


def manifest_name(day: date, started: datetime) -> str:
    """`run-YYYY-MM-DD-HHMMSS` (partition date, then UTC start time)."""
    return f"run-{day.isoformat()}-{started.astimezone(UTC):%H%M%S}"


def write_manifest(settings: Settings, day: date, started: datetime, finished: datetime, *,
                   status: str, attempt: int, exit_code: int, entry: dict[str, Any],
                   durations: dict[str, int], trigger: str,
                   error: str | None = None) -> tuple[str, str, dict[str, Any]]:
    """Write the run's manifest (never replacing one); returns its name (the run id), where
    it went and its body."""
    body = {
        "pipeline": settings.pipeline,
        "partition_date": day.isoformat(),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "status": status,
        "attempt": attempt,
        "rows": entry.get("rows", {}),
        "checksums": entry.get("checksums", {}),
        "gold": entry.get("gold", ""),
        "stages_ms": durations,
        "duration_ms": sum(durations.values()),
        "exit_code": exit_code,
        "trigger": trigger,
        "warnings": entry.get("warnings", []),
    }
    if error:
        body["error"] = error
    name = manifest_name(day, started)
    body["summary"] = run_summary(body, run_id=name, entry=entry, started=started,
                                  finished=finished)
    return (*state_store(settings).write_manifest(name, body), body)


def latest_summary(settings: Settings, day: date, trigger: str) -> dict[str, Any]:
    """The summary of the newest manifest of `day` written by `trigger` ({} when none)."""
    for body in state_store(settings).manifests(day):
        summary = body.get("summary")
        if isinstance(summary, dict) and summary.get("trigger") == trigger:
            return summary
    return {}


def success_payload(settings: Settings, day: date) -> dict[str, Any]:
    """The watermark fields of a successful run, from the stage records."""
    ext = read_stage(settings, day, "extract")
    tra = read_stage(settings, day, "transform")
    lod = read_stage(settings, day, "load")
    val = read_stage(settings, day, "validate")
    pub = read_stage(settings, day, "publish_gold")
    return {
        "rows": {"extracted": ext["rows"], "karantina": lod["karantina"] - tra["duplikat"],
                 "duplikat": tra["duplikat"], "fact": val["fact_rows"],
                 "summary": val["summary_rows"]},
        "checksums": val["checksums"],
        "gold": pub["gold"] if is_url(pub["gold"]) else _display_path(Path(pub["gold"])),
        "bruto": val["bruto"],
        "bersih": val["bersih"],
        "warnings": val.get("warnings", []),
        **({WAREHOUSE: lod[WAREHOUSE]} if lod.get(WAREHOUSE) else {}),
    }


def _display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def finish_success(settings: Settings, day: date, *, started: datetime, now: datetime,
                   trigger: str) -> RunOutcome:
    """Record a success (attempt + 1), write the manifest, drop the staging folder."""
    payload = success_payload(settings, day)
    durations = stage_durations(settings, day)
    attempt = state_store(settings).record(day, SUCCESS, payload, now)
    run_id, where, body = write_manifest(settings, day, started, now, status=SUCCESS, attempt=attempt,
                          exit_code=EXIT_OK, entry=payload, durations=durations, trigger=trigger)
    drop_staged(settings, day)
    return RunOutcome(run_id, SUCCESS, EXIT_OK, attempt, where, body, entry=payload)


def finish_failure(settings: Settings, day: date, error: BaseException, *, stage: str,
                   started: datetime, now: datetime, trigger: str) -> RunOutcome:
    """Record the failure of the run holding `day` (attempt + 1 when it counts); manifest.

    Only the claim holder calls this: its staged validation is dropped, so nothing it staged
    can be published by a cleared `publish_gold` without validating again.
    """
    message = str(error) or type(error).__name__
    store = state_store(settings)
    if counts_as_attempt(error):
        attempt = store.record(day, FAILED, {"error": message, "failed_stage": stage}, now)
        status = FAILED
    else:
        if stage in STAGES_BEFORE_LOAD:
            store.clear_intent(day)  # nothing outside staging changed
        elif isinstance(error, RunStoppedError):
            # its stage's transaction rolled back, but an earlier stage may have changed the
            # warehouse: the date needs a re-run, which is no failure of the partition
            store.mark_stopped(day, message, error.clears)
        # from load on the intent stays: its run ends without a recorded outcome, so the next
        # gate records the date as interrupted (the warehouse may hold part of its work)
        attempt = store.read().attempts(day)
        status = BLOCKED if isinstance(error, BlockedError) else (
            MISSING if isinstance(error, MissingPartitionError) else (
                STOPPED if isinstance(error, RunStoppedError) else FAILED))
    exit_code = getattr(error, "exit_code", EXIT_FAILED)
    run_id, where, body = write_manifest(settings, day, started, now, status=status, attempt=attempt,
                          exit_code=exit_code, entry={}, durations=stage_durations(settings, day),
                          trigger=trigger, error=message)
    drop_staged(settings, day, "validate.json")
    return RunOutcome(run_id, status, exit_code, attempt, where, body, error=message)


def finish_refused(settings: Settings, day: date, error: BaseException, *, status: str,
                   started: datetime, now: datetime, trigger: str) -> RunOutcome:
    """Record a run that did not proceed (blocked, or another run holds the date).

    Writes its manifest only: the watermark and the holder's staged files are untouched.
    """
    message = str(error)
    attempt = state_store(settings).read().attempts(day)
    exit_code = EXIT_BLOCKED if isinstance(error, BlockedError) else \
        getattr(error, "exit_code", EXIT_FAILED)
    run_id, where, body = write_manifest(settings, day, started, now, status=status, attempt=attempt,
                          exit_code=exit_code, entry={}, durations={}, trigger=trigger,
                          error=message)
    return RunOutcome(run_id, status, exit_code, attempt, where, body, error=message)


def finish_skip(settings: Settings, day: date, *, started: datetime, now: datetime,
                trigger: str, message: str) -> RunOutcome:
    """Write the `skipped` manifest; the watermark is unchanged."""
    entry = state_store(settings).read().entry(day)
    attempt = int(entry.get("attempt", 0))
    run_id, where, body = write_manifest(settings, day, started, now, status=SKIPPED, attempt=attempt,
                          exit_code=EXIT_OK, entry=entry, durations={}, trigger=trigger,
                          error=None)
    return RunOutcome(run_id, SKIPPED, EXIT_OK, attempt, where, body, error=message,
                      entry=entry)

