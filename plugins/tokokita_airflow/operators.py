"""The watermark gate and the stage operators: each calls the same package functions as the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from tokokita_airflow.retry import GateRetryPolicy, WatermarkRetryPolicy
from tokokita_airflow.runtime import (
    holder_finished,
    partition_date,
    pipeline_settings,
    run_cleared,
    run_flag,
    run_owner,
    run_type,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tokokita_etl.runner.declaration import Pipeline


class WatermarkGateOperator(BaseOperator):
    """Decide, from the watermark, whether this run processes partition D.

    - D already succeeded and no `force`: write a `skipped` manifest, skip the stages; a run
      a person cleared reprocesses D instead (Clear is Airflow's re-run gesture).
    - attempts >= max_attempts and no `reset_attempts`: fail at once, no retry, and say how
      to unblock.
    - a scheduled catch-up run for a date older than `lookback_days`: skip.
    - a partition built from another pipeline's results whose upstream dates are all missing:
      fail at once, no retry, no attempt: nothing was built and no report published; the
      `no_input` alert goes to the notifiers.
    - another live run of D holds it: skip, naming the holder.
    - `reset_attempts`: set attempts to 0, recorded with when and by which run.
    When D is processed, this run claims it, so two runs of one date never interleave.
    `force` and `reset_attempts` are the run's params (the trigger form's toggles): the stages
    read the same params, so a forced run is forced in every task.

    When the state (or the warehouse, whose identity it checks) cannot be reached, Airflow
    retries the gate with the task's `retries` (`GateRetryPolicy`); every other failure fails
    it at once.

    :param pipeline: the declared pipeline whose watermark decides (`runner.declaration`).
    """

    template_fields: Sequence[str] = ()
    ui_color = "#fff3cd"

    def __init__(self, *, pipeline: Pipeline, **kwargs) -> None:
        kwargs.setdefault("retry_policy", GateRetryPolicy())
        super().__init__(**kwargs)
        self.pipeline = pipeline

    def execute(self, context: Context) -> dict[str, Any]:
        """Apply the watermark rules for D (a refused database login fails at once)."""
        from tokokita_airflow.connections import failing_at_once

        try:
            with failing_at_once(self.log):
                return self._gate(context)
        except AirflowFailException as refused:
            raise _refusal(refused) from None

    def _gate(self, context: Context) -> dict[str, Any]:
        from tokokita_etl.runner.policy import Action
        from tokokita_etl.runner.sequence import open_run

        pipeline = self.pipeline
        settings = pipeline_settings(pipeline)
        day = partition_date(context, settings, self.pipeline.grain)
        now = datetime.now(UTC)
        owner = run_owner(context)
        force = run_flag(context, "force")
        reset = run_flag(context, "reset_attempts")
        cleared = run_cleared(context)
        self.log.info("This %s run processes partition %s (force=%s, reset_attempts=%s%s)",
                      run_type(context), day, force, reset, ", cleared" if cleared else "")
        decision = open_run(pipeline, settings, day, force=force, reset_attempts=reset, now=now,
                            by=owner, trigger=owner, run_type=run_type(context),
                            cleared=cleared, holder_finished=holder_finished,
                            clock=lambda: datetime.now(UTC))
        if decision.held:
            self.log.warning("Skipped: %s", decision.message)
            raise AirflowSkipException(decision.message)
        if decision.reconciled is not None:
            self.log.warning("%s needs re-run: %s", day, decision.reconciled)
        if decision.reset_from is not None:
            self.log.warning("reset_attempts: attempts of %s reset from %d to 0 by %s "
                             "(recorded in the watermark's resets)", day, decision.reset_from,
                             owner)
        if decision.action is Action.SKIP:
            self.log.info("Skipped: %s; manifest %s", decision.message,
                          decision.refused.manifest)
            raise AirflowSkipException(decision.message)
        if decision.action is Action.BLOCKED:
            self.log.error("Blocked: %s", decision.message)
            _end_of_run(self.log, settings, "fail", decision.refused.summary, context)
            raise AirflowFailException(decision.message)
        if decision.action is Action.NO_INPUT:  # nothing built: no success, and no retry
            self.log.error("No input, no attempt recorded: %s", decision.message)
            _end_of_run(self.log, settings, "no_input", decision.refused.summary, context)
            raise AirflowFailException(decision.message)
        self.log.info("Decision: %s", decision.message)
        from tokokita_airflow.notifiers import alert
        from tokokita_etl.runner.notify import start_line

        alert(settings, "start", context, start_line(settings.pipeline, day, now, owner),
              partition_date=day.isoformat(), warn=self.log.warning)
        return {"partition_date": day.isoformat(), "attempts_before": decision.attempt}


def _refusal(refused: AirflowFailException) -> AirflowFailException:
    """`refused`, to be raised again from `execute` without the frames below it: Airflow
    logs every AirflowFailException with its traceback ("Task failed with exception"), and
    a refusal's message is its whole story (the detail is logged on the line before), so
    the traceback holds Airflow's frames and `execute` only."""
    return refused.with_traceback(None)


