"""Fault injection: fuzzed raw partitions through the command line on SQLite.

For each file: no traceback, an exit code in 0..3, every data record accounted for (fact +
karantina + duplikat = extracted) and, for every accepted file, the reference implementation
(devtools/reference.py) writes the same gold and quarantine bytes.

Each file is a window of 0..40 consecutive records of a generated 40-row partition (the
header kept) with one to three faults applied. The generated partitions come from a pool made
once per test (`POOL` partitions of `devtools.samples.generate_partition`, one seed each):
the generator's set-up (a timestamp for every second of the day, 20,000 customers, 5,000
line items) takes about 0.15 s whatever the row count, and generating one partition per file
was most of the suite's time (1,000 files took 250 s, 150 s of it generating). A window of a
40-row partition keeps what a smaller generated file has: dirty rows and later copies of
earlier orders (the generator's duplicates refer back within the file). The command line runs
in-process (`cli.main`), each file in a workspace of its own (a fresh SQLite warehouse, so a
failing file replays alone), removed once the file passed; `os.fsync` is a no-op in this test
(durability is the kill test's subject). What remains per file is the pipeline itself, a
third of it transform's DuckDB statements (about 75 ms a run, whatever the size).

Quick mode (the default, run by `make test`): 1,000 files from 50 partitions. Long mode:
`TOKOKITA_FAULTS=long`, 10,000 files from 500 partitions (`TOKOKITA_FAULTS_FILES` overrides
the file count, `TOKOKITA_FAULTS_SEED` the seed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from datetime import UTC, date, datetime
from pathlib import Path

from devtools.reference import ReferenceDataError, run_reference
from devtools.samples import generate_partition
from tests.conftest import Workspace, in_process_cli

DAY = date(2026, 11, 10)
CLOCK = datetime(2026, 11, 11, 19, 30, tzinfo=UTC)
LONG = os.environ.get("TOKOKITA_FAULTS") == "long"
FILES = int(os.environ.get("TOKOKITA_FAULTS_FILES") or (10_000 if LONG else 1_000))
SEED = int(os.environ.get("TOKOKITA_FAULTS_SEED") or 20261110)
#: generated partitions the files are cut from: one per twenty files
POOL = max(1, FILES // 20)
POOL_ROWS = 40


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


def _pool(folder: Path, rng: random.Random) -> list[list[bytes]]:
    """`POOL` generated partitions of `POOL_ROWS` rows, as (header, record lines...) lists."""
    pool = []
    for n in range(POOL):
        path = folder / f"pool-{n}.csv"
        generate_partition(path, DAY, POOL_ROWS, seed=rng.randrange(10**6))
        *lines, last = path.read_bytes().split(b"\n")
        assert last == b"", "a generated partition ends with a line feed"
        pool.append([line + b"\n" for line in lines])
        path.unlink()
    return pool


def _seed_file(pool: list[list[bytes]], rng: random.Random) -> bytes:
    """The header and a window of 0..`POOL_ROWS` consecutive records of a pool partition."""
    header, *records = rng.choice(pool)
    rows = rng.randint(0, len(records))
    start = rng.randint(0, len(records) - rows)
    return b"".join([header, *records[start:start + rows]])


def test_fuzzed_partitions_never_crash_and_agree_with_the_reference(
        tmp_path, monkeypatch, capsys):
    """Guards every crash path a fuzzed raw file can reach: tracebacks, exit codes outside
    0..3, records that vanish, and disagreement with the reference on accepted files."""
    # durability is the kill test's subject: here an fsync only waits for the disk (about ten
    # per file); every file is still written to a temporary name and renamed into place
    monkeypatch.setattr(os, "fsync", lambda _fd: None)
    rng = random.Random(SEED)
    pool = _pool(tmp_path, rng)
    problems: list[str] = []
    accepted = 0
    for n in range(FILES):
        root = tmp_path / f"f{n}"
        ws = Workspace(root, f"sqlite:///{root / 'warehouse.db'}")
        data = _mutate(_seed_file(pool, rng), rng)
        raw = ws.write_partition(DAY, data)
        call = in_process_cli(ws, monkeypatch, capsys, CLOCK)
        found = len(problems)
        try:
            code, out, err = call("run", "--date", DAY.isoformat())
        except Exception as exc:
            problems.append(f"file {n}: raised {exc!r} ({raw})")
            continue
        label = f"file {n} (seed {SEED}, exit {code}, {raw})"
        if "Traceback" in out + err or code not in (0, 1, 2, 3):
            problems.append(f"{label}: {err[-500:]}")
            continue
        if code == 0:
            accepted += 1
            _check_accepted(ws, raw, label, problems)
        if len(problems) == found:
            shutil.rmtree(root)  # passed: 1,000 workspaces would otherwise stay in the temp folder
    assert not problems, "\n".join(problems[:20])
    # about half the files stay acceptable (the faults hit rows, not the file): the reference
    # is compared on hundreds of them, not on a handful
    assert FILES < 100 or accepted >= FILES // 4, f"only {accepted} of {FILES} files accepted"


def _check_accepted(ws: Workspace, raw: Path, label: str, problems: list[str]) -> None:
    """An accepted file: every record accounted for, the reference's gold and quarantine."""
    root = ws.root
    manifest = json.loads(ws.manifests(DAY)[-1].read_text(encoding="utf-8"))
    rows = manifest["rows"]
    if rows["fact"] + rows["karantina"] + rows["duplikat"] != rows["extracted"]:
        problems.append(f"{label}: records not accounted for: {rows}")
    try:
        ref = run_reference(raw, DAY, ws.warehouse_url, root / "ref" / "gold",
                            root / "ref" / "quarantine")
    except ReferenceDataError as exc:
        problems.append(f"{label}: the pipeline accepted what the reference refused: {exc}")
        return
    if ws.gold_file(DAY).read_bytes() != Path(ref["gold"]).read_bytes():
        problems.append(f"{label}: gold differs from the reference")
    if ws.quarantine_file(DAY).read_bytes() != Path(ref["quarantine"]).read_bytes():
        problems.append(f"{label}: quarantine differs from the reference")
