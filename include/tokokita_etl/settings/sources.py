"""Where the values come from, in order of precedence: explicit values (command-line flags) >
`TOKOKITA_<NAME>` environment variables > (the command line only) the local Airflow stack's
`airflow_home/tokokita.env` > the YAML file (config/pipeline.yaml or $TOKOKITA_CONFIG) > the
class defaults.

The command line, the tasks and the DAG file (when it is parsed) all read them through
`load_settings`. Each value is checked by its field's validator, and an error names the setting
and the source it came from (the file, the variable or the flag); every loaded `Settings`
records where each of its values came from (`Settings.source`, `tokokita-etl config`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from tokokita_etl.errors import ConfigError
from tokokita_etl.settings.layout import join
from tokokita_etl.settings.model import (
    ENV_VARS,
    OWN_SETTINGS,
    PATH_SETTINGS,
    SETTINGS,
    SHARED_SETTINGS,
    WATERMARK_NAME,
    Layer,
    Load,
    Settings,
    env_var,
    flag,
    loading,
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


def setting_variables(pipelines: Iterable[str] = ()) -> dict[str, str]:
    """Every environment variable `load_settings` reads, in the model's order: the YAML
    file's (`TOKOKITA_CONFIG`), each setting's `TOKOKITA_<NAME>` (the orders' own and the
    shared ones), then `TOKOKITA_<PIPELINE>__<NAME>` of each own setting (`OWN_SETTINGS`) of
    each pipeline named in `pipelines` (those other than the orders, whose own settings are
    the top level's). Variable -> what it sets: `config`, the setting's name, or
    `<pipeline>.<name>`."""
    found = {CONFIG_VAR: "config", **{env_var(name): name for name in SETTINGS}}
    for pipeline in pipelines:
        found.update({pipeline_env_var(pipeline, name): f"{pipeline}.{name}"
                      for name in OWN_SETTINGS})
    return found


def load_settings(
    config_path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    stack: Mapping[str, str] | None = None,
    in_airflow: bool = False,
    pipeline: str | None = None,
    pipeline_defaults: Mapping[str, Any] | None = None,
) -> Settings:
    """The settings from the explicit `overrides` (None: not given), the environment `env`
    (default: os.environ), the stack's variables `stack` (the command line's
    `stack_environment`), the YAML file (`config_path`, else $TOKOKITA_CONFIG, else
    config/pipeline.yaml when it exists) and the defaults; relative paths against `cwd`
    (`in_airflow`: for the Airflow adapter, which reads the warehouse of `warehouse_conn_id`
    from its connection afterwards).

    `pipeline`: the settings of that pipeline (None: the orders'). Its own settings come from
    its section of each source (`pipelines: {NAME: ...}` in the YAML file,
    `TOKOKITA_<NAME>__<SETTING>`), then `pipeline_defaults` (its declaration's), then the
    class defaults; the shared ones (`SHARED_SETTINGS`) from the top level, as the orders'.
    Its watermark is its name, and its state, staging and working folders are sub-folders
    named after it, so that nothing of one pipeline is another's."""
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
    sections = from_file.pop(PIPELINES_KEY, {})

    def from_vars(variables: Mapping[str, str]) -> dict[str, str]:
        return {name: variables[var] for var, name in ENV_VARS.items() if variables.get(var)}

    stack_file = cwd / STACK_SETTINGS_FILE
    layers = (
        Layer(Settings, from_vars(env), env_var),
        Layer(Settings, from_vars(stack or {}), lambda name: f"{stack_file} ({env_var(name)})"),
        Layer(Settings, from_file, lambda name: str(path)),
    )
    given = {name: value for name, value in (overrides or {}).items() if value is not None}
    origins = {name: flag(name) for name in given}
    if pipeline is not None:
        layers = _pipeline_layers(pipeline, layers, env, stack or {}, stack_file, path,
                                  sections.get(pipeline) or {}, pipeline_defaults or {})
        given[WATERMARK_NAME] = pipeline
        origins[WATERMARK_NAME] = f"the declaration of pipeline {pipeline!r}"
    for layer in layers:
        for name in layer.values:
            origins.setdefault(name, layer.origin(name))
    with loading(Load(layers=layers, origins=origins, in_airflow=in_airflow)):
        settings = validated(lambda: Settings(**given))
    resolved = {name: _absolute(getattr(settings, name), cwd) for name in PATH_SETTINGS}
    if pipeline is not None:
        resolved.update({name: join(resolved[name], pipeline) for name in OWN_FOLDERS})
    settings = settings.model_copy(update={
        **resolved, "warehouse_url": _absolute_sqlite_url(settings.warehouse_url, cwd)})
    settings._origins = origins
    return settings


#: the YAML file's key of the other pipelines' sections: `pipelines: {NAME: {setting: value}}`
PIPELINES_KEY = "pipelines"
#: shared folders in which a pipeline other than the orders keeps its files in a sub-folder
#: named after it (its watermark, claims and manifests; its stages' hand-over)
OWN_FOLDERS = ("state_dir", "staging_dir", "work_dir")


def _pipeline_layers(pipeline: str, top: tuple[Layer, ...], env: Mapping[str, str],
                     stack: Mapping[str, str], stack_file: Path, path: Path,
                     section: Mapping[str, Any], defaults: Mapping[str, Any]
                     ) -> tuple[Layer, ...]:
    """The sources of pipeline `pipeline`'s settings: its own settings from its section of
    each source, above the shared ones of the top level, in the same order; its declaration's
    defaults last."""
    def from_vars(variables: Mapping[str, str]) -> dict[str, str]:
        return {name: variables[var] for name in OWN_SETTINGS
                if variables.get(var := pipeline_env_var(pipeline, name))}

    def shared(layer: Layer) -> Layer:
        return Layer(Settings, {name: value for name, value in layer.values.items()
                                if name in SHARED_SETTINGS}, layer.origin)

    env_layer, stack_layer, file_layer = top
    return (
        Layer(Settings, from_vars(env), lambda name: pipeline_env_var(pipeline, name)),
        shared(env_layer),
        Layer(Settings, from_vars(stack),
              lambda name: f"{stack_file} ({pipeline_env_var(pipeline, name)})"),
        shared(stack_layer),
        Layer(Settings, dict(section), lambda name: f"{path} ({PIPELINES_KEY}.{pipeline})"),
        shared(file_layer),
        Layer(Settings, {name: value for name, value in defaults.items()},
              lambda name: f"the declaration of pipeline {pipeline!r}"),
    )


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
    for key in loaded:
        if key == PIPELINES_KEY:
            _check_sections(path, loaded[key])
        elif key not in SETTINGS:
            raise ConfigError(f"{path}: unknown setting {key!r}; known: {sorted(SETTINGS)}")
    _FILE_CACHE[path] = (version, loaded)
    return dict(loaded)


def _check_sections(path: Path, sections: Any) -> None:
    """`pipelines:` maps pipeline names to their own settings; a shared setting, the orders'
    watermark name or an unknown name there is an error naming the file and the key."""
    if not isinstance(sections, dict):
        raise ConfigError(f"{path}: {PIPELINES_KEY} must map pipeline names to their settings")
    for name, section in sections.items():
        where = f"{path}: {PIPELINES_KEY}.{name}"
        if not isinstance(section, dict):
            raise ConfigError(f"{where} must be a mapping of settings")
        for key in section:
            if key in SHARED_SETTINGS:
                raise ConfigError(f"{where}.{key}: {key} is shared by every pipeline; set it "
                                  "at the top level")
            if key == WATERMARK_NAME:
                raise ConfigError(f"{where}.{key}: a pipeline's watermark is named after it")
            if key not in SETTINGS:
                raise ConfigError(f"{where}: unknown setting {key!r}; known: "
                                  f"{sorted(set(SETTINGS) - set(SHARED_SETTINGS))}")


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
