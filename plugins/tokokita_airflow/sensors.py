"""`RawPartitionSensor`: wait (without a worker slot) for a pipeline's raw partition D, or skip
when it is not due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from tokokita_airflow.runtime import (
    configured_settings,
    partition_date,
    refuse_run_conf,
    run_anchor,
    run_type,
)
from tokokita_etl.runner.settings import PipelineSettings
from tokokita_etl.settings.model import default

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tokokita_etl.runner.declaration import Pipeline

#: the `wait_window_hours` setting's default (the DAG passes the configured window)
DEFAULT_WAIT_WINDOW = timedelta(hours=default("wait_window_hours", PipelineSettings))


class RawPartitionSensor(BaseSensorOperator):
    """Succeed when the pipeline's raw file of D exists; keep waiting only for the current
    scheduled run.

    A scheduled run waits without holding a worker slot, in reschedule mode or, when
    deferrable, on the triggerer (`RawPartitionTrigger`), until its deadline: `wait_window`
    after its fire time. Past it, and at once for catch-up, backfill and manual runs of a date
    whose file is missing, the run ends *skipped*: no file is not our job.

    One clock: the deadline (`wait_deadline`) is what every poke checks (`policy.sensor_decision`),
    what the trigger waits for, and the `timeout` handed to `defer()`, so that Airflow itself
    ends a deferral at the same instant when no triggerer runs (a skip, through `soft_fail`).
    Airflow's own sensor `timeout`, counted from the first poke rather than the fire time, is
    left at Airflow's default and is not the deadline.

    :param pipeline: the declared pipeline whose raw file of D it waits for
        (`Pipeline.raw`: the folder setting and the file name).
    :param wait_window: how long after the scheduled fire time the file may still arrive.
    :param raw_dir: folder of the raw partitions (templated); default the pipeline's setting.
    :param deferrable: wait on the triggerer instead of rescheduling; default Airflow's
        `[operators] default_deferrable` setting, as Airflow's standard sensors.
    """

    template_fields: Sequence[str] = ("raw_dir",)
    ui_color = "#e8f4fd"

    def __init__(self, *, pipeline: Pipeline, wait_window: timedelta = DEFAULT_WAIT_WINDOW,
                 raw_dir: str | None = None, deferrable: bool | None = None, **kwargs) -> None:
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", 300)
        kwargs.setdefault("soft_fail", True)  # a deferral timeout means "no file": skipped
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.wait_window = wait_window
        self.raw_dir = raw_dir
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable = deferrable

    def wait_deadline(self, context: Context) -> datetime:
        """The instant waiting ends: `wait_window` after the run's fire time."""
        from tokokita_etl.runner.policy import wait_deadline

        return wait_deadline(run_anchor(context), self.wait_window)

    def execute(self, context: Context) -> Any:
        """Poke once; when deferrable and still waiting, hand the wait to the triggerer."""
        # a refused run configuration, and a missing or unusable object-storage connection,
        # fail the run here: inside the poke loop, `soft_fail` would turn them into a skip
        refuse_run_conf(context)
        conn_id = self._use_object_storage()
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        from tokokita_airflow.triggers import RawPartitionTrigger

        deadline = self.wait_deadline(context)
        settings = self._settings()
        filepath = str(self._path(settings, partition_date(context, settings, self.pipeline.grain)))
        self.defer(
            trigger=RawPartitionTrigger(
                filepath=filepath, deadline=deadline.isoformat(), poll_interval=self.poke_interval,
                conn_id=conn_id),
            method_name="execute_complete",
            timeout=max(deadline - datetime.now(UTC), timedelta(0)),
        )
        return None

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        """Resume after the trigger: present is success, timeout is a skip."""
        if event.get("status") != "present":
            message = (f"Partition file {event.get('filepath')} did not arrive within the wait "
                       "window: skipping, no file is not our job")
            self.log.warning("Skipped: %s", message)
            raise AirflowSkipException(message)
        self.log.info("Partition file arrived: %s", event["filepath"])

    def _use_object_storage(self) -> str:
        """When the raw folder is an object-storage URL: the `object_storage_conn_id`
        connection, given to the storage (`connections.use_object_storage`); its id, or ""."""
        from tokokita_airflow.connections import use_object_storage
        from tokokita_etl.storage import is_url

        settings = self._settings()
        if not is_url(self._raw_dir(settings)):
            return ""
        conn_id = settings.object_storage_conn_id
        use_object_storage(conn_id)
        return conn_id

    def _settings(self):
        return configured_settings(self.pipeline)

    def _raw_dir(self, settings):
        from pathlib import Path

        from tokokita_etl.storage import is_url

        if not self.raw_dir:
            return self.pipeline.raw.folder(settings)
        return self.raw_dir if is_url(self.raw_dir) else Path(self.raw_dir)

    def _path(self, settings, day):
        """The raw file of `day` in the folder this sensor watches."""
        return self.pipeline.raw.path(settings, day, self._raw_dir(settings))

    def poke(self, context: Context) -> bool:
        """Check partition D; raise skip when waiting longer is pointless."""
        from tokokita_etl.settings.layout import partition_file_exists

        settings = self._settings()
        day = partition_date(context, settings, self.pipeline.grain)
        path = self._path(settings, day)
        if partition_file_exists(path):
            self.log.info("Partition %s is present: %s", day, path)
            return True
        from tokokita_etl.runner.policy import SensorAction, sensor_decision

        kind = run_type(context)
        deadline = self.wait_deadline(context)
        decision = sensor_decision(present=False, run_type=kind, fire_time=run_anchor(context),
                                   now=datetime.now(UTC), wait_window=self.wait_window)
        if decision is SensorAction.SKIP:
            reason = (f"{kind} run" if kind != "scheduled"
                      else f"wait window ended at {deadline.isoformat()}")
            message = (f"Partition {day} is missing ({path}); {reason}: "
                       "skipping, no file is not our job")
            self.log.warning("Skipped: %s", message)
            raise AirflowSkipException(message)
        self.log.info("Partition %s not there yet (%s); waiting until %s", day, path,
                      deadline.isoformat())
        return False


