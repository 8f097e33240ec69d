"""What the runner and the Airflow adapters read of any pipeline's settings: its schedule, its
catch-up window, its retries, its waits and its alerts (`PipelineSettings`); a pipeline whose
input is raw files also says what a changed raw file does (`RawInputSettings`). A pipeline's
own settings are a subclass beside its stages (`orders.settings.OrdersSettings`)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Annotated, Any

from pydantic import PrivateAttr, model_validator

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.layout import catchup_bound
from tokokita_etl.settings.model import SHARED_SETTINGS, SharedSettings, origin, together
from tokokita_etl.settings.values import (
    CatchupDate,
    Count,
    Days,
    Hours,
    HttpUrl,
    OptionalCatchupDate,
    Text,
    cron_problem,
    local_time_problem,
    text_rule,
)


class PipelineSettings(SharedSettings):
    """The shared settings and those the runner reads of a pipeline, from its section of each
    source (`pipelines.<name>.<field>`, `TOKOKITA_<NAME>__<FIELD>`)."""

    #: the name of its watermark: the orders' may be set (their section or the top level);
    #: another pipeline's is its name
    pipeline: Text = "orders"
    cron: Annotated[str, text_rule(problem=cron_problem)] = "30 2 * * *"
    lookback_days: Days = 7
    max_attempts: Count = 3
    #: how long after its scheduled fire time a run waits for its partition file
    wait_window_hours: Hours = 6
    #: how long a run's claim on a date holds before another run may take the date over
    claim_ttl_hours: Hours = 6
    #: the DAG's catch-up window: an ISO 8601 date (its midnight) or date-time, in `timezone`
    #: unless it has an offset
    start_date: CatchupDate = date(2026, 11, 1)
    end_date: OptionalCatchupDate = None
    #: an http(s) URL to ping after each run; empty: none
    ping_url: HttpUrl = ""
    #: the scheduled run for D must have succeeded by this local time (HH:MM, in `timezone`)
    #: on its fire date, else the DAG's deadline alert fires
    deadline_local_time: Annotated[str, text_rule(problem=local_time_problem)] = "06:00"
    #: an http(s) URL the deadline alert POSTs JSON to; empty: the alert is only logged
    deadline_webhook_url: HttpUrl = ""

    #: the settings of the pipeline whose results this one is built from (`with_upstream`)
    _upstream: PipelineSettings | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def check_window(self) -> PipelineSettings:
        """The catch-up window ends after it starts."""
        if self.end_date is not None and self.catchup_end < self.catchup_start:
            raise together(
                f"end_date {self.end_date.isoformat()} ({origin('end_date')}) is before "
                f"start_date {self.start_date.isoformat()} ({origin('start_date')})")
        return self

    def with_upstream(self, upstream: PipelineSettings) -> PipelineSettings:
        """A copy that carries `upstream`: the settings of the pipeline whose results this
        pipeline is built from (its watermark, zone and wait window)."""
        copy = self.model_copy()
        copy._upstream = upstream
        return copy

    @property
    def upstream(self) -> PipelineSettings:
        """The upstream pipeline's settings (`with_upstream`); ConfigError when none."""
        if self._upstream is None:
            raise ConfigError(f"the settings of pipeline {self.pipeline!r} carry no upstream "
                              "pipeline's settings")
        return self._upstream

    @property
    def catchup_start(self) -> datetime:
        """`start_date` as an aware datetime in `timezone` (`catchup_bound`)."""
        return catchup_bound(self.start_date, self.timezone)

    @property
    def catchup_end(self) -> datetime | None:
        """`end_date` as an aware datetime in `timezone`, or None for no end."""
        return None if self.end_date is None else catchup_bound(self.end_date, self.timezone)

    @property
    def wait_window(self) -> timedelta:
        """`wait_window_hours` as a duration."""
        return timedelta(hours=self.wait_window_hours)

    @property
    def deadline_time(self) -> time:
        """`deadline_local_time` as a time of day."""
        return time.fromisoformat(self.deadline_local_time)


PipelineSettings.runner_fields = tuple(name for name in PipelineSettings.model_fields
                                       if name not in SHARED_SETTINGS)
#: the settings the runner reads of every pipeline, beyond the shared ones
RUNNER_SETTINGS = PipelineSettings.runner_fields


class RawInputSettings(PipelineSettings):
    """The settings of a pipeline whose input is raw files (`Pipeline.raw`)."""

    #: a done date whose raw file changed since its success: `flag` shows it (status, the
    #: status page, the gate's skip line); `reprocess` also makes it due and a plain run
    #: reprocesses it; `off` does not look
    on_raw_change: Annotated[str, text_rule(choices=("flag", "reprocess", "off"))] = "flag"



def on_raw_change(settings: Any) -> str:
    """What a changed raw file does for a pipeline with these settings (`off` when its input
    is no raw files)."""
    return getattr(settings, "on_raw_change", "off")
