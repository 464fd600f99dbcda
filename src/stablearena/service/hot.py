"""The plain-ASGI front of the live arena: the annotators' two routes — ``POST /v1/battles`` and
``POST /v1/battles/{id}/vote`` — and the published leaderboard (``GET /v1/leaderboard`` without
a query) answered before the FastAPI application.

They are nearly all of an arena's traffic, and FastAPI's request machinery (its middleware
stack, route matching, dependency solving, ``Request`` objects) costs more CPU per request than
choosing a pair and recording a vote. Measured after the routes moved into routers
(``bench/bench_service.py``, SQLite, 200 models, 16 clients, three interleaved runs of 20 s with
and without this front, load average 7–12 on 2 shared cores): 406 against 226 battles per
second (medians), p99 of ``POST /v1/battles`` 92 against 144 ms — the front stays.

:class:`HotRoutes` calls the routes' functions (:func:`~stablearena.service.api.battles.post_battles`,
:func:`~stablearena.service.api.battles.post_vote`) itself and passes every other request, and the lifespan, to the FastAPI application, whose
attributes it exposes (``state``, ``routes``, ``openapi()``, …). The FastAPI routes of the same
paths (:mod:`stablearena.service.api`) call the same functions, so a request gets the same
answer on either path (tested).

The same rules hold on both paths: a body over ``max_body_bytes`` is refused with 413 before
anything else (when its Content-Length says so) or as soon as it passes the limit; an
unexpected error is a 500 JSON error, logged, never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from .api.battles import Hot, post_battles, post_vote
from .errors import ApiError, Reply, TooLarge, answer, database_unreachable, error_body

__all__ = ["HotRoutes"]

log = logging.getLogger("stablearena.service")

_JSON = b"application/json"


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
        if scope["type"] == "http":
            method = scope["method"]
            if method == "POST":
                path = self._path(scope)
                if path == "/v1/battles":
                    await self._serve(scope, receive, send, None)
                    return
                if path.startswith("/v1/battles/") and path.endswith("/vote"):
                    battle_id = path[12:-5]
                    if battle_id and "/" not in battle_id:
                        await self._serve(scope, receive, send, battle_id)
                        return
            elif method == "GET":
                # only POST records a vote: a GET of a vote's path goes on (405)
                if (
                    not scope["query_string"]
                    and self.hot
                    and self._path(scope) == "/v1/leaderboard"
                ):
                    await self._leaderboard(send)
                    return
        await self.app(scope, receive, send)

    @staticmethod
    def _path(scope: dict) -> str:
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        return path

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
                reply = await answer(
                    post_battles, hot, authorization, x_api_key, read_body, _address(scope)
                )
            else:
                reply = await answer(
                    post_vote, hot, battle_id, authorization, x_api_key, read_body, _address(scope)
                )
        except TooLarge as exc:
            reply = Reply(413, _too_large(exc.size, limit))
        except ConnectionError:
            return
        except sa.exc.OperationalError as exc:  # the database does not answer: not a bug
            log.warning("database fault on POST %s: %s", scope["path"], exc)
            e = database_unreachable(exc)
            reply = Reply(e.status, error_body(e.status, e.code, e.message, e.field))
        except Exception as exc:  # a bug: logged, answered as JSON, never a traceback
            log.exception("internal error on POST %s", scope["path"])
            reply = Reply(
                500,
                error_body(
                    500, "internal", f"internal error ({type(exc).__name__}); see the server log"
                ),
            )
        await _send(send, reply.status, reply.body, reply.headers)


def _address(scope: dict) -> str | None:
    client = scope.get("client")
    return client[0] if client else None


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
