"""Error types; each carries the command-line exit code it maps to."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BLOCKED = 3


class EtlError(Exception):
    """Base class: a clear, user-facing error with an exit code."""

    exit_code = EXIT_FAILED
    #: whether a run that hits this error counts as a failed attempt
    counts_as_attempt = True


class ConfigError(EtlError):
    """Bad configuration or usage (exit 2)."""

    exit_code = EXIT_USAGE
    counts_as_attempt = False


class StateError(EtlError):
    """The watermark file is unreadable or corrupt; it is never reset silently (exit 2)."""

    exit_code = EXIT_USAGE
    counts_as_attempt = False


class MissingPartitionError(EtlError):
    """The raw partition file does not exist or is empty; nothing was attempted (exit 1)."""

    counts_as_attempt = False


class DataError(EtlError):
    """The partition as a whole is unusable (missing column, undecodable, no header)."""


class WarehouseError(EtlError):
    """The warehouse cannot be reached or rejected the load."""


class ValidationError(EtlError):
    """A validation check failed; no gold file is published."""


class BlockedError(EtlError):
    """The date reached max attempts and needs manual intervention (exit 3)."""

    exit_code = EXIT_BLOCKED
    counts_as_attempt = False


class ConcurrentRunError(EtlError):
    """Another run holds the same partition date."""

    counts_as_attempt = False
