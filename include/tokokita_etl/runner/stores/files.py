"""The file state store: `state.json` under an exclusive lock, one claim file per date and one
manifest file per run, all beside the watermark.

Beside `state.json`, its index (`state.json.index`, written after each of the store's writes)
says where each entry's text is in the file and what `Summary` every entry sums up to, for
the SHA-256 of the file's bytes: a process that finds the index of the bytes it read parses
only the entries it reads (a gate reads one date's, and the summary), so a year of dates
adds to it only the reading and hashing of the file's bytes. Any other bytes (a hand edit, a
restored copy, a crash between the two writes) are parsed and checked whole, as they always
were, and the next write writes the index again; the index is never read for bytes it does
not describe.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    EntryFacts,
    Summary,
    Watermark,
    WatermarkRules,
    check_document,
    check_entry,
    entry_facts,
    note_renamed,
    parse_claim,
)

#: the index's name: the watermark file's name and this
INDEX_SUFFIX = ".index"
#: what stands for the entries in a document's fields (`_Document.head`)
RUNS = "runs"


def _json(value: Any, indent: str) -> str:
    """`value` as `json.dumps(..., indent=2)` writes it nested `indent` deep."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _entry_prefix(key: str) -> str:
    return f"    {json.dumps(key, ensure_ascii=False)}: "


def _entry_text(key: str, entry: dict[str, Any]) -> bytes:
    """An entry as `json.dumps(document, indent=2)` writes it, indentation included, in
    UTF-8."""
    return (_entry_prefix(key) + _json(entry, "    ")).encode("utf-8")


def _render(head: dict[str, Any], entries: list[tuple[str, bytes]]
            ) -> tuple[bytes, tuple[int, int], dict[str, tuple[int, int]]]:
    """`json.dumps(document, indent=2, ensure_ascii=False) + "\n"` in UTF-8, byte for byte,
    of the document of `head`'s fields with `entries` (each date with its `_entry_text`) as
    its "runs"; and where they are in it: the bytes inside the braces of "runs", and each
    entry's text."""
    if not entries:
        raw = (json.dumps({**head, RUNS: {}}, indent=2, ensure_ascii=False) + "\n").encode()
        at = raw.index(b'\n  "runs": {') + len(b'\n  "runs": {')
        return raw, (at, at), {}
    pieces = [b"{\n"]
    pos = 2
    region = (0, 0)
    spans: dict[str, tuple[int, int]] = {}
    for n, (name, value) in enumerate(head.items()):
        if n:
            pieces.append(b",\n")
            pos += 2
        if name != RUNS:
            piece = f"  {json.dumps(name, ensure_ascii=False)}: {_json(value, '  ')}".encode()
            pieces.append(piece)
            pos += len(piece)
            continue
        pieces.append(b'  "runs": {')
        pos += len(b'  "runs": {')
        first = pos
        for i, (key, text) in enumerate(entries):
            pieces.append(b",\n" if i else b"\n")
            pos += 1 + bool(i)
            pieces.append(text)
            spans[key] = (pos, pos + len(text))
            pos += len(text)
        pieces.append(b"\n  }")
        region = (first, pos + 3)
        pos += 4
    pieces.append(b"\n}\n")
    return b"".join(pieces), region, spans


class _Document:
    """A watermark document as this process last read or wrote it: the file's bytes, its
    fields (`head`, in their order, "runs" standing for the entries) and its entries, each
    parsed and checked when first asked for (`values`: shared by every reader, never changed
    in place), from its text at its span in `raw` when the store knows it (a file whose
    index it read, or that it wrote), else all of them when the file was read whole."""

    def __init__(self, where: str, raw: bytes, head: dict[str, Any],
                 values: dict[str, dict[str, Any]], *,
                 spans: dict[str, Any] | None = None, summary: Summary | None = None,
                 facts: dict[str, EntryFacts] | None = None, facts_line: bytes = b"",
                 index: str = "") -> None:
        self.where = where
        self.raw = raw
        self.head = head
        self.values = values
        self.spans = spans
        self._summary = summary
        self._facts = facts
        self._facts_line = facts_line
        self._index = index
        #: the former name the file holds (`FORMER_NAMES`), read as the watermark's name
        self.former_name: str | None = None

    def dates(self) -> Mapping[str, Any]:
        """The entries' dates, in the file's order."""
        return self.spans if self.spans is not None else self.values

    def entry(self, key: str) -> dict[str, Any] | None:
        """The entry of `key`, parsed and checked (None: there is none)."""
        value = self.values.get(key)
        if value is not None or self.spans is None or key not in self.spans:
            return value
        start, end = self.spans[key]
        text, prefix = self.raw[start:end], _entry_prefix(key).encode("utf-8")
        try:
            if not text.startswith(prefix):
                raise ValueError(f"no entry for {key} at byte {start}")
            value = json.loads(text[len(prefix):])
        except (ValueError, TypeError) as exc:  # (the index of these bytes, written wrong)
            raise StateError(f"{self._index}: does not describe {self.where} ({exc}); delete "
                             "it (the next write writes it again)") from None
        check_entry(self.where, key, value)
        self.values[key] = value
        return value

    def text_of(self, key: str) -> bytes:
        """The entry's `_entry_text`."""
        if self.spans is not None:
            start, end = self.spans[key]
            return self.raw[start:end]
        return _entry_text(key, self.values[key])

    def facts(self, key: str) -> EntryFacts:
        """The entry's `entry_facts`: the index's, else its own."""
        if self._facts is None and self._facts_line:
            self._facts, self._facts_line = _read_facts(self._facts_line), b""
        if self._facts is not None and key in self._facts:
            return self._facts[key]
        return entry_facts(self.entry(key) or {})

    def summary(self) -> Summary:
        if self._summary is None:
            self._summary = Summary.of((key, self.facts(key)) for key in self.dates())
        return self._summary

    def watermark(self) -> Watermark:
        """A reader's watermark of this document (sharing its entries)."""
        return Watermark(
            {name: _Entries(self) if name == RUNS else value for name, value in self.head.items()},
            summary=self.summary())

    def document(self) -> dict[str, Any]:
        """The document, the caller's own to change."""
        runs = {key: copy.deepcopy(self.entry(key)) for key in self.dates()}
        return {name: runs if name == RUNS else copy.deepcopy(value)
                for name, value in self.head.items()}


