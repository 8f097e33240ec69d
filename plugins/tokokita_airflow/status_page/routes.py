"""The routes of the status page: the page, its JSON, the confirmation step and the actions."""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any

from fastapi import FastAPI, Form, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tokokita_airflow.status_page import actions, auth, data, render
from tokokita_airflow.status_page.auth import CAN_ACT, CAN_READ, PREFIX, UserDep

app = FastAPI(title="TokoKita orders ETL status", docs_url=None, redoc_url=None,
              openapi_url=None)


@app.exception_handler(HTTPException)
async def _login_or_error(request: Request, exc: HTTPException) -> Response:
    """A browser without a login is sent to Airflow's login page; anything else gets the error."""
    route = getattr(request.scope.get("route"), "path", None)
    if exc.status_code == 401 and request.method == "GET" and route in ("/", "/confirm"):
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


def _html(request: Request, template: str, user: str, **context: Any) -> HTMLResponse:
    """`template` rendered for `user`, with the session's form nonce kept (or set) in its
    cookie and the form token (`csrf`) of that nonce."""
    nonce = auth.nonce(request)
    response = HTMLResponse(render.render(template, base=_ui_base(request), user=user,
                                          csrf=auth.csrf_token(nonce, user), **context))
    auth.set_nonce(response, nonce)
    return response


DaysQuery = Annotated[int | None, Query(ge=1, le=3660)]


@app.get("/status.json", dependencies=[CAN_READ])
def status_json(days: DaysQuery = None) -> JSONResponse:
    """Each date's state, newest first, with the DAG's runs of that date."""
    return JSONResponse(list(reversed(data.status_rows(days))))


@app.get("/", response_class=HTMLResponse, dependencies=[CAN_READ])
def status_page(request: Request, user: UserDep, days: DaysQuery = None) -> HTMLResponse:
    """The page: a strip of states, the chart, one row per date with its runs and actions."""
    rows = data.status_rows(days)
    window = f"{rows[0]['date']} .. {rows[-1]['date']}" if rows else "no dates"
    return _html(request, "page.html", title="TokoKita status", rows=rows, window=window,
                 counts=Counter(r["state"] for r in rows), chart=render.chart(rows),
                 problem=data.warehouse_problem(),
                 user=user.get_name(), may_act=auth.may_act(user))


@app.get("/confirm", response_class=HTMLResponse, dependencies=[CAN_ACT])
def confirm_page(request: Request, user: UserDep, action: str, day: str = Query(alias="date")
                 ) -> HTMLResponse:
    """The confirmation step: what will be triggered, and a form to do it."""
    body = actions.run_request(action, day)
    return _html(request, "confirm.html", title=f"{action.capitalize()} {day}", action=action,
                 day=day, user=user.get_name(), request_body=json.dumps(body))


@app.post("/actions", response_class=HTMLResponse, dependencies=[CAN_ACT])
def act(request: Request, user: UserDep, action: Annotated[str, Form()],
        day: Annotated[str, Form(alias="date")], csrf: Annotated[str, Form()] = ""
        ) -> HTMLResponse:
    """Create the run in this process as Airflow's REST trigger creates it (`actions`)."""
    auth.check_post(request, user, csrf)
    body = actions.run_request(action, day)
    run_id = actions.trigger(request, user, body)
    return HTMLResponse(render.render("created.html", title="Run created", base=_ui_base(request),
                                      user=user.get_name(), run_id=run_id,
                                      conf_json=json.dumps(body)))
