"""The file state store: `state.json` under an exclusive lock, one claim file per date and one
manifest file per run, all beside the watermark.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import StateError
from tokokita_etl.files import atomic_writer, locked, write_new_atomic, write_text_atomic
from tokokita_etl.runner.watermark import (
    FAILED,
    FORMER_NAMES,
    SUCCESS,
    Claim,
    Watermark,
    WatermarkRules,
    check_document,
    note_renamed,
    parse_claim,
)


@dataclass
class _Seen:
    """A watermark document as this process last read or wrote it: the file's bytes, the
    checked document (never changed in place: readers share it) and the text of each entry
    as the file holds it, filled as entries are serialised."""

    raw: bytes
    data: dict[str, Any]
    texts: dict[str, str] = field(default_factory=dict)
    #: the former name the file holds (`FORMER_NAMES`), read as the watermark's name
    former_name: str | None = None


#: by watermark file
_SEEN: dict[Path, _Seen] = {}


def _json(value: Any, indent: str) -> str:
    """`value` as `json.dumps(..., indent=2)` writes it nested `indent` deep."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _document_text(data: dict[str, Any], texts: dict[str, str]) -> str:
    """`json.dumps(data, indent=2, ensure_ascii=False) + "\n"`, byte for byte, with each
    entry's text taken from `texts` when there (and added to it when not)."""
    if not data["runs"]:
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    parts = []
    for name, value in data.items():
        if name != "runs":
            parts.append(f"  {json.dumps(name, ensure_ascii=False)}: {_json(value, '  ')}")
            continue
        entries = []
        for key, entry in value.items():
            text = texts.get(key)
            if text is None:
                text = texts[key] = \
                    f"    {json.dumps(key, ensure_ascii=False)}: {_json(entry, '    ')}"
            entries.append(text)
        parts.append('  "runs": {\n' + ",\n".join(entries) + "\n  }")
    return "{\n" + ",\n".join(parts) + "\n}\n"


