"""Calling models: an async client for OpenAI-compatible chat-completions endpoints.

Why aiohttp, and not the ``openai`` SDK or httpx: reading the server-sent events ourselves
(``data: {...}`` lines, ``data: [DONE]``) gives full control of the timing — time to first
token is measured at the first content delta that arrives, not at whatever point an SDK's
iterator hands it over — and of what counts as a dropped stream; and aiohttp's client (C HTTP
parser, one connection pool per session with O(1) reuse) costs 0.23 ms of CPU per streamed
call against 1.3 ms for httpx (which the ``openai`` SDK is built on), measured on the demo
server, 600 calls 50 at a time (``bench/bench_client.py``). A held battle makes two such
calls: with httpx they were about 2.5 ms of the worker's 5.75–6.05 ms of CPU per battle in a
burst of 200 (docs/guides/arena-page.md, "Measured under load").

Every call returns an :class:`Answer` or a :class:`Failure` with the reason; no exception
escapes into the caller's loop. Retries, back-off, bounded concurrency and the outage circuit
breaker are described on :class:`~stablearena.judging.endpoints.config.ModelEndpoint`.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import math
import os
import random
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .config import ModelEndpoint

__all__ = [
    "Answer",
    "Failure",
    "Result",
    "CircuitBreaker",
    "EndpointClient",
    "SSEDecoder",
    "Slots",
    "clean_text",
    "estimate_tokens",
    "parse_retry_after",
    "prompt_problem",
    "with_image",
]

log = logging.getLogger("stablearena.judging.endpoints")

#: HTTP statuses worth another attempt (the request may succeed later).
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Answer:
    """A model's answer and how it was made.

    ``ttft``: seconds from sending the request to the first content token (for a non-streamed
    call, the whole time); ``total_time``: to the end of the answer (last attempt only);
    ``usage_source``: ``"server"`` when the tokens come from the response's ``usage``,
    ``"estimated"`` when the server sent none (then completion tokens = the number of content
    deltas of a stream, servers sending one token per delta, or ⌈characters / 4⌉ for a
    non-streamed answer; prompt tokens = ⌈characters / 4⌉).
    """

    model: str
    text: str
    finish_reason: str | None
    ttft: float
    total_time: float
    prompt_tokens: int
    completion_tokens: int
    usage_source: str
    attempts: int = 1
    ok: bool = True

    def to_record(self) -> dict[str, Any]:
        """As plain data."""
        return asdict(self)


@dataclass(frozen=True)
class Failure:
    """A call that gave no answer. ``reason`` is one of ``timeout``, ``http_<status>``,
    ``rate_limited``, ``dropped`` (the stream ended before ``[DONE]``), ``connection``,
    ``unauthorized``, ``bad_response`` (not a well-formed chat completion or chunk),
    ``too_long`` (past the endpoint's ``max_answer_chars``), ``outage`` (the circuit breaker refused the call),
    ``no_answer`` (an offline model has none for the prompt) or ``unparseable`` (a judge's
    verdict); ``detail`` says more."""

    model: str
    reason: str
    detail: str
    attempts: int = 1
    elapsed: float = 0.0
    ok: bool = False

    def to_record(self) -> dict[str, Any]:
        """As plain data."""
        return asdict(self)


Result = Answer | Failure
#: A callback receiving each piece of an answer as it streams in (``None``: start over).
OnDelta = Callable[[str | None], None]
#: Told a waiting call's place in its model's line: 1, 2, … while it waits (again each time it
#: moves up), then 0 when it gets its slot (never called for a call that got one at once).
OnQueue = Callable[[int], None]


def estimate_tokens(text: str) -> int:
    """⌈characters / 4⌉, the usual rule of thumb for English text with BPE tokenizers."""
    return math.ceil(len(text) / 4)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class CircuitBreaker:
    """Outage after ``after`` consecutive failures; after ``cooldown`` seconds one probe call
    is let through (half-open); an answer closes the breaker, a failure reopens it."""

    def __init__(self, after: int, cooldown: float, clock: Callable[[], float] = time.monotonic):
        self.after, self.cooldown, self.clock = after, cooldown, clock
        self.failures = 0
        self.opened_at: float | None = None
        self.probing = False

    @property
    def under_outage(self) -> bool:
        """Whether the model is under outage now (open or probing)."""
        return self.opened_at is not None

    def allow(self) -> bool:
        """Whether a call may go out now (and, when it is the probe, mark it)."""
        if self.opened_at is None:
            return True
        if self.probing or self.clock() - self.opened_at < self.cooldown:
            return False
        self.probing = True
        return True

    def record(self, ok: bool) -> None:
        """Count a finished call."""
        self.probing = False
        if ok:
            if self.opened_at is not None:
                log.info("outage over: the model answered again")
            self.failures, self.opened_at = 0, None
            return
        self.failures += 1
        if self.opened_at is not None or self.failures >= self.after:
            self.opened_at = self.clock()


def _env_proxy(url: str) -> str | None:
    """The proxy for ``url`` from the environment (``HTTP_PROXY`` / ``HTTPS_PROXY`` /
    ``ALL_PROXY``, unless ``NO_PROXY`` names its host), read once per client: aiohttp's
    ``trust_env`` reads the environment, and a netrc file, on every request — measured 1.0
    against 2.0 ms from a call to its response's headers on the demo server."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    proxies = getproxies()
    if not proxies or proxy_bypass(parts.hostname or ""):
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


@functools.lru_cache(maxsize=1)
def _ssl_context() -> Any:
    """TLS verification against certifi's certificates where certifi is installed (as httpx
    did), else the system's."""
    import ssl

    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


async def _within(coro: Any, seconds: float | None) -> Any:
    """``await coro`` with a deadline: :func:`asyncio.timeout` where there is one (Python
    3.11+; no task of its own per call, as :func:`asyncio.wait_for` makes there), else
    :func:`asyncio.wait_for`. Raises :class:`asyncio.TimeoutError` at the deadline."""
    if seconds is None or not hasattr(asyncio, "timeout"):
        return await asyncio.wait_for(coro, seconds)
    async with asyncio.timeout(seconds):
        return await coro


async def _drain(chunks: Any, seconds: float = 0.5) -> None:
    """Read what a stream sends after ``[DONE]`` (usually only the end of its chunked body),
    for at most ``seconds``: a response read to its end leaves its connection in the pool for
    the next call, where one closed early costs a new TCP connection (and the server's accept)
    per call. A server still sending after ``seconds`` loses the connection; the answer is kept."""

    async def rest() -> None:
        async for _ in chunks:
            pass

    try:
        await _within(rest(), seconds)
    except asyncio.TimeoutError:
        pass


class SSEDecoder:
    """Server-sent events read incrementally from raw bytes: :meth:`feed` takes whatever one
    read of the response brought and returns the data of the events completed by it, as bytes
    (the ``data:`` lines of an event joined by newlines, one leading space dropped, as the
    HTML standard's event-stream rules say); :meth:`close` returns the data of an event left
    unterminated at the end of the stream. Comments, ``event:``, ``id:`` and ``retry:`` lines
    and events without data are skipped.

    Nothing is decoded here: an event is split at blank lines as bytes, so a piece cut across
    two reads — a multi-byte UTF-8 character included — is handed over whole once its event
    ends, and only the data is JSON-decoded by the caller (one decode per event, no per-line
    string work: the stream of a long answer has hundreds of events).
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events that ``chunk`` completes."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:  # CRLF or CR line ends: make them LF (a CR last may be half a CRLF)
            keep = buf.endswith(b"\r")
            buf = buf[:-1] if keep else buf
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if keep else b"")
        *events, self._buf = buf.split(b"\n\n")
        return [d for d in map(_event_data, events) if d is not None]

    @property
    def pending(self) -> int:
        """The bytes held of an event not yet complete."""
        return len(self._buf)

    def close(self) -> list[bytes]:
        """The data of an event the stream ended in without its blank line."""
        rest, self._buf = self._buf.rstrip(b"\r\n").replace(b"\r\n", b"\n"), b""
        data = _event_data(rest.replace(b"\r", b"\n")) if rest else None
        return [] if data is None else [data]


def _event_data(event: bytes) -> bytes | None:
    """The data of one event's lines (None without a ``data`` field)."""
    if event.startswith(b"data:") and b"\n" not in event:  # the usual event: one data line
        return event[6:] if event[5:6] == b" " else event[5:]
    data = None
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[6:] if line[5:6] == b" " else line[5:]
            data = value if data is None else data + b"\n" + value
        elif line == b"data":  # a field name without a colon: empty data
            data = b"" if data is None else data + b"\n"
    return data


@dataclass
class _Attempt:
    result: Result
    retryable: bool = False
    retry_after: float | None = None


class Slots:
    """At most ``limit`` calls of one model at once; the others wait in a line, first come
    first served, each told its place as it moves up (``on_queue``). Keeps how long the last
    calls held their slot, for :meth:`wait_estimate`. Use inside one event loop."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.active = 0
        self.clock = clock
        #: seconds each of the last calls held its slot (newest last)
        self.held: deque[float] = deque(maxlen=32)
        self._line: OrderedDict[int, tuple[asyncio.Future[None], OnQueue | None]] = OrderedDict()
        self._tickets = 0

    @property
    def waiting(self) -> int:
        """The calls waiting for a slot."""
        return len(self._line)

    def wait_estimate(self, ahead: int, prior: float) -> float:
        """Seconds until a call with ``ahead`` calls before it in the line gets a slot (a
        negative ``ahead``: a slot is free for it, 0 s): ``(ahead + 1) × d / limit``, ``d`` the
        mean time the last calls held their slot — ``prior`` until one has ended."""
        if ahead < 0:
            return 0.0
        d = sum(self.held) / len(self.held) if self.held else prior
        return (ahead + 1) * d / self.limit

    async def acquire(self, on_queue: OnQueue | None = None) -> float:
        """Wait for a slot (at once when one is free and nobody waits); returns the time it was
        got (``clock``), to pass to :meth:`release`."""
        if self.active < self.limit and not self._line:
            self.active += 1
            return self.clock()
        self._tickets += 1
        ticket = self._tickets
        got: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line[ticket] = (got, on_queue)
        if on_queue is not None:
            on_queue(len(self._line))
        try:
            await got
        except asyncio.CancelledError:
            if ticket in self._line:  # left the line: the ones behind it move up
                behind = list(self._line).index(ticket)
                del self._line[ticket]
                self._moved(behind)
            elif got.done() and not got.cancelled():
                self.release(None)  # granted as it was cancelled: the slot goes on
            raise
        if on_queue is not None:
            on_queue(0)
        return self.clock()

    def release(self, since: float | None) -> None:
        """Give the slot back (``since``: the time :meth:`acquire` returned, None: not timed)."""
        if since is not None:
            self.held.append(self.clock() - since)
        self.active -= 1
        granted = False
        while self.active < self.limit and self._line:
            _, (got, _cb) = self._line.popitem(last=False)
            if got.cancelled():
                continue
            got.set_result(None)
            self.active += 1
            granted = True
        if granted:
            self._moved(0)

    def _moved(self, start: int) -> None:
        """Tell the waiters from place ``start + 1`` on their new place."""
        for place, (_, cb) in enumerate(self._line.values(), 1):
            if place > start and cb is not None:
                cb(place)


class EndpointClient:
    """Calls one :class:`ModelEndpoint` (at most ``max_concurrency`` calls at once).

    Use inside one event loop: ``async with EndpointClient(endpoint) as c: await
    c.answer("What is 17*23?")``. ``rng`` draws the back-off jitter; ``sleep`` and ``clock`` can
    be replaced (tests measure the waits).
    """

    def __init__(
        self,
        endpoint: ModelEndpoint,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ):
        self.endpoint = endpoint
        self.rng = rng or random.Random()
        self.sleep = sleep
        self.breaker = CircuitBreaker(endpoint.outage_after, endpoint.outage_cooldown, clock)
        self._session: Any = None  # aiohttp.ClientSession, made on the first call
        self._proxy: str | None = None  # from the environment, read once (_env_proxy)
        #: the model's call slots (``max_concurrency``) and the line of calls waiting for one
        self.slots = Slots(endpoint.max_concurrency, clock)
        self.waits: list[float] = []  # back-off waits taken, in seconds

    def __repr__(self) -> str:
        return f"EndpointClient({self.endpoint.name!r}, {self.endpoint.url!r})"

    @property
    def name(self) -> str:
        """The model's name in the arena."""
        return self.endpoint.name

    async def __aenter__(self) -> EndpointClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _http(self) -> Any:
        """The session: one pool of at most ``max_concurrency`` kept-alive connections (made
        on the first call, inside the running event loop, as aiohttp requires)."""
        if self._session is None:
            import aiohttp

            n = self.endpoint.max_concurrency
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=n,
                    limit_per_host=n,
                    ssl=_ssl_context() if self.endpoint.url.startswith("https:") else True,
                ),
                timeout=aiohttp.ClientTimeout(total=None),  # the call's deadline is _within's
                raise_for_status=False,
            )
            self._proxy = _env_proxy(self.endpoint.url)
        return self._session

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if self.endpoint.stream else "application/json"}
        env = self.endpoint.api_key_env
        if env:
            key = os.environ.get(env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        return headers

    def messages(self, prompt: str, history: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The chat messages for ``prompt``: the system prompt first (if any), then the
        conversation so far (``history``: user and this model's own assistant messages, in
        order), then the prompt as the last user message."""
        out = []
        if self.endpoint.system_prompt:
            out.append({"role": "system", "content": self.endpoint.system_prompt})
        out.extend({"role": m["role"], "content": m["content"]} for m in history)
        out.append({"role": "user", "content": prompt})
        return out

    async def answer(self, prompt: str, prompt_id: str | None = None) -> Result:
        """The model's answer to a one-turn ``prompt`` (``prompt_id`` is for offline models)."""
        return await self.complete(self.messages(prompt))

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        on_delta: OnDelta | None = None,
        on_queue: OnQueue | None = None,
    ) -> Result:
        """One chat completion, with retries, back-off and the outage breaker. ``on_delta`` is
        called with each piece of content as it arrives (a non-streamed answer: once, whole),
        and with ``None`` when an attempt failed and the answer starts over; ``on_queue`` with
        the call's place in line while it waits for one of the model's ``max_concurrency``
        slots, then 0 (:class:`Slots`)."""
        ep = self.endpoint
        if not self.breaker.allow():
            return Failure(
                ep.name,
                "outage",
                f"the model is under outage after {self.breaker.failures} consecutive failures",
                attempts=0,
            )
        body: dict[str, Any] = {**ep.params, "model": ep.model, "messages": list(messages)}
        if ep.stream:
            body["stream"] = True
            if ep.stream_usage:
                body["stream_options"] = {"include_usage": True}
        t0 = time.perf_counter()
        attempt = 0
        since = await self.slots.acquire(on_queue)
        ended = False
        try:
            while True:
                attempt += 1
                try:
                    got = await _within(self._attempt(body, on_delta), ep.timeout or None)
                except asyncio.TimeoutError:
                    got = _Attempt(
                        Failure(ep.name, "timeout", f"no complete answer within {ep.timeout} s"),
                        retryable=True,
                    )
                except Exception as exc:  # noqa: BLE001 - no call may raise into its caller
                    log.exception("model %s: the call failed unexpectedly", ep.name)
                    got = _Attempt(Failure(ep.name, "bad_response", f"{type(exc).__name__}: {exc}"))
                if got.result.ok or not got.retryable or attempt > ep.max_retries:
                    break
                wait = self._wait(attempt, got)
                if wait is None:
                    break
                log.info(
                    "model %s: attempt %d failed (%s); retrying in %.2f s",
                    ep.name,
                    attempt,
                    got.result.reason,
                    wait,
                )
                self.waits.append(wait)
                if on_delta is not None:
                    on_delta(None)
                await self.sleep(wait)
            ended = True
        finally:  # a cancelled call's time is not a call's length
            self.slots.release(since if ended else None)
        result = got.result
        if isinstance(result, Answer):
            result = replace(result, attempts=attempt)
        else:
            detail = clean_text(result.detail)[:500]
            result = Failure(ep.name, result.reason, detail, attempt, time.perf_counter() - t0)
            log.warning(
                "model %s: no answer after %d attempt(s): %s (%s)",
                ep.name,
                attempt,
                result.reason,
                result.detail,
            )
        self.breaker.record(result.ok)
        return result

    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        """``POST {base_url}/{path}`` with a JSON ``body`` (e.g. ``moderations``): the reply's
        JSON, or a :class:`Failure` (HTTP error, timeout after ``timeout`` s, connection,
        not JSON); retried like a chat call up to ``max_retries`` times. No call raises."""
        import aiohttp

        ep = self.endpoint
        url = ep.base_url.rstrip("/") + "/" + path.lstrip("/")
        headers = {**self._headers(), "Accept": "application/json"}

        async def once() -> _Attempt | Any:
            async with self._http().post(url, json=body, headers=headers, proxy=self._proxy) as r:
                raw = await self._read_body(r, 1 << 20)
                if raw is None:
                    return _Attempt(Failure(ep.name, "too_long", "the reply is over 1 MiB"))
                if r.status != 200:
                    return self._http_failure(r, raw)
                try:
                    return _json(raw)
                except _Malformed as exc:
                    return _Attempt(Failure(ep.name, "bad_response", str(exc)))

        attempt = 0
        while True:
            attempt += 1
            try:
                got = await _within(once(), ep.timeout or None)
            except asyncio.TimeoutError:
                got = _Attempt(Failure(ep.name, "timeout", f"no reply within {ep.timeout} s"), True)
            except (aiohttp.ClientError, OSError) as exc:
                got = _Attempt(Failure(ep.name, "connection", f"{type(exc).__name__}: {exc}"), True)
            if not isinstance(got, _Attempt):
                return got
            if not got.retryable or attempt > ep.max_retries:
                return got.result
            wait = self._wait(attempt, got)
            if wait is None:
                return got.result
            await self.sleep(wait)

    def _wait(self, attempt: int, got: _Attempt) -> float | None:
        ep = self.endpoint
        if got.retry_after is not None:
            if got.retry_after > ep.max_retry_after:
                return None
            return got.retry_after
        base = min(ep.backoff_max, ep.backoff * 2 ** (attempt - 1))
        return base * (0.5 + 0.5 * self.rng.random())

    async def _attempt(self, body: dict[str, Any], on_delta: OnDelta | None = None) -> _Attempt:
        import aiohttp

        ep = self.endpoint
        t0 = time.perf_counter()
        try:
            http = self._http()
            async with http.post(
                ep.url, json=body, headers=self._headers(), proxy=self._proxy
            ) as r:
                if r.status != 200:
                    raw = await self._read_body(r, 1 << 16)
                    return self._http_failure(r, b"" if raw is None else raw)
                if ep.stream:
                    return await self._read_stream(r, body, t0, on_delta)
                raw = await self._read_body(r, _limits(ep.max_answer_chars)[0])
                if raw is None:
                    return self._too_long("the response is too large")
                got = self._read_json(raw, body, t0)
            if on_delta is not None and isinstance(got.result, Answer):
                on_delta(got.result.text)
            return got
        except asyncio.TimeoutError as exc:  # aiohttp's socket timeouts (the call's own: above)
            detail = f"{type(exc).__name__} after {ep.timeout} s"
            return _Attempt(Failure(ep.name, "timeout", detail), retryable=True)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
            return _Attempt(Failure(ep.name, "dropped", f"connection dropped: {exc}"), True)
        except aiohttp.ClientResponseError as exc:  # a malformed response (status line, headers)
            return _Attempt(Failure(ep.name, "bad_response", f"{type(exc).__name__}: {exc}"))
        except (aiohttp.ClientError, OSError) as exc:
            return _Attempt(Failure(ep.name, "connection", f"{type(exc).__name__}: {exc}"), True)

    def _http_failure(self, r: Any, raw: bytes) -> _Attempt:
        name, status = self.endpoint.name, r.status
        try:
            err = json.loads(raw).get("error", {})
            message = str(err.get("message", "") if isinstance(err, dict) else err)
        except (ValueError, AttributeError, RecursionError):
            message = raw[:200].decode("utf-8", "replace")
        message = message[:300]
        if status in (401, 403):
            reason = "unauthorized"
            env = self.endpoint.api_key_env
            message += f" (is the key in ${env} right?)" if env else " (set api_key_env)"
        else:
            reason = "rate_limited" if status == 429 else f"http_{status}"
        retry_after = None
        if status in (429, 503):
            retry_after = parse_retry_after(r.headers.get("Retry-After"))
        detail = f"HTTP {status}: {message}".strip()
        return _Attempt(Failure(name, reason, detail), status in RETRY_STATUSES, retry_after)

    def _answer(
        self,
        text: str,
        finish: str | None,
        ttft: float,
        t0: float,
        usage: tuple[int, int] | None,
        body: dict[str, Any],
        deltas: int | None,
    ) -> _Attempt:
        """An answer, its tokens from ``usage`` (prompt, completion; checked by
        :func:`_usage`) or estimated (see :class:`Answer`)."""
        if usage is not None:
            (pt, ct), source = usage, "server"
        else:
            chars = "".join(str(m.get("content", "")) for m in body["messages"])
            pt = estimate_tokens(chars)
            ct = deltas if deltas is not None else estimate_tokens(text)
            source = "estimated"
        total = time.perf_counter() - t0
        return _Attempt(Answer(self.endpoint.name, text, finish, ttft, total, pt, ct, source))

    def _too_long(self, what: str) -> _Attempt:
        cap = self.endpoint.max_answer_chars
        return _Attempt(
            Failure(
                self.endpoint.name,
                "too_long",
                f"{what}: stopped at the cap of max_answer_chars = {cap} characters (raise it "
                "in the model's configuration, or set params.max_tokens)",
            )
        )

    async def _read_body(self, r: Any, limit: int) -> bytes | None:
        """The response's body, or None (and the connection closed) past ``limit`` bytes."""
        buf = bytearray()
        async for piece in r.content.iter_any():
            buf += piece
            if len(buf) > limit:
                r.close()
                return None
        return bytes(buf)

    def _read_json(self, raw: bytes, body: dict[str, Any], t0: float) -> _Attempt:
        """A non-streamed answer, read by the same rules as a stream's chunks (:func:`_chunk`)."""
        try:
            data = _json(raw)
            if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
                raise _Malformed(f"not a chat completion: {_show(data)}")
            if not data["choices"]:
                raise _Malformed("not a chat completion: no choices")
            parts, finish = _choices(data["choices"][:1], "message")
            usage = _usage(data.get("usage"))
        except _Malformed as exc:
            return _Attempt(Failure(self.endpoint.name, "bad_response", str(exc)))
        text = "".join(parts)
        if len(text) > self.endpoint.max_answer_chars:
            return self._too_long(f"the answer has {len(text)} characters")
        ttft = time.perf_counter() - t0
        return self._answer(text, finish, ttft, t0, usage, body, None)

    async def _read_stream(
        self, r: Any, body: dict[str, Any], t0: float, on_delta: OnDelta | None = None
    ) -> _Attempt:
        """Read a streamed answer: the pieces of content that arrive in one read of the
        response go to ``on_delta`` at once, joined (one call per read, not per token).

        Every chunk is read by :func:`_chunk`; anything that is not a well-formed chunk is a
        ``bad_response`` failure, an answer past ``max_answer_chars`` (or a stream far larger
        than such an answer could need) a ``too_long`` one: the connection is closed either way.
        """
        name = self.endpoint.name
        cap = self.endpoint.max_answer_chars
        max_bytes, max_event = _limits(cap)
        parts: list[str] = []
        chars, size = 0, 0
        first: float | None = None
        finish: str | None = None
        usage: tuple[int, int] | None = None
        deltas, done, ended = 0, False, False
        decoder = SSEDecoder()
        chunks = r.content.iter_any()
        while not (done or ended):
            try:
                piece = await chunks.__anext__()
                size += len(piece)
                events = decoder.feed(piece)
            except StopAsyncIteration:
                events, ended = decoder.close(), True
            if size > max_bytes or decoder.pending > max_event:
                r.close()
                return self._too_long(f"the stream sent {size} bytes")
            new = len(parts)
            for data in events:
                if data[:1] != b"{" and data.strip() in (b"[DONE]", b""):
                    if data.strip():
                        done = True
                        break
                    continue  # an empty data line (a keep-alive)
                try:
                    got = _chunk(_json(data))
                except _Malformed as exc:
                    r.close()
                    return _Attempt(Failure(name, "bad_response", str(exc)))
                if got.error is not None:
                    r.close()
                    fail = Failure(name, "http_500", f"error in the stream: {got.error}")
                    return _Attempt(fail, True)
                usage = got.usage or usage
                finish = got.finish or finish
                for text in got.parts:
                    parts.append(text)
                    chars += len(text)
                    deltas += 1
            if chars > cap:
                r.close()
                return self._too_long(f"the answer passed {cap} characters")
            if len(parts) > new:
                if first is None:
                    first = time.perf_counter()
                if on_delta is not None:
                    on_delta(parts[new] if len(parts) == new + 1 else "".join(parts[new:]))
        if not done and finish is None:
            return _Attempt(Failure(name, "dropped", "the stream ended before [DONE]"), True)
        if done and not ended:
            await _drain(chunks)
        ttft = (first if first is not None else time.perf_counter()) - t0
        return self._answer("".join(parts), finish, ttft, t0, usage, body, deltas)


# ------------------------------------------------------------------ reading what a model sends
#: C0 control characters other than tab, line feed and carriage return (PostgreSQL cannot store
#: NUL in text; the others are invisible), and UTF-16 surrogates left alone by a JSON escape
#: (not encodable as UTF-8).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SURROGATES = re.compile("[\ud800-\udfff]")
#: The longest finish reason kept (``battle_answers.finish_reason`` holds 40 characters).
MAX_FINISH = 40
#: The largest token count accepted from a server's ``usage`` (a 32-bit column).
MAX_TOKENS = 2**31 - 1


def with_image(messages: Sequence[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    """``messages`` with an image on the first user message, as OpenAI-compatible content
    parts: ``[{"type": "text", "text": …}, {"type": "image_url", "image_url": {"url": url}}]``
    (``url``: a ``data:image/…;base64,…`` URL or an https address). A conversation's image
    belongs to its first prompt, so every later turn sends it again there."""
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "user":
            text = m.get("content")
            parts = list(text) if isinstance(text, list) else [{"type": "text", "text": text}]
            m["content"] = [*parts, {"type": "image_url", "image_url": {"url": url}}]
            break
    return out


def clean_text(text: str) -> str:
    """``text`` as the arena keeps it: C0 control characters other than tab, line feed and
    carriage return removed (a NUL included), a lone surrogate (a broken ``\\ud800`` escape)
    replaced by U+FFFD. Every model answer, finish reason and failure detail is read through
    it, so what is relayed is what is stored, on SQLite and PostgreSQL alike."""
    if _CONTROLS.search(text) is not None:
        text = _CONTROLS.sub("", text)
    if _SURROGATES.search(text) is not None:
        text = _SURROGATES.sub("\ufffd", text)
    return text


def prompt_problem(text: str) -> str | None:
    """What is wrong with a prompt, or None: the one check of every prompt the arenas take
    (a prompts file of ``auto`` or of the page's pool, a prompt typed on the page). A prompt
    must hold more than white space, and no character :func:`clean_text` would remove or
    replace: no control character other than tab, line feed and carriage return (a NUL cannot
    be stored in PostgreSQL), no lone surrogate (not encodable as UTF-8)."""
    if not text.strip():
        return "is empty or only white space"
    bad = _CONTROLS.search(text) or _SURROGATES.search(text)
    if bad is not None:
        return (
            f"holds the control character U+{ord(bad.group()):04X} at position {bad.start()}; "
            "remove it"
        )
    return None


def _limits(cap: int) -> tuple[int, int]:
    """The most bytes a response may bring for an answer of at most ``cap`` characters, in
    all and in one event (generous: a chunk's JSON around each token, ``\\uXXXX`` escapes)."""
    return 256 * cap + (1 << 20), 8 * cap + (1 << 16)


class _Malformed(Exception):
    """What a model sent is not a chat completion (the message says what is wrong)."""


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # invalid JSON, UTF-8 or nesting
        shown = data[:100].decode("utf-8", "replace")
        raise _Malformed(f"not JSON ({type(exc).__name__}): {shown!r}") from None


@dataclass
class _Chunk:
    parts: list[str]
    finish: str | None
    usage: tuple[int, int] | None
    error: str | None


def _chunk(obj: Any) -> _Chunk:
    """One streamed chunk ``{"choices": [{"delta": {"content": …}, "finish_reason": …}],
    "usage": …}`` or ``{"error": …}``; :class:`_Malformed` for any other shape."""
    if not isinstance(obj, dict):
        raise _Malformed(f"a chunk that is not a JSON object: {_show(obj)}")
    if obj.get("error"):
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        return _Chunk([], None, None, clean_text(str(msg))[:300])
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise _Malformed(f"choices is {_show(choices)}, not a list")
    parts, finish = _choices(choices or (), "delta")
    return _Chunk(parts, finish, _usage(obj.get("usage")), None)


def _choices(choices: Any, key: str) -> tuple[list[str], str | None]:
    """The content pieces and the finish reason of a chunk's ``choices`` (``key``: ``delta``
    for a stream, ``message`` for a whole answer)."""
    parts: list[str] = []
    finish = None
    for ch in choices:
        if not isinstance(ch, dict):
            raise _Malformed(f"a choice that is not an object: {_show(ch)}")
        piece = ch.get(key)
        if piece is None:
            piece = {}
        elif not isinstance(piece, dict):
            raise _Malformed(f"{key} is {_show(piece)}, not an object")
        content = piece.get("content")
        if content is not None:
            if not isinstance(content, str):
                raise _Malformed(f"{key}.content is {_show(content)}, not a string")
            if content:
                parts.append(clean_text(content))
        reason = ch.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str) or len(reason) > MAX_FINISH:
                raise _Malformed(
                    f"finish_reason is {_show(reason)}, not a string of at most "
                    f"{MAX_FINISH} characters"
                )
            finish = clean_text(reason) or finish
    return parts, finish


def _usage(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens from a ``usage`` object; None without completion tokens
    (then they are estimated); :class:`_Malformed` when a count is not a whole number in
    [0, 2³¹ − 1]."""
    if usage is None:
        return None
    hint = "; set stream_usage = false to estimate tokens instead"
    if not isinstance(usage, dict):
        raise _Malformed(f"usage is {_show(usage)}, not an object{hint}")
    if usage.get("completion_tokens") is None:
        return None
    out = []
    for key in ("prompt_tokens", "completion_tokens"):
        v = usage.get(key)
        if v is None:
            out.append(0)
            continue
        ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= MAX_TOKENS
        if not ok or v != int(v):
            raise _Malformed(f"usage.{key} is {_show(v)}, not a whole number >= 0{hint}")
        out.append(int(v))
    return out[0], out[1]
