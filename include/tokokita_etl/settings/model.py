"""The settings model: one pydantic-settings class, `Settings`, with the source each value came
from (`Settings.source`), the rules across settings, and the names of the settings, their
variables and flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import PrivateAttr, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, InitSettingsSource, SettingsConfigDict

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.layout import catchup_bound, join
from tokokita_etl.settings.values import (
    CatchupDate,
    Count,
    Days,
    Folder,
    Hours,
    HttpUrl,
    LocalFolder,
    OptionalCatchupDate,
    OptionalText,
    Share,
    Text,
    cron_problem,
    declarations_problem,
    duckdb_size_problem,
    local_time_problem,
    notifiers_problem,
    state_url_problem,
    text_rule,
    timezone_problem,
)
from tokokita_etl.storage import Location, is_url

ENV_PREFIX = "TOKOKITA_"
#: the source of a value nobody set
DEFAULT_SOURCE = "default"
#: the source of a value given to `Settings.replace`
REPLACE_SOURCE = "Settings.replace"


# -- the sources ------------------------------------------------------------------------------

class Layer(InitSettingsSource):
    """One source of settings values (`values`: setting name -> raw value), and the label each
    value's errors and `Settings.source` name: `origin(name)`."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any],
                 origin: Callable[[str], str]) -> None:
        super().__init__(settings_cls, dict(values))
        self.values = dict(values)
        self.origin = origin


@dataclass(frozen=True)
class Load:
    """What one `load_settings` (or `replace`) call reads, while it validates."""

    #: the sources below the explicit values, highest precedence first
    layers: tuple[Layer, ...]
    #: setting name -> where its value comes from (absent: the default)
    origins: Mapping[str, str]
    #: read for the Airflow adapter, which takes the warehouse of `warehouse_conn_id` from
    #: its connection afterwards (and checks it then)
    in_airflow: bool = False


_LOADING: ContextVar[Load | None] = ContextVar("tokokita_settings_loading", default=None)


@contextmanager
def loading(load: Load) -> Iterator[None]:
    token = _LOADING.set(load)
    try:
        yield
    finally:
        _LOADING.reset(token)


def _origin(name: str) -> str:
    load = _LOADING.get()
    return (load.origins if load else {}).get(name, DEFAULT_SOURCE)


