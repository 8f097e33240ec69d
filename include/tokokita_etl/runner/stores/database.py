"""The state store in PostgreSQL (`state_url`): the watermark, the claims and the manifests as
tables `state_watermark`, `state_claims` and `state_manifests` (in the connection's schema:
the first of its search_path, `public` by default), with the fields and rules of the file
store.

Every watermark update is one transaction holding the row lock of its date (`SELECT ... FOR
UPDATE`), so concurrent dates never lose an update; a claim is looked at and changed under the
date's advisory lock, so it is exclusive across machines (the lock is the session's: a killed
process releases it with its connection). Entries are stored as `json`, not `jsonb`, so their
fields keep their order and `state export` reproduces `state.json` as the file store writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import date
from typing import Any

from sqlalchemy import Connection, text

from tokokita_etl.errors import StateError, WarehouseError
from tokokita_etl.runner.watermark import (
    FAILED,
    FORMER_NAMES,
    SUCCESS,
    Claim,
    Watermark,
    WatermarkRules,
    check_document,
    check_entry,
    note_renamed,
    parse_claim,
)
from tokokita_etl.settings.model import Settings, default
from tokokita_etl.warehouse.database import Warehouse

#: the tables, by what they hold
WATERMARK, CLAIMS, MANIFESTS = "state_watermark", "state_claims", "state_manifests"

_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {WATERMARK} (
        pipeline text NOT NULL,
        partition_date date NOT NULL,
        entry json NOT NULL,
        PRIMARY KEY (pipeline, partition_date))""",
    f"""CREATE TABLE IF NOT EXISTS {CLAIMS} (
        pipeline text NOT NULL,
        partition_date date NOT NULL,
        claim json NOT NULL,
        PRIMARY KEY (pipeline, partition_date))""",
    f"""CREATE TABLE IF NOT EXISTS {MANIFESTS} (
        seq bigserial PRIMARY KEY,
        pipeline text NOT NULL,
        name text NOT NULL,
        partition_date date NOT NULL,
        body json NOT NULL,
        UNIQUE (pipeline, name))""",
    f"""CREATE INDEX IF NOT EXISTS state_manifests_by_date
        ON {MANIFESTS} (pipeline, partition_date, seq)""",
)

#: the advisory lock key of the schema's creation (two first runs at once)
_SCHEMA_LOCK_KEY = 0x746B6B7374617465  # "tkkstate"

#: URLs whose schema this process has made sure of
_READY: set[str] = set()

#: (URL, pipeline) whose watermark holds no row under its former name (`FORMER_NAMES`) any more
_RENAMED: set[tuple[str, str]] = set()

#: by URL and pipeline, by date: each entry's JSON text as last read and the entry parsed
#: and checked from it
_SEEN: dict[tuple[str, str], dict[str, tuple[str, dict[str, Any]]]] = {}


