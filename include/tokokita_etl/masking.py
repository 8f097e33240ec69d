"""Credentials masked in what the pipeline shows: settings (`tokokita-etl config`), messages,
manifests. No import of the package's own: settings, notifications and the warehouse use it."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
#: a notifier kwarg whose name contains one of these is a credential
_SECRET_WORDS = ("password", "passwd", "secret", "token", "key", "auth", "credential")


def mask_url(url: str) -> str:
    """`url` with its password and the values of its query string masked (unchanged when it
    has neither)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None and not parts.query:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", f":{MASK}@", 1)
    query = urlencode([(key, MASK) for key, _ in parse_qsl(parts.query, keep_blank_values=True)],
                      safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def is_secret_name(name: str) -> bool:
    """Whether a setting, argument or query parameter of this name holds a credential."""
    return any(word in name.lower() for word in _SECRET_WORDS)


def mask_query_secrets(url: str) -> str:
    """`url` with the values of its credential query parameters masked (libpq and SQLAlchemy
    take `?password=...` as well as the password before the host)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not any(is_secret_name(key) for key, _ in pairs):
        return url
    query = urlencode([(key, MASK if is_secret_name(key) else value) for key, value in pairs],
                      safe="*")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def masked_arguments(value: Any) -> Any:
    """A notifier's arguments, at any depth, with credentials masked: a value under a
    credential's name, and the password and query values of every URL."""
    if isinstance(value, dict):
        return {key: MASK if isinstance(key, str) and is_secret_name(key)
                else masked_arguments(item) for key, item in value.items()}
    if isinstance(value, list):
        return [masked_arguments(item) for item in value]
    return mask_url(value) if isinstance(value, str) else value
