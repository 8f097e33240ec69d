"""The warehouse fixtures of tests/db (a fresh PostgreSQL schema per test, `backend` on both
SQLite and PostgreSQL) for the fault tests that run on both backends."""
from __future__ import annotations

from tests.db.conftest import backend, pg_url, workspace  # noqa: F401
