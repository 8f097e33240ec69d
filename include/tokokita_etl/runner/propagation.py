"""Changes that propagate: the partitions due for a reason no scheduled run takes.

A pipeline's timetable makes one run per partition, when its fire time comes. A partition that
becomes due again later, a done date whose raw file changed (`on_raw_change: reprocess`), a
week built from a day whose results changed since, a week whose run gave up before its days
settled or found them all missing (no input) until one arrived, has no run coming: the sweep
(`sweep`) lists each such partition with its reason, and the Airflow sweep DAG triggers one
run of it. A need is named by what it rests on (`Propagation.digest`: the new file's hash and
the date's recorded outcomes), so asking again before its run has finished names the same
run, and the same need never makes two.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import date, datetime

from tokokita_etl.runner.claims import read_claim, settled_watermark
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.inputs import reprocess_change
from tokokita_etl.runner.outcomes import NO_INPUT, WAITING
from tokokita_etl.runner.policy import days_before, past_partitions
from tokokita_etl.runner.schedule import local_today
from tokokita_etl.runner.status import due_partitions, upstream_inputs
from tokokita_etl.runner.stores import state_store
from tokokita_etl.settings.model import Settings

#: the run id prefix of the runs the sweep makes
SWEEP_RUN_PREFIX = "sweep__"


@dataclass(frozen=True)
class Propagation:
    """One partition of a pipeline to run again, and why."""

    pipeline: str
    dag_id: str
    key: date
    reason: str
    #: what the reason rests on: the same need has the same digest
    digest: str

    @property
    def run_id(self) -> str:
        """The id of the one run this need makes."""
        return f"{SWEEP_RUN_PREFIX}{self.key.isoformat()}__{self.digest[:16]}"


def sweep(pipeline: Pipeline, settings: Settings, now: datetime) -> list[Propagation]:
    """The partitions of `pipeline` inside `lookback_days` at `now` that are due again for a
    changed input, oldest first: a done date whose raw file changed (`on_raw_change:
    reprocess`); a done partition an upstream result it was built from changed under; a
    partition never built whose inputs settled after a run of it gave up waiting for them (its
    last manifest says `waiting`), or one of whose inputs arrived after a run of it found none
    (`no input`). A partition a run holds (its claim) is left to that run."""
    if pipeline.upstream is not None:
        return _upstream_sweep(pipeline, settings, now)
    if settings.on_raw_change != "reprocess":
        return []
    state = settled_watermark(settings, now)
    found = []
    for day in days_before(local_today(now, settings.timezone), settings.lookback_days):
        if not state.has_success(day):
            continue
        change = reprocess_change(pipeline, settings, state.entry(day), day)
        if change is None or read_claim(settings, day) is not None:
            continue
        # a done date is never blocked (`policy.decide`): the run this makes reprocesses it
        digest = hashlib.sha256(f"{change.sha256}:{state.attempts(day)}".encode())
        found.append(Propagation(pipeline.name, pipeline.dag_id, day, str(change),
                                 digest.hexdigest()))
    return found


def _upstream_sweep(pipeline: Pipeline, settings: Settings, now: datetime) -> list[Propagation]:
    state = settled_watermark(settings, now)
    inputs = upstream_inputs(pipeline, settings, now, past_partitions(
        now, settings.lookback_days, settings.timezone, pipeline.grain))
    found = []
    for key in due_partitions(pipeline, settings, state, now, inputs):
        if read_claim(settings, key) is not None:
            continue
        if state.has_success(key):
            reason = inputs.change_reason(key, state.entry(key))
            rests_on = json.dumps([inputs.built_from(key), state.attempts(key)], sort_keys=True)
        else:
            last = next(iter(state_store(settings).manifests(key)), {})
            if last.get("status") not in (WAITING, NO_INPUT):
                continue  # its scheduled run is still to come, or under way
            reason = (f"inputs settled after the run started {last.get('started_at', '?')} "
                      "gave up waiting for them" if last["status"] == WAITING else
                      f"an input arrived after the run started {last.get('started_at', '?')} "
                      "found none")
            rests_on = f"{last.get('started_at')}:{last.get('finished_at')}"
        digest = hashlib.sha256(rests_on.encode()).hexdigest()
        found.append(Propagation(pipeline.name, pipeline.dag_id, key, reason, digest))
    return found
