"""The state store of a configuration: the tables of `state_url`, else the files of `state_dir`.

Both stores are built on the watermark's rules (`runner.watermark`); choosing between them here
leaves neither importing the other. The database store (SQLAlchemy) is imported only when it is
the one configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.settings.model import Settings

if TYPE_CHECKING:
    from tokokita_etl.runner.stores.database import DatabaseStateStore


def state_store(settings: Settings) -> StateStore | DatabaseStateStore:
    """The state store of these settings: the database of `state_url`, else the files in
    `state_dir`."""
    if settings.state_db_url:
        from tokokita_etl.runner.stores.database import DatabaseStateStore

        return DatabaseStateStore.from_settings(settings)
    return StateStore(settings.state_file, settings.pipeline)
