"""The pipelines this package declares, by name (`--pipeline NAME`) and by DAG id."""

from __future__ import annotations

from tokokita_etl.errors import ConfigError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.declaration import Pipeline

#: the pipeline a command runs when `--pipeline` is not given
DEFAULT = ORDERS.name
PIPELINES: dict[str, Pipeline] = {pipeline.name: pipeline for pipeline in (ORDERS,)}


def by_name(name: str) -> Pipeline:
    """The pipeline called `name`; ConfigError naming the known ones when there is none."""
    try:
        return PIPELINES[name]
    except KeyError:
        raise ConfigError(f"unknown pipeline {name!r}; pipelines: "
                          f"{', '.join(sorted(PIPELINES))}") from None


def by_dag_id(dag_id: str) -> Pipeline | None:
    """The pipeline whose DAG is `dag_id`, or None (another DAG)."""
    return next((p for p in PIPELINES.values() if p.dag_id == dag_id), None)
