"""The large-partition generator: deterministic, streaming, atomic, and honest about its counts."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from devtools import samples
from devtools.reference import REQUIRED
from devtools.samples import DIRT_WEIGHTS, generate_partition

DAY = date(2026, 11, 10)
ROOT = Path(__file__).resolve().parents[2]


def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = generate_partition(tmp_path / "a" / "pesanan_2026-11-10.csv", DAY, 20_000, seed=3)
    b = generate_partition(tmp_path / "b" / "pesanan_2026-11-10.csv", DAY, 20_000, seed=3)
    c = generate_partition(tmp_path / "c" / "pesanan_2026-11-10.csv", DAY, 20_000, seed=4)
    data_a = (tmp_path / "a" / "pesanan_2026-11-10.csv").read_bytes()
    assert data_a == (tmp_path / "b" / "pesanan_2026-11-10.csv").read_bytes()
    assert a == b
    assert data_a != (tmp_path / "c" / "pesanan_2026-11-10.csv").read_bytes()
    assert c["rows"] == 20_000


@pytest.mark.parametrize("rows", [0, 1, 7, 8192, 8193, 30_001])
def test_row_count_is_exact_and_counts_add_up(tmp_path, rows):
    path = tmp_path / "pesanan_2026-11-10.csv"
    counts = generate_partition(path, DAY, rows, seed=1)
    data = path.read_bytes()
    assert data.startswith(b"order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n")
    assert not data.startswith(b"\xef\xbb\xbf")
    assert b"\r" not in data
    assert data.endswith(b"\n")
    # no generated record spans lines, so records == lines - header
    assert data.count(b"\n") == rows + 1
    assert counts["rows"] == rows
    assert sum(v for k, v in counts.items() if k != "rows") == rows
    assert set(counts) == {"rows", "fact", "duplicate", *DIRT_WEIGHTS}


def test_dirt_and_duplicate_ratios_roughly_as_asked(tmp_path):
    rows = 100_000
    counts = generate_partition(tmp_path / "p.csv", DAY, rows, seed=0, dirt=0.05, duplicates=0.02)
    dirty = sum(counts[r] for r in DIRT_WEIGHTS)
    assert 0.045 * rows < dirty < 0.055 * rows
    assert 0.016 * rows < counts["duplicate"] < 0.021 * rows
    assert all(counts[r] > 100 for r in DIRT_WEIGHTS), counts

    clean = generate_partition(tmp_path / "q.csv", DAY, 5_000, dirt=0, duplicates=0)
    assert clean["fact"] == 5_000


def test_realistic_values(tmp_path):
    path = tmp_path / "p.csv"
    generate_partition(path, DAY, 50_000, seed=5, dirt=0, duplicates=0)
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    kota = {" ".join(r["kota"].split()).title() for r in rows}
    assert len(kota) == 20
    assert "Jakarta Selatan" in kota
    assert len({r["produk"] for r in rows}) >= 180
    assert any("," in r["produk"] for r in rows)  # some names need quoting
    prices = [Decimal(r["harga_satuan"]) for r in rows]
    assert sum(p % 500 == 0 for p in prices) > 0.8 * len(prices)
    assert any(p % 1 == Decimal("0.5") for p in prices)
    assert all(p > 0 for p in prices)
    assert 0.1 * len(rows) < sum(r["diskon"] == "" for r in rows) < 0.5 * len(rows)
    assert all(r["order_ts"][:10] in ("2026-11-10", "2026-11-09") for r in rows)
    assert len({r["customer_id"] for r in rows}) > 10_000


def test_streams_in_bounded_chunks(tmp_path, monkeypatch):
    writes: list[int] = []
    real_fdopen = os.fdopen

    class Recorder:
        def __init__(self, handle):
            self.handle = handle

        def write(self, text):
            writes.append(len(text))
            return self.handle.write(text)

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            self.handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

    monkeypatch.setattr(samples.os, "fdopen", lambda *a, **k: Recorder(real_fdopen(*a, **k)))
    path = tmp_path / "p.csv"
    generate_partition(path, DAY, 100_000, seed=2)
    size = path.stat().st_size
    # the file is written piece by piece, never assembled whole in memory
    assert sum(writes) == size
    assert len(writes) > 10
    assert max(writes) < 2_000_000 < size


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "pesanan_2026-11-10.csv"

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(samples, "_dirty", boom)
    with pytest.raises(RuntimeError):
        generate_partition(target, DAY, 50_000, dirt=0.5)
    assert list(tmp_path.iterdir()) == []


def test_atomic_replace_and_no_temp_left(tmp_path):
    target = tmp_path / "pesanan_2026-11-10.csv"
    target.write_text("old\n")
    generate_partition(target, DAY, 100)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert target.read_text().startswith("order_id,")
    assert target.stat().st_mode & 0o777 == 0o644


def test_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        generate_partition(tmp_path / "p.csv", DAY, -1)
    with pytest.raises(ValueError):
        generate_partition(tmp_path / "p.csv", DAY, 10, dirt=0.7, duplicates=0.5)


def test_fast_enough(tmp_path):
    rows = 200_000
    start = time.perf_counter()
    generate_partition(tmp_path / "p.csv", DAY, rows)
    elapsed = time.perf_counter() - start
    # the target is >= 300k rows/s; this only guards against an order-of-magnitude slip
    assert rows / elapsed > 50_000, f"{rows / elapsed:.0f} rows/s"


def test_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-m", "devtools.samples", "--date", "2026-11-10", "--rows", "1000",
         "--out", str(tmp_path), "--seed", "9"],
        check=True, capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    report = json.loads(out.stdout)
    path = tmp_path / "pesanan_2026-11-10.csv"
    assert report["file"] == str(path)
    assert report["rows"] == 1000
    expected = generate_partition(tmp_path / "again" / path.name, DAY, 1000, seed=9)
    assert (tmp_path / "again" / path.name).read_bytes() == path.read_bytes()
    assert {k: v for k, v in report.items() if k != "file"} == expected


def test_header_matches_contract():
    assert samples.HEADER.rstrip("\n").split(",") == list(REQUIRED)


def test_the_command_line_exits_quietly_when_its_stdout_reader_has_gone(tmp_path):
    """Bug: `python -m devtools.samples ... | head` ended in a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line: every write is EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "devtools.samples", "--date", DAY.isoformat(), "--rows", "50",
             "--out", str(tmp_path)], cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE,
            text=True, timeout=60, check=False)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert len(_read(tmp_path / f"pesanan_{DAY}.csv")) == 52  # header, 50 rows, final newline
    piped = subprocess.run(
        ["bash", "-c", f'set -o pipefail; "{sys.executable}" -m devtools.samples --date {DAY} '
                       f'--rows 50 --out "{tmp_path}" | head -1'],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert (piped.returncode, piped.stderr, piped.stdout) == (0, "", "{\n")
