"""The public leaderboard's boards, drawn once per published fit for every host
(``GET /leaderboard``, :mod:`.api.public_board`; docs/guides/several-hosts.md).

Every tab of the page — the published board with 95% intervals and one board per prompt
category, raw and style-controlled — is fitted from the arena's votes, which on a large arena
takes seconds (measured in docs/guides/several-hosts.md). So it is not drawn per host:

- **Drawn once, by one worker.** A watcher thread on every worker notices a published fit newer
  than the newest stored boards; the one worker that gets the boards lock (PostgreSQL: an
  advisory lock, :data:`~.store.tables.BOARDS_LOCK`; SQLite: a lock file) fits every tab and
  stores them, as compressed JSON, in ``public_boards`` keyed by the fit.
- **Read by every host.** Each worker loads the newest stored boards within ``poll_seconds``
  and renders the page from them (a template, milliseconds): every host shows the same boards,
  field for field, and a request never fits. Before any boards are stored the page says they
  are being drawn.
- **Paced, and only while watched.** After a drawing that took w seconds no worker draws again
  for w·(1/``dashboard_share`` − 1) seconds (the time is in ``meta``, one pacing for all
  hosts); fits published meanwhile are skipped, the newest is drawn next. Nothing is drawn
  while nobody has opened the page, through any host, for ``dashboard_idle`` seconds (the
  first request after that shows the last stored boards and wakes the drawing). A worker whose
  newest fit has its boards asks the database nothing.
"""

from __future__ import annotations

import gzip
import json
import logging
import threading
import time
from typing import Any, NamedTuple

from .._threads import stop_watching, watch
from ..errors import StableArenaError
from . import store
from .dashboard import WATCH_WRITE_EVERY, Looks
from .errors import ApiError
from .live_boards import export_frame, live_boards
from .settings import Settings
from .state import ArenaState
from .store.dashboard import BOARDS_WATCHED_KEY

__all__ = ["ALL", "Boards", "PublicBoards", "draw_boards"]

log = logging.getLogger("stablearena.service")

#: The tab of the whole arena's board.
ALL = "all"


class Boards(NamedTuple):
    """The stored boards of one published fit: ``boards[style][tab] = (payload or None, note
    when not fitted)``, ``style`` "plain" or "style"."""

    id: int
    as_of_vote: int
    fitted_at: float
    drawn_at: float
    seconds: float
    boards: dict[str, dict[str, tuple[dict[str, Any] | None, str]]]


def draw_boards(st: ArenaState) -> dict[str, dict[str, tuple[dict[str, Any] | None, str]]]:
    """Every tab's board of the arena now, raw (``"plain"``) and style-controlled
    (``"style"``): ``{"all" or category: (payload or None, note when not fitted)}``. The
    export is read once for all of them."""
    frame = export_frame(st.engine)

    def fit(style: bool, by: str | None) -> dict[str, Any]:
        return live_boards(
            st.engine,
            "am-elo",
            style=style,
            where_items=[],
            by=by,
            ci="fisher",
            config=st.config,
            frame=frame,
        )

    def tab(make: Any) -> tuple[dict[str, Any] | None, str]:
        try:
            return make(), ""
        except (StableArenaError, ApiError, KeyError, ValueError) as e:
            return None, f"This board could not be fitted: {getattr(e, 'message', e)}"

    def by_category(style: bool) -> tuple[dict[Any, Any], str]:
        got, why = tab(lambda: fit(style, "category")["boards"])
        return got or {}, why

    raw_cats, _ = by_category(False)
    style_cats, why = by_category(True)
    out: dict[str, dict[str, tuple[dict[str, Any] | None, str]]] = {
        "plain": {ALL: tab(lambda: st.leaderboard("am-elo", "fisher", 0.95))},
        "style": {ALL: tab(lambda: fit(True, None))},
    }
    for key, cats in (("plain", raw_cats), ("style", style_cats)):
        for value, payload in sorted(cats.items(), key=lambda kv: str(kv[0])):
            out[key][str(value)] = (payload, "")
    for value in raw_cats:  # every category tab of the raw board stays under style control
        out["style"].setdefault(
            str(value),
            (None, why or "Too few of this category's battles for a style-controlled board."),
        )
    return out


def _decode(row: Any) -> Boards:
    raw = json.loads(gzip.decompress(bytes(row.boards)))
    boards = {k: {tab: (v[0], v[1]) for tab, v in tabs.items()} for k, tabs in raw.items()}
    return Boards(
        int(row.fit_id),
        int(row.as_of_vote),
        float(row.fitted_at),
        float(row.drawn_at),
        float(row.seconds),
        boards,
    )


