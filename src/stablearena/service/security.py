"""Keys, roles, rate limits and the request-size limit of the live arena.

A key is ``sa_<key id>_<secret>``: the key id (not secret) finds the stored record, and the
SHA-256 of the whole key is compared with the stored hash by :func:`hmac.compare_digest`
(constant time). Only the hash is stored; the key itself is shown once, when it is created.
A key's role is ``annotator`` (asks for battles, votes on its own battles) or ``admin``
(everything, including the annotators' screening, the export and the configuration).

Rate limits are a token bucket per key (``rate_limit`` requests per second, bursts of
``rate_burst``), kept by each worker process; the body limit is an ASGI middleware that
refuses a larger request with 413 before reading it (or as soon as a chunked body passes it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass

__all__ = [
    "NewKey",
    "Principal",
    "new_key",
    "hash_key",
    "split_key",
    "verify",
    "RateLimiter",
    "BodyLimit",
]

_PREFIX = "sa_"


@dataclass(frozen=True)
class NewKey:
    key_id: str
    secret: str  # the whole key, shown once
    key_hash: str


@dataclass(frozen=True)
class Principal:
    """Who made a request: the annotator record behind a key."""

    id: int
    name: str
    role: str
    key_id: str
    key_hash: str
    revoked: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> NewKey:
    """A fresh random key (128-bit id, 256-bit secret)."""
    key_id = secrets.token_hex(8)
    key = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return NewKey(key_id, key, hash_key(key))


def split_key(key: str) -> str | None:
    """The key id of a well-formed key, else ``None``."""
    if not key.startswith(_PREFIX):
        return None
    key_id, sep, rest = key[len(_PREFIX) :].partition("_")
    if not sep or len(key_id) != 16 or not rest or len(key) > 200:
        return None
    return key_id


def verify(key: str, principal: Principal) -> bool:
    """Constant-time comparison of the key's hash with the stored one."""
    return hmac.compare_digest(hash_key(key), principal.key_hash) and not principal.revoked


class RateLimiter:
    """Token bucket per key: ``rate`` tokens per second, at most ``burst`` stored."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str, now: float | None = None) -> float:
        """0 when the request may go ahead, else the seconds to wait before retrying."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(who, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[who] = (tokens - 1.0, now)
                return 0.0
            self._buckets[who] = (tokens, now)
            return (1.0 - tokens) / self.rate


def _error_body(status: int, code: str, message: str, field: str | None) -> bytes:
    return json.dumps(
        {"error": {"status": status, "code": code, "message": message, "field": field}}
    ).encode()


class BodyLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes gets 413 (JSON)."""

    def __init__(self, app, limit: int) -> None:  # noqa: ANN001
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    await self._refuse(send, 400, "bad_request", "Content-Length is not a number")
                    return
                if size > self.limit:
                    await self._refuse(send, 413, "too_large", self._message(size))
                    return
        seen = 0
        limit = self.limit
        refused = False

        async def counted_receive():  # noqa: ANN202
            nonlocal seen, refused
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    refused = True
                    raise _TooLarge
            return msg

        started = False

        async def tracked_send(msg) -> None:  # noqa: ANN001
            nonlocal started
            if refused:  # the app answered the cut-off body (e.g. 400): answer 413 instead
                if msg["type"] == "http.response.start" and not started:
                    started = True
                    await self._refuse(send, 413, "too_large", self._message(seen))
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send, 413, "too_large", self._message(seen))
        except Exception:
            if not refused:
                raise
            if not started:
                await self._refuse(send, 413, "too_large", self._message(seen))

    def _message(self, size: int) -> str:
        return f"the request body ({size} bytes or more) exceeds the limit of {self.limit} bytes"

    async def _refuse(self, send, status: int, code: str, message: str) -> None:  # noqa: ANN001
        body = _error_body(status, code, message, "body")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
