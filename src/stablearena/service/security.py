"""Keys, roles, rate limits and the request-size limit of the live arena.

A key is ``sa_<key id>_<secret>``: the key id (not secret) finds the stored record, and the
SHA-256 of the whole key is compared with the stored hash by :func:`hmac.compare_digest`
(constant time). Only the hash is stored; the key itself is shown once, when it is created.
A key's role is ``annotator`` (asks for battles, votes on its own battles) or ``admin``
(everything, including the annotators' screening, the export and the configuration).

Rate limits are a token bucket per key (``rate_limit`` requests per second, bursts of
``rate_burst``). One ``serve`` process keeps them in memory (:class:`RateLimiter`); the worker
processes of ``serve --workers N`` share one table of buckets in shared memory
(:class:`SharedRateLimiter`), so a key's limit is the same whatever the number of workers. (Two
``serve`` commands on one PostgreSQL database, e.g. on two machines, each keep their own.)
The body limit is an ASGI middleware that refuses a larger request with 413 before reading it
(or as soon as a chunked body passes it).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import mmap
import os
import secrets
import struct
import tempfile
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
    "SharedRateLimiter",
    "AddressLimiter",
    "OpenBattles",
    "shared_buckets_fd",
    "BodyLimit",
    "error_body",
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
    """Token bucket per key: ``rate`` tokens per second, at most ``burst`` stored.

    :meth:`take` is called with the key id and the annotator's number (``slot``); this
    in-memory limiter keys its buckets by the key id."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str, now: float | None = None, slot: int | None = None) -> float:
        """0 when the request may go ahead, else the seconds to wait before retrying."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(who, (self.burst, now))
            tokens, wait = self._spend(tokens, last, now)
            self._buckets[who] = (tokens, now)
            return wait

    def waiting(self, who: str, now: float | None = None) -> float:
        """The seconds ``who`` would wait for a token now (0: one is there); takes none."""
        now = time.monotonic() if now is None else now
        with self._lock:
            state = self._buckets.get(who)
        if state is None:
            return 0.0
        tokens = min(self.burst, state[0] + max(0.0, now - state[1]) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def _spend(self, tokens: float, last: float, now: float) -> tuple[float, float]:
        """The bucket refilled from ``last`` to ``now``, one token taken if there is one:
        (tokens left, 0) or (tokens, seconds until a token is there)."""
        tokens = min(self.burst, tokens + max(0.0, now - last) * self.rate)
        if tokens >= 1.0:
            return tokens - 1.0, 0.0
        return tokens, (1.0 - tokens) / self.rate


class AddressLimiter(RateLimiter):
    """:class:`RateLimiter` of the requests without a valid key, one bucket per client address
    (per worker process). At most ``max_addresses`` buckets are kept: past that, the buckets
    that have refilled (addresses quiet for ``burst / rate`` seconds) are dropped, so a flood
    from many addresses costs bounded memory."""

    def __init__(self, rate: float, burst: int, max_addresses: int = 100_000) -> None:
        super().__init__(rate, burst)
        self.max_addresses = max_addresses

    def take(self, who: str, now: float | None = None, slot: int | None = None) -> float:
        now = time.monotonic() if now is None else now
        if len(self._buckets) >= self.max_addresses:
            with self._lock:
                full = self.burst / self.rate
                self._buckets = {
                    k: v
                    for k, v in self._buckets.items()
                    if now - v[1] < full and v[0] < self.burst
                }
                if len(self._buckets) >= self.max_addresses:  # all busy: forget the oldest half
                    keep = sorted(self._buckets.items(), key=lambda kv: kv[1][1])
                    self._buckets = dict(keep[len(keep) // 2 :])
        return super().take(who, now)


#: One bucket in :class:`SharedRateLimiter`'s table: tokens, time of the last refill
#: (``time.monotonic``, the same clock in every process of the machine); all zero = unused.
_BUCKET = struct.Struct("dd")
#: Byte offset whose record lock serialises growing the table (far past any bucket).
_GROW_LOCK = 1 << 60


def shared_buckets_fd() -> int:
    """A new, empty, inheritable file for :class:`SharedRateLimiter` (Linux: ``memfd``, in
    memory; elsewhere an unlinked temporary file). The ``serve --workers N`` process creates
    it and passes it to its workers."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("stablearena-rate-limits", 0)
    else:  # pragma: no cover - not Linux
        fd = os.dup(tempfile.TemporaryFile().fileno())
    os.set_inheritable(fd, True)
    return fd