def _end_of_run(log: Any, settings: Any, kind: str, summary: dict[str, Any],
                context: Any) -> None:
    """The task that ends a run logs its summary line and alerts its notifiers with it
    (`tokokita_airflow.notifiers`): `success`, plus `recovered` when the date's previous
    outcome was a failure, `no_input` (kind `no_input`), or `failure` (kind `fail`);
    `ping_url` is one of them."""
    from tokokita_airflow.notifiers import alert, configured
    from tokokita_etl.runner.notify import recovered_from, summary_line

    line = summary_line(summary)
    log.info("%s", line)
    day, status = summary.get("partition_date"), summary.get("status")
    event = kind if kind in ("success", "no_input") else "failure"
    alert(settings, event, context, line, partition_date=day, status=status, summary=summary,
          warn=log.warning)
    if event == "success" and configured(settings, "recovered"):
        from tokokita_etl.runner.stores import state_store

        previous = recovered_from(state_store(settings).manifests(date.fromisoformat(day)),
                                  summary.get("trigger"))
        if previous is not None:
            log.info("%s recovered: its previous outcome was %s (%s)", day,
                     previous.get("status"), previous.get("run_id"))
            alert(settings, "recovered", context, line, partition_date=day, status=status,
                  summary=summary, previous=previous, warn=log.warning)


def stopped_by_airflow(stage: str, when: str) -> str:
    """The reason recorded for a stage stopped from outside, `when` ("while it ran", "before
    it ran")."""
    return f"stage {stage} stopped by Airflow {when} (the task was marked or cleared)"


def _release_claim(context: Context) -> None:
    """on_failure_callback: a stage failed for good (never called for a try that Airflow
    retries), so D is free for the next run, and the run's end is logged and pinged. When the
    state cannot be reached with the run's connections (missing, login refused), the claim
    stays until its TTL and the alert says why."""
    from tokokita_airflow.connections import ConnectionProblem, source_of
    from tokokita_airflow.runtime import configured_settings
    from tokokita_etl.errors import AccessDeniedError
    from tokokita_etl.runner.claims import release_date
    from tokokita_etl.runner.outcomes import latest_summary, refusal

    task = context["task"]
    log = task.log
    pipeline = task.pipeline
    day, owner = partition_date(context, configured_settings(pipeline), pipeline.grain), \
        run_owner(context)
    if getattr(task, "_stopped", False):  # a person's gesture, recorded as such: no alert
        from tokokita_etl.runner.claims import release_date, stop_ended_run

        settings = pipeline_settings(pipeline)
        # stopped before its stage began (its intent, if any, is not noted yet)
        stop_ended_run(settings, day, owner, stopped_by_airflow(task.stage, "before it ran"),
                       getattr(task, "_clears", 0), stage=task.stage)
        release_date(settings, day, owner)
        return
    summary = None
    try:
        settings = pipeline_settings(pipeline)
        release_date(settings, day, owner)
        summary = latest_summary(settings, day, owner)
        error = "the stage failed before its outcome was recorded"
    except (ConnectionProblem, AccessDeniedError) as exc:
        settings, error = configured_settings(pipeline), refusal(exc, source_of(exc))
        log.warning("The claim on %s stays until its TTL: %s", day, error)
    summary = summary or {
        "event": "tokokita_run", "partition_date": day.isoformat(), "trigger": owner,
        "status": "failed", "error": error}
    _end_of_run(log, settings, "fail", summary, context)