class UpstreamSettledSensor(BaseSensorOperator):
    """Succeed when every upstream date of the run's partition is settled (done, or missing
    after its wait window: `runner.upstream`); keep waiting, in reschedule mode, for at most
    `wait_window` from the first poke.

    Each poke logs the dates that hold the partition. At the end of the window the sensor
    records the run as `waiting` (its manifest names those dates) and ends *skipped*; once the
    dates settle, the sweep DAG builds the partition (`runner.propagation.sweep`). The window
    counts from the first poke, not the fire time, so that the runs of a catch-up wait for the
    upstream's own catch-up.

    :param pipeline: the declared pipeline built from another's results (`Pipeline.upstream`).
    :param wait_window: how long the run waits for its upstream dates.
    """

    ui_color = "#e8f4fd"

    def __init__(self, *, pipeline: Pipeline, wait_window: timedelta = DEFAULT_WAIT_WINDOW,
                 **kwargs) -> None:
        kwargs.setdefault("mode", "reschedule")
        # a poke reads two watermarks: cheap, and a week follows its days' catch-up closely
        kwargs.setdefault("poke_interval", 60)
        super().__init__(**kwargs)
        if pipeline.upstream is None:
            raise ValueError(f"pipeline {pipeline.name!r} is not built from another "
                             "pipeline's results: wait for its raw files (RawPartitionSensor)")
        self.pipeline = pipeline
        self.wait_window = wait_window

    def poke(self, context: Context) -> bool:
        """Whether the partition's upstream dates are settled; skip once the window is over;
        fail at once (no retry: Airflow's sensor lets the failure through) for a run whose
        configuration or partition key names no partition of the pipeline."""
        from tokokita_airflow.runtime import pipeline_settings
        from tokokita_etl.errors import ConfigError
        from tokokita_etl.runner.sequence import give_up_waiting
        from tokokita_etl.runner.status import upstream_inputs

        settings = pipeline_settings(self.pipeline)
        try:
            key = partition_date(context, settings, self.pipeline.grain)
        except ConfigError as exc:  # a key that starts no partition: no retry can help
            raise AirflowFailException(str(exc)) from None
        now = datetime.now(UTC)
        inputs = upstream_inputs(self.pipeline, settings, now, [key])
        if inputs.settled(key):
            self.log.info("The upstream dates of %s are settled: %s", key,
                          ", ".join(f"{d.day} ({d.label})" for d in inputs.of(key)))
            return True
        first = context["ti"].get_first_reschedule_date(context) or now
        deadline = first + self.wait_window
        if now >= deadline:
            message = give_up_waiting(self.pipeline, settings, key, inputs, started=first,
                                      now=now, trigger=run_type(context))
            self.log.warning("Skipped: %s; the wait window ended at %s (the sweep builds it "
                             "once they settle)", message, deadline.isoformat())
            raise AirflowSkipException(message)
        self.log.info("%s; waiting until %s", inputs.waiting_message(key), deadline.isoformat())
        return False
