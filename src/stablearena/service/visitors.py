"""Who votes on the ``/arena`` page, and how much one visitor may ask of the arena
(docs/guides/arena-page.md).

An identity is an annotator of the arena like any other: an anonymous *visitor* or an
annotator who signed in with a key. It is carried by a signed cookie ``sa_arena`` =
``<identity>.<expiry>.<HMAC-SHA256>`` (HttpOnly, SameSite=Strict; read by the one token parser,
:func:`~.security.parse_cookie`: anything malformed is no identity); the key signing it lives in
the database, so every worker of every host accepts it. The identity is the annotator's number or, for a
visitor, ``v<16 hex>``: a visitor's annotator row (``visitor-<16 hex>``) is made on its first
battle, not when the page is opened (unless the arena is invite-only, opening the page gives a
new visitor a cookie and nothing more: a crawler fills no table). Posts from the page carry a
CSRF token (an HMAC of the identity) in a header and must come from this site (Origin).

A revoked key ends its page identity on every worker: the identity's validity is read from the
worker's registry (its keys, reloaded whenever the registry revision in the database moves —
revoking bumps it — within ``poll_seconds``), and every battle and vote is stored only if the
registry it was decided by is still current (the revision, read in the transaction that stores
it), so a revocation committed before is always seen.

Limits (settings ``[arena_page]``), kept apart from the API keys' rate limit: token buckets
per identity and per network address on battles started, and on new identities per address —
rows of the database with ``limits = "database"`` (the default on PostgreSQL: one limit for
every ``serve`` host of the database, :class:`~.security.DatabaseRateLimiter`), else shared by
the workers of ``serve --workers N`` (:class:`~.security.SharedRateLimiter`: per host); and
caps on battles served but not voted on, per identity and per address, counted in the database
(exact across workers and hosts) in the transaction that stores the battle, after an in-memory
pre-check of the identity's battles served by this worker (less those the database says were
voted on elsewhere).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any, NamedTuple

from . import store
from .errors import ApiError
from .security import (
    Cookie,
    DatabaseRateLimiter,
    OpenBattles,
    Principal,
    RateLimiter,
    limiter,
    parse_cookie,
)

__all__ = ["COOKIE", "Visit", "Visitors", "allowed", "refuse_open"]

COOKIE = "sa_arena"
#: The most identities a worker remembers (then it forgets them all and reads them again).
_CACHE = 100_000


class Visit(NamedTuple):
    """A valid page identity: ``ident`` as in the cookie (an annotator's number, or ``v<hex>``
    for a visitor) and its principal (``id`` 0: a visitor not stored yet)."""

    ident: str
    who: Principal


class Visitors:
    """Identities of the arena page and their limits (module docstring)."""

    def __init__(
        self, state: Any, page: Any, limits_fd: int | None = None, buckets: object = None
    ) -> None:
        self.state = state
        self.engine = state.engine
        self.page = page
        self._secret: bytes | None = None
        #: annotators not in the registry (None: unknown or not allowed), valid at ``_revision``
        self.names: dict[int, Principal | None] = {}
        #: page principals of annotators with a key, and the registry record each was made from
        self._keyed: dict[int, tuple[Principal, Principal]] = {}
        #: stored visitors' ids by identity ("v<hex>")
        self.ids: dict[str, int] = {}
        self._revision = state.revision

        def made(per_hour: float, burst: int, table: str) -> RateLimiter:
            return limiter(per_hour / 3600.0, burst, table, limits_fd, buckets)

        self.battles = made(page.visitor_battles_per_hour, 20, "page_battles")
        self.addresses = made(page.address_battles_per_hour, 100, "page_addresses")
        self.new = made(page.visitors_per_hour, 5, "page_new")
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
    def cookie(self, ident: int | str, now: float | None = None) -> tuple[str, int]:
        """The cookie value for an identity and its max-age in seconds."""
        age = int(self.page.cookie_days * 86400)
        body = f"{ident}.{int((now or time.time()) + age)}"
        return f"{body}.{self._mac('id:' + body)}", age

    def identity(self, value: str | None) -> Cookie | None:
        """The parts of a valid (signed), unexpired cookie, else None."""
        c = parse_cookie(value)
        if c is None or c.expiry < time.time():
            return None
        if not hmac.compare_digest(c.mac, self._mac(f"id:{c.ident}.{c.expiry}")):
            return None
        return c

    def visit(self, cookie: str | None) -> Visit | None:
        """The identity of a cookie (None: no valid identity, or a key's that was revoked or
        replaced since the cookie was given)."""
        c = self.identity(cookie)
        if c is None:
            return None
        if c.annotator_id is None:
            aid = self.ids.get(c.ident, 0)
            return Visit(c.ident, Principal(aid, "visitor-" + c.ident[1:], "annotator", "", ""))
        who = self.principal(c.annotator_id)
        if who is None or who.key_id != c.key_id:  # signed in with another key than its own
            return None
        return Visit(c.ident, who)

    def needs_database(self, cookie: str | None) -> bool:
        """Whether :meth:`visit` would read the database (the signing key or the identity not
        known yet in this worker): then it runs in a thread, else on the event loop."""
        if self._secret is None:
            return True
        c = parse_cookie(cookie)
        aid = None if c is None else c.annotator_id
        if aid is None:
            return False
        self._current()
        return aid not in self.state.principals and aid not in self.names

    def csrf(self, ident: int | str) -> str:
        """The CSRF token of an identity (sent back in the ``X-CSRF-Token`` header)."""
        return self._mac(f"csrf:{ident}")[:32]

    def _current(self) -> None:
        """Forget the keyless annotators read at an older registry revision (the registry —
        every key, revoked or not — is reloaded by every worker when the revision moves)."""
        rev = self.state.revision
        if rev != self._revision or len(self.names) > _CACHE:
            self.names = {}
            self._keyed = {}
            self._revision = rev

    def principal(self, annotator_id: int) -> Principal | None:
        """The identity as a principal, with the id of its live key ("" for a keyless
        annotator); None when the annotator is unknown, imported, or its key is revoked."""
        p = self.state.principals.get(annotator_id)
        if p is not None:  # an annotator with a key: the registry says whether it is revoked
            if p.revoked:
                return None
            made = self._keyed.get(annotator_id)
            if made is None or made[0] is not p:  # made from this registry's record
                made = self._keyed[annotator_id] = (
                    p,
                    Principal(annotator_id, p.name, "annotator", p.key_id, ""),
                )
            return made[1]
        self._current()
        if annotator_id not in self.names:
            with self.engine.connect() as conn:
                r = store.held.annotator_by_id(conn, annotator_id)
            ok = r is not None and r.revoked_at is None and r.role != "imported"
            self.names[annotator_id] = (
                Principal(annotator_id, r.name, "annotator", r.key_id or "", "") if ok else None
            )
        return self.names[annotator_id]

    def allowed(self, who: Principal) -> bool:
        """Whether ``who`` may still start battles and vote, by this worker's registry now: its
        key (if it signed in with one) neither revoked nor replaced."""
        return allowed(self.state, who)

    def new_visitor(self, address: str) -> str:
        """A new anonymous identity ``v<hex>`` (429 when this address made too many lately);
        nothing is stored until its first battle (:meth:`stored`)."""
        self._limited(self.new.take(f"new:{address}"), "new identities from your address")
        return "v" + secrets.token_hex(8)

    def stored(self, visit: Visit, create: bool) -> Principal | None:
        """The principal of ``visit`` with its annotator number: a visitor's row read or, with
        ``create``, made on first use (None: a visitor not stored, without ``create``)."""
        if visit.who.id:
            return visit.who
        aid = store.held.visitor_id(self.engine, visit.who.name, time.time(), create)
        if aid is None:
            return None
        if len(self.ids) > _CACHE:
            self.ids = {}
        self.ids[visit.ident] = aid
        return Principal(aid, visit.who.name, "annotator", "", "")

    # ------------------------------------------------------------------ limits
    @staticmethod
    def _limited(wait: float, what: str) -> None:
        if wait > 0:
            raise ApiError(429, "rate_limited", f"too many {what}; wait {wait:.0f} s", "cookie")

    def check_battle(self, who: Principal, address: str) -> tuple[int, int, float]:
        """Refuse (429) a battle over the identity's or the address's rates (in the database
        with ``limits = "database"``, else in memory), or over the identity's cap on battles
        without a vote as far as this worker knows (its battles, less those the database says
        were voted on through another worker or host) — a flood beyond them costs the models
        nothing. Returns the caps
        (identity's, address's) and the time now, that :func:`~.store.arena.insert_held` counts exactly,
        in the database, in the transaction that stores the battle."""
        self.check_rates(who, address)
        now = time.time()
        ob, cap = self.open, self.page.visitor_open
        if ob.over(who.id, 1, cap, now):
            # a vote, a stop or an abandon through another worker or host closes a battle
            # served here too: the database says which (a read by index, only at the cap; a
            # flood of battles is held back by the rates above first)
            ob.close(who.id, store.held.closed_battles(self.engine, ob.ids(who.id)))
        if ob.over(who.id, 1, cap, now):
            refuse_open(self.page, ob.count(who.id, now), 0)
        return self.page.visitor_open, self.page.address_open, now

    def battle_check_reads(self, who: Principal) -> bool:
        """Whether :meth:`check_battle` may read the database — the rates are rows of it
        (``limits = "database"``), or the identity is at its cap here (the database then says
        which of its battles were closed elsewhere) — so that it runs off the event loop;
        otherwise it is a few dictionary lookups, run in place (a thread hop cost more)."""
        if isinstance(self.battles, DatabaseRateLimiter):
            return True
        return self.open.over(who.id, 1, self.page.visitor_open, time.time())

    def check_rates(self, who: Principal, address: str) -> None:
        """Refuse (429) over the identity's or the address's rate of battles per hour — the
        rates a new battle and a new direct chat take from alike."""
        self._limited(self.battles.take(f"id:{who.id}", slot=who.id), "battles")
        self._limited(self.addresses.take(f"ip:{address}"), "battles from your address")


def allowed(state: Any, who: Principal) -> bool:
    """Whether the page identity ``who`` may still start battles and vote by the registry of
    ``state`` (an :class:`~.state.ArenaState`): an annotator with a key must hold it unrevoked
    and be signed in with that key (a revoked key replaced by a new one does not bring back the
    old key's cookies); a keyless one (a visitor, a judge) always may."""
    p = state.principals.get(who.id)
    if p is None:
        return True
    return not p.revoked and (not who.key_id or p.key_id == who.key_id)


def refuse_open(page: Any, mine: int, there: int) -> None:
    """429 for a battle over a cap (settings ``page``) on battles without a vote: the
    identity's ``mine`` or its address's ``there``."""
    if mine >= page.visitor_open:
        raise ApiError(
            429,
            "too_many_open",
            f"you have {mine} battles without a vote; vote on them first, or abandon them "
            "(Abandon them on the /arena page: POST /arena/battles/abandon)",
            "cookie",
        )
    raise ApiError(
        429,
        "too_many_open",
        f"{there} battles from your address have no vote yet; try again later",
        "cookie",
    )