def _callbacks(value: Any) -> list[Any]:
    """A task's callback argument (None, one callable or a list) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


class EtlStageOperator(BaseOperator):
    """Run one pipeline stage for partition D.

    The stage applies the watermark rules itself, because clearing its task re-runs it
    without the gate (`sequence.enter_stage`): a cleared stage of a done date reprocesses it, as
    `force` does (Clear is Airflow's re-run gesture); on a blocked date it fails at once
    without an attempt, and while another run holds D it is skipped. When the staged inputs
    of the stage are gone (removed after a success, or written on another machine) the
    stages before it run again first; they are deterministic, so nothing changes.

    A failure that counts is one recorded attempt. An unusable partition fails at once
    without Airflow retries; transient errors are retried (with exponential backoff) while
    the date has attempts left, whatever `retries` says (`WatermarkRetryPolicy`). The
    pipeline's last stage also records the success, writes the manifest and emits the asset
    event of its outlets with the partition date. A failure for good releases D's claim
    (`on_failure_callback`, before any callback of the task's own or of `default_args`).

    :param pipeline: the declared pipeline (`runner.declaration`).
    :param stage: the name of one of its stages.
    :param on_failure_callback: the task's own failure callbacks, called after the release.
    """

    template_fields: Sequence[str] = ()
    ui_color = "#d4edda"

    def __init__(self, *, pipeline: Pipeline, stage: str, on_failure_callback: Any = None,
                 **kwargs) -> None:
        kwargs.setdefault("retry_policy", WatermarkRetryPolicy(pipeline))
        super().__init__(on_failure_callback=[_release_claim, *_callbacks(on_failure_callback)],
                         **kwargs)
        self.pipeline = pipeline
        self.stage = pipeline.stage(stage).name

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the stage under the watermark rules; record a failed attempt when it raises
        (a refused database login fails at once)."""
        from tokokita_airflow.connections import failing_at_once

        try:
            with failing_at_once(self.log):
                return self._stage(context)
        except AirflowFailException as refused:
            raise _refusal(refused) from None

    def _stage(self, context: Context) -> dict[str, Any]:
        from tokokita_etl.errors import ConcurrentRunError
        from tokokita_etl.runner.claims import claim_started
        from tokokita_etl.runner.policy import Action
        from tokokita_etl.runner.sequence import close_run, enter_stage
        from tokokita_etl.runner.staging import release_working_copy

        pipeline = self.pipeline
        settings = pipeline_settings(pipeline)
        day = partition_date(context, settings, self.pipeline.grain)
        self._lineage = (settings, day, None)
        owner = run_owner(context)
        now = datetime.now(UTC)
        self._clears = int(getattr(context["dag_run"], "clear_number", 0) or 0)
        self.log.info("Stage %s of partition %s", self.stage, day)
        unfinished = self._upstream_not_run(context)
        if unfinished:
            reason = (f"{unfinished} did not finish its work in this run (marked success while "
                      f"it ran?): {day} needs a re-run; clear the run or trigger the date to "
                      "run it")
            # Airflow's own "Skipping task." line carries the reason only as a field
            self.log.warning("Skipped: %s", reason)
            raise AirflowSkipException(reason)
        try:
            decision = enter_stage(pipeline, settings, day, stage=self.stage, owner=owner,
                                   force=run_flag(context, "force"),
                                   cleared=run_cleared(context), now=now, clears=self._clears,
                                   holder_finished=holder_finished)
        except ConcurrentRunError as exc:
            self.log.warning("Skipped: %s", exc)
            raise AirflowSkipException(str(exc)) from None
        if decision.action is Action.SKIP:
            self.log.info("Skipped: %s", decision.reason)
            raise AirflowSkipException(decision.reason)
        if decision.action is Action.BLOCKED:  # (its manifest is written)
            self.log.error("Blocked, no attempt recorded: %s", decision.reason)
            raise AirflowFailException(decision.reason)
        if decision.action is Action.NO_INPUT:  # (its manifest is written)
            self.log.error("No input, no attempt recorded: %s", decision.reason)
            raise AirflowFailException(decision.reason)
        try:
            self.log.info("Running: %s", decision.reason)
            started = claim_started(settings, day, owner, now)
            result = self._run_stage(pipeline, settings, day, owner, started)
            self._lineage = (settings, day, result)
            meta = {"partition_date": day.isoformat(), "stage": self.stage,
                    "duration_ms": result.get("duration_ms")}
            if self.stage == pipeline.stage_names[-1]:  # the last stage records the success
                outcome = close_run(pipeline, settings, day, owner=owner, started=started,
                                    now=datetime.now(UTC), trigger=owner)
                for asset in self.outlets:
                    context["outlet_events"][asset].extra = {
                        "partition_date": day.isoformat(), "gold": outcome.entry.get("gold"),
                        "checksums": outcome.entry.get("checksums"), "run_id": outcome.run_id,
                    }
                for warning in outcome.entry.get("warnings", []):
                    self.log.warning("%s succeeded with a warning: %s", day, warning)
                self.log.info("%s succeeded (attempt %d); manifest %s", day, outcome.attempt,
                              outcome.manifest)
                _end_of_run(self.log, settings, "success", outcome.summary, context)
                self._lineage = (settings, day, result)
                meta.update(gold=outcome.entry.get("gold"), attempt=outcome.attempt,
                            checksums=outcome.entry.get("checksums"))
            return meta
        finally:
            release_working_copy(settings, day)

    def _upstream_not_run(self, context: Context) -> str | None:
        """The upstream stage task of this run that is `success` without having returned from
        its work, or None: a stage returns its result as an XCom, so a successful upstream
        stage that has none was marked success while it ran (Airflow then starts this task
        at once, before the marked one has even stopped), and its output is not there. A
        clear keeps the XComs of the tasks it leaves alone; an upstream stage that failed,
        and the gate, are the watermark rules' business (`enter_stage`)."""
        ti = context.get("ti")
        if ti is None or not self.has_dag():
            return None
        stages = [task_id for task_id in sorted(self.upstream_task_ids)
                  if isinstance(self.dag.get_task(task_id), EtlStageOperator)]
        missing = [task_id for task_id in stages
                   if ti.xcom_pull(task_ids=task_id, key="return_value") is None]
        if not missing:
            return None
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=missing,
                                    run_ids=[ti.run_id]).get(ti.run_id, {})
        return next((task_id for task_id in missing if states.get(task_id) == "success"), None)

    def on_kill(self) -> None:
        """Airflow stops this task while it runs (a person marked it success or failed, or
        cleared it; the supervisor sends SIGTERM, then SIGKILL 5 s later): the stage stops
        where it is, so its warehouse transaction rolls back and no file is half-written,
        and the run is recorded as stopped, not as a failure of the partition
        (`RunStoppedError`)."""
        from tokokita_etl.errors import RunStoppedError

        self._stopped = True
        self.log.warning("Airflow stops stage %s while it runs: rolling back, no failure "
                         "recorded", self.stage)
        raise RunStoppedError(stopped_by_airflow(self.stage, "while it ran"),
                              clears=getattr(self, "_clears", 0))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage inputs and outputs of this stage's run of D, with row counts and the
        validate checks (`tokokita_airflow.lineage`); called by the OpenLineage provider's
        listener, only when lineage is on, also for a failed task. A stage that did not finish
        (failed, skipped) reports its datasets without counts; a failed validate reports its
        checks, the failed ones as unsuccessful assertions."""
        from tokokita_airflow.lineage import operator_lineage

        settings, day, result = getattr(self, "_lineage", (None, None, None))
        if settings is None:
            from airflow.providers.openlineage.extractors import OperatorLineage

            return OperatorLineage()
        return operator_lineage(self.pipeline, settings, day, self.stage, result)

    def _run_stage(self, pipeline: Any, settings: Any, day: date, owner: str,
                   started: datetime) -> dict[str, Any]:
        """Run this stage (after the stages whose staged output is gone); a failure is
        recorded (an attempt unless its kind says otherwise) and raised as Airflow should
        see it: skipped for a missing partition, failed without retry
        (`AirflowFailException`) for a partition error or a failure that is no attempt,
        re-raised otherwise (the retry policy decides)."""
        from tokokita_etl.errors import MissingPartitionError, RunStoppedError, ValidationError
        from tokokita_etl.runner.policy import ErrorKind, classify, failures_since_success
        from tokokita_etl.runner.sequence import close_run
        from tokokita_etl.runner.staging import WARNING_PREFIX, fetch_inputs, run_stage
        from tokokita_etl.runner.stores import state_store

        stage = self.stage
        try:
            rebuild = fetch_inputs(pipeline, settings, day, self.stage)
            if rebuild:
                self.log.info("The staged inputs of %s are gone; running %s again first "
                              "(deterministic: same output)", self.stage, ", ".join(rebuild))
            for stage in [*rebuild, self.stage]:
                result, lines = run_stage(pipeline, settings, day, stage)
                for line in lines:
                    if line.startswith(WARNING_PREFIX):
                        self.log.warning("%s", line)
                    else:
                        self.log.info("%s", line)
            return result
        except Exception as failure:
            from tokokita_airflow.connections import named

            exc = named(failure)  # a refused login names its Airflow connection
            if getattr(self, "_stopped", False) and not isinstance(exc, RunStoppedError):
                # the stop interrupted a database call, which surfaced its own error (such as
                # "another command is already in progress"): the stop is the cause, and it is
                # no failure of the partition, so the reason is the stop's alone
                self.log.info("The stop interrupted a call, which raised: %s", exc)
                exc = RunStoppedError(stopped_by_airflow(self.stage, "while it ran"),
                                      clears=self._clears)
            if isinstance(exc, ValidationError) and exc.result is not None:
                self._lineage = (settings, day, exc.result)  # the failed checks too
            kind = classify(exc)
            # the run ends here unless Airflow retries the stage (the claim stays for the try)
            ends = isinstance(exc, RunStoppedError | MissingPartitionError) or kind in (
                ErrorKind.PARTITION, ErrorKind.NOT_AN_ATTEMPT)
            outcome = close_run(pipeline, settings, day, owner=owner, started=started,
                                now=datetime.now(UTC), trigger=owner, error=exc, stage=stage,
                                release=ends)
            if isinstance(exc, RunStoppedError):
                self.log.warning("Stopped, no failure recorded: %s", outcome.error)
                raise AirflowFailException(f"{stage}: {outcome.error}") from None
            if isinstance(exc, MissingPartitionError):
                self.log.info("Skipped, no attempt recorded: %s", outcome.error)
                raise AirflowSkipException(outcome.error) from None
            failures = failures_since_success(state_store(settings).read().entry(day))
            self.log.error("Stage %s failed for %s (%s error; %d of %d attempts used): %s",
                           stage, day, kind.value, failures, settings.max_attempts,
                           outcome.error)
            if kind is ErrorKind.PARTITION:
                raise AirflowFailException(f"{stage}: {outcome.error}: fix the partition, then "
                                           "clear the run or trigger the date") from None
            if ends:
                raise AirflowFailException(f"{stage}: {outcome.error}") from None
            raise
