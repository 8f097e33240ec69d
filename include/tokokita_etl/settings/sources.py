"""Where the values come from, in order of precedence: explicit values (command-line flags) >
environment variables > (the command line only) the local Airflow stack's
`airflow_home/tokokita.env` > the YAML file (config/pipeline.yaml or $TOKOKITA_CONFIG) > the
pipeline declaration's defaults > the class defaults. The shared settings are at the top level
of each source (`TOKOKITA_<NAME>`), a pipeline's in its section (`pipelines.<name>.<setting>`,
`TOKOKITA_<PIPELINE>__<NAME>`).

The command line, the tasks and the DAG file (when it is parsed) all read them through
`load_settings`. Each value is checked by its field's validator, and an error names the setting
and the source it came from (the file, the variable or the flag); every loaded settings
object records where each of its values came from (`source`, `tokokita-etl config`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.layout import join
from tokokita_etl.settings.model import (
    SETTINGS,
    SHARED_SETTINGS,
    WATERMARK_NAME,
    Layer,
    Load,
    SharedSettings,
    env_var,
    flag,
    loading,
    path_settings,
    pipeline_env_var,
    validated,
)
from tokokita_etl.storage import Location, is_url

DEFAULT_CONFIG_PATH = Path("config/pipeline.yaml")
#: the variable that names the YAML file (empty: not set)
CONFIG_VAR = "TOKOKITA_CONFIG"
#: the TOKOKITA_* variables the local Airflow stack (`make up`, `make demo`) gives its
#: services, written when it starts; the command line run in the project folder reads them
#: beneath the environment, so that both see one set of settings
STACK_SETTINGS_FILE = Path("airflow_home/tokokita.env")


def stack_environment(cwd: Path | None = None) -> dict[str, str]:
    """The non-empty TOKOKITA_* variables of the local Airflow stack of the project folder
    `cwd` (`STACK_SETTINGS_FILE`), or {} when it has none."""
    path = (Path.cwd() if cwd is None else Path(cwd)) / STACK_SETTINGS_FILE
    if not path.is_file():
        return {}
    import io

    from dotenv import dotenv_values

    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not valid UTF-8 at byte offset {exc.start} (line {line}); "
                          "the local stack's settings file is written in UTF-8") from None
    return {name: value for name, value in dotenv_values(stream=io.StringIO(text)).items()
            if name.startswith("TOKOKITA_") and value}


def setting_variables(models: Mapping[str, type[SharedSettings]] = MappingProxyType({}),
                      default_pipeline: str | None = None) -> dict[str, str]:
    """Every environment variable `load_settings` reads, enumerated from the models: the YAML
    file's (`TOKOKITA_CONFIG`), each shared setting's `TOKOKITA_<NAME>`, then for each
    pipeline of `models` (name -> its settings class) `TOKOKITA_<PIPELINE>__<NAME>` of each
    field of its section, the default pipeline's (`default_pipeline`) after its older
    spellings `TOKOKITA_<NAME>`. Variable -> what it sets: `config`, the shared setting's
    name, or `<pipeline>.<name>`."""
    found = {CONFIG_VAR: "config", **{env_var(name): name for name in SETTINGS}}
    for pipeline, model in models.items():
        if pipeline == default_pipeline:
            found.update({env_var(name): f"{pipeline}.{name}"
                          for name in model.pipeline_fields()})
        found.update({pipeline_env_var(pipeline, name): f"{pipeline}.{name}"
                      for name in section_fields(model)})
    return found


def section_fields(model: type[SharedSettings]) -> tuple[str, ...]:
    """The settings of `model` its pipeline's section may hold: its fields beyond the shared
    ones, but for the watermark's name (a pipeline's is its name; the orders' is set at the
    top level)."""
    return tuple(name for name in model.pipeline_fields() if name != WATERMARK_NAME)


def load_settings(
    config_path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    stack: Mapping[str, str] | None = None,
    in_airflow: bool = False,
    pipeline: str | None = None,
    model: type[SharedSettings] = SharedSettings,
    pipeline_defaults: Mapping[str, Any] | None = None,
    default_pipeline: bool = False,
    top_level: Collection[str] | None = None,
    known_fields: Callable[[str], Collection[str]] = lambda declarations: (),
) -> SharedSettings:
    """The settings from the explicit `overrides` (None: not given), the environment `env`
    (default: os.environ), the stack's variables `stack` (the command line's
    `stack_environment`), the YAML file (`config_path`, else $TOKOKITA_CONFIG, else
    config/pipeline.yaml when it exists) and the defaults; relative paths against `cwd`
    (`in_airflow`: for the Airflow adapter, which reads the warehouse of `warehouse_conn_id`
    from its connection afterwards).

    `pipeline`: the name of the pipeline whose settings (`model`, a subclass of
    `SharedSettings`) these are (None: the shared settings alone). Its fields come from its
    section of each source (`pipelines: {NAME: ...}` in the YAML file,
    `TOKOKITA_<NAME>__<SETTING>`), then `pipeline_defaults` (its declaration's), then the
    class defaults; the shared ones from the top level. The default pipeline
    (`default_pipeline`, the orders) also reads its fields at the top level of each source,
    beneath its section there (the older spelling: a note says where to move its own
    fields); its watermark is named by its `pipeline` setting and its folders are the
    shared ones. Another pipeline's watermark is its name, and its state, staging and
    working folders are sub-folders named after it, so that nothing of one pipeline is
    another's.

    `top_level`: the settings beyond the shared ones the top level may hold (the default
    pipeline's fields); None: they are not looked at. `known_fields(declarations)`: the
    settings a section of another pipeline may hold beside the runner's (that pipeline's own
    are checked when its settings are read), the pipelines the loaded `declarations` setting
    names among them; asked only when such a section holds another setting, once the
    settings are validated."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    explicit = config_path or env.get(CONFIG_VAR) or (stack or {}).get(CONFIG_VAR)
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        from_file = _read_yaml(path)
    elif explicit:
        raise ConfigError(f"{path}: config file not found")
    else:
        from_file = {}
    sections = from_file.pop(PIPELINES_KEY, None) or {}
    top_names = model.pipeline_fields() if default_pipeline else ()
    if top_level is not None or default_pipeline:
        _check_top_level(path, from_file, {*(top_level or ()), *top_names})
    own = section_fields(model) if pipeline is not None else ()
    others = _check_sections(path, sections, pipeline, own)

    stack_file = cwd / STACK_SETTINGS_FILE
    layers: list[Layer] = []
    for variables, where in ((env, _same), (stack or {}, _in_file(stack_file))):
        if pipeline is not None:
            layers.append(Layer(model, {
                name: variables[var] for name in own
                if variables.get(var := pipeline_env_var(pipeline, name))},
                lambda name, where=where: where(pipeline_env_var(pipeline, name))))
        layers.append(Layer(model, {
            name: variables[var] for name in (*SHARED_SETTINGS, *top_names)
            if variables.get(var := env_var(name))},
            lambda name, where=where: where(env_var(name))))
    if pipeline is not None:
        layers.append(Layer(model, dict(sections.get(pipeline) or {}),
                            lambda name: f"{path} ({PIPELINES_KEY}.{pipeline})"))
    layers.append(Layer(model, {name: value for name, value in from_file.items()
                                if name in SHARED_SETTINGS or name in top_names},
                        lambda name: str(path)))
    if pipeline is not None:
        layers.append(Layer(model, dict(pipeline_defaults or {}),
                            lambda name: f"the declaration of pipeline {pipeline!r}"))
    given = {name: value for name, value in (overrides or {}).items() if value is not None}
    origins = {name: flag(name) for name in given}
    if pipeline is not None and not default_pipeline:
        given[WATERMARK_NAME] = pipeline
        origins[WATERMARK_NAME] = f"the declaration of pipeline {pipeline!r}"
    for layer in layers:
        for name in layer.values:
            origins.setdefault(name, layer.origin(name))
    with loading(Load(layers=tuple(layers), origins=origins, in_airflow=in_airflow,
                      model=model)):
        settings = validated(lambda: model(**given))
    if others:
        _check_other_sections(path, others, own, known_fields, settings.declarations)
    if default_pipeline and pipeline is not None:
        _note_older_spellings(pipeline, model, origins, path)
    resolved = {name: _absolute(getattr(settings, name), cwd) for name in path_settings(model)}
    if pipeline is not None and not default_pipeline:
        resolved.update({name: join(resolved[name], pipeline) for name in OWN_FOLDERS})
    settings = settings.model_copy(update={
        **resolved, "warehouse_url": _absolute_sqlite_url(settings.warehouse_url, cwd)})
    settings._origins = origins
    return settings


def _same(var: str) -> str:
    return var


def _in_file(path: Path):
    return lambda var: f"{path} ({var})"


#: the YAML file's key of the pipelines' sections: `pipelines: {NAME: {setting: value}}`
PIPELINES_KEY = "pipelines"
#: shared folders in which a pipeline other than the orders keeps its files in a sub-folder
#: named after it (its watermark, claims and manifests; its stages' hand-over)
OWN_FOLDERS = ("state_dir", "staging_dir", "work_dir")
#: the settings the runner reads of every pipeline (`runner.settings.RUNNER_SETTINGS`, a
#: test pins they are the same), which any pipeline's section may hold
RUNNER_NAMES = ("cron", "lookback_days", "max_attempts", "wait_window_hours",
                "claim_ttl_hours", "start_date", "end_date", "ping_url",
                "deadline_local_time", "deadline_webhook_url")
#: (pipeline, setting, source) already noted in this process: a note is said once
_NOTED: set[tuple[str, str, str]] = set()
_LOG = logging.getLogger(__name__)


def _note_older_spellings(pipeline: str, model: type[SharedSettings],
                          origins: Mapping[str, str], path: Path) -> None:
    """Log a note for each own setting of the default pipeline read at the top level of a
    source (its older spelling), naming where to move it."""
    for name in model.own_fields():
        source = origins.get(name, "")
        if source == str(path):
            move = f"move it to {PIPELINES_KEY}.{pipeline}.{name}"
        elif source == env_var(name) or source.endswith(f"({env_var(name)})"):
            move = f"name it {pipeline_env_var(pipeline, name)}"
        else:
            continue
        if (pipeline, name, source) not in _NOTED:
            _NOTED.add((pipeline, name, source))
            _LOG.warning("settings note: %s sets %s at the top level, a setting of the %s "
                         "pipeline alone, read as its section; %s", source, name, pipeline,
                         move)


def _check_top_level(path: Path, values: Mapping[str, Any], allowed: Collection[str]) -> None:
    """A top-level key of the YAML file is a shared setting or one of `allowed`; else an error
    naming the file and the key."""
    for key in values:
        if key not in SHARED_SETTINGS and key not in allowed:
            raise ConfigError(f"{path}: unknown setting {key!r}; known: "
                              f"{sorted({*SHARED_SETTINGS, *allowed})}")


#: path -> ((mtime, size), its settings): a file read again unchanged is not parsed again (the
#: DAG processor parses the DAG file, and so reads the settings, over and over)
_FILE_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def _read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file's settings; dates and date-times stay text, so that their setting's
    validator reads them and a bad one is an error naming its setting."""
    try:
        stat = path.stat()
        version = (stat.st_mtime_ns, stat.st_size)
        if (cached := _FILE_CACHE.get(path)) and cached[0] == version:
            return dict(cached[1])
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    import yaml

    try:
        loaded = yaml.load(content, Loader=_text_dates_loader()) or {}  # noqa: S506 (safe)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: config must be a mapping of settings")
    if not isinstance(loaded.get(PIPELINES_KEY, {}), dict):
        raise ConfigError(f"{path}: {PIPELINES_KEY} must map pipeline names to their settings")
    _FILE_CACHE[path] = (version, loaded)
    return dict(loaded)


def _check_sections(path: Path, sections: Mapping[str, Any], pipeline: str | None,
                    own: Collection[str]) -> dict[str, list[str]]:
    """`pipelines:` maps pipeline names to their settings: the section of `pipeline` holds
    its fields (`own`), another's the runner's or another pipeline's; a shared setting, the
    watermark's name or an unknown name in the section of `pipeline` is an error naming the
    file and the key. Returns the settings of other sections that are neither `own` nor the
    runner's (section -> names), for `_check_other_sections`."""
    others: dict[str, list[str]] = {}
    for name, section in sections.items():
        where = f"{path}: {PIPELINES_KEY}.{name}"
        if not isinstance(section, dict):
            raise ConfigError(f"{where} must be a mapping of settings")
        allowed = set(own) if name == pipeline else {*own, *RUNNER_NAMES}
        for key in section:
            if key in SHARED_SETTINGS:
                raise ConfigError(f"{where}.{key}: {key} is shared by every pipeline; set it "
                                  "at the top level")
            if key == WATERMARK_NAME:
                raise ConfigError(f"{where}.{key}: a pipeline's watermark is named after it")
            if key in allowed:
                continue
            if name == pipeline:
                raise ConfigError(f"{where}: unknown setting {key!r}; the settings of "
                                  f"pipeline {name!r}: {sorted(allowed)}")
            others.setdefault(name, []).append(key)
    return others


def _check_other_sections(path: Path, others: Mapping[str, list[str]], own: Collection[str],
                          known: Callable[[str], Collection[str]], declarations: str) -> None:
    """Each setting of `others` (section -> names) is a setting of some pipeline: of
    `known("")` (the pipelines the runner has without `declarations`), else of
    `known(declarations)` (asked only then: it imports the declared modules); else an error
    naming the file and the key."""
    allowed = {*own, *RUNNER_NAMES}
    for among in dict.fromkeys(("", declarations)):
        if all(key in allowed for keys in others.values() for key in keys):
            return
        allowed |= set(known(among))
    for name, keys in others.items():
        for key in keys:
            if key not in allowed:
                raise ConfigError(f"{path}: {PIPELINES_KEY}.{name}: unknown setting {key!r}; "
                                  f"the settings of any pipeline: {sorted(allowed)}")


@cache
def _text_dates_loader() -> type:
    """PyYAML's safe loader (libyaml's when installed) without its timestamp resolver."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class TextDatesLoader(base):
        yaml_implicit_resolvers: ClassVar[dict] = {
            first: [(tag, pattern) for tag, pattern in resolvers
                    if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in base.yaml_implicit_resolvers.items()}

    return TextDatesLoader


def _absolute(path: Location, cwd: Path) -> Location:
    return path if is_url(path) or Path(path).is_absolute() else cwd / path


def _absolute_sqlite_url(url: str, cwd: Path) -> str:
    """Make a relative `sqlite:///rel/path.db` URL absolute against `cwd`."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix:
        rel = url[len(prefix):]
        if rel != ":memory:":
            return prefix + str(cwd / rel)
    return url
