"""The command line in the project folder sees the settings of the local Airflow stack.

Regression: `make up` gives its services a catch-up window and a look-back of their own
(TOKOKITA_START_DATE, _END_DATE, _LOOKBACK_DAYS), while `tokokita-etl due` and `status` in
the same folder read only config/pipeline.yaml (look-back 7): the status page called a date
due that `tokokita-etl due` did not list.
"""

from __future__ import annotations

import shutil

from stack.demo import write_stack_settings
from stack.embedded import embedded_target
from stack.local import LocalStack
from tests.conftest import REPO, SAMPLE_RAW, run_cli

NOW = "2026-12-01T03:00"  # the sample week is 27 days old: outside the default look-back


def project(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(SAMPLE_RAW, root / "data" / "raw")
    return root


def test_due_in_the_project_folder_uses_the_stacks_lookback_and_says_so(tmp_path):
    root = project(tmp_path)
    alone = run_cli(["due", "--now", NOW, "--json"], cwd=root)
    assert (alone.returncode, alone.stdout, alone.stderr) == (0, "[]\n", "")

    services = LocalStack(embedded_target(api_port=8080, health_port=8974)).env(
        "airflow-scheduler")
    written = write_stack_settings(services, root=root)
    assert written == root / "airflow_home" / "tokokita.env"
    with_stack = run_cli(["due", "--now", NOW, "--json"], cwd=root)
    assert with_stack.returncode == 0, with_stack.stderr
    assert with_stack.stdout == '["2026-11-02", "2026-11-03", "2026-11-04"]\n'
    lookback = services["TOKOKITA_LOOKBACK_DAYS"]
    assert with_stack.stderr.startswith("[settings] as the local Airflow stack's services "
                                        "(airflow_home/tokokita.env): ")
    assert f"lookback_days={lookback}" in with_stack.stderr


def test_the_environment_and_flags_still_override_the_stacks_settings(tmp_path):
    root = project(tmp_path)
    (root / "airflow_home").mkdir()
    (root / "airflow_home" / "tokokita.env").write_text("TOKOKITA_LOOKBACK_DAYS=60\n")
    flag = run_cli(["due", "--now", NOW, "--json", "--lookback-days", "7"], cwd=root)
    assert (flag.returncode, flag.stdout) == (0, "[]\n")
    env = run_cli(["due", "--now", NOW, "--json"], cwd=root, env={"TOKOKITA_LOOKBACK_DAYS": "7"})
    assert (env.returncode, env.stdout) == (0, "[]\n")


def test_a_stack_settings_file_that_is_not_utf8_is_an_error_naming_it(tmp_path):
    """Bug: a byte that is not UTF-8 in `airflow_home/tokokita.env` ended `config`, `status`,
    `due` and `run` in a UnicodeDecodeError traceback."""
    stack_file = tmp_path / "airflow_home" / "tokokita.env"
    stack_file.parent.mkdir()
    stack_file.write_bytes(b"TOKOKITA_LOOKBACK_DAYS=3\nTOKOKITA_MAX_ATTEMPTS=\xff5\n")
    for command in (["status"], ["config"], ["due", "--now", "2026-11-05T03:00"]):
        done = run_cli(command, cwd=tmp_path, env={})
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == (f"error: {stack_file}: not valid UTF-8 at byte offset 47 "
                               "(line 2); the local stack's settings file is written in "
                               "UTF-8\n"), command


def test_every_setting_the_shell_gave_the_stack_reaches_the_command_line_in_its_folder(tmp_path):
    """Regression: `TOKOKITA_ON_RAW_CHANGE=reprocess make up` wrote only the catch-up window,
    look-back and max attempts for the command line; another shell in the project folder then
    called a changed done date `done (changed)` while the stack's sweep reprocessed it. The
    folders and YAML file the compose file always gives are the project folder's own and
    are left out."""
    import json

    root = project(tmp_path)
    services = LocalStack(embedded_target(api_port=8080, health_port=8974, env={
        "TOKOKITA_ON_RAW_CHANGE": "reprocess",
        "TOKOKITA_WEEKLY_CITY_REPORT__MAX_ATTEMPTS": "5"})).env("airflow-scheduler")
    written = write_stack_settings(services, root=root).read_text(encoding="utf-8")
    assert "TOKOKITA_ON_RAW_CHANGE=reprocess\n" in written
    assert "TOKOKITA_WEEKLY_CITY_REPORT__MAX_ATTEMPTS=5\n" in written
    assert "TOKOKITA_RAW_DIR" not in written and "TOKOKITA_CONFIG" not in written
    for pipeline, name, value, variable in (
            ("orders", "on_raw_change", "reprocess", "TOKOKITA_ON_RAW_CHANGE"),
            ("weekly_city_report", "max_attempts", "5",
             "TOKOKITA_WEEKLY_CITY_REPORT__MAX_ATTEMPTS")):
        shown = run_cli(["config", "--json", "--pipeline", pipeline], cwd=root)
        assert shown.returncode == 0, shown.stderr
        row = next(r for r in json.loads(shown.stdout) if r["setting"] == name)
        assert row == {"setting": name, "value": value,
                       "source": f"{root / 'airflow_home' / 'tokokita.env'} ({variable})"}
