"""Authentication and the dependencies the routes share.

A request's key comes in ``Authorization: Bearer <key>`` (or ``X-API-Key``); :func:`authenticate`
finds its record (401 without a valid key) and takes a token from its rate-limit bucket (429 over
the limit). The routes of :mod:`stablearena.service.api` declare ``who: Anyone`` or
``who: Admin``; the two hot routes call :func:`authenticate` themselves."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from .errors import ApiError, RateLimited
from .security import Principal, RateLimiter, split_key, verify
from .state import ArenaState

__all__ = ["authenticate", "principal", "admin", "Anyone", "Admin", "arena", "write", "reload"]


def authenticate(
    st: ArenaState,
    limiter: RateLimiter,
    authorization: str | None,
    x_api_key: str | None,
    address: str | None = None,
    strangers: RateLimiter | None = None,
) -> Principal:
    """The key's principal (401 without a valid key; :class:`RateLimited` over the limit).

    A request without a valid key takes a token from the bucket of its client ``address`` in
    ``strangers`` (``unauthenticated_rate_limit`` per second, bursts of
    ``unauthenticated_burst``): over that it is a 429, whatever key it tried."""
    try:
        return _authenticate(st, limiter, authorization, x_api_key)
    except ApiError:
        if strangers is not None and address is not None:
            wait = strangers.take(address)
            if wait > 0:
                raise RateLimited(wait) from None
        raise


def _authenticate(
    st: ArenaState, limiter: RateLimiter, authorization: str | None, x_api_key: str | None
) -> Principal:
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
    p = st.principal_for(key_id) if key_id else None
    if p is None or not verify(key, p):
        raise ApiError(401, "unauthorized", "unknown or revoked key", "authorization")
    wait = limiter.take(p.key_id, slot=p.id)
    if wait > 0:
        raise RateLimited(wait)
    return p


async def principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    """The key's principal (401 without a valid key; 429 over the rate limit)."""
    state = request.app.state
    address = request.client.host if request.client else None
    return authenticate(
        state.arena, state.limiter, authorization, x_api_key, address, state.strangers
    )


async def admin(p: Annotated[Principal, Depends(principal)]) -> Principal:
    """The key's principal if it is an admin's (403 otherwise)."""
    if not p.is_admin:
        raise ApiError(403, "forbidden", "this request needs an admin key", "authorization")
    return p


Anyone = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]


def arena(request: Request) -> ArenaState:
    """This worker's :class:`~stablearena.service.state.ArenaState`."""
    return request.app.state.arena


async def write(request: Request, fn: Any) -> Any:
    """Run ``fn(connection)`` through the group-committing writer; its result once durable."""
    return await asyncio.wrap_future(request.app.state.writer.submit(fn))


async def reload(request: Request) -> None:
    """Reload the registry (models, keys, configuration) after an admin change."""
    await asyncio.to_thread(arena(request).reload_registry)
