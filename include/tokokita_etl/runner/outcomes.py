"""How a run's outcome is recorded: every run ends with a manifest (`runs/run-D-HHMMSS.json`,
never overwritten); a success, or a failure that counts, also updates the watermark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from tokokita_etl.errors import (
    EXIT_BLOCKED,
    EXIT_FAILED,
    EXIT_OK,
    BlockedError,
    InputsNotSettledError,
    MissingPartitionError,
    NoInputError,
    RunStoppedError,
)
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.notify import run_summary
from tokokita_etl.runner.policy import counts_as_attempt
from tokokita_etl.runner.staging import drop_staged, stage_durations, stage_records
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import FAILED, STOPPED, SUCCESS
from tokokita_etl.settings.model import Settings

#: a run status in manifests; the watermark only ever holds success or failed (`STOPPED`: a
#: run stopped from outside, such as a person's mark in Airflow)
SKIPPED, BLOCKED, MISSING = "skipped", "blocked", "missing"
#: the manifest status of a run refused because its upstream dates are not settled
WAITING = "waiting"
#: the manifest status of a run refused because its upstream dates are all missing: nothing
#: to build (`upstream.UpstreamInputs.no_input`)
NO_INPUT = "no input"


# -- refusals ----------------------------------------------------------------------------------

def refusal(error: BaseException, source: str) -> str:
    """The one sentence a refused run ends with, wherever it is read (a task's log, the status
    page, `tokokita-etl status`): why, naming `source` (the Airflow connection or the
    setting at fault), and what to do. The error's own text (URLs, the database's answer) is
    the detail, written on the line before it."""
    from tokokita_etl.errors import AccessDeniedError
    from tokokita_etl.runner.identity import WarehouseIdentityError

    if isinstance(error, WarehouseIdentityError):
        return identity_refusal(source)
    if isinstance(error, AccessDeniedError):
        return f"{source}: the database refused its login: correct its login or password"
    return str(error)


def identity_refusal(source: str) -> str:
    """`refusal` of a warehouse that is not the watermark's (`identity.verify`), `source` the
    Airflow connection or setting that names it."""
    return (f"{source} is not the warehouse the watermark describes: point it at that "
            "warehouse, or after a real loss run `tokokita-etl state reconcile`")


# -- outcomes and manifests --------------------------------------------------------------------

@dataclass
class RunOutcome:
    """How one run of one date ended."""

    run_id: str
    status: str  # success | skipped | failed | blocked | missing | waiting | no input | stopped
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


def finish_success(pipeline: Pipeline, settings: Settings, day: date, *, started: datetime,
                   now: datetime, trigger: str) -> RunOutcome:
    """Record a success (attempt + 1) with the fields its stage records give
    (`pipeline.outcome`), write the manifest, drop the staging folder."""
    payload = pipeline.outcome(stage_records(pipeline, settings, day))
    durations = stage_durations(pipeline, settings, day)
    attempt = state_store(settings).record(day, SUCCESS, payload, now)
    run_id, where, body = write_manifest(settings, day, started, now, status=SUCCESS, attempt=attempt,
                          exit_code=EXIT_OK, entry=payload, durations=durations, trigger=trigger)
    drop_staged(settings, day)
    return RunOutcome(run_id, SUCCESS, EXIT_OK, attempt, where, body, entry=payload)


def finish_failure(pipeline: Pipeline, settings: Settings, day: date, error: BaseException, *,
                   stage: str, started: datetime, now: datetime, trigger: str) -> RunOutcome:
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
        if pipeline.before_changes(stage):
            store.clear_intent(day)  # nothing outside staging changed
        elif isinstance(error, RunStoppedError):
            # its stage's transaction rolled back, but an earlier stage may have changed the
            # warehouse: the date needs a re-run, which is no failure of the partition
            store.mark_stopped(day, message, error.clears, stage=stage)
        # from load on the intent stays: its run ends without a recorded outcome, so the next
        # gate records the date as interrupted (the warehouse may hold part of its work)
        attempt = store.read().attempts(day)
        status = BLOCKED if isinstance(error, BlockedError) else (
            WAITING if isinstance(error, InputsNotSettledError) else
            NO_INPUT if isinstance(error, NoInputError) else
            MISSING if isinstance(error, MissingPartitionError) else (
                STOPPED if isinstance(error, RunStoppedError) else FAILED))
    exit_code = getattr(error, "exit_code", EXIT_FAILED)
    run_id, where, body = write_manifest(settings, day, started, now, status=status, attempt=attempt,
                          exit_code=exit_code, entry={}, durations=stage_durations(pipeline, settings, day),
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