class PublicBoards:
    """One worker's public boards: the newest stored, the watcher thread that loads them and
    draws a newer fit's when it is this worker's turn (module docstring)."""

    def __init__(self, state: ArenaState, settings: Settings) -> None:
        self.state = state
        self.settings = settings
        self.engine = state.engine
        self.current: Boards | None = None
        self.drawings = 0
        self.watched_at = 0.0
        self._watch_written = 0.0
        self._looks = Looks()
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="arena-boards", daemon=True)
        self._lock_conn: Any = None
        self._file_lock: Any = None
        if store.is_sqlite(self.engine):
            from .refitter import _FileLock

            self._file_lock = _FileLock(str(self.engine.url.database) + ".boards-lock")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        stop_watching(self._stop, self._wake, self._thread, 60)
        if self._lock_conn is not None:
            self._lock_conn.close()

    def _loop(self) -> None:
        def tick() -> None:
            self.tick()
            self.last_error = None

        def failed(exc: Exception) -> None:  # a failed drawing, a lost database
            msg = f"{type(exc).__name__}: {exc}"
            if msg != self.last_error:
                log.warning("public boards: %s", msg)
            self.last_error = msg

        watch("arena-boards", tick, self._stop, self._wake, self.settings.poll_seconds, failed)

    def touch(self) -> None:
        """Someone opened the page (every ``/leaderboard`` request): keep drawing new fits, and
        tell the other hosts now and then."""
        now = time.time()
        self.watched_at = now
        if now - self._watch_written > WATCH_WRITE_EVERY:
            self._watch_written = now
            self.state.writer.submit(
                lambda conn: store.set_meta(conn, BOARDS_WATCHED_KEY, repr(now))
            )

    def load(self) -> float:
        """Install newer stored boards; returns the time before which none is drawn (0 while
        nobody watches: then none is)."""
        row, next_at, watched = store.newest_boards(
            self.engine, None if self.current is None else self.current.id
        )
        if row is not None:
            self.current = _decode(row)
        if max(self.watched_at, watched) < time.time() - self.settings.dashboard_idle:
            return float("inf")
        return next_at

    def _behind(self, fit: Any) -> bool:
        return fit is not None and (self.current is None or self.current.id < fit.id)

    def tick(self) -> None:
        """When the published fit is newer than the boards shown: load newer stored boards, and
        draw the fit's when it is due, watched, and this worker gets the lock. While nobody
        watches through this worker, the database is asked every ``LOOK_EVERY`` seconds."""
        fit = self.state.fit
        if not self._behind(fit):
            return
        if not self._looks.due(self.watched_at, self.settings.dashboard_idle):
            return
        if time.time() < self.load() or not self._behind(fit):
            return
        if not self._acquire():
            return
        try:  # another worker may have drawn it a moment ago
            if time.time() >= self.load() and self._behind(fit):
                self.draw()
        finally:
            self._release()

    def first(self) -> Boards | None:
        """The boards to show when this worker has none yet: the newest stored, else None (and
        the watcher looks at once, so that the first boards are drawn without waiting for
        its next poll; a request never draws)."""
        if self.current is None:
            self.load()
        if self.current is None:
            self._wake.set()
        return self.current

    def draw(self) -> Boards:
        """Fit every tab for the published fit, store them and install them here."""
        fit = self.state.published()
        t0 = time.perf_counter()
        boards = draw_boards(self.state)
        seconds = time.perf_counter() - t0
        now = time.time()
        share = self.settings.dashboard_share
        blob = gzip.compress(json.dumps(boards, allow_nan=False).encode(), 6)
        info = {"fit_id": fit.id, "as_of_vote": fit.as_of_vote, "fitted_at": fit.fitted_at}
        if store.insert_boards(
            self.engine, info, blob, now, seconds, now + seconds * (1 / share - 1)
        ):
            self.drawings += 1
        self.load()
        if self.current is None or self.current.id < fit.id:  # not stored (a race): shown here
            self.current = Boards(fit.id, fit.as_of_vote, fit.fitted_at, now, seconds, boards)
        return self.current

    def _acquire(self) -> bool:
        if self._file_lock is not None:
            return bool(self._file_lock.acquire())
        if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.invalidated:
            self._lock_conn = self.engine.connect()
        return store.try_refit_lock(self._lock_conn, store.BOARDS_LOCK)

    def _release(self) -> None:
        if self._file_lock is not None:
            self._file_lock.release()
        elif self._lock_conn is not None:
            store.release_refit_lock(self._lock_conn, store.BOARDS_LOCK)
