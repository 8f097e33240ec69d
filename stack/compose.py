"""Read docker-compose.yaml the way Compose does: anchors and merge keys, `${VAR:-default}`
interpolation, string commands split like a shell, environment lists or mappings.

Only what the local stack needs is modelled: a service's command, environment, healthcheck,
volumes, ports and profiles.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stack import COMPOSE_FILE

#: the Airflow services a running stack is made of (airflow-init runs before them)
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer")
INIT_SERVICE = "airflow-init"

_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])((?:[^{}]|\{[^{}]*\})*))?\}"
                  r"|([A-Za-z_][A-Za-z0-9_]*))")


class ComposeError(ValueError):
    """The compose file is not what the local stack can run."""


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose variable substitution: `$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:?e}`,
    `${VAR?e}`, and `$$` for a literal `$`."""

    def sub(match: re.Match) -> str:
        if match.group(1):
            return "$"
        name = match.group(2) or match.group(5)
        op, arg = match.group(3), match.group(4) or ""
        value = env.get(name)
        missing = not value if op in (":-", ":?") else value is None
        if op and op.endswith("-"):
            return interpolate(arg, env) if missing else value
        if op and op.endswith("?"):
            if missing:
                raise ComposeError(f"required variable {name} is missing: {arg}")
            return value
        return value or ""

    return _VAR.sub(sub, text)


def _interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _interpolate_tree(value, env) for key, value in node.items()}
    return node


def load(path: Path = COMPOSE_FILE, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compose document with anchors merged and variables substituted from `env`.

    `env` plays the part of the shell environment / `.env` file; None means no variable is
    set, so every default written in the file applies.
    """
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("services"), dict):
        raise ComposeError(f"{path}: no services")
    return _interpolate_tree(raw, env or {})


@dataclass(frozen=True)
class Volume:
    """`source:target[:mode]`; `source` is a host path (resolved) or a named volume."""

    source: str
    target: str
    named: bool


@dataclass(frozen=True)
class Service:
    """The parts of a compose service the local stack uses."""

    name: str
    command: list[str]
    environment: dict[str, str]
    healthcheck: list[str] | None
    volumes: list[Volume] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    user: str | None = None


def _environment(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    env = {}
    for item in value:
        key, sep, val = str(item).partition("=")
        env[key] = val if sep else ""
    return env


def _command(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(part) for part in value]


def _volumes(value: Any, base: Path) -> list[Volume]:
    out = []
    for item in value or []:
        if isinstance(item, dict):
            source, target = str(item.get("source", "")), str(item["target"])
        else:
            source, _, rest = str(item).partition(":")
            target = rest.split(":")[0]
        named = not source.startswith((".", "/", "~"))
        if not named:
            source = str((base / source).resolve()) if not source.startswith("/") else source
        out.append(Volume(source, target, named))
    return out


def service(doc: dict[str, Any], name: str, base: Path = COMPOSE_FILE.parent) -> Service:
    """One service of a loaded compose document."""
    try:
        spec = doc["services"][name]
    except KeyError:
        raise ComposeError(f"no service {name!r} in the compose file") from None
    health = (spec.get("healthcheck") or {}).get("test")
    if isinstance(health, str):
        health = ["CMD-SHELL", health]
    return Service(
        name=name,
        command=_command(spec.get("command")),
        environment=_environment(spec.get("environment")),
        healthcheck=[str(part) for part in health] if health else None,
        volumes=_volumes(spec.get("volumes"), base),
        ports=[str(p) for p in spec.get("ports") or []],
        profiles=[str(p) for p in spec.get("profiles") or []],
        user=None if spec.get("user") is None else str(spec["user"]),
    )


def services(path: Path = COMPOSE_FILE, env: Mapping[str, str] | None = None) -> dict[str, Service]:
    """Every service of the compose file at `path`, by name."""
    doc = load(path, env)
    return {name: service(doc, name, Path(path).parent) for name in doc["services"]}


# -- the settings' variables in the compose file ------------------------------------------------

#: the lines around the block of docker-compose.yaml's common environment that
#: `python -m stack.compose` writes: one line per variable the pipeline's settings read
BLOCK_BEGIN = "    # BEGIN the settings' variables, generated by `python -m stack.compose`: " \
              "do not edit"
BLOCK_END = "    # END the settings' variables"
_BLOCK_LINE = re.compile(r"^    (?P<name>TOKOKITA_\w+): \$\{(?P=name):-(?P<default>.*)\}$")


def settings_variables() -> dict[str, str]:
    """Every variable the settings read for the package's pipelines, enumerated from their
    models (`tokokita_etl.pipelines.setting_variables`)."""
    from tokokita_etl.pipelines import PIPELINES, setting_variables

    return setting_variables(PIPELINES.values())


def settings_block(text: str) -> str:
    """`text` (the compose file) with its block of the settings' variables as the settings
    model lists them (`settings_variables`): `NAME: ${NAME:-default}` for each, the default the
    block already gives it (a container path, the catch-up's start) or empty; an empty value
    means "not set" to the settings."""
    lines = text.split("\n")
    try:
        begin, end = lines.index(BLOCK_BEGIN), lines.index(BLOCK_END)
    except ValueError:
        raise ComposeError(f"no block of the settings' variables ({BLOCK_BEGIN.strip()!r} .. "
                           f"{BLOCK_END.strip()!r}) in the compose file") from None
    defaults = {match["name"]: match["default"] for line in lines[begin + 1:end]
                if (match := _BLOCK_LINE.match(line))}
    block = [f"    {name}: ${{{name}:-{defaults.get(name, '')}}}" for name in settings_variables()]
    return "\n".join([*lines[:begin + 1], *block, *lines[end:]])


def main(argv: list[str]) -> int:
    """`python -m stack.compose [--check]`: rewrite the compose file's block of the settings'
    variables from the settings model, or (`--check`) only say whether it is up to date."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    wanted = settings_block(text)
    if wanted == text:
        print(f"{COMPOSE_FILE.name}: the settings' variables are up to date")
        return 0
    if argv[:1] == ["--check"]:
        print(f"{COMPOSE_FILE.name}: the settings' variables are out of date; run "
              "`.venv/bin/python -m stack.compose`", file=sys.stderr)
        return 1
    COMPOSE_FILE.write_text(wanted, encoding="utf-8")
    print(f"{COMPOSE_FILE.name}: the settings' variables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
