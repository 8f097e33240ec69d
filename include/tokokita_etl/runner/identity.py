"""The warehouse's identity: the watermark never describes a warehouse that is not there.

The warehouse holds one identity row (`warehouse.warehouse_identity`: a random id, who created
it and when, and a revision that every load's transaction raises by one). Each success
recorded in the watermark names the id and revision of the warehouse that took its rows
(`warehouse` in the entry). Before a run changes anything (`verify`, called by the gate and
by every stage task), and wherever a person reads the dates' states (`due`, `status`, the status
page), the two are compared:

- a warehouse that is missing (no SQLite file, no tables), holds no identity while the
  watermark names one, holds another identity, or holds the watermark's identity at an
  older revision (a restored older copy) is refused: `WarehouseIdentityError`, nothing
  written, no attempt recorded;
- a watermark that names no warehouse (a first run, or entries recorded before identities)
  takes the present warehouse, which the first run creates (`ensure`).

After a real loss, `reconcile` makes the watermark describe the present warehouse again: the
done dates it does not hold with the recorded checksums become *needs re-run*.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path

from sqlalchemy import text

from tokokita_etl.errors import StateError, WarehouseError
from tokokita_etl.runner.declaration import Pipeline
from tokokita_etl.runner.watermark import IN_PROGRESS, SUCCESS, WAREHOUSE, Watermark
from tokokita_etl.settings.model import Settings
from tokokita_etl.warehouse.database import Warehouse

#: the stage a date marked by `reconcile` names as where it needs its re-run from
RECONCILED = "reconcile"
#: the warehouse's table holding its identity row
IDENTITY_TABLE = "warehouse_identity"


class WarehouseIdentityError(StateError):
    """The warehouse is not the one the watermark describes (exit 2, not an attempt).

    `url`: the warehouse's URL as shown in messages (password hidden)."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class Presence(StrEnum):
    """What is at the warehouse URL."""

    MISSING = "missing"  # no SQLite file
    EMPTY = "empty"  # no TokoKita tables
    UNMARKED = "unmarked"  # the tables, without an identity row (made before identities)
    MARKED = "marked"
    #: the database did not answer: nothing can be told, and nothing is written to it
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Identity:
    """One warehouse's identity row."""

    id: str
    created_by: str
    created_at: str
    revision: int

    def __str__(self) -> str:
        return (f"{self.id} (created {self.created_at} by {self.created_by}, "
                f"revision {self.revision})")


@dataclass(frozen=True)
class Present:
    """What `present` found at the warehouse URL."""

    presence: Presence
    identity: Identity | None = None

    def __str__(self) -> str:
        if self.presence is Presence.MISSING:
            return "none: its file does not exist"
        if self.presence is Presence.EMPTY:
            return "none: it holds no TokoKita tables"
        if self.presence is Presence.UNMARKED:
            return "none: its tables carry no identity"
        return str(self.identity)


@dataclass(frozen=True)
class Recorded:
    """The warehouse the watermark describes: the ids its entries name, each with the
    highest revision recorded, and how many done dates it holds (with or without an id)."""

    revisions: dict[str, int]
    done: int

    @property
    def describes_data(self) -> bool:
        return bool(self.revisions) or self.done > 0

    def __str__(self) -> str:
        names = ", ".join(f"{wid} (revision {rev})" for wid, rev in sorted(self.revisions.items()))
        return names or "no identity (entries recorded before warehouse identities)"


def recorded(watermark: Watermark) -> Recorded:
    """The warehouse `watermark` describes (from its `Summary`: the file store keeps it, so
    a year of dates is not read for it)."""
    summary = watermark.summary()
    return Recorded(dict(summary.revisions), summary.done)


def partition_tables(pipelines: Iterable[Pipeline]) -> tuple[str, ...]:
    """The partitioned tables (a partition column in their `info`) that the `schema`
    modules of `pipelines` and of their upstreams declare, by name: a warehouse holding one
    of them holds the pipelines' data."""
    import importlib

    from sqlalchemy import Table

    names: set[str] = set()
    for pipeline in pipelines:
        while True:
            if pipeline.schema:
                module = importlib.import_module(pipeline.schema)
                names.update(value.name for value in vars(module).values()
                             if isinstance(value, Table) and value.info.get("partition"))
            if pipeline.upstream is None:
                break
            pipeline = pipeline.upstream.pipeline
    return tuple(sorted(names))


