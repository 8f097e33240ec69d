"""The gate a run passes before its first stage, and the check each later stage makes: the
watermark's decision, the claim and the intent, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from tokokita_etl.runner.claims import check_writable, claim_to_change, reconcile_intent
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.identity import ensure, verify
from tokokita_etl.runner.inputs import changed_since_processed
from tokokita_etl.runner.liveness import cli_holder_finished
from tokokita_etl.runner.policy import Action, Decision, gate_decision, stage_decision
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import STOPPED, STOPPED_CLEARS, HolderCheck
from tokokita_etl.settings.model import Settings


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


def gate(pipeline: Pipeline, settings: Settings, day: date, *, force: bool, reset_attempts: bool,
         now: datetime, by: str, run_type: str = "manual", owner: str | None = None,
         cleared: bool = False, holder_finished: HolderCheck = cli_holder_finished
         ) -> GateResult:
    """Apply the watermark rules for `day`; when it runs, claim it and apply a requested reset.

    `by` is recorded with a reset; `owner` holds the claim (default: `by`); `cleared`: a
    person cleared the run (a reprocess of a done date, `policy.decide`). Raises
    ConcurrentRunError when another live run holds the date.
    """
    store = state_store(settings)
    check_writable(settings)
    found = verify(settings, store.read(), where=store.location)
    holder_finished = _asked_once(holder_finished)  # the intent's and the claim's holder
    reconciled = reconcile_intent(pipeline, settings, day, now, holder_finished, owner or by)
    state = store.read()
    decision = gate_decision(state, day, run_type=run_type, now=now,
                             lookback_days=settings.lookback_days,
                             max_attempts=settings.max_attempts, force=force,
                             reset_attempts=reset_attempts, cleared=cleared,
                             tz=settings.timezone, command=pipeline.run_command)
    reason = decision.reason
    if decision.action is Action.SKIP and state.has_success(day) and (
            change := changed_since_processed(pipeline, settings, state.entry(day), day)):
        reason = f"{reason}; {change}"
    reset_from = None
    if decision.action is Action.RUN:
        ensure(settings, found)
        reset_from = claim_to_change(pipeline, settings, day, owner or by,
                                     pipeline.stage_names[0], now, holder_finished,
                                     reset_by=by if reset_attempts else None)
    return GateResult(decision.action, reason, store.read().attempts(day), reset_from,
                      reconciled)


def enter_stage(pipeline: Pipeline, settings: Settings, day: date, *, stage: str, owner: str,
                force: bool, cleared: bool, now: datetime, clears: int = 0,
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
    reconcile_intent(pipeline, settings, day, now, holder_finished, owner)
    decision = stage_decision(store.read(), day, max_attempts=settings.max_attempts,
                              force=force, cleared=cleared, command=pipeline.run_command)
    if decision.action is Action.RUN:
        ensure(settings, found)
        claim_to_change(pipeline, settings, day, owner, stage, now, holder_finished)
    return decision
