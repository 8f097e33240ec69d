"""The settings model: the settings every pipeline shares (`SharedSettings`, the base of each
pipeline's class), with the source each value came from (`source`), the rules across
settings, and the names of the settings, their variables and flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self
from zoneinfo import ZoneInfo

from pydantic import PrivateAttr, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, InitSettingsSource, SettingsConfigDict

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.layout import join
from tokokita_etl.settings.values import (
    Count,
    Folder,
    LocalFolder,
    OptionalText,
    Text,
    cron_problem,
    declarations_problem,
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
    #: the class being validated (an unknown setting's error lists its fields)
    model: type[BaseSettings] | None = None


_LOADING: ContextVar[Load | None] = ContextVar("tokokita_settings_loading", default=None)


@contextmanager
def loading(load: Load) -> Iterator[None]:
    token = _LOADING.set(load)
    try:
        yield
    finally:
        _LOADING.reset(token)


def origin(name: str) -> str:
    """Where the value of setting `name` comes from, in the load under way."""
    load = _LOADING.get()
    return (load.origins if load else {}).get(name, DEFAULT_SOURCE)


class SharedSettings(BaseSettings):
    """What every pipeline shares: the zone, the warehouse, the state, the folders, the
    connections, the notifiers and the declarations. A pipeline's settings are a subclass
    (`runner.settings.PipelineSettings`, the runner's; a pipeline's own beside its stages);
    `load_settings` resolves the paths (absolute) and records the source of each value.
    Immutable: `replace` makes a validated copy."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix=ENV_PREFIX)

    #: the pipeline's time zone: partition dates are its dates
    timezone: Annotated[str, text_rule(problem=timezone_problem)] = "Asia/Jakarta"
    warehouse_url: Text = "sqlite:///data/warehouse/tokokita.db"
    #: where the watermark, the claims and the manifests live: empty for files in
    #: `state_dir`; a `postgresql://` URL, or `warehouse` for the warehouse's own PostgreSQL
    #: database (the first schema of its search_path), for workers on several machines
    state_url: Annotated[str, text_rule(empty=True, problem=state_url_problem)] = ""
    raw_dir: Folder = Path("data/raw")
    gold_dir: Folder = Path("data/gold")
    quarantine_dir: Folder = Path("data/quarantine")
    state_dir: LocalFolder = Path("data/state")
    staging_dir: Folder = Path("data/staging")
    #: this machine's working copies of the object-storage folders (a local folder)
    work_dir: LocalFolder = Path("data/work")
    #: inside Airflow: the Airflow connection the warehouse is read from (its URL then
    #: replaces `warehouse_url`); empty: `warehouse_url` inside Airflow too
    warehouse_conn_id: OptionalText = "tokokita_warehouse"
    #: inside Airflow: the connection of a separate PostgreSQL state database; empty: the
    #: state follows `state_url` (`warehouse`: the warehouse's connection)
    state_conn_id: OptionalText = ""
    #: inside Airflow: the connection the object-storage folders (s3:// URLs) are reached
    #: with (key, secret; the endpoint in its extras, as the Amazon provider reads it)
    object_storage_conn_id: OptionalText = "aws_default"
    #: Airflow notifiers for the alerts, as JSON: a list of {"class": import path of a
    #: BaseNotifier, "kwargs": {...}, "on": [events]} (`values.parse_notifiers`); empty: none
    #: besides `ping_url` and `deadline_webhook_url`
    notifiers: Annotated[str, text_rule(empty=True, problem=notifiers_problem)] = ""
    #: more pipelines for the runner beside the package's own, as `module:NAME` entries
    #: separated by commas (each NAME a `runner.declaration.Pipeline`); empty: none
    declarations: Annotated[str, text_rule(empty=True, problem=declarations_problem)] = ""
    #: when the sweep DAG looks for partitions due again for a changed input (in `timezone`)
    sweep_cron: Annotated[str, text_rule(problem=cron_problem)] = "15 * * * *"
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

    #: the fields the runner reads of any pipeline (`runner.settings.PipelineSettings`'s
    #: beyond the shared ones); the rest of a subclass's are its pipeline's own
    runner_fields: ClassVar[tuple[str, ...]] = ()

    #: setting name -> where its value came from (absent: the default)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        """Explicit values, then the sources `load_settings` reads (environment, the stack's
        file, the YAML file); `Settings(...)` alone reads none: its values and the defaults."""
        load = _LOADING.get()
        return (init_settings, *(load.layers if load else ()))

    @model_validator(mode="after")
    def check_together(self) -> SharedSettings:
        """The rules that involve more than one setting."""
        load = _LOADING.get()
        connection_later = load is not None and load.in_airflow and bool(self.warehouse_conn_id)
        if self.state_url == "warehouse" and not self.warehouse_url.startswith("postgres") \
                and not connection_later:
            raise together(
                f"state_url 'warehouse' ({origin('state_url')}) needs a PostgreSQL "
                f"warehouse_url, got {self.warehouse_url!r}; the state of the embedded SQLite "
                "setup stays in state_dir (leave state_url empty)")
        return self

    def __eq__(self, other: object) -> bool:
        """Equal values (wherever they came from)."""
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (setting name -> value), validated as any source is; an error
        names the setting and `Settings.replace`. Paths are taken as given."""
        origins = {**self._origins, **dict.fromkeys(changes, REPLACE_SOURCE)}
        with loading(Load(layers=(), origins=origins)):
            copy = validated(lambda: type(self).model_validate({**self.__dict__, **changes}))
        copy.__pydantic_private__ = {**(self.__pydantic_private__ or {}), "_origins": origins}
        return copy

    def source(self, name: str) -> str:
        """Where the value of setting `name` came from: `default`, the YAML file's path, the
        environment variable (`TOKOKITA_<NAME>`), the stack's file, or the `--flag`."""
        if name not in type(self).model_fields:
            raise KeyError(name)
        return self._origins.get(name, DEFAULT_SOURCE)

    @classmethod
    def own_fields(cls) -> tuple[str, ...]:
        """The fields of its pipeline alone: neither shared nor the runner's."""
        return tuple(name for name in cls.model_fields
                     if name not in SHARED_SETTINGS and name not in cls.runner_fields)

    @classmethod
    def pipeline_fields(cls) -> tuple[str, ...]:
        """Its fields beyond the shared ones: the runner's and its pipeline's own."""
        return tuple(name for name in cls.model_fields if name not in SHARED_SETTINGS)

    @property
    def tz(self) -> ZoneInfo:
        """The pipeline's time zone."""
        return ZoneInfo(self.timezone)

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