class Settings(BaseSettings):
    """The pipeline's settings; `load_settings` resolves the paths (absolute) and records the
    source of each value. Immutable: `replace` makes a validated copy."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix=ENV_PREFIX)

    pipeline: Text = "orders"
    cron: Annotated[str, text_rule(problem=cron_problem)] = "30 2 * * *"
    #: the pipeline's time zone: partition dates are its dates
    timezone: Annotated[str, text_rule(problem=timezone_problem)] = "Asia/Jakarta"
    lookback_days: Days = 7
    max_attempts: Count = 3
    raw_dir: Folder = Path("data/raw")
    gold_dir: Folder = Path("data/gold")
    quarantine_dir: Folder = Path("data/quarantine")
    state_dir: LocalFolder = Path("data/state")
    staging_dir: Folder = Path("data/staging")
    #: this machine's working copies of the object-storage folders (a local folder)
    work_dir: LocalFolder = Path("data/work")
    warehouse_url: Text = "sqlite:///data/warehouse/tokokita.db"
    #: where the watermark, the claims and the manifests live: empty for files in
    #: `state_dir`; a `postgresql://` URL, or `warehouse` for the warehouse's own PostgreSQL
    #: database (the first schema of its search_path), for workers on several machines
    state_url: Annotated[str, text_rule(empty=True, problem=state_url_problem)] = ""
    #: inside Airflow: the Airflow connection the warehouse is read from (its URL then
    #: replaces `warehouse_url`); empty: `warehouse_url` inside Airflow too
    warehouse_conn_id: OptionalText = "tokokita_warehouse"
    #: inside Airflow: the connection of a separate PostgreSQL state database; empty: the
    #: state follows `state_url` (`warehouse`: the warehouse's connection)
    state_conn_id: OptionalText = ""
    #: inside Airflow: the connection the object-storage folders (s3:// URLs) are reached
    #: with (key, secret; the endpoint in its extras, as the Amazon provider reads it)
    object_storage_conn_id: OptionalText = "aws_default"
    #: DuckDB's own memory in transform; beyond it its temp tables spill to the staging folder
    #: (with the rest of the process this bounds a large partition's peak RSS)
    duckdb_memory_limit: Annotated[str, text_rule(problem=duckdb_size_problem)] = "400MB"
    #: how long after its scheduled fire time a run waits for its partition file
    wait_window_hours: Hours = 6
    #: how long a run's claim on a date holds before another run may take the date over
    claim_ttl_hours: Hours = 6
    #: when the sweep DAG looks for partitions due again for a changed input (in `timezone`)
    sweep_cron: Annotated[str, text_rule(problem=cron_problem)] = "15 * * * *"
    #: the DAG's catch-up window: an ISO 8601 date (its midnight) or date-time, in `timezone`
    #: unless it has an offset
    start_date: CatchupDate = date(2026, 11, 1)
    end_date: OptionalCatchupDate = None
    #: a run whose valid rows are below this share of the trailing median is reported
    volume_min_share: Share = 0.5
    #: `warn`, or `fail`: a low-volume or zero-row run fails validation
    volume_check: Annotated[str, text_rule(choices=("warn", "fail"))] = "warn"
    #: a done date whose raw file changed since its success: `flag` shows it (status, the
    #: status page, the gate's skip line); `reprocess` also makes it due and a plain run
    #: reprocesses it; `off` does not look
    on_raw_change: Annotated[str, text_rule(choices=("flag", "reprocess", "off"))] = "flag"
    #: an http(s) URL to ping after each run; empty: none
    ping_url: HttpUrl = ""
    #: the scheduled run for D must have succeeded by this local time (HH:MM, in `timezone`)
    #: on its fire date, else the DAG's deadline alert fires
    deadline_local_time: Annotated[str, text_rule(problem=local_time_problem)] = "06:00"
    #: an http(s) URL the deadline alert POSTs JSON to; empty: the alert is only logged
    deadline_webhook_url: HttpUrl = ""
    #: Airflow notifiers for the alerts, as JSON: a list of {"class": import path of a
    #: BaseNotifier, "kwargs": {...}, "on": [events]} (`values.parse_notifiers`); empty: none
    #: besides `ping_url` and `deadline_webhook_url`
    notifiers: Annotated[str, text_rule(empty=True, problem=notifiers_problem)] = ""
    #: more pipelines for the runner beside the package's own, as `module:NAME` entries
    #: separated by commas (each NAME a `runner.declaration.Pipeline`); empty: none
    declarations: Annotated[str, text_rule(empty=True, problem=declarations_problem)] = ""
    #: seconds to wait for the warehouse to accept a connection (PostgreSQL connect_timeout)
    db_connect_timeout_s: Count = 10
    #: seconds one warehouse statement may run (PostgreSQL statement_timeout): above the
    #: longest legitimate statement (the fact COPY: 21 s at 5M rows, docs/configuration.md)
    db_statement_timeout_s: Count = 600
    #: seconds the client waits for any answer of the server (a result, room to write, a
    #: fetched batch) before it closes the connection: a frozen or silent server fails the
    #: run after this; above the longest silence of a legitimate run (docs/configuration.md)
    db_answer_timeout_s: Count = 45
    #: seconds to wait for a warehouse lock (PostgreSQL lock_timeout, SQLite busy timeout)
    db_lock_timeout_s: Count = 60

    #: setting name -> where its value came from (absent: the default)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    #: the settings of the pipeline whose results this one is built from (`with_upstream`)
    _upstream: Settings | None = PrivateAttr(default=None)

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        """Explicit values, then the sources `load_settings` reads (environment, the stack's
        file, the YAML file); `Settings(...)` alone reads none: its values and the defaults."""
        load = _LOADING.get()
        return (init_settings, *(load.layers if load else ()))

    @model_validator(mode="after")
    def check_together(self) -> Settings:
        """The rules that involve more than one setting."""
        load = _LOADING.get()
        connection_later = load is not None and load.in_airflow and bool(self.warehouse_conn_id)
        if self.state_url == "warehouse" and not self.warehouse_url.startswith("postgres") \
                and not connection_later:
            raise _together(
                f"state_url 'warehouse' ({_origin('state_url')}) needs a PostgreSQL "
                f"warehouse_url, got {self.warehouse_url!r}; the state of the embedded SQLite "
                "setup stays in state_dir (leave state_url empty)")
        if self.end_date is not None and self.catchup_end < self.catchup_start:
            raise _together(
                f"end_date {self.end_date.isoformat()} ({_origin('end_date')}) is before "
                f"start_date {self.start_date.isoformat()} ({_origin('start_date')})")
        return self

    def __eq__(self, other: object) -> bool:
        """Equal values (wherever they came from)."""
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` (setting name -> value), validated as any source is; an error
        names the setting and `Settings.replace`. Paths are taken as given."""
        origins = {**self._origins, **dict.fromkeys(changes, REPLACE_SOURCE)}
        with loading(Load(layers=(), origins=origins)):
            copy = validated(lambda: type(self).model_validate({**self.__dict__, **changes}))
        copy._origins = origins
        copy._upstream = self._upstream
        return copy

    def with_upstream(self, upstream: Settings) -> Settings:
        """A copy that carries `upstream`: the settings of the pipeline whose results this
        pipeline is built from (its watermark, zone and wait window)."""
        copy = self.model_copy()
        copy._upstream = upstream
        return copy

    @property
    def upstream(self) -> Settings:
        """The upstream pipeline's settings (`with_upstream`); ConfigError when none."""
        if self._upstream is None:
            raise ConfigError(f"the settings of pipeline {self.pipeline!r} carry no upstream "
                              "pipeline's settings")
        return self._upstream

    def source(self, name: str) -> str:
        """Where the value of setting `name` came from: `default`, the YAML file's path, the
        environment variable (`TOKOKITA_<NAME>`), the stack's file, or the `--flag`."""
        if name not in type(self).model_fields:
            raise KeyError(name)
        return self._origins.get(name, DEFAULT_SOURCE)

    @property
    def tz(self) -> ZoneInfo:
        """The pipeline's time zone."""
        return ZoneInfo(self.timezone)

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

    @property
    def state_db_url(self) -> str:
        """The PostgreSQL URL of the state store, or "" for the files in `state_dir`."""
        return self.warehouse_url if self.state_url == "warehouse" else self.state_url

    @property
    def state_file(self) -> Path:
        """The watermark file."""
        return self.state_dir / "state.json"

    def staging_path(self, day: date) -> Path:
        """The local hand-off folder between the stages of a run for `day`: in `staging_dir`,
        or this machine's working copy of it when `staging_dir` is a URL."""
        if is_url(self.staging_dir):
            return self.work_dir / "staging" / day.isoformat()
        return Path(self.staging_dir) / day.isoformat()

    def staging_url(self, day: date) -> str | None:
        """Where the stages of `day` hand over between machines (None: a local folder)."""
        return join(self.staging_dir, day.isoformat()) if is_url(self.staging_dir) else None


