"""What a run tells the outside world, and when: the one-line summary and the pings.

One place decides both, for the command line and for Airflow alike:

- `run_summary` is the run's one structured line (start, end, partition date, status, rows
  per kind, bruto, bersih, duration, run id, trigger, warnings); the manifest holds it as
  `summary`, the command line prints it with `--log-format json`, the Airflow task that ends
  the run logs it.
- `ping` calls a healthchecks-style URL (`ping_url`): `<url>/start` when a run starts
  processing its date, `<url>` when it succeeds and `<url>/fail` when it fails for good, the
  summary line as the body. A ping that fails is a warning, never a failed run.
- `run_deadline` is which runs get a deadline and when it is (a scheduled run created before
  `deadline_local_time` on its fire date; the DAG's custom deadline reference asks it when
  Airflow creates a run); `deadline_missed` is the DAG's deadline alert (the callback Airflow's
  triggerer runs is `tokokita_airflow.notifiers.deadline_alert`, which then calls the
  notifiers): it logs the missed deadline and POSTs it as JSON to `deadline_webhook_url`.

- the alerts (`NOTIFIER_EVENTS`) go to the notifiers of the `notifiers` setting
  (`settings.values.parse_notifiers`): on Airflow each is a `BaseNotifier` class named by its import path
  with its arguments, called with the task's context and a `tokokita_alert` entry
  (`alert_context`); `ping_url` is one of them (`tokokita_airflow.notifiers.PingNotifier`).
  `recovered_from` decides whether a success is a recovery (the date's previous outcome,
  before this run, was a failure).

Nothing here imports Airflow; `httpx` is imported when a request is sent, so the DAG file
can import this module at parse time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from tokokita_etl.masking import mask_url
from tokokita_etl.settings.values import NOTIFIER_EVENTS

logger = logging.getLogger(__name__)

#: seconds a ping or a webhook call may take before it is given up (and logged)
PING_TIMEOUT_S = 5.0
#: ping kind -> path suffix of `ping_url` (the healthchecks.io convention)
PING_SUFFIXES = {"start": "/start", "success": "", "fail": "/fail"}

Warn = Callable[[str], None]


# -- the one-line summary ------------------------------------------------------------------

def run_summary(manifest: Mapping[str, Any], *, run_id: str, entry: Mapping[str, Any],
                started: datetime, finished: datetime) -> dict[str, Any]:
    """The run's summary, from its manifest body and its watermark entry.

    Amounts stay the exact decimal strings of the entry (`bruto`, `bersih`; None when the run
    did not succeed); times are ISO 8601 with their UTC offset.
    """
    summary: dict[str, Any] = {
        "event": "tokokita_run",
        "pipeline": manifest.get("pipeline"),
        "run_id": run_id,
        "trigger": manifest.get("trigger"),
        "partition_date": manifest.get("partition_date"),
        "status": manifest.get("status"),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "duration_ms": max(0, round((finished - started).total_seconds() * 1000)),
        "attempt": manifest.get("attempt"),
        "exit_code": manifest.get("exit_code"),
        "rows": dict(manifest.get("rows") or {}),
        "bruto": entry.get("bruto"),
        "bersih": entry.get("bersih"),
        "warnings": list(manifest.get("warnings") or []),
    }
    if manifest.get("error"):
        summary["error"] = manifest["error"]
    return summary


def start_line(pipeline: str, day: date, started: datetime, trigger: str) -> str:
    """The body of a start ping: one JSON line naming the date and the run's trigger."""
    return json.dumps({"event": "tokokita_run_start", "pipeline": pipeline,
                       "partition_date": day.isoformat(), "trigger": trigger,
                       "started_at": started.isoformat(timespec="seconds")})


def summary_line(summary: Mapping[str, Any]) -> str:
    """The summary as one line of JSON (non-ASCII kept as is)."""
    return json.dumps(summary, ensure_ascii=False, separators=(", ", ": "))


# -- pings ---------------------------------------------------------------------------------

