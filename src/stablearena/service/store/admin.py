"""The admin's statements: models and annotator keys added and changed, the vote log exported.

The writes are functions of an open connection, run by the :class:`~.writer.Writer` inside its
transaction; each bumps the registry revision so that every worker reloads."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .queries import bump_revision
from .tables import annotators, battles, models, votes

__all__ = [
    "add_model",
    "change_model",
    "annotator_list",
    "set_key",
    "revoke_key",
    "vote_log",
    "voted_battles",
    "delete_unvoted",
]


def add_model(conn: Connection, name: str, boost: float, boost_until: int) -> None:
    """Insert a model (``IntegrityError`` when the name exists)."""
    conn.execute(
        models.insert().values(
            name=name, boost=boost, boost_until=boost_until, added_at=time.time()
        )
    )
    bump_revision(conn)


def change_model(conn: Connection, model_id: int, values: dict[str, Any]) -> None:
    """Set ``values`` (retired, outage, boost, boost_until) of one model."""
    conn.execute(models.update().where(models.c.id == model_id).values(**values))
    bump_revision(conn)


def annotator_list(engine: Engine) -> list[dict[str, Any]]:
    """Every annotator record, in id order, without key material."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(annotators).order_by(annotators.c.id)).all()
    return [
        {
            "name": r.name,
            "role": r.role,
            "has_key": r.key_id is not None,
            "created_at": r.created_at,
            "revoked": r.revoked_at is not None,
        }
        for r in rows
    ]


def set_key(conn: Connection, name: str, role: str, key_id: str, key_hash: str) -> str:
    """Give ``name`` a key (creating the annotator when new): ``"ok"``, or ``"exists"`` (nothing
    done) when it has a live key. An imported annotator gets its first key, a revoked one a new
    key."""
    row = conn.execute(sa.select(annotators).where(annotators.c.name == name)).first()
    values = {"role": role, "key_id": key_id, "key_hash": key_hash, "revoked_at": None}
    if row is None:
        conn.execute(annotators.insert().values(name=name, created_at=time.time(), **values))
    elif row.key_id is not None and row.revoked_at is None:
        return "exists"
    else:
        conn.execute(annotators.update().where(annotators.c.id == row.id).values(**values))
    bump_revision(conn)
    return "ok"


def revoke_key(conn: Connection, name: str) -> int:
    """Revoke the key of ``name``; returns the number of keys revoked (0: none)."""
    n = conn.execute(
        annotators.update()
        .where(annotators.c.name == name, annotators.c.key_id.is_not(None))
        .values(revoked_at=time.time())
    ).rowcount
    bump_revision(conn)
    return n


def vote_log(engine: Engine, history: bool) -> tuple[list[Any], list[str]]:
    """The vote log in vote order — model_a, model_b, outcome, judge, tstamp, battle_id,
    revision, strategy, propensity, anony (false: an answer named a model), superseded — and
    the column names; the current votes only unless ``history``."""
    v, b = votes, battles
    ma = models.alias("ma")
    mb = models.alias("mb")
    q = (
        sa.select(
            ma.c.name.label("model_a"),
            mb.c.name.label("model_b"),
            v.c.outcome,
            annotators.c.name.label("judge"),
            v.c.created_at.label("tstamp"),
            v.c.battle_id,
            v.c.revision,
            b.c.strategy,
            b.c.propensity,
            b.c.anony,
            v.c.superseded,
        )
        .select_from(
            v.join(ma, ma.c.id == v.c.model_a)
            .join(mb, mb.c.id == v.c.model_b)
            .join(annotators, annotators.c.id == v.c.annotator_id)
            .join(b, b.c.id == v.c.battle_id)
        )
        .order_by(v.c.id)
    )
    if not history:
        q = q.where(v.c.superseded == sa.false())
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return rows, [c.name for c in q.selected_columns]


def voted_battles(engine: Engine, ids: list[str]) -> set[str]:
    """The battles among ``ids`` that have a vote (found by the votes' battle index)."""
    if not ids:
        return set()
    with engine.connect() as conn:
        q = sa.select(votes.c.battle_id).where(votes.c.battle_id.in_(ids)).distinct()
        return set(conn.execute(q).scalars())


def delete_unvoted(conn: Connection, ids: list[str]) -> int:
    """Delete the battles among ``ids`` that have no vote (served, expired, never voted on:
    they would only grow the database); the number deleted. Run by the writer."""
    n = 0
    for at in range(0, len(ids), 500):
        chunk = ids[at : at + 500]
        n += conn.execute(
            battles.delete().where(
                battles.c.id.in_(chunk),
                ~sa.exists().where(votes.c.battle_id == battles.c.id),
            )
        ).rowcount
    return n