def present(warehouse: Warehouse, tables: Iterable[str]) -> Present:
    """What is at `warehouse`'s URL, `tables` (`partition_tables`) telling a warehouse made
    before identities from an empty one; creates nothing (an SQLite file that is not there is
    not opened, so not made). A database that cannot be reached is UNREACHABLE: the stage
    that needs it fails as it does today (transient, retried), and nothing is written to
    it."""
    if warehouse.is_sqlite:
        path = Path(warehouse.url.database)
        if not path.is_file():
            return Present(Presence.MISSING)
    try:
        return _read(warehouse, tuple(tables))
    except WarehouseError as exc:
        if exc.transient:
            return Present(Presence.UNREACHABLE)
        raise


def _read(warehouse: Warehouse, tables: tuple[str, ...]) -> Present:
    probed = (IDENTITY_TABLE, *tables)
    names = {f"t{n}": name for n, name in enumerate(probed)}
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        if warehouse.is_sqlite:
            there = {name for (name,) in conn.execute(text(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                f"AND name IN ({', '.join(f':{key}' for key in names)})"), names)}
        else:
            found = conn.execute(text("SELECT " + ", ".join(
                f"to_regclass(CAST(:{key} AS text)) IS NOT NULL" for key in names)),
                names).one()
            there = {name for name, held in zip(probed, found, strict=True) if held}
        if IDENTITY_TABLE not in there:
            return Present(Presence.UNMARKED if there else Presence.EMPTY)
        row = conn.execute(text("SELECT warehouse_id, created_by, created_at, revision "
                                f"FROM {IDENTITY_TABLE}")).first()  # (one row at most)
    if row is None:
        return Present(Presence.UNMARKED)
    wid, created_by, created_at, revision = row
    return Present(Presence.MARKED, Identity(wid, created_by, str(created_at), int(revision)))


def problem(found: Present, wanted: Recorded) -> str | None:
    """Why the warehouse `found` is not the one `wanted` describes, or None when it is (or the
    watermark names none)."""
    if not wanted.describes_data or found.presence is Presence.UNREACHABLE:
        return None
    if found.presence in (Presence.MISSING, Presence.EMPTY):
        return "it is missing or empty"
    if not wanted.revisions:
        return None  # entries from before identities: the present warehouse is taken
    if found.presence is Presence.UNMARKED or found.identity is None:
        return "it is another warehouse (it carries no identity)"
    if len(wanted.revisions) > 1:
        return "the watermark names more than one warehouse"
    [(wid, revision)] = wanted.revisions.items()
    if found.identity.id != wid:
        return "it is another warehouse"
    if found.identity.revision < revision:
        return (f"it is an older copy of it (revision {found.identity.revision}, the "
                f"watermark has seen revision {revision})")
    return None


def message(settings: Settings, warehouse: Warehouse, found: Present, wanted: Recorded,
            why: str, *, where: str) -> str:
    """The one line that refuses a run on the wrong warehouse: both identities and the way
    out."""
    return (f"warehouse {warehouse.display_url} is not the one the watermark ({where}) "
            f"describes: {why}. The watermark records {wanted.done} done dates in warehouse "
            f"{wanted}; this warehouse's identity: {found}. Nothing was run. Point "
            f"warehouse_url at the watermark's warehouse, or after a real loss run "
            f"`tokokita-etl state reconcile`: the dates this warehouse does not hold become "
            f"needs re-run")


def refuse(settings: Settings, warehouse: Warehouse, found: Present,
           watermarks: Iterable[tuple[Watermark, str]]) -> None:
    """The one rule: WarehouseIdentityError (one line naming both identities and the way
    out) when `found`, what is at `warehouse`'s URL, is not the warehouse one of
    `watermarks` (each with where it is) describes. Writes nothing."""
    for watermark, where in watermarks:
        wanted = recorded(watermark)
        why = problem(found, wanted)
        if why is not None:
            raise WarehouseIdentityError(message(settings, warehouse, found, wanted, why,
                                                 where=where), url=warehouse.display_url)


