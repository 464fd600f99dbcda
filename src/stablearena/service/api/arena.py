"""The battles the arena holds itself (docs/guides/arena-page.md): the voting page ``/arena``
and its calls, and the admin's routes for models' endpoints and held battles.

Page routes: ``GET /arena`` (the page; a new visitor gets an identity cookie unless the arena
is invite-only), ``POST /arena/login`` (sign in with an annotator key), ``POST /arena/logout``
(sign out), ``GET /arena/arena.js``
(the page's script: the Content-Security-Policy lets only scripts of this site run),
``GET /arena/vendor/…`` (the vendored Markdown, sanitiser, highlighting and math libraries),
``GET /arena/prompt`` (one from the pool), ``POST /arena/battles`` (a pair by the serving rule;
both answers stream back as NDJSON lines ``{"side": "a"|"b", "delta": …}`` between a first line
``{"battle_id": …}`` and a last ``{"done": true, "status": …}``; a side waiting for its model's
free call slot gets ``{"side", "state": "queued", "position", "wait", "text"}`` lines, then
``{"side", "state": "answering"}``; 503 ``busy`` with ``Retry-After`` when the models' lines are
longer than ``arena_page.max_queue_wait``), ``POST
/arena/battles/{id}/turns`` (a follow-up prompt: streamed alike, each model given the whole
conversation with its own answers), ``POST /arena/battles/{id}/regenerate`` (both answers of
the last turn sampled again; the old ones kept), ``POST /arena/battles/{id}/stop`` (cancels
both calls; a stopped battle is never votable), ``POST /arena/battles/abandon`` (every battle
of the identity without a vote that its cap counts: abandoned, never votable) and ``POST
/arena/battles/{id}/vote`` (refused
until both answers are complete; closes the battle; answers with the names); ``POST
/arena/terms`` (accept the terms of use). The page's other modes (docs/guides/arena-page.md,
"Modes"): ``POST /arena/battles`` with ``models`` (a side-by-side battle of two models picked by
name: never on the default board), ``POST /arena/chats`` and ``POST /arena/chats/{id}/turns``
(a direct chat with one model: never a battle), ``POST /arena/battles/{id}/share`` (a voted
battle's share link) and ``GET /share/{token}`` / ``GET /share/{token}.json`` (its read-only
view, public, nothing of the voter). Every prompt — the first of a battle and every
follow-up — passes :func:`admit_prompt` (terms accepted, length,
moderation: service/duties.py) before any model sees it.
Posts need the identity's CSRF token in ``X-CSRF-Token`` and must come from this site.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import time
from functools import lru_cache, partial
from importlib import resources
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.exc import IntegrityError

from ...data.names import clean_name, name_forms
from ...errors import InputError
from ...judging.endpoints.client import prompt_problem
from ...judging.endpoints.config import endpoint_from_mapping
from .. import store
from ..deps import Admin, arena, reload, write
from ..duties import Duties, duties_summary
from ..errors import ApiError
from ..holder import BattleHolder, endpoint_json
from ..render import environment, version_text
from ..security import Principal, split_key, verify
from ..visitors import COOKIE, Visit, Visitors
from .admin import path_model
from .dashboard import _same_origin

__all__ = ["router", "CSP", "admit_prompt"]

router = APIRouter()

#: The page's policy: its own script file, inline styles, requests to this site only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_OUTCOMES = {name: k for k, name in enumerate(store.OUTCOMES)}


class ArenaBattle(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1)
    prompt_id: str | None = Field(None, max_length=200)
    #: a side-by-side battle: the two models the visitor picked by name (model A, model B);
    #: absent, an anonymous battle drawn by the serving rule
    models: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, min_length=2, max_length=2
    )
    #: an attached image, as a data: URL (checked by service/images.py: type by its bytes,
    #: size, pixels; re-encoded without metadata); the request body may be larger by it
    image: str | None = None

    @field_validator("prompt", "prompt_id")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        problem = None if v is None or v == "" else prompt_problem(v)
        if problem:
            raise ValueError(f"the text {problem}")
        return v


class ArenaTurn(BaseModel):
    """A follow-up prompt in a battle (checked as a first prompt is)."""

    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1)

    @field_validator("prompt")
    @classmethod
    def _text(cls, v: str) -> str:
        problem = prompt_problem(v)
        if problem:
            raise ValueError(f"the text {problem}")
        return v


class ArenaChat(ArenaTurn):
    """The first prompt of a direct chat with one model picked by name (the prompt checked as
    a follow-up's)."""

    model: str = Field(min_length=1, max_length=200)


class ArenaVote(BaseModel):
    model_config = ConfigDict(extra="forbid")
    outcome: Literal["model_a", "model_b", "tie", "both_bad"]


# ---------------------------------------------------------------------------------- helpers
def _holder(request: Request) -> BattleHolder:
    return request.app.state.holder


def _visitors(request: Request) -> Visitors:
    v = getattr(request.app.state, "visitors", None)
    if v is None:
        v = request.app.state.visitors = Visitors(
            arena(request),
            request.app.state.settings.arena_page,
            getattr(request.app.state, "limits_fd", None),
            getattr(request.app.state, "buckets", None),
        )
    return v


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _who(request: Request) -> Visit | None:
    v, cookie = _visitors(request), request.cookies.get(COOKIE)
    if v.needs_database(cookie):
        return await asyncio.to_thread(v.visit, cookie)
    return v.visit(cookie)  # a known identity: an HMAC and a dict lookup, no thread hop


async def _poster(request: Request, create: bool = False) -> Principal:
    """The identity of a post from the page (403 without a valid identity and CSRF token); a
    visitor's row is made (``create``: a battle) or read when this worker does not know it."""
    visit = await _who(request)
    if visit is None:
        raise ApiError(
            403, "forbidden", "no arena identity (or its key was revoked); open /arena", "cookie"
        )
    v = _visitors(request)
    token = request.headers.get("x-csrf-token", "")
    if not _same_origin(request) or not hmac.compare_digest(
        token.encode("utf-8", "surrogateescape"), v.csrf(visit.ident).encode()
    ):
        raise ApiError(403, "forbidden", "this request must come from the arena page", "csrf")
    who = visit.who if visit.who.id else await asyncio.to_thread(v.stored, visit, create)
    if who is None:
        raise ApiError(403, "forbidden", "no battle was served to this identity", "battle_id")
    return who


def _cookie_scope(request: Request) -> dict[str, Any]:
    """Where the identity cookie lives and who may read it (set and cleared alike)."""
    return {
        "path": "/arena",
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
    }


def _set_cookie(request: Request, resp: Response, ident: int | str) -> None:
    value, age = _visitors(request).cookie(ident)
    resp.set_cookie(COOKIE, value, max_age=age, **_cookie_scope(request))


@lru_cache(maxsize=1)
def _script() -> bytes:
    return resources.files("stablearena.service").joinpath("templates/arena.js").read_bytes()


def _duties(request: Request) -> Duties:
    return request.app.state.duties


async def _accepted(request: Request, who: Principal | None) -> bool:
    """Whether ``who`` accepted the current terms of use (True when there are none)."""
    d = _duties(request)
    if d.version is None:
        return True
    if who is None or not who.id:  # a visitor not stored yet has accepted nothing
        return False
    if who.id in d.accepted:
        return True
    at = await asyncio.to_thread(
        store.held.terms_accepted, arena(request).engine, who.id, d.version
    )
    if at is not None:
        d.remember(who.id)
    return at is not None


async def admit_prompt(
    request: Request, who: Principal, prompt: str, image: str | None = None
) -> None:
    """The one gate of every prompt a page identity sends to the models (a battle's first
    prompt, and any later one): the terms of use accepted (403 ``terms_not_accepted``), the
    length, then the [moderation] step (422 ``moderated``; 503 ``moderation_unavailable`` when
    its endpoint fails closed) — before any model sees the prompt and before it is stored; a
    refusal is counted (without the text). ``image``: a vision battle's cleaned image (a data:
    URL), moderated with the prompt (:meth:`~..duties.Moderator.check`)."""
    if not await _accepted(request, who):
        raise ApiError(
            403,
            "terms_not_accepted",
            "accept the arena's terms of use first (the button on /arena, or POST "
            "/arena/terms with their version)",
            "terms",
        )
    page = request.app.state.settings.arena_page
    if len(prompt) > page.max_prompt_chars:
        raise ApiError(
            422,
            "invalid_input",
            f"the prompt is {len(prompt)} characters, more than arena_page.max_prompt_chars = "
            f"{page.max_prompt_chars}; shorten it",
            "prompt",
        )
    d = _duties(request)
    if not d.moderator.on:
        return
    verdict = await d.moderator.check(prompt, image)
    if verdict.source == "clean":
        return
    await write(
        request,
        partial(
            store.held.record_moderation,
            at=time.time(),
            source=verdict.source,
            reasons=",".join(verdict.reasons),
            annotator_id=who.id or None,
        ),
    )
    if verdict.source == "unavailable":
        raise ApiError(
            503,
            "moderation_unavailable",
            "the arena's moderation cannot check prompts right now, so none is sent to the "
            "models; try again in a minute",
            "prompt",
        )
    if verdict.refused:
        raise ApiError(422, "moderated", d.moderation.message, "prompt")


def _page(
    request: Request,
    visit: Visit | None,
    error: str | None = None,
    accepted: bool = True,
    vision: bool = False,
) -> str:
    page = request.app.state.settings.arena_page
    d = _duties(request)
    return (
        environment()
        .get_template("arena.html.j2")
        .render(
            version=version_text(),
            who=visit.who if visit else None,
            csrf=_visitors(request).csrf(visit.ident) if visit else "",
            invite_only=page.invite_only,
            pool=bool(_holder(request).pool),
            models=sorted(_holder(request).servable()),
            max_chars=page.max_prompt_chars,
            error=error,
            terms=d.terms if visit else None,
            terms_version=d.version,
            accepted=accepted,
            vision=vision,
            max_image_bytes=page.max_image_bytes,
        )
    )


def _html(text: str, status: int = 200) -> Response:
    return Response(text, status, headers=_HEADERS, media_type="text/html; charset=utf-8")


# ---------------------------------------------------------------------------------- page
@router.get("/arena", include_in_schema=False)
async def arena_page(request: Request) -> Response:
    """The voting page."""
    visit = await _who(request)
    page = request.app.state.settings.arena_page
    await _holder(request).refresh()  # the models the visitor may pick by name
    new = None
    if visit is None and not page.invite_only:  # a cookie, no row: made on the first battle
        new = await asyncio.to_thread(_visitors(request).new_visitor, _address(request))
        visit = _visitors(request).visit(_visitors(request).cookie(new)[0])
    who = visit.who if visit else None
    if visit is not None and new is None and not visit.who.id and _duties(request).version:
        # a visitor stored by another worker (this one does not know its number yet)
        who = await asyncio.to_thread(_visitors(request).stored, visit, False)
    accepted = await _accepted(request, who)
    holder = _holder(request)
    await holder.refresh()
    vision = len(holder.servable(vision=True)) >= 2  # the attach control: images can be served
    resp = _html(_page(request, visit, accepted=accepted, vision=vision))
    if new is not None:
        _set_cookie(request, resp, new)
    return resp


@lru_cache(maxsize=1)
def _script_gzip() -> bytes:
    import gzip

    return gzip.compress(_script(), compresslevel=9, mtime=0)


@router.get("/arena/arena.js", include_in_schema=False)
async def arena_script(request: Request) -> Response:
    headers = {
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Vary": "Accept-Encoding",
    }
    body = _script()
    if "gzip" in request.headers.get("accept-encoding", ""):
        body, headers["Content-Encoding"] = _script_gzip(), "gzip"
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)