class SharedRateLimiter(RateLimiter):
    """:class:`RateLimiter` whose buckets several processes share: a table of
    ``(tokens, last refill)`` pairs in the file ``fd`` (see :func:`shared_buckets_fd`),
    mapped into each process, one bucket per annotator number (``slot``, the key's record
    id: one key per record). A request takes its bucket under a record lock of the bucket's
    16 bytes (``fcntl.lockf``, between processes) and a thread lock (within this one), so the
    N workers of ``serve --workers N`` enforce one limit per key. The table grows (sparse) as
    annotator numbers grow."""

    def __init__(self, rate: float, burst: int, fd: int) -> None:
        import fcntl  # POSIX only: imported here, not by the single-process server

        super().__init__(rate, burst)
        self.fd = fd
        self._lockf, self._ex, self._un = fcntl.lockf, fcntl.LOCK_EX, fcntl.LOCK_UN
        self._map: mmap.mmap | None = None
        self._size = 0

    def take(self, who: str, now: float | None = None, slot: int | None = None) -> float:
        if slot is None or slot < 0:
            return super().take(who, now)
        now = time.monotonic() if now is None else now
        at = slot * _BUCKET.size
        with self._lock:
            buf = self._mapped(at + _BUCKET.size)
            self._lockf(self.fd, self._ex, _BUCKET.size, at)
            try:
                tokens, last = _BUCKET.unpack_from(buf, at)
                if last == 0.0:  # first request of this key anywhere
                    tokens, last = self.burst, now
                tokens, wait = self._spend(tokens, last, now)
                _BUCKET.pack_into(buf, at, tokens, max(now, last))
            finally:
                self._lockf(self.fd, self._un, _BUCKET.size, at)
        return wait

    def _mapped(self, need: int) -> mmap.mmap:
        """The table mapped with at least ``need`` bytes (grown under the grow lock: sizes
        only increase, so no process's mapping ever loses its pages)."""
        if self._map is not None and self._size >= need:
            return self._map
        self._lockf(self.fd, self._ex, 1, _GROW_LOCK)
        try:
            size = os.fstat(self.fd).st_size
            if size < need:
                size = max(1 << 20, 1 << (need - 1).bit_length())
                os.ftruncate(self.fd, size)
        finally:
            self._lockf(self.fd, self._un, 1, _GROW_LOCK)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(self.fd, size)
        self._size = size
        return self._map


