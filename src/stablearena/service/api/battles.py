"""Battles and votes — ``POST /v1/battles`` and ``POST /v1/battles/{battle_id}/vote`` — the
annotators' two routes and nearly all of an arena's traffic.

Each route is one function of a :class:`Hot` context (the worker's state, its writer, the rate
limiter and the metrics counters, gathered once at start): :func:`post_battles` and
:func:`post_vote`. The plain-ASGI front (:mod:`stablearena.service.hot`) calls them directly;
the FastAPI routes of :data:`router` (which ``/docs`` shows) call the same functions, so a
request gets the same answer on either path.

The rules: the key (401), the rate limit (429 with ``Retry-After``), the body: the common
well-formed bodies are recognised by hand, anything else is decided by the pydantic model of
the route (:class:`~stablearena.service.schemas.BattleRequest`,
:class:`~stablearena.service.schemas.VoteRequest`), so a bad body is the same 422 naming the
field; answers are pre-encoded JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import unicodedata
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from .. import store
from ..deps import authenticate
from ..errors import ApiError, Invalid, Reply, answer
from ..schemas import BattleRequest, VoteRequest
from ..security import OpenBattles, Principal, RateLimiter
from ..state import ArenaState

__all__ = ["router", "Hot", "post_battles", "post_vote", "battle_request", "vote_request"]

_BATTLE_ID = re.compile(r"^[0-9a-f]{32}$")
#: How often a worker deletes the battles it served that expired unvoted, and how long after
#: their expiry (until then a late vote is told 410 expired, afterwards 404).
_SWEEP_SECONDS = 60.0
_KEEP_EXPIRED = 600.0
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
    "incomplete": (409, "incomplete", "battle_id"),
    "failed": (409, "failed", "battle_id"),
    "ended": (409, "ended", "battle_id"),
}

router = APIRouter()
log = logging.getLogger("stablearena.service")


# ---------------------------------------------------------------------------------- bodies
def _parse(raw: bytes, empty: bytes) -> Any:
    """The JSON of a body (``empty``: what an empty body stands for)."""
    try:
        return json.loads(raw or empty)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
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
    """``k`` and ``models`` of a ``POST /v1/battles`` body (:class:`~stablearena.service.schemas.BattleRequest`)."""
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
            return k, _nfc(models)
    body = _validate(data, BattleRequest)  # anything unusual: the model decides
    return body.k, _nfc(body.models)  # type: ignore[attr-defined]


def _nfc(models: list[str] | None) -> list[str] | None:
    """Model names as they are stored (Unicode NFC), so a decomposed spelling finds them."""
    if models is None or all(m.isascii() for m in models):
        return models
    return [unicodedata.normalize("NFC", m) for m in models]


def vote_request(raw: bytes) -> int:
    """The outcome code of a ``POST /v1/battles/{id}/vote`` body (:class:`~stablearena.service.schemas.VoteRequest`)."""
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
        self,
        arena: ArenaState,
        writer: store.Writer,
        limiter: RateLimiter,
        metrics: Any,
        strangers: RateLimiter | None = None,
    ) -> None:
        self.arena = arena
        self.writer = writer
        self.limiter = limiter
        self.strangers = strangers
        self.open_battles = OpenBattles()
        self.next_sweep = time.time() + _SWEEP_SECONDS
        self.battles_served = metrics.battles
        self.redrawn = metrics.redrawn
        self.votes = {kind: metrics.votes.labels(kind) for kind in ("new", "replay", "corrected")}

    def authenticate(
        self, authorization: str | None, x_api_key: str | None, address: str | None = None
    ) -> Principal:
        """The key's principal (:func:`stablearena.service.deps.authenticate`)."""
        return authenticate(
            self.arena, self.limiter, authorization, x_api_key, address, self.strangers
        )

    async def reload(self, who: Principal) -> Principal:
        """After a write found the registry changed through another worker: reload it and
        return the key's principal as it now stands (401 if the key was revoked meanwhile)."""
        await asyncio.to_thread(self.arena.refresh_registry)
        p = self.arena.keys.get(who.key_id)
        if p is None or p.revoked:
            raise ApiError(401, "unauthorized", "unknown or revoked key", "authorization")
        return p

    async def admit(self, who: object, k: int) -> None:
        """Refuse (429 ``too_many_open``) ``k`` more battles for the identity ``who`` when it
        holds ``max_open_battles`` served here and not voted on; now and then, delete the
        rows of battles that expired unvoted (:class:`~stablearena.service.security.OpenBattles`)."""
        now = time.time()
        cfg = self.arena.config
        ob = self.open_battles
        if now >= self.next_sweep:
            self.next_sweep = now + _SWEEP_SECONDS
            gone = ob.sweep(now - _KEEP_EXPIRED)
            if gone:  # not awaited: the deletion is housekeeping, not part of this answer
                fut = self.writer.submit(partial(store.delete_unvoted, ids=gone))
                fut.add_done_callback(_log_failure)
        if not ob.over(who, k, cfg.max_open_battles, now):
            return
        if ob.may_recheck(who, now):  # votes recorded by other workers close battles too
            voted = await asyncio.to_thread(store.voted_battles, self.arena.engine, ob.ids(who))
            ob.close(who, voted)
            if not ob.over(who, k, cfg.max_open_battles, now):
                return
        n = ob.count(who, now)
        raise ApiError(
            429,
            "too_many_open",
            f"{n} battles served to you are not voted on yet and at most "
            f"{cfg.max_open_battles} may be open: vote on them (or let them expire, "
            f"{cfg.battle_ttl:g} s after they were served) before asking for {k} more",
            "k",
        )