#: The page's vendored browser libraries (static/vendor/<lib>-<version>/, docs/guides/arena-page.md):
#: the version is in the path, so a file never changes under its address and is cached for a year.
_VENDOR_TYPES = {".js": "text/javascript; charset=utf-8", "": "text/plain; charset=utf-8"}


@lru_cache(maxsize=1)
def _vendor_files() -> dict[str, tuple[bytes, bytes, str]]:
    """Every vendored file by its path under static/vendor: (bytes, gzip bytes, media type)."""
    import gzip

    found: dict[str, tuple[bytes, bytes, str]] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, prefix + child.name + "/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[1] if "." in child.name else ""
            if suffix in _VENDOR_TYPES:
                data = child.read_bytes()
                found[prefix + child.name] = (
                    data,
                    gzip.compress(data, compresslevel=9, mtime=0),
                    _VENDOR_TYPES[suffix],
                )

    walk(resources.files("stablearena.service").joinpath("static/vendor"), "")
    return found


@router.get("/arena/vendor/{path:path}", include_in_schema=False)
async def arena_vendor(request: Request, path: str) -> Response:
    """A vendored library file (or its LICENSE), gzip-compressed for clients that take it."""
    file = _vendor_files().get(path)
    if file is None:
        raise ApiError(404, "not_found", f"no vendored file {path!r}", "path")
    headers = {
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Content-Type-Options": "nosniff",
        "Vary": "Accept-Encoding",
    }
    body = file[0]
    if "gzip" in request.headers.get("accept-encoding", ""):
        body, headers["Content-Encoding"] = file[1], "gzip"
    return Response(body, media_type=file[2], headers=headers)


