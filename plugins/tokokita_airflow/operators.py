"""The watermark gate and the stage operators: each calls the same package functions as the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from tokokita_airflow.retry import WatermarkRetryPolicy
from tokokita_airflow.runtime import (
    partition_date,
    pipeline_settings,
    run_owner,
    run_type,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class WatermarkGateOperator(BaseOperator):
    """Decide, from the watermark, whether this run processes partition D.

    - D already succeeded and no `force`: write a `skipped` manifest, skip the stages.
    - attempts >= max_attempts and no `reset_attempts`: fail at once, no retry, and say how
      to unblock.
    - a scheduled catch-up run for a date older than `lookback_days`: skip.
    - `reset_attempts`: set attempts to 0, recorded with when and by which run.
    Then claim D for this run, so two runs of one date never interleave.

    :param force: reprocess a date that already succeeded (templated); None: the `force` param.
    :param reset_attempts: unblock a date at max attempts (templated); None: the param.
    """

    template_fields: Sequence[str] = ("force", "reset_attempts")
    ui_color = "#fff3cd"

    def __init__(self, *, force: Any = None, reset_attempts: Any = None, **kwargs) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.force = force
        self.reset_attempts = reset_attempts

    def execute(self, context: Context) -> dict[str, Any]:
        """Apply the watermark rules for D."""
        from tokokita_etl.errors import BlockedError, ConcurrentRunError
        from tokokita_etl.pipeline import claim_date, finish_failure, finish_skip, gate

        settings = pipeline_settings()
        day = partition_date(context)
        now = datetime.now(UTC)
        owner = run_owner(context)
        params = context.get("params") or {}
        force = params.get("force") if self.force is None else self.force
        reset = params.get("reset_attempts") if self.reset_attempts is None else self.reset_attempts
        decision = gate(settings, day, force=_flag(force), reset_attempts=_flag(reset), now=now,
                        by=owner, run_type=run_type(context))
        if decision.reset_from is not None:
            self.log.info("Attempts of %s reset from %d to 0 by %s", day, decision.reset_from, owner)
        if decision.action == "skip":
            outcome = finish_skip(settings, day, started=now, now=datetime.now(UTC), trigger=owner,
                                  message=decision.message)
            self.log.info("%s; manifest %s", decision.message, outcome.manifest)
            raise AirflowSkipException(decision.message)
        if decision.action == "blocked":
            finish_failure(settings, day, BlockedError(decision.message), stage="gate",
                           started=now, now=datetime.now(UTC), trigger=owner)
            raise AirflowFailException(decision.message)
        try:
            claim_date(settings, day, owner, now)
        except ConcurrentRunError as exc:
            raise AirflowFailException(str(exc)) from None
        self.log.info("Processing %s: %s", day, decision.message)
        return {"partition_date": day.isoformat(), "attempts_before": decision.attempt}


def _release_claim(context: Context) -> None:
    """on_failure_callback: a stage failed for good, so D is free for the next run."""
    from tokokita_etl.pipeline import release_date

    release_date(pipeline_settings(), partition_date(context), run_owner(context))


class EtlStageOperator(BaseOperator):
    """Run one pipeline stage for partition D; a failure is one recorded attempt.

    Retries are bounded by the watermark: `WatermarkRetryPolicy` stops them once the date
    reaches max_attempts, whatever `retries` says. The `publish_gold` stage also records the
    success, writes the manifest and emits the gold asset event with the partition date.

    :param stage: one of extract, transform, load, validate, publish_gold.
    """

    template_fields: Sequence[str] = ()
    ui_color = "#d4edda"

    def __init__(self, *, stage: str, **kwargs) -> None:
        kwargs.setdefault("retry_policy", WatermarkRetryPolicy())
        kwargs.setdefault("on_failure_callback", _release_claim)
        super().__init__(**kwargs)
        self.stage = stage

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the stage; record a failed attempt when it raises."""
        from tokokita_etl.errors import BlockedError
        from tokokita_etl.pipeline import (
            blocked_reason,
            claim_started,
            finish_failure,
            finish_success,
            release_date,
            run_stage,
        )

        settings = pipeline_settings()
        day = partition_date(context)
        owner = run_owner(context)
        now = datetime.now(UTC)
        blocked = blocked_reason(settings, day)
        if blocked:  # a cleared stage of a blocked date: attempts stay bounded
            finish_failure(settings, day, BlockedError(blocked), stage=self.stage, now=now,
                           trigger=owner, started=now)
            raise AirflowFailException(blocked)
        try:
            result, lines = run_stage(settings, day, self.stage)
        except Exception as exc:
            outcome = finish_failure(
                settings, day, exc, stage=self.stage, now=now, trigger=owner,
                started=claim_started(settings, day, owner, now))
            self.log.error("Stage %s failed for %s (attempt %d of %d recorded): %s", self.stage,
                           day, outcome.attempt, settings.max_attempts, outcome.error)
            raise
        for line in lines:
            self.log.info("%s", line)
        meta = {"partition_date": day.isoformat(), "stage": self.stage,
                "duration_ms": result.get("duration_ms")}
        if self.stage == "publish_gold":
            outcome = finish_success(settings, day, now=datetime.now(UTC), trigger=owner,
                                     started=claim_started(settings, day, owner, now))
            release_date(settings, day, owner)
            for asset in self.outlets:
                context["outlet_events"][asset].extra = {
                    "partition_date": day.isoformat(), "gold": result["gold"],
                    "checksums": outcome.entry["checksums"], "run_id": outcome.run_id,
                }
            self.log.info("%s succeeded (attempt %d); manifest %s", day, outcome.attempt,
                          outcome.manifest)
            meta.update(gold=result["gold"], attempt=outcome.attempt,
                        checksums=outcome.entry["checksums"])
        return meta