#: the name the layers below a pipeline (the warehouse, the stores, the runner's helpers)
#: give the settings they are handed: any pipeline's, of which they read the shared fields
#: (and the runner's, `runner.settings.PipelineSettings`)
Settings = SharedSettings


def together(text: str) -> PydanticCustomError:
    """The error of a rule across settings (`text` names them and their sources)."""
    return PydanticCustomError("tokokita_together", "{text}", {"text": text})


#: the settings every pipeline shares, read from the top level of each source; every other
#: setting is a pipeline's own, read from its section (`pipelines: {NAME: ...}`,
#: `TOKOKITA_<NAME>__<SETTING>`)
SHARED_SETTINGS = tuple(SharedSettings.model_fields)
#: shared setting name -> its field (annotation, default)
SETTINGS = SharedSettings.model_fields
#: the setting that names a pipeline's watermark (the orders' may be set; another
#: pipeline's watermark is its name)
WATERMARK_NAME = "pipeline"


def default(name: str, model: type[SharedSettings] = SharedSettings) -> Any:
    """The class default of setting `name` of `model` (default: a shared setting)."""
    return model.model_fields[name].default


def env_var(name: str) -> str:
    """The environment variable of a shared setting `name` (and, for compatibility, of a
    setting of the default pipeline): `TOKOKITA_<NAME>` (the class's prefix)."""
    return f"{ENV_PREFIX}{name.upper()}"


def pipeline_env_var(pipeline: str, name: str) -> str:
    """The environment variable of setting `name` of the pipeline called `pipeline`:
    `TOKOKITA_<PIPELINE>__<NAME>`."""
    return f"{env_var(pipeline)}__{name.upper()}"


def flag(name: str) -> str:
    """The command-line flag of setting `name`: `--<name-with-dashes>`."""
    return f"--{name.replace('_', '-')}"


#: environment variable -> shared setting name
ENV_VARS = {env_var(name): name for name in SETTINGS}


def path_settings(model: type[SharedSettings]) -> tuple[str, ...]:
    """The folder settings of `model`, resolved against the working directory."""
    return tuple(name for name, setting in model.model_fields.items()
                 if setting.annotation in (Path, Location))


#: the shared folder settings
PATH_SETTINGS = path_settings(SharedSettings)


def validated(build: Callable[[], SharedSettings]) -> SharedSettings:
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
    source = origin(name)
    if error["type"] == "extra_forbidden":
        load = _LOADING.get()
        known = sorted(load.model.model_fields) if load and load.model else sorted(SETTINGS)
        return f"{source}: unknown setting {name!r}; known: {known}"
    if error["type"] == "tokokita_problem":
        return f"{source}: {name}: {text}"
    return f"{source}: {name} {text}"
