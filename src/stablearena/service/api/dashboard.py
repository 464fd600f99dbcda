"""The dashboard's pages: ``/`` (the live leaderboard), ``/dashboard/poll`` and
``/dashboard/fragment`` (its refresh), ``/admin`` with its login, logout, poll and fragment.
What they serve is kept by :class:`stablearena.service.dashboard.Dashboard` (drawn once per fit
by the render process, :mod:`stablearena.service.render`); a request never draws. Pages carry a
Content-Security-Policy that allows only their own inline script (by hash), inline styles and
``data:`` images, and requests to the same server.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from .. import store
from ..dashboard import COOKIE, Dashboard
from ..duties import duties_summary
from ..errors import RateLimited
from ..render import (
    ADMIN_POLL_SECONDS,
    PUBLIC_POLL_SECONDS,
    environment,
    script,
    script_hash,
    version_text,
)
from ..security import Principal

__all__ = ["router", "csp", "security_headers"]

router = APIRouter()


# ---------------------------------------------------------------------------------- responses
def csp() -> str:
    return (
        "default-src 'none'; "
        f"script-src {script_hash()}; "
        "style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


def security_headers(cache: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp(),
        "Cache-Control": cache,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",  # so that a form post carries its Origin
        "Vary": "Accept-Encoding, Cookie",
    }


def _html(
    request: Request,
    *,
    text: str | None = None,
    gz: bytes | None = None,
    status: int = 200,
    cache: str = "no-cache",
    extra: dict[str, str] | None = None,
) -> Response:
    """An HTML answer; stored compressed bytes are sent as they are to clients that take gzip."""
    headers = {**security_headers(cache), **(extra or {})}
    if gz is not None:
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
            return Response(gz, status, headers=headers, media_type="text/html; charset=utf-8")
        text = gzip.decompress(gz).decode("utf-8")
    return Response(text or "", status, headers=headers, media_type="text/html; charset=utf-8")


def _dash(request: Request) -> Dashboard:
    return request.app.state.dashboard


def _render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(version=version_text(), **context)


def _same_origin(request: Request) -> bool:
    """A form post from this site (browsers send Origin with every POST)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    try:
        u = urlsplit(origin)
    except ValueError:  # e.g. "http://[": not this site
        return False
    return f"{u.scheme}://{u.netloc}" == f"{request.url.scheme}://{request.url.netloc}"


def _login_page(request: Request, error: str | None = None, status: int = 200) -> Response:
    hours = _dash(request).settings.session_hours
    return _html(
        request,
        text=_render("login.html.j2", error=error, session_hours=hours, script=None),
        status=status,
        cache="no-store",
    )


async def _admin(request: Request) -> Principal | None:
    """The admin of the request's session cookie, else ``None``. An invalid cookie counts as a
    request without a valid key (the per-address limit; over it 429, without a database read)."""
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    strangers = getattr(request.app.state, "strangers", None)
    address = request.client.host if request.client else None
    if strangers is not None and address is not None:
        wait = strangers.waiting(address)
        if wait > 0:
            raise RateLimited(wait)
    who = await asyncio.to_thread(_dash(request).session_admin, token)
    if who is None and strangers is not None and address is not None:
        strangers.take(address)
    return who


# ---------------------------------------------------------------------------------- public
@router.get("/", include_in_schema=False)
async def public_page(request: Request) -> Response:
    """The live leaderboard (HTML)."""
    d = _dash(request)
    d.touch()
    view = d.view
    if view is not None:
        return _html(request, gz=view.page_gz)
    main = _render("dashboard_empty.html.j2", message=d.status())
    return _html(
        request,
        text=_render(
            "dashboard.html.j2",
            main=main,
            view_version="none",
            status=d.status(),
            every=PUBLIC_POLL_SECONDS,
            script=script(),
        ),
    )


@router.get("/dashboard/poll", summary="The dashboard's state (polled by the open page)")
async def public_poll(request: Request) -> JSONResponse:
    d = _dash(request)
    d.touch()
    return JSONResponse(d.public_state(), headers={"Cache-Control": "no-store"})


@router.get("/dashboard/fragment", include_in_schema=False)
async def public_fragment(request: Request) -> Response:
    """The content of ``/`` (for the page's refresh)."""
    d = _dash(request)
    d.touch()
    view = d.view
    if view is None:
        return _html(
            request,
            text=_render("dashboard_empty.html.j2", message=d.status()),
            extra={"X-Dashboard-Version": "none"},
        )
    return _html(request, gz=view.main_gz, extra={"X-Dashboard-Version": view.version})