@router.post("/arena/login", include_in_schema=False)
async def arena_login(request: Request) -> Response:
    """Sign in on the page with an annotator key (a form post)."""
    if not _same_origin(request):
        return _html(_page(request, None, "This form must be posted from this site."), 403)
    wait = await asyncio.to_thread(
        request.app.state.dashboard.login_limiter.take, f"arena-login:{_address(request)}"
    )
    if wait > 0:
        return _html(_page(request, None, f"Too many attempts; wait {wait:.0f} s."), 429)
    try:
        form = parse_qs((await request.body()).decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        return _html(_page(request, None, "The form could not be read."), 400)
    key = (form.get("key") or [""])[0].strip()
    key_id = split_key(key)
    p = await asyncio.to_thread(arena(request).principal_for, key_id) if key_id else None
    if p is None or not verify(key, p):
        return _html(_page(request, None, "Not a valid annotator key."), 401)
    resp = RedirectResponse("/arena", status_code=303)
    _set_cookie(request, resp, f"{p.id}-{p.key_id}")  # valid while this key is
    return resp


@router.post("/arena/logout", include_in_schema=False)
async def arena_logout(request: Request) -> Response:
    """Sign out on the page (a form post): the identity cookie is cleared, so the next visit of
    ``/arena`` starts a new visitor identity (or, invite-only, the sign-in form). The account and
    its votes stay; only this browser forgets it."""
    if not _same_origin(request):
        return _html(_page(request, None, "This form must be posted from this site."), 403)
    resp = RedirectResponse("/arena", status_code=303)
    resp.delete_cookie(COOKIE, **_cookie_scope(request))
    return resp


@router.get("/arena/prompt", summary="A prompt from the arena's pool")
async def arena_prompt(request: Request) -> dict[str, str]:
    if await _who(request) is None:
        raise ApiError(403, "forbidden", "no arena identity; open /arena first", "cookie")
    return _holder(request).prompt()


#: Seconds between two writes of pieces to one answer stream (the first piece goes at once):
#: 30 a second, faster than a person reads (docs/guides/arena-page.md, "Measured under load").
STREAM_FRAME = 1 / 30


def _stream(
    request: Request,
    who: Principal,
    first: dict[str, Any],
    queue: asyncio.Queue[dict[str, Any] | None],
) -> Response:
    """A turn's answers as NDJSON: ``first`` (the battle id, turn and attempt), the pieces
    (and the sides' queued states: :class:`~..holder.BattleHolder`), then ``{"done": true,
    "status", "failure"}``."""
    visitors, battle_id = _visitors(request), first.get("battle_id")  # None: a direct chat

    async def lines():  # noqa: ANN202
        yield json.dumps(first) + "\n"
        end = False
        written = None  # time.monotonic() of the last write that carried a piece
        while not end:
            # the pieces that arrived since the last write go out as one chunk (one send per
            # wake-up, not one per token: the relay's cost falls as the load rises), and pieces
            # of an answer already showing go out at most once a STREAM_FRAME (the first piece
            # and every other line at once): a person reads no faster, and a write costs the
            # worker more than the few lines it carries
            items = [await queue.get()]
            if written is not None and "delta" in items[0]:
                wait = written + STREAM_FRAME - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            while not queue.empty():
                items.append(queue.get_nowait())
            if items[-1] is None:
                items.pop()
                end = True
            for item in items:
                if item.get("done") and item.get("status") == "failed" and battle_id:
                    visitors.open.close(who.id, [battle_id])  # a failed battle holds none open
            if items:
                if any("delta" in item for item in items):
                    written = time.monotonic()
                yield "".join(json.dumps(item) + "\n" for item in items)

    return StreamingResponse(
        lines(), media_type="application/x-ndjson", headers={"Cache-Control": "no-store"}
    )


async def _image(request: Request, url: str) -> Any:
    """The attached image cleaned (:func:`~..images.clean_image`, off the event loop), or the
    refusal: 413 ``image_too_large``, 415 ``unsupported_image``, 422 ``invalid_image`` /
    ``image_too_big``; 503 ``no_vision_models`` before any work when fewer than two models
    that take images can answer."""
    from ..images import ImageRefused, clean_image

    holder = _holder(request)
    await holder.refresh()
    holder.drawable(vision=True)  # refused early: no decoding for a battle that cannot be held
    page = request.app.state.settings.arena_page
    try:
        return await asyncio.to_thread(clean_image, url, page.max_image_bytes, page.max_image_side)
    except ImageRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message, "image") from None


