"""A run of one partition, in the steps the command line and the Airflow tasks share.

- `open_run`: the gate a run passes before its first stage (the watermark's decision, the
  claim and the intent, in that order); a run that does not proceed (skipped, blocked, held
  by another run) gets its manifest here.
- `enter_stage`: the same rules for a later stage, which Airflow can run on its own (a
  cleared task).
- `runner.staging.run_stage`: one stage.
- `close_run`: the outcome (success, or the failure that ended the run) and the release.

`run_for_date` is the command line's run, the steps in one process. On Airflow each task is
a process of its own: the gate operator opens, each stage operator enters and runs its stage,
the last one closes.

Pings (`notify.ping`, when `ping_url` is set) on the command line: `/start` once the gate
decides to process the date, then the success URL or `/fail` with the run's summary line as
the body; a blocked date, and a partition with no input (its upstream dates all missing), ping
`/fail` (each needs a person); a skipped run (done, held by another run) pings nothing. On
Airflow the notifiers do it (the `no_input` event).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING

from tokokita_etl.errors import (
    BlockedError,
    ConcurrentRunError,
    EtlError,
    InputsNotSettledError,
    NoInputError,
)
from tokokita_etl.runner.claims import (
    check_writable,
    claim_to_change,
    reconcile_intent,
    release_date,
)
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.identity import ensure, verify
from tokokita_etl.runner.inputs import changed_since_processed, reprocess_change
from tokokita_etl.runner.liveness import cli_holder_finished, cli_owner
from tokokita_etl.runner.notify import ping, start_line, summary_line
from tokokita_etl.runner.outcomes import (
    BLOCKED,
    NO_INPUT,
    SKIPPED,
    WAITING,
    RunOutcome,
    finish_failure,
    finish_refused,
    finish_skip,
    finish_success,
)
from tokokita_etl.runner.policy import Action, Decision, gate_decision, stage_decision
from tokokita_etl.runner.schedule import utc_now
from tokokita_etl.runner.staging import WARNING_PREFIX, run_stage
from tokokita_etl.runner.status import upstream_inputs
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import STOPPED, STOPPED_CLEARS, HolderCheck, Watermark

if TYPE_CHECKING:
    from tokokita_etl.runner.upstream import UpstreamInputs
from tokokita_etl.settings.model import Settings
from tokokita_etl.warehouse.database import Warehouse

Log = Callable[[str], None]
Clock = Callable[[], datetime]
#: `log_format` values: `text` (progress lines only) or `json` (plus the summary line)
LOG_FORMATS = ("text", "json")


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
    #: the outcome of a run that does not proceed (skipped, blocked, held by another run:
    #: its manifest is written), or None when it runs (`open_run`)
    refused: RunOutcome | None = None
    #: another live run holds the date: the rules were not applied (`open_run`)
    held: bool = False
    #: why a done partition is processed again for its changed inputs (its raw file under
    #: `on_raw_change: reprocess`, an upstream result it was built from)
    inputs_changed: str = ""
    #: its upstream dates are not all settled: nothing was decided (`open_run`: `waiting`)
    waiting: bool = False


def _inputs_changed(pipeline: Pipeline, settings: Settings, state: Watermark, day: date,
                    inputs: UpstreamInputs | None) -> str:
    """Why a done partition is to be processed again: its raw file changed
    (`inputs.reprocess_change`), or an upstream result it was built from
    (`UpstreamInputs.change_reason`); no look at a partition that is not done."""
    if not state.has_success(day):
        return ""
    if inputs is not None:
        return inputs.change_reason(day, state.entry(day))
    return str(reprocess_change(pipeline, settings, state.entry(day), day) or "")


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
    found = verify(pipeline, settings, store.read(), where=store.location)
    holder_finished = _asked_once(holder_finished)  # the intent's and the claim's holder
    reconciled = reconcile_intent(pipeline, settings, day, now, holder_finished, owner or by)
    state = store.read()
    inputs = upstream_inputs(pipeline, settings, now, [day])
    if inputs is not None and not inputs.settled(day):
        return GateResult(Action.SKIP, inputs.waiting_message(day), state.attempts(day),
                          reconciled=reconciled, waiting=True)
    inputs_changed = "" if force or cleared else \
        _inputs_changed(pipeline, settings, state, day, inputs)
    decision = gate_decision(state, day, run_type=run_type, now=now,
                             lookback_days=settings.lookback_days,
                             max_attempts=settings.max_attempts, force=force,
                             reset_attempts=reset_attempts, cleared=cleared,
                             inputs_changed=inputs_changed, tz=settings.timezone,
                             no_input=inputs.no_input(day) if inputs is not None else "",
                             command=pipeline.run_command)
    reason = decision.reason
    if decision.action is Action.SKIP and state.has_success(day) and (
            change := changed_since_processed(pipeline, settings, state.entry(day), day)):
        reason = f"{reason}; {change}"
    reset_from = None
    if decision.action is Action.RUN:
        ensure(pipeline, settings, found)
        reset_from = claim_to_change(pipeline, settings, day, owner or by,
                                     pipeline.stage_names[0], now, holder_finished,
                                     reset_by=by if reset_attempts else None)
    return GateResult(decision.action, reason, store.read().attempts(day), reset_from,
                      reconciled,
                      inputs_changed=inputs_changed if decision.action is Action.RUN else "")


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
    found = verify(pipeline, settings, watermark, where=store.location)
    intent = watermark.intent(day)
    if intent is not None and intent["run"] == owner and intent.get(STOPPED) \
            and int(intent.get(STOPPED_CLEARS, 0)) >= clears:
        return Decision(Action.SKIP, f"an earlier stage of this run was stopped "
                                     f"({intent[STOPPED]}): {day} needs a re-run; clear the "
                                     "run or trigger the date to run it")
    holder_finished = _asked_once(holder_finished)
    reconcile_intent(pipeline, settings, day, now, holder_finished, owner)
    state = store.read()
    inputs = upstream_inputs(pipeline, settings, now, [day])
    if inputs is not None and not inputs.settled(day):
        return Decision(Action.SKIP, inputs.waiting_message(day))
    inputs_changed = "" if force or cleared else \
        _inputs_changed(pipeline, settings, state, day, inputs)
    decision = stage_decision(state, day, max_attempts=settings.max_attempts,
                              force=force, cleared=cleared, inputs_changed=inputs_changed,
                              no_input=inputs.no_input(day) if inputs is not None else "",
                              command=pipeline.run_command)
    if decision.action is Action.BLOCKED:
        finish_refused(settings, day, BlockedError(decision.reason), status=BLOCKED,
                       started=now, now=now, trigger=owner)
    elif decision.action is Action.NO_INPUT:
        finish_refused(settings, day, NoInputError(decision.reason), status=NO_INPUT,
                       started=now, now=now, trigger=owner)
    elif decision.action is Action.RUN:
        ensure(pipeline, settings, found)
        claim_to_change(pipeline, settings, day, owner, stage, now, holder_finished)
    return decision


def open_run(pipeline: Pipeline, settings: Settings, day: date, *, force: bool,
             reset_attempts: bool, now: datetime, by: str, trigger: str,
             run_type: str = "manual", owner: str | None = None, cleared: bool = False,
             holder_finished: HolderCheck = cli_holder_finished,
             clock: Clock = utc_now) -> GateResult:
    """`gate`, and the manifest of a run that does not proceed: `skipped` (done, out of the
    look-back, or another live run holds the date: `held`), `blocked`, `waiting`, `no input`
    (its upstream dates all missing). `trigger` is recorded in the manifest; `clock` gives its
    end."""
    try:
        result = gate(pipeline, settings, day, force=force, reset_attempts=reset_attempts,
                      now=now, by=by, run_type=run_type, owner=owner, cleared=cleared,
                      holder_finished=holder_finished)
    except ConcurrentRunError as exc:
        outcome = finish_refused(settings, day, exc, status=SKIPPED, started=now, now=clock(),
                                 trigger=trigger)
        return GateResult(Action.SKIP, str(exc), outcome.attempt, refused=outcome, held=True)
    if result.waiting:
        result.refused = finish_refused(settings, day, InputsNotSettledError(result.message),
                                        status=WAITING, started=now, now=clock(),
                                        trigger=trigger)
    elif result.action is Action.SKIP:
        result.refused = finish_skip(settings, day, started=now, now=clock(), trigger=trigger,
                                     message=result.message)
    elif result.action is Action.BLOCKED:
        result.refused = finish_refused(settings, day, BlockedError(result.message),
                                        status=BLOCKED, started=now, now=clock(),
                                        trigger=trigger)
    elif result.action is Action.NO_INPUT:
        result.refused = finish_refused(settings, day, NoInputError(result.message),
                                        status=NO_INPUT, started=now, now=clock(),
                                        trigger=trigger)
    return result


def give_up_waiting(pipeline: Pipeline, settings: Settings, day: date,
                    inputs: UpstreamInputs, *, started: datetime, now: datetime,
                    trigger: str) -> str:
    """Record that a run of `day` stopped waiting for its upstream dates: its `waiting`
    manifest (what the sweep builds the partition after); the reason, naming the dates."""
    message = inputs.waiting_message(day)
    finish_refused(settings, day, InputsNotSettledError(message), status=WAITING,
                   started=started, now=now, trigger=trigger)
    return message


def close_run(pipeline: Pipeline, settings: Settings, day: date, *, owner: str,
              started: datetime, now: datetime, trigger: str,
              error: BaseException | None = None, stage: str = "",
              release: bool = True) -> RunOutcome:
    """End the run holding `day`: its success (the fields `pipeline.outcome` takes from the
    stage records), or the failure `error` raised in `stage` (an attempt when it counts); the
    manifest; then, with `release`, the claim (`release=False`: the run goes on, as when
    Airflow retries the stage)."""
    try:
        if error is None:
            return finish_success(pipeline, settings, day, started=started, now=now,
                                  trigger=trigger)
        return finish_failure(pipeline, settings, day, error, stage=stage, started=started,
                              now=now, trigger=trigger)
    finally:
        if release:
            release_date(settings, day, owner)


def run_for_date(pipeline: Pipeline, settings: Settings, day: date, *, force: bool = False,
                 reset_attempts: bool = False, now: Clock = utc_now,
                 log: Log = print, log_format: str = "text",
                 emit: Log = print) -> RunOutcome:
    """Run every stage for `day` under the watermark rules: the command line's `run`.

    With `log_format="json"` the run's summary line (`notify.run_summary`) is passed to
    `emit` when the run ends.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    Warehouse.from_settings(settings)  # a bad URL is a config error up front

    def warn(message: str) -> None:
        log(f"{WARNING_PREFIX} {message}")

    started = now()
    perf = time.perf_counter()
    owner = cli_owner(started)
    opened = open_run(pipeline, settings, day, force=force, reset_attempts=reset_attempts,
                      now=started, by="cli", trigger="cli", owner=owner, clock=now)
    if opened.held:
        log(f"[error] {opened.message}")
    else:
        if opened.reconciled is not None:
            log(f"[gate] needs re-run: {opened.reconciled}")
        if opened.reset_from is not None:
            log(f"[gate] failures of {day} reset from {opened.reset_from} to 0 "
                f"(attempt {opened.attempt} kept)")
        if opened.waiting:
            log(f"[waiting] {opened.message}")
        elif opened.action is Action.SKIP:
            log(f"[skip] {opened.message}")
        elif opened.action is Action.BLOCKED:
            log(f"[blocked] {opened.message}")
        elif opened.action is Action.NO_INPUT:
            log(f"[no input] {opened.message}")
        elif force or opened.inputs_changed:
            log(f"[gate] {opened.message}")
    if opened.refused is not None:
        outcome = opened.refused
        if opened.action in (Action.BLOCKED, Action.NO_INPUT):  # each needs a person's look
            ping(settings.ping_url, "fail", summary_line(outcome.summary), warn=warn)
    else:
        ping(settings.ping_url, "start", start_line(settings.pipeline, day, started, "cli"),
             warn=warn)
        outcome = _run_stages(pipeline, settings, day, owner, started, now, log)
        ping(settings.ping_url, "success" if outcome.status == "success" else "fail",
             summary_line(outcome.summary), warn=warn)
    elapsed = round((time.perf_counter() - perf) * 1000)
    log(f"[done] {outcome.run_id} status={outcome.status} duration={elapsed}ms "
        f"exit={outcome.exit_code}")
    if log_format == "json":
        emit(summary_line(outcome.summary))
    return outcome


def _run_stages(pipeline: Pipeline, settings: Settings, day: date, owner: str, started: datetime,
                now: Clock, log: Log) -> RunOutcome:
    stage = pipeline.stage_names[0]
    try:
        for stage in pipeline.stage_names:
            _, lines = run_stage(pipeline, settings, day, stage)
            for line in lines:
                log(line)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # an interrupt: nothing to record, the date is free
            release_date(settings, day, owner)
            raise
        # recorded; an attempt unless policy.classify says otherwise
        log(f"[error] {stage}: {exc if isinstance(exc, EtlError) else f'{type(exc).__name__}: {exc}'}")
        return close_run(pipeline, settings, day, owner=owner, started=started, now=now(),
                         trigger="cli", error=exc, stage=stage)
    outcome = close_run(pipeline, settings, day, owner=owner, started=started, now=now(),
                        trigger="cli")
    if pipeline.done_line is not None:
        log(f"[summary] {day}: {pipeline.done_line(outcome.entry)}")
    return outcome
