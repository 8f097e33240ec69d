"""airflow-init (stack/init.py): its folders (`prepare_folders`), run as root as the service
is, and its refusal of a warehouse the watermark does not describe (`check_warehouse`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stack.init import check_warehouse, main, prepare_folders
from tests.conftest import SAMPLE_DATES, Workspace, run_cli
from tests.db.conftest import (  # noqa: F401 (fixtures)
    backend,
    lose_warehouse,
    pg_url,
    warehouse_tables,
    workspace,
)

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="airflow-init changes owners as root")

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


@AS_ROOT
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


@AS_ROOT
def test_init_run_again_changes_nothing(tmp_path):
    data = tmp_path / "data"
    env = env_for(data, tmp_path)
    prepare_folders(env, UID)
    (data / "gold" / "summary_harian_2026-11-02.csv").write_text("x\n")
    os.chown(data / "gold" / "summary_harian_2026-11-02.csv", 4321, 0)
    before = {p: owner(p) for p in data.rglob("*")}
    prepare_folders(env, 1000)  # another AIRFLOW_UID later: the existing folders stay as they are
    assert {p: owner(p) for p in before} == before


def test_init_refuses_a_lost_warehouse_in_one_line_and_creates_nothing(
        workspace, tmp_path):  # noqa: F811 (the imported fixture)
    """Bug: over a moved-away warehouse file, `make up`'s airflow-init created an empty
    warehouse with a new identity, printed the sample dates as done, and the next run was
    refused as "another warehouse" (the one airflow-init had just made)."""
    ws: Workspace = workspace
    ws.copy_samples(SAMPLE_DATES[0])
    out = run_cli(["run", "--date", SAMPLE_DATES[0].isoformat()], cwd=ws.root, env=ws.env())
    assert out.returncode == 0, out.stdout + out.stderr
    wanted = json.loads(ws.state_file.read_text())["runs"][SAMPLE_DATES[0].isoformat()]
    lose_warehouse(ws.warehouse_url)
    state = ws.state_file.read_bytes()
    home, logs = tmp_path / "airflow_home", tmp_path / "logs"
    env = {**ws.env(), "PATH": os.environ["PATH"], "AIRFLOW_HOME": str(home),
           "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(logs),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "auth" / "p")}

    with pytest.raises(SystemExit) as refused:
        main(env)
    message = str(refused.value.code)
    assert "\n" not in message
    assert message.startswith("[airflow-init] error: warehouse ")
    assert "it is missing or empty" in message and wanted["warehouse"]["id"] in message
    assert "`tokokita-etl state reconcile`" in message
    assert warehouse_tables(ws.warehouse_url) == []
    assert not home.exists() and not logs.exists()  # no step ran before the refusal
    assert ws.state_file.read_bytes() == state

    out = run_cli(["state", "reconcile"], cwd=ws.root, env=ws.env())
    assert out.returncode == 0, out.stderr
    check_warehouse(env)  # the reconciled warehouse is the watermark's: accepted


def test_make_ups_table_shows_every_date_refused_while_the_warehouse_is_refused(
        workspace, tmp_path):  # noqa: F811 (the imported fixture)
    """Bug: over a moved-away warehouse, `make up` printed the sample dates as done while
    every run of them was refused."""
    from stack.connections import pipeline_settings
    from stack.demo import status_table
    from stack.init import warehouse_refusal

    ws: Workspace = workspace
    d02, d03, _ = SAMPLE_DATES
    ws.copy_samples(d02)
    assert run_cli(["run", "--date", d02.isoformat()], cwd=ws.root, env=ws.env()).returncode == 0
    env = {**ws.env(), "PATH": os.environ["PATH"]}
    settings = pipeline_settings(env, cwd=ws.root)
    assert warehouse_refusal(env) is None
    accepted = status_table(settings, [d02, d03]).splitlines()
    assert accepted[1].split()[:2] == [d02.isoformat(), "done"]

    lose_warehouse(ws.warehouse_url)
    refusal = warehouse_refusal(env)
    assert refusal is not None and "`tokokita-etl state reconcile`" in refusal
    lines = status_table(settings, [d02, d03], refusal).splitlines()
    assert [line.split()[:2] for line in lines[1:3]] == [[d02.isoformat(), "refused"],
                                                         [d03.isoformat(), "refused"]]
    assert not any("done" in line for line in lines[1:3])
    assert lines[-1] == f"refused: {refusal}"
