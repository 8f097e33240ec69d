"""The inputs of a pipeline built from another pipeline's results (`Upstream`): whether a
partition's upstream dates are settled, which dates hold it, and whether the results it was
built from have changed since.

An upstream date is **settled** when its state (`policy.settled`, the upstream's own rules)
is *done*, or *missing* (no file, and its scheduled run's wait window is over); any other state
(waiting, due, running, failed, needs re-run, blocked, not processed) holds every partition
that spans it. A success records what it was built from (`built_from`): for each upstream
date, the checksum its success recorded (`Upstream.checksum`, None for a missing date) and
the date's attempt. A partition is due again when one of those checksums is not the one the
upstream holds now; a date reprocessed to the same checksum changes nothing, and says so.

A partition whose upstream dates are **all** missing has **no input** (`no_input`): nothing
to build, so it is not due and no run builds it (`policy.decide`), rather than a success that
publishes an empty report. Once one of its dates arrives and is done, it is due like any
partition whose inputs settled. A partition built with some dates missing names them
(`missing_from`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from tokokita_etl.runner.declaration import Pipeline, Upstream
from tokokita_etl.runner.policy import SETTLED, InputState
from tokokita_etl.runner.watermark import Watermark

#: the watermark field of a success that says what it was built from
BUILT_FROM = "built_from"
MISSING = "missing"


@dataclass(frozen=True)
class InputDate:
    """One upstream date as a partition sees it."""

    day: date
    state: str
    label: str
    #: the checksum this pipeline is built from, of the date's success (None: no success)
    checksum: str | None
    attempt: int

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    def recorded(self) -> dict[str, Any]:
        """What a success built from this date records of it."""
        return {"checksum": self.checksum, "attempt": self.attempt}


def upstream_dates(pipeline: Pipeline, keys: Iterable[date]) -> list[date]:
    """The upstream dates of the partitions `keys` of `pipeline`, in order."""
    return sorted({day for key in keys for day in pipeline.grain.dates(key)})


class UpstreamInputs:
    """The upstream dates of some partitions of `pipeline`, from their `states`
    (`policy.settled`) and the upstream watermark they were read from
    (`status.upstream_inputs` reads it once for both)."""

    def __init__(self, pipeline: Pipeline, watermark: Watermark,
                 states: Mapping[date, InputState]) -> None:
        if pipeline.upstream is None:
            raise ValueError(f"pipeline {pipeline.name!r} has no upstream")
        self.pipeline, self.upstream = pipeline, pipeline.upstream
        recorded = recorded_inputs(self.upstream, watermark, list(states))
        self.dates: dict[date, InputDate] = {
            day: InputDate(day, found.state, found.label or found.state,
                           **recorded[day.isoformat()])
            for day, found in states.items()}

    def of(self, key: date) -> list[InputDate]:
        """The upstream dates of partition `key`, in order."""
        return [self.dates[day] for day in self.pipeline.grain.dates(key)]

    def settled(self, key: date) -> bool:
        """Whether every upstream date of `key` is settled."""
        return all(found.settled for found in self.of(key))

    def holding(self, key: date) -> str:
        """The dates that hold `key`, with their states (`2026-11-12 (failed 1/3)`), or ""."""
        return ", ".join(f"{found.day} ({found.label})" for found in self.of(key)
                         if not found.settled)

    def no_input(self, key: date) -> str:
        """Why `key` has nothing to build (every upstream date is missing), or ""."""
        found = self.of(key)
        if not found or any(date_.state != MISSING for date_ in found):
            return ""
        return (f"{key} has no input: all {len(found)} of its {self.upstream.name} "
                f"dates ({found[0].day} to {found[-1].day}) are missing (no file after their "
                "wait window); nothing is built and no report is published; it is built once "
                "one of them arrives and is done")

    def waiting_message(self, key: date) -> str:
        """Why `key` waits (its holding dates), for logs, manifests and the status rows."""
        return (f"{key} waits for its {self.upstream.name} dates to settle (done, or "
                f"missing after their wait window): {self.holding(key)}")

    def built_from(self, key: date) -> dict[str, dict[str, Any]]:
        """What a success of `key` built now records of its upstream dates."""
        return {found.day.isoformat(): found.recorded() for found in self.of(key)}

    def compare(self, key: date, entry: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        """(changed, unchanged) since `entry`'s success: the dates whose checksum is not the one
        it was built from, and those reprocessed since to the same checksum, each as a
        sentence. An entry without `built_from` compares as nothing."""
        recorded = entry.get(BUILT_FROM)
        if not isinstance(recorded, Mapping):
            return [], []
        changed, unchanged = [], []
        for found in self.of(key):
            before = recorded.get(found.day.isoformat()) or {}
            if before.get("checksum") != found.checksum:
                changed.append(f"{found.day} {_how_changed(before, found)}")
            elif found.attempt > int(before.get("attempt") or 0) and found.checksum:
                unchanged.append(f"{found.day} reprocessed, unchanged")
        return changed, unchanged

    def change_reason(self, key: date, entry: Mapping[str, Any]) -> str:
        """Why a done partition is to be built again (its inputs changed), or ""."""
        changed, _ = self.compare(key, entry)
        return "; ".join(changed)


def recorded_inputs(upstream: Upstream, watermark: Watermark, dates: Iterable[date]
                    ) -> dict[str, dict[str, Any]]:
    """What a success built now from `dates` records of them (its `built_from`): each date's
    checksum (`Upstream.checksum`) of its success in the upstream's `watermark`, None for a
    date without one, and its attempt."""
    found = {}
    for day in dates:
        checksums = watermark.entry(day).get("checksums") or {}
        found[day.isoformat()] = {
            "checksum": checksums.get(upstream.checksum(day)) if watermark.has_success(day)
            else None,
            "attempt": watermark.attempts(day)}
    return found


def missing_from(entry: Mapping[str, Any]) -> list[str]:
    """The upstream dates a success was built without (no success of theirs when it was
    built: missing), from its `built_from`, in order."""
    recorded = entry.get(BUILT_FROM)
    if not isinstance(recorded, Mapping):
        return []
    return sorted(day for day, found in recorded.items()
                  if isinstance(found, Mapping) and found.get("checksum") is None)


def _how_changed(before: Mapping[str, Any], found: InputDate) -> str:
    if found.checksum is None:
        return "no longer done"
    if before.get("checksum") is None:
        return "processed since, no longer missing"
    return "reprocessed, checksums changed"
