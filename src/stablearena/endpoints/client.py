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
escapes into the caller's loop. One reader (:func:`chunk_parts` for each streamed chunk,
:func:`message_parts` for a whole reply) takes the shapes the OpenAI format allows and turns any
other — a ``delta`` that is a string, ``choices: [1]``, ``content: 5``, invalid JSON or UTF-8,
an event longer than the answer cap — into a ``bad_response`` failure, which the outage breaker
counts like any other; an answer longer than ``max_answer_chars`` fails as ``too_long`` and its
connection is closed. NUL characters in an answer become U+FFFD (PostgreSQL's text cannot hold
NUL); a ``usage`` that is not numbers is ignored (the tokens are then estimated). Retries, back-off, bounded concurrency and the outage circuit
breaker are described on :class:`~stablearena.endpoints.config.ModelEndpoint`.
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
import time
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
    "Malformed",
    "chunk_parts",
    "message_parts",
    "estimate_tokens",
    "parse_retry_after",
]

log = logging.getLogger("stablearena.endpoints")

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
    ``unauthorized``, ``bad_response`` (not a chat completion), ``too_long`` (past the
    endpoint's ``max_answer_chars``), ``outage`` (the circuit breaker refused the call),
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


async def _read_capped(r: Any, limit: int) -> bytes | None:
    """The whole body of response ``r``, or ``None`` past ``limit`` bytes (read no further)."""
    buf = bytearray()
    while True:
        chunk = await r.content.read(65536)
        if not chunk:
            return bytes(buf)
        buf += chunk
        if len(buf) > limit:
            return None


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

    @property
    def pending(self) -> int:
        """Bytes of an event not yet ended (what a server sending no blank line piles up)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events that ``chunk`` completes."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:  # CRLF or CR line ends: make them LF (a CR last may be half a CRLF)
            keep = buf.endswith(b"\r")
            buf = buf[:-1] if keep else buf
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if keep else b"")
        *events, self._buf = buf.split(b"\n\n")
        return [d for d in map(_event_data, events) if d is not None]

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


class Malformed(ValueError):
    """A response that is not an OpenAI chat completion (what :func:`chunk_parts` and
    :func:`message_parts` refuse)."""


def _content(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"{where} is {type(value).__name__}, not text")
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _finish(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 64 else None


def _usage(value: Any) -> dict[str, int] | None:
    """``usage`` with whole, finite, non-negative token counts, or ``None`` (ignored)."""
    if not isinstance(value, dict):
        return None
    out = {}
    for key in ("prompt_tokens", "completion_tokens"):
        v = value.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        if v < 0 or v > 10**9:
            return None
        out[key] = int(v)
    return out if "completion_tokens" in out else None


def chunk_parts(obj: Any) -> tuple[list[str], str | None, dict[str, int] | None]:
    """The content pieces, finish reason and usage of one streamed chunk (a decoded JSON value):
    ``choices`` a list of objects whose ``delta`` is an object with text ``content`` (or none).
    Anything else raises :class:`Malformed`; an ``error`` object raises :class:`StreamError`."""
    if not isinstance(obj, dict):
        raise Malformed(f"a chunk is {type(obj).__name__}, not an object")
    if obj.get("error"):
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise StreamError(str(msg)[:300])
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise Malformed(f"choices is {type(choices).__name__}, not a list")
    parts, finish = [], None
    for k, ch in enumerate(choices):
        if not isinstance(ch, dict):
            raise Malformed(f"choices[{k}] is {type(ch).__name__}, not an object")
        delta = ch.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise Malformed(f"choices[{k}].delta is {type(delta).__name__}, not an object")
        text = _content(delta.get("content"), f"choices[{k}].delta.content")
        if text:
            parts.append(text)
        finish = _finish(ch.get("finish_reason")) or finish
    return parts, finish, _usage(obj.get("usage"))


def message_parts(obj: Any) -> tuple[str, str | None, dict[str, int] | None]:
    """The text, finish reason and usage of a whole (non-streamed) chat completion; anything but
    ``choices[0].message.content`` text (or null) raises :class:`Malformed`."""
    if not isinstance(obj, dict):
        raise Malformed(f"the reply is {type(obj).__name__}, not an object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed("no choices")
    ch = choices[0]
    if not isinstance(ch, dict) or not isinstance(ch.get("message"), dict):
        raise Malformed("choices[0].message is not an object")
    text = _content(ch["message"].get("content"), "choices[0].message.content")
    return text, _finish(ch.get("finish_reason")), _usage(obj.get("usage"))


class StreamError(Exception):
    """An ``error`` object sent inside a stream."""


@dataclass
class _Attempt:
    result: Result
    retryable: bool = False
    retry_after: float | None = None


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
        self._sem: asyncio.Semaphore | None = None
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

    def messages(self, prompt: str) -> list[dict[str, str]]:
        """The chat messages for a one-turn prompt (the system prompt first, if any)."""
        out = []
        if self.endpoint.system_prompt:
            out.append({"role": "system", "content": self.endpoint.system_prompt})
        out.append({"role": "user", "content": prompt})
        return out

    async def answer(self, prompt: str, prompt_id: str | None = None) -> Result:
        """The model's answer to a one-turn ``prompt`` (``prompt_id`` is for offline models)."""
        return await self.complete(self.messages(prompt))

    async def complete(
        self, messages: Sequence[dict[str, str]], on_delta: OnDelta | None = None
    ) -> Result:
        """One chat completion, with retries, back-off and the outage breaker. ``on_delta`` is
        called with each piece of content as it arrives (a non-streamed answer: once, whole),
        and with ``None`` when an attempt failed and the answer starts over."""
        ep = self.endpoint
        if not self.breaker.allow():
            return Failure(
                ep.name,
                "outage",
                f"the model is under outage after {self.breaker.failures} consecutive failures",
                attempts=0,
            )
        if self._sem is None:
            self._sem = asyncio.Semaphore(ep.max_concurrency)
        body: dict[str, Any] = {**ep.params, "model": ep.model, "messages": list(messages)}
        if ep.stream:
            body["stream"] = True
            if ep.stream_usage:
                body["stream_options"] = {"include_usage": True}
        t0 = time.perf_counter()
        attempt = 0
        async with self._sem:
            while True:
                attempt += 1
                try:
                    got = await _within(self._attempt(body, on_delta), ep.timeout or None)
                except asyncio.TimeoutError:
                    got = _Attempt(
                        Failure(ep.name, "timeout", f"no complete answer within {ep.timeout} s"),
                        retryable=True,
                    )
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
        result = got.result
        if isinstance(result, Answer):
            result = replace(result, attempts=attempt)
        else:
            result = Failure(
                ep.name, result.reason, result.detail, attempt, time.perf_counter() - t0
            )
            log.warning(
                "model %s: no answer after %d attempt(s): %s (%s)",
                ep.name,
                attempt,
                result.reason,
                result.detail,
            )
        self.breaker.record(result.ok)
        return result

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
                    return self._http_failure(r, await r.read())
                if ep.stream:
                    return await self._read_stream(r, body, t0, on_delta)
                raw = await _read_capped(r, 4 * ep.max_answer_chars + 65536)
                if raw is None:
                    cap = ep.max_answer_chars
                    return _Attempt(
                        Failure(ep.name, "too_long", f"the reply is longer than {cap:,} characters")
                    )
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
        except Exception as exc:  # noqa: BLE001 - whatever a server sends is a failed call
            log.exception("model %s: unexpected error reading the response", ep.name)
            detail = f"unexpected {type(exc).__name__}: {str(exc)[:200]}"
            return _Attempt(Failure(ep.name, "bad_response", detail))

    def _http_failure(self, r: Any, raw: bytes) -> _Attempt:
        name, status = self.endpoint.name, r.status
        try:
            message = json.loads(raw).get("error", {}).get("message", "")
        except (ValueError, AttributeError):
            message = raw[:200].decode("utf-8", "replace")
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
        usage: dict[str, Any] | None,
        body: dict[str, Any],
        deltas: int | None,
    ) -> _Attempt:
        """An answer, its tokens from ``usage`` or estimated (see :class:`Answer`)."""
        if usage and "completion_tokens" in usage:
            pt, ct = int(usage.get("prompt_tokens") or 0), int(usage["completion_tokens"])
            source = "server"
        else:
            chars = "".join(str(m.get("content", "")) for m in body["messages"])
            pt = estimate_tokens(chars)
            ct = deltas if deltas is not None else estimate_tokens(text)
            source = "estimated"
        total = time.perf_counter() - t0
        return _Attempt(Answer(self.endpoint.name, text, finish, ttft, total, pt, ct, source))

    def _read_json(self, raw: bytes, body: dict[str, Any], t0: float) -> _Attempt:
        ep = self.endpoint
        try:
            text, finish, usage = message_parts(json.loads(raw))
        except (ValueError, RecursionError) as exc:  # Malformed, JSON and UTF-8 errors
            return _Attempt(Failure(ep.name, "bad_response", f"not a chat completion: {exc}"))
        if len(text) > ep.max_answer_chars:
            cap = ep.max_answer_chars
            return _Attempt(
                Failure(ep.name, "too_long", f"the answer is longer than {cap:,} characters")
            )
        ttft = time.perf_counter() - t0
        return self._answer(text, finish, ttft, t0, usage, body, None)

    async def _read_stream(
        self, r: Any, body: dict[str, Any], t0: float, on_delta: OnDelta | None = None
    ) -> _Attempt:
        """Read a streamed answer: the pieces of content that arrive in one read of the
        response go to ``on_delta`` at once, joined (one call per read, not per token)."""
        name = self.endpoint.name
        cap = self.endpoint.max_answer_chars
        parts: list[str] = []
        first: float | None = None
        finish: str | None = None
        usage: dict[str, Any] | None = None
        deltas, done, ended, size = 0, False, False, 0
        decoder = SSEDecoder()
        chunks = r.content.iter_any()
        while not (done or ended):
            try:
                events = decoder.feed(await chunks.__anext__())
            except StopAsyncIteration:
                events, ended = decoder.close(), True
            if decoder.pending > 4 * cap + 65536:  # one event without end, past any answer
                return _Attempt(
                    Failure(name, "too_long", f"an event longer than {cap:,} characters")
                )
            new = len(parts)
            for data in events:
                if data[:1] != b"{" and data.strip() in (b"[DONE]", b""):
                    if data.strip():
                        done = True
                        break
                    continue  # an empty data line (a keep-alive)
                try:
                    got, fin, use = chunk_parts(json.loads(data))
                except StreamError as exc:
                    return _Attempt(Failure(name, "http_500", f"error in the stream: {exc}"), True)
                except (ValueError, RecursionError) as exc:  # Malformed, JSON and UTF-8 errors
                    shown = data[:100].decode("utf-8", "replace")
                    detail = f"malformed chunk ({exc}): {shown!r}"
                    return _Attempt(Failure(name, "bad_response", detail))
                usage = use or usage
                finish = fin or finish
                for text in got:
                    parts.append(text)
                    deltas += 1
                    size += len(text)
                if size > cap:
                    detail = f"the answer is longer than {cap:,} characters"
                    return _Attempt(Failure(name, "too_long", detail))
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
