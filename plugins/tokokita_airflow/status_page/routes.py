"""The routes of the status page: the page, its JSON, the confirmation step and the actions."""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Form, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tokokita_airflow.status_page import actions, auth, data, render
from tokokita_airflow.status_page.auth import CAN_ACT, CAN_READ, PREFIX, PipelineDep, UserDep

app = FastAPI(title="TokoKita orders ETL status", docs_url=None, redoc_url=None,
              openapi_url=None)


@app.exception_handler(HTTPException)
async def _login_or_error(request: Request, exc: HTTPException) -> Response:
    """A browser without a login is sent to Airflow's login page; anything else gets the error."""
    route = getattr(request.scope.get("route"), "path", None)
    if exc.status_code == 401 and request.method == "GET" and route in ("/", "/confirm",
                                                                         "/settings"):
        return RedirectResponse(auth.login_url(request), status_code=303)
    return await http_exception_handler(request, exc)


@app.middleware("http")
async def _headers(request: Request, call_next):
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = render.CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    return response


def _ui_base(request: Request) -> str:
    """Where Airflow's UI starts: the api-server's root path, without this app's prefix."""
    root = request.scope.get("root_path", "")
    return (root[: -len(PREFIX)] if root.endswith(PREFIX) else root).rstrip("/") + "/"


def _about(pipeline: Any) -> dict[str, Any]:
    """What every template says of the pipeline: its name, its DAG, and the query that keeps
    it in the page's links (none for the default pipeline: `/tokokita/` is its page)."""
    from tokokita_etl.pipelines import DEFAULT

    query = "" if pipeline.name == DEFAULT else urlencode({"pipeline": pipeline.name})
    return {"pipeline": pipeline.name, "dag_id": pipeline.dag_id, "query": query,
            "column_labels": tuple(column.label for column in pipeline.columns)}


def _html(request: Request, template: str, pipeline: Any, *, user: str, **context: Any
          ) -> HTMLResponse:
    """`template` rendered for `user` about `pipeline`, with the session's form nonce kept (or
    set) in its cookie and the form token (`csrf`) of that nonce."""
    nonce = auth.nonce(request)
    response = HTMLResponse(render.render(template, base=_ui_base(request), user=user,
                                          csrf=auth.csrf_token(nonce, user),
                                          **_about(pipeline), **context))
    auth.set_nonce(response, nonce)
    return response


DaysQuery = Annotated[int | None, Query(ge=1, le=3660)]


@app.get("/status.json", dependencies=[CAN_READ])
def status_json(pipeline: PipelineDep, days: DaysQuery = None) -> JSONResponse:
    """Each date's state, newest first, with the pipeline DAG's runs of that date."""
    return JSONResponse(list(reversed(data.status_rows(pipeline, days))))


@app.get("/", response_class=HTMLResponse, dependencies=[CAN_READ])
def status_page(request: Request, user: UserDep, pipeline: PipelineDep,
                days: DaysQuery = None) -> HTMLResponse:
    """The page of a pipeline: a tab per pipeline the user may read, a strip of states, the
    chart, one row per date with its runs and actions."""
    rows = data.status_rows(pipeline, days)
    window = f"{rows[0]['date']} .. {rows[-1]['date']}" if rows else ""
    return _html(request, "page.html", pipeline, title=f"TokoKita {pipeline.name} status",
                 rows=rows, window=window, counts=Counter(r["state"] for r in rows),
                 unit=render.unit(pipeline), chart=render.chart(rows, pipeline),
                 problem=data.warehouse_problem(pipeline),
                 tabs=[_about(p) for p in auth.readable(user)],
                 user=user.get_name(), may_act=auth.may_act(user, pipeline.dag_id))


@app.get("/settings.json", dependencies=[CAN_READ])
def settings_json(pipeline: PipelineDep) -> JSONResponse:
    """The pipeline's effective settings and their sources, as `tokokita-etl config --json`."""
    return JSONResponse(data.settings_rows(pipeline))


@app.get("/settings", response_class=HTMLResponse, dependencies=[CAN_READ])
def settings_page(request: Request, user: UserDep, pipeline: PipelineDep) -> HTMLResponse:
    """The pipeline's effective settings, where each came from, credentials masked."""
    return _html(request, "settings.html", pipeline, user=user.get_name(),
                 title=f"TokoKita {pipeline.name} settings",
                 settings=data.settings_rows(pipeline))


@app.get("/confirm", response_class=HTMLResponse, dependencies=[CAN_ACT])
def confirm_page(request: Request, user: UserDep, pipeline: PipelineDep, action: str,
                 day: str = Query(alias="date")) -> HTMLResponse:
    """The confirmation step: what will be triggered, and a form to do it."""
    body = actions.run_request(action, day)
    return _html(request, "confirm.html", pipeline, title=f"{action.capitalize()} {day}",
                 action=action, day=day, user=user.get_name(), request_body=json.dumps(body))


@app.post("/actions", response_class=HTMLResponse, dependencies=[CAN_ACT])
def act(request: Request, user: UserDep, pipeline: PipelineDep, action: Annotated[str, Form()],
        day: Annotated[str, Form(alias="date")], csrf: Annotated[str, Form()] = ""
        ) -> HTMLResponse:
    """Create the run in this process as Airflow's REST trigger creates it (`actions`)."""
    auth.check_post(request, user, csrf)
    body = actions.run_request(action, day)
    run_id = actions.trigger(request, user, pipeline.dag_id, body)
    return HTMLResponse(render.render("created.html", title="Run created", base=_ui_base(request),
                                      user=user.get_name(), run_id=run_id,
                                      conf_json=json.dumps(body), **_about(pipeline)))
