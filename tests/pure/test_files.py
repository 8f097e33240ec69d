"""Atomic file writes: a file appears under its name whole and on disk, or not at all.

`atomic_path` hands a temporary sibling to a writer that opens the file itself (Arrow's
Parquet writer, DuckDB's COPY, fsspec); these tests use those writers where they can.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokokita_etl.files import atomic_path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_an_arrow_writer_s_file_is_renamed_into_place_whole(tmp_path):
    target = tmp_path / "staging" / "rows.parquet"
    table = pa.table({"line": [2, 3], "kota": ["Bandung", "Medan"]})
    with atomic_path(target) as partial, pa.OSFile(str(partial), "wb") as sink, \
            pq.ParquetWriter(sink, table.schema) as writer:
        assert not target.exists(), "nothing under the final name while it is written"
        writer.write_table(table)
    assert pq.read_table(target).equals(table)
    assert leftovers(target.parent) == []


def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    target = tmp_path / "rows.parquet"
    target.write_bytes(b"the previous file")
    with pytest.raises(RuntimeError), atomic_path(target) as partial:
        partial.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"the previous file"
    assert leftovers(tmp_path) == []


def test_the_file_is_flushed_to_disk_before_the_rename_even_when_its_writer_replaced_it(
        tmp_path, monkeypatch):
    """Regression: `atomic_path` renamed its writer's file into place without an fsync (the
    module promises one for every atomic write), so after a crash the final name could hold
    an empty file. The fsync must reach the file that is renamed, also when the writer
    replaced the temporary file instead of writing into it."""
    target = tmp_path / "rejected.parquet"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with atomic_path(target) as partial:
        # DuckDB opens the path itself
        duckdb.sql(f"COPY (SELECT 42 AS answer) TO '{partial}' (FORMAT parquet)")
        replaced = partial.with_name(partial.name + ".new")
        replaced.write_bytes(partial.read_bytes())
        os.replace(replaced, partial)
    assert synced == [target.stat().st_ino]
    assert pq.read_table(target).to_pylist() == [{"answer": 42}]


def test_a_full_disk_s_write_error_names_the_final_file(tmp_path):
    target = tmp_path / "extract.parquet"
    with pytest.raises(OSError) as raised, atomic_path(target):
        raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left "
                          "on device")  # as Arrow raises it: no file name
    assert raised.value.filename == str(target)
    assert "No space left on device" in str(raised.value)
    assert leftovers(tmp_path) == []
