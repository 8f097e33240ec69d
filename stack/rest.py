"""A small client of Airflow 3's public REST API (`/api/v2`), logged in with a real password."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

TERMINAL = ("success", "failed")


class ApiError(RuntimeError):
    """An unexpected REST answer."""


class AirflowApi:
    """Log in with username and password (`POST /auth/token`), then call `/api/v2`."""

    def __init__(self, base_url: str, username: str, password: str, timeout: float = 30) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.client = httpx.Client(base_url=self.base_url, timeout=timeout)
        self.token: str | None = None

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()

    def login(self) -> str:
        """Get a JWT for username/password (raises ApiError when refused)."""
        response = self.client.post("/auth/token",
                                    json={"username": self.username, "password": self.password})
        if response.status_code not in (200, 201):
            raise ApiError(f"login as {self.username!r} refused: {response.status_code} "
                           f"{response.text[:300]}")
        self.token = response.json()["access_token"]
        return self.token

    def request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,),
                **kwargs: Any) -> Any:
        """An authenticated call; logs in again once if the token expired."""
        if self.token is None:
            self.login()
        for attempt in (1, 2):
            response = self.client.request(method, f"/api/v2{path}", headers={
                "Authorization": f"Bearer {self.token}"}, **kwargs)
            if response.status_code == 401 and attempt == 1:
                self.login()
                continue
            break
        if response.status_code not in expect:
            raise ApiError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        """GET with query parameters."""
        return self.request("GET", path, params=params)

    # -- DAGs and runs --------------------------------------------------------------------

    def dag(self, dag_id: str) -> dict[str, Any]:
        """The DAG's details (404 raises)."""
        return self.get(f"/dags/{dag_id}")

    def set_paused(self, dag_id: str, paused: bool) -> dict[str, Any]:
        """Pause or unpause the DAG."""
        return self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})

    def wait_dag(self, dag_id: str, timeout: float = 120) -> dict[str, Any]:
        """Wait until the dag-processor has parsed the DAG."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.dag(dag_id)
            except ApiError as exc:
                if "404" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(1)

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, *,
                partition_key: str | None = None) -> dict[str, Any]:
        """Trigger a run without a logical date; `partition_key` names the date it processes
        (None: yesterday in the pipeline's zone)."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}}
        if partition_key is not None:
            body["partition_key"] = partition_key
        return self.request("POST", f"/dags/{dag_id}/dagRuns", expect=(200,), json=body)

    def create_connection(self, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /connections`: an Airflow connection (`connection_id`, `conn_type`, ...)."""
        return self.request("POST", "/connections", json=body, expect=(200, 201))

    def patch_connection(self, conn_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """`PATCH /connections/{id}`: replace the connection's fields with `body`'s."""
        return self.request("PATCH", f"/connections/{conn_id}",
                            json={"connection_id": conn_id, **body})

    def dag_runs(self, dag_id: str, **params: Any) -> list[dict[str, Any]]:
        """All runs of the DAG (paged), filtered by the API's query parameters."""
        runs: list[dict[str, Any]] = []
        while True:
            page = self.get(f"/dags/{dag_id}/dagRuns", limit=100, offset=len(runs),
                            order_by="run_after", **params)
            runs.extend(page["dag_runs"])
            if len(runs) >= page["total_entries"] or not page["dag_runs"]:
                return runs

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """One run."""
        return self.get(f"/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's task instances by task id."""
        page = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", limit=100)
        return {ti["task_id"]: ti for ti in page["task_instances"]}

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        """Every try of one task instance (the current one included)."""
        page = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries")
        return page["task_instances"]

    def clear_task_instances(self, dag_id: str, run_id: str, task_ids: list[str], *,
                             only_failed: bool = True, downstream: bool = True) -> Any:
        """Clear task instances of a run so they run again (the UI's Clear)."""
        return self.request("POST", f"/dags/{dag_id}/clearTaskInstances", json={
            "dry_run": False, "dag_run_id": run_id, "task_ids": task_ids,
            "only_failed": only_failed, "include_downstream": downstream,
            "include_upstream": False, "reset_dag_runs": True})

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 180,
                 poll: float = 1.0) -> dict[str, Any]:
        """Wait until a run is finished (success or failed)."""
        return wait_for(lambda: _finished(self.dag_run(dag_id, run_id)), timeout, poll,
                        f"run {run_id} of {dag_id} to finish")


def _finished(run: dict[str, Any]) -> dict[str, Any] | None:
    return run if run["state"] in TERMINAL else None


def wait_for(probe: Callable[[], Any], timeout: float, poll: float, what: str) -> Any:
    """Call `probe` until it returns something truthy; TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(poll)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