def _log_failure(fut: Any) -> None:
    exc = fut.exception()
    if exc is not None:
        log.warning("deleting expired unvoted battles failed: %s", exc)


BodyReader = Callable[[], Awaitable[bytes]]


# ---------------------------------------------------------------------------------- routes
async def post_battles(
    hot: Hot,
    authorization: str | None,
    x_api_key: str | None,
    read_body: BodyReader,
    address: str | None = None,
) -> Reply:
    """``POST /v1/battles``: the next battle(s) for this annotator, stored before the answer."""
    who = hot.authenticate(authorization, x_api_key, address)
    k, models = battle_request(await read_body())
    st = hot.arena
    await hot.admit(who.id, k)
    refreshed = learned = False
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
            hot.open_battles.add(who.id, [(r["id"], r["expires_at"]) for r in rows])
            hot.battles_served.inc(len(rows))
            return Reply(200, _battles_json(st, rows))
        # the annotator has judged a drawn pair through another worker (or host): learn it,
        # and — once per request — every pair the database holds a vote of it on, so that a
        # host whose view lags the others' does not draw judged pairs until it gives up
        st.refused(who, rows, refused)
        hot.redrawn.inc(len(refused))
        if not learned:
            learned = True
            await asyncio.to_thread(st.learn_judged, who)
    raise ApiError(503, "busy", "the arena is changing fast; retry the request")


async def post_vote(
    hot: Hot,
    battle_id: str,
    authorization: str | None,
    x_api_key: str | None,
    read_body: BodyReader,
    address: str | None = None,
) -> Reply:
    """``POST /v1/battles/{battle_id}/vote``: durable before the answer; idempotent."""
    who = hot.authenticate(authorization, x_api_key, address)
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
    hot.open_battles.close(who.id, (battle_id,))
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


# ---------------------------------------------------------------------------------- FastAPI
def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of a route that parses its body itself."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


def _response(reply: Reply) -> Response:
    return Response(
        reply.body,
        status_code=reply.status,
        headers={k.decode(): v.decode() for k, v in reply.headers},
        media_type="application/json",
    )


@router.post(
    "/v1/battles",
    summary="The next battle(s) for this annotator",
    openapi_extra=body_doc(BattleRequest),
)
async def next_battles(request: Request) -> Response:
    h = request.headers
    return _response(
        await answer(
            post_battles,
            request.app.state.hot,
            h.get("authorization"),
            h.get("x-api-key"),
            request.body,
            request.client.host if request.client else None,
        )
    )


@router.post(
    "/v1/battles/{battle_id}/vote",
    summary="Vote on a battle served to you (idempotent)",
    openapi_extra=body_doc(VoteRequest),
)
async def vote(request: Request, battle_id: str) -> Response:
    h = request.headers
    return _response(
        await answer(
            post_vote,
            request.app.state.hot,
            battle_id,
            h.get("authorization"),
            h.get("x-api-key"),
            request.body,
            request.client.host if request.client else None,
        )
    )