class StateStore(WatermarkRules):
    """The file store: `state.json` with an exclusive lock around every read-modify-write,
    one claim file per date (`claims/D.json`) and one manifest file per run (`runs/`), all
    beside the watermark."""

    def __init__(self, path: Path, pipeline: str) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.pipeline = pipeline
        self.claims_dir = self.path.parent / "claims"
        self.runs_dir = self.path.parent / "runs"

    @property
    def location(self) -> str:
        """Where the watermark is, for messages."""
        return str(self.path)

    def read(self) -> Watermark:
        """Load the current watermark (an empty one when the file does not exist yet)."""
        data = self._shared()
        return Watermark({**data, "runs": dict(data["runs"])})

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.lock_path)

    def _load(self) -> dict[str, Any]:
        """The document, the caller's own to change."""
        return copy.deepcopy(self._shared())

    def _shared(self) -> dict[str, Any]:
        """The document, checked, shared with this process's other readers: never changed
        in place. Parsed and checked again only when the file's bytes are not the ones this
        process last read or wrote."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {"pipeline": self.pipeline, "runs": {}}
        except OSError as exc:
            raise StateError(f"{self.path}: cannot read the watermark: {exc}") from None
        seen = _SEEN.get(self.path)
        if seen is not None and seen.raw == raw:
            return seen.data
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StateError(f"{self.path}: cannot read the watermark: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(
                f"{self.path}: corrupt watermark (invalid JSON at line {exc.lineno}, "
                f"column {exc.colno}: {exc.msg}); fix or restore it by hand, "
                "it is never reset automatically"
            ) from None
        check_document(str(self.path), data)
        former = FORMER_NAMES.get(self.pipeline)
        if former is not None and data.get("pipeline") == former:
            # read as the new name: the next write saves it so (`_write`)
            data = {**data, "pipeline": self.pipeline}
        else:
            former = None
        _SEEN[self.path] = _Seen(raw, data, former_name=former)
        return data

    def check_writable(self) -> None:
        """StateError unless the watermark and the manifests folder can be written now: an
        existing watermark is rewritten with the same bytes (temporary file, fsync, rename:
        what `update` does), a missing one and the manifests folder are probed with a
        temporary file. Run before any stage, so a full or read-only state folder stops the
        run before anything is loaded or published."""
        try:
            with self._locked():
                try:
                    current = self.path.read_bytes()
                except FileNotFoundError:
                    current = None
                if current is not None:
                    with atomic_writer(self.path, mode="wb") as handle:
                        handle.write(current)
                else:
                    _probe(self.path.parent, self.path.name,
                           json.dumps({"pipeline": self.pipeline, "runs": {}}).encode())
        except OSError as exc:
            raise StateError(
                f"{self.path}: the watermark cannot be written ({exc.strerror or exc}); "
                "nothing was run: free space or fix the permissions, then run again") from None
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            _probe(self.runs_dir, "probe", b"{}\n")
        except OSError as exc:
            raise StateError(f"{self.runs_dir}: the run manifests folder cannot be written "
                             f"({exc.strerror or exc}); nothing was run") from None

    def update(self, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to the document under the lock and save it atomically."""
        with self._locked():
            data = self._load()
            before = copy.deepcopy(data)
            result = mutate(data)
            if data != before:
                self._write(data, {})
            return result

    def update_entry(self, day: date, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to a copy of `day`'s entry under the lock and save the document
        atomically when it changed (the other entries' texts as this process last saw
        them)."""
        key = day.isoformat()
        with self._locked():
            data = self._shared()
            current = data["runs"].get(key, {})
            entry = copy.deepcopy(current)
            result = mutate(entry)
            if entry == current:
                return result
            runs = {name: value for name, value in data["runs"].items() if name != key}
            if entry:
                runs[key] = entry
            seen = _SEEN.get(self.path)
            texts = {} if seen is None or seen.data is not data else \
                {name: text for name, text in seen.texts.items() if name != key}
            self._write({**data, "runs": dict(sorted(runs.items()))}, texts)
            return result

    def _write(self, data: dict[str, Any], texts: dict[str, str]) -> None:
        """Save `data` atomically (`texts`: entries' texts known to be theirs)."""
        raw = _document_text(data, texts).encode("utf-8")
        seen = _SEEN.get(self.path)  # (the file as read under the lock held)
        former = seen.former_name if seen is not None else None
        try:
            with atomic_writer(self.path, mode="wb") as handle:
                handle.write(raw)
        except OSError as exc:  # the folder filled up (or turned read-only) since
            # check_writable: the change is not recorded, and the file is as it was
            raise StateError(
                f"{self.path}: the watermark cannot be written "
                f"({exc.strerror or exc}); it is unchanged: free space or fix the "
                "permissions, then run again") from None
        _SEEN[self.path] = _Seen(raw, data, texts)
        if former is not None:
            note_renamed(str(self.path), former, self.pipeline)

    def export(self) -> dict[str, Any]:
        """The watermark document (`state.json`'s format)."""
        return self._load()

    def import_entries(self, data: dict[str, Any]) -> list[str]:
        """Add the entries of a watermark document; StateError naming the dates that already
        have an entry here (nothing is imported then). Returns the imported dates."""

        def add(current: dict[str, Any]) -> list[str]:
            clash = sorted(set(current["runs"]) & set(data["runs"]))
            if clash:
                raise StateError(f"{self.path}: already holds entries for {', '.join(clash)}; "
                                 "nothing was imported")
            current["runs"] = dict(sorted({**current["runs"], **data["runs"]}.items()))
            return sorted(data["runs"])

        return self.update(add)

    # -- claims --------------------------------------------------------------------------

    def claim_location(self, day: date) -> str:
        """Where `day`'s claim is, for messages."""
        return str(self.claim_path(day))

    def claim_path(self, day: date) -> Path:
        """The claim file of `day`."""
        return self.claims_dir / f"{day.isoformat()}.json"

    @contextlib.contextmanager
    def date_locked(self, day: date) -> Iterator[None]:
        """Every look at a claim and its change happen under one lock of the claims folder."""
        with locked(self.claims_dir / ".lock"):
            yield

    def read_claim(self, day: date) -> Claim | None:
        """The current claim of `day`, or None; a damaged claim is a StateError naming it."""
        path = self.claim_path(day)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(f"{path}: cannot read the claim: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(f"{path}: corrupt claim (invalid JSON: {exc.msg}); delete it if "
                             "no run of this date is in progress") from None
        return parse_claim(data, str(path))

    def claims(self, days: Iterable[date]) -> dict[date, Claim | StateError]:
        """The claim of each of `days` that has one (a damaged one: the StateError naming
        it), reading only the claim files there are."""
        try:
            present = {path.name for path in self.claims_dir.iterdir()}
        except FileNotFoundError:
            return {}
        found: dict[date, Claim | StateError] = {}
        for day in days:
            if self.claim_path(day).name in present:
                try:
                    claim = self.read_claim(day)
                except StateError as exc:
                    claim = exc
                if claim is not None:
                    found[day] = claim
        return found

    def put_claim(self, day: date, claim: Claim) -> None:
        """Write `day`'s claim (call under `date_locked`)."""
        try:
            write_text_atomic(self.claim_path(day), json.dumps(claim.to_dict()))
        except OSError as exc:
            raise StateError(f"{self.claim_path(day)}: the claim cannot be written "
                             f"({exc.strerror or exc}); nothing was run: free space or fix "
                             "the permissions, then run again") from None

    def drop_claim(self, day: date) -> None:
        """Remove `day`'s claim (call under `date_locked`)."""
        self.claim_path(day).unlink(missing_ok=True)

    # -- manifests -----------------------------------------------------------------------

    def write_manifest(self, name: str, body: dict[str, Any]) -> tuple[str, str]:
        """Write a run's manifest as `runs/<name>.json` (or `<name>-2.json`...: never
        replaces one); returns its final name and where it went."""
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        try:
            path = write_new_atomic(self.runs_dir / f"{name}.json", text)
        except OSError as exc:
            raise StateError(f"{self.runs_dir / name}.json: the run manifest cannot be "
                             f"written ({exc.strerror or exc}): free space or fix the "
                             "permissions") from None
        return path.stem, str(path)

    def manifests(self, day: date) -> Iterator[dict[str, Any]]:
        """The manifests of `day`, newest first (unreadable ones are passed over)."""
        return _bodies(self.runs_dir.glob(f"run-{day.isoformat()}-*.json"))

    def last_outcomes(self, days: Iterable[date]) -> dict[date, dict[str, Any]]:
        """The newest manifest with a recorded outcome (success or failed) of each of `days`
        that has one: one look at the manifests folder, whatever its length."""
        wanted = {f"run-{day.isoformat()}-": day for day in days}
        found: dict[date, list[Path]] = {}
        try:
            listing = os.scandir(self.runs_dir)
        except FileNotFoundError:
            return {}
        with listing:
            for item in listing:
                day = wanted.get(item.name[:15])
                if day is not None and item.name.endswith(".json"):
                    found.setdefault(day, []).append(Path(item.path))
        return {day: body for day, paths in found.items()
                if (body := next((body for body in _bodies(paths)
                                  if body.get("status") in (SUCCESS, FAILED)), None))}


def _bodies(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The manifests at `paths`, newest first (unreadable ones are passed over)."""
    for path in sorted(paths, key=lambda path: path.stat().st_mtime_ns, reverse=True):
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(body, dict):
            yield body


def _probe(folder: Path, name: str, content: bytes) -> None:
    """Write, fsync and remove a temporary file in `folder` (OSError when it cannot)."""
    fd, probe = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)