def _read_facts(line: bytes) -> dict[str, EntryFacts] | None:
    """The index's facts by date, or None when they are not as the store writes them."""
    try:
        facts = json.loads(line)
        return {key: (bool(success), bool(unsettled), wid, int(revision))
                for key, (success, unsettled, wid, revision) in facts.items()}
    except (ValueError, TypeError, AttributeError):
        return None


class _Entries(Mapping[str, dict[str, Any]]):
    """A document's entries by date, each parsed and checked when first read."""

    def __init__(self, document: _Document) -> None:
        self._document = document

    def __getitem__(self, key: str) -> dict[str, Any]:
        value = self._document.entry(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._document.dates()

    def __iter__(self) -> Iterator[str]:
        return iter(self._document.dates())

    def __len__(self) -> int:
        return len(self._document.dates())


#: by watermark file
_SEEN: dict[Path, _Document] = {}


class StateStore(WatermarkRules):
    """The file store: `state.json` with an exclusive lock around every read-modify-write,
    one claim file per date (`claims/D.json`) and one manifest file per run (`runs/`), all
    beside the watermark."""

    def __init__(self, path: Path, pipeline: str) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.index_path = self.path.with_name(self.path.name + INDEX_SUFFIX)
        self.pipeline = pipeline
        self.claims_dir = self.path.parent / "claims"
        self.runs_dir = self.path.parent / "runs"

    @property
    def location(self) -> str:
        """Where the watermark is, for messages."""
        return str(self.path)

    def read(self) -> Watermark:
        """Load the current watermark (an empty one when the file does not exist yet)."""
        return self._shared().watermark()

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.lock_path)

    def _load(self) -> dict[str, Any]:
        """The document, the caller's own to change."""
        return self._shared().document()

    def _shared(self) -> _Document:
        """The document, shared with this process's other readers: never changed in place.
        Read again only when the file's bytes are not the ones this process last read or
        wrote: through the index of these bytes when there is one, else parsed and checked
        whole."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return _Document(str(self.path), b"", {"pipeline": self.pipeline, RUNS: None}, {})
        except OSError as exc:
            raise StateError(f"{self.path}: cannot read the watermark: {exc}") from None
        seen = _SEEN.get(self.path)
        if seen is not None and seen.raw == raw:
            return seen
        document = self._indexed(raw) or self._parsed(raw)
        former = FORMER_NAMES.get(self.pipeline)
        if former is not None and document.head.get("pipeline") == former:
            # read as the new name: the next write saves it so (`_save`)
            document.head = {**document.head, "pipeline": self.pipeline}
            document.former_name = former
        _SEEN[self.path] = document
        return document

    def _parsed(self, raw: bytes) -> _Document:
        """The document of `raw`, parsed and checked whole."""
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
        return _Document(str(self.path), raw, {**data, RUNS: None}, data[RUNS])

    def _indexed(self, raw: bytes) -> _Document | None:
        """The document of `raw` as its index tells it (nothing parsed but its fields), or
        None when there is no index of these bytes."""
        try:
            lines = self.index_path.read_bytes().split(b"\n")
        except OSError:
            return None
        try:
            known = json.loads(lines[0])
            if known["sha256"] != hashlib.sha256(raw).hexdigest():
                return None
            first, last = known["runs"]
            head = json.loads(raw[:first] + raw[last:])
            spans = json.loads(lines[1])
            unsettled = known["unsettled"]
            summary = Summary(int(known["done"]), {str(wid): int(revision) for wid, revision
                                                   in known["revisions"].items()},
                              tuple(map(str, unsettled)))
            if head.get(RUNS) != {} or not isinstance(spans, dict) \
                    or not isinstance(unsettled, list):
                return None
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None
        return _Document(str(self.path), raw, {**head, RUNS: None}, {}, spans=spans,
                         summary=summary, facts_line=lines[2] if len(lines) > 2 else b"",
                         index=str(self.index_path))

    def check_writable(self) -> None:
        """StateError unless the watermark and the manifests folder can be written now: a
        temporary file in the watermark's folder takes the room a rewrite of `state.json`
        takes (its size, allocated and fsynced, as `update` writes its new copy beside the
        old one), then is removed; the manifests folder is probed the same way. Run before
        any stage, so a full or read-only state folder stops the run before anything is
        loaded or published, at the same cost whatever the watermark's length."""
        try:
            with self._locked():
                try:
                    size = self.path.stat().st_size
                except FileNotFoundError:
                    size = len(json.dumps({"pipeline": self.pipeline, RUNS: {}}))
                _probe(self.path.parent, self.path.name, size)
        except OSError as exc:
            raise StateError(
                f"{self.path}: the watermark cannot be written ({exc.strerror or exc}); "
                "nothing was run: free space or fix the permissions, then run again") from None
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            _probe(self.runs_dir, "probe", 3)
        except OSError as exc:
            raise StateError(f"{self.runs_dir}: the run manifests folder cannot be written "
                             f"({exc.strerror or exc}); nothing was run") from None

    def update(self, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to the document under the lock and save it atomically."""
        with self._locked():
            document = self._shared()
            data = document.document()
            before = copy.deepcopy(data)
            result = mutate(data)
            if data != before:
                check_document(str(self.path), data)
                self._save(document, {**data, RUNS: None}, list(data[RUNS]), data[RUNS])
            return result

    def update_entry(self, day: date, mutate: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply `mutate` to a copy of `day`'s entry under the lock and save the document
        atomically when it changed (the other entries' texts as the file holds them, none
        of them parsed)."""
        key = day.isoformat()
        with self._locked():
            document = self._shared()
            current = document.entry(key) or {}
            entry = copy.deepcopy(current)
            result = mutate(entry)
            if entry == current:
                return result
            keys = set(document.dates())
            if entry:
                keys.add(key)
            else:
                keys.discard(key)
            self._save(document, document.head, sorted(keys), {key: entry} if entry else {})
            return result

    def _save(self, document: _Document, head: dict[str, Any], keys: list[str],
              changed: dict[str, dict[str, Any]]) -> None:
        """Save the document of `head`'s fields and the entries of `keys` atomically: those
        of `changed` as they are now, the others as `document` (the file read under the lock
        held) has them; then its index."""
        raw, region, spans = _render(head, [
            (key, _entry_text(key, changed[key]) if key in changed else document.text_of(key))
            for key in keys])
        try:
            with atomic_writer(self.path, mode="wb") as handle:
                handle.write(raw)
        except OSError as exc:  # the folder filled up (or turned read-only) since
            # check_writable: the change is not recorded, and the file is as it was
            raise StateError(
                f"{self.path}: the watermark cannot be written "
                f"({exc.strerror or exc}); it is unchanged: free space or fix the "
                "permissions, then run again") from None
        facts = {key: entry_facts(changed[key]) if key in changed else document.facts(key)
                 for key in keys}
        values = {key: value for key, value in document.values.items()
                  if key in spans and key not in changed}
        saved = _Document(str(self.path), raw, head, {**values, **changed}, spans=spans,
                          summary=Summary.of(facts.items()), facts=facts,
                          index=str(self.index_path))
        _SEEN[self.path] = saved
        self._write_index(saved, region, facts)
        if document.former_name is not None:
            note_renamed(str(self.path), document.former_name, self.pipeline)

    def _write_index(self, document: _Document, region: tuple[int, int],
                     facts: dict[str, EntryFacts]) -> None:
        """Write the index of `document`'s bytes, just written, as `state.json` is written
        (temporary file, fsync, rename). One that cannot be written is left as it was: it
        describes other bytes, so it is not read (the file is parsed whole until the next
        write writes the index)."""
        summary = document.summary()
        compact = {"ensure_ascii": False, "separators": (",", ":")}
        text = "\n".join((
            json.dumps({"sha256": hashlib.sha256(document.raw).hexdigest(), "runs": region,
                        "done": summary.done, "revisions": summary.revisions,
                        "unsettled": summary.unsettled}, **compact),
            json.dumps(document.spans, **compact),
            json.dumps(facts, **compact))) + "\n"
        with contextlib.suppress(OSError), atomic_writer(self.index_path) as handle:
            handle.write(text)

    def export(self) -> dict[str, Any]:
        """The watermark document (`state.json`'s format)."""
        return self._load()

    def import_entries(self, data: dict[str, Any]) -> list[str]:
        """Add the entries of a watermark document; StateError naming the dates that already
        have an entry here (nothing is imported then). Returns the imported dates."""

        check_document("import", data)

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


def _probe(folder: Path, name: str, size: int) -> None:
    """Make a temporary file of `size` bytes in `folder` (allocated, fsynced) and remove it
    (OSError when it cannot be made)."""
    fd, probe = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:  # (a file system that cannot allocate ahead: written)
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            os.write(fd, bytes(size))
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)
