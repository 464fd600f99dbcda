"""The annotators' two routes — ``POST /v1/battles`` and ``POST /v1/battles/{id}/vote`` — and
the published leaderboard (``GET /v1/leaderboard`` without a query) as plain ASGI, in front of
the FastAPI application.

They are nearly all of an arena's traffic, and FastAPI's request machinery (its middleware
stack, route matching, dependency solving, ``Request`` objects, the generic JSON encoder) cost
more CPU per request than choosing a pair and recording a vote (measured under uvicorn with
httptools: about 0.32 ms of CPU per request through a bare FastAPI route against 0.10 ms for a
bare ASGI callable). :class:`HotRoutes` answers these two routes itself and passes every other
request, and the lifespan, to the FastAPI application, whose attributes it exposes (``state``,
``routes``, ``openapi()``, …). The FastAPI routes of the same paths stay: they document the
API (``/docs``) and run the same functions (:func:`post_battles`, :func:`post_vote`) through
:func:`answer`, so a request gets the same answer on either path (tested).

The same rules hold on both paths: a body over ``max_body_bytes`` is refused with 413 before
anything else (when its Content-Length says so) or as soon as it passes the limit; then the
key (401), the rate limit (429 with ``Retry-After``), the body: the common well-formed bodies
are recognised by hand, anything else is decided by the pydantic model of the route
(``BattleRequest``, ``VoteRequest``), so a bad body is the same 422 naming the field as
before; an unexpected error is a 500 JSON error, logged, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import StableArenaError
from . import store
from .security import Principal, RateLimiter, error_body, split_key, verify
from .state import ApiError, ArenaState

__all__ = [
    "Hot",
    "HotRoutes",
    "Invalid",
    "RateLimited",
    "Reply",
    "answer",
    "invalid_message",
    "post_battles",
    "post_vote",
]

log = logging.getLogger("stablearena.service")

_BATTLE_ID = re.compile(r"^[0-9a-f]{32}$")
_JSON = b"application/json"
#: Draws of one battle request before giving up (a draw is refused only when the annotator
#: has judged its pair through another worker since this one last heard; each refusal teaches
#: this worker that pair).
_DRAWS = 8
_OUTCOME_CODE = {name: k for k, name in enumerate(store.OUTCOMES)}
_VOTE_ERRORS = {
    "missing": (404, "not_found", "battle_id"),
    "forbidden": (403, "forbidden", "battle_id"),
    "conflict": (409, "conflict", "outcome"),
    "expired": (410, "expired", "battle_id"),
}


class RateLimited(Exception):
    """Over the key's rate limit: retry after ``wait`` seconds (429)."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


class Invalid(Exception):
    """A request body its model refuses (422): pydantic-style ``errors`` with ``loc``
    starting at ``body``."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors


class TooLarge(Exception):
    """A body that passed ``max_body_bytes`` while it was read (413)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = field(default=())


def _field(loc: tuple) -> str:
    parts = [str(x) for x in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def invalid_message(errors: list[dict[str, Any]]) -> tuple[str, str]:
    """The message (up to five problems, each ``field: problem``) and the first field at fault
    of a list of pydantic-style errors (``loc`` starting with body / query / path)."""
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}

    def where(e: dict[str, Any]) -> str:
        return "body" if e.get("type") == "json_invalid" else _field(tuple(e["loc"]))

    return "; ".join(f"{where(e)}: {e['msg']}" for e in errors[:5]), where(first)


def _parse(raw: bytes, empty: bytes) -> Any:
    """The JSON of a body (``empty``: what an empty body stands for)."""
    try:
        return json.loads(raw or empty)
    except ValueError:
        raise Invalid(
            [{"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error"}]
        ) from None