def _together(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_together", "{text}", {"text": text})


#: setting name -> its field (annotation, default)
SETTINGS = Settings.model_fields
#: the settings every pipeline shares (the zone, the warehouse, the state, the folders its
#: files are in, each named after its pipeline, the connections, the alerts' notifiers, the
#: declarations); every other
#: setting is a pipeline's own: the orders' at the top level of each source, another
#: pipeline's in its own section (`pipelines: {NAME: ...}`, `TOKOKITA_<NAME>__<SETTING>`)
SHARED_SETTINGS = (
    "timezone", "warehouse_url", "state_url", "raw_dir", "gold_dir", "quarantine_dir",
    "state_dir", "staging_dir", "work_dir", "warehouse_conn_id", "state_conn_id",
    "object_storage_conn_id", "notifiers", "declarations", "sweep_cron", "db_connect_timeout_s",
    "db_statement_timeout_s", "db_answer_timeout_s", "db_lock_timeout_s",
)
#: the setting that names the orders' watermark; another pipeline's watermark is its name
WATERMARK_NAME = "pipeline"
#: the settings of a pipeline other than the orders that it reads from its own section of
#: each source (`TOKOKITA_<PIPELINE>__<NAME>`): every one but the shared ones and the
#: watermark's name
OWN_SETTINGS = tuple(name for name in SETTINGS
                     if name not in SHARED_SETTINGS and name != WATERMARK_NAME)


def default(name: str) -> Any:
    """The class default of setting `name`."""
    return SETTINGS[name].default


def env_var(name: str) -> str:
    """The environment variable of setting `name`: `TOKOKITA_<NAME>` (the class's prefix)."""
    return f"{Settings.model_config['env_prefix']}{name.upper()}"


def pipeline_env_var(pipeline: str, name: str) -> str:
    """The environment variable of a pipeline's own setting `name` for the pipeline called
    `pipeline` (not the orders): `TOKOKITA_<PIPELINE>__<NAME>`."""
    return f"{env_var(pipeline)}__{name.upper()}"


def flag(name: str) -> str:
    """The command-line flag of setting `name`: `--<name-with-dashes>`."""
    return f"--{name.replace('_', '-')}"


#: environment variable -> setting name
ENV_VARS = {env_var(name): name for name in SETTINGS}
#: the folder settings, resolved against the working directory
PATH_SETTINGS = tuple(name for name, setting in SETTINGS.items()
                      if setting.annotation in (Path, Location))


def validated(build: Callable[[], Settings]) -> Settings:
    """`build()`, its ValidationError as one ConfigError naming each setting and its source."""
    try:
        return build()
    except ValidationError as exc:
        lines = [_error_line(error) for error in exc.errors(include_url=False)]
        raise ConfigError("; ".join(lines)) from None


def _error_line(error: Any) -> str:
    name = str(error["loc"][0]) if error["loc"] else ""
    text = error["msg"]
    if not name:  # a rule across settings: its text names them and their sources
        return text
    source = _origin(name)
    if error["type"] == "extra_forbidden":
        return f"{source}: unknown setting {name!r}; known: {sorted(SETTINGS)}"
    if error["type"] == "tokokita_problem":
        return f"{source}: {name}: {text}"
    return f"{source}: {name} {text}"
