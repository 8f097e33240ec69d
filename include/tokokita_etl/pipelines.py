"""The pipelines the runner serves, by name (`--pipeline NAME`) and by DAG id: the package's
own, those installed packages register under the entry point group `tokokita_etl.pipelines`
(`NAME = "module:ATTRIBUTE"`, the entry point named as its pipeline), and those the
`declarations` setting names (`module:NAME`, imported when asked for)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import cache

from tokokita_etl.errors import ConfigError
from tokokita_etl.monthly.pipeline import MONTHLY_CITY_REPORT
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

#: the entry point group under which an installed package registers its pipelines
ENTRY_POINTS = "tokokita_etl.pipelines"
#: the pipeline a command runs when `--pipeline` is not given
DEFAULT = ORDERS.name
#: the package's own pipelines
PIPELINES: dict[str, Pipeline] = {pipeline.name: pipeline
                                  for pipeline in (ORDERS, WEEKLY_CITY_REPORT, MONTHLY_CITY_REPORT)}


#: the pipelines the `declarations` setting has named so far, by name (an upstream may name one)
_DECLARED: dict[str, Pipeline] = {}


@cache
def installed() -> tuple[Pipeline, ...]:
    """The pipelines installed packages register (`ENTRY_POINTS`), in the order of their
    names; a ConfigError names the entry point that cannot be loaded, is no `Pipeline`, is
    not named as its pipeline, or repeats a name or a DAG id."""
    from importlib.metadata import entry_points

    found: list[Pipeline] = []
    for point in sorted(entry_points(group=ENTRY_POINTS), key=lambda point: point.name):
        where = f"entry point {point.name} = {point.value!r} ({ENTRY_POINTS})"
        try:
            value = point.load()
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{where}: cannot load it: {exc}") from None
        found.append(_checked(value, where, (*PIPELINES.values(), *found)))
        if value.name != point.name:
            raise ConfigError(f"{where}: names the pipeline {value.name!r}; name the entry "
                              "point as its pipeline")
    return tuple(found)


@cache
def declared(declarations: str) -> tuple[Pipeline, ...]:
    """The pipelines `declarations` names (`module:NAME[,module:NAME...]`), in its order; a
    ConfigError names the entry that cannot be imported, is no `Pipeline`, or repeats a name
    or a DAG id."""
    found: list[Pipeline] = []
    for entry in (part.strip() for part in declarations.split(",") if part.strip()):
        module, _, name = entry.partition(":")
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"declarations: cannot import {entry!r}: {exc}") from None
        found.append(_checked(value, f"declarations: {entry!r}",
                              (*PIPELINES.values(), *installed(), *found)))
    _DECLARED.update((pipeline.name, pipeline) for pipeline in found)
    return tuple(found)


def upstream_pipeline(name: str) -> Pipeline | None:
    """The pipeline an upstream names (`runner.declaration.Upstream`), or None: the
    package's, else an installed one (looked for only then) or one declared so far."""
    if name in PIPELINES:
        return PIPELINES[name]
    return next((p for p in (*installed(), *_DECLARED.values()) if p.name == name), None)


def _checked(value: object, where: str, known: tuple[Pipeline, ...]) -> Pipeline:
    """`value`, a `Pipeline` whose name and DAG id no pipeline of `known` has; else a
    ConfigError starting with `where`."""
    if not isinstance(value, Pipeline):
        raise ConfigError(f"{where} is a {type(value).__name__}, not a Pipeline")
    for other in known:
        if value.name == other.name or value.dag_id == other.dag_id:
            raise ConfigError(f"{where} repeats the pipeline {other.name!r} (name or DAG id)")
    return value


def every(declarations: str = "") -> dict[str, Pipeline]:
    """Every pipeline, by name: the package's own, the installed ones, then the declared."""
    return {**PIPELINES, **{p.name: p for p in (*installed(), *declared(declarations))}}