def _validate(data: Any, model: type[BaseModel]) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Invalid(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from None


def battle_request(raw: bytes) -> tuple[int, list[str] | None]:
    """``k`` and ``models`` of a ``POST /v1/battles`` body (:class:`.app.BattleRequest`)."""
    from .app import BattleRequest

    data = _parse(raw, b"{}")
    if type(data) is dict and len(data) <= 2:
        k = data.get("k", 1)
        models = data.get("models")
        if (
            type(k) is int
            and 1 <= k <= 64
            and len(data) == ("k" in data) + ("models" in data)
            and (
                models is None
                or (
                    type(models) is list
                    and 2 <= len(models) <= 5000
                    and all(type(m) is str and 1 <= len(m) <= 200 for m in models)
                )
            )
        ):
            return k, models
    body = _validate(data, BattleRequest)  # anything unusual: the model decides
    return body.k, body.models  # type: ignore[attr-defined]


def vote_request(raw: bytes) -> int:
    """The outcome code of a ``POST /v1/battles/{id}/vote`` body (:class:`.app.VoteRequest`)."""
    from .app import VoteRequest

    data = _parse(raw, b"null")
    if type(data) is dict and len(data) == 1:
        outcome = data.get("outcome")
        if type(outcome) is str and outcome in _OUTCOME_CODE:
            return _OUTCOME_CODE[outcome]
    return _OUTCOME_CODE[_validate(data, VoteRequest).outcome]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------- context
class Hot:
    """What the two routes use, gathered once when the application starts: the worker's
    state, its writer, the rate limiter and the metrics counters."""

    def __init__(
        self, arena: ArenaState, writer: store.Writer, limiter: RateLimiter, metrics: Any
    ) -> None:
        self.arena = arena
        self.writer = writer
        self.limiter = limiter
        self.battles_served = metrics.battles
        self.redrawn = metrics.redrawn
        self.votes = {kind: metrics.votes.labels(kind) for kind in ("new", "replay", "corrected")}

    def authenticate(self, authorization: str | None, x_api_key: str | None) -> Principal:
        """The key's principal (401 without a valid key; :class:`RateLimited` over the limit)."""
        key = x_api_key
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(
                    401, "unauthorized", "use 'Authorization: Bearer <key>'", "authorization"
                )
            key = token.strip()
        if not key:
            raise ApiError(
                401,
                "unauthorized",
                "this request needs a key: 'Authorization: Bearer <key>'",
                "authorization",
            )
        key_id = split_key(key)
        p = self.arena.principal_for(key_id) if key_id else None
        if p is None or not verify(key, p):
            raise ApiError(401, "unauthorized", "unknown or revoked key", "authorization")
        wait = self.limiter.take(p.key_id, slot=p.id)
        if wait > 0:
            raise RateLimited(wait)
        return p

    async def reload(self, who: Principal) -> Principal:
        """After a write found the registry changed through another worker: reload it and
        return the key's principal as it now stands (401 if the key was revoked meanwhile)."""
        await asyncio.to_thread(self.arena.refresh_registry)
        p = self.arena.keys.get(who.key_id)
        if p is None or p.revoked:
            raise ApiError(401, "unauthorized", "unknown or revoked key", "authorization")
        return p


BodyReader = Callable[[], Awaitable[bytes]]


# ---------------------------------------------------------------------------------- routes
async def post_battles(
    hot: Hot, authorization: str | None, x_api_key: str | None, read_body: BodyReader
) -> Reply:
    """``POST /v1/battles``: the next battle(s) for this annotator, stored before the answer."""
    who = hot.authenticate(authorization, x_api_key)
    k, models = battle_request(await read_body())
    st = hot.arena
    refreshed = False
    for _ in range(_DRAWS):
        revision = st.revision  # the registry this draw decides by
        try:
            rows = st.serve(who, k, models)
        except ApiError as exc:
            # models may have been added (or brought back) through another worker since this
            # one last polled: look once before calling a model unknown or the pairs too few
            if exc.code not in ("unknown_model", "no_pair") or refreshed:
                raise
            refreshed = True
            if not await asyncio.to_thread(st.refresh_registry):
                raise
            rows = st.serve(who, k, models)
        refused = await hot.writer.submit_async(
            partial(store.insert_battles, rows=rows, revision=revision)
        )
        if refused is None:
            # a model retired or paused, a key revoked… through another worker since this one
            # last polled: nothing was stored; reload, check the key again and draw again
            st.refused(who, rows, [])
            who = await hot.reload(who)
            continue
        if not refused:
            hot.battles_served.inc(len(rows))
            return Reply(200, _battles_json(st, rows))
        # the annotator has judged a drawn pair through another worker: learn it, draw again
        st.refused(who, rows, refused)
        hot.redrawn.inc(len(refused))
    raise ApiError(503, "busy", "the arena is changing fast; retry the request")


async def post_vote(
    hot: Hot,
    battle_id: str,
    authorization: str | None,
    x_api_key: str | None,
    read_body: BodyReader,
) -> Reply:
    """``POST /v1/battles/{battle_id}/vote``: durable before the answer; idempotent."""
    who = hot.authenticate(authorization, x_api_key)
    if not _BATTLE_ID.match(battle_id):
        raise ApiError(404, "not_found", f"no battle {battle_id!r}", "battle_id")
    outcome = vote_request(await read_body())
    st = hot.arena
    now = time.time()
    for _ in range(_DRAWS):
        res: store.VoteResult = await hot.writer.submit_async(
            partial(
                store.record_vote,
                battle_id=battle_id,
                annotator_id=who.id,
                outcome=outcome,
                now=now,
                revision=st.revision,  # read first: a reload after it can only make it stale
                correction_window=st.config.correction_window,
            )
        )
        if res.kind != "stale":
            break
        # a key revoked (or the correction window changed) through another worker since this
        # one last polled: nothing was recorded; reload and check the key again
        who = await hot.reload(who)
    else:
        raise ApiError(503, "busy", "the arena is changing fast; retry the request")
    refused = _VOTE_ERRORS.get(res.kind)
    if refused is not None:
        status, code, fld = refused
        raise ApiError(status, code, res.message, fld)
    st.after_vote(who, battle_id, res)
    hot.votes[res.kind].inc()
    return Reply(200, _vote_json(st, battle_id, res))


# Pre-encoded answers: the same JSON as ``json.dumps`` of the dicts (names encoded once per
# registry load, floats by ``float.__repr__`` as json does), several times cheaper.
_BATTLE = (
    '{"battle_id":"%s","model_a":%s,"model_b":%s,"strategy":%s,"propensity":%r,'
    '"served_at":%r,"expires_at":%r}'
)
_VOTE = (
    '{"battle_id":"%s","vote_id":%d,"outcome":"%s","revision":%d,"recorded_at":%r,'
    '"replayed":%s,"corrected":%s,"model_a":%s,"model_b":%s}'
)
_STRATEGY_JSON: dict[str, str] = {}


def _json_str(text: str) -> str:
    out = _STRATEGY_JSON.get(text)
    if out is None:
        out = _STRATEGY_JSON[text] = json.dumps(text, ensure_ascii=False)
    return out


def _battles_json(st: ArenaState, rows: list[dict[str, Any]]) -> bytes:
    names = st.name_json
    return (
        '{"battles":['
        + ",".join(
            _BATTLE
            % (
                r["id"],
                names[r["model_a"]],
                names[r["model_b"]],
                _json_str(r["strategy"]),
                float(r["propensity"]),
                float(r["served_at"]),
                float(r["expires_at"]),
            )
            for r in rows
        )
        + "]}"
    ).encode()


def _vote_json(st: ArenaState, battle_id: str, res: store.VoteResult) -> bytes:
    names = st.name_json
    return (
        _VOTE
        % (
            battle_id,
            res.vote_id,
            store.OUTCOMES[res.outcome],
            res.revision,
            float(res.created_at),
            "true" if res.kind == "replay" else "false",
            "true" if res.kind == "corrected" else "false",
            names.get(res.model_a, "null"),
            names.get(res.model_b, "null"),
        )
    ).encode()


async def answer(route: Callable[..., Awaitable[Reply]], *args: Any) -> Reply:
    """``route(*args)``, its expected refusals turned into their JSON errors."""
    try:
        return await route(*args)
    except ApiError as exc:
        return Reply(exc.status, error_body(exc.status, exc.code, exc.message, exc.field))
    except Invalid as exc:
        message, fld = invalid_message(exc.errors)
        return Reply(422, error_body(422, "invalid_input", message, fld))
    except RateLimited as exc:
        return Reply(
            429,
            error_body(
                429,
                "rate_limited",
                f"too many requests for this key; retry in {exc.wait:.2f} s",
                "authorization",
            ),
            ((b"retry-after", str(max(1, round(exc.wait + 0.5))).encode()),),
        )
    except StableArenaError as exc:
        return Reply(422, error_body(422, "invalid_input", str(exc)))


# ---------------------------------------------------------------------------------- the front
class HotRoutes:
    """ASGI front of the FastAPI ``app``: the two hot routes answered here, everything else
    passed on (see the module docstring). ``hot`` is set by the application's lifespan."""

    def __init__(self, app: Any, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.hot: Hot | None = None

    def __getattr__(self, name: str) -> Any:  # state, routes, openapi, dependency_overrides…
        return getattr(self.app, name)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "GET"):
            path: str = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            if scope["method"] == "GET":
                if path == "/v1/leaderboard" and not scope["query_string"] and self.hot:
                    await self._leaderboard(send)
                    return
            elif path == "/v1/battles":
                await self._serve(scope, receive, send, None)
                return
            if path.startswith("/v1/battles/") and path.endswith("/vote"):
                battle_id = path[12:-5]
                if battle_id and "/" not in battle_id:
                    await self._serve(scope, receive, send, battle_id)
                    return
        await self.app(scope, receive, send)

    async def _leaderboard(self, send: Callable) -> None:
        """``GET /v1/leaderboard`` without a query: the published board, encoded once per fit."""
        assert self.hot is not None
        try:
            body, status = self.hot.arena.published_json(), 200
        except ApiError as exc:
            body, status = error_body(exc.status, exc.code, exc.message, exc.field), exc.status
        await _send(send, status, body)

    async def _serve(
        self, scope: dict, receive: Callable, send: Callable, battle_id: str | None
    ) -> None:
        authorization = x_api_key = None
        length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"x-api-key":
                x_api_key = value.decode("latin-1")
            elif name == b"content-length":
                length = value
        limit = self.limit
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                body = error_body(400, "bad_request", "Content-Length is not a number", "body")
                await _send(send, 400, body)
                return
            if size > limit:
                await _send(send, 413, _too_large(size, limit))
                return

        async def read_body() -> bytes:
            body = b""
            while True:
                msg = await receive()
                if msg["type"] != "http.request":
                    raise ConnectionError("the client went away")
                body += msg.get("body", b"")
                if len(body) > limit:
                    raise TooLarge(len(body))
                if not msg.get("more_body", False):
                    return body

        hot = self.hot
        try:
            if hot is None:
                reply = Reply(
                    503, error_body(503, "not_ready", "the arena is starting; retry shortly")
                )
            elif battle_id is None:
                reply = await answer(post_battles, hot, authorization, x_api_key, read_body)
            else:
                reply = await answer(post_vote, hot, battle_id, authorization, x_api_key, read_body)
        except TooLarge as exc:
            reply = Reply(413, _too_large(exc.size, limit))
        except ConnectionError:
            return
        except Exception as exc:  # a bug: logged, answered as JSON, never a traceback
            log.exception("internal error on POST %s", scope["path"])
            reply = Reply(
                500,
                error_body(
                    500, "internal", f"internal error ({type(exc).__name__}); see the server log"
                ),
            )
        await _send(send, reply.status, reply.body, reply.headers)


def _too_large(size: int, limit: int) -> bytes:
    return error_body(
        413,
        "too_large",
        f"the request body ({size} bytes or more) exceeds the limit of {limit} bytes",
        "body",
    )


async def _send(
    send: Callable, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", _JSON),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
