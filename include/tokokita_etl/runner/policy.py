"""The attempts policy: every decision about one partition date, in one place.

Which dates are due, whether a run or a stage of date D proceeds, skips or is blocked, whether
a failure counts as an attempt and whether Airflow may retry it. The command line, the
Airflow sensor, gate, stage operators and retry policy, `due_runs` and the status rows all
call these functions; none of them compares attempts with `max_attempts` itself. What
`max_attempts` counts is the failures since the date's last success
(`failures_since_success`), not the total of recorded outcomes (`attempt`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from tokokita_etl.errors import (
    BlockedError,
    ConcurrentRunError,
    ConfigError,
    DataError,
    MissingPartitionError,
    RunStoppedError,
    StateError,
    ValidationError,
    WarehouseError,
)
from tokokita_etl.runner.schedule import DAILY, Grain, local_today
from tokokita_etl.runner.watermark import FAILED, failures_since_success

if TYPE_CHECKING:
    from tokokita_etl.runner.watermark import Watermark


class Action(StrEnum):
    """What a run, or one stage of it, does with date D."""

    RUN = "run"
    SKIP = "skip"
    BLOCKED = "blocked"
    #: a partition built from another pipeline's results whose inputs are all missing:
    #: nothing to build, nothing attempted, no report published (`decide`'s `no_input`)
    NO_INPUT = "no input"


class SensorAction(StrEnum):
    """What the raw-partition sensor does on one poke."""

    PRESENT = "present"
    WAIT = "wait"
    SKIP = "skip"


class ErrorKind(StrEnum):
    """How a failed stage is treated.

    partition: the partition itself is unusable (missing column, undecodable, no header) or
        fails validation: one attempt, and retrying cannot help, so no Airflow retry.
    transient: the warehouse is unreachable or locked, the disk is full: one attempt, and
        Airflow retries it with exponential backoff while attempts are left.
    not_an_attempt: nothing was tried (partition missing, configuration, corrupt watermark,
        blocked date, another run holds the date), or the run was stopped from outside (a
        person's mark): no attempt, no retry.
    unexpected: anything else: one attempt, retried like a transient error.
    """

    PARTITION = "partition"
    TRANSIENT = "transient"
    NOT_AN_ATTEMPT = "not_an_attempt"
    UNEXPECTED = "unexpected"


@dataclass(frozen=True)
class Decision:
    """What a run or stage for one date does, and why (a sentence for logs and manifests)."""

    action: Action
    reason: str


def at_max_attempts(attempts: int, max_attempts: int) -> bool:
    """Whether a date has used all its attempts: the one comparison with `max_attempts`."""
    return attempts >= max_attempts


def is_blocked(state: Watermark, day: date, max_attempts: int) -> bool:
    """No success, and `max_attempts` failures since the last one: only a run with
    reset_attempts proceeds."""
    return not state.has_success(day) and \
        at_max_attempts(failures_since_success(state.entry(day)), max_attempts)


#: the command line's program
PROGRAM = "tokokita-etl"
#: the command that runs a date of the default pipeline
RUN_COMMAND = f"{PROGRAM} run"


def unblock_hint(day: date, command: str = RUN_COMMAND) -> str:
    """The exact action that unblocks `day`, for the command line (`command`: the one that
    runs the pipeline's dates) and for Airflow."""
    return (f"fix the partition or the cause, then run it with reset_attempts: "
            f"`{command} --date {day} --reset-attempts`, or trigger the DAG with "
            f'partition key {day} and {{"reset_attempts": true}}')


def blocked_message(state: Watermark, day: date, max_attempts: int,
                    command: str = RUN_COMMAND) -> str:
    """Why `day` is blocked and how to unblock it."""
    entry = state.entry(day)
    last = f"; last error ({entry.get('failed_stage', '?')}): {entry['error']}" \
        if entry.get("error") else ""
    return (f"{day} is blocked after {failures_since_success(entry)} attempts "
            f"(max_attempts={max_attempts}) that failed since its last success{last}; it needs "
            f"manual intervention. To unblock: {unblock_hint(day, command)}")


def decide(state: Watermark, day: date, *, max_attempts: int, force: bool = False,
           reset_attempts: bool = False, cleared: bool = False, inputs_changed: str = "",
           no_input: str = "", command: str = RUN_COMMAND) -> Decision:
    """Apply the watermark rules to one date: skip if done, block at max attempts, else run.

    Max attempts stops retrying a date that keeps failing: it counts the failures since the
    date's last success (`failures_since_success`), so a forced re-run of a done date is a
    deliberate act that is never blocked and never brings the date closer to blocked. A run
    a person cleared (`cleared`: Airflow's re-run gesture) reprocesses a done date as `force`
    does; on any other date it follows the same rules as a new run. `inputs_changed`: why a
    done partition's inputs are to be processed again (its raw file changed under
    `on_raw_change: reprocess`, `inputs.reprocess_change`; an upstream result it was built
    from changed, `upstream.UpstreamInputs.change_reason`), which reprocesses it as `force`
    does. `no_input`: why a partition built from another pipeline's results has nothing to
    build (every one of its upstream dates is missing, `UpstreamInputs.no_input`): NO_INPUT,
    whatever else is asked (a forced run would publish an empty report); it is no attempt, and
    a date that arrives later makes the partition due again. `command` runs the
    pipeline's dates on the command line (named in a blocked date's message).
    """
    if no_input:
        return Decision(Action.NO_INPUT, no_input)
    succeeded = state.has_success(day)
    if succeeded and not (force or cleared or inputs_changed):
        return Decision(Action.SKIP, f"{day} already succeeded (use force to reprocess)")
    if not reset_attempts and is_blocked(state, day, max_attempts):
        return Decision(Action.BLOCKED, blocked_message(state, day, max_attempts, command))
    failures = failures_since_success(state.entry(day))
    if succeeded:
        why = "force" if force else "clear" if cleared else inputs_changed
        return Decision(Action.RUN, f"{why}: reprocessing {day}, which already succeeded "
                                    f"(attempt {state.attempts(day)})")
    why = f"{failures} of {max_attempts} attempts used (failures since the last success)"
    if reset_attempts:
        why = f"reset_attempts: failures of {day} reset from {failures} to 0"
    return Decision(Action.RUN, f"processing {day}: {why}")


def days_back(day: date, days: int) -> date:
    """`day` less `days` days, or the first date there is when that would be earlier (a
    window reaching back from a clock near year 1)."""
    return day - timedelta(days=min(days, (day - date.min).days))


def days_before(day: date, days: int) -> list[date]:
    """The `days` dates before `day`, oldest first (from `days_back`: fewer near year 1)."""
    first = days_back(day, days)
    return [first + timedelta(days=n) for n in range((day - first).days)]


def past_partitions(now: datetime, lookback_days: int, tz: str,
                    grain: Grain = DAILY) -> list[date]:
    """The keys of the partitions inside the lookback window whose every date is past
    (before today in `tz`), oldest first: each date for a daily grain, each Monday starting
    a whole past week for a weekly one."""
    today = local_today(now, tz)
    return [day for day in days_before(today, lookback_days)
            if grain.start(day) == day and grain.next(day) <= today]


def due_runs(state: Watermark, now: datetime, present: Callable[[date], bool],
             lookback_days: int, max_attempts: int, *, tz: str,
             inputs_changed: Callable[[date], str] | None = None,
             no_input: Callable[[date], str] | None = None,
             grain: Grain = DAILY) -> list[date]:
    """Past partitions inside the lookback window (`past_partitions`) whose inputs are there
    (`present`: its raw file, `RawFiles.present`; its upstream dates settled) that `decide`
    would run, told by `inputs_changed` why a done one is to be processed again
    (`inputs.reprocess_change`, `UpstreamInputs.change_reason`; none: no done one is) and by
    `no_input` why one has nothing to build (`UpstreamInputs.no_input`: never due)."""
    return [day for day in past_partitions(now, lookback_days, tz, grain)
            if present(day)
            and decide(state, day, max_attempts=max_attempts,
                       inputs_changed=inputs_changed(day)
                       if inputs_changed and state.has_success(day) else "",
                       no_input=no_input(day) if no_input else "").action
            is Action.RUN]


def outside_lookback(day: date, now: datetime, lookback_days: int, tz: str) -> bool:
    """Whether `day` is older than the lookback window at `now` (due_runs would not list it)."""
    return day < days_back(local_today(now, tz), lookback_days)


def gate_decision(state: Watermark, day: date, *, run_type: str, now: datetime,
                  lookback_days: int, max_attempts: int, tz: str, force: bool = False,
                  reset_attempts: bool = False, cleared: bool = False, inputs_changed: str = "",
                  no_input: str = "", command: str = RUN_COMMAND) -> Decision:
    """The gate's rule for one run: the lookback applies to the scheduler's own runs (a
    cleared one is a person's request), then `decide`."""
    if run_type == "scheduled" and not cleared and outside_lookback(day, now, lookback_days, tz):
        return Decision(Action.SKIP, f"{day} is older than lookback_days={lookback_days}: a "
                                     "scheduled catch-up does not process it (use a backfill "
                                     "or a manual trigger)")
    return decide(state, day, max_attempts=max_attempts, force=force,
                  reset_attempts=reset_attempts, cleared=cleared, inputs_changed=inputs_changed,
                  no_input=no_input, command=command)


def stage_decision(state: Watermark, day: date, *, max_attempts: int, force: bool = False,
                   cleared: bool = False, inputs_changed: str = "", no_input: str = "",
                   command: str = RUN_COMMAND) -> Decision:
    """Whether one stage task of a run of `day` runs now.

    A stage runs again without passing the gate when its task is cleared, so it applies the
    same rules as the gate: a cleared stage of a done date reprocesses it (Clear is Airflow's
    re-run gesture), a blocked date fails at once without an attempt.
    """
    return decide(state, day, max_attempts=max_attempts, force=force, cleared=cleared,
                  inputs_changed=inputs_changed, no_input=no_input, command=command)


def run_conf_problem(run_type: str, conf: dict | None, partition_key: str | None) -> str | None:
    """Why a run's configuration is refused, or None. The date a run processes is its
    partition key; `partition_date`, the former param, is refused unless it names that same
    date (a run made before partitions, cleared): a backfill's conf, one for every run of its
    range, may not name one at all."""
    given = (conf or {}).get("partition_date")
    if not given:
        return None
    if run_type == "backfill":
        return (f"a backfill processes each run's own date (its partition key); its run "
                f"configuration may not set partition_date (got {given!r}, which would point "
                "every run of the range at one date): create the backfill without it")
    if str(given).strip() != partition_key:
        return (f"partition_date is not a parameter of this DAG (got {given!r}): a run "
                f"processes its partition key ({partition_key or 'none given'}); trigger the "
                f"run with partition key {given} instead (the trigger form's Partition Key, "
                "`partition_key` in the REST API)")
    return None


def wait_deadline(fire_time: datetime, wait_window: timedelta) -> datetime:
    """The instant a scheduled run stops waiting for its missing partition."""
    return fire_time + wait_window


def still_waiting(*, scheduled: bool, fire_time: datetime, now: datetime,
                  wait_window: timedelta) -> bool:
    """Whether a missing partition is still awaited: only by a scheduled run, until its
    `wait_deadline`; after it (or for any other run) the partition is missing. The sensor
    and the status rows both ask this."""
    return scheduled and now < wait_deadline(fire_time, wait_window)


#: the states of a date that settle it for a pipeline built from its results: done, or
#: missing (no input after its scheduled run's wait window)
SETTLED = ("done", "missing")
#: `DateFacts.changed` of a raw file that changed since the date's success
RAW_CHANGED = "raw changed"


@dataclass(frozen=True)
class DateFacts:
    """What the runner read of a date besides its watermark entry, for `date_state`."""

    #: "live": a live run holds its claim; "unreadable": its claim cannot be read; ""
    claim: str = ""
    #: its input is there (its raw file; its upstream dates settled)
    present: bool = False
    #: the fire time of the scheduled run that processes it, None when none will
    fire: datetime | None = None
    wait_window: timedelta = timedelta(0)
    #: `due_runs` would run it now
    due: bool = False
    #: a done date's input changed since its success: RAW_CHANGED or "changed" (the
    #: upstream results it was built from), else ""
    changed: str = ""
    #: the changed raw file is gone (its results stay)
    change_gone: bool = False
    #: built from another pipeline's results, all of them missing
    no_input: bool = False
    #: built from another pipeline's results (its input is not a raw file)
    from_upstream: bool = False


@dataclass(frozen=True)
class InputState:
    """A date's state (`runner.status.DateState`'s value) and its label (`failed 1/3`)."""

    state: str
    label: str

    @property
    def settled(self) -> bool:
        return self.state in SETTLED


def date_state(watermark: Watermark, day: date, now: datetime, facts: DateFacts,
               max_attempts: int) -> InputState:
    """The state of a date from its watermark entry and `facts`: the one rule of it. The
    status rows' `state` and `label` are this (`runner.status` adds only their words), and
    `settled` asks it."""
    entry = watermark.entry(day)
    if facts.claim == "unreadable":
        return InputState("running", "running (claim unreadable)")
    if facts.claim == "live":
        return InputState("running", "running")
    blocked = is_blocked(watermark, day, max_attempts)
    used = f"{failures_since_success(entry)}/{max_attempts}"
    if watermark.intent(day) is not None:
        return InputState("blocked" if blocked else "needs re-run", "needs re-run")
    if entry.get("needs_rerun") and not blocked:
        return InputState("needs re-run", "needs re-run")
    if facts.no_input:
        return InputState("no input", "no input")
    if watermark.has_success(day):
        if facts.changed and facts.due and not facts.change_gone:
            return InputState("due", f"due ({facts.changed})")
        return InputState("done", "done (changed)" if facts.changed == RAW_CHANGED else "done")
    if blocked:
        return InputState("blocked", f"blocked {used}")
    if entry.get("status") == FAILED:
        return InputState("failed", f"failed {used}")
    if facts.due:
        return InputState("due", "due")
    if facts.from_upstream and not facts.present:
        return InputState("waiting", "waiting for days")
    if facts.present:
        return InputState("not processed", "not processed")
    if facts.fire is not None and still_waiting(scheduled=True, fire_time=facts.fire, now=now,
                                                wait_window=facts.wait_window):
        return InputState("waiting", "waiting for file")
    return InputState("missing", "missing")


def settled(upstream: Watermark, keys: Iterable[date], now: datetime, *,
            facts: Callable[[date], DateFacts], max_attempts: int) -> dict[date, InputState]:
    """The one rule of settledness: the state of each upstream date of `keys` at `now`
    (`date_state`, from the `upstream` watermark and what the runner read of each date),
    settled when done or missing. The gate, the upstream sensor, the sweep and the status
    rows of a pipeline built from another's results all ask it."""
    return {day: date_state(upstream, day, now, facts(day), max_attempts) for day in keys}


def sensor_decision(*, present: bool, run_type: str, fire_time: datetime, now: datetime,
                    wait_window: timedelta) -> SensorAction:
    """Present, wait (only a scheduled run inside its window) or skip (no file: not our job)."""
    if present:
        return SensorAction.PRESENT
    if still_waiting(scheduled=run_type == "scheduled", fire_time=fire_time, now=now,
                     wait_window=wait_window):
        return SensorAction.WAIT
    return SensorAction.SKIP


_TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EAGAIN, errno.EINTR,
                               errno.ETIMEDOUT, errno.ECONNREFUSED, errno.ECONNRESET})


