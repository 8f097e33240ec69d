"""What the runner needs to know of a pipeline: its stages in order, what its success records,
where its raw partitions are, its settings class and their defaults and the asset its last stage updates.

A pipeline is declared once, in its own domain package (the orders pipeline in
`tokokita_etl.orders.pipeline`), and passed to every runner function that depends on it;
nothing in the runner reads a process-wide pipeline. A declaration is cheap to import (the
DAG file imports it when it is parsed): its stage functions import their heavy libraries when
they run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from tokokita_etl.errors import ConfigError
from tokokita_etl.runner.policy import PROGRAM, RUN_COMMAND
from tokokita_etl.runner.schedule import DAILY, Grain
from tokokita_etl.runner.settings import PipelineSettings, RawInputSettings
from tokokita_etl.settings.layout import join, partition_file_exists
from tokokita_etl.settings.model import Settings
from tokokita_etl.storage import Location

#: a stage (handed its pipeline's settings class): reads its inputs for a partition date,
#: writes its outputs, returns its record
StageRun = Callable[[PipelineSettings, date], dict[str, Any]]
#: the log lines a stage's record gives
StageLines = Callable[[dict[str, Any], date], list[str]]
#: the stage records of a successful run (by stage name) -> the watermark fields it records
Outcome = Callable[[Mapping[str, dict[str, Any]]], dict[str, Any]]
#: a stage's datasets for a partition date, given its record (None: it did not finish):
#: (inputs, outputs), each a list of the domain's dataset references
StageLineage = Callable[[PipelineSettings, date, str, Mapping[str, Any] | None],
                        tuple[list[Any], list[Any]]]


#: names no pipeline may have: the orders' own folders in `state_dir`, where the other
#: pipelines keep theirs, each in the folder of its name
RESERVED_NAMES = ("claims", "runs")


@dataclass(frozen=True)
class RawFiles:
    """A pipeline's input: one raw file per partition date, `<folder>/<name(day)>`, the folder
    being the value of the setting `setting` (a local folder or an object-storage URL)."""

    setting: str
    name: Callable[[date], str]

    def folder(self, settings: Settings) -> Location:
        """The folder the raw files are in, for these settings."""
        return getattr(settings, self.setting)

    def path(self, settings: Settings, day: date, folder: Location | None = None) -> Location:
        """The raw file of `day` (in `folder` when given, else the setting's folder)."""
        return join(self.folder(settings) if folder is None else folder, self.name(day))

    def exists(self, settings: Settings, day: date, folder: Location | None = None) -> bool:
        """Whether the raw file of `day` is there (present and non-empty)."""
        return partition_file_exists(self.path(settings, day, folder))

    def present(self, settings: Settings) -> Callable[[date], bool]:
        """Whether a date's raw file is there: the question `due_runs` asks of each date."""
        return lambda day: self.exists(settings, day)


@dataclass(frozen=True)
class Gold:
    """A pipeline's published file per partition: `<gold_dir>/<name(key)>`."""

    name: Callable[[date], str]

    def path(self, settings: Settings, key: date) -> Location:
        """The gold file of the partition `key`, for these settings."""
        return join(settings.gold_dir, self.name(key))


@dataclass(frozen=True)
class Column:
    """A column of a pipeline's status rows, in its status page's table: `label` heads it;
    `kind` says where its value is and how the runner formats it:

    - `count`: the count `key` of a success's `rows` (`1,234`);
    - `money`: the exact decimal amount `key` of a success's entry (`1,234` or `1,234.50`);
    - `share`: the count `part` of a success's `rows` over its count `whole` (`12.5%`).

    A money or share value is also a field of the row, named `key` (the JSON of the status
    page); a count is in the row's `rows`."""

    key: str
    label: str
    kind: Literal["count", "money", "share"] = "count"
    #: a share's (part, whole): the counts of `rows` it divides
    share_of: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("count", "money", "share"):
            raise ConfigError(f"column {self.key!r}: kind {self.kind!r}; expected count, "
                              "money or share")
        if (self.kind == "share") != (self.share_of is not None):
            raise ConfigError(f"column {self.key!r}: a share (and only a share) names the "
                              "counts it divides (`share_of`)")


@dataclass(frozen=True)
class Chart:
    """The chart on a pipeline's status page: a bar per partition and up to two lines across
    them, each series a column of the pipeline's `columns`, named by its key:

    - `bars`: a count, the bars (left axis);
    - `share`: a share, a line from 0 to 100 % (right axis); "" for none;
    - `money`: a money amount, a line scaled to its maximum; "" for none.

    The heading and the legend call a series by its column's label, or by its words in
    `labels` (key -> words)."""

    bars: str
    share: str = ""
    money: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    def check(self, pipeline: str, columns: tuple[Column, ...]) -> None:
        """A ConfigError naming `pipeline` when a series is no column of `columns` of its
        kind."""
        kinds = {column.key: column.kind for column in columns}
        for series, kind in (("bars", "count"), ("share", "share"), ("money", "money")):
            key = getattr(self, series)
            if (key or series == "bars") and kinds.get(key) != kind:
                raise ConfigError(f"pipeline {pipeline!r}: its chart's {series} {key!r} is no "
                                  f"{kind} column of its `columns`")


#: the registry of pipelines (`upstream_pipeline(name)`), imported by its name when an upstream
#: named by name is first looked up: the runner cannot import it where it is declared, as the
#: registry imports every pipeline's package, each of which imports the runner
REGISTRY = "tokokita_etl.pipelines"


@dataclass(frozen=True)
class Upstream:
    """A pipeline's input: the settled partitions of another pipeline, named by its name
    (`source`: a domain package imports no other pipeline's) or given as its declaration. A
    partition of this one is made of the upstream dates it spans. `checksum(day)` names the
    checksum of an upstream success this pipeline is built from (`summary_<day>`): when it
    changes, the partition is due again.

    A name is looked up in the registry when the upstream's declaration is first asked for
    (`pipeline`), not when it is declared: the registry imports the packages that name it."""

    source: Pipeline | str
    checksum: Callable[[date], str]
    #: (name, grain) of the pipeline built from it, set by its declaration (`of`)
    _downstream: tuple[str, Grain] | None = field(default=None, init=False, repr=False,
                                                  compare=False)
    _found: Pipeline | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The upstream pipeline's name."""
        return self.source if isinstance(self.source, str) else self.source.name

    @property
    def pipeline(self) -> Pipeline:
        """The upstream's declaration: the one given, or the registry's pipeline of its name;
        a ConfigError names the pipeline built from it and the upstream when no pipeline has
        that name or its partitions do not each lie inside one of the downstream's."""
        if self._found is None:
            found = self.source if isinstance(self.source, Pipeline) else self._looked_up()
            if self._downstream is not None:
                name, grain = self._downstream
                if not found.grain.nests_in(grain):
                    raise ConfigError(f"pipeline {name!r}: a {found.grain.name} partition of "
                                      f"its upstream {found.name!r} does not lie inside one "
                                      f"{grain.name} partition")
            object.__setattr__(self, "_found", found)
        return self._found

    def _looked_up(self) -> Pipeline:
        found = importlib.import_module(REGISTRY).upstream_pipeline(self.name)
        if found is None:
            who = f"pipeline {self._downstream[0]!r}: its upstream" if self._downstream \
                else "the upstream"
            raise ConfigError(f"{who} {self.source!r} is no registered pipeline (the "
                              "package's, an installed one or one `declarations` names)")
        return found

    def of(self, downstream: Pipeline) -> Upstream:
        """This upstream as `downstream`'s input (its errors name it); a declaration given as
        such is checked at once, a name when it is first looked up."""
        bound = Upstream(self.source, self.checksum)
        object.__setattr__(bound, "_downstream", (downstream.name, downstream.grain))
        if isinstance(self.source, Pipeline):
            _ = bound.pipeline  # checks that its partitions nest in the downstream's
        return bound


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
    #: where its raw partition files are (the sensor, the missing rule, the fingerprints);
    #: None: its input is `upstream`
    raw: RawFiles | None = None
    #: how its dates make partitions and which partition a fire time processes
    grain: Grain = DAILY
    tags: tuple[str, ...] = field(default=())
    #: its setting defaults, above the settings' class defaults (`cron`, `lookback_days`...)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: (name, uri) of the Airflow asset its last stage updates, or None
    asset: tuple[str, str] | None = None
    #: its stages' datasets, for OpenLineage; None: no lineage
    lineage: StageLineage | None = None
    #: what a success did, from its watermark entry, for the command line's `[summary]` line
    done_line: Callable[[Mapping[str, Any]], str] | None = None
    #: the counts, amounts and shares of its status rows the status page shows, in order
    columns: tuple[Column, ...] = ()
    #: the chart on its status page, of some of its `columns`; None: no chart
    chart: Chart | None = None
    #: the counts of its success's `rows` the command line's `status` prints, in order, each
    #: with its column's width
    status_counts: tuple[tuple[str, int], ...] = (("extracted", 9),)
    #: the command that runs its dates (named in the hints a person reads); default
    #: `tokokita-etl run --pipeline <name>`
    command: str = ""
    #: the module that declares its warehouse tables on the warehouse's metadata, imported
    #: before the warehouse's schema is created (it imports SQLAlchemy: never at DAG parse)
    schema: str = ""
    #: the checksums of a partition as the warehouse holds it now, keyed as its success
    #: records them (`state reconcile` keeps a done date whose rows are still there); None:
    #: it keeps nothing in the warehouse to compare
    held_checksums: Callable[[Any, date], dict[str, str]] | None = None
    #: its input when it is built from another pipeline's results (None: from `raw`)
    upstream: Upstream | None = None
    #: its settings class: the runner's (`PipelineSettings`) and its own fields, which its
    #: stages read; None: `RawInputSettings` for raw files, else `PipelineSettings`
    settings: type[PipelineSettings] | None = None
    #: the file a success publishes per partition in `gold_dir`, None: none
    gold: Gold | None = None

    def __post_init__(self) -> None:
        if not (self.name.isidentifier() and self.name == self.name.lower()) \
                or self.name in RESERVED_NAMES:
            raise ConfigError(f"pipeline name {self.name!r}: expected a lower-case Python "
                              "identifier (it names its environment variables and its state "
                              f"folder), other than {', '.join(RESERVED_NAMES)}")
        names = [stage.name for stage in self.stages]
        if not names:
            raise ConfigError(f"pipeline {self.name!r}: no stages")
        if len(set(names)) != len(names):
            raise ConfigError(f"pipeline {self.name!r}: stage names repeat: {', '.join(names)}")
        if (self.raw is None) == (self.upstream is None):
            raise ConfigError(f"pipeline {self.name!r}: declare one input, raw files (`raw`) "
                              "or another pipeline's results (`upstream`)")
        if self.upstream is not None:
            object.__setattr__(self, "upstream", self.upstream.of(self))
        if self.chart is not None:
            self.chart.check(self.name, self.columns)
        if self.settings is None:
            object.__setattr__(self, "settings",
                               RawInputSettings if self.raw is not None else PipelineSettings)
        elif not issubclass(self.settings, PipelineSettings):
            raise ConfigError(f"pipeline {self.name!r}: its settings class "
                              f"{self.settings.__name__} is no runner.settings.PipelineSettings")
        if self.stages[0].changes_stores:
            raise ConfigError(f"pipeline {self.name!r}: its first stage {names[0]!r} changes "
                              "a store; the first stage only reads and stages (a run that "
                              "fails there must leave every store as it was)")

    def declare_tables(self) -> None:
        """Import the module that declares its warehouse tables (`schema`), if any."""
        if self.schema:
            importlib.import_module(self.schema)

    def command_line(self, words: str, *options: str) -> str:
        """The one builder of a command line a hint names: `words` (`run`, `state
        reconcile`, `status`...) for this pipeline, then `options` (`--date 2026-11-02`).
        `run` is its `command` when it declares one; every other command is the command
        line's, with `--pipeline NAME` unless this is its default pipeline (the one whose
        `command` is `tokokita-etl run`)."""
        if words == "run" and self.command:
            base = self.command
        elif self.command == RUN_COMMAND:
            base = f"{PROGRAM} {words}"
        else:
            base = f"{PROGRAM} {words} --pipeline {self.name}"
        return " ".join((base, *options))

    @property
    def run_command(self) -> str:
        """The command that runs a date of this pipeline, without its date."""
        return self.command_line("run")

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
