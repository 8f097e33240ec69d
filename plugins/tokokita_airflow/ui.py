"""The status page on the Airflow api-server (`/tokokita/`): each date's state, and actions.

A thin adapter: the states come from `tokokita_etl.status.date_states`; who may read and who
may act is Airflow's auth manager's answer (`requires_access_dag`, as Airflow's own API asks
it); an action creates a DAG run through Airflow's public API with the signed-in user's own
token, so Airflow checks the permission again and writes its audit log. Everything is
rendered on the server (tables and inline SVG): no script, no asset from elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import UTC, date, datetime
from html import escape
from typing import Annotated, Any
from urllib.parse import quote, urlencode, urlsplit

from fastapi import Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

DAG_ID = "tokokita_orders_daily"
PREFIX = "/tokokita"
CSRF_COOKIE = "tokokita_csrf"
#: what each action adds to the run's conf
ACTIONS = {"reprocess": {"force": True}, "unblock": {"reset_attempts": True}}
#: state -> colour (the strip, the table and the legend)
COLOURS = {"done": "#2e7d32", "due": "#1565c0", "waiting": "#64b5f6", "missing": "#9e9e9e",
           "running": "#f9a825", "failed": "#ef6c00", "blocked": "#c62828",
           "not processed": "#6d4c41"}
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
       "form-action 'self'; frame-ancestors 'self'; base-uri 'none'")

app = FastAPI(title="TokoKita orders ETL status", docs_url=None, redoc_url=None,
              openapi_url=None)


# -- who may read, who may act: Airflow's auth manager ----------------------------------

async def _user(request: Request) -> Any:
    """The signed-in user, as Airflow's API finds it: the Authorization header, else the UI's
    `_token` cookie (401 without either)."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def _access(method: str):
    """Dependency: Airflow's own check of `method` on the DAG's runs (403 when refused)."""

    def check(request: Request, user: Annotated[Any, Depends(_user)]) -> None:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag

        requires_access_dag(method, DagAccessEntity.RUN, param_dag_id=DAG_ID)(request, user)

    return Depends(check)


UserDep = Annotated[Any, Depends(_user)]
CAN_READ, CAN_ACT = _access("GET"), _access("POST")


def _may_act(user: Any) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )

    return get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=DAG_ID),
        user=user)


@app.exception_handler(HTTPException)
async def _login_or_error(request: Request, exc: HTTPException) -> Response:
    """A browser without a login is sent to Airflow's login page; anything else gets the error."""
    route = getattr(request.scope.get("route"), "path", None)
    if exc.status_code == 401 and request.method == "GET" and route in ("/", "/confirm"):
        from airflow.api_fastapi.app import get_auth_manager

        target = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(get_auth_manager().get_url_login(next_url=target),
                                status_code=303)
    return await http_exception_handler(request, exc)


@app.middleware("http")
async def _headers(request: Request, call_next):
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    return response


# -- cross-site request protection ------------------------------------------------------

def _secret() -> bytes:
    from airflow.configuration import conf

    key = conf.get("api", "secret_key", fallback="") or \
        conf.get("api_auth", "jwt_secret", fallback="")
    return key.encode() or _FALLBACK_SECRET


_FALLBACK_SECRET = secrets.token_bytes(32)


def _csrf_token(nonce: str, username: str) -> str:
    return hmac.new(_secret(), f"{nonce}\n{username}".encode(), hashlib.sha256).hexdigest()


def _nonce(request: Request) -> str:
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)


def _set_nonce(response: Response, nonce: str) -> None:
    response.set_cookie(CSRF_COOKIE, nonce, path=PREFIX, httponly=True, samesite="strict")


def _same_origin(request: Request) -> bool:
    """Whether a POST comes from this server's pages (Origin, else Referer)."""
    from airflow.configuration import conf

    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent or sent == "null":
        return False
    parts = urlsplit(sent)
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    allowed = {f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
               .lower()}
    base = conf.get("api", "base_url", fallback="") or ""
    if base:
        b = urlsplit(base)
        allowed.add(f"{b.scheme}://{b.netloc}".lower())
    return origin in allowed