def error_body(status: int, code: str, message: str, field: str | None = None) -> bytes:
    """The JSON of every refusal: ``{"error": {"status", "code", "message", "field"}}``."""
    return json.dumps(
        {"error": {"status": status, "code": code, "message": message, "field": field}},
        ensure_ascii=False,
        separators=(",", ":"),
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
        body = error_body(status, code, message, "body")
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


def timed_http_protocol(request_timeout: float, max_header_bytes: int = 65536) -> type:
    """uvicorn's httptools protocol with a deadline on receiving a request: a connection must
    send a complete request (headers and body) within ``request_timeout`` seconds of opening
    or of the request's first byte, else it is closed. (uvicorn's ``timeout_keep_alive`` only
    covers the idle time between requests; without this, a client sending its headers one byte
    at a time — slowloris — holds a connection, and a file descriptor, for as long as it
    likes.) A request line and headers over ``max_header_bytes`` get 431 and the connection
    is closed. The time the application takes to answer is not limited."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class TimedHttpToolsProtocol(HttpToolsProtocol):
        _request_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0  # bytes received while a request's headers were incomplete
        _in_head = False  # a request has begun and its headers are not complete yet
        _ended = False  # a request ended within the chunk being parsed

        def data_received(self, data: bytes) -> None:
            self._ended = False
            super().data_received(data)
            if not self._in_head or self.transport.is_closing():
                return
            # the headers are still incomplete after this chunk (httptools has no limit). A
            # chunk in which a request (and its body) ended holds that request's bytes too:
            # only the chunks after it count, so a body is never taken for headers (a body
            # of 66-100 KB read in one chunk used to get an empty 431 instead of its 413).
            if not self._ended:
                self._head_bytes += len(data)
            if self._head_bytes > max_header_bytes:
                self.transport.write(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                    b"content-length: 0\r\nconnection: close\r\n\r\n"
                )
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_bytes = 0
            self._in_head = True
            self._arm()

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(request_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _too_slow(self) -> None:
            self._request_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()  # a new connection: its first request within the deadline

        def on_message_complete(self) -> None:
            self._disarm()
            self._ended = True
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # arms uvicorn's keep-alive timeout (idle time)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedHttpToolsProtocol


class OpenBattles:
    """Battles served and not yet voted on, per identity (an annotator's number, or any
    hashable identity — e.g. an anonymous visitor's token): the cap on what one identity can
    hold open, kept by each worker process for the battles it served.

    :meth:`admit` says whether ``k`` more battles may be served; :meth:`add` records served
    battles, :meth:`close` a vote; entries expire with their battles (:meth:`sweep` drops the
    expired ones and returns their ids, whose rows the caller deletes when they have no vote).
    A vote recorded by another worker is not seen here: at the cap, :meth:`admit` asks
    ``voted(ids)`` (the database) which of this identity's battles have a vote, at most once a
    second per identity."""

    def __init__(self, recheck_seconds: float = 1.0) -> None:
        self._open: dict[object, dict[str, float]] = {}
        self._checked: dict[object, float] = {}
        self.recheck = recheck_seconds
        self._lock = threading.Lock()

    def count(self, who: object, now: float) -> int:
        """How many battles of ``who`` are open (served here, not voted, not expired)."""
        with self._lock:
            mine = self._open.get(who)
            return sum(exp > now for exp in mine.values()) if mine else 0

    def ids(self, who: object) -> list[str]:
        with self._lock:
            return list(self._open.get(who, ()))

    def over(self, who: object, k: int, cap: int, now: float) -> bool:
        """Whether ``k`` more battles would put ``who`` over ``cap`` open ones (as known here)."""
        return self.count(who, now) + k > cap

    def may_recheck(self, who: object, now: float) -> bool:
        with self._lock:
            if now - self._checked.get(who, -1e18) < self.recheck:
                return False
            self._checked[who] = now
            if len(self._checked) > 100_000:
                self._checked = {w: t for w, t in self._checked.items() if now - t < self.recheck}
            return True

    def add(self, who: object, battles: list[tuple[str, float]]) -> None:
        with self._lock:
            self._open.setdefault(who, {}).update(battles)

    def close(self, who: object, battle_ids: object) -> None:
        with self._lock:
            mine = self._open.get(who)
            if mine is None:
                return
            for bid in battle_ids:  # type: ignore[attr-defined]
                mine.pop(bid, None)
            if not mine:
                del self._open[who]

    def sweep(self, now: float) -> list[str]:
        """Forget the entries of every identity that expired before ``now``; their ids."""
        out: list[str] = []
        with self._lock:
            for who in list(self._open):
                mine = self._open[who]
                gone = [b for b, exp in mine.items() if exp <= now]
                for bid in gone:
                    del mine[bid]
                out.extend(gone)
                if not mine:
                    del self._open[who]
        return out
