"""The arena's reads and small writes: the configuration and registry revision (``meta``),
the registry (models and keys), the counts, the published fits, the refit lock."""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy import Integer, Text, func, select
from sqlalchemy.engine import Connection, Engine

from ..snapshot import Snapshot
from .tables import REFIT_LOCK, annotators, fits, meta, models, pair_counts, votes
from .votes import cursor


def bump_revision(conn: Connection) -> None:
    """Tell every worker to reload models, keys and the configuration."""
    conn.info.pop("revision_seen", None)  # read again by the next write of this transaction
    conn.execute(
        meta.update()
        .where(meta.c.key == "revision")
        .values(value=sa.cast(sa.cast(meta.c.value, Integer) + 1, Text))
    )


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute(select(meta.c.value).where(meta.c.key == key)).first()
    return None if row is None else row[0]


def set_meta(conn: Connection, key: str, value: str) -> None:
    done = conn.execute(meta.update().where(meta.c.key == key).values(value=value)).rowcount
    if not done:
        conn.execute(meta.insert().values(key=key, value=value))


def load_config(conn: Connection) -> dict[str, Any]:
    raw = get_meta(conn, "arena_config")
    return {} if raw is None else json.loads(raw)


def account_ages(conn: Connection, ramp_days: float, now: float) -> dict[str, float]:
    """Each annotator's age in days for bounded influence's age ramp
    (:func:`stablearena.crowd.trust.account_weights`): days since its ``created_at``, and +∞ — an old
    account — for one imported with a log (the operator vouches for it) and for one created in
    the arena's first ``ramp_days`` days (its founding accounts: at launch nobody is older)."""
    start = get_meta(conn, "created_at")
    founding = (float(start) if start is not None else 0.0) + ramp_days * 86400.0
    rows = conn.execute(select(annotators.c.name, annotators.c.role, annotators.c.created_at))
    return {
        name: np.inf if role == "imported" or created <= founding else (now - created) / 86400.0
        for name, role, created in rows
    }


def account_active_days(conn: Connection) -> dict[str, float]:
    """Each annotator's active days for bounded influence (issue 34): the number of distinct
    UTC days (Unix seconds // 86400) on which it cast a vote that is not superseded. One
    grouped scan of the votes."""
    day = (
        func.floor(votes.c.created_at / 86400.0)
        if conn.dialect.name == "postgresql"
        else sa.cast(votes.c.created_at / 86400.0, Integer)  # truncation: times are positive
    )
    per_day = (
        select(votes.c.annotator_id.label("a"), day.label("d"))
        .where(votes.c.superseded == sa.false())
        .group_by(votes.c.annotator_id, day)
        .subquery()
    )
    rows = conn.execute(
        select(annotators.c.name, func.count())
        .select_from(per_day.join(annotators, annotators.c.id == per_day.c.a))
        .group_by(annotators.c.name)
    )
    return {name: float(n) for name, n in rows}


def watermark(conn: Connection) -> int:
    """The newest vote id (0 with no votes)."""
    return int(conn.execute(select(func.coalesce(func.max(votes.c.id), 0))).scalar_one())


def latest_fit_row(conn: Connection, after: int = 0) -> Any:
    """The newest published fit (id, method, as_of_vote, fitted_at, seconds, payload), or None
    when there is none newer than id ``after``."""
    return conn.execute(
        select(fits).where(fits.c.id > after).order_by(fits.c.id.desc()).limit(1)
    ).first()


def poll(conn: Connection, after: int, *keys: str) -> tuple[int, int | None, list[str | None]]:
    """What a worker's watcher looks at every ``poll_seconds``, in one query: the newest vote id
    (:func:`watermark`), the id of the newest published fit if newer than id ``after`` (else
    None) and the ``meta`` values of ``keys`` (None where unset)."""
    row = conn.execute(_poll_statement(keys), {"after": after}).one()
    return int(row[0]), None if row[1] is None else int(row[1]), list(row[2:])


@functools.cache
def _poll_statement(keys: tuple[str, ...]) -> sa.Select:
    # built once: building it took 0.3 ms, most of an idle watcher's poll
    return select(
        select(func.coalesce(func.max(votes.c.id), 0)).scalar_subquery(),
        select(func.max(fits.c.id)).where(fits.c.id > sa.bindparam("after")).scalar_subquery(),
        *(select(meta.c.value).where(meta.c.key == k).scalar_subquery() for k in keys),
    )


def fit_row(conn: Connection, fid: int) -> Any:
    """The published fit of id ``fid`` (as :func:`latest_fit_row`), or None."""
    return conn.execute(select(fits).where(fits.c.id == fid)).first()


def publish_fit(
    conn: Connection,
    method: str,
    as_of_vote: int,
    fitted_at: float,
    seconds: float,
    payload: dict[str, Any],
    keep: int,
    base: int | None = None,
) -> int:
    """Insert a fit and delete all but the newest ``keep`` — but not the full fit ``base`` a
    one-step update is made from; returns its id."""
    fid = conn.execute(
        fits.insert().values(
            method=method,
            as_of_vote=as_of_vote,
            fitted_at=fitted_at,
            seconds=seconds,
            payload=json.dumps(payload, allow_nan=False),
        )
    ).inserted_primary_key[0]
    conn.execute(fits.delete().where(fits.c.id <= fid - keep, fits.c.id != (base or 0)))
    return int(fid)