def verify(pipeline: Pipeline, settings: Settings, watermark: Watermark, *, where: str
           ) -> Present:
    """What is at the warehouse URL, when it is the warehouse `watermark` (`pipeline`'s)
    describes (or the watermark names none); WarehouseIdentityError naming both otherwise.
    Writes nothing."""
    warehouse = Warehouse.from_settings(settings)
    found = present(warehouse, partition_tables([pipeline]))
    refuse(settings, warehouse, found, [(watermark, where)])
    return found


def ensure(pipeline: Pipeline, settings: Settings, found: Present) -> None:
    """Create the warehouse (a first run: with `pipeline`'s tables) or give an existing one
    made before identities its identity, once `verify` accepted it: what a run that proceeds
    does first. A pipeline built from another's results creates none that the other's
    watermark describes otherwise (WarehouseIdentityError, as `verify`'s)."""
    if found.presence not in (Presence.MARKED, Presence.UNREACHABLE):
        warehouse = Warehouse.from_settings(settings)
        if pipeline.upstream is not None:
            from tokokita_etl.runner.stores import state_store

            upstream = state_store(settings.upstream)
            refuse(settings, warehouse, found, [(upstream.read(), upstream.location)])
        pipeline.declare_tables()
        warehouse.ensure_schema(created_by=settings.pipeline)


# -- recovery ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reconciled:
    """What `reconcile` did."""

    identity: Identity
    kept: list[str]
    rerun: list[str]
    created: bool


def reconcile(pipeline: Pipeline, settings: Settings, now: datetime) -> Reconciled:
    """Make the watermark describe the present warehouse after a real loss.

    The warehouse is created when missing or empty (a new identity), or given an identity
    when it has none. Each done date whose fact and summary rows in it have the checksums the
    watermark recorded stays done, now naming this warehouse; every other done date becomes
    *needs re-run* (a failed outcome that is not a failure of the partition: its failures
    since the last success are kept). The next run of such a date reloads it.
    """
    from tokokita_etl.runner.stores import state_store

    warehouse = Warehouse.from_settings(settings)
    store = state_store(settings)
    store.check_writable()
    tables = partition_tables([pipeline])
    found = present(warehouse, tables)
    if found.presence is Presence.UNREACHABLE:
        raise WarehouseError(f"warehouse {warehouse.display_url}: it does not answer; nothing "
                             "was reconciled", transient=True)
    created = found.presence in (Presence.MISSING, Presence.EMPTY)
    pipeline.declare_tables()
    # its tables also when another pipeline's reconcile has just created the warehouse
    warehouse.ensure_schema(created_by=settings.pipeline)
    if found.presence is not Presence.MARKED:
        found = present(warehouse, tables)
    identity = found.identity
    assert identity is not None  # (ensure_schema wrote it)
    named = {WAREHOUSE: {"id": identity.id, "revision": identity.revision}}
    kept, rerun = [], []
    stamp = now.isoformat(timespec="seconds")
    for iso, entry in sorted(store.read().runs.items()):
        day = date.fromisoformat(iso)
        if entry.get("status") != SUCCESS or IN_PROGRESS in entry:
            if WAREHOUSE in entry:
                store.update_entry(day, lambda e: e.pop(WAREHOUSE, None))
            continue
        recorded_sums = entry.get("checksums") or {}
        held = pipeline.held_checksums(warehouse, day) \
            if pipeline.held_checksums is not None and not created else {}
        if held and all(recorded_sums.get(key) == value for key, value in held.items()):
            store.update_entry(day, lambda e: e.update(named))
            kept.append(iso)
            continue
        store.record_needs_rerun(
            day, f"warehouse {identity.id} does not hold the rows of {iso} its success "
                 f"recorded (reconciled at {stamp})", RECONCILED, now)
        rerun.append(iso)
    return Reconciled(identity, kept, rerun, created)