def classify(error: BaseException) -> ErrorKind:
    """Which kind of failure `error` is (see `ErrorKind`)."""
    if isinstance(error, MissingPartitionError | ConfigError | StateError | BlockedError
                  | ConcurrentRunError | RunStoppedError):
        return ErrorKind.NOT_AN_ATTEMPT
    if isinstance(error, DataError | ValidationError):
        return ErrorKind.PARTITION
    if isinstance(error, WarehouseError):
        return ErrorKind.TRANSIENT if error.transient else ErrorKind.UNEXPECTED
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return ErrorKind.TRANSIENT
    if isinstance(error, ConnectionError):  # refused, reset, aborted, a broken pipe
        return ErrorKind.TRANSIENT
    return ErrorKind.UNEXPECTED


def counts_as_attempt(error: BaseException) -> bool:
    """Whether a run that failed with `error` used one of its date's attempts."""
    return classify(error) is not ErrorKind.NOT_AN_ATTEMPT


def retry_decision(error: BaseException, state: Watermark, day: date,
                   max_attempts: int) -> Decision:
    """Whether Airflow may retry a stage that failed with `error` (after it was recorded).

    RUN: retry (transient or unexpected errors while the failures since the date's last
    success are below `max_attempts`); BLOCKED: the date is out of attempts; SKIP: retrying
    cannot help (a partition error, or nothing was tried).
    """
    kind = classify(error)
    if kind is ErrorKind.PARTITION:
        return Decision(Action.SKIP, f"the partition of {day} itself is at fault: no retry "
                                     "(fix the file, then trigger again)")
    if kind is ErrorKind.NOT_AN_ATTEMPT:
        return Decision(Action.SKIP, "nothing was attempted: no retry")
    failures = failures_since_success(state.entry(day))
    if at_max_attempts(failures, max_attempts):
        return Decision(Action.BLOCKED, f"{day} has {failures} recorded failures since its "
                                        f"last success (max_attempts={max_attempts}): no "
                                        "retry, whatever `retries` says")
    return Decision(Action.RUN, f"{kind.value} error with attempts left: retry")