def _count_rows(conn: Connection) -> tuple[int, np.ndarray]:
    """The newest vote id and every ``pair_counts`` row (i, j, annotator id, wins, losses,
    ties, both-bad) in the caller's transaction, made one snapshot on PostgreSQL."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    wm = watermark(conn)
    cur = cursor(conn)
    cur.execute("SELECT i, j, annotator_id, wins, losses, ties, ties_both_bad FROM pair_counts")
    return wm, np.array(cur.fetchall(), dtype=float).reshape(-1, 7)


def read_snapshot(engine: Engine) -> Snapshot:
    """The pair counts and the newest vote id, read in one transaction (one snapshot). The
    number of (current) votes is the counts' total: each vote adds one count, a correction
    moves it."""
    with engine.connect() as conn, conn.begin():
        wm, rows = _count_rows(conn)
        cur = cursor(conn)
        cur.execute("SELECT id, name FROM models ORDER BY id")
        model_rows = cur.fetchall()
        cur.execute("SELECT id, name FROM annotators ORDER BY id")
        annotator_rows = cur.fetchall()
    return Snapshot.from_ids(
        wm, rows[:, :3].astype(np.int64), rows[:, 3:], model_rows, annotator_rows
    )


def read_count_rows(engine: Engine, window: int = 4096) -> tuple[int, np.ndarray, list[int]]:
    """The whole ``pair_counts`` table (rows i, j, annotator id, wins, losses, ties, both-bad),
    the newest vote id, and the ids of the votes among the newest ``window`` ids at or below
    it, read in one snapshot — what the live counts are rebuilt from once, at start (the ids
    tell which newer-than-committed ids are still in flight on PostgreSQL)."""
    with engine.connect() as conn, conn.begin():
        wm, rows = _count_rows(conn)
        recent = conn.execute(
            select(votes.c.id).where(votes.c.id > wm - window, votes.c.id <= wm)
        ).scalars()
        return int(wm), rows, list(recent)


def votes_after(conn: Connection, after: int, also: list[int]) -> list[tuple]:
    """The votes with an id above ``after`` or in ``also``, in id order, each as (id,
    model_a, model_b, annotator id, outcome, outcome of the revision it corrects or None,
    whether its battle is anonymous — a vote of a non-anonymous one is not counted):
    what changed in the counts since the live counts last looked (an indexed range read)."""
    cond = "v.id > ?" + (f" OR v.id IN ({', '.join('?' * len(also))})" if also else "")
    sql = (
        "SELECT v.id, v.model_a, v.model_b, v.annotator_id, v.outcome, p.outcome, b.anony "
        "FROM votes v JOIN battles b ON b.id = v.battle_id "
        "LEFT JOIN votes p ON p.battle_id = v.battle_id AND p.revision = v.revision - 1 "
        f"WHERE {cond} ORDER BY v.id"
    )
    if conn.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    cur = cursor(conn)
    cur.execute(sql, (after, *also))
    return cur.fetchall()


def names_after(conn: Connection, table: str, after: int) -> list[tuple[int, str]]:
    """(id, name) of the ``models`` or ``annotators`` with an id above ``after``, in id order
    (names never change)."""
    t = {"models": models, "annotators": annotators}[table]
    q = select(t.c.id, t.c.name).where(t.c.id > after).order_by(t.c.id)
    return [(int(r[0]), str(r[1])) for r in conn.execute(q)]


# ---------------------------------------------------------------------------------- registry
def model_rows(conn: Connection) -> list[Any]:
    """Every model, in id order."""
    return conn.execute(select(models).order_by(models.c.id)).all()


def key_rows(conn: Connection) -> list[Any]:
    """Every annotator that has (or had) a key."""
    return conn.execute(select(annotators).where(annotators.c.key_id.is_not(None))).all()


def key_row(conn: Connection, key_id: str) -> Any:
    """The annotator of ``key_id``, or None."""
    return conn.execute(select(annotators).where(annotators.c.key_id == key_id)).first()


def pair_totals(conn: Connection) -> np.ndarray:
    """(i, j, votes) per pair of model ids, summed over annotators and outcomes."""
    cur = cursor(conn)
    cur.execute(
        "SELECT i, j, SUM(wins + losses + ties + ties_both_bad) FROM pair_counts GROUP BY i, j"
    )
    return np.array(cur.fetchall(), dtype=float).reshape(-1, 3)


def judged_rows(conn: Connection) -> list[tuple[int, int, int]]:
    """(annotator id, i, j) of every pair an annotator has a vote on."""
    cur = cursor(conn)
    cur.execute(
        "SELECT annotator_id, i, j FROM pair_counts WHERE wins + losses + ties + ties_both_bad > 0"
    )
    return cur.fetchall()


def judged_pairs_of(conn: Connection, annotator_id: int) -> list[tuple[int, int]]:
    """(i, j) of every pair of model ids one annotator has a vote on (whichever host took it)."""
    pc = pair_counts.c
    total = pc.wins + pc.losses + pc.ties + pc.ties_both_bad
    rows = conn.execute(
        select(pc.i, pc.j).where(pc.annotator_id == int(annotator_id), total > 0)
    ).all()
    return [(int(i), int(j)) for i, j in rows]


# ---------------------------------------------------------------------------------- health, locks
def ping(engine: Engine) -> bool:
    """Whether the database answers."""
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True
    except Exception:
        return False


def probe_write(conn: Connection) -> None:
    """A small write (``meta.health_probe``): whether the database takes writes again after a
    failed one (``/healthz`` runs it through the writer while a failure is reported)."""
    import time

    set_meta(conn, "health_probe", repr(time.time()))


def try_refit_lock(conn: Connection, key: int = REFIT_LOCK) -> bool:
    """PostgreSQL: take the session's "one refitter at a time" advisory lock (or another of
    the arena's, ``key``: :data:`~.tables.BOARDS_LOCK`) if it is free."""
    got = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one()
    conn.commit()
    return bool(got)


def release_refit_lock(conn: Connection, key: int = REFIT_LOCK) -> None:
    conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    conn.commit()
