"""Folders as object-storage URLs: raw, staging, gold and quarantine on a real S3-compatible
server (moto on 127.0.0.1), the warehouse and the state in PostgreSQL; the same results as
local folders, and the stages of one run handing over between two private working folders
(two machines)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from devtools.object_store import S3Server, s3_server
from tests.conftest import SAMPLE_DATES, SAMPLE_RAW, Workspace, run_cli
from tokokita_etl.errors import MissingPartitionError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.staging import fetch_inputs, run_stage
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.settings.layout import partition_file_exists

pytestmark = pytest.mark.postgres

D02, D03, D04 = SAMPLE_DATES


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server, monkeypatch) -> str:
    """A fresh bucket; this process's AWS environment points at the server."""
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    name = f"tokokita-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(name)
    return name


def object_env(ws: Workspace, s3: S3Server, bucket: str, **extra: str) -> dict[str, str]:
    """Settings with every data folder in `bucket` and the state in the warehouse database."""
    return ws.env(**s3.env, TOKOKITA_RAW_DIR=f"s3://{bucket}/raw",
                  TOKOKITA_STAGING_DIR=f"s3://{bucket}/staging",
                  TOKOKITA_GOLD_DIR=f"s3://{bucket}/gold",
                  TOKOKITA_QUARANTINE_DIR=f"s3://{bucket}/quarantine",
                  TOKOKITA_WORK_DIR=str(ws.root / "work"), TOKOKITA_STATE_URL="warehouse",
                  **extra)


def put_samples(bucket: str, *days: date) -> None:
    from tokokita_etl.storage import upload

    for day in days:
        name = f"pesanan_{day.isoformat()}.csv"
        upload(SAMPLE_RAW / name, f"s3://{bucket}/raw/{name}")


def read_object(url: str) -> str:
    from tokokita_etl.storage import filesystem

    fs, path = filesystem(url)
    return fs.cat_file(path).decode("utf-8")


def objects(bucket: str, prefix: str) -> list[str]:
    from tokokita_etl.storage import filesystem

    fs, path = filesystem(f"s3://{bucket}/{prefix}")
    try:
        return sorted(name.rsplit("/", 1)[-1] for name in fs.find(path, refresh=True))
    except FileNotFoundError:
        return []


def test_a_run_on_object_storage_gives_the_local_folders_results(s3, bucket, pg_url, tmp_path):
    objects_ws, local_ws = Workspace(tmp_path / "s3", pg_url), Workspace(tmp_path / "local", pg_url)
    objects_ws.root.mkdir()
    put_samples(bucket, D03)
    local_ws.copy_samples(D03)
    env = object_env(objects_ws, s3, bucket)
    ran = run_cli(["run", "--date", D03.isoformat()], cwd=objects_ws.root, env=env)
    assert ran.returncode == 0, ran.stderr
    assert f"s3://{bucket}/gold/summary_harian_2026-11-03.csv" in ran.stdout
    local = run_cli(["run", "--date", D03.isoformat(), "--force"], cwd=local_ws.root,
                    env=local_ws.env())
    assert local.returncode == 0, local.stderr
    gold = read_object(f"s3://{bucket}/gold/summary_harian_2026-11-03.csv")
    assert gold == local_ws.gold_file(D03).read_text(encoding="utf-8")
    quarantine = read_object(f"s3://{bucket}/quarantine/karantina_2026-11-03.csv")
    assert quarantine == local_ws.quarantine_file(D03).read_text(encoding="utf-8")
    settings = objects_ws.settings(**{k.removeprefix("TOKOKITA_").lower(): v
                                      for k, v in env.items() if k.startswith("TOKOKITA_")})
    entry = state_store(settings).read().entry(D03)
    local = StateStore(local_ws.state_file, "orders").read().entry(D03)
    assert entry["checksums"] == local["checksums"]
    assert entry["gold"] == f"s3://{bucket}/gold/summary_harian_2026-11-03.csv"
    # after a success nothing is left in staging, here or in the bucket; no local data folders
    assert objects(bucket, "staging") == []
    assert not (objects_ws.root / "work" / "staging" / "2026-11-03").exists()
    assert not objects_ws.gold.exists() and not objects_ws.state_dir.exists()
    again = run_cli(["run", "--date", D03.isoformat()], cwd=objects_ws.root, env=env)
    assert again.returncode == 0 and "skip" in again.stdout.lower()


