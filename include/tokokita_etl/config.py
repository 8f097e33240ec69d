"""Settings: built-in defaults < YAML file < environment variables < explicit overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import date
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tokokita_etl.errors import ConfigError

DEFAULT_CONFIG_PATH = Path("config/pipeline.yaml")

#: environment variable -> setting name
ENV_VARS = {
    "TOKOKITA_RAW_DIR": "raw_dir",
    "TOKOKITA_GOLD_DIR": "gold_dir",
    "TOKOKITA_QUARANTINE_DIR": "quarantine_dir",
    "TOKOKITA_STATE_DIR": "state_dir",
    "TOKOKITA_STAGING_DIR": "staging_dir",
    "TOKOKITA_WAREHOUSE_URL": "warehouse_url",
    "TOKOKITA_TIMEZONE": "timezone",
    "TOKOKITA_LOOKBACK_DAYS": "lookback_days",
    "TOKOKITA_MAX_ATTEMPTS": "max_attempts",
}
PATH_SETTINGS = ("raw_dir", "gold_dir", "quarantine_dir", "state_dir", "staging_dir")


@dataclass(frozen=True)
class Settings:
    """Resolved pipeline settings; paths are absolute."""

    pipeline: str = "etl-pesanan-tokokita"
    cron: str = "30 2 * * *"
    timezone: str = "Asia/Jakarta"
    lookback_days: int = 7
    max_attempts: int = 3
    raw_dir: Path = Path("data/raw")
    gold_dir: Path = Path("data/gold")
    quarantine_dir: Path = Path("data/quarantine")
    state_dir: Path = Path("data/state")
    staging_dir: Path = Path("data/staging")
    warehouse_url: str = "sqlite:///data/warehouse/tokokita.db"

    @property
    def tz(self) -> ZoneInfo:
        """The pipeline's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def state_file(self) -> Path:
        """The watermark file."""
        return self.state_dir / "state.json"

    @property
    def runs_dir(self) -> Path:
        """Where run manifests go."""
        return self.state_dir / "runs"

    def partition_path(self, day: date) -> Path:
        """The raw partition file for `day`."""
        return partition_path(self.raw_dir, day)

    def gold_path(self, day: date) -> Path:
        """The published gold file for `day`."""
        return self.gold_dir / f"summary_harian_{day.isoformat()}.csv"

    def quarantine_path(self, day: date) -> Path:
        """The quarantine file for `day`."""
        return self.quarantine_dir / f"karantina_{day.isoformat()}.csv"

    def staging_path(self, day: date) -> Path:
        """The hand-off folder between the stages of a run for `day`."""
        return self.staging_dir / day.isoformat()


def partition_path(raw_dir: Path, day: date) -> Path:
    """`<raw_dir>/pesanan_YYYY-MM-DD.csv`."""
    return Path(raw_dir) / f"pesanan_{day.isoformat()}.csv"


def partition_exists(raw_dir: Path, day: date) -> bool:
    """A partition exists when its exact file exists and is non-empty."""
    path = partition_path(raw_dir, day)
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if kind == "int":
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: {name} must be an integer, got {value!r}") from None
        if number < 1:
            raise ConfigError(f"{source}: {name} must be >= 1, got {number}")
        return number
    if kind == "Path":
        if not isinstance(value, str | os.PathLike) or not str(value):
            raise ConfigError(f"{source}: {name} must be a non-empty path, got {value!r}")
        return Path(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {name} must be a non-empty string, got {value!r}")
    return value


def load_settings(
    config_path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings from defaults, the YAML file, the environment and overrides."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    known = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {}

    explicit = config_path or env.get("TOKOKITA_CONFIG")
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        import yaml  # only when a file is read: the DAG file imports this module at parse time

        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read config: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: config must be a mapping of settings")
        for key, value in loaded.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown setting {key!r}; known: {sorted(known)}")
            values[key] = _coerce(key, value, str(path))
    elif explicit:
        raise ConfigError(f"{path}: config file not found")

    for var, name in ENV_VARS.items():
        if env.get(var):
            values[name] = _coerce(name, env[var], var)
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = _coerce(name, value, f"--{name.replace('_', '-')}")

    settings = replace(Settings(), **values)
    try:
        ZoneInfo(settings.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"timezone: unknown time zone {settings.timezone!r}") from None
    resolved = {name: _absolute(getattr(settings, name), cwd) for name in PATH_SETTINGS}
    return replace(settings, warehouse_url=_absolute_sqlite_url(settings.warehouse_url, cwd),
                   **resolved)


def _absolute(path: Path, cwd: Path) -> Path:
    return path if path.is_absolute() else cwd / path


def _absolute_sqlite_url(url: str, cwd: Path) -> str:
    """Make a relative `sqlite:///rel/path.db` URL absolute against `cwd`."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix:
        rel = url[len(prefix):]
        if rel != ":memory:":
            return prefix + str(cwd / rel)
    return url


def schedule_from_env(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(cron, timezone) for the DAG at parse time: environment only, no file read.

    `TOKOKITA_CRON` / `TOKOKITA_TIMEZONE` override the defaults, which equal
    config/pipeline.yaml (a DAG integrity test checks that they agree).
    """
    env = os.environ if env is None else env
    return env.get("TOKOKITA_CRON") or Settings.cron, env.get("TOKOKITA_TIMEZONE") or Settings.timezone