# ---------------------------------------------------------------------------------- admin
@router.get("/admin/login", include_in_schema=False)
async def login_form(request: Request) -> Response:
    if await _admin(request) is not None:
        return RedirectResponse("/admin", status_code=303)
    return _login_page(request)


@router.post("/admin/login", include_in_schema=False)
async def login(request: Request) -> Response:
    """Check the posted admin key; on success a session cookie and a redirect to ``/admin``."""
    d = _dash(request)
    if not _same_origin(request):
        return _login_page(request, "This form must be posted from this site.", 403)
    client = request.client.host if request.client else "unknown"
    wait = await asyncio.to_thread(d.login_limiter.take, f"login:{client}")
    if wait > 0:
        return _login_page(request, f"Too many attempts; wait {wait:.0f} s and try again.", 429)
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return _login_page(request, "Log in with the form below.", 415)
    try:
        form = parse_qs((await request.body()).decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        return _login_page(request, "The form could not be read.", 400)
    key = (form.get("key") or [""])[0].strip()
    who = await asyncio.to_thread(d.admin_for_key, key) if key else None
    if who is None:
        return _login_page(
            request, "Not an admin key (unknown, revoked or an annotator's key).", 401
        )
    token = await d.open_session(who)
    resp = RedirectResponse("/admin", status_code=303)
    resp.set_cookie(
        COOKIE,
        token,
        max_age=int(3600 * d.settings.session_hours),
        path="/admin",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    resp.headers["Cache-Control"] = "no-store"
    return resp


@router.post("/admin/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    token = request.cookies.get(COOKIE)
    if token and _same_origin(request):
        await _dash(request).close_session(token)
    resp = RedirectResponse("/admin/login", status_code=303)
    resp.delete_cookie(COOKIE, path="/admin", httponly=True, samesite="strict")
    return resp


@router.get("/admin", include_in_schema=False)
async def admin_page(request: Request) -> Response:
    """The admin view (HTML; log in first)."""
    who = await _admin(request)
    if who is None:
        return RedirectResponse("/admin/login", status_code=303)
    d = _dash(request)
    d.touch()
    battles = await asyncio.to_thread(d.battles_total)
    flags = await asyncio.to_thread(store.held.flag_counts, d.engine)
    named = await asyncio.to_thread(store.held.non_anonymous_counts, d.engine)
    from ...judging.probes import DEFAULT_THRESHOLD, DEFAULT_Z

    probes = await asyncio.to_thread(
        store.probes.judge_status, d.engine, DEFAULT_THRESHOLD, DEFAULT_Z
    )
    duties = await asyncio.to_thread(duties_summary, request.app)
    view = d.view
    main = view.admin_html if view else _render("dashboard_empty.html.j2", message=d.status())
    text = _render(
        "admin.html.j2",
        who=who.name,
        injections=flags,
        non_anonymous=named,
        probes=probes,
        duties=duties,
        main=main,
        health=d.health(battles),
        status=d.status(),
        view_version=view.version if view else "none",
        every=ADMIN_POLL_SECONDS,
        script=script(),
    )
    return _html(request, text=text, cache="no-store")


@router.get("/admin/poll", include_in_schema=False)
async def admin_poll(request: Request) -> JSONResponse:
    """The admin view's refresh: its state and the health, rendered (log in first)."""
    if await _admin(request) is None:
        return JSONResponse(
            {
                "error": {
                    "status": 401,
                    "code": "unauthorized",
                    "message": "log in at /admin/login",
                    "field": "cookie",
                }
            },
            status_code=401,
        )
    d = _dash(request)
    d.touch()
    battles = await asyncio.to_thread(d.battles_total)
    out = d.public_state()
    out["last_render"] = None if d.last_render is None else asdict(d.last_render)
    out["health_html"] = str(
        environment().get_template("health.html.j2").module.health(d.health(battles))
    )
    return JSONResponse(out, headers={"Cache-Control": "no-store"})


@router.get("/admin/fragment", include_in_schema=False)
async def admin_fragment(request: Request) -> Response:
    if await _admin(request) is None:
        return _html(request, text="", status=401, cache="no-store")
    d = _dash(request)
    view = d.view
    if view is None:
        return _html(
            request,
            text=_render("dashboard_empty.html.j2", message=d.status()),
            cache="no-store",
            extra={"X-Dashboard-Version": "none"},
        )
    return _html(
        request, text=view.admin_html, cache="no-store", extra={"X-Dashboard-Version": view.version}
    )