def _check_post(request: Request, user: Any, token: str) -> None:
    if not _same_origin(request):
        raise HTTPException(403, "Cross-site request refused: the Origin is not this server")
    nonce = request.cookies.get(CSRF_COOKIE)
    if not nonce or not hmac.compare_digest(token, _csrf_token(nonce, user.get_name())):
        raise HTTPException(403, "Missing or invalid form token: open the status page again")


# -- data ---------------------------------------------------------------------------------

def _settings():
    from tokokita_airflow.runtime import pipeline_settings

    return pipeline_settings()


def _airflow_runs(session, settings, since: date) -> dict[str, list[dict[str, Any]]]:
    """The DAG's runs by partition date D (newest first), with their failed task if any."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    from tokokita_airflow.runtime import flag, partition_date_of
    from tokokita_etl.errors import EtlError

    runs = session.scalars(select(DagRun).where(DagRun.dag_id == DAG_ID)
                           .order_by(DagRun.run_after.desc()).limit(1000)).all()
    failed: dict[str, str] = {}
    if runs:
        rows = session.execute(
            select(TaskInstance.run_id, TaskInstance.task_id)
            .where(TaskInstance.dag_id == DAG_ID, TaskInstance.state == "failed")).all()
        for run_id, task_id in rows:
            failed.setdefault(run_id, task_id)
    by_day: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        conf = run.conf or {}
        try:
            day = partition_date_of(run, conf, settings.timezone)
        except (EtlError, ValueError):
            continue
        if day < since:
            continue
        flags = [k for k in ("force", "reset_attempts") if flag(conf.get(k))]
        by_day.setdefault(day.isoformat(), []).append({
            "run_id": run.run_id, "run_type": str(getattr(run.run_type, "value", run.run_type)),
            "state": str(getattr(run.state, "value", run.state)), "flags": flags,
            "task": failed.get(run.run_id, "check_watermark"),
            "failed": run.run_id in failed})
    return by_day


def _rows(days: int | None) -> list[dict[str, Any]]:
    from airflow.utils.session import create_session

    from tokokita_etl.errors import EtlError
    from tokokita_etl.status import date_states

    settings = _settings()
    try:
        rows = date_states(settings, datetime.now(UTC), days)
    except EtlError as exc:  # a damaged watermark: named, as the command line names it
        raise HTTPException(status_code=503, detail=str(exc)) from None
    since = date.fromisoformat(rows[0]["date"]) if rows else date.today()
    with create_session() as session:
        runs = _airflow_runs(session, settings, since)
    for row in rows:
        row["airflow_runs"] = runs.get(row["date"], [])
    return rows


# -- routes -------------------------------------------------------------------------------

DaysQuery = Annotated[int | None, Query(ge=1, le=3660)]


@app.get("/status.json", dependencies=[CAN_READ])
def status_json(days: DaysQuery = None) -> JSONResponse:
    """Each date's state, newest first, with the DAG's runs of that date."""
    return JSONResponse(list(reversed(_rows(days))))


@app.get("/", response_class=HTMLResponse, dependencies=[CAN_READ])
def status_page(request: Request, user: UserDep, days: DaysQuery = None) -> HTMLResponse:
    """The page: a strip of states, the chart, one row per date with its runs and actions."""
    rows = _rows(days)
    may_act = _may_act(user)
    nonce = _nonce(request)
    response = HTMLResponse(_page(rows, base=_ui_base(request), user=user.get_name(),
                                  may_act=may_act))
    _set_nonce(response, nonce)
    return response


@app.get("/confirm", response_class=HTMLResponse, dependencies=[CAN_ACT])
def confirm_page(request: Request, user: UserDep, action: str, day: str = Query(alias="date")
                 ) -> HTMLResponse:
    """The confirmation step: what will be triggered, and a form to do it."""
    conf = _conf(action, day)
    nonce = _nonce(request)
    verb = "Reprocess" if action == "reprocess" else "Unblock"
    what = ("reprocesses it even if it already succeeded (force)" if action == "reprocess" else
            "sets its attempts to 0 (recorded in the watermark) and runs it (reset_attempts)")
    body = (
        f"<h1>{verb} {escape(day)}?</h1>"
        f"<p>This triggers a run of <code>{DAG_ID}</code> as <b>{escape(user.get_name())}</b> "
        f"that {what}, with:</p><pre>{escape(json.dumps({'logical_date': None, 'conf': conf}))}"
        "</pre>"
        f"<form method='post' action='{PREFIX}/actions'>"
        f"<input type='hidden' name='date' value='{escape(day)}'>"
        f"<input type='hidden' name='action' value='{escape(action)}'>"
        f"<input type='hidden' name='csrf' value='{_csrf_token(nonce, user.get_name())}'>"
        f"<button type='submit' class='act' id='confirm'>{verb} {escape(day)}</button> "
        f"<a href='{PREFIX}/'>Cancel</a></form>")
    response = HTMLResponse(_document(f"{verb} {day}", body))
    _set_nonce(response, nonce)
    return response


def _conf(action: str, day: str) -> dict[str, Any]:
    if action not in ACTIONS:
        raise HTTPException(400, f"Unknown action {action!r}: reprocess or unblock")
    try:
        parsed = date.fromisoformat(day)
    except ValueError:
        raise HTTPException(400, f"Bad date {day!r}: expected YYYY-MM-DD") from None
    return {"partition_date": parsed.isoformat(), **ACTIONS[action]}


@app.post("/actions", response_class=HTMLResponse, dependencies=[CAN_ACT])
async def act(request: Request, user: UserDep, action: Annotated[str, Form()],
              day: Annotated[str, Form(alias="date")],
              csrf: Annotated[str, Form()] = "") -> HTMLResponse:
    """Trigger the run through Airflow's public API with the signed-in user's token."""
    import httpx
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    _check_post(request, user, csrf)
    conf = _conf(action, day)
    auth = request.headers.get("authorization", "")
    token = auth[7:] if auth.lower().startswith("bearer ") else \
        request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")
    url = f"{_api_origin(request)}{_outer_root(request)}/api/v2/dags/{DAG_ID}/dagRuns"
    async with httpx.AsyncClient(timeout=30, verify=False) as client:  # noqa: S501 - loopback
        answer = await client.post(url, json={"logical_date": None, "conf": conf},
                                   headers={"Authorization": f"Bearer {token}"})
    if answer.status_code != 200:
        detail = answer.json().get("detail", answer.text) if answer.content else ""
        raise HTTPException(answer.status_code if answer.status_code in (401, 403, 409) else 502,
                            f"Airflow refused the run: {detail}")
    run = answer.json()
    base = _ui_base(request)
    link = f"{base}dags/{DAG_ID}/runs/{quote(run['dag_run_id'], safe='')}"
    body = (f"<h1>Run created</h1><p>{escape(user.get_name())} triggered "
            f"<a target='_top' id='created' href='{escape(link)}'>{escape(run['dag_run_id'])}</a>"
            f" with <code>{escape(json.dumps(conf))}</code>.</p>"
            f"<p><a href='{PREFIX}/'>Back to the status page</a></p>")
    return HTMLResponse(_document("Run created", body))


def _outer_root(request: Request) -> str:
    """Where the api-server's own routes start (its root path, without this app's prefix)."""
    root = request.scope.get("root_path", "")
    return root[: -len(PREFIX)] if root.endswith(PREFIX) else root


def _api_origin(request: Request) -> str:
    """This api-server process, over loopback (the address it listens on)."""
    from airflow.configuration import conf

    scheme = "https" if conf.get("api", "ssl_cert", fallback="") else "http"
    server = request.scope.get("server")
    if server and server[1]:
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(server[0], server[0])  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{server[1]}"
    base = urlsplit(conf.get("api", "base_url", fallback="") or "http://127.0.0.1:8080")
    return f"{base.scheme}://{base.netloc}"


def _ui_base(request: Request) -> str:
    return _outer_root(request).rstrip("/") + "/"


# -- HTML ---------------------------------------------------------------------------------

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.2em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:3px 6px;
vertical-align:top}th{background:#f5f5f5;text-align:left}td.n{text-align:right;
font-variant-numeric:tabular-nums}.state{color:#fff;font-weight:600;white-space:nowrap}
.why{color:#555;max-width:28em}.err{color:#b71c1c;max-width:28em;overflow-wrap:anywhere}
.hint{margin-top:.3em;color:#222;background:#fff8e1;padding:2px 4px}code{font-size:.95em}
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;width:.9em;
height:.9em;margin-right:.3em;vertical-align:middle}button.act,a.act{background:#1565c0;
color:#fff;border:0;border-radius:3px;padding:2px 8px;text-decoration:none;font-size:.95em;
cursor:pointer;white-space:nowrap}a.act.unblock{background:#c62828}.runs a{white-space:nowrap}
svg text{font-size:10px;fill:#444}#chart text{font-size:12px}.muted{color:#777}
"""