def upstream_first(pipelines: Iterable[Pipeline]) -> list[Pipeline]:
    """`pipelines` in dependency order: each after the pipeline it is built from (its
    `upstream`), when that is among them; otherwise in the order given."""
    given = list(pipelines)
    names = {pipeline.name for pipeline in given}
    ordered: dict[str, Pipeline] = {}

    def place(pipeline: Pipeline) -> None:
        if pipeline.name in ordered:
            return
        if pipeline.upstream is not None and pipeline.upstream.name in names:
            place(next(p for p in given if p.name == pipeline.upstream.name))
        ordered[pipeline.name] = pipeline

    for pipeline in given:
        place(pipeline)
    return list(ordered.values())


def by_name(name: str, declarations: str = "") -> Pipeline:
    """The pipeline called `name`; ConfigError naming the known ones when there is none."""
    known = every(declarations)
    try:
        return known[name]
    except KeyError:
        raise ConfigError(f"unknown pipeline {name!r}; pipelines: "
                          f"{', '.join(sorted(known))}") from None


def by_dag_id(dag_id: str, declarations: str = "") -> Pipeline | None:
    """The pipeline whose DAG is `dag_id`, or None (another DAG)."""
    return next((p for p in every(declarations).values() if p.dag_id == dag_id), None)


def settings_of(pipeline: Pipeline, **sources):
    """The settings of `pipeline`, of its class (`Pipeline.settings`;
    `settings.sources.load_settings` with `sources`): the shared ones from the top level of
    each source, its own from its section (the orders' also at the top level, their older
    spelling). A pipeline built from another's results carries that one's settings
    (`upstream`), from the same sources but for the flags of its own settings."""
    from tokokita_etl.settings.model import SHARED_SETTINGS
    from tokokita_etl.settings.sources import load_settings

    settings = load_settings(**sources, pipeline=pipeline.name, model=pipeline.settings,
                             pipeline_defaults=pipeline.defaults,
                             default_pipeline=pipeline.name == DEFAULT,
                             top_level=PIPELINES[DEFAULT].settings.pipeline_fields(),
                             known_fields=_section_fields)
    if pipeline.upstream is not None:
        flags = {name: value for name, value in (sources.get("overrides") or {}).items()
                 if name in SHARED_SETTINGS}
        settings = settings.with_upstream(settings_of(pipeline.upstream.pipeline,
                                                      **{**sources, "overrides": flags}))
    return settings


def shared_settings(config_path=None, **sources):
    """The shared settings alone (`settings.sources.load_settings` with `sources`), the YAML
    file's top level checked against the shared settings and the default pipeline's."""
    from tokokita_etl.settings.sources import load_settings

    return load_settings(config_path, **sources,
                         top_level=PIPELINES[DEFAULT].settings.pipeline_fields(),
                         known_fields=_section_fields)


def load_settings(config_path=None, **sources):
    """The settings of the default pipeline (the orders), as the command line reads them
    when `--pipeline` is not given (`settings_of`)."""
    return settings_of(PIPELINES[DEFAULT], config_path=config_path, **sources)


@cache
def _section_fields(declarations: str) -> frozenset[str]:
    """The settings a pipeline's section may hold: those of the section of every package's,
    installed and declared (`declarations`) pipeline (looked for only when asked: a section
    holding a setting that is not the runner's, the declared ones only when neither the
    package's nor the installed ones have it)."""
    from tokokita_etl.settings.sources import section_fields

    return frozenset(name for pipeline in (*PIPELINES.values(), *installed(),
                                           *declared(declarations))
                     for name in section_fields(pipeline.settings))


def setting_variables(pipelines: Iterable[Pipeline] = ()) -> dict[str, str]:
    """Every environment variable the settings of `pipelines` (default: the package's own
    and the installed ones) are read from (`settings.sources.setting_variables`)."""
    from tokokita_etl.settings.sources import setting_variables as variables

    chosen = list(pipelines) or [*PIPELINES.values(), *installed()]
    return variables({pipeline.name: pipeline.settings for pipeline in chosen}, DEFAULT)
