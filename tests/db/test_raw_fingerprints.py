"""A success records the fingerprint of the raw bytes it processed, and a done date whose raw
file changed since is shown as such (`on_raw_change=flag`) without becoming due: in `status`,
in the skip line of its next run; with `reprocess` it is due inside the lookback and a plain
run reprocesses it. A touched file with the same bytes is no change, a file gone is never
due; `off` does not look. Real runs of the command line on real files (and a real S3-compatible server
for objects)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from datetime import date
from pathlib import Path

import pytest

from devtools.object_store import s3_server
from tests.conftest import HEADER, SAMPLE_RAW, Workspace, csv_text, run_cli

DAY = date(2026, 11, 2)
NOW = "2026-11-05T10:00:00+07:00"  # DAY is inside the lookback


def entry_of(ws: Workspace, day: date = DAY) -> dict:
    return json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][day.isoformat()]


def status_line(ws: Workspace, day: date = DAY, **env: str) -> str:
    done = run_cli(["status", "--now", NOW], cwd=ws.root, env=ws.env(**env))
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith(day.isoformat()))


def run(ws: Workspace, *args: str, **env: str):
    done = run_cli(["run", "--date", DAY.isoformat(), *args], cwd=ws.root, env=ws.env(**env))
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_success_records_the_size_hash_and_stamp_of_the_raw_file_it_read(sqlite_workspace):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    stat = path.stat()
    assert entry_of(ws)["raw"] == {
        "size": stat.st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "stamp": f"mtime_ns:{stat.st_mtime_ns}"}


@pytest.mark.parametrize("text", [
    csv_text([["A1", "2026-11-02T09:00:00+07:00", "C1", "Jakarta", "Kopi", "1", "1000", "0"]]
             ).removesuffix("\n"),  # a last line without a line end (hashed without the one added)
    HEADER + '\nA1,2026-11-02T09:00:00+07:00,C1,Jakarta,"Kopi\nSusu",1,1000,0\n',  # the record reader
], ids=["line-reader-no-final-newline", "record-reader"])
def test_both_readers_hash_exactly_the_bytes_of_the_file(sqlite_workspace, text):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, text)
    run(ws)
    assert entry_of(ws)["raw"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert entry_of(ws)["raw"]["size"] == len(text.encode("utf-8"))


def test_a_touched_raw_file_with_the_same_bytes_is_not_a_change(sqlite_workspace):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    later = path.stat().st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(later, later))
    line = status_line(ws)
    assert line.split()[1] == "done" and "changed" not in line
    assert "raw" not in run(ws).stdout.split("[skip]", 1)[1]


def test_a_changed_raw_file_is_flagged_not_due_and_a_forced_run_takes_it(sqlite_workspace):
    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    extra = b"LATE-1,2026-11-02T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n"
    path.write_bytes(original + extra)
    change = f"raw changed since processed ({len(original)} -> {len(original) + len(extra)} bytes)"
    line = status_line(ws)
    assert "done (changed)" in line and change in line and "reprocesses it" in line
    due = run_cli(["due", "--now", NOW], cwd=ws.root, env=ws.env())
    assert DAY.isoformat() not in due.stdout.split()  # flag: shown, not due
    skipped = run(ws)
    assert f"[skip] {DAY} already succeeded (use force to reprocess); {change}" in skipped.stdout
    assert entry_of(ws)["attempt"] == 1
    run(ws, "--force")
    assert entry_of(ws)["rows"]["fact"] == 9
    assert entry_of(ws)["raw"]["size"] == len(original) + len(extra)
    assert status_line(ws).split()[1] == "done"


def test_a_raw_file_gone_since_its_success_is_flagged_and_its_results_stay(sqlite_workspace):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    path.unlink()
    line = status_line(ws)
    assert "done (changed)" in line and "raw file gone since processed: its results stay" in line
    assert ws.gold_file(DAY).exists()


def test_on_raw_change_off_does_not_look(sqlite_workspace):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    path.write_bytes(path.read_bytes() + b"LATE-1,2026-11-02T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n")
    assert status_line(ws, TOKOKITA_ON_RAW_CHANGE="off").split()[1] == "done"
    assert "raw" not in run(ws, TOKOKITA_ON_RAW_CHANGE="off").stdout.split("[skip]", 1)[1]


def test_an_entry_recorded_without_a_fingerprint_is_never_flagged(sqlite_workspace):
    """Watermarks written before fingerprints were recorded: their dates are not reported
    changed; the next success records one."""
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    document = json.loads(ws.state_file.read_text(encoding="utf-8"))
    del document["runs"][DAY.isoformat()]["raw"]
    ws.state_file.write_text(json.dumps(document), encoding="utf-8")
    path.write_bytes(path.read_bytes() + b"LATE-1,2026-11-02T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n")
    assert status_line(ws).split()[1] == "done"
    run(ws, "--force")
    assert entry_of(ws)["raw"]["size"] == path.stat().st_size


def test_a_malformed_fingerprint_in_the_watermark_is_refused_naming_the_field(sqlite_workspace):
    ws = sqlite_workspace
    ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    document = json.loads(ws.state_file.read_text(encoding="utf-8"))
    document["runs"][DAY.isoformat()]["raw"] = {"size": "big"}
    ws.state_file.write_text(json.dumps(document), encoding="utf-8")
    done = run_cli(["status", "--now", NOW], cwd=ws.root, env=ws.env())
    assert done.returncode != 0
    assert "raw" in done.stderr and "'size' (a count)" in done.stderr


@pytest.mark.postgres
def test_an_object_partition_records_its_etag_and_a_replaced_object_is_flagged(pg_url, tmp_path,
                                                                                monkeypatch):
    from tokokita_etl.storage import filesystem, upload

    ws = Workspace(tmp_path, pg_url)
    ws.root.mkdir(exist_ok=True)
    with s3_server() as s3:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        bucket = f"tokokita-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(bucket)
        url = f"s3://{bucket}/raw/pesanan_{DAY.isoformat()}.csv"
        upload(SAMPLE_RAW / "pesanan_2026-11-02.csv", url)
        env = {**s3.env, "TOKOKITA_RAW_DIR": f"s3://{bucket}/raw"}
        run(ws, **env)
        raw = entry_of(ws)["raw"]
        fs, key = filesystem(url)
        assert raw["stamp"] == f"etag:{fs.info(key)['ETag'].strip(chr(34))}"
        assert raw["sha256"] == hashlib.sha256(
            (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()).hexdigest()
        assert status_line(ws, **env).split()[1] == "done"
        # the same bytes uploaded again: a new object, the same hash
        upload(SAMPLE_RAW / "pesanan_2026-11-02.csv", url)
        assert status_line(ws, **env).split()[1] == "done"
        changed = Path(tmp_path / "changed.csv")
        changed.write_bytes((SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
                            + b"LATE-1,2026-11-02T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n")
        upload(changed, url)
        assert "raw changed since processed" in status_line(ws, **env)


LATE_ROW = b"LATE-1,2026-11-02T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n"


def due_dates(ws: Workspace, now: str = NOW, **env: str) -> list[str]:
    done = run_cli(["due", "--now", now], cwd=ws.root, env=ws.env(**env))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_with_reprocess_a_changed_raw_file_is_due_and_a_plain_run_reprocesses_it(
        sqlite_workspace):
    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    first_gold = ws.gold_file(DAY).read_bytes()
    path.write_bytes(original + LATE_ROW)
    change = f"raw changed since processed ({len(original)} -> {len(original) + len(LATE_ROW)} bytes)"
    line = status_line(ws, TOKOKITA_ON_RAW_CHANGE="reprocess")
    assert line.split()[1:3] == ["due", "(raw"] and change in line
    assert "on_raw_change=reprocess" in line
    assert due_dates(ws, TOKOKITA_ON_RAW_CHANGE="reprocess") == [DAY.isoformat()]

    done = run(ws, TOKOKITA_ON_RAW_CHANGE="reprocess")
    assert f"[gate] {change}: reprocessing {DAY}, which already succeeded (attempt 1)" \
        in done.stdout
    entry = entry_of(ws)
    assert (entry["status"], entry["attempt"], entry["rows"]["fact"]) == ("success", 2, 9)
    assert entry["raw"]["size"] == len(original) + len(LATE_ROW)
    assert ws.gold_file(DAY).read_bytes() != first_gold
    # processed: neither due nor flagged any more, and the next plain run skips
    assert due_dates(ws, TOKOKITA_ON_RAW_CHANGE="reprocess") == []
    line = status_line(ws, TOKOKITA_ON_RAW_CHANGE="reprocess")
    assert line.split()[1] == "done" and "changed" not in line
    assert "[skip]" in run(ws, TOKOKITA_ON_RAW_CHANGE="reprocess").stdout
    assert entry_of(ws)["attempt"] == 2


def test_with_reprocess_a_touched_or_gone_raw_file_is_not_due(sqlite_workspace):
    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    later = path.stat().st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(later, later))
    assert due_dates(ws, TOKOKITA_ON_RAW_CHANGE="reprocess") == []
    path.unlink()
    assert due_dates(ws, TOKOKITA_ON_RAW_CHANGE="reprocess") == []
    line = status_line(ws, TOKOKITA_ON_RAW_CHANGE="reprocess")
    assert "done (changed)" in line and "its results stay" in line
    assert entry_of(ws)["attempt"] == 1


def test_with_reprocess_a_changed_date_older_than_the_lookback_is_not_due(sqlite_workspace):
    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    path.write_bytes(original + LATE_ROW)
    assert due_dates(ws, "2026-11-20T10:00:00+07:00", TOKOKITA_ON_RAW_CHANGE="reprocess") == []
    assert due_dates(ws, TOKOKITA_ON_RAW_CHANGE="reprocess") == [DAY.isoformat()]


def test_the_sweep_names_each_changed_done_date_once_per_change_and_none_it_leaves(
        sqlite_workspace):
    """`runner.propagation.sweep`: what the Airflow sweep DAG triggers. The same change asked
    twice names the same run; a change of a date a run holds is left to it; once reprocessed
    nothing is named; with `flag` nothing is."""
    from datetime import datetime

    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.claims import claim_date, release_date
    from tokokita_etl.runner.propagation import sweep

    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    now = datetime.fromisoformat(NOW)
    reprocess = ws.settings(on_raw_change="reprocess")
    assert sweep(ORDERS, reprocess, now) == []
    path.write_bytes(original + LATE_ROW)
    [need] = sweep(ORDERS, reprocess, now)
    assert (need.pipeline, need.dag_id, need.key) == ("orders", "tokokita_orders_daily", DAY)
    assert need.reason == (f"raw changed since processed ({len(original)} -> "
                           f"{len(original) + len(LATE_ROW)} bytes)")
    assert need.run_id.startswith(f"sweep__{DAY}__") and sweep(ORDERS, reprocess, now) == [need]
    assert sweep(ORDERS, ws.settings(), now) == []  # flag: shown, not swept

    claim_date(reprocess, DAY, "airflow:tokokita_orders_daily:sweep__x", now, lambda _o: False)
    assert sweep(ORDERS, reprocess, now) == []
    release_date(reprocess, DAY, "airflow:tokokita_orders_daily:sweep__x")

    path.write_bytes(original + LATE_ROW + LATE_ROW.replace(b"LATE-1", b"LATE-2"))
    [again] = sweep(ORDERS, reprocess, now)
    assert again.run_id != need.run_id  # another change: another run
    run(ws, TOKOKITA_ON_RAW_CHANGE="reprocess")
    assert sweep(ORDERS, reprocess, now) == []


def test_the_status_rows_read_a_changed_raw_file_once_per_request(sqlite_workspace, monkeypatch):
    """Regression: with `reprocess`, the status rows hashed a changed done date's raw file
    twice a request, once to find the due dates and once for the date's row."""
    from datetime import datetime

    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner import inputs
    from tokokita_etl.runner.status import date_states

    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    path.write_bytes(original + LATE_ROW)
    hashed: list[str] = []
    real = inputs.hash_handle
    monkeypatch.setattr(inputs, "hash_handle",
                        lambda handle: hashed.append(handle.name) or real(handle))
    rows = date_states(ORDERS, ws.settings(on_raw_change="reprocess"),
                       datetime.fromisoformat(NOW), dates=[DAY])
    assert rows[0]["label"] == "due (raw changed)" and rows[0]["due"] is True
    assert hashed == [str(path)]


