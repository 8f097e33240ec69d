"""The longest single warehouse statement of one run, per stage (for choosing the deadlines).

    python -m bench.statements --rows 5000000 --backend postgres [--json]

Runs the stages in this process on a generated partition (the project's generator, seed 0)
and a fresh warehouse, then reports, per stage, the longest single statement:

The three longest of each stage are shown.

- PostgreSQL: measured by the server's clock, as `statement_timeout` counts it: a second
  connection polls `pg_stat_activity` every 50 ms for the run's backends and keeps, per
  statement (`query_start`), the longest time it was seen active. It sees every statement,
  COPY and the streamed checksum cursor's fetches included (resolution: the poll interval).
  The client's longest single wait for the server per stage is shown beside it (the silence
  on the wire that `db_answer_timeout_s` must outlast; during a COPY the client writes, so
  a long COPY is not a long silence).
- SQLite: there is no server and no statement deadline (only the busy timeout,
  `db_lock_timeout_s`); each statement sent through SQLAlchemy is timed by the client
  (`before_cursor_execute` / `after_cursor_execute`), the batched inserts one batch each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
import uuid
from datetime import date

from bench.harness import DAY, DEFAULT_PG_URL, OUT, Warehouses, partition
from tokokita_etl.orders.pipeline import ORDERS

POLL_S = 0.05


class ServerClock:
    """The longest active time of each statement of the backends of one database."""

    def __init__(self, url: str, database: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"),
                                    autocommit=True)
        self.database = database
        self.longest: dict[tuple[int, str], tuple[float, str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.is_set():
            rows = self.conn.execute(
                "SELECT pid, query_start::text, extract(epoch FROM clock_timestamp() - "
                "query_start), left(query, 90) FROM pg_stat_activity WHERE datname = %s "
                "AND state = 'active' AND pid <> pg_backend_pid()", (self.database,)).fetchall()
            for pid, start, seconds, query in rows:
                key = (pid, start)
                if seconds is not None and seconds > self.longest.get(key, (0.0, ""))[0]:
                    self.longest[key] = (float(seconds), " ".join(query.split()))
            time.sleep(POLL_S)

    def take(self) -> list[tuple[float, str]]:
        """The statements seen since the last call, longest first."""
        seen, self.longest = self.longest, {}
        return sorted(seen.values(), reverse=True)


class ClientWaits:
    """The longest single wait of the warehouse's psycopg connections for the server (a
    result, room to write, a fetched batch): the silence the answer deadline
    (`db_answer_timeout_s`) must outlast. Times `_AnsweredConnection.wait` in this process."""

    def __init__(self) -> None:
        from tokokita_etl.warehouse import database as warehouse

        self.longest = 0.0
        original = warehouse._AnsweredConnection.wait

        def timed(conn, gen, interval: float = 0.1, timeout: float | None = None):
            started = time.perf_counter()
            try:
                return original(conn, gen, interval, timeout)
            finally:
                self.longest = max(self.longest, time.perf_counter() - started)

        warehouse._AnsweredConnection.wait = timed

    def take(self) -> float:
        longest, self.longest = self.longest, 0.0
        return longest


class ClientClock:
    """Each statement SQLAlchemy sends, timed by the client."""

    def __init__(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        self.seen: list[tuple[float, str]] = []
        event.listen(Engine, "before_cursor_execute", self._before)
        event.listen(Engine, "after_cursor_execute", self._after)

    def _before(self, conn, _cursor, statement, _params, context, _many) -> None:
        conn.info.setdefault("tokokita_started", []).append(time.perf_counter())

    def _after(self, conn, _cursor, statement, _params, _context, _many) -> None:
        started = conn.info["tokokita_started"].pop()
        self.seen.append((time.perf_counter() - started, " ".join(statement.split())[:90]))

    def take(self) -> list[tuple[float, str]]:
        seen, self.seen = self.seen, []
        return sorted(seen, reverse=True)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.statements")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from tokokita_etl.pipelines import load_settings
    from tokokita_etl.runner.staging import run_stage

    raw_dir, _ = partition(args.rows)
    work = OUT / "runs" / f"statements-{uuid.uuid4().hex[:8]}"
    backend = "postgresql" if args.backend == "postgres" else "sqlite"
    warehouses = Warehouses(backend, work, args.pg_url)
    report: dict[str, dict] = {}
    try:
        url = warehouses.fresh("statements")
        settings = load_settings(env={}, cwd=work, overrides={
            "raw_dir": raw_dir, "gold_dir": work / "gold", "quarantine_dir": work / "quarantine",
            "state_dir": work / "state", "staging_dir": work / "staging",
            "warehouse_url": url})
        clock = ServerClock(url, url.rsplit("/", 1)[1]) if backend == "postgresql" \
            else ClientClock()
        waits = ClientWaits() if isinstance(clock, ServerClock) else None
        if isinstance(clock, ServerClock):
            clock.thread.start()
        day: date = DAY
        for stage in ORDERS.stage_names:
            start = time.perf_counter()
            run_stage(ORDERS, settings, day, stage)
            elapsed = time.perf_counter() - start
            time.sleep(2 * POLL_S)
            statements = clock.take()
            longest = statements[0] if statements else (0.0, "")
            silence = waits.take() if waits else None
            report[stage] = {"stage_s": round(elapsed, 2), "statements": len(statements),
                             "longest_s": round(longest[0], 2), "longest": longest[1],
                             "next": [[round(sec, 2), sql] for sec, sql in statements[1:3]],
                             "longest_wait_s": None if silence is None else round(silence, 2)}
            if not args.json:
                quiet = "" if silence is None else f"  longest wait for the server {silence:6.2f} s"
                print(f"{stage:<13} {elapsed:7.2f} s  {len(statements):5d} statements{quiet}  "
                      f"longest {longest[0]:6.2f} s  {longest[1]}")
                for sec, sql in statements[1:3]:
                    print(f"{'':<13} {'':>9}  {'':>16}  next    {sec:6.2f} s  {sql}")
        if isinstance(clock, ServerClock):
            clock.stop.set()
            clock.thread.join()
            clock.conn.close()
    finally:
        warehouses.drop_all()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"rows": args.rows, "backend": backend, "stages": report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