def _lock_key(pipeline: str, day: date) -> int:
    """A signed 64-bit advisory lock key for one pipeline's date."""
    digest = hashlib.sha256(f"{pipeline}\0{day.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class DatabaseStateStore(WatermarkRules):
    """The watermark, claims and manifests of one pipeline in a PostgreSQL database."""

    def __init__(self, url: str, pipeline: str, *,
                 connect_timeout_s: int = default("db_connect_timeout_s"),
                 statement_timeout_s: int = default("db_statement_timeout_s"),
                 lock_timeout_s: int = default("db_lock_timeout_s"),
                 answer_timeout_s: int = default("db_answer_timeout_s")) -> None:
        # the state tables hold instants (UTC), no local times: the connection needs no zone
        self.database = Warehouse(url, "UTC", connect_timeout_s=connect_timeout_s,
                                  statement_timeout_s=statement_timeout_s,
                                  lock_timeout_s=lock_timeout_s,
                                  answer_timeout_s=answer_timeout_s)
        if self.database.is_sqlite:
            raise StateError(f"state_url: the state database must be PostgreSQL, got {url!r}")
        self.pipeline = pipeline

    @classmethod
    def from_settings(cls, settings: Settings) -> DatabaseStateStore:
        """The state store of `settings.state_db_url`, with the `db_*` timeouts."""
        return cls(settings.state_db_url, settings.pipeline,
                   connect_timeout_s=settings.db_connect_timeout_s,
                   statement_timeout_s=settings.db_statement_timeout_s,
                   lock_timeout_s=settings.db_lock_timeout_s,
                   answer_timeout_s=settings.db_answer_timeout_s)

    @property
    def location(self) -> str:
        """Where the watermark is, for messages."""
        return f"{self.database.display_url} ({WATERMARK})"

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Connection]:
        """One transaction on the state database, its schema made on first use; a database
        that cannot be reached is a transient error (the run may be retried)."""
        with self.database.begin(label="state database") as conn:
            if self.database.display_url not in _READY:
                if not self._tables_exist(conn):  # (a read-only reader creates nothing)
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                 {"key": _SCHEMA_LOCK_KEY})
                    for statement in _DDL:
                        conn.execute(text(statement))
                _READY.add(self.database.display_url)
            yield conn

    @staticmethod
    def _tables_exist(conn: Connection) -> bool:
        return conn.execute(text(
            "SELECT to_regclass(:w) IS NOT NULL AND to_regclass(:c) IS NOT NULL "
            "AND to_regclass(:m) IS NOT NULL"),
            {"w": WATERMARK, "c": CLAIMS, "m": MANIFESTS}).scalar_one()

    def _stored(self) -> tuple[str, dict[str, Any]]:
        """The SQL of the name the rows are stored under (`:p`) and its parameters: while
        the watermark holds rows under its former name and none under its own, the former
        name (read in the same statement as the rows, so a rename committing meanwhile is
        seen whole or not at all)."""
        former = FORMER_NAMES.get(self.pipeline)
        if former is None or (self.database.display_url, self.pipeline) in _RENAMED:
            return ":p", {"p": self.pipeline}
        return (f"(CASE WHEN EXISTS (SELECT 1 FROM {WATERMARK} WHERE pipeline = :former) "
                f"AND NOT EXISTS (SELECT 1 FROM {WATERMARK} WHERE pipeline = :p) "
                "THEN :former ELSE :p END)", {"p": self.pipeline, "former": former})

    def _rename(self, conn: Connection) -> None:
        """Before a write: rename the rows stored under the former name to the watermark's
        own, in the writing transaction (nothing when the watermark already holds rows under
        its own name). Known renamed only once a later transaction finds no former row: this
        one may still roll back."""
        former = FORMER_NAMES.get(self.pipeline)
        where = (self.database.display_url, self.pipeline)
        if former is None or where in _RENAMED:
            return
        names = {"p": self.pipeline, "former": former}
        moved = conn.execute(text(
            f"UPDATE {WATERMARK} SET pipeline = :p WHERE pipeline = :former "
            f"AND NOT EXISTS (SELECT 1 FROM {WATERMARK} WHERE pipeline = :p)"), names).rowcount
        if moved:
            for table, key in ((CLAIMS, "partition_date"), (MANIFESTS, "name")):
                conn.execute(text(
                    f"UPDATE {table} AS t SET pipeline = :p WHERE pipeline = :former AND NOT "
                    f"EXISTS (SELECT 1 FROM {table} AS n WHERE n.pipeline = :p "
                    f"AND n.{key} = t.{key})"), names)
            note_renamed(self.location, former, self.pipeline)
        elif not conn.execute(text(f"SELECT EXISTS (SELECT 1 FROM {WATERMARK} WHERE "
                                 "pipeline = :former)"), names).scalar_one():
            _RENAMED.add(where)

    # -- watermark ---------------------------------------------------------------------------

    def _document(self, rows: list[Any]) -> dict[str, Any]:
        """The document of the rows (date, the entry's JSON text): an entry whose text this
        process has already parsed and checked is taken as it was (never changed in place:
        readers share it), every other one parsed and checked."""
        where = (self.database.display_url, self.pipeline)
        seen, now_seen = _SEEN.get(where, {}), {}
        runs = {}
        for day, entry_text in rows:
            key = day.isoformat()
            known = seen.get(key)
            if known is not None and known[0] == entry_text:
                entry = known[1]
            else:
                try:
                    entry = json.loads(entry_text)
                except json.JSONDecodeError as exc:
                    raise StateError(f"{self.location}: corrupt watermark: bad entry for "
                                     f"{key}: invalid JSON ({exc.msg})") from None
                check_entry(self.location, key, entry)
            now_seen[key] = (entry_text, entry)
            runs[key] = entry
        _SEEN[where] = now_seen  # (replaced whole: a reader in another thread keeps its own)
        return {"pipeline": self.pipeline, "runs": runs}

    def read(self) -> Watermark:
        """The current watermark."""
        name, names = self._stored()
        with self._begin() as conn:
            # the entries' text: the same text as read before is not parsed again
            rows = conn.execute(text(
                f"SELECT partition_date, entry::text FROM {WATERMARK} "
                f"WHERE pipeline = {name} ORDER BY partition_date"), names).all()
        return Watermark(self._document(rows))

    def check_writable(self) -> None:
        """StateError unless the state tables can be written now (a read-only database or
        role stops the run before any stage)."""
        try:
            with self._begin() as conn:
                # refused in a read-only transaction and without the privileges (no row
                # is touched: `WHERE false`)
                for table in (WATERMARK, CLAIMS, MANIFESTS):
                    conn.execute(text(f"UPDATE {table} SET pipeline = pipeline WHERE false"))
        except WarehouseError as exc:
            if exc.transient:
                raise
            raise StateError(f"{self.location}: the state cannot be written ({exc}); nothing "
                             "was run") from None

    def update_entry(self, day: date, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        key = {"p": self.pipeline, "d": day}
        with self._begin() as conn:
            self._rename(conn)
            # the row exists (maybe as a placeholder only this transaction sees) and is locked
            conn.execute(text(f"INSERT INTO {WATERMARK} (pipeline, partition_date, entry)"
                              " VALUES (:p, :d, '{}') ON CONFLICT DO NOTHING"), key)
            entry = conn.execute(text(
                f"SELECT entry FROM {WATERMARK} WHERE pipeline = :p "
                "AND partition_date = :d FOR UPDATE"), key).scalar_one()
            check_entry(self.location, day.isoformat(), entry)
            result = mutate(entry)
            if entry:
                conn.execute(text(f"UPDATE {WATERMARK} SET entry = :e WHERE "
                                  "pipeline = :p AND partition_date = :d"),
                             {**key, "e": json.dumps(entry, ensure_ascii=False)})
            else:
                conn.execute(text(f"DELETE FROM {WATERMARK} WHERE pipeline = :p "
                                  "AND partition_date = :d"), key)
        return result

    def export(self) -> dict[str, Any]:
        """The watermark document (`state.json`'s format)."""
        return self.read().data

    def import_entries(self, data: dict[str, Any]) -> list[str]:
        """Add the entries of a watermark document in one transaction; StateError naming
        the dates that already have an entry here (nothing is imported then)."""
        check_document("import", data)
        with self._begin() as conn:
            conn.execute(text(f"LOCK TABLE {WATERMARK} IN SHARE ROW EXCLUSIVE MODE"))
            self._rename(conn)
            present = {row[0].isoformat() for row in conn.execute(text(
                f"SELECT partition_date FROM {WATERMARK} WHERE pipeline = :p"),
                {"p": self.pipeline})}
            clash = sorted(present & set(data["runs"]))
            if clash:
                raise StateError(f"{self.location}: already holds entries for "
                                 f"{', '.join(clash)}; nothing was imported")
            for key, entry in sorted(data["runs"].items()):
                conn.execute(text(f"INSERT INTO {WATERMARK} (pipeline, partition_date, "
                                  "entry) VALUES (:p, :d, :e)"),
                             {"p": self.pipeline, "d": date.fromisoformat(key),
                              "e": json.dumps(entry, ensure_ascii=False)})
        return sorted(data["runs"])

    # -- claims ------------------------------------------------------------------------------

    def claim_location(self, day: date) -> str:
        """Where `day`'s claim is, for messages."""
        return f"{self.database.display_url} ({CLAIMS}, {day.isoformat()})"

    @contextlib.contextmanager
    def date_locked(self, day: date) -> Iterator[None]:
        """Hold `day`'s advisory lock for the block (on a connection of its own)."""
        with self._begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                         {"key": _lock_key(self.pipeline, day)})
            yield

    def read_claim(self, day: date) -> Claim | None:
        """The current claim of `day`, or None; a damaged claim is a StateError naming it."""
        name, names = self._stored()
        with self._begin() as conn:
            data = conn.execute(text(f"SELECT claim FROM {CLAIMS} WHERE pipeline = {name} "
                                     "AND partition_date = :d"),
                                {**names, "d": day}).scalar_one_or_none()
        return None if data is None else parse_claim(data, self.claim_location(day))

    def claims(self, days: Iterable[date]) -> dict[date, Claim | StateError]:
        """The claim of each of `days` that has one (a damaged one: the StateError naming
        it), in one query."""
        days = list(days)
        if not days:
            return {}
        name, names = self._stored()
        with self._begin() as conn:
            rows = conn.execute(text(f"SELECT partition_date, claim FROM {CLAIMS} WHERE "
                                     f"pipeline = {name} AND partition_date = ANY(:ds)"),
                                {**names, "ds": days}).all()
        found: dict[date, Claim | StateError] = {}
        for day, data in rows:
            try:
                found[day] = parse_claim(data, self.claim_location(day))
            except StateError as exc:
                found[day] = exc
        return found

    def put_claim(self, day: date, claim: Claim) -> None:
        """Write `day`'s claim (call under `date_locked`)."""
        with self._begin() as conn:
            self._rename(conn)
            conn.execute(text(f"INSERT INTO {CLAIMS} (pipeline, partition_date, claim) "
                              "VALUES (:p, :d, :c) ON CONFLICT (pipeline, partition_date) "
                              "DO UPDATE SET claim = EXCLUDED.claim"),
                         {"p": self.pipeline, "d": day, "c": json.dumps(claim.to_dict())})

    def drop_claim(self, day: date) -> None:
        """Remove `day`'s claim (call under `date_locked`)."""
        with self._begin() as conn:
            self._rename(conn)
            conn.execute(text(f"DELETE FROM {CLAIMS} WHERE pipeline = :p "
                              "AND partition_date = :d"), {"p": self.pipeline, "d": day})

    # -- manifests ---------------------------------------------------------------------------

    def write_manifest(self, name: str, body: dict[str, Any]) -> tuple[str, str]:
        """Store a run's manifest as `name` (or `name-2`...: never replaces one); returns its
        final name and where it went."""
        day = date.fromisoformat(body["partition_date"])
        text_body = json.dumps(body, ensure_ascii=False)
        final, n = name, 1
        with self._begin() as conn:
            self._rename(conn)
            while conn.execute(text(
                    f"INSERT INTO {MANIFESTS} (pipeline, name, partition_date, body) "
                    "VALUES (:p, :n, :d, :b) ON CONFLICT DO NOTHING RETURNING seq"),
                    {"p": self.pipeline, "n": final, "d": day, "b": text_body}).first() is None:
                n += 1
                final = f"{name}-{n}"
        return final, f"{self.database.display_url} ({MANIFESTS}, {final})"

    def last_outcomes(self, days: Iterable[date]) -> dict[date, dict[str, Any]]:
        """The newest manifest with a recorded outcome (success or failed) of each of `days`
        that has one, in one query."""
        days = list(days)
        if not days:
            return {}
        name, names = self._stored()
        with self._begin() as conn:
            rows = conn.execute(text(
                f"SELECT DISTINCT ON (partition_date) partition_date, body FROM {MANIFESTS} "
                f"WHERE pipeline = {name} AND partition_date = ANY(:ds) "
                "AND body->>'status' IN (:ok, :failed) ORDER BY partition_date, seq DESC"),
                {**names, "ds": days, "ok": SUCCESS, "failed": FAILED}).all()
        return {day: body for day, body in rows if isinstance(body, dict)}

    def manifests(self, day: date) -> Iterator[dict[str, Any]]:
        """The manifests of `day`, newest first."""
        name, names = self._stored()
        with self._begin() as conn:
            rows = conn.execute(text(f"SELECT body FROM {MANIFESTS} WHERE pipeline = {name} "
                                     "AND partition_date = :d ORDER BY seq DESC"),
                                {**names, "d": day}).all()
        for (body,) in rows:
            if isinstance(body, dict):
                yield body
