"""Python client of the live arena (``stablearena serve``), on httpx.

::

    from stablearena.service.client import ArenaClient

    with ArenaClient("http://127.0.0.1:8000", key) as arena:
        for battle in arena.next_battles(k=2):
            arena.vote(battle["battle_id"], "model_a")     # safe to retry
        arena.leaderboard()                                 # the `rank --format json` payload
        arena.annotators()                                  # admin key: the screening

Every refusal raises :class:`ArenaError` with the server's status, code, message and field.
:meth:`ArenaClient.vote` retries a lost connection or a 5xx/429 answer (a vote is idempotent:
the same vote again returns the stored one), so a vote is recorded exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from ..errors import StableArenaError

__all__ = ["ArenaClient", "ArenaError"]


class ArenaError(StableArenaError):
    """The arena refused a request (``status``: HTTP status; ``code``, ``field`` from its JSON)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field: {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class ArenaClient:
    """A live arena at ``url``, used with ``key`` (an annotator's or the admin's).

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8000``.
        key: the key sent as ``Authorization: Bearer <key>``.
        timeout: seconds per request.
        retries: extra attempts of a vote (and of reads) after a lost connection, a 5xx or a
            429 answer, with exponential back-off (honouring ``Retry-After``).
        transport: an httpx transport (e.g. for tests).
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = url.rstrip("/")
        self.retries = int(retries)
        self._http = client or httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )
        if client is not None and key:
            self._http.headers.update(headers)

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ArenaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(
        self, method: str, path: str, *, retry: bool = False, raw: bool = False, **kw: Any
    ) -> Any:
        attempts = 1 + (self.retries if retry else 0)
        delay = 0.05
        for attempt in range(attempts):
            try:
                resp = self._http.request(method, path, **kw)
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise ArenaError(0, "unreachable", f"{method} {path}: {exc}") from None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if resp.status_code < 400:
                return resp.content if raw else resp.json()
            if (resp.status_code >= 500 or resp.status_code == 429) and attempt + 1 < attempts:
                wait = resp.headers.get("Retry-After")
                time.sleep(float(wait) if wait and wait.isdigit() else delay)
                delay = min(delay * 2, 2.0)
                continue
            raise _error(resp)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ annotators
    def next_battles(self, k: int = 1, models: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The next ``k`` battles for this key's annotator (``models``: restrict the
        candidates): dicts with ``battle_id, model_a, model_b, strategy, propensity,
        expires_at``. Not retried (a retry would serve new battles; unvoted ones expire)."""
        body: dict[str, Any] = {"k": k}
        if models is not None:
            body["models"] = list(models)
        return self._request("POST", "/v1/battles", json=body)["battles"]

    def vote(self, battle_id: str, outcome: str) -> dict[str, Any]:
        """Vote ``model_a``, ``model_b``, ``tie`` or ``both_bad`` on a battle served to you.
        Durable when it returns; safe to retry (``replayed`` is true when the server already
        had this vote)."""
        return self._request(
            "POST", f"/v1/battles/{battle_id}/vote", json={"outcome": outcome}, retry=True
        )

    # ------------------------------------------------------------------ reading
    def leaderboard(
        self, method: str = "am-elo", ci: str = "none", level: float = 0.95, anony: str = "only"
    ) -> dict[str, Any]:
        """The ``stablearena rank --format json`` payload plus ``as_of_vote`` and ``fitted_at``;
        ``anony="all"``: also the votes of battles whose answer named a model (left out of the
        default board)."""
        params: dict[str, Any] = {"method": method, "ci": ci, "level": level}
        if anony != "only":
            params["anony"] = anony
        return self._request("GET", "/v1/leaderboard", params=params, retry=True)

    def annotators(self) -> dict[str, Any]:
        """The ``stablearena annotators --format json`` payload with the arena's decisions (admin)."""
        return self._request("GET", "/v1/annotators", retry=True)

    def models(self) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/models", retry=True)["models"]

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/healthz", retry=True)

    def export(self, format: str = "jsonl", history: bool = False, texts: bool = False) -> bytes:
        """The vote log as ``jsonl``, ``csv`` or ``parquet`` bytes in FastChat's public battle
        schema (admin; ``texts``: also the conversations, ``conversation_a`` /
        ``conversation_b``)."""
        params = {"format": format, "history": history}
        if texts:
            params["texts"] = True
        return self._request("GET", "/v1/export", params=params, retry=True, raw=True)

    # ------------------------------------------------------------------ admin
    def add_model(
        self, name: str, boost: float | None = None, boost_until: int | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if boost is not None:
            body["boost"] = boost
        if boost_until is not None:
            body["boost_until"] = boost_until
        return self._request("POST", "/v1/admin/models", json=body)["model"]

    def update_model(self, name: str, **changes: Any) -> dict[str, Any]:
        """``retired=True``, ``outage=True/False``, ``boost=5.0``, ``boost_until=3000``."""
        return self._request("PATCH", f"/v1/admin/models/{_segment(name)}", json=changes)["model"]

    def create_annotator(self, name: str, role: str = "annotator") -> str:
        """A new key for annotator ``name`` (returned once)."""
        return self._request("POST", "/v1/admin/annotators", json={"name": name, "role": role})[
            "key"
        ]

    def revoke_annotator(self, name: str) -> None:
        self._request("DELETE", f"/v1/admin/annotators/{_segment(name)}")

    def config(self, **changes: Any) -> dict[str, Any]:
        """The arena's configuration; with keyword arguments, change it first."""
        if changes:
            return self._request("PATCH", "/v1/admin/config", json=changes)
        return self._request("GET", "/v1/admin/config", retry=True)

    def refit(self) -> dict[str, Any]:
        """Refit now (admin): afterwards the leaderboard includes every vote recorded so far."""
        return self._request("POST", "/v1/admin/refit", retry=True)


def _error(resp: httpx.Response) -> ArenaError:
    try:
        err = resp.json()["error"]
        return ArenaError(
            resp.status_code, err.get("code", ""), err.get("message", ""), err.get("field")
        )
    except Exception:
        return ArenaError(resp.status_code, "http_error", resp.text[:200])


def _segment(name: str) -> str:
    """``name`` as one path segment: percent-encoded (``/``, ``?``, ``#``, ``%``, spaces,
    non-ASCII), and ``.`` / ``..`` encoded too (URL libraries remove dot segments)."""
    out = quote(name, safe="")
    return out.replace(".", "%2E") if set(name) <= {"."} else out
