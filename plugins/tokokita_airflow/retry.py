"""When Airflow retries a TokoKita task: `WatermarkRetryPolicy` for the stages (only when
retrying can help and attempts are left), `GateRetryPolicy` for the watermark gate (only when the
state could not be reached)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import RetryDecision, RetryPolicy

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tokokita_etl.runner.declaration import Pipeline


class WatermarkRetryPolicy(RetryPolicy):
    """Apply `tokokita_etl.runner.policy.retry_decision` on the worker, after the failure was recorded.

    Transient and unexpected errors get Airflow's standard retry (the task's `retries`,
    `retry_delay` and exponential backoff) while the date has attempts left; an unusable
    partition, a blocked date and a date out of attempts fail at once.

    :param pipeline: whose watermark it reads; default the pipeline of the task it is
        evaluated for (`EtlStageOperator.pipeline`).
    """

    def __init__(self, pipeline: Pipeline | None = None) -> None:
        self.pipeline = pipeline

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Context | None = None) -> RetryDecision:
        """Decide from the exception and the watermark."""
        if context is None:
            return RetryDecision.default()
        from tokokita_airflow.runtime import partition_date, pipeline_settings
        from tokokita_etl.runner.policy import Action, retry_decision
        from tokokita_etl.runner.stores import state_store

        pipeline = self.pipeline or context["task"].pipeline
        settings = pipeline_settings(pipeline)
        day = partition_date(context, settings, pipeline.grain)
        decision = retry_decision(exception, state_store(settings).read(), day,
                                  settings.max_attempts)
        if decision.action is Action.RUN:
            return RetryDecision.default()
        return RetryDecision.fail(decision.reason)

    def serialize(self) -> dict[str, Any]:
        """Nothing to carry: the policy reads the watermark of its task's pipeline when it is
        evaluated (a DAG parsed on the worker holds its pipeline)."""
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> WatermarkRetryPolicy:
        """Rebuild from `serialize()`."""
        return cls()


class GateRetryPolicy(RetryPolicy):
    """The watermark gate is retried (the task's `retries`, `retry_delay` and backoff) only
    when the state or the warehouse could not be reached or answered (a transient error: a
    restarted database, a dropped connection); any other failure fails at once. The gate
    records nothing before it decides, so a retry is the same decision made again; a blocked
    date and a refused login raise AirflowFailException, which no policy is asked about.
    """

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Context | None = None) -> RetryDecision:
        """Retry a transient error, fail anything else (reads no state: it may be down)."""
        from tokokita_etl.runner.policy import ErrorKind, classify

        kind = classify(exception)
        if kind is ErrorKind.TRANSIENT:
            return RetryDecision.default()
        return RetryDecision.fail(f"the gate failed with a {kind.value} error: no retry")

    def serialize(self) -> dict[str, Any]:
        """Nothing to carry."""
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> GateRetryPolicy:
        """Rebuild from `serialize()`."""
        return cls()