@router.post("/arena/battles", summary="A held battle: both answers stream back (NDJSON)")
async def arena_battle(request: Request, body: ArenaBattle) -> Response:
    who = await _poster(request, create=True)
    holder, st = _holder(request), arena(request)
    address, visitors = _address(request), _visitors(request)
    # off the event loop when the limits are rows of the database (settings ``limits``)
    check = partial(visitors.check_battle, who, address)
    caps = await asyncio.to_thread(check) if visitors.battle_check_reads(who) else check()
    image = await _image(request, body.image) if body.image else None
    await admit_prompt(request, who, body.prompt, image.url if image else None)
    picked = (body.models[0], body.models[1]) if body.models else None
    row, queue = await holder.hold(who, body.prompt, body.prompt_id, address, caps, picked, image)
    visitors.open.add(who.id, [(row["id"], time.time() + st.config.battle_ttl)])
    first = {"battle_id": row["id"], "turn": 1, "attempt": 1}
    if picked:
        first["mode"] = "named"
    return _stream(request, who, first, queue)


@router.post(
    "/arena/battles/{battle_id}/turns",
    summary="A follow-up prompt in a held battle: both answers stream back (NDJSON)",
)
async def arena_turn(request: Request, battle_id: str, body: ArenaTurn) -> Response:
    who = await _poster(request)
    await admit_prompt(request, who, body.prompt)
    turn, queue = await _holder(request).follow(who, battle_id, body.prompt)
    first = {"battle_id": battle_id, "turn": turn.turn, "attempt": turn.attempt}
    return _stream(request, who, first, queue)


