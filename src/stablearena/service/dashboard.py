"""The live arena's dashboard: ``/`` shows the leaderboard and its figures from the latest
published fit and refreshes itself; ``/admin`` (after a login with the admin key) shows the
annotators and the Stable Arena's decisions with their reasons, the pair coverage and the
arena's health.

How it stays off the votes' path:

- **Drawn once per fit, elsewhere.** A watcher thread notices a newly published fit and hands
  its fitted object to a separate, low-priority render process (:mod:`.render`), which builds
  the pages with the HTML report's pieces (the same table macro, figures and styles) and stores
  them, gzip-compressed, in ``dashboard_views`` keyed by the fit. Every worker loads the newest
  stored view and serves its bytes as they are; a request never draws, fits or compresses.
- **Paced.** After a render of c CPU seconds the next waits c·(1/share − 1) seconds
  (``dashboard_share`` of one core at most), fits published meanwhile are skipped (the newest
  is drawn next), and nothing is drawn while nobody has opened the dashboard for
  ``dashboard_idle`` seconds.
- **Polled cheaply.** An open page asks ``/dashboard/poll`` (a few hundred bytes of JSON) every
  few seconds and fetches the new content only when a newer fit has been drawn.

The admin login is a form that posts the admin key once; the server answers with a random
session token in a cookie (HttpOnly, SameSite=Strict, path ``/admin``) and keeps only the
token's SHA-256, with the key it was made from, in ``dashboard_sessions`` (so every worker knows
the session, and revoking the key ends it). Pages carry a Content-Security-Policy that allows
only their own inline script (by hash), inline styles and ``data:`` images, and requests to the
same server.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import secrets
import threading
import time
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from .._threads import stop_watching, watch
from . import store
from .render import (
    RenderJob,
    RenderResult,
    low_priority_context,
    render_view,
    start_worker,
    status_line,
    time_text,
)
from .security import Principal, RateLimiter, hash_key, parse_token, split_key, verify
from .settings import Settings
from .state import ArenaState

__all__ = ["Dashboard", "View", "COOKIE"]

log = logging.getLogger("stablearena.service")

#: The admin session cookie.
COOKIE = "stablearena_admin"
#: Seconds a worker without the fit's fitted object waits for another worker to draw it.
FALLBACK_GRACE = 5.0
#: Seconds between two writes of "someone watches the dashboard" to the database.
WATCH_WRITE_EVERY = 30.0
#: Seconds between looks at the stored views while the one shown is behind and unwatched here.
LOOK_EVERY = 5.0


class Looks:
    """When a watcher (the dashboard's, the public boards') whose drawing is behind the newest
    fit asks the database: at every poll while someone watches through this worker, else every
    :data:`LOOK_EVERY` seconds."""

    def __init__(self) -> None:
        self.at = -LOOK_EVERY  # time.monotonic() of the last look

    def due(self, watched_at: float, idle: float) -> bool:
        """Whether to look now (and, if so, the look is counted): ``watched_at`` is when this
        worker last served the watcher's page, ``idle`` the settings' ``dashboard_idle``."""
        now = time.monotonic()
        if watched_at < time.time() - idle and now - self.at < LOOK_EVERY:
            return False
        self.at = now
        return True


#: Seconds the count of battles served (an admin figure) is cached.
COUNT_CACHE = 10.0


@dataclass(frozen=True)
class View:
    """A stored view as this worker serves it: the public page and its content compressed
    (sent as they are), the admin content as text (completed per request)."""

    fit_id: int
    as_of_vote: int
    fitted_at: float
    rendered_at: float
    info: dict[str, Any]
    page_gz: bytes
    main_gz: bytes
    admin_html: str

    @property
    def version(self) -> str:
        return str(self.fit_id)


class Dashboard:
    """One worker's dashboard: the view it serves, the render process, the watcher thread and
    the admin sessions (see the module docstring)."""

    def __init__(self, state: ArenaState, settings: Settings) -> None:
        self.state = state
        self.settings = settings
        self.engine = state.engine
        self.view: View | None = None
        self.rendering: int | None = None  # the fit being drawn
        self.render_error: str | None = None
        self.last_render: RenderResult | None = None
        self.renders = 0
        self.next_render_at = 0.0
        self.watched_at = 0.0
        self._watched_db = 0.0
        self._looks = Looks()
        self._watch_written = 0.0
        self._attempted: set[int] = set()
        self._executor: Executor | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="arena-dashboard", daemon=True)
        self.login_limiter = RateLimiter(0.5, 10)
        self._battles: tuple[float, int] = (0.0, 0)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        stop_watching(self._stop, self._wake, self._thread, 30)
        if self._executor is not None:
            from .._lifetime import stop_pool

            stop_pool(self._executor)

    def _loop(self) -> None:
        watch(
            "arena-dashboard",
            self.tick,
            self._stop,
            self._wake,
            self.settings.poll_seconds,
            lambda exc: log.warning("dashboard: %s: %s", type(exc).__name__, exc),
        )

    def touch(self) -> None:
        """Someone looks at the dashboard (called by every dashboard request): keep drawing new
        fits, and tell the other workers (the one that refits draws) now and then."""
        now = time.time()
        idle = now - self.watched_at > self.settings.dashboard_idle
        self.watched_at = now
        if now - self._watch_written > WATCH_WRITE_EVERY:
            self._watch_written = now
            self.state.writer.submit(
                lambda conn: store.set_meta(conn, "dashboard_watched_at", repr(now))
            )
        if idle:
            self._wake.set()

    # ------------------------------------------------------------------ the watcher
    def tick(self) -> None:
        """Load a newer stored view; start drawing the published fit when it is due. Views are
        drawn of published fits: while the one shown is of the newest this worker knows, there
        is nothing to load and the database is not asked (an idle arena's watcher costs
        nothing); while it is behind and nobody watches through this worker, the database is
        asked every ``LOOK_EVERY`` seconds (whether another worker's viewer watches, or drew)."""
        fit = self.state.fit
        if fit is None or (self.view is not None and self.view.fit_id >= fit.id):
            return
        if not self._looks.due(self.watched_at, self.settings.dashboard_idle):
            return
        row, self._watched_db = store.newest_view(
            self.engine, None if self.view is None else self.view.fit_id
        )
        if row is not None:
            self.view = View(
                int(row.fit_id),
                int(row.as_of_vote),
                float(row.fitted_at),
                float(row.rendered_at),
                json.loads(row.info),
                bytes(row.page),
                bytes(row.main),
                gzip.decompress(bytes(row.admin)).decode("utf-8"),
            )
        self._maybe_render()

    def watched(self) -> bool:
        """Whether someone looked at the dashboard (through any worker) within
        ``dashboard_idle`` seconds: then new fits are drawn."""
        return max(self.watched_at, self._watched_db) >= time.time() - self.settings.dashboard_idle

    def _maybe_render(self) -> None:
        fit = self.state.fit
        now = time.time()
        if fit is None or (self.view is not None and self.view.fit_id >= fit.id):
            return
        if not self.watched():
            return
        if fit.fitted is None and now - fit.fitted_at < FALLBACK_GRACE:
            return  # made by another worker, which may be drawing it
        with self._lock:
            if self.rendering is not None or fit.id in self._attempted or now < self.next_render_at:
                return
            self.rendering = fit.id
            self._attempted = {f for f in self._attempted if f > fit.id - 1000} | {fit.id}
        job = RenderJob(
            db=self.settings.db,
            fit_id=fit.id,
            as_of_vote=fit.as_of_vote,
            fitted_at=fit.fitted_at,
            fit_seconds=fit.seconds,
            payload=fit.payload,
            strategy=self.state.strategy_name,
            fitted=fit.fitted,
        )
        try:
            future = self._pool().submit(render_view, job)
        except Exception as exc:
            self._failed(exc)
            return
        future.add_done_callback(self._done)

    def _pool(self) -> Executor:
        if self._executor is None:
            from concurrent.futures import ProcessPoolExecutor

            self._executor = ProcessPoolExecutor(
                1,
                mp_context=low_priority_context(),
                initializer=start_worker,
                initargs=(os.getpid(),),
            )
        return self._executor

    def _done(self, future: Future) -> None:
        try:
            res: RenderResult = future.result()
        except BaseException as exc:  # noqa: BLE001 - reported on the admin view
            self._failed(exc)
            return
        share = self.settings.dashboard_share
        with self._lock:
            self.rendering = None
            self.render_error = None
            self.last_render = res
            self.renders += res.status == "stored"
            self.next_render_at = time.time() + res.cpu_seconds * (1.0 / share - 1.0)
        self._wake.set()

    def _failed(self, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        log.warning("dashboard: drawing failed: %s", msg)
        with self._lock:
            self.rendering = None
            self.render_error = msg
            self.next_render_at = time.time() + 5.0
            if type(exc).__name__ == "BrokenProcessPool":
                self._executor = None  # the render process died: a new one next time

    # ------------------------------------------------------------------ what pages show
    def public_state(self) -> dict[str, Any]:
        """The poll's answer: which view is served, the published fit, the votes, a status."""
        view, fit, votes = self.view, self.state.fit, self.state.votes_seen
        return {
            "version": view.version if view else "none",
            "view": None
            if view is None
            else {
                "fit_id": view.fit_id,
                "as_of_vote": view.as_of_vote,
                "fitted_at": view.fitted_at,
                "rendered_at": view.rendered_at,
            },
            "published": None
            if fit is None
            else {"fit_id": fit.id, "as_of_vote": fit.as_of_vote, "fitted_at": fit.fitted_at},
            "votes": votes,
            "drawing": self.rendering is not None,
            "status": self.status(),
        }

    def status(self) -> str:
        view, fit, votes = self.view, self.state.fit, self.state.votes_seen
        if view is None:
            if fit is not None:
                return f"Drawing the first leaderboard (the fit of vote {fit.as_of_vote:,})…"
            if votes == 0:
                return "No votes yet: the leaderboard appears once the first votes are fitted."
            if self.state.refit_waiting:
                return f"{votes:,} votes so far; no leaderboard yet: {self.state.refit_waiting}"
            return f"{votes:,} votes so far; the first fit is under way…"
        text = status_line(view.as_of_vote, view.fitted_at, votes)
        if fit is not None and fit.id > view.fit_id:
            text += f" · the fit of vote {fit.as_of_vote:,} is published and will be drawn shortly"
        return text

    def battles_total(self) -> int:
        """Battles served by the whole arena (all workers), counted at most every 10 s (or
        every 100 times the count's duration, when longer)."""
        at, n = self._battles
        if time.time() - at > COUNT_CACHE:
            t0 = time.perf_counter()
            n = store.count_battles(self.engine)
            # a count that takes t seconds (it grows with the battles) is redone at most every
            # 100·t seconds: at most 1% of a core however large the arena
            took = time.perf_counter() - t0
            self._battles = (time.time() + max(0.0, 100.0 * took - COUNT_CACHE), n)
        return n

    def health(self, battles: int) -> dict[str, Any]:
        """The admin view's health: votes, battles, staleness in votes and seconds, the last
        refit's time and duration, the models retired or under outage, the drawing."""
        st, now = self.state, time.time()
        fit, view, cfg = st.fit, self.view, st.config
        votes = st.votes_seen
        behind = votes - (fit.as_of_vote if fit else 0)
        age = now - fit.fitted_at if fit is not None and behind > 0 else 0.0
        models = sorted(st.models.values(), key=lambda m: m.name)
        retired = [m.name for m in models if m.retired]
        outage = [m.name for m in models if m.outage and not m.retired]
        boosted = [
            f"{m.name} (×{m.boost:g} until {m.boost_until:,} battles)"
            for m in models
            if m.boost > 1 and not m.retired
        ]
        keys = [p for p in st.principals.values() if not p.is_admin]
        admins = sum(p.is_admin and not p.revoked for p in st.principals.values())
        cards: list[dict[str, Any]] = [
            {"label": "votes", "value": f"{votes:,}", "detail": "recorded (corrections included)"},
            {
                "label": "battles served",
                "value": f"{battles:,}",
                "detail": f"{st.battles_served:,} by this worker since it started",
            },
            {
                "label": "staleness",
                "value": f"{behind:,} votes",
                "detail": f"{age:.1f} s behind" if behind > 0 else "the fit has every vote",
            },
            {
                "label": "last refit",
                "value": time_text(fit.fitted_at)[11:19] if fit else "none yet",
                "detail": f"took {fit.seconds:.2f} s; fit {fit.id}, as of vote {fit.as_of_vote:,}"
                if fit
                else "",
            },
            {
                "label": "refit after",
                "value": f"{cfg.refit_votes:,} votes",
                "detail": f"or {cfg.refit_seconds:g} s behind, whichever comes first",
            },
            {
                "label": "models",
                "value": f"{len(models) - len(retired) - len(outage):,} active",
                "detail": f"{len(retired)} retired, {len(outage)} under outage",
            },
            {
                "label": "annotator keys",
                "value": f"{sum(not p.revoked for p in keys):,}",
                "detail": f"{sum(p.revoked for p in keys)} revoked; {admins} admin key(s)",
            },
            {
                "label": "pair strategy",
                "value": st.strategy_name,
                "detail": f"ε = {cfg.exploration:g}",
            },
            {
                "label": "figures drawn",
                "value": f"vote {view.as_of_vote:,}" if view else "not yet",
                "detail": (
                    f"drawing fit {self.rendering}…"
                    if self.rendering is not None
                    else (
                        f"last drawing {self.last_render.cpu_seconds:.2f} s CPU"
                        if self.last_render
                        else ""
                    )
                ),
            },
        ]
        return {
            "cards": cards,
            "retired": retired,
            "outage": outage,
            "boosted": boosted,
            "refit_error": st.refit_error,
            "fit_alert": st.fit_alert,
            "refit_waiting": st.refit_waiting if st.fit is None else None,
            "render_error": self.render_error,
            "db": self.settings.redacted_db(),
            "now_text": time_text(now),
        }

    # ------------------------------------------------------------------ admin sessions
    def admin_for_key(self, key: str) -> Principal | None:
        """The admin whose key this is (``None``: unknown, revoked or not an admin key)."""
        key_id = split_key(key)
        p = self.state.principal_for(key_id) if key_id else None
        if p is None or not verify(key, p) or not p.is_admin:
            return None
        return p

    async def open_session(self, p: Principal) -> str:
        """A new session for ``p``; returns the token (stored only as its SHA-256)."""
        token = secrets.token_urlsafe(32)
        now = time.time()
        hours = self.settings.session_hours
        await asyncio.wrap_future(
            self.state.writer.submit(
                lambda conn: store.open_session(conn, hash_key(token), p.id, p.key_id, now, hours)
            )
        )
        return token

    async def close_session(self, token: str) -> None:
        if parse_token("session", token) is None:  # no session has such a token
            return
        h = hash_key(token)
        await asyncio.wrap_future(
            self.state.writer.submit(lambda conn: store.close_session(conn, h))
        )

    def session_admin(self, token: str | None) -> Principal | None:
        """The admin of a live session token (its key still the admin's and not revoked)."""
        if parse_token("session", token) is None:
            return None
        row = store.session_row(self.engine, hash_key(token))
        if row is None:
            return None
        p = self.state.principals.get(int(row.annotator_id))
        if p is None or not p.is_admin or p.revoked or p.key_id != row.key_id:
            return None
        return p
