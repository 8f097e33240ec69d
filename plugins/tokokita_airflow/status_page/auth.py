"""Who may read and who may act (Airflow's auth manager), and the form token of the actions."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request, Response

PREFIX = "/tokokita"
CSRF_COOKIE = "tokokita_csrf"


# -- who may read, who may act: Airflow's auth manager ----------------------------------

async def _user(request: Request) -> Any:
    """The signed-in user, as Airflow's API finds it: the Authorization header, else the UI's
    `_token` cookie (401 without either)."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def requested_pipeline(request: Request, user: Annotated[Any, Depends(_user)]) -> Any:
    """The pipeline a request of a signed-in `user` is about: its `pipeline` query parameter
    (default: the default pipeline); 404 naming the known ones for another name (after the
    login: no name is told to a request without one)."""
    from tokokita_airflow.runtime import every_pipeline
    from tokokita_etl.pipelines import DEFAULT

    known = every_pipeline()
    name = request.query_params.get("pipeline") or DEFAULT
    if name not in known:
        raise HTTPException(404, f"Unknown pipeline {name!r}; pipelines: "
                                 f"{', '.join(sorted(known))}")
    return known[name]


def _access(method: str):
    """Dependency: Airflow's own check of `method` on the runs of the requested pipeline's
    DAG (403 when refused)."""

    # the pipeline as a dependency: FastAPI resolves it once per request, for this check and
    # for the route that takes it too
    def check(request: Request, user: Annotated[Any, Depends(_user)],
              pipeline: Annotated[Any, Depends(requested_pipeline)]) -> None:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag

        requires_access_dag(method, DagAccessEntity.RUN, param_dag_id=pipeline.dag_id)(
            request, user)

    return Depends(check)


UserDep = Annotated[Any, Depends(_user)]
PipelineDep = Annotated[Any, Depends(requested_pipeline)]
CAN_READ, CAN_ACT = _access("GET"), _access("POST")


def _authorized(method: str, dag_id: str, user: Any) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )

    return get_auth_manager().is_authorized_dag(
        method=method, access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id),
        user=user)


def may_act(user: Any, dag_id: str) -> bool:
    """Whether `user` may trigger the runs of `dag_id` (the page then shows the actions)."""
    return _authorized("POST", dag_id, user)


def readable(user: Any) -> list[Any]:
    """The pipelines whose DAG's runs `user` may read (the page's tabs), in the registry's
    order."""
    from tokokita_airflow.runtime import every_pipeline

    return [p for p in every_pipeline().values() if _authorized("GET", p.dag_id, user)]


def login_url(request: Request) -> str:
    """Airflow's login page, coming back to this request's page."""
    from airflow.api_fastapi.app import get_auth_manager

    target = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
    return get_auth_manager().get_url_login(next_url=target)


# -- cross-site request protection ------------------------------------------------------

def _secret() -> bytes:
    from airflow.configuration import conf

    key = conf.get("api", "secret_key", fallback="") or \
        conf.get("api_auth", "jwt_secret", fallback="")
    return key.encode() or _FALLBACK_SECRET


_FALLBACK_SECRET = secrets.token_bytes(32)


def csrf_token(nonce: str, username: str) -> str:
    """The form token of `username` in the browser session that holds `nonce`."""
    return hmac.new(_secret(), f"{nonce}\n{username}".encode(), hashlib.sha256).hexdigest()


def nonce(request: Request) -> str:
    """The browser session's nonce (its cookie), or a new one."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)


def set_nonce(response: Response, value: str) -> None:
    response.set_cookie(CSRF_COOKIE, value, path=PREFIX, httponly=True, samesite="strict")


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


def check_post(request: Request, user: Any, token: str) -> None:
    """403 unless the POST comes from this server with the session's form token."""
    if not _same_origin(request):
        raise HTTPException(403, "Cross-site request refused: the Origin is not this server")
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not hmac.compare_digest(token, csrf_token(cookie, user.get_name())):
        raise HTTPException(403, "Missing or invalid form token: open the status page again")