def corrected_quantity(original: bytes) -> bytes:
    """The sample with one order's quantity corrected from 2 to 3: the same size."""
    corrected = original.replace(b",Kemeja Batik Pria,2,", b",Kemeja Batik Pria,3,", 1)
    assert corrected != original and len(corrected) == len(original)
    return corrected


def test_a_same_size_correction_names_the_hash_prefixes_and_the_changed_line(workspace):
    """Regression: a corrected quantity keeps the file's size, and the only evidence of the
    change was "771 -> 771 bytes"."""
    ws = workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    assert isinstance(entry_of(ws)["raw_lines"], str)
    corrected = corrected_quantity(original)
    path.write_bytes(corrected)
    old, new = (hashlib.sha256(data).hexdigest()[:12] for data in (original, corrected))
    change = (f"raw changed since processed (same size {len(original)} bytes, sha256 {old} -> "
              f"{new}, 1 line changed)")
    line = status_line(ws)
    assert "done (changed)" in line and change in line
    rows = run_cli(["status", "--now", NOW, "--json"], cwd=ws.root, env=ws.env())
    (row,) = [r for r in json.loads(rows.stdout) if r["date"] == DAY.isoformat()]
    assert row["raw_change"] == change  # what the status page shows
    assert f"[skip] {DAY} already succeeded (use force to reprocess); {change}" in run(ws).stdout
    run(ws, "--force")
    assert entry_of(ws)["raw"]["sha256"] == hashlib.sha256(corrected).hexdigest()
    assert status_line(ws).split()[1] == "done"


