"""Fault injection: fuzzed raw partitions through the command line on SQLite.

For each file: no traceback, an exit code in 0..3, every data record accounted for (fact +
karantina + duplikat = extracted) and, for every accepted file, the reference implementation
(devtools/reference.py) writes the same gold and quarantine bytes.

Quick mode (the default, run by `make test`): 60 files. Long mode: `TOKOKITA_FAULTS=long`,
10,000 files (`TOKOKITA_FAULTS_FILES` overrides the count, `TOKOKITA_FAULTS_SEED` the seed).
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, date, datetime
from pathlib import Path

from devtools.reference import ReferenceDataError, run_reference
from devtools.samples import generate_partition
from tests.conftest import Workspace, in_process_cli

DAY = date(2026, 11, 10)
CLOCK = datetime(2026, 11, 11, 19, 30, tzinfo=UTC)
LONG = os.environ.get("TOKOKITA_FAULTS") == "long"
FILES = int(os.environ.get("TOKOKITA_FAULTS_FILES") or (10_000 if LONG else 60))
SEED = int(os.environ.get("TOKOKITA_FAULTS_SEED") or 20261110)


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three faults applied to a generated partition."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(14)
        lines = _lines(data)
        at = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
        if kind == 0 and data:  # byte flips
            buf = bytearray(data)
            for _ in range(rng.randint(1, 5)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            data = bytes(buf)
        elif kind == 1:  # truncation mid-row
            data = data[:rng.randrange(len(data) + 1)]
        elif kind == 2:  # a stray quote
            pos = rng.randrange(len(data) + 1)
            data = data[:pos] + b'"' + data[pos:]
        elif kind == 3:  # an embedded newline inside a quoted field
            lines[at] = b'"' + lines[at].replace(b",", b'\n",', 1) if lines[at] else lines[at]
            data = b"\n".join(lines)
        elif kind == 4:  # NUL
            pos = rng.randrange(len(data) + 1)
            data = data[:pos] + b"\x00" + data[pos:]
        elif kind == 5:  # invalid UTF-8
            pos = rng.randrange(len(data) + 1)
            data = data[:pos] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + data[pos:]
        elif kind == 6:  # BOM
            data = b"\xef\xbb\xbf" + data
        elif kind == 7:  # CRLF
            data = data.replace(b"\n", b"\r\n")
        elif kind == 8:  # a huge field
            lines[at] = lines[at] + b"x" * rng.choice([10_000, 200_000])
            data = b"\n".join(lines)
        elif kind == 9:  # header permutation
            names = lines[0].split(b",")
            rng.shuffle(names)
            data = b"\n".join([b",".join(names), *lines[1:]])
        elif kind == 10:  # duplicated, missing or extra column in the header
            names = lines[0].split(b",")
            choice = rng.randrange(3)
            if choice == 0:
                names.append(rng.choice(names))
            elif choice == 1:
                names.pop(rng.randrange(len(names)))
            else:
                names.append(b"catatan")
            data = b"\n".join([b",".join(names), *lines[1:]])
        elif kind == 11:  # empty or header-only file
            data = b"" if rng.random() < 0.3 else lines[0] + b"\n"
        elif kind == 12:  # Unicode whitespace in a field
            lines[at] = lines[at].replace(b",", rng.choice(
                [b",\xc2\xa0", b",\xe3\x80\x80", b",\xc2\x85"]), 1)
            data = b"\n".join(lines)
        else:  # an extra or a missing field in a row
            lines[at] = lines[at] + b",extra" if rng.random() < 0.5 \
                else lines[at].rsplit(b",", 1)[0]
            data = b"\n".join(lines)
    return data


def test_fuzzed_partitions_never_crash_and_agree_with_the_reference(
        tmp_path, monkeypatch, capsys):
    """Guards every crash path a fuzzed raw file can reach: tracebacks, exit codes outside
    0..3, records that vanish, and disagreement with the reference on accepted files."""
    rng = random.Random(SEED)
    problems: list[str] = []
    for n in range(FILES):
        root = tmp_path / f"f{n}"
        ws = Workspace(root, f"sqlite:///{root / 'warehouse.db'}")
        seed_path = root / "seed.csv"
        generate_partition(seed_path, DAY, rng.randint(0, 40), seed=rng.randrange(10**6))
        data = _mutate(seed_path.read_bytes(), rng)
        raw = ws.write_partition(DAY, data)
        call = in_process_cli(ws, monkeypatch, capsys, CLOCK)
        try:
            code, out, err = call("run", "--date", DAY.isoformat())
        except Exception as exc:
            problems.append(f"file {n}: raised {exc!r}")
            continue
        label = f"file {n} (seed {SEED}, exit {code})"
        if "Traceback" in out + err or code not in (0, 1, 2, 3):
            problems.append(f"{label}: {err[-500:]}")
            continue
        if code != 0:
            continue
        manifest = json.loads(ws.manifests(DAY)[-1].read_text(encoding="utf-8"))
        rows = manifest["rows"]
        if rows["fact"] + rows["karantina"] + rows["duplikat"] != rows["extracted"]:
            problems.append(f"{label}: records not accounted for: {rows}")
        try:
            ref = run_reference(raw, DAY, ws.warehouse_url, root / "ref" / "gold",
                                root / "ref" / "quarantine")
        except ReferenceDataError as exc:
            problems.append(f"{label}: the pipeline accepted what the reference refused: {exc}")
            continue
        if ws.gold_file(DAY).read_bytes() != Path(ref["gold"]).read_bytes():
            problems.append(f"{label}: gold differs from the reference")
        if ws.quarantine_file(DAY).read_bytes() != Path(ref["quarantine"]).read_bytes():
            problems.append(f"{label}: quarantine differs from the reference")
    assert not problems, "\n".join(problems[:20])
