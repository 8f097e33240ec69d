"""`RawPartitionTrigger`: waits on the triggerer for a partition file, until a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class RawPartitionTrigger(BaseTrigger):
    """Fire `present` when the partition file exists and is non-empty, `timeout` at the deadline.

    :param filepath: absolute path of the partition file, or its object-storage URL.
    :param deadline: ISO 8601 instant after which waiting stops.
    :param poll_interval: seconds between checks.
    :param conn_id: the Airflow connection an object-storage URL is reached with (the
        `object_storage_conn_id` setting; read here, on the triggerer); empty: the AWS
        environment.
    """

    def __init__(self, filepath: str, deadline: str, poll_interval: float = 60.0,
                 conn_id: str = "") -> None:
        super().__init__()
        self.filepath = filepath
        self.deadline = deadline
        self.poll_interval = poll_interval
        self.conn_id = conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and arguments, for the triggerer."""
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"filepath": self.filepath, "deadline": self.deadline,
                 "poll_interval": self.poll_interval, "conn_id": self.conn_id})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll the file until it is there or the deadline passes."""
        from tokokita_etl.settings.layout import partition_file_exists

        if self.conn_id:
            from tokokita_airflow.connections import ause_object_storage

            await ause_object_storage(self.conn_id)
        deadline = datetime.fromisoformat(self.deadline)
        while True:
            # an object-storage URL is asked over the network: off the triggerer's event loop
            if await asyncio.to_thread(partition_file_exists, self.filepath):
                yield TriggerEvent({"status": "present", "filepath": self.filepath})
                return
            remaining = (deadline - datetime.now(UTC)).total_seconds()
            if remaining <= 0:
                yield TriggerEvent({"status": "timeout", "filepath": self.filepath})
                return
            await asyncio.sleep(min(self.poll_interval, remaining))