def _document(title: str, body: str) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>{body}"
            "</body></html>")


def _float(value: Any) -> float | None:
    try:
        return None if isinstance(value, bool) or value is None else float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and _float(value) is not None:
        value = _float(value)
    if isinstance(value, int | float):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return str(value)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"


def _page(rows: list[dict[str, Any]], *, base: str, user: str, may_act: bool) -> str:
    newest = list(reversed(rows))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    summary = ", ".join(f"{n} {escape(s)}" for s, n in counts.items())
    legend = "".join(f"<span><i style='background:{c}'></i>{escape(s)}</span>"
                     for s, c in COLOURS.items())
    head = ("date", "state", "why", "attempts", "extracted", "fact", "karantina", "duplikat",
            "quarantine", "bruto", "bersih", "duration", "Airflow runs", "action")
    body = "".join(_row(r, base=base, may_act=may_act) for r in newest)
    window = f"{rows[0]['date']} .. {rows[-1]['date']}" if rows else "no dates"
    return _document("TokoKita status", (
        f"<h1>TokoKita orders: state of each date</h1>"
        f"<p class='muted'>{escape(window)}: {summary}. Signed in as {escape(user)}"
        f"{'' if may_act else ' (read only)'}. <a href='status.json'>JSON</a></p>"
        f"<h2>Dates</h2>{_strip(rows)}<div class='legend'>{legend}</div>"
        f"<h2>Daily valid rows, quarantine share and bersih</h2>{_chart(rows)}"
        f"<h2>Details</h2><table id='dates'><thead><tr>"
        + "".join(f"<th>{escape(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{body}</tbody></table>"))


def _row(r: dict[str, Any], *, base: str, may_act: bool) -> str:
    n = r["rows"] or {}
    share = r["quarantine_share"]
    why = escape(r["reason"])
    if r["unblock"]:
        why += f"<div class='hint'>To unblock: {escape(r['unblock'])}</div>"
    if r["warnings"]:
        why += "".join(f"<div class='err'>warning: {escape(w)}</div>" for w in r["warnings"])
    runs = "<br>".join(_run_link(run, base) for run in r["airflow_runs"][:4])
    if len(r["airflow_runs"]) > 4:
        runs += f"<br><span class='muted'>+{len(r['airflow_runs']) - 4} more</span>"
    action = ""
    if may_act:
        if r["state"] == "blocked":
            action = _action_link("unblock", r["date"], "Unblock")
        elif r["state"] in ("done", "failed", "due", "not processed"):
            action = _action_link("reprocess", r["date"], "Reprocess")
    cells = [
        f"<td>{escape(r['date'])}</td>",
        f"<td class='state' style='background:{COLOURS.get(r['state'], '#999')}'>"
        f"{escape(r['label'])}</td>",
        f"<td class='why'>{why}</td>",
        f"<td class='n'>{r['attempt']}/{r['max_attempts']}</td>",
        *(f"<td class='n'>{_fmt(n.get(k))}</td>" for k in
          ("extracted", "fact", "karantina", "duplikat")),
        f"<td class='n'>{'' if share is None else f'{share:.1%}'}</td>",
        f"<td class='n'>{_fmt(r['bruto'])}</td>", f"<td class='n'>{_fmt(r['bersih'])}</td>",
        f"<td class='n'>{_seconds(r['duration_s'])}</td>",
        f"<td class='runs'>{runs}</td>", f"<td>{action}</td>",
    ]
    return (f"<tr id='d-{escape(r['date'])}' data-state='{escape(r['state'])}'>"
            + "".join(cells) + "</tr>")


def _run_link(run: dict[str, Any], base: str) -> str:
    rid = quote(run["run_id"], safe="")
    grid = f"{base}dags/{DAG_ID}/runs/{rid}"
    log = f"{grid}/tasks/{quote(run['task'], safe='')}"
    flags = f" {'+'.join(run['flags'])}" if run["flags"] else ""
    return (f"<a target='_top' href='{escape(grid)}' title='{escape(run['run_id'])}'>"
            f"{escape(run['run_type'])}{escape(flags)}: {escape(run['state'])}</a> "
            f"(<a target='_top' href='{escape(log)}'>log {escape(run['task'])}</a>)")


def _action_link(action: str, day: str, label: str) -> str:
    query = urlencode({"action": action, "date": day})
    return (f"<a class='act {action}' id='{action}-{escape(day)}' "
            f"href='{PREFIX}/confirm?{escape(query)}'>{label}</a>")


def _strip(rows: list[dict[str, Any]]) -> str:
    """One coloured square per date, oldest left; the tooltip says the date and why."""
    if not rows:
        return "<p class='muted'>No dates.</p>"
    size, gap = 18, 3
    width = len(rows) * (size + gap) + 40
    cells = []
    for i, r in enumerate(rows):
        x = 20 + i * (size + gap)
        cells.append(
            f"<a href='#d-{escape(r['date'])}'><rect x='{x}' y='4' width='{size}' "
            f"height='{size}' rx='2' fill='{COLOURS.get(r['state'], '#999')}' "
            f"data-state='{escape(r['state'])}'><title>{escape(r['date'])}: "
            f"{escape(r['label'])}: {escape(r['reason'])}</title></rect></a>")
        if i == 0 or i == len(rows) - 1 or r["date"].endswith("-01"):
            cells.append(f"<text x='{x}' y='{size + 16}'>{escape(r['date'][5:])}</text>")
    return (f"<svg id='strip' role='img' aria-label='state of each date' width='{width}' "
            f"height='{size + 22}' xmlns='http://www.w3.org/2000/svg'>{''.join(cells)}</svg>")


#: chart text size (px, as the page's CSS sets it) and a generous average glyph width at it,
#: to make room for labels and legend lines
CHART_FONT_PX = 12
CHART_GLYPH_PX = 7.2


def _text_width(text: str) -> float:
    return len(text) * CHART_GLYPH_PX


def _chart(rows: list[dict[str, Any]]) -> str:
    """Bars: valid (fact) rows per date; lines: quarantine share (0-100 %, right axis) and
    bersih (scaled to its maximum); under them a legend, one line per series, with its
    swatch. The SVG is as wide and tall as its labels and legend need."""
    if not rows:
        return ""
    facts = [(r["rows"] or {}).get("fact") for r in rows]
    bersih = [_float(r["bersih"]) for r in rows]
    top_fact = max([f for f in facts if isinstance(f, int | float)] or [1]) or 1
    top_bersih = max([b for b in bersih if b is not None] or [1]) or 1
    left = max(60, round(_text_width(_fmt(top_fact)) + 10))
    top, plot_w, plot_h = 10, max(len(rows) * 21, 300), 160
    step = plot_w / len(rows)
    parts = [f"<line x1='{left}' y1='{top + plot_h}' x2='{left + plot_w}' y2='{top + plot_h}' "
             "stroke='#999'/>",
             f"<text x='{left - 4}' y='{top + 8}' text-anchor='end'>{_fmt(top_fact)}</text>",
             f"<text x='{left - 4}' y='{top + plot_h}' text-anchor='end'>0</text>",
             f"<text x='{left + plot_w + 4}' y='{top + 8}'>100%</text>",
             f"<text x='{left + plot_w + 4}' y='{top + plot_h}'>0%</text>"]
    # the first and last date, and each first of a month at least two bars from them
    last = len(rows) - 1
    labelled = {0, last} | {i for i, r in enumerate(rows)
                            if r["date"].endswith("-01") and 2 <= i <= last - 2}
    share_pts, bersih_pts = [], []
    for i, r in enumerate(rows):
        x = left + i * step
        if isinstance(facts[i], int | float):
            h = plot_h * facts[i] / top_fact
            parts.append(f"<rect class='fact' x='{x + 2:.1f}' y='{top + plot_h - h:.1f}' "
                         f"width='{step - 4:.1f}' height='{h:.1f}' fill='#90a4ae'>"
                         f"<title>{escape(r['date'])}: {facts[i]} valid rows</title></rect>")
        cx = x + step / 2
        if r["quarantine_share"] is not None:
            share_pts.append(f"{cx:.1f},{top + plot_h * (1 - r['quarantine_share']):.1f}")
        if bersih[i] is not None:
            bersih_pts.append(f"{cx:.1f},{top + plot_h * (1 - bersih[i] / top_bersih):.1f}")
        if i in labelled:
            parts.append(f"<text x='{cx:.1f}' y='{top + plot_h + CHART_FONT_PX + 4}' "
                         f"text-anchor='middle'>{escape(r['date'][5:])}</text>")
    for cls, pts, colour in (("share", share_pts, "#c62828"), ("bersih", bersih_pts,
                                                                "#2e7d32")):
        if pts:
            parts.append(f"<polyline class='{cls}' points='{' '.join(pts)}' fill='none' "
                         f"stroke='{colour}' stroke-width='2'/>")
            parts.extend(f"<circle cx='{p.split(',')[0]}' cy='{p.split(',')[1]}' r='2.5' "
                         f"fill='{colour}'/>" for p in pts)
    keys = (("bar", "#90a4ae", f"valid rows per date (bars, left axis, max {_fmt(top_fact)})"),
            ("line", "#c62828", "quarantine share of the extracted rows (right axis)"),
            ("line", "#2e7d32", f"bersih per date (scaled to its maximum, {_fmt(top_bersih)})"))
    line_h = CHART_FONT_PX + 6
    legend_top = top + plot_h + CHART_FONT_PX + 14
    legend = ["<g class='legend'>"]
    for n, (kind, colour, label) in enumerate(keys):
        y = legend_top + n * line_h  # the line's middle
        if kind == "bar":
            legend.append(f"<rect x='{left}' y='{y - 5}' width='16' height='10' "
                          f"fill='{colour}'/>")
        else:
            legend.append(f"<line x1='{left}' y1='{y}' x2='{left + 16}' y2='{y}' "
                          f"stroke='{colour}' stroke-width='2'/><circle cx='{left + 8}' "
                          f"cy='{y}' r='2.5' fill='{colour}'/>")
        legend.append(f"<text x='{left + 22}' y='{y + CHART_FONT_PX // 3}'>{escape(label)}"
                      "</text>")
    legend.append("</g>")
    width = max(left + plot_w + 50, left + 22 + max(_text_width(k[2]) for k in keys) + 10)
    height = legend_top + len(keys) * line_h
    return (f"<svg id='chart' role='img' aria-label='daily valid rows, quarantine share and "
            f"bersih' width='{width:.0f}' height='{height}' "
            f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}{''.join(legend)}</svg>")