def ping_target(base_url: str, kind: str) -> str:
    """The URL pinged for `kind` (start, success, fail): `base_url` with the kind's suffix
    appended to its path (a query string is kept)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/") + PING_SUFFIXES[kind]
    return urlunsplit((parts.scheme, parts.netloc, path or "/", parts.query, parts.fragment))


def _post(url: str, body: bytes, content_type: str, timeout: float) -> int:
    """POST `body` to an http(s) `url`; an error status raises (httpx.HTTPStatusError)."""
    import httpx

    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    response = httpx.post(url, content=body, timeout=timeout,
                          headers={"Content-Type": content_type, "User-Agent": "tokokita-etl"})
    response.raise_for_status()
    return response.status_code


def ping(ping_url: str, kind: str, body: str = "", *, warn: Warn | None = None,
         timeout: float = PING_TIMEOUT_S) -> bool:
    """Ping `ping_url` for `kind` with `body`; True when it answered 2xx.

    Never raises: an empty URL does nothing, and an unreachable or failing endpoint is
    reported through `warn` (default: this module's logger) and the run goes on.
    """
    if kind not in PING_SUFFIXES:
        raise ValueError(f"unknown ping kind {kind!r}; expected one of {sorted(PING_SUFFIXES)}")
    if not ping_url:
        return False
    url = ping_target(ping_url, kind)
    try:
        _post(url, body.encode("utf-8"), "text/plain; charset=utf-8", timeout)
    except Exception as exc:  # a ping never fails the run
        (warn or logger.warning)(f"ping {kind} to {mask_url(url)} failed ({exc}); "
                                 "the run goes on")
        return False
    return True


# -- notifiers ---------------------------------------------------------------------------

#: the events `ping_url` is pinged for (healthchecks' start, success and fail: a partition
#: with no input published no report, as a failed run did not)
PING_EVENTS = {"start": "start", "success": "success", "failure": "fail", "no_input": "fail"}
#: manifest statuses that are a date's outcome (a skipped or missing run is none); a
#: partition with no input was alerted, so its first success after it is a recovery
_OUTCOMES = {"success": "success", "failed": "failure", "blocked": "failure",
             "no input": "failure"}


def recovered_from(manifests: Iterable[Mapping[str, Any]], trigger: str
                   ) -> dict[str, Any] | None:
    """The summary of the failure a success of `trigger` recovers from, or None.

    `manifests` are a date's manifests, newest first. The previous outcome is the newest
    manifest of another run that succeeded, failed, was blocked or found no input (skipped
    and missing runs are no outcome; this run's own failed tries, retried inside it, were
    never alerted).
    """
    for body in manifests:
        summary = body.get("summary")
        if not isinstance(summary, Mapping) or summary.get("trigger") == trigger:
            continue
        outcome = _OUTCOMES.get(str(body.get("status")))
        if outcome is not None:
            return dict(summary) if outcome == "failure" else None
    return None


def alert_subject(event: str, pipeline: str, partition_date: Any, status: Any = None) -> str:
    """One line saying what happened, as a mail subject or a chat message's first line."""
    what = {"start": "started", "success": "succeeded",
            "failure": f"failed ({status})" if status and status != "failed" else "failed",
            "recovered": "recovered: succeeded after a failure",
            "no_input": "has no input: nothing built, no report published",
            "deadline": "missed its deadline"}[event]
    return f"[{pipeline}] {partition_date} {what}"


def alert_context(event: str, line: str, *, pipeline: str, partition_date: Any,
                  status: Any = None, summary: Mapping[str, Any] | None = None,
                  previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `tokokita_alert` entry a notifier's templates see: `event`, `subject`, `line` (the
    summary, start line or deadline message as one JSON line), `partition_date`, `status`,
    `summary` (a dict) and, for `recovered`, `previous` (the failure's summary)."""
    if event not in NOTIFIER_EVENTS:
        raise ValueError(f"unknown alert event {event!r}; expected one of "
                         f"{', '.join(NOTIFIER_EVENTS)}")
    return {"event": event, "subject": alert_subject(event, pipeline, partition_date, status),
            "line": line, "pipeline": pipeline, "partition_date": partition_date,
            "status": status, "summary": dict(summary or {}), "previous": dict(previous or {})}


# -- the deadline alert --------------------------------------------------------------------

def deadline_after(fire_time: datetime, deadline_local_time: time, tz: str) -> datetime:
    """A scheduled run's deadline: the first `deadline_local_time` in `tz` after its fire time
    (its logical date), aware in `tz`: 06:00 on the fire date for a 02:30 fire."""
    zone = ZoneInfo(tz)
    local_fire = fire_time.astimezone(zone)
    deadline = datetime.combine(local_fire.date(), deadline_local_time, zone)
    if deadline <= local_fire:
        deadline = datetime.combine(local_fire.date() + timedelta(days=1), deadline_local_time,
                                    zone)
    return deadline


def run_deadline(run_type: str, fire_time: datetime | None, created_at: datetime,
                 deadline_local_time: time, tz: str) -> datetime | None:
    """The deadline of a run Airflow is creating at `created_at`, or None: it gets none.

    Only a scheduled run created before its deadline (`deadline_after` its fire time) gets one:
    the alert says that a night's run has not done its date in time. A scheduled run created
    at or after its deadline (the catch-up of past nights: a first start, a paused DAG, a
    scheduler that was down) could only be late; a backfill's dates are in the past; a manual
    run (the trigger form, the status page, the REST API) is someone's own gesture, watched by
    them; an asset-triggered run has no fire time. None of these gets a deadline.
    """
    if run_type != "scheduled" or fire_time is None:
        return None
    if created_at.tzinfo is None or fire_time.tzinfo is None:
        raise ValueError(f"run_deadline needs aware datetimes, got fire time {fire_time!r} "
                         f"and creation time {created_at!r}")
    deadline = deadline_after(fire_time, deadline_local_time, tz)
    return deadline if created_at < deadline else None


def deadline_offset(deadline_local_time: time) -> timedelta:
    """The DAG's `DeadlineAlert` interval: `deadline_local_time` as a time after midnight.

    The alert's reference (`tokokita_airflow.deadlines.ScheduledRunDeadline`) is the midnight
    before each run's deadline, so Airflow's UI, which prints the interval rounded by
    dayjs (`Must complete within 6 hours of midnight <zone>`), prints it exactly for a
    whole-hour `deadline_local_time` (06:00: 6 hours); the alert's name carries the exact time.
    """
    return timedelta(hours=deadline_local_time.hour, minutes=deadline_local_time.minute)


def deadline_wording(cron: str, tz: str, start: datetime, deadline_local_time: time) -> str:
    """The deadline in words, as the DAG's alert name, the docs and the alert's log say it:
    `succeeded by 06:00 <zone> on the fire date` (`the day after the fire date` when the
    time is not after the schedule's first fire time at or after `start` on its day)."""
    from tokokita_etl.cron import next_runs

    (fire,) = next_runs(cron, start - timedelta(microseconds=1), 1, tz)
    deadline = deadline_after(fire, deadline_local_time, tz)
    day = "on the fire date" if deadline.date() == fire.astimezone(ZoneInfo(tz)).date() \
        else "the day after the fire date"
    return f"succeeded by {deadline_local_time.strftime('%H:%M')} {tz} {day}"


def _instant(value: Any) -> datetime | None:
    """An aware datetime from a datetime or an ISO 8601 string (None when it is neither)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    return None


def deadline_not_alerted(context: Mapping[str, Any] | None) -> str | None:
    """Why a missed deadline is only logged, not alerted; None when it is alerted.

    The alert is for scheduled runs that existed before their deadline, the only runs
    `run_deadline` gives one. A deadline of another run can still be in Airflow's metadata
    database, created before the DAG used `run_deadline` (its earlier reference, the logical
    date, gave one to every run with a logical date: backfills, manual runs with a logical
    date, catch-ups): those are logged only.
    """
    dag_run = dict((context or {}).get("dag_run") or {})
    run_type = dag_run.get("run_type")
    if run_type and run_type != "scheduled":
        return f"a {run_type} run (the alert is for scheduled runs)"
    queued = _instant(dag_run.get("queued_at"))
    deadline = _instant(dict((context or {}).get("deadline") or {}).get("deadline_time"))
    if queued is not None and deadline is not None and queued >= deadline:
        return (f"the run was created at {queued.isoformat(timespec='seconds')}, after its "
                "deadline (a catch-up of a past night)")
    return None


def _text(value: Any) -> Any:
    """An instant as ISO 8601 text (a payload is JSON); anything else as it is."""
    return value.isoformat() if isinstance(value, datetime | date) else value


def deadline_message(context: Mapping[str, Any] | None, *, dag_id: str, tz: str,
                     deadline_local_time: str) -> dict[str, Any]:
    """The JSON the deadline alert sends: which run, for which partition date, and when its
    deadline was."""
    dag_run = dict((context or {}).get("dag_run") or {})
    deadline = dict((context or {}).get("deadline") or {})
    logical = dag_run.get("logical_date")
    partition = dag_run.get("partition_key")
    if not partition and logical:
        fire = datetime.fromisoformat(str(logical).replace("Z", "+00:00"))
        partition = (fire.astimezone(ZoneInfo(tz)).date() - timedelta(days=1)).isoformat()
    deadline_time = deadline.get("deadline_time")
    if isinstance(deadline_time, datetime | date):
        deadline_time = deadline_time.isoformat()
    # a partitioned run has no logical date: its fire time is when it runs after
    on, due, fire = "", _instant(deadline_time), _instant(logical or dag_run.get("run_after"))
    if due is not None:
        day = due.astimezone(ZoneInfo(tz)).date()
        fired = fire is not None and fire.astimezone(ZoneInfo(tz)).date() == day
        on = f" on {day}{' (its fire date)' if fired else ''}"
    return {
        "event": "tokokita_deadline_missed",
        "dag_id": dag_run.get("dag_id") or dag_id,
        "run_id": dag_run.get("dag_run_id") or dag_run.get("run_id"),
        "partition_date": partition,
        "logical_date": logical,
        "run_after": _text(dag_run.get("run_after")),
        "state": dag_run.get("state"),
        "deadline_time": deadline_time,
        "deadline_local_time": f"{deadline_local_time} {tz}",
        "message": f"the run for {partition} has not succeeded by {deadline_local_time} {tz}"
                   f"{on}",
    }


async def deadline_missed(*, tz: str, deadline_local_time: str, dag_id: str = "",
                          webhook_url: str = "",
                          context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The DAG's deadline alert, run by the triggerer (through
    `tokokita_airflow.notifiers.deadline_alert`).

    Logs the missed deadline as an error and POSTs it as JSON to `webhook_url` (none when
    empty); a webhook that fails is logged and does not raise. A run the alert is not for
    (`deadline_not_alerted`) is logged as a warning and nothing is sent.
    """
    message = deadline_message(context, dag_id=dag_id, tz=tz,
                               deadline_local_time=deadline_local_time)
    line = json.dumps(message, ensure_ascii=False, default=str)
    if reason := deadline_not_alerted(context):
        logger.warning("Deadline passed, not alerted: %s: %s", reason, line)
        return {**message, "not_alerted": reason}
    logger.error("Deadline missed: %s", line)
    if webhook_url:
        import asyncio  # here only: every run imports this module, few send a deadline alert

        try:
            await asyncio.to_thread(_post, webhook_url, line.encode("utf-8"),
                                    "application/json", PING_TIMEOUT_S)
        except Exception as exc:  # the alert is logged either way
            logger.warning("deadline webhook %s failed (%s)", webhook_url, exc)
            message["webhook_error"] = str(exc)
    return message