def test_the_stages_of_one_run_hand_over_between_private_working_folders(
        s3, bucket, pg_url, tmp_path):
    """Regression: the validated gold file (`.staged-...`, a dot file) was not handed over,
    so publish_gold on another worker failed with "no validated gold file"."""
    ws = Workspace(tmp_path, pg_url)
    put_samples(bucket, D04)
    env = object_env(ws, s3, bucket)
    names = {k.removeprefix("TOKOKITA_").lower(): v for k, v in env.items()
             if k.startswith("TOKOKITA_")}
    first = ws.settings(**{**names, "work_dir": str(tmp_path / "machine-a")})
    second = ws.settings(**{**names, "work_dir": str(tmp_path / "machine-b")})
    for stage in ORDERS.stage_names[:2]:
        assert fetch_inputs(ORDERS, first, D04, stage) == []
        run_stage(ORDERS, first, D04, stage)
    handed = objects(bucket, "staging/2026-11-04")
    assert {"extract.json", "extract.parquet", "transform.json", "valid.parquet"} <= set(handed)
    assert not any(name.startswith("pesanan_") for name in handed)  # the raw copy stays local
    for stage in ORDERS.stage_names[2:4]:
        assert fetch_inputs(ORDERS, second, D04, stage) == []  # fetched, nothing to run again
        run_stage(ORDERS, second, D04, stage)
    # publish on a third machine: the validated gold file (a dot file) was handed over too
    third = ws.settings(**{**names, "work_dir": str(tmp_path / "machine-c")})
    assert fetch_inputs(ORDERS, third, D04, "publish_gold") == []
    run_stage(ORDERS, third, D04, "publish_gold")
    assert sorted(p.name for p in (tmp_path / "machine-a" / "staging" / "2026-11-04").glob(
        "*.json")) == ["extract.json", "transform.json"]
    gold = read_object(f"s3://{bucket}/gold/summary_harian_2026-11-04.csv")
    assert gold.splitlines()[1] == "2026-11-04,Bandung,1,2,70000.00,70000.00"
    # a third machine whose stage finds no record anywhere runs the stages before it again
    fresh = ws.settings(**{**names, "work_dir": str(tmp_path / "machine-d")})
    from tokokita_etl.storage import remove_folder

    remove_folder(f"s3://{bucket}/staging/2026-11-04")
    assert fetch_inputs(ORDERS, fresh, D04, "validate") == ["extract", "transform", "load"]


def test_a_missing_or_empty_partition_object_is_missing_and_named_by_its_url(
        s3, bucket, pg_url, tmp_path):
    ws = Workspace(tmp_path, pg_url)
    url = f"s3://{bucket}/raw/pesanan_2026-11-02.csv"
    assert not partition_file_exists(url)
    from tokokita_etl.storage import filesystem

    fs, path = filesystem(url)
    fs.pipe_file(path, b"")
    assert not partition_file_exists(url)  # empty: not there yet
    fs.pipe_file(path, (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_bytes())
    assert partition_file_exists(url)
    fs.rm_file(path)
    settings = ws.settings(**{k.removeprefix("TOKOKITA_").lower(): v for k, v in
                              object_env(ws, s3, bucket).items() if k.startswith("TOKOKITA_")})
    with pytest.raises(MissingPartitionError, match=f"s3://{bucket}/raw/pesanan_2026-11-02.csv"):
        run_stage(ORDERS, settings, D02, "extract")


def test_a_bad_partition_object_fails_naming_its_url_and_publishes_nothing(
        s3, bucket, pg_url, tmp_path):
    ws = Workspace(tmp_path, pg_url)
    from tokokita_etl.storage import filesystem

    fs, path = filesystem(f"s3://{bucket}/raw/pesanan_2026-11-02.csv")
    fs.pipe_file(path, b"order_id,kota\nA1,Medan\n")
    env = object_env(ws, s3, bucket)
    ran = run_cli(["run", "--date", D02.isoformat()], cwd=ws.root, env=env)
    assert ran.returncode == 1
    assert f"s3://{bucket}/raw/pesanan_2026-11-02.csv" in ran.stderr
    assert str(ws.root / "work") not in ran.stderr
    assert objects(bucket, "gold") == [] and objects(bucket, "quarantine") == []
    status = run_cli(["status", "--json", "--now", "2026-11-03T03:00"], cwd=ws.root, env=env)
    row = next(r for r in json.loads(status.stdout) if r["date"] == "2026-11-02")
    assert (row["state"], row["attempt"], row["partition"]) == ("failed", 1, True)


def test_a_folder_url_with_an_unknown_scheme_is_a_configuration_error(tmp_path):
    from tokokita_etl.errors import ConfigError
    from tokokita_etl.pipelines import load_settings

    with pytest.raises(ConfigError, match="TOKOKITA_GOLD_DIR: gold_dir unknown storage scheme"):
        load_settings(env={"TOKOKITA_GOLD_DIR": "nosuch://bucket/gold"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="state_dir must be a local folder"):
        load_settings(env={"TOKOKITA_STATE_DIR": "s3://bucket/state"}, cwd=tmp_path)
    assert isinstance(load_settings(env={}, cwd=tmp_path).raw_dir, Path)


def test_publish_puts_the_validated_file_and_checks_it_arrived_whole(bucket, tmp_path):
    """`runner.publish`: an upload whose object is the staged file, which then goes; a local
    target is a rename; nothing staged is refused naming the partition."""
    from tokokita_etl.errors import EtlError
    from tokokita_etl.runner.publish import publish, write_csv
    from tokokita_etl.storage import download

    staged = tmp_path / ".staged-x.csv"
    write_csv(staged, ("kota", "bruto"), [("Bandung", "1.50")])
    target = f"s3://{bucket}/gold/x.csv"
    assert publish(staged, target, "2026-11-02") == target and not staged.exists()
    download(target, tmp_path / "back.csv")
    assert (tmp_path / "back.csv").read_bytes() == b"kota,bruto\nBandung,1.50\n"
    with pytest.raises(EtlError, match="no validated gold file to publish for 2026-11-02"):
        publish(staged, target, "2026-11-02")
    write_csv(staged, ("kota",), [])
    assert publish(staged, tmp_path / "x.csv", "2026-11-02") == tmp_path / "x.csv"
    assert (tmp_path / "x.csv").read_bytes() == b"kota\n" and not staged.exists()
