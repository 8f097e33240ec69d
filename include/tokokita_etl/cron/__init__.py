"""Read a standard five-field cron expression: validate it, explain it, preview its runs.

Syntax is Vixie/Debian cron: ``minute hour day-of-month month day-of-week`` with ``*``,
lists, ranges, steps on ranges and on ``*`` (``0-30/10``), three-letter English names
(JAN-DEC, SUN-SAT, any case), 0 and 7 both Sunday, and the macros @yearly @annually
@monthly @weekly @daily @midnight @hourly.  When day-of-month and day-of-week are both
restricted (neither starts with ``*``) a day matches if *either* matches, otherwise both
must match.  Rejected, each with its own ``CronError.code``: six or seven fields
(Quartz/Spring/EventBridge), the Quartz/Jenkins extensions ``L W # ? H``, ``@reboot``, a
step on a single value (``5/15``; croniter and cronsim read it as ``5-59/15``), backward
ranges, and schedules that can never fire (``0 0 30 2 *``).

Next runs are found by walking the expanded sets (matching days, then hours, then
minutes), never minute by minute.  Wall-clock times are matched in the time zone and
turned into instants with the rule Airflow 3's ``CronTriggerTimetable`` uses
(``airflow/timetables/_cron.py``: croniter on the naive wall clock, then pendulum's
``convert`` with ``fold=1``):

* A wall time inside a DST gap runs at the same wall time shifted forward by the gap
  length, i.e. the instant it would be at the old offset (02:30 -> 03:30 in New York,
  02:15 -> 02:45 on Lord Howe Island).  The search then resumes after that shifted
  time, so other scheduled times inside (and just after) the gap are skipped.
* A wall time repeated by a DST overlap runs once, at its second (post-transition)
  occurrence -- unless croniter collapses the hour field to ``*`` (all 24 hours, where a
  ``*`` mixed into a list such as ``*,5`` does not count): then it runs at both
  occurrences (Airflow's "fold hour" fix).

This equals Airflow's output wherever every Airflow run is a time the expression matches
(tested against the installed Airflow).  For schedules whose hour field is ``*``, Airflow
moves from one run to the next by adding the naive wall-clock difference in absolute
time; across a DST change that can land on times the expression does not match
(``45 * * * *`` runs at 03:15 on Lord Howe Island, ``0 * * * 1`` on a Sunday at 23:00 in
New York).  The preview keeps the cron times and reports what Airflow actually does in
an ``airflow_dst_drift`` warning.  croniter 7, Airflow's parser, also reads some
expressions differently from Vixie cron (``3-3`` as the whole cycle, the day OR rule for
``0 0 */2 * 1``); those get a ``croniter_differs`` warning and this reader follows Vixie.

A naive ``after`` is read as a wall time in the zone (``fold=0``: the first occurrence
of a repeated time).  Returned datetimes are aware, in the zone, with ``fold`` set so
that ``isoformat()`` shows the right offset; compare them as instants (``timestamp()``),
because Python compares datetimes that share a tzinfo by wall time, ignoring ``fold``.

The parts, by concern: `parse` (the expression, its value sets and standard fire times on
the wall clock), `timetable` (Airflow's reading: run instants in a zone by
`CronTriggerTimetable`'s rule, and croniter's expansion), `explain` (the report and its
warnings), `describe` (the English sentence), `command` (the command line), `text` (shared
phrasing). Everything a caller uses is imported from this package; the tests also check
`cron.timetable._airflow_next`, that timetable's own step, directly.
"""

from __future__ import annotations

from tokokita_etl.cron.command import main
from tokokita_etl.cron.explain import CronReport, explain, format_report
from tokokita_etl.cron.parse import CronError, CronSchedule, CronWarning, parse
from tokokita_etl.cron.timetable import next_runs

__all__ = [
    "CronError",
    "CronReport",
    "CronSchedule",
    "CronWarning",
    "explain",
    "format_report",
    "main",
    "next_runs",
    "parse",
]
