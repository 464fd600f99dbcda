"""Who votes on the ``/arena`` page, and how much one visitor may ask of the arena
(docs/guides/arena-page.md).

An identity is an annotator of the arena like any other: an anonymous *visitor* (made on the
first visit, unless the arena is invite-only) or an annotator who signed in with a key. It is
carried by a signed cookie ``sa_arena`` = ``<annotator id>.<expiry>.<HMAC-SHA256>`` (HttpOnly,
SameSite=Strict); the key signing it lives in the database, so every worker accepts it. Posts
from the page carry a CSRF token (an HMAC of the identity) in a header and must come from this
site (Origin).

Limits (settings ``[arena_page]``), kept apart from the API keys' rate limit: token buckets
per identity and per network address on battles started, and on new identities per address
(in memory, per worker); and caps on battles served but not voted on, per identity and per
address, counted in the database (exact across workers) in the transaction that stores the
battle, after an in-memory pre-check of the identity's battles served by this worker.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from . import store
from .errors import ApiError
from .security import OpenBattles, Principal, RateLimiter

__all__ = ["COOKIE", "Visitors", "refuse_open"]

COOKIE = "sa_arena"


class Visitors:
    """Identities of the arena page and their limits (module docstring)."""

    def __init__(self, engine: Any, page: Any) -> None:
        self.engine = engine
        self.page = page
        self._secret: bytes | None = None
        self.names: dict[int, str | None] = {}
        self.battles = RateLimiter(page.visitor_battles_per_hour / 3600.0, 20)
        self.addresses = RateLimiter(page.address_battles_per_hour / 3600.0, 100)
        self.new = RateLimiter(page.visitors_per_hour / 3600.0, 5)
        #: battles this worker served and that have no vote yet, per identity (a pre-check:
        #: the database counts every worker's at insert)
        self.open = OpenBattles()

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = store.held.arena_secret(self.engine)
        return self._secret

    def _mac(self, text: str) -> str:
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()

    # ------------------------------------------------------------------ cookies
    def cookie(self, annotator_id: int, now: float | None = None) -> tuple[str, int]:
        """The cookie value for an identity and its max-age in seconds."""
        age = int(self.page.cookie_days * 86400)
        body = f"{annotator_id}.{int((now or time.time()) + age)}"
        return f"{body}.{self._mac('id:' + body)}", age

    def identity(self, value: str | None) -> int | None:
        """The annotator id of a valid, unexpired cookie, else None."""
        if not value or value.count(".") != 2:
            return None
        aid, expiry, mac = value.split(".")
        if not (aid.isdigit() and expiry.isdigit()) or int(expiry) < time.time():
            return None
        if not hmac.compare_digest(mac, self._mac(f"id:{aid}.{expiry}")):
            return None
        return int(aid)

    def who(self, cookie: str | None) -> Principal | None:
        """The principal of a cookie (None: no valid identity)."""
        aid = self.identity(cookie)
        return None if aid is None else self.principal(aid)

    def needs_database(self, cookie: str | None) -> bool:
        """Whether :meth:`who` would read the database (the signing key or the identity not
        known yet in this worker): then it runs in a thread, else on the event loop."""
        if self._secret is None:
            return True
        head = cookie.split(".", 1)[0] if cookie else ""
        return head.isdigit() and int(head) not in self.names

    def csrf(self, annotator_id: int) -> str:
        """The CSRF token of an identity (sent back in the ``X-CSRF-Token`` header)."""
        return self._mac(f"csrf:{annotator_id}")[:32]

    def principal(self, annotator_id: int) -> Principal | None:
        """The identity as a principal (None when the annotator is unknown or revoked)."""
        if annotator_id not in self.names:
            with self.engine.connect() as conn:
                r = store.held.annotator_by_id(conn, annotator_id)
            ok = r is not None and r.revoked_at is None and r.role != "imported"
            self.names[annotator_id] = r.name if ok else None
        name = self.names[annotator_id]
        return None if name is None else Principal(annotator_id, name, "annotator", "", "")

    def new_visitor(self, address: str) -> int:
        """A new anonymous identity (429 when this address made too many lately)."""
        self._limited(self.new.take(f"new:{address}"), "new identities from your address")
        with self.engine.begin() as conn:
            aid, name = store.held.new_visitor(conn, time.time())
        self.names[aid] = name
        return aid

    # ------------------------------------------------------------------ limits
    @staticmethod
    def _limited(wait: float, what: str) -> None:
        if wait > 0:
            raise ApiError(429, "rate_limited", f"too many {what}; wait {wait:.0f} s", "cookie")

    def check_battle(self, who: Principal, address: str) -> tuple[int, int, float]:
        """Refuse (429) a battle over the identity's or the address's rates, or over the
        identity's cap on battles without a vote as far as this worker knows — all in memory, so
        a flood beyond them costs the database and the models nothing. Returns the caps
        (identity's, address's) and the time now, that :func:`~.store.arena.insert_held` counts exactly,
        in the database, in the transaction that stores the battle."""
        self._limited(self.battles.take(f"id:{who.id}"), "battles")
        self._limited(self.addresses.take(f"ip:{address}"), "battles from your address")
        now = time.time()
        if self.open.over(who.id, 1, self.page.visitor_open, now):
            refuse_open(self.page, self.open.count(who.id, now), 0)
        return self.page.visitor_open, self.page.address_open, now


def refuse_open(page: Any, mine: int, there: int) -> None:
    """429 for a battle over a cap (settings ``page``) on battles without a vote: the
    identity's ``mine`` or its address's ``there``."""
    if mine >= page.visitor_open:
        raise ApiError(
            429,
            "too_many_open",
            f"you have {mine} battles without a vote; vote on them first",
            "cookie",
        )
    raise ApiError(
        429,
        "too_many_open",
        f"{there} battles from your address have no vote yet; try again later",
        "cookie",
    )
