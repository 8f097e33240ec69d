"""A run's hold on its partition date: the claim (two runs of one date never interleave; it names
its holder and expires) and the intent record (a run that ended between the stores is
reconciled as a failure).
"""

from __future__ import annotations

import copy
from datetime import date, datetime, timedelta

from tokokita_etl.errors import (
    ConcurrentRunError,
    StateError,
)
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.liveness import cli_holder_finished
from tokokita_etl.runner.policy import failures_since_success
from tokokita_etl.runner.staging import recorded_stages
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import (
    FAILED,
    IN_PROGRESS,
    STOPPED,
    STOPPED_STAGE,
    Claim,
    HolderCheck,
    Watermark,
    intent_run_ended,
)
from tokokita_etl.settings.model import Settings


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


def stop_ended_run(settings: Settings, day: date, owner: str, why: str, clears: int,
                   stage: str | None = None) -> bool:
    """A run that ended well (on Airflow: its DAG run succeeded) while its intent on `day`
    still stands (a stage cleared alone, a stage marked success), or whose stage `stage` was
    stopped before it ran: mark the intent stopped (`StateStore.mark_stopped`), so the date
    needs a re-run that counts no failure. Returns whether it did."""
    return state_store(settings).mark_stopped(day, why, clears, run=owner, stage=stage)


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

def interrupted_stage(pipeline: Pipeline, settings: Settings, day: date) -> str:
    """The first stage without a record in `day`'s staging folder (the one a crashed run was
    in), or the last stage when all have one (it ended before recording its outcome)."""
    recorded = recorded_stages(pipeline, settings, day)
    for stage in pipeline.stage_names:
        if stage not in recorded:
            return stage
    return pipeline.stage_names[-1]


def _claim_or_none(store: StateStore, day: date) -> Claim | None:
    """`day`'s claim; a damaged one holds nothing for an intent (the gate's own claim
    reports the damage)."""
    try:
        return store.read_claim(day)
    except StateError:
        return None


def reconcile_intent(pipeline: Pipeline, settings: Settings, day: date, now: datetime,
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
        stage = intent.get(STOPPED_STAGE) or interrupted_stage(pipeline, settings, day)
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
    # the changed entries are copies: the store's stay as read
    changed = {}
    ended = set()
    for iso in state.summary().unsettled:  # (every entry with an intent is among them)
        entry = state.entry(iso)
        intent = entry.get(IN_PROGRESS)
        if intent is None:
            continue
        if intent_run_ended(intent, _claim_or_none(store, date.fromisoformat(iso)), now,
                            holder_finished):
            ended.add(intent["run"])
            if not intent.get(STOPPED):  # a stopped run is recorded without a failure
                changed[iso] = {**copy.deepcopy(entry),
                                "failures": failures_since_success(entry) + 1}
    return state.with_entries(changed, frozenset(ended))


def claim_to_change(pipeline: Pipeline, settings: Settings, day: date, owner: str, stage: str,
                    now: datetime,
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
        reconcile_intent(pipeline, settings, day, now, holder_finished, owner)
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
