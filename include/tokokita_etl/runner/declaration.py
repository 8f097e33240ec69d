"""What the runner needs to know of a pipeline: its stages in order and what its success records.

A pipeline is declared once, in its own domain package (the orders pipeline in
`tokokita_etl.orders.pipeline`), and passed to every runner function that depends on it;
nothing in the runner reads a process-wide pipeline. A declaration is cheap to import (the
DAG file imports it when it is parsed): its stage functions import their heavy libraries when
they run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.model import Settings

#: a stage: reads its inputs for a partition date, writes its outputs, returns its record
StageRun = Callable[[Settings, date], dict[str, Any]]
#: the log lines a stage's record gives
StageLines = Callable[[dict[str, Any], date], list[str]]
#: the stage records of a successful run (by stage name) -> the watermark fields it records
Outcome = Callable[[Mapping[str, dict[str, Any]]], dict[str, Any]]


@dataclass(frozen=True)
class Stage:
    """One stage: its name (the Airflow task id), what it runs and the lines it prints.

    `changes_stores`: whether it changes anything outside the run's staging folder (the
    warehouse, a published file). A run that ends before the first such stage leaves every
    store as it was, so its intent record can go.
    """

    name: str
    run: StageRun
    lines: StageLines
    changes_stores: bool = False


@dataclass(frozen=True)
class Pipeline:
    """A partitioned pipeline: its stages in order (the last one completes a success) and
    the watermark fields a success records, built from the stage records."""

    name: str
    dag_id: str
    description: str
    stages: tuple[Stage, ...]
    outcome: Outcome
    tags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        names = [stage.name for stage in self.stages]
        if not names:
            raise ConfigError(f"pipeline {self.name!r}: no stages")
        if len(set(names)) != len(names):
            raise ConfigError(f"pipeline {self.name!r}: stage names repeat: {', '.join(names)}")
        if self.stages[0].changes_stores:
            raise ConfigError(f"pipeline {self.name!r}: its first stage {names[0]!r} changes "
                              "a store; the first stage only reads and stages (a run that "
                              "fails there must leave every store as it was)")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stage names, in order."""
        return tuple(stage.name for stage in self.stages)

    def stage(self, name: str) -> Stage:
        """The stage called `name`; ValueError naming the stages when there is none."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise ValueError(f"unknown stage {name!r}; stages: {', '.join(self.stage_names)}")

    def before_changes(self, name: str) -> bool:
        """Whether no stage up to and including `name` changes a store."""
        for stage in self.stages:
            if stage.changes_stores:
                return False
            if stage.name == name:
                return True
        return False
