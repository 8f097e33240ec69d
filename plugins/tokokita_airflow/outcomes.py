"""How a TokoKita task ends when the outcome was decided rather than crashed into."""

from __future__ import annotations


class TaskRefused(SystemExit):
    """Fail the task with a one-line reason: a blocked date or an unusable partition.

    Airflow's task runner logs a SystemExit as one line and every other exception with its
    traceback; these failures are expected, and their reason is already logged in full.
    `WatermarkRetryPolicy` never retries them.
    """
