"""`run_for_date`: the command line's run of one date of a pipeline, composing the gate and
the stages.

The Airflow tasks call the same pieces one by one (`runner.sequence.gate`,
`runner.staging.run_stage`, `runner.outcomes.finish_*`), each in its own process.

Pings (`notify.ping`, when `ping_url` is set): `/start` once the gate decides to process the
date, then the success URL or `/fail` with the run's summary line as the body; a blocked date
pings `/fail` (it needs a person); a skipped run (done, held by another run) pings nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date, datetime

from tokokita_etl.errors import (
    BlockedError,
    ConcurrentRunError,
    EtlError,
)
from tokokita_etl.runner.claims import release_date
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.liveness import cli_owner
from tokokita_etl.runner.notify import ping, start_line, summary_line
from tokokita_etl.runner.outcomes import (
    BLOCKED,
    SKIPPED,
    RunOutcome,
    finish_failure,
    finish_refused,
    finish_skip,
    finish_success,
)
from tokokita_etl.runner.policy import Action
from tokokita_etl.runner.schedule import utc_now
from tokokita_etl.runner.sequence import gate
from tokokita_etl.runner.staging import WARNING_PREFIX, run_stage
from tokokita_etl.settings.model import Settings
from tokokita_etl.warehouse.database import Warehouse

Log = Callable[[str], None]
Clock = Callable[[], datetime]
#: `log_format` values: `text` (progress lines only) or `json` (plus the summary line)
LOG_FORMATS = ("text", "json")


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
    try:
        decision = gate(pipeline, settings, day, force=force, reset_attempts=reset_attempts,
                        now=started, by="cli", owner=owner)
    except ConcurrentRunError as exc:
        log(f"[error] {exc}")
        outcome = finish_refused(settings, day, exc, status=SKIPPED, started=started,
                                 now=now(), trigger="cli")
    else:
        if decision.reconciled is not None:
            log(f"[gate] needs re-run: {decision.reconciled}")
        if decision.reset_from is not None:
            log(f"[gate] failures of {day} reset from {decision.reset_from} to 0 "
                f"(attempt {decision.attempt} kept)")
        if decision.action is Action.SKIP:
            log(f"[skip] {decision.message}")
            outcome = finish_skip(settings, day, started=started, now=now(), trigger="cli",
                                  message=decision.message)
        elif decision.action is Action.BLOCKED:
            log(f"[blocked] {decision.message}")
            outcome = finish_refused(settings, day, BlockedError(decision.message),
                                     status=BLOCKED, started=started, now=now(),
                                     trigger="cli")
            ping(settings.ping_url, "fail", summary_line(outcome.summary), warn=warn)
        else:
            if force:
                log(f"[gate] {decision.message}")
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
        outcome = finish_success(pipeline, settings, day, started=started, now=now(), trigger="cli")
        if pipeline.done_line is not None:
            log(f"[summary] {day}: {pipeline.done_line(outcome.entry)}")
        return outcome
    except Exception as exc:  # recorded; an attempt unless policy.classify says otherwise
        log(f"[error] {stage}: {exc if isinstance(exc, EtlError) else f'{type(exc).__name__}: {exc}'}")
        return finish_failure(pipeline, settings, day, exc, stage=stage, started=started, now=now(),
                              trigger="cli")
    finally:
        release_date(settings, day, owner)