@router.post(
    "/arena/battles/{battle_id}/regenerate",
    summary="Both answers of a held battle's last turn sampled again (NDJSON)",
)
async def arena_regenerate(request: Request, battle_id: str) -> Response:
    who = await _poster(request)
    turn, queue = await _holder(request).follow(who, battle_id, None)
    first = {"battle_id": battle_id, "turn": turn.turn, "attempt": turn.attempt}
    return _stream(request, who, first, queue)


@router.post("/arena/battles/{battle_id}/stop", summary="Stop a held battle (never counted)")
async def arena_stop(request: Request, battle_id: str) -> dict[str, Any]:
    who = await _poster(request)
    status = await _holder(request).stop_battle(who, battle_id)
    _visitors(request).open.close(who.id, [battle_id])
    return {"battle_id": battle_id, "status": status}


@router.post(
    "/arena/battles/abandon",
    summary="Abandon the page identity's battles without a vote (never counted)",
)
async def arena_abandon(request: Request) -> dict[str, Any]:
    who = await _poster(request)
    ids = await _holder(request).abandon_open(who)
    _visitors(request).open.close(who.id, ids)
    return {"abandoned": ids}


class TermsAcceptance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str = Field(min_length=1, max_length=64)


@router.post("/arena/terms", summary="Accept the arena's terms of use (page identity)")
async def arena_terms(request: Request, body: TermsAcceptance) -> dict[str, Any]:
    """Store that this identity accepted the terms of use of ``version`` (the page shows it),
    with the time; a visitor's row is made now if it has none."""
    d = _duties(request)
    if d.version is None:
        raise ApiError(404, "not_found", "this arena has no terms of use", "version")
    if body.version != d.version:
        raise ApiError(
            409, "conflict", "the terms changed since the page was opened; reload /arena", "version"
        )
    who = await _poster(request, create=True)
    accept = partial(
        store.held.accept_terms, annotator_id=who.id, version=d.version, now=time.time()
    )
    try:
        at = await write(request, accept)
    except IntegrityError:  # the same identity accepting on another worker at the same time
        at = await write(request, accept)  # reads the row that worker stored
    d.remember(who.id)
    return {"version": d.version, "accepted_at": at}


