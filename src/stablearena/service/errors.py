"""The live arena's refusals: each becomes the JSON error ``{"error": {"status", "code",
"message", "field"}}`` (:func:`stablearena.service.security.error_body`), and the messages
that tell an admin what to do."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import StableArenaError, TooFewRecords

__all__ = [
    "database_unreachable",
    "fault_text",
    "ApiError",
    "RateLimited",
    "Invalid",
    "TooLarge",
    "Reply",
    "answer",
    "invalid_message",
    "rate_limited_message",
    "retry_after",
    "for_the_service",
    "waiting_message",
]


def error_body(status: int, code: str, message: str, field: str | None = None) -> bytes:
    """The JSON of every refusal: ``{"error": {"status", "code", "message", "field"}}``."""
    return json.dumps(
        {"error": {"status": status, "code": code, "message": message, "field": field}},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()


class ApiError(Exception):
    """An expected refusal: HTTP ``status``, a short ``code``, a message and the field at fault
    (``retry_after``: seconds, sent as the ``Retry-After`` header)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after


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


def for_the_service(message: str) -> str:
    """A library message as the arena's admin reads it: the command line's ``--min-records``
    (δ) is the setting ``arena.min_records`` here."""
    return message.replace(
        "--min-records",
        'arena.min_records (PATCH /v1/admin/config {"min_records": N})',
    )


def fault_text(exc: BaseException) -> str:
    """``"OperationalError: <the driver's first line>"``: a database fault in one line."""
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    """The driver's message (SQLAlchemy's wrapper adds the statement and a link)."""
    orig = getattr(exc, "orig", None)
    return (str(orig if orig is not None else exc).strip().splitlines() or [""])[0]


def database_unreachable(exc: BaseException) -> ApiError:
    """The refusal of a request whose database read failed because the database does not
    answer (stopped, restarting, unreachable: SQLAlchemy's ``OperationalError``): 503
    ``storage_unavailable``, as for a failed write — not a 500 that says "a bug"."""
    return ApiError(
        503,
        "storage_unavailable",
        f"the database cannot be reached now ({fault_text(exc)}); nothing was recorded, "
        "retry later",
    )


def waiting_message(exc: TooFewRecords) -> str:
    """Why a young arena has no am-ELO leaderboard yet, and what the admin can do about it."""
    return (
        f"waiting for an annotator with arena.min_records={exc.min_records:g} votes (the most "
        f"so far: {exc.most:g}); the first am-ELO leaderboard follows then. Lower it with "
        'PATCH /v1/admin/config {"min_records": N} or --set arena.min_records=N'
    )


@dataclass(frozen=True)
class Reply:
    """A JSON answer: status, body, extra headers."""

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


def rate_limited_message(exc: RateLimited) -> str:
    return f"too many requests for this key; retry in {exc.wait:.2f} s"


def retry_after(exc: RateLimited) -> str:
    """The ``Retry-After`` header of a 429 (whole seconds, at least 1)."""
    return str(max(1, round(exc.wait + 0.5)))


async def answer(route: Callable[..., Awaitable[Reply]], *args: Any) -> Reply:
    """``route(*args)``, its expected refusals turned into their JSON errors."""
    try:
        return await route(*args)
    except ApiError as exc:
        headers = ()
        if exc.retry_after is not None:
            headers = ((b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode()),)
        return Reply(exc.status, error_body(exc.status, exc.code, exc.message, exc.field), headers)
    except Invalid as exc:
        message, fld = invalid_message(exc.errors)
        return Reply(422, error_body(422, "invalid_input", message, fld))
    except RateLimited as exc:
        return Reply(
            429,
            error_body(429, "rate_limited", rate_limited_message(exc), "authorization"),
            ((b"retry-after", retry_after(exc).encode()),),
        )
    except StableArenaError as exc:
        return Reply(422, error_body(422, "invalid_input", str(exc)))
