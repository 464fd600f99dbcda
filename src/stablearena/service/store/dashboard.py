"""The dashboard's statements: the pages drawn per published fit (``dashboard_views``), the
public leaderboard's boards per published fit (``public_boards``) and the admin logins
(``dashboard_sessions``)."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .engine import write_conn
from .queries import get_meta
from .tables import battles, dashboard_sessions, dashboard_views, public_boards

__all__ = [
    "newest_view",
    "view_exists",
    "insert_view",
    "newest_boards",
    "insert_boards",
    "BOARDS_NEXT_KEY",
    "BOARDS_WATCHED_KEY",
    "count_battles",
    "open_session",
    "close_session",
    "session_row",
]


def _newest_per_fit(conn: Connection, t: sa.Table, after: int | None) -> Any:
    """The row of the newest fit in ``t`` (a table keyed by ``fit_id``: ``dashboard_views``,
    ``public_boards``) if newer than fit id ``after`` (``None``: any), else ``None``."""
    newest = conn.execute(sa.select(sa.func.max(t.c.fit_id))).scalar()
    if newest is not None and (after is None or newest > after):
        return conn.execute(sa.select(t).where(t.c.fit_id == newest)).first()
    return None


def newest_view(engine: Engine, after: int | None) -> tuple[Any, float]:
    """The newest stored view if newer than fit id ``after`` (``None``: any), else ``None``; and
    when someone last watched the dashboard (any worker; 0 = never)."""
    with engine.connect() as conn:
        row = _newest_per_fit(conn, dashboard_views, after)
        watched = get_meta(conn, "dashboard_watched_at")
    return row, float(watched) if watched else 0.0


def view_exists(engine: Engine, fit_id: int) -> bool:
    t = dashboard_views
    with engine.connect() as conn:
        return conn.execute(sa.select(t.c.fit_id).where(t.c.fit_id == fit_id)).first() is not None


def _insert_per_fit(
    engine: Engine, t: sa.Table, values: dict[str, Any], keep: int, before: Any = None
) -> bool:
    """In one write transaction: ``before(conn)`` (if given), then the row ``values`` of fit
    ``values["fit_id"]`` into ``t`` unless it has one, and all but the newest ``keep`` rows
    deleted; returns whether it inserted (a row drawn by another worker a moment ago is theirs)."""
    conn = write_conn(engine)
    try:
        with conn.begin():
            if before is not None:
                before(conn)
            if conn.execute(sa.select(t.c.fit_id).where(t.c.fit_id == values["fit_id"])).first():
                return False
            conn.execute(t.insert().values(**values))
            newest = sa.select(t.c.fit_id).order_by(t.c.fit_id.desc()).limit(keep).subquery()
            cutoff = sa.select(sa.func.min(newest.c.fit_id)).scalar_subquery()
            conn.execute(t.delete().where(t.c.fit_id < cutoff))
    except sa.exc.IntegrityError:  # another worker stored the same fit a moment ago
        return False
    finally:
        conn.info.pop("immediate", None)
        conn.close()
    return True


def insert_view(
    engine: Engine, info: dict[str, Any], blobs: dict[str, bytes], rendered_at: float, keep: int
) -> bool:
    """Insert the view of fit ``info["fit_id"]`` (its compressed ``page``, ``main``, ``admin``)
    unless one exists, and delete all but the newest ``keep``; returns whether it inserted."""
    values = {
        "fit_id": info["fit_id"],
        "as_of_vote": info["as_of_vote"],
        "fitted_at": info["fitted_at"],
        "rendered_at": rendered_at,
        "info": json.dumps(info, allow_nan=False),
        **blobs,
    }
    return _insert_per_fit(engine, dashboard_views, values, keep)


#: ``meta`` key: the time before which no worker draws the public boards again (their pacing,
#: one for every host of the database).
BOARDS_NEXT_KEY = "public_boards_next_at"


#: ``meta`` key: when someone last opened the public leaderboard (through any worker).
BOARDS_WATCHED_KEY = "public_boards_watched_at"


def newest_boards(engine: Engine, after: int | None) -> tuple[Any, float, float]:
    """The newest stored public boards if newer than fit id ``after`` (``None``: any), else
    ``None``; the time before which none is drawn again and when someone last opened the
    page (0: never)."""
    with engine.connect() as conn:
        row = _newest_per_fit(conn, public_boards, after)
        nxt = get_meta(conn, BOARDS_NEXT_KEY)
        watched = get_meta(conn, BOARDS_WATCHED_KEY)
    return row, float(nxt) if nxt else 0.0, float(watched) if watched else 0.0


def insert_boards(
    engine: Engine,
    info: dict[str, Any],
    boards: bytes,
    drawn_at: float,
    seconds: float,
    next_at: float,
    keep: int = 3,
) -> bool:
    """Store the public boards of fit ``info["fit_id"]`` (``as_of_vote``, ``fitted_at``; the
    compressed JSON ``boards``) unless stored already, set when the next may be drawn, and
    delete all but the newest ``keep``; returns whether it inserted."""
    from .queries import set_meta

    values = {
        "fit_id": info["fit_id"],
        "as_of_vote": info["as_of_vote"],
        "fitted_at": info["fitted_at"],
        "drawn_at": drawn_at,
        "seconds": seconds,
        "boards": boards,
    }
    return _insert_per_fit(
        engine,
        public_boards,
        values,
        keep,
        before=lambda conn: set_meta(conn, BOARDS_NEXT_KEY, repr(next_at)),
    )


def count_battles(engine: Engine) -> int:
    """Battles served by the whole arena."""
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(battles)).scalar_one())


def open_session(
    conn: Connection, token_hash: str, annotator_id: int, key_id: str, now: float, hours: float
) -> None:
    """Store a new admin session (and drop the expired ones)."""
    s = dashboard_sessions
    conn.execute(s.delete().where(s.c.expires_at < now))
    conn.execute(
        s.insert().values(
            token_hash=token_hash,
            annotator_id=annotator_id,
            key_id=key_id,
            created_at=now,
            expires_at=now + 3600.0 * hours,
        )
    )


def close_session(conn: Connection, token_hash: str) -> None:
    s = dashboard_sessions
    conn.execute(s.delete().where(s.c.token_hash == token_hash))


def session_row(engine: Engine, token_hash: str) -> Any:
    """(annotator_id, key_id) of a live session, or None."""
    s = dashboard_sessions
    with engine.connect() as conn:
        return conn.execute(
            sa.select(s.c.annotator_id, s.c.key_id).where(
                s.c.token_hash == token_hash, s.c.expires_at > time.time()
            )
        ).first()