@router.post("/arena/battles/{battle_id}/vote", summary="Vote on a held battle from the page")
async def arena_vote(request: Request, battle_id: str, body: ArenaVote) -> dict[str, Any]:
    who = await _poster(request)
    st, visitors = arena(request), _visitors(request)
    for _ in range(8):
        revision = st.revision  # stored only if the keys are still as read now (a revocation)
        if not visitors.allowed(who):
            raise ApiError(403, "forbidden", "this annotator's key was revoked", "cookie")
        res = await request.app.state.writer.submit_async(
            partial(
                store.held.record_page_vote,
                battle_id=battle_id,
                annotator_id=who.id,
                outcome=_OUTCOMES[body.outcome],
                now=time.time(),
                correction_window=st.config.correction_window,
                revision=revision,
            )
        )
        if res.kind != "stale":
            break
        await asyncio.to_thread(st.reload_registry)
    else:
        raise ApiError(503, "busy", "the arena is changing fast; try again")
    refused = {
        "missing": (404, "not_found"),
        "forbidden": (403, "forbidden"),
        "conflict": (409, "conflict"),
        "expired": (410, "expired"),
        "incomplete": (409, "incomplete"),
        "failed": (409, "failed"),
        "ended": (409, "ended"),
    }.get(res.kind)
    if refused is not None:
        raise ApiError(refused[0], refused[1], res.message, "battle_id")
    if not res.picked:  # a pair the visitor picked was not drawn: the serving rule learns nothing
        st.after_vote(who, battle_id, res)
    _visitors(request).open.close(who.id, [battle_id])
    if res.kind == "new":  # the vote closes the battle: the judges judge its conversation
        _holder(request).after_vote(battle_id, judge=not res.picked)
    out = {
        "battle_id": battle_id,
        "outcome": store.OUTCOMES[res.outcome],
        "replayed": res.kind == "replay",
        "model_a": st.names.get(res.model_a),
        "model_b": st.names.get(res.model_b),
        "counts": res.anony is not False,
    }
    # the voter is told (issue 42): kept, but not on the default board
    if res.picked:
        out["why"] = (
            "not on the board: you picked the models, so the battle was not anonymous (a "
            "side-by-side vote is kept and exported with anony false, as FastChat does)"
        )
    elif res.anony is False:
        out["why"] = (
            "an answer named a model or its maker, so the battle was not anonymous: the vote is "
            "kept but does not count on the leaderboard (as on LMArena)"
        )
    return out


