"""Keys, roles, rate limits and the request-size limit of the live arena.

A key is ``sa_<key id>_<secret>``: the key id (not secret) finds the stored record, and the
SHA-256 of the whole key is compared with the stored hash by :func:`hmac.compare_digest`
(constant time). Only the hash is stored; the key itself is shown once, when it is created.
A key's role is ``annotator`` (asks for battles, votes on its own battles) or ``admin``
(everything, including the annotators' screening, the export and the configuration).

Rate limits are a token bucket per key (``rate_limit`` requests per second, bursts of
``rate_burst``). One ``serve`` process keeps them in memory (:class:`RateLimiter`); the worker
processes of ``serve --workers N`` share one table of buckets in shared memory
(:class:`SharedRateLimiter`), so a key's limit is the same whatever the number of workers; the
arena page's limits per identity and per address (:mod:`.visitors`) live in the same table.
With ``limits = "database"`` (the default on PostgreSQL) the buckets are rows of the database
instead (:class:`DatabaseRateLimiter`), so the ``serve`` hosts of one database enforce one limit
per key, page identity and address; only the flood guard on requests without a valid key stays
per worker process (docs/guides/live-arena-security.md has the arithmetic).
The body limit is an ASGI middleware that refuses a larger request with 413 before reading it
(or as soon as a chunked body passes it).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import mmap
import os
import re
import secrets
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

from .errors import database_unreachable, error_body

__all__ = [
    "NewKey",
    "Principal",
    "new_key",
    "hash_key",
    "split_key",
    "parse_token",
    "parse_cookie",
    "Cookie",
    "verify",
    "RateLimiter",
    "SharedRateLimiter",
    "DatabaseRateLimiter",
    "limiter",
    "AddressLimiter",
    "OpenBattles",
    "shared_buckets_fd",
    "TABLES",
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


#: Every identity token the service accepts, as the only forms it makes them in (ASCII only,
#: bounded lengths; ``[0-9]`` matches ASCII digits alone, never "²" or "٣"):
#: - ``key``: an API key ``sa_<16 hex key id>_<secret>`` (:func:`new_key`);
#: - ``session``: an admin session token of the dashboard (``secrets.token_urlsafe``);
#: - ``cookie``: the arena page's identity ``<identity>.<expiry>.<HMAC-SHA256 hex>``, the
#:   identity an annotator's number (no leading zero) — followed by ``-<key id>`` when signed in
#:   with a key — or ``v<16 hex>`` (a visitor, stored on its first battle).
_TOKENS = {
    "key": re.compile(r"sa_([0-9a-f]{16})_[A-Za-z0-9_-]{1,180}"),
    "session": re.compile(r"[A-Za-z0-9_-]{16,100}"),
    "cookie": re.compile(
        r"([1-9][0-9]{0,17}(?:-[0-9a-f]{16})?|v[0-9a-f]{16})\.([1-9][0-9]{0,11})\.([0-9a-f]{64})"
    ),
}


class Cookie(NamedTuple):
    """A well-formed arena page cookie (its signature not checked yet)."""

    ident: str  # an annotator's number (and "-<key id>"), or "v<16 hex>"
    expiry: int
    mac: str

    @property
    def annotator_id(self) -> int | None:
        """The annotator's number (None: a visitor's ``v<hex>``)."""
        return None if self.ident.startswith("v") else int(self.ident.partition("-")[0])

    @property
    def key_id(self) -> str:
        """The id of the key signed in with ("": none)."""
        return self.ident.partition("-")[2]


def parse_token(kind: str, value: object) -> re.Match[str] | None:
    """The one parser of identity tokens (``kind``: ``key``, ``session`` or ``cookie``, see
    ``_TOKENS``): the match of a well-formed token, else ``None`` — anything else (not a
    string, too long, another alphabet, NUL, other digits) is "no identity", never an error."""
    if not isinstance(value, str) or len(value) > 300:
        return None
    return _TOKENS[kind].fullmatch(value)


def parse_cookie(value: object) -> Cookie | None:
    """The parts of a well-formed arena page cookie (:func:`parse_token`), else ``None``."""
    m = parse_token("cookie", value)
    return None if m is None else Cookie(m[1], int(m[2]), m[3])


def split_key(key: str) -> str | None:
    """The key id of a well-formed key (:func:`parse_token`), else ``None``."""
    m = parse_token("key", key)
    return None if m is None else m[1]


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
#: (``time.monotonic``, the same clock in every process of the machine) and, in a table of
#: addresses, the tag of the address (a hash); all zero = unused. 32 bytes.
_BUCKET = struct.Struct("ddQ8x")
#: Byte offset whose record lock serialises growing the table (far past any bucket).
_GROW_LOCK = 1 << 60
#: The tables sharing the file, interleaved (bucket ``slot`` of table ``t`` is the file's bucket
#: ``slot * len(TABLES) + t``): the API keys' limit, the arena page's limits on battles per
#: identity, battles per address and new identities per address (:mod:`.visitors`), and the
#: login forms' attempts per address (``/admin/login``, ``/arena/login``).
TABLES = ("keys", "page_battles", "page_addresses", "page_new", "logins")
#: A table of addresses: ``ADDRESS_SETS`` sets of ``ADDRESS_WAYS`` buckets; an address hashes to
#: one set and keeps a bucket of it while it is active (65,536 addresses at most per table).
ADDRESS_WAYS = 8
ADDRESS_SETS = 8192
#: One thread lock per shared file in this process: record locks (``lockf``) are per process,
#: so the limiters of one process that share a file must not hold them at the same time.
_FILE_LOCKS: dict[int, threading.Lock] = {}


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
    """:class:`RateLimiter` whose buckets several processes share: a table of buckets in the
    file ``fd`` (see :func:`shared_buckets_fd`), mapped into each process — ``table`` names
    which of :data:`TABLES` (one file holds them all). A bucket is found by its ``slot`` (an
    annotator's number: the key's record id, one key per record) or, without a slot, by the
    name it is asked for (a client address): a hash picks one set of
    :data:`ADDRESS_WAYS` buckets, and the address keeps the bucket tagged with its hash, else
    takes a free one, one that has refilled (a quiet address: forgetting it changes nothing) or
    the one quiet longest. A request takes its bucket under a record lock of the bucket (or the
    set) (``fcntl.lockf``, between processes) and a thread lock (within this one), so the N
    workers of ``serve --workers N`` enforce one limit per key, identity or address. The table
    grows (sparse) as annotator numbers grow."""

    def __init__(self, rate: float, burst: int, fd: int, table: str = "keys") -> None:
        import fcntl  # POSIX only: imported here, not by the single-process server

        super().__init__(rate, burst)
        self.fd = fd
        self.table = TABLES.index(table)
        self._lock = _FILE_LOCKS.setdefault(fd, threading.Lock())  # type: ignore[assignment]
        self._lockf, self._ex, self._un = fcntl.lockf, fcntl.LOCK_EX, fcntl.LOCK_UN
        self._map: mmap.mmap | None = None
        self._size = 0

    def _at(self, slot: int) -> int:
        return (slot * len(TABLES) + self.table) * _BUCKET.size

    def take(self, who: str, now: float | None = None, slot: int | None = None) -> float:
        now = time.monotonic() if now is None else now
        if slot is None or slot < 0:
            return self._take_named(who, now)
        at = self._at(slot)
        with self._lock:
            buf = self._mapped(at + _BUCKET.size)
            self._lockf(self.fd, self._ex, _BUCKET.size, at)
            try:
                tokens, last, _ = _BUCKET.unpack_from(buf, at)
                if last == 0.0:  # first request of this key anywhere
                    tokens, last = self.burst, now
                tokens, wait = self._spend(tokens, last, now)
                _BUCKET.pack_into(buf, at, tokens, max(now, last), 0)
            finally:
                self._lockf(self.fd, self._un, _BUCKET.size, at)
        return wait

    def _take_named(self, who: str, now: float) -> float:
        digest = hashlib.blake2b(who.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        tag = int.from_bytes(digest, "little") | 1  # never 0 (0: unused)
        first = (tag >> 1) % ADDRESS_SETS * ADDRESS_WAYS
        ats = [self._at(first + w) for w in range(ADDRESS_WAYS)]
        span = ats[-1] + _BUCKET.size - ats[0]
        with self._lock:
            buf = self._mapped(ats[-1] + _BUCKET.size)
            self._lockf(self.fd, self._ex, span, ats[0])
            try:
                ways = [_BUCKET.unpack_from(buf, at) for at in ats]
                k = next((w for w, b in enumerate(ways) if b[2] == tag), None)
                if k is None:  # a new address here: a free bucket, a refilled one, the oldest
                    k = min(
                        range(ADDRESS_WAYS),
                        key=lambda w: (
                            ways[w][1] != 0.0,
                            ways[w][0] + (now - ways[w][1]) * self.rate < self.burst,
                            ways[w][1],
                        ),
                    )
                    tokens, last = self.burst, now
                else:
                    tokens, last = ways[k][0], ways[k][1]
                tokens, wait = self._spend(tokens, last, now)
                _BUCKET.pack_into(buf, ats[k], tokens, max(now, last), tag)
            finally:
                self._lockf(self.fd, self._un, span, ats[0])
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


class DatabaseRateLimiter(RateLimiter):
    """:class:`RateLimiter` whose buckets are rows of the database
    (:class:`~.store.limits.Buckets`): every ``serve`` host and worker on one database takes
    from the same bucket, refilled by the database's clock, in one statement per check.
    ``table`` prefixes the bucket's name (the names of :data:`TABLES`); a bucket is found by its
    ``slot`` (an annotator's number) or, without one, by the name asked for (an address).

    A busy bucket is not asked at every request: a process that spends what it takes asks for
    more at once — 1 token, then twice as many each time it spent the last ones within
    :attr:`LEASE_TTL` seconds, up to ``lease`` (:attr:`LEASE_SECONDS` of the rate, at most
    :attr:`MAX_LEASE`: 5 for the default 50 a second; 1 for a rate under 20 a second, e.g.
    every limit of the arena page, which stays exact), half as many after a lease ran out of
    time — and spends them itself within :attr:`LEASE_TTL` seconds (then drops what is left).
    Every token spent was taken from the shared bucket, so over any time the tokens granted
    never exceed the bucket's; what a lease changes is when: in a window, a bucket's requests
    may pass up to (lease − 1) more per process holding a lease (tokens taken just before the
    window), and a key that stops using a process leaves up to lease − 1 tokens unspent there.
    """

    #: Seconds between two deletions of the buckets that are full again (any limiter of a
    #: process sharing the :class:`~.store.limits.Buckets`).
    SWEEP_SECONDS = 60.0
    #: A lease is this many seconds of the bucket's rate (whole tokens), at most MAX_LEASE.
    LEASE_SECONDS = 0.1
    MAX_LEASE = 16
    #: Seconds a process keeps the unspent tokens of a lease.
    LEASE_TTL = 1.0

    def __init__(self, rate: float, burst: int, buckets: object, table: str = "keys") -> None:
        super().__init__(rate, burst)
        self.buckets = buckets
        self.table = table
        self.lease = max(1, min(self.MAX_LEASE, int(self.rate * self.LEASE_SECONDS), burst))
        #: per bucket name: (unspent leased tokens, monotonic time they expire, lease size)
        self._leased: dict[str, tuple[int, float, int]] = {}

    def take(self, who: str, now: float | None = None, slot: int | None = None) -> float:
        key = str(slot) if slot is not None and slot >= 0 else who
        if len(key) > 150:  # an address is far shorter; a longer name is hashed, not cut
            key = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        name = f"{self.table}:{key}"
        t = time.monotonic()
        want = 1
        if self.lease > 1:
            with self._lock:
                held = self._leased.get(name)
                if held is not None:
                    left, until, size = held
                    if until > t and left > 0:
                        self._leased[name] = (left - 1, until, size)
                        return 0.0
                    # all spent in time: a busy bucket here, twice as many; else half
                    want = min(self.lease, size * 2) if until > t else max(1, size // 2)
        b = self.buckets
        try:
            taken, wait = b.take(name, self.rate, self.burst, want)  # type: ignore[attr-defined]
            if t >= getattr(b, "next_sweep", 0.0):
                b.next_sweep = t + self.SWEEP_SECONDS  # type: ignore[attr-defined]
                b.sweep()  # type: ignore[attr-defined]
        except Exception as exc:  # the database is failing: one refusal for it, on every route
            raise database_unreachable(exc) from None
        if self.lease > 1:
            with self._lock:
                if len(self._leased) > 100_000:  # forget the buckets quiet for a while
                    self._leased = {k: v for k, v in self._leased.items() if v[1] > t - 60.0}
                # refused: the lease counts as run out of time (the next one is smaller)
                self._leased[name] = (max(0, taken - 1), t + self.LEASE_TTL if taken else t, want)
        return wait

    def waiting(self, who: str, now: float | None = None) -> float:
        """Not known without taking a token: 0 (a request then takes one with :meth:`take`)."""
        return 0.0


def limiter(
    rate: float, burst: int, table: str, fd: int | None = None, buckets: object = None
) -> RateLimiter:
    """The limiter of one of :data:`TABLES`: in the database when ``buckets`` is given
    (:class:`DatabaseRateLimiter`, setting ``limits = "database"``), else shared by the workers
    of this host through the file ``fd`` (:class:`SharedRateLimiter`), else this process's."""
    if buckets is not None:
        return DatabaseRateLimiter(rate, burst, buckets, table)
    if fd is not None:
        return SharedRateLimiter(rate, burst, fd, table)
    return RateLimiter(rate, burst)


class BodyLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes gets 413 (JSON); ``paths``:
    a larger limit for the paths named (a battle with an attached image)."""

    def __init__(self, app, limit: int, paths: dict[str, int] | None = None) -> None:  # noqa: ANN001
        self.app = app
        self.default = limit
        self.paths = dict(paths or {})

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.paths.get(scope.get("path", ""), self.default)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    await self._refuse(send, 400, "bad_request", "Content-Length is not a number")
                    return
                if size > limit:
                    await self._refuse(send, 413, "too_large", self._message(size, limit))
                    return
        seen = 0
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
                    await self._refuse(send, 413, "too_large", self._message(seen, limit))
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send, 413, "too_large", self._message(seen, limit))
        except Exception:
            if not refused:
                raise
            if not started:
                await self._refuse(send, 413, "too_large", self._message(seen, limit))

    @staticmethod
    def _message(size: int, limit: int) -> str:
        return f"the request body ({size} bytes or more) exceeds the limit of {limit} bytes"

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
