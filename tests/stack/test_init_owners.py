"""airflow-init's folders (stack/init.py `prepare_folders`), run as root as the service is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stack.init import prepare_folders

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="airflow-init changes owners as root")

UID = 50000  # the compose file's default AIRFLOW_UID


def env_for(data: Path, tmp_path: Path) -> dict[str, str]:
    return {"TOKOKITA_RAW_DIR": str(data / "raw"), "TOKOKITA_GOLD_DIR": str(data / "gold"),
            "TOKOKITA_QUARANTINE_DIR": str(data / "quarantine"),
            "TOKOKITA_STATE_DIR": str(data / "state"), "TOKOKITA_STAGING_DIR": str(data / "staging"),
            "TOKOKITA_WORK_DIR": str(data / "work"),
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(tmp_path / "logs"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "auth" / "p.json")}


def owner(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid


def test_init_never_changes_the_owner_of_the_hosts_files(tmp_path, capsys):
    """Regression: with the default AIRFLOW_UID, airflow-init handed the whole mounted ./data
    tree to 50000:0, the tracked sample partitions included."""
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    sample = data / "raw" / "pesanan_2026-11-02.csv"
    sample.write_text("order_id\n")
    (data / "gold").mkdir()
    earlier = data / "gold" / "summary_harian_2026-11-01.csv"  # a colleague's output
    earlier.write_text("x\n")
    os.chown(earlier, 1234, 1234)
    (tmp_path / "logs").mkdir()  # a fresh named volume: empty, root's
    before = {p: owner(p) for p in (data, data / "raw", sample, data / "gold", earlier)}

    prepare_folders(env_for(data, tmp_path), UID)

    assert {p: owner(p) for p in before} == before
    for created in ("quarantine", "state", "staging", "work"):
        assert owner(data / created) == (UID, 0), created
    assert owner(tmp_path / "logs") == (UID, 0)  # empty: given to the services
    assert owner(tmp_path / "auth") == (UID, 0)
    out = capsys.readouterr().out
    # data/raw (root's, 0755) is read-only for uid 50000, and data/gold too: named, not changed
    assert f"WARNING: {data / 'gold'} belongs to uid 0 and uid {UID} cannot write to it" in out
    assert str(sample) not in out


def test_init_run_again_changes_nothing(tmp_path):
    data = tmp_path / "data"
    env = env_for(data, tmp_path)
    prepare_folders(env, UID)
    (data / "gold" / "summary_harian_2026-11-02.csv").write_text("x\n")
    os.chown(data / "gold" / "summary_harian_2026-11-02.csv", 4321, 0)
    before = {p: owner(p) for p in data.rglob("*")}
    prepare_folders(env, 1000)  # another AIRFLOW_UID later: the existing folders stay as they are
    assert {p: owner(p) for p in before} == before