# ---------------------------------------------------------------------------------- shares
@router.post(
    "/arena/battles/{battle_id}/share",
    summary="A share link to a voted battle's read-only view (its voter only)",
)
async def arena_share(request: Request, battle_id: str) -> dict[str, str]:
    """The link (``/share/{token}``) to a read-only view of a battle the caller voted on: made
    on the first ask, the same after; 409 ``not_voted`` before the vote."""
    who = await _poster(request)
    share = partial(
        store.modes.share_battle, battle_id=battle_id, annotator_id=who.id, now=time.time()
    )
    try:
        got = await write(request, share)
    except IntegrityError:  # the same battle shared through another worker at the same time
        got = await write(request, share)  # reads the token that worker stored
    if isinstance(got, store.held.TurnRefused):
        raise ApiError(got.status, got.code, got.message, "battle_id")
    return {"url": f"/share/{got}"}


_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")
#: the shared view's headers: the page's, and no referrer (the token is the link's secret)
_SHARED = {**_HEADERS, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}


async def _shared(request: Request, token: str) -> dict[str, Any]:
    got = None
    if _TOKEN.fullmatch(token):
        got = await asyncio.to_thread(store.modes.shared_battle, arena(request).engine, token)
    if got is None:
        raise ApiError(404, "not_found", "no shared battle at this link", "token")
    return got


@router.get("/share/{token}.json", summary="A shared battle's read-only view (JSON)")
async def shared_json(request: Request, token: str) -> Response:
    """The shared battle (:func:`~.store.modes.shared_battle`): mode, model names, verdict and
    conversation — nothing of the voter. Public: anyone with the link."""
    got = await _shared(request, token)
    return Response(json.dumps(got), media_type="application/json", headers=_SHARED)


@router.get("/share/{token}", include_in_schema=False)
async def shared_page(request: Request, token: str) -> Response:
    """The shared battle as a page (no script; the answers as their Markdown source)."""
    got = await _shared(request, token)
    text = environment().get_template("shared.html.j2").render(battle=got, labels=_VERDICTS)
    return Response(text, headers=_SHARED, media_type="text/html; charset=utf-8")


_VERDICTS = {
    "model_a": "Model A was better",
    "model_b": "Model B was better",
    "tie": "A tie",
    "both_bad": "Both were bad",
}


# ---------------------------------------------------------------------------------- chats
@router.post("/arena/chats", summary="A direct chat with one model picked by name (NDJSON)")
async def arena_chat(request: Request, body: ArenaChat) -> Response:
    """The first turn of a direct chat: the answer streams back as a battle's side ``a`` does,
    after a first line ``{"chat_id", "turn", "model"}``. Never a battle, never a vote."""
    who = await _poster(request, create=True)
    await asyncio.to_thread(_visitors(request).check_rates, who, _address(request))
    await admit_prompt(request, who, body.prompt)
    chat_id, turn, queue = await _holder(request).chat(who, None, body.model, body.prompt)
    return _stream(request, who, {"chat_id": chat_id, "turn": turn, "model": body.model}, queue)


