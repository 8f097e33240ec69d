"""Error types; each carries the command-line exit code it maps to.

How each kind counts against a date's attempts and whether it is retried is decided in
`tokokita_etl.runner.policy.classify`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BLOCKED = 3


class EtlError(Exception):
    """Base class: a clear, user-facing error with an exit code."""

    exit_code = EXIT_FAILED


class ConfigError(EtlError):
    """Bad configuration or usage (exit 2)."""

    exit_code = EXIT_USAGE


class AccessDeniedError(ConfigError):
    """The warehouse or state database refused the login (wrong password, unknown user, no
    entry for this client): retrying cannot help, so it is never retried (exit 2).

    `url`: the database's URL as shown in messages (password hidden).
    """

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class StateError(EtlError):
    """The watermark file is unreadable or corrupt; it is never reset silently (exit 2)."""

    exit_code = EXIT_USAGE


class MissingPartitionError(EtlError):
    """The raw partition file does not exist or is empty; nothing was attempted (exit 1)."""


class InputsNotSettledError(MissingPartitionError):
    """A partition built from another pipeline's results whose upstream dates are not all
    settled: nothing is attempted; it is built once they are."""


class NoInputError(MissingPartitionError):
    """A partition built from another pipeline's results whose upstream dates are all settled
    as missing: there is nothing to build, so nothing is attempted and no report is
    published (exit 1); a date that arrives later makes it due."""


class DataError(EtlError):
    """The partition as a whole is unusable (missing column, undecodable, no header)."""


class WarehouseError(EtlError):
    """The warehouse cannot be reached or rejected the load.

    `transient`: the database could not be reached, timed out or was locked, so trying again
    later may succeed (Airflow retries it); otherwise it rejected the statement.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ValidationError(EtlError):
    """A validation check failed; no gold file is published. `result`: the validate record
    with every check, the failed ones included (None when the checks did not run)."""

    def __init__(self, message: str, *, result: dict | None = None) -> None:
        super().__init__(message)
        self.result = result


class BlockedError(EtlError):
    """The date reached max attempts and needs manual intervention (exit 3)."""

    exit_code = EXIT_BLOCKED


class ConcurrentRunError(EtlError):
    """Another run holds the same partition date."""


class RunStoppedError(EtlError):
    """The run was stopped from outside while a stage ran (on Airflow: a person marked the
    task success or failed, or cleared it): the stage's warehouse transaction rolls back, and
    it is no failure of the partition (not an attempt, exit 1).

    `clears`: how many times the run had been cleared when it was stopped (Airflow's
    `clear_number`): its later stages of that same clear do not run."""

    def __init__(self, message: str, *, clears: int = 0) -> None:
        super().__init__(message)
        self.clears = clears
