"""OpenLineage dataset names of the warehouse tables and the files (the naming spec)."""

from __future__ import annotations

from pathlib import Path

from tokokita_etl.runner.lineage import location_dataset, table_dataset


def test_a_postgres_table_is_named_host_port_and_database_schema_table():
    assert table_dataset("postgresql+psycopg://etl:secret@db.internal:6543/tokokita",
                         "fact_pesanan") == ("postgres://db.internal:6543",
                                             "tokokita.public.fact_pesanan")
    assert table_dataset("postgresql+psycopg://etl@db/tokokita", "karantina") == (
        "postgres://db:5432", "tokokita.public.karantina")


def test_a_postgres_search_path_option_names_the_schema():
    url = "postgresql+psycopg://etl@db:5432/tokokita?options=-csearch_path%3Dgudang"
    assert table_dataset(url, "summary_harian") == ("postgres://db:5432",
                                                    "tokokita.gudang.summary_harian")


def test_no_credential_appears_in_a_dataset_name():
    namespace, name = table_dataset("postgresql+psycopg://etl:s3cr3t@db:5432/tokokita", "x")
    assert "s3cr3t" not in namespace + name and "etl" not in namespace


def test_a_sqlite_table_is_named_by_its_database_file(tmp_path):
    db = tmp_path / "tokokita.db"
    assert table_dataset(f"sqlite:///{db}", "fact_pesanan") == (f"sqlite://{db}",
                                                                "main.fact_pesanan")


def test_files_are_file_and_their_absolute_path_objects_their_bucket_and_key(tmp_path,
                                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert location_dataset(Path("data/gold/summary_harian_2026-11-02.csv")) == (
        "file", str(tmp_path / "data/gold/summary_harian_2026-11-02.csv"))
    assert location_dataset("s3://tokokita-raw/pesanan/pesanan_2026-11-02.csv") == (
        "s3://tokokita-raw", "pesanan/pesanan_2026-11-02.csv")
