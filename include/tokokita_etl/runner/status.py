"""The state of each partition date in a window: for `tokokita-etl status` and the status page.

One rule in one place: a date is **done**, **due**, **waiting** for its file, **missing**,
**no input** (a partition built from another pipeline's results whose inputs are all missing),
**running** (another run holds its claim), **failed** (attempts left) or **blocked**, as
`tokokita_etl.runner.policy.date_state` decides from the watermark and what this module reads
of the date (`date_facts`: its claim, its raw file or upstream dates, whether it is due); a row
adds only the words for that state. The command line and the Airflow status page only show
these rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from functools import cache
from typing import Any

from tokokita_etl.errors import ConfigError, EtlError
from tokokita_etl.runner.claims import interrupted_stage, settled_watermark
from tokokita_etl.runner.declaration import Column, Pipeline
from tokokita_etl.runner.inputs import RawChange, changed_since_processed, reprocess_reasons
from tokokita_etl.runner.liveness import cli_holder_finished
from tokokita_etl.runner.policy import (
    RAW_CHANGED,
    DateFacts,
    InputState,
    date_state,
    days_back,
    due_runs,
    failures_since_success,
    is_blocked,
    outside_lookback,
    past_partitions,
    settled,
    unblock_hint,
    wait_deadline,
)
from tokokita_etl.runner.schedule import DAILY, Grain, fire_time_for_partition, local_today
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.upstream import UpstreamInputs, missing_from, upstream_dates
from tokokita_etl.runner.watermark import STOPPED, Claim, Watermark
from tokokita_etl.settings.layout import catchup_bound
from tokokita_etl.settings.model import PATH_SETTINGS, Settings


class DateAction(StrEnum):
    """What a person may do about a date from the status page: the run it triggers carries
    `force` (reprocess) or `reset_attempts` (unblock) in its conf."""

    REPROCESS = "reprocess"
    UNBLOCK = "unblock"


class DateState(StrEnum):
    """Every state a date can be in, in the order of the legend. A member is its string
    (`"not processed"`), so rows and their JSON read as plain strings."""

    DONE = "done"
    DUE = "due"
    WAITING = "waiting"
    MISSING = "missing"
    NO_INPUT = "no input"
    RUNNING = "running"
    FAILED = "failed"
    NEEDS_RERUN = "needs re-run"
    BLOCKED = "blocked"
    NOT_PROCESSED = "not processed"

    @property
    def actions(self) -> tuple[DateAction, ...]:
        """The actions this state allows: a blocked date is unblocked; a done, failed, due or
        not processed one may be reprocessed; a waiting, missing, no-input or running one
        neither."""
        if self is DateState.BLOCKED:
            return (DateAction.UNBLOCK,)
        if self in (DateState.DONE, DateState.FAILED, DateState.NEEDS_RERUN, DateState.DUE,
                    DateState.NOT_PROCESSED):
            return (DateAction.REPROCESS,)
        return ()


#: how many days before the lookback window the default window also shows
HISTORY_DAYS = 30


def _span(settings: Settings, now: datetime, days: int | None) -> tuple[date, date]:
    """The first date of the window's span and today (in the pipeline zone): `days` back,
    by default the lookback plus `HISTORY_DAYS`."""
    today = local_today(now, settings.timezone)
    count = settings.lookback_days + HISTORY_DAYS if days is None else max(days, 0)
    return days_back(today, count), today


def window(settings: Settings, now: datetime, days: int | None = None,
           grain: Grain = DAILY) -> list[date]:
    """The default partitions, oldest first: those of the lookback plus the last 30 days
    whose dates are all before today (in the pipeline zone), from the catch-up's first
    partition (`start_date`'s, or the week or month before it): each date, or the key of each
    whole week or month (`grain`)."""
    span_start, today = _span(settings, now, days)
    # a longer partition's first run (on `start_date` or after) processes the one before
    start = settings.start_date if grain.unit == "day" else grain.for_fire(settings.start_date)
    first = max(span_start, start)
    return [day for day in (first + timedelta(days=n) for n in range((today - first).days))
            if grain.start(day) == day and grain.next(day) <= today]


def upstream_inputs(pipeline: Pipeline, settings: Settings, now: datetime,
                    keys: list[date]) -> UpstreamInputs | None:
    """`upstream.UpstreamInputs` of `keys` for a pipeline built from another's results, else
    None: the upstream dates' states as `policy.settled` tells them."""
    if pipeline.upstream is None:
        return None
    dates = upstream_dates(pipeline, keys)
    upstream = settled_watermark(settings.upstream, now)
    states = settled_states(pipeline.upstream.pipeline, settings.upstream, now, dates, upstream) \
        if dates else {}
    return UpstreamInputs(pipeline, upstream, states)


def settled_states(pipeline: Pipeline, settings: Settings, now: datetime, dates: list[date],
             state: Watermark) -> dict[date, InputState]:
    """`policy.settled` of `dates` of `pipeline`, with what it needs read of each date
    (`date_facts`)."""
    inputs = upstream_inputs(pipeline, settings, now, sorted(set(dates) | set(
        past_partitions(now, settings.lookback_days, settings.timezone, pipeline.grain))))
    look = cache(lambda day: changed_since_processed(pipeline, settings, state.entry(day), day))
    facts = date_facts(pipeline, settings, state, now, inputs=inputs, look=look,
                       due=set(due_partitions(pipeline, settings, state, now, inputs, look)),
                       claims=state_store(settings).claims(dates))
    return settled(state, dates, now, facts=facts, max_attempts=settings.max_attempts)


def date_facts(pipeline: Pipeline, settings: Settings, state: Watermark, now: datetime, *,
               inputs: UpstreamInputs | None, look: Callable[[date], RawChange | None],
               due: set[date], claims: dict[date, Claim | EtlError]
               ) -> Callable[[date], DateFacts]:
    """What `policy.date_state` is told of each date of `pipeline` besides its watermark
    entry (`policy.DateFacts`): its claim (`claims`, as the store read them), its input
    (`inputs`: the upstream's, for a pipeline built from another's results; else its raw
    file), whether it is due (`due`), a done date's input changed since its success (`look`:
    its raw change). The status rows and `policy.settled` both read a date through it."""
    wait_window = timedelta(hours=settings.wait_window_hours)

    def facts(day: date) -> DateFacts:
        claim = claims.get(day)
        held = "unreadable" if isinstance(claim, EtlError) else "live" if claim is not None \
            and claim.live(now, cli_holder_finished) else ""
        changed, gone = "", False
        if state.has_success(day) and inputs is not None:
            changed = "changed" if inputs.compare(day, state.entry(day))[0] else ""
        elif state.has_success(day) and (change := look(day)):
            changed, gone = RAW_CHANGED, change.gone
        return DateFacts(
            claim=held, present=inputs.settled(day) if inputs is not None
            else pipeline.raw.exists(settings, day),
            fire=_scheduled_fire(pipeline, settings, day), wait_window=wait_window,
            due=day in due, changed=changed, change_gone=gone,
            no_input=bool(inputs.no_input(day)) if inputs is not None else False,
            from_upstream=inputs is not None)

    return facts


def _scheduled_fire(pipeline: Pipeline, settings: Settings, day: date) -> datetime | None:
    """The fire time of the scheduled run that processes `day`, or None when none will (no
    fire time, or one after the catch-up's end)."""
    try:
        fire = fire_time_for_partition(day, settings.cron, settings.timezone, pipeline.grain)
    except EtlError:
        return None
    return fire if settings.catchup_end is None or fire <= settings.catchup_end else None


def _unsettled(state: Watermark) -> set[date]:
    """The dates of the watermark whose last outcome is not a success still describing the
    warehouse (failed, blocked, needs re-run), or with a run's intent on them."""
    return set(map(date.fromisoformat, state.summary().unsettled))


def _recent(settings: Settings, state: Watermark, now: datetime, days: int | None) -> set[date]:
    """The watermark's dates inside the window's span before `start_date` too: a date
    processed by hand before the catch-up's start, or the one the catch-up's first run
    processes (the day before `start_date`)."""
    first, today = _span(settings, now, days)
    return {day for day in map(date.fromisoformat, state.runs) if first <= day < today}


def due_partitions(pipeline: Pipeline, settings: Settings, state, now: datetime,
                   inputs: UpstreamInputs | None = None,
                   look: Callable[[date], RawChange | None] | None = None) -> list[date]:
    """`policy.due_runs` of `pipeline` at `now`: the partitions whose inputs are there (raw
    file present; upstream dates settled) that its rules would run, a done one again when
    its inputs changed. `inputs`: the upstream's, when already read for these partitions;
    `look`: a date's raw change (`inputs.changed_since_processed`), when the caller keeps its
    looks."""
    if pipeline.upstream is not None:
        if inputs is None:
            inputs = upstream_inputs(pipeline, settings, now, past_partitions(
                now, settings.lookback_days, settings.timezone, pipeline.grain))
        # a partition whose run fires before the catch-up's start has no scheduled run to
        # mirror: never due by itself (its upstream dates may all be "missing" for that reason)
        return due_runs(state, now, lambda key: inputs.settled(key) and fire_time_for_partition(
                            key, settings.cron, settings.timezone, pipeline.grain)
                        >= settings.catchup_start, settings.lookback_days,
                        settings.max_attempts, tz=settings.timezone,
                        inputs_changed=lambda key: inputs.change_reason(key, state.entry(key)),
                        no_input=inputs.no_input, grain=pipeline.grain)
    return due_runs(state, now, pipeline.raw.present(settings), settings.lookback_days,
                    settings.max_attempts, tz=settings.timezone,
                    inputs_changed=reprocess_reasons(pipeline, settings, state, look),
                    grain=pipeline.grain)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _value(column: Column, entry: dict[str, Any], counts: dict[str, Any]) -> Any:
    """A column's value in a date's watermark entry (`counts`: its success's `rows`)."""
    if column.kind == "count":
        return counts.get(column.key)
    if column.kind == "money":
        return entry.get(column.key)
    part, whole = (_number(counts.get(key)) for key in column.share_of or ("", ""))
    return part / whole if whole and part is not None else None


def rupiah(amount: Decimal) -> str:
    """A money amount in a sentence, exactly: `Rp3,542,000.00`."""
    return f"Rp{amount:,.2f}"


def format_cell(column: Column, value: Any) -> str:
    """A column's value as the status page shows it (blank when there is none): a count
    `1,234`; money exactly, `1,234` when whole, else `1,234.50`; a share `12.5%`."""
    if value is None or value == "":
        return ""
    if column.kind == "share":
        return f"{value:.1%}"
    if column.kind == "money":
        try:
            amount = Decimal(str(value))
        except InvalidOperation:
            return str(value)
        return f"{amount:,.0f}" if amount == amount.to_integral_value() else f"{amount:,.2f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
        else str(value)


def date_states(pipeline: Pipeline, settings: Settings, now: datetime, days: int | None = None,
                dates: list[date] | None = None, state: Watermark | None = None,
                has_run: Callable[[date], bool] | None = None) -> list[dict[str, Any]]:
    """One row per date, oldest first: the window (`window`) and every older date of the
    watermark that is not done or has a run's intent on it (`_unsettled`): a year of done
    dates behind the window costs nothing. A date of the window after `end_date` that is
    *missing* has no row: nothing schedules it and nothing is there to run (one with its
    inputs there, due or not processed, has one).

    Each row: `date`, `state` (a `DateState`), `label` (`failed 1/3`, `running`...),
    `reason` (one sentence), `unblock` (the exact action, for a blocked date), `holder` (of a
    running date), `due`, `partition` (file present), `status`, `attempt` (recorded outcomes,
    successes and failures), `failures` (failures since the last success: what
    `max_attempts` counts), `max_attempts`, `blocked`, `rows`, `cells` (the pipeline's
    `columns` formatted), each money or share column's value (by its key), `duration_s`,
    `error`, `failed_stage`, `gold` (done dates only), `updated_at`, `warnings`, `raw_change`
    (a done date's raw file changed since its success, else "").
    `state`: the watermark as `settled_watermark` reads it, when the caller has it;
    `has_run`: whether a partition has an Airflow run already, when the caller can tell
    (the status page), which says who runs a due date (`_who_runs_it`).
    """
    if state is None:
        state = settled_watermark(settings, now)
    wanted = sorted(set(dates) if dates is not None else
                    set(window(settings, now, days, pipeline.grain)) | _unsettled(state)
                    | _recent(settings, state, now, days))
    inputs = upstream_inputs(pipeline, settings, now, sorted(set(wanted) | set(
        past_partitions(now, settings.lookback_days, settings.timezone, pipeline.grain))))
    # one look at a done date's raw file for the due dates and its row (a changed file is
    # hashed to tell a change from a touch)
    look = cache(lambda day: changed_since_processed(pipeline, settings, state.entry(day), day))
    due = set(due_partitions(pipeline, settings, state, now, inputs, look))
    # each date's newest manifest with an outcome, in one look at the store
    store = state_store(settings)
    outcomes = store.last_outcomes([day for day in wanted if state.entry(day)])
    claims = store.claims(wanted)
    facts = date_facts(pipeline, settings, state, now, inputs=inputs, look=look, due=due,
                       claims=claims)
    last = None if settings.catchup_end is None else settings.catchup_end.date()
    rows = []
    for day in wanted:
        entry = state.entry(day)
        counts = entry.get("rows") if isinstance(entry.get("rows"), dict) else {}
        values = [_value(column, entry, counts) for column in pipeline.columns]
        known = facts(day)
        row: dict[str, Any] = {
            "date": day.isoformat(), "state": "", "label": "", "reason": "", "unblock": "",
            "holder": "", "due": known.due, "partition": known.present,
            "status": entry.get("status", ""), "attempt": state.attempts(day),
            "failures": failures_since_success(entry), "max_attempts": settings.max_attempts,
            "blocked": is_blocked(state, day, settings.max_attempts),
            "rows": counts,
            "cells": [format_cell(column, value)
                      for column, value in zip(pipeline.columns, values, strict=True)],
            "duration_s": None, "error": entry.get("error", ""),
            "failed_stage": entry.get("failed_stage", ""),
            "gold": entry.get("gold", "") if state.has_success(day) else "",
            "updated_at": entry.get("updated_at", ""), "warnings": entry.get("warnings", []),
            "raw_change": "", "inputs_change": "",
        }
        for column, value in zip(pipeline.columns, values, strict=True):
            if column.kind != "count":
                if column.key in row:
                    raise ConfigError(f"pipeline {pipeline.name!r}: its column {column.key!r} "
                                      "is named as a field every status row has")
                row[column.key] = value
        manifest = outcomes.get(day, {})
        if isinstance(manifest.get("duration_ms"), int | float) and manifest.get("duration_ms"):
            row["duration_s"] = round(manifest["duration_ms"] / 1000, 1)
        row.update(_state_of(pipeline, settings, state, day, now, known, claims.get(day),
                             inputs=inputs, look=look, has_run=has_run))
        if dates is None and row["state"] == DateState.MISSING and not entry \
                and last is not None and day > last:
            continue
        rows.append(row)
    return rows


def _state_of(pipeline: Pipeline, settings: Settings, state: Watermark, day: date,
              now: datetime, facts: DateFacts, claim: Claim | EtlError | None, *,
              look: Callable[[date], RawChange | None], inputs: UpstreamInputs | None = None,
              has_run: Callable[[date], bool] | None = None) -> dict[str, Any]:
    """state, label, reason, holder and unblock of one date (see `date_states`): the state
    and label `policy.date_state` decides from its watermark entry and `facts`, and the words
    for them; `claim`: its claim as the store read it (a damaged one: the error naming it)."""
    decided = date_state(state, day, now, facts, settings.max_attempts)
    found = DateState(decided.state)
    words: dict[str, Any] = {"state": found, "label": decided.label}
    entry = state.entry(day)
    used = f"{failures_since_success(entry)}/{settings.max_attempts}"
    last = f"; last error ({entry.get('failed_stage') or '?'}): " \
           f"{display_text(settings, entry['error'])}" if entry.get("error") else ""

    def later() -> str:
        if facts.due:
            return f"it is due: {_who_runs_it(pipeline, settings, now, day, has_run)}"
        return "older than the lookback: a backfill or a manual run processes it"

    if found is DateState.RUNNING:
        if isinstance(claim, EtlError):
            return {**words, "reason": str(claim)}
        assert claim is not None  # (a live claim: `facts.claim`)
        return {**words, "holder": claim.owner,
                "reason": f"being processed by {claim.owner} since "
                          f"{claim.since.isoformat(timespec='seconds')}"}
    if (intent := state.intent(day)) is not None and \
            found in (DateState.BLOCKED, DateState.NEEDS_RERUN):
        # its run is gone (a live one holds the claim, see above)
        if intent.get(STOPPED):
            gone = (f"run {intent['run']} was stopped: {intent[STOPPED]}; the warehouse may "
                    f"hold part of its work; the next run records no failure for it "
                    f"({used} used)")
        else:
            gone = (f"run {intent['run']} (started {intent['since']}) ended during "
                    f"{interrupted_stage(pipeline, settings, day)} without recording its "
                    f"outcome; the warehouse may hold part of its work; the next run records "
                    f"it as failure {used}")
        if found is DateState.BLOCKED:  # (settled: that failure counted)
            return {**words, "reason": f"{gone}, so the date is blocked: run it with "
                                       "reset_attempts",
                    "unblock": unblock_hint(day, pipeline.run_command)}
        return {**words, "reason": f"{gone}; {later()}"}
    if found is DateState.NEEDS_RERUN:
        return {**words, "reason": f"{display_text(settings, entry.get('error', ''))}; no "
                                   f"failure is counted ({used} used); {later()}"}
    if found is DateState.NO_INPUT:
        nothing = inputs.no_input(day) if inputs is not None else ""
        if entry.get("gold"):
            nothing += (f"; the report {entry['gold']} an earlier build published for it "
                        "stays: remove it by hand if no one may read it")
        return {**words, "reason": nothing}
    if found in (DateState.DONE, DateState.DUE) and state.has_success(day):
        if inputs is not None:
            return {**words, **_done_from_upstream(pipeline, inputs, entry, day,
                                                   state.attempts(day), found)}
        return {**words, **_done_from_raw(pipeline, day, state.attempts(day), look(day), found)}
    if found is DateState.BLOCKED:
        return {**words, "reason": f"blocked after {used} failures since the last success{last}",
                "unblock": unblock_hint(day, pipeline.run_command)}
    if found is DateState.FAILED:
        return {**words, "reason": f"failed with attempts left ({used} used); {later()}{last}"}
    if found is DateState.DUE:
        there = "its inputs are settled" if inputs is not None else "the partition is there"
        return {**words,
                "reason": f"{there}: {_who_runs_it(pipeline, settings, now, day, has_run)}"}
    if found is DateState.WAITING:
        if inputs is not None:
            return {**words, "reason": inputs.waiting_message(day)}
        assert facts.fire is not None  # (a scheduled run waits for it)
        until = wait_deadline(facts.fire, facts.wait_window).astimezone(settings.tz).isoformat(
            timespec="minutes")
        return {**words, "reason": f"no partition yet; its scheduled run waits for it until "
                                   f"{until}"}
    if found is DateState.NOT_PROCESSED:
        if outside_lookback(day, now, settings.lookback_days, settings.timezone):
            return {**words, "reason": f"older than lookback_days={settings.lookback_days}: "
                                       "only a backfill or a manual run processes it"}
        return {**words, "reason": "its inputs are settled; no run has built it yet"
                if inputs is not None else "the partition is there; no run has processed it yet"}
    return {**words, "reason": "no partition file (or an empty one): nothing is attempted"}


def _done_from_raw(pipeline: Pipeline, day: date, attempt: int, change: RawChange | None,
                   decided: DateState) -> dict[str, Any]:
    """The words of a done partition of a raw file (`decided`: done, or due again when its
    file changed under on_raw_change: reprocess), with its file's `change` since its
    success."""
    done = f"succeeded (attempt {attempt})"
    if change is None:
        return {"reason": done}
    if decided is DateState.DUE:
        return {"raw_change": str(change),
                "reason": f"{done}; {change}: on_raw_change=reprocess: on Airflow the sweep DAG "
                          "runs it again; a plain run of the date reprocesses it too "
                          f"({pipeline.command_line('run', '--date', str(day))}, or a trigger "
                          f"of partition key {day})"}
    then = "its results stay" if change.gone else "a forced run (Clear in Airflow) reprocesses it"
    return {"raw_change": str(change), "reason": f"{done}; {change}: {then}"}


def _done_from_upstream(pipeline: Pipeline, inputs: UpstreamInputs, entry: dict[str, Any],
                        day: date, attempt: int, decided: DateState) -> dict[str, Any]:
    """The words of a done partition built from another pipeline's results (`decided`: done,
    or due again when one of them changed): which of them changed, which dates reprocessed
    to the same results, and which dates hold it now (a rebuild waits for them)."""
    done = f"succeeded (attempt {attempt})"
    changed, unchanged = inputs.compare(day, entry)
    notes = [*changed, *unchanged]
    since = {note.split(" ", 1)[0] for note in changed}  # (each note starts with its date)
    if without := [found for found in missing_from(entry) if found not in since]:
        notes.append(f"built without {', '.join(without)} (missing)")
    if not inputs.settled(day):
        notes.append(f"a rebuild waits for {inputs.holding(day)}")
    if decided is DateState.DUE:
        return {"inputs_change": "; ".join(changed),
                "reason": f"{done}; {'; '.join(notes)}: on Airflow the sweep DAG builds it "
                          "again; a plain run does too "
                          f"({pipeline.command_line('run', '--date', str(day))})"}
    return {"inputs_change": "; ".join(notes), "reason": "; ".join([done, *notes])}


def warehouse_problem(pipeline: Pipeline, settings: Settings) -> str | None:
    """Why the warehouse is not the one the watermark describes (`identity.verify`: every
    run is refused until it is), or None; shown above the dates' states."""
    from tokokita_etl.runner.identity import WarehouseIdentityError, verify

    store = state_store(settings)
    try:
        verify(pipeline, settings, store.read(), where=store.location)
    except WarehouseIdentityError as exc:
        return display_text(settings, str(exc))
    return None


def _who_runs_it(pipeline: Pipeline, settings: Settings, now: datetime, day: date,
                 has_run: Callable[[date], bool] | None) -> str:
    """Who processes a due partition next where these settings run. The scheduler's
    catch-up creates only the runs that do not exist yet: once the partition's Airflow run
    exists (`has_run`, when the caller can tell), a person triggers it; where that cannot be
    told, a partition built from another pipeline's results (whose run exists once its
    sensor waited for them) is given both ways. None of it once the catch-up's end
    (`end_date`) has passed."""
    if settings.end_date is not None and \
            catchup_bound(settings.end_date, settings.timezone) < now:
        return (f"the scheduled catch-up ended at end_date {settings.end_date.isoformat()}, "
                "so a manual run or a backfill processes it")
    known = has_run(day) if has_run is not None else None
    if known is False or (known is None and pipeline.upstream is None):
        return "the next scheduled catch-up runs it"
    trigger = (f"trigger {pipeline.dag_id} with partition key {day}, or run "
               f"`{pipeline.command_line('run', '--date', str(day))}`")
    if known:
        return f"its Airflow run exists, so no catch-up runs it again: {trigger}"
    return f"the scheduled catch-up runs it only if it has no Airflow run yet; else {trigger}"


def display_text(settings: Settings, text: str) -> str:
    """`text` with the pipeline's folders named by their settings (`raw_dir/pesanan_...`):
    shorter, and the same wherever the folders are mounted."""
    for name in PATH_SETTINGS:
        text = text.replace(f"{getattr(settings, name)}/", f"{name}/")
    return text


def status_rows(pipeline: Pipeline, settings: Settings, now: datetime | None = None,
                days: int | None = None) -> list[dict[str, Any]]:
    """`date_states` at `now` (default: the real clock)."""
    if now is None:
        from tokokita_etl.runner.schedule import utc_now

        now = utc_now()
    return date_states(pipeline, settings, now, days)


def _count(value: Any) -> str:
    return "-" if value is None else str(value)


def format_status(pipeline: Pipeline, rows: list[dict[str, Any]]) -> str:
    """The status table of `pipeline` as text, its `status_counts` as columns, with a note
    per date (why, what to do, warnings)."""
    counts = pipeline.status_counts
    header = f"{'date':<10}  {'state':<16} {'attempt':>7}  " \
             + " ".join(f"{key:>{width}}" for key, width in counts) + "  note"
    lines = [header]
    for r in rows:
        n = r["rows"]
        notes = []
        if r["state"] == "blocked":
            notes.append(f"to unblock: {r['unblock']}")
        elif r["state"] in ("running", "waiting", "missing", "no input", "not processed",
                            "needs re-run") \
                or r.get("raw_change") or r.get("inputs_change"):
            notes.append(r["reason"])
        if r["error"] and r["state"] in ("failed", "blocked"):
            notes.append(f"last error ({r['failed_stage'] or '?'}): {r['error']}")
        notes.extend(f"warning: {w}" for w in r["warnings"])
        line = (f"{r['date']:<10}  {r['label']:<16} {r['attempt']:>7}  "
                + " ".join(f"{_count(n.get(key)):>{width}}" for key, width in counts)
                + f"  {'; '.join(notes)}")
        lines.append(line.rstrip())
    return "\n".join(lines)