def test_lines_added_and_removed_in_a_same_size_change_are_counted_apart(sqlite_workspace):
    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    header, first, second, *rest = original.splitlines(keepends=True)
    path.write_bytes(b"".join([header, second, first, *rest]))  # two lines swapped
    assert "the same lines in another order)" in status_line(ws)
    half = len(first) // 2  # one line split in two, a newline in the place of a character
    path.write_bytes(b"".join([header, first[:half] + b"\n" + first[half + 1:], second, *rest]))
    assert "1 line changed, 1 line added)" in status_line(ws)  # (a removed and an added: one changed)


def test_without_line_digests_a_same_size_change_names_the_hashes_alone(sqlite_workspace):
    """A success whose file was over the line-digest bound (or recorded before them) keeps no
    line digests and no copy of the file: the change names the hashes, no line count."""
    ws = sqlite_workspace
    original = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes()
    path = ws.write_partition(DAY, original)
    run(ws)
    document = json.loads(ws.state_file.read_text(encoding="utf-8"))
    del document["runs"][DAY.isoformat()]["raw_lines"]
    ws.state_file.write_text(json.dumps(document), encoding="utf-8")
    corrected = corrected_quantity(original)
    path.write_bytes(corrected)
    old, new = (hashlib.sha256(data).hexdigest()[:12] for data in (original, corrected))
    assert status_line(ws).endswith(
        f"(same size {len(original)} bytes, sha256 {old} -> {new}): a forced run (Clear in "
        "Airflow) reprocesses it")


def test_a_file_over_the_line_digest_bound_records_none_and_a_forced_run_drops_old_ones(
        sqlite_workspace):
    from devtools.samples import generate_partition
    from tokokita_etl.runner.inputs import LINE_DIGESTS_MAX_BYTES

    ws = sqlite_workspace
    path = ws.write_partition(DAY, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    run(ws)
    assert entry_of(ws)["raw_lines"]
    generate_partition(path, DAY, 3000, seed=3)
    assert path.stat().st_size > LINE_DIGESTS_MAX_BYTES
    run(ws, "--force")
    assert "raw_lines" not in entry_of(ws)  # no stale digests of the file before