@router.post("/arena/chats/{chat_id}/turns", summary="A follow-up in a direct chat (NDJSON)")
async def arena_chat_turn(request: Request, chat_id: str, body: ArenaTurn) -> Response:
    """A follow-up prompt of a direct chat: the model is given the whole conversation."""
    who = await _poster(request)
    await admit_prompt(request, who, body.prompt)
    chat_id, turn, queue = await _holder(request).chat(who, chat_id, None, body.prompt)
    return _stream(request, who, {"chat_id": chat_id, "turn": turn}, queue)


# ---------------------------------------------------------------------------------- admin
@router.get("/v1/admin/endpoints", summary="Models with an endpoint and their state (admin)")
async def list_endpoints(request: Request, who: Admin) -> dict[str, Any]:
    holder = _holder(request)
    await holder.refresh(force=True)
    models = arena(request).models
    out = []
    for mid, ep in holder.endpoints.items():
        rec = ep.to_record()
        rec.pop("kind", None)
        m = models.get(mid)
        rec["outage"] = bool(m and m.outage)
        rec["auto_outage"] = mid in holder.auto_outage
        rec["retired"] = bool(m and m.retired)
        out.append(rec)
    return {"endpoints": out}


@router.put("/v1/admin/models/{name:path}/endpoint", summary="Set a model's endpoint (admin)")
async def put_endpoint(
    request: Request, name: str, who: Admin, body: dict[str, Any]
) -> dict[str, Any]:
    # the name as POST /v1/admin/models takes it: a stored model by any spelling of its
    # name, a new one only by a valid name (NFC, printable: stablearena.data.names)
    try:
        name = path_model(arena(request), name)
    except ApiError:
        try:
            name = clean_name(name)
        except ValueError as exc:
            raise ApiError(422, "invalid_input", f"name: {exc}", "name") from None
    said = body.get("name", name)
    if said != name and name not in (name_forms(said) if isinstance(said, str) else ()):
        raise ApiError(422, "invalid_input", "the name is the one in the path", "name")
    body = {k: v for k, v in body.items() if k != "name"}
    try:
        ep = endpoint_from_mapping({**body, "name": name}, f"model {name!r}")
    except InputError as exc:
        raise ApiError(422, "invalid_input", str(exc), None) from None
    created = await write(
        request,
        partial(store.held.set_endpoint, name=name, config=endpoint_json(ep), now=time.time()),
    )
    await reload(request)
    await _holder(request).refresh(force=True)
    rec = ep.to_record()
    rec.pop("kind", None)
    return {"created": created, "endpoint": rec}


@router.delete("/v1/admin/models/{name:path}/endpoint", summary="Remove a model's endpoint (admin)")
async def delete_endpoint(request: Request, name: str, who: Admin) -> dict[str, Any]:
    name = path_model(arena(request), name)
    mid = arena(request).model_ids[name]
    had = await write(request, partial(store.held.drop_endpoint, model_id=mid))
    await reload(request)
    await _holder(request).refresh(force=True)
    return {"name": name, "removed": had}


@router.get("/v1/admin/held", summary="The newest held battles and their state (admin)")
async def list_held(
    request: Request,
    who: Admin,
    status: Annotated[Literal["served", "complete", "failed"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 100,
) -> dict[str, Any]:
    rows = await asyncio.to_thread(store.held.held_list, arena(request).engine, status, limit)
    return {"battles": rows}


@router.get("/v1/admin/duties", summary="Moderation, terms and classifier counts (admin)")
async def duties_counts(request: Request, who: Admin) -> dict[str, Any]:
    """The [moderation] step's refusals (and prompts let through unchecked), by source and
    reason; the identities that accepted the current [terms]; this worker's
    [category_classifier] counts (asked, tagged, untagged, malformed, failed)."""
    return await asyncio.to_thread(duties_summary, request.app)
