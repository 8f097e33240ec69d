"""Why the weekly city report is not scheduled on partitioned assets (docs/decisions.md),
pinned on the installed Airflow: an upgrade that changes either rule fails here, and the
decision is to be read again.

1. A rebuild never fires: an `AssetPartitionDagRun` is reused only while it has created no
   run, so a date re-emitted after its week's run opens a new one that logs only that date.
4. Mixing time and events does not help: an asset event with a partition key queues no
   non-partitioned DAG.
"""

from __future__ import annotations

import inspect

from airflow.assets.manager import AssetManager


def _code(function) -> list[str]:
    return [line.strip() for line in inspect.getsource(function).splitlines()]


def test_a_partition_dag_run_is_reused_only_until_it_has_created_its_run():
    assert "if latest_apdr and latest_apdr.created_dag_run_id is None:" in \
        _code(AssetManager._get_or_create_apdr)


def test_an_event_with_a_partition_key_queues_no_non_partitioned_dag():
    assert "if not non_partitioned_dags or partition_key is not None:" in \
        _code(AssetManager._queue_dagruns)
