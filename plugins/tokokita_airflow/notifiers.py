"""The alerts through Airflow's notifier interface (`airflow.sdk.BaseNotifier`).

A run's events (`tokokita_etl.settings.values.NOTIFIER_EVENTS`: start, success, failure, recovered,
deadline) go to the notifiers of the `notifiers` setting, each a `BaseNotifier` class named by
its import path with its arguments (`SmtpNotifier` of the SMTP provider installed with
Airflow, `SlackNotifier` of the Slack provider, a team's own), plus a `PingNotifier` for
`ping_url`. A notifier is called as Airflow calls one in `on_failure_callback`: with the
context (the task's; for the deadline alert the triggerer's `dag_run` and `deadline`), where
its template fields are rendered; the context's `tokokita_alert` entry
(`notify.alert_context`) holds the event, a subject line and the run's summary line.

The classes are imported when an alert is sent, never when the DAG file is parsed. A notifier
that fails (an import error, a refused mail) is logged as a warning naming it and the run goes
on; the others are still called.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk import BaseNotifier

logger = logging.getLogger(__name__)

Warn = Callable[[str], None]


class PingNotifier(BaseNotifier):
    """A healthchecks-style ping (`tokokita_etl.runner.notify.ping`): `<ping_url>/start`, `<ping_url>`
    on success and `<ping_url>/fail`, the run's summary line as the body. `ping_url` is this
    notifier for the start, success and failure events."""

    template_fields = ("ping_url",)

    def __init__(self, ping_url: str) -> None:
        super().__init__()
        self.ping_url = ping_url

    def notify(self, context: Mapping[str, Any]) -> None:
        from tokokita_etl.runner.notify import PING_EVENTS, ping

        alert = context["tokokita_alert"]
        kind = PING_EVENTS.get(alert["event"])
        if kind is not None:
            ping(self.ping_url, kind, alert["line"], warn=self.log.warning)


def build_notifier(spec: Mapping[str, Any]) -> BaseNotifier:
    """The notifier of one entry of `notifiers` (`settings.values.parse_notifiers`); ValueError naming
    the class when it cannot be imported, is no `BaseNotifier` or refuses its kwargs."""
    path = spec["class"]
    module_name, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {path} ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
        raise ValueError(f"{path} is not a subclass of airflow.sdk.BaseNotifier")
    try:
        return cls(**spec.get("kwargs", {}))
    except TypeError as exc:
        raise ValueError(f"{path} refused its kwargs ({exc})") from None


def configured(settings: Any, event: str) -> list[tuple[str, Callable[[], BaseNotifier]]]:
    """(name, factory) of every notifier `event` goes to: `ping_url`'s, then `notifiers`'."""
    from tokokita_etl.runner.notify import PING_EVENTS
    from tokokita_etl.settings.values import parse_notifiers

    chosen: list[tuple[str, Callable[[], BaseNotifier]]] = []
    ping_url = getattr(settings, "ping_url", "")
    if ping_url and event in PING_EVENTS:
        chosen.append(("ping_url", lambda: PingNotifier(ping_url)))
    for spec in parse_notifiers(getattr(settings, "notifiers", "")):
        if event in spec["on"]:
            chosen.append((spec["class"], lambda spec=spec: build_notifier(spec)))
    return chosen


def send(notifiers: list[tuple[str, Callable[[], BaseNotifier]]], context: Mapping[str, Any],
         alert: dict[str, Any], warn: Warn | None = None) -> list[str]:
    """Call each notifier with `context` plus `tokokita_alert`; return the names of those
    that failed (each logged through `warn`). A notifier gets its own copy of the context:
    rendering its template fields adds them to the context it is given."""
    failed = []
    for name, make in notifiers:
        try:
            make()({**context, "tokokita_alert": alert})
        except Exception as exc:  # an alert never fails the run; the others still go out
            (warn or logger.warning)(f"notifier {name} failed for the {alert['event']} alert "
                                     f"of {alert['partition_date']} ({exc}); the run goes on")
            failed.append(name)
    return failed


async def send_async(notifiers: list[tuple[str, Callable[[], BaseNotifier]]],
                     context: Mapping[str, Any], alert: dict[str, Any]) -> list[str]:
    """`send` in the triggerer: a notifier with its own `async_notify` is awaited, as Airflow's
    deadline alerts run notifiers (its connection is then looked up the async way); one with
    `notify` only runs in a thread. Returns the names of those that failed (logged)."""
    failed = []
    for name, make in notifiers:
        given = {**context, "tokokita_alert": alert}
        try:
            notifier = make()
            if type(notifier).async_notify is not BaseNotifier.async_notify:
                notifier.context = given
                await notifier
            else:
                await asyncio.to_thread(notifier, given)
        except Exception as exc:  # an alert never fails the callback; the others still go out
            logger.warning("notifier %s failed for the %s alert of %s (%s)", name,
                           alert["event"], alert["partition_date"], exc)
            failed.append(name)
    return failed


def alert(settings: Any, event: str, context: Mapping[str, Any], line: str, *,
          partition_date: Any, status: Any = None, summary: Mapping[str, Any] | None = None,
          previous: Mapping[str, Any] | None = None, warn: Warn | None = None) -> list[str]:
    """Send `event` to the notifiers configured for it (`configured`); the failed ones."""
    from tokokita_etl.runner.notify import alert_context

    notifiers = configured(settings, event)
    if not notifiers:
        return []
    entry = alert_context(event, line, pipeline=settings.pipeline,
                          partition_date=partition_date, status=status, summary=summary,
                          previous=previous)
    return send(notifiers, context, entry, warn)


class _DeadlineSettings:
    """What `configured` reads, for the triggerer (no pipeline settings there)."""

    ping_url = ""

    def __init__(self, notifiers: str, pipeline: str) -> None:
        self.notifiers, self.pipeline = notifiers, pipeline


async def deadline_alert(*, tz: str, deadline_local_time: str, pipeline: str, dag_id: str = "",
                         webhook_url: str = "", notifiers: str = "",
                         context: Mapping[str, Any] | None = None) -> str:
    """The DAG's deadline `AsyncCallback`, run by the triggerer: `notify.deadline_missed`
    (logged, POSTed to `webhook_url`), then, for a run the alert is for, the `deadline` event
    to the configured notifiers (`send_async`). Returns the message as one JSON line (Airflow
    stores it in a text column)."""
    from tokokita_etl.runner.notify import deadline_missed

    message = await deadline_missed(dag_id=dag_id, webhook_url=webhook_url, tz=tz,
                                    deadline_local_time=deadline_local_time, context=context)
    line = json.dumps(message, ensure_ascii=False, default=str)
    chosen = configured(_DeadlineSettings(notifiers, pipeline), "deadline")
    if "not_alerted" not in message and chosen:
        from tokokita_etl.runner.notify import alert_context

        entry = alert_context("deadline", line, pipeline=pipeline,
                              partition_date=message.get("partition_date"),
                              status=message.get("state"), summary=message)
        failed = await send_async(chosen, dict(context or {}), entry)
        if failed:
            message["notifier_errors"] = failed
            line = json.dumps(message, ensure_ascii=False, default=str)
    return line
