"""`WatermarkRetryPolicy`: Airflow retries a stage only while its date has attempts left."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import RetryDecision, RetryPolicy

if TYPE_CHECKING:
    from airflow.sdk import Context


class WatermarkRetryPolicy(RetryPolicy):
    """Fail without retry once the watermark shows attempts >= max_attempts, else default."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Context | None = None) -> RetryDecision:
        """Decide on the worker, after the stage recorded its failed attempt."""
        if context is None:
            return RetryDecision.default()
        from tokokita_airflow.runtime import partition_date, pipeline_settings
        from tokokita_etl.pipeline import may_retry, state_store

        settings = pipeline_settings()
        day = partition_date(context)
        if may_retry(settings, day):
            return RetryDecision.default()
        attempts = state_store(settings).read().attempts(day)
        return RetryDecision.fail(
            f"{day} has {attempts} recorded attempts (max_attempts={settings.max_attempts}); "
            "no retry whatever `retries` says")

    def serialize(self) -> dict[str, Any]:
        """Nothing to carry: the policy reads the watermark when it is evaluated."""
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> WatermarkRetryPolicy:
        """Rebuild from `serialize()`."""
        return cls()
