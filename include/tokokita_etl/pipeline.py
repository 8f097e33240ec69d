"""Stages for one partition date, the watermark gate, and `run_for_date` composing them.

The command line and the Airflow tasks call these same functions: each stage reads its input
from the staging folder of date D and writes its output there, so consecutive stages can run in
different processes.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from tokokita_etl.config import Settings
from tokokita_etl.errors import (
    EXIT_BLOCKED,
    EXIT_FAILED,
    EXIT_OK,
    BlockedError,
    ConcurrentRunError,
    EtlError,
)
from tokokita_etl.extract import extract
from tokokita_etl.files import write_new_atomic, write_text_atomic
from tokokita_etl.gold import publish_gold
from tokokita_etl.load import load
from tokokita_etl.schedule import decide, gate_decision
from tokokita_etl.state import FAILED, SUCCESS, StateStore
from tokokita_etl.transform import transform
from tokokita_etl.validate import rupiah, validate
from tokokita_etl.warehouse import Warehouse

STAGES = ("extract", "transform", "load", "validate", "publish_gold")
CLAIM_TTL = timedelta(hours=6)

Log = Callable[[str], None]
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)


def state_store(settings: Settings) -> StateStore:
    """The watermark store of these settings."""
    return StateStore(settings.state_file, settings.pipeline)


def _stage_file(settings: Settings, day: date, stage: str) -> Path:
    return settings.staging_path(day) / f"{stage}.json"


def read_stage(settings: Settings, day: date, stage: str) -> dict[str, Any]:
    """The recorded output of a finished stage (raises if the stage has not run)."""
    path = _stage_file(settings, day, stage)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EtlError(f"{path}: stage {stage!r} has not run for {day}") from None


def run_stage(settings: Settings, day: date, stage: str) -> tuple[dict[str, Any], list[str]]:
    """Run one stage for `day`; record its output and duration; return it with its log lines."""
    staging = settings.staging_path(day)
    started = time.perf_counter()
    if stage == "extract":
        if staging.exists():
            shutil.rmtree(staging)  # a fresh run never sees a previous attempt's leftovers
        result = extract(settings.raw_dir, day, staging).to_dict()
        name = Path(result["file"]).name
        lines = [f"[extract] {name}: {result['rows']} rows, {result['bytes']} bytes"]
    elif stage == "transform":
        result = transform(day, staging, tz=settings.timezone).to_dict()
        lines = [f"[transform] {result['rows']} rows -> {result['valid']} valid, "
                 f"{result['karantina']} karantina, {result['duplikat']} duplikat"]
    elif stage == "load":
        warehouse = Warehouse(settings.warehouse_url, settings.timezone)
        result = load(warehouse, day, staging, settings.quarantine_path(day)).to_dict()
        lines = [f"[load] MERGE fact: {result['fact']} rows ({result['removed']} removed, "
                 f"{len(result['conflicts'])} in another partition); summary {day}: "
                 f"{result['summary']} rows; karantina: {result['karantina']} rows"]
    elif stage == "validate":
        warehouse = Warehouse(settings.warehouse_url, settings.timezone)
        conflicts = read_stage(settings, day, "load")["conflicts"]
        result = validate(warehouse, day, staging, settings.gold_dir,
                          [c["line"] for c in conflicts]).to_dict()
        lines = [f"[validate] {'OK' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}"
                 for c in result["checks"]]
    elif stage == "publish_gold":
        read_stage(settings, day, "validate")  # only a validated run may publish
        result = {"gold": str(publish_gold(settings.gold_dir, day))}
        lines = [f"[gold] {result['gold']}"]
    else:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    result["duration_ms"] = round((time.perf_counter() - started) * 1000)
    write_text_atomic(_stage_file(settings, day, stage), json.dumps(result, indent=1) + "\n")
    return result, lines


# -- per-date claim: two runs of the same date never interleave --------------------------------

def _claim_path(settings: Settings, day: date) -> Path:
    return settings.state_dir / "claims" / f"{day.isoformat()}.json"


def claim_date(settings: Settings, day: date, owner: str, now: datetime) -> None:
    """Claim `day` for `owner`; fail clearly when another live run holds it."""
    path = _claim_path(settings, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"owner": owner, "since": now.isoformat(timespec="seconds"),
                       "expires": (now + CLAIM_TTL).isoformat(timespec="seconds")})

    def take() -> bool:
        try:
            write_new_exclusive(path, body)
            return True
        except FileExistsError:
            return False

    if take():
        return
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        held = {"owner": "?", "expires": "1970-01-01T00:00:00+00:00"}
    if held.get("owner") == owner or datetime.fromisoformat(held["expires"]) <= now:
        write_text_atomic(path, body)  # our own claim again (a retry), or an expired one
        return
    if take():
        return
    raise ConcurrentRunError(
        f"{day} is being processed by {held.get('owner')} since {held.get('since')}; "
        f"this run does not interleave with it (claim file {path}, expires {held.get('expires')})"
    )


def claim_started(settings: Settings, day: date, owner: str, default: datetime) -> datetime:
    """When `owner` claimed `day` (the run's start), or `default`."""
    try:
        held = json.loads(_claim_path(settings, day).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return default
    return datetime.fromisoformat(held["since"]) if held.get("owner") == owner else default


def blocked_reason(settings: Settings, day: date) -> str | None:
    """Why a stage of `day` may not run now (max attempts reached and not succeeded), or None.

    The gate checks this per run; stages check it too, because clearing a stage task re-runs it
    without passing the gate again.
    """
    decision = decide(state_store(settings).read(), day, max_attempts=settings.max_attempts,
                      force=True)
    return decision.reason if decision.action == "blocked" else None


def may_retry(settings: Settings, day: date) -> bool:
    """Whether `day` still has attempts left (a retry can never exceed max attempts)."""
    return state_store(settings).read().attempts(day) < settings.max_attempts


def release_date(settings: Settings, day: date, owner: str) -> None:
    """Release `owner`'s claim on `day` (no-op when it holds none)."""
    path = _claim_path(settings, day)
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return
    if held.get("owner") == owner:
        path.unlink(missing_ok=True)


def write_new_exclusive(path: Path, text: str) -> None:
    """Create `path` with `text`; FileExistsError when it exists."""
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text)


# -- gate, outcome recording, manifests --------------------------------------------------------

@dataclass
class GateResult:
    """The gate's decision for one run of date D."""

    action: str  # run | skip | blocked
    message: str
    attempt: int
    reset_from: int | None = None


def gate(settings: Settings, day: date, *, force: bool, reset_attempts: bool, now: datetime,
         by: str, run_type: str = "manual") -> GateResult:
    """Apply the watermark rules for `day`; perform and record a requested attempts reset."""
    store = state_store(settings)
    decision = gate_decision(store.read(), day, run_type=run_type, now=now,
                             lookback_days=settings.lookback_days,
                             max_attempts=settings.max_attempts, force=force,
                             reset_attempts=reset_attempts, tz=settings.timezone)
    reset_from = None
    if decision.action == "run" and reset_attempts:
        reset_from = store.reset_attempts(day, now=now, by=by)
    return GateResult(decision.action, decision.reason, store.read().attempts(day), reset_from)


@dataclass
class RunOutcome:
    """How one run of one date ended."""

    run_id: str
    status: str  # success | skipped | failed | blocked | missing
    exit_code: int
    attempt: int
    manifest: Path
    error: str | None = None
    entry: dict[str, Any] = field(default_factory=dict)


def manifest_path(settings: Settings, day: date, started: datetime) -> Path:
    """`runs/run-YYYY-MM-DD-HHMMSS.json` (partition date, then UTC start time)."""
    return settings.runs_dir / f"run-{day.isoformat()}-{started.astimezone(UTC):%H%M%S}.json"


def write_manifest(settings: Settings, day: date, started: datetime, finished: datetime, *,
                   status: str, attempt: int, exit_code: int, entry: dict[str, Any],
                   durations: dict[str, int], trigger: str, error: str | None = None) -> Path:
    """Write the run's manifest; never overwrites an existing one."""
    body = {
        "pipeline": settings.pipeline,
        "partition_date": day.isoformat(),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "status": status,
        "attempt": attempt,
        "rows": entry.get("rows", {}),
        "checksums": entry.get("checksums", {}),
        "gold": entry.get("gold", ""),
        "stages_ms": durations,
        "duration_ms": sum(durations.values()),
        "exit_code": exit_code,
        "trigger": trigger,
    }
    if error:
        body["error"] = error
    path = write_new_atomic(manifest_path(settings, day, started),
                            json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return path


def success_payload(settings: Settings, day: date) -> dict[str, Any]:
    """The watermark fields of a successful run, from the stage records."""
    ext = read_stage(settings, day, "extract")
    tra = read_stage(settings, day, "transform")
    lod = read_stage(settings, day, "load")
    val = read_stage(settings, day, "validate")
    pub = read_stage(settings, day, "publish_gold")
    return {
        "rows": {"extracted": ext["rows"], "karantina": lod["karantina"] - tra["duplikat"],
                 "duplikat": tra["duplikat"], "fact": val["fact_rows"],
                 "summary": val["summary_rows"]},
        "checksums": val["checksums"],
        "gold": _display_path(Path(pub["gold"])),
        "bruto": val["bruto"],
        "bersih": val["bersih"],
    }


def stage_durations(settings: Settings, day: date) -> dict[str, int]:
    """Per-stage milliseconds recorded so far for `day`."""
    out = {}
    for stage in STAGES:
        path = _stage_file(settings, day, stage)
        if path.exists():
            out[stage] = json.loads(path.read_text(encoding="utf-8")).get("duration_ms", 0)
    return out


def _display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def finish_success(settings: Settings, day: date, *, started: datetime, now: datetime,
                   trigger: str) -> RunOutcome:
    """Record a success (attempt + 1), write the manifest, drop the staging folder."""
    payload = success_payload(settings, day)
    durations = stage_durations(settings, day)
    attempt = state_store(settings).record(day, SUCCESS, payload, now)
    path = write_manifest(settings, day, started, now, status=SUCCESS, attempt=attempt,
                          exit_code=EXIT_OK, entry=payload, durations=durations, trigger=trigger)
    shutil.rmtree(settings.staging_path(day), ignore_errors=True)
    return RunOutcome(path.stem, SUCCESS, EXIT_OK, attempt, path, entry=payload)


def finish_failure(settings: Settings, day: date, error: BaseException, *, stage: str,
                   started: datetime, now: datetime, trigger: str) -> RunOutcome:
    """Record a failure (attempt + 1 when it counts), write the manifest."""
    message = str(error) or type(error).__name__
    counts = getattr(error, "counts_as_attempt", True)
    store = state_store(settings)
    if counts:
        attempt = store.record(day, FAILED, {"error": message, "failed_stage": stage}, now)
        status = FAILED
    else:
        attempt = store.read().attempts(day)
        status = "blocked" if isinstance(error, BlockedError) else (
            "missing" if stage == "extract" else FAILED)
    exit_code = getattr(error, "exit_code", EXIT_FAILED)
    path = write_manifest(settings, day, started, now, status=status, attempt=attempt,
                          exit_code=exit_code, entry={}, durations=stage_durations(settings, day),
                          trigger=trigger, error=message)
    (settings.staging_path(day) / "validate.json").unlink(missing_ok=True)
    return RunOutcome(path.stem, status, exit_code, attempt, path, error=message)


def finish_skip(settings: Settings, day: date, *, started: datetime, now: datetime,
                trigger: str, message: str) -> RunOutcome:
    """Write the `skipped` manifest; the watermark is unchanged."""
    entry = state_store(settings).read().entry(day)
    attempt = int(entry.get("attempt", 0))
    path = write_manifest(settings, day, started, now, status="skipped", attempt=attempt,
                          exit_code=EXIT_OK, entry=entry, durations={}, trigger=trigger,
                          error=None)
    return RunOutcome(path.stem, "skipped", EXIT_OK, attempt, path, error=message, entry=entry)


def run_for_date(settings: Settings, day: date, *, force: bool = False,
                 reset_attempts: bool = False, now: Clock = utc_now,
                 log: Log = print) -> RunOutcome:
    """Run every stage for `day` under the watermark rules: the command line's `run`."""
    Warehouse(settings.warehouse_url, settings.timezone)  # a bad URL is a config error up front
    started = now()
    perf = time.perf_counter()
    owner = f"cli:{started.isoformat(timespec='microseconds')}"
    decision = gate(settings, day, force=force, reset_attempts=reset_attempts, now=started,
                    by="cli")
    if decision.reset_from is not None:
        log(f"[gate] attempts of {day} reset from {decision.reset_from} to 0")
    if decision.action == "skip":
        log(f"[skip] {decision.message}")
        outcome = finish_skip(settings, day, started=started, now=now(), trigger="cli",
                              message=decision.message)
    elif decision.action == "blocked":
        log(f"[blocked] {decision.message}")
        outcome = finish_failure(settings, day, BlockedError(decision.message), stage="gate",
                                 started=started, now=now(), trigger="cli")
        outcome.exit_code = EXIT_BLOCKED
    else:
        outcome = _run_stages(settings, day, owner, started, now, log)
    elapsed = round((time.perf_counter() - perf) * 1000)
    log(f"[done] {outcome.run_id} status={outcome.status} duration={elapsed}ms "
        f"exit={outcome.exit_code}")
    return outcome


def _run_stages(settings: Settings, day: date, owner: str, started: datetime, now: Clock,
                log: Log) -> RunOutcome:
    try:
        claim_date(settings, day, owner, started)
    except ConcurrentRunError as exc:
        log(f"[error] {exc}")
        return finish_failure(settings, day, exc, stage="gate", started=started, now=now(),
                              trigger="cli")
    stage = STAGES[0]
    try:
        for stage in STAGES:
            _, lines = run_stage(settings, day, stage)
            for line in lines:
                log(line)
        outcome = finish_success(settings, day, started=started, now=now(), trigger="cli")
        entry = outcome.entry
        log(f"[summary] {day}: {entry['rows']['fact']} fact rows, "
            f"{entry['rows']['summary']} kota, {rupiah_text(entry['bruto'])} bruto, "
            f"{rupiah_text(entry['bersih'])} bersih")
        return outcome
    except Exception as exc:  # any stage error is a recorded, failed attempt
        log(f"[error] {stage}: {exc if isinstance(exc, EtlError) else repr(exc)}")
        return finish_failure(settings, day, exc, stage=stage, started=started, now=now(),
                              trigger="cli")
    finally:
        release_date(settings, day, owner)


def rupiah_text(amount: str) -> str:
    """Format a 2-decimal amount string as rupiah."""
    return rupiah(Decimal(amount))
