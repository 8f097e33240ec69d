"""The pipelines the runner serves, by name (`--pipeline NAME`) and by DAG id: the package's
own, and those the `declarations` setting names (`module:NAME`, imported when asked for)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import cache

from tokokita_etl.errors import ConfigError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

#: the pipeline a command runs when `--pipeline` is not given
DEFAULT = ORDERS.name
#: the package's own pipelines
PIPELINES: dict[str, Pipeline] = {pipeline.name: pipeline
                                  for pipeline in (ORDERS, WEEKLY_CITY_REPORT)}


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
        if not isinstance(value, Pipeline):
            raise ConfigError(f"declarations: {entry!r} is a {type(value).__name__}, "
                              "not a Pipeline")
        for known in (*PIPELINES.values(), *found):
            if value.name == known.name or value.dag_id == known.dag_id:
                raise ConfigError(f"declarations: {entry!r} repeats the pipeline "
                                  f"{known.name!r} (name or DAG id)")
        found.append(value)
    return tuple(found)


def every(declarations: str = "") -> dict[str, Pipeline]:
    """Every pipeline, by name: the package's own, then the declared ones."""
    return {**PIPELINES, **{p.name: p for p in declared(declarations)}}


def upstream_first(pipelines: Iterable[Pipeline]) -> list[Pipeline]:
    """`pipelines` in dependency order: each after the pipeline it is built from (its
    `upstream`), when that is among them; otherwise in the order given."""
    given = list(pipelines)
    names = {pipeline.name for pipeline in given}
    ordered: dict[str, Pipeline] = {}

    def place(pipeline: Pipeline) -> None:
        if pipeline.name in ordered:
            return
        if pipeline.upstream is not None and pipeline.upstream.pipeline.name in names:
            place(next(p for p in given if p.name == pipeline.upstream.pipeline.name))
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
    """The settings of `pipeline` (`settings.sources.load_settings` with `sources`): the
    orders' at the top level of each source, another's from its own section. A pipeline built
    from another's results carries that one's settings (`Settings.upstream`), from the same
    sources but for the flags of its own settings."""
    from tokokita_etl.settings.model import SHARED_SETTINGS
    from tokokita_etl.settings.sources import load_settings

    if pipeline.name == DEFAULT:
        settings = load_settings(**sources)
    else:
        settings = load_settings(**sources, pipeline=pipeline.name,
                                 pipeline_defaults=pipeline.defaults)
    if pipeline.upstream is not None:
        flags = {name: value for name, value in (sources.get("overrides") or {}).items()
                 if name in SHARED_SETTINGS}
        settings = settings.with_upstream(settings_of(pipeline.upstream.pipeline,
                                                      **{**sources, "overrides": flags}))
    return settings
