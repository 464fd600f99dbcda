"""The statements of the automatic arena's journal (``stablearena auto --db``,
docs/guides/models-and-judges.md): its records, its models and judges, and each judgement
stored as the live arena stores the battles it holds.

A judged battle becomes two battles served to the judge's annotator, one per order (the model
shown first as ``model_a``), each stored complete with its prompt and both answers (as
:func:`~.arena.record_judgement` stores a judge's copy of a held battle) and voted on with the
judgement's outcome (disagreeing orders: a tie). A failed judgement becomes one failed held
battle with the reason: never a vote. The journal record is written in the same transaction,
so a judgement is either wholly stored or not at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .admin import add_model
from .arena import finish_held, insert_held, judge_annotator, record_judgement, set_endpoint
from .tables import auto_journal, models

__all__ = ["journal_records", "register", "name_ids", "append_record", "store_judged"]

#: The ``battles.strategy`` of the automatic arena's battles.
STRATEGY = "auto"


def journal_records(engine: Engine) -> list[dict[str, Any]]:
    """Every record of the journal, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(auto_journal.c.record).order_by(auto_journal.c.seq))
        return [json.loads(r) for (r,) in rows]


def register(
    conn: Connection, entries: Sequence[tuple[str, str | None]], judges: Sequence[str], now: float
) -> None:
    """Make the run's models (``(name, endpoint config JSON or None)``: a model with an endpoint
    through :func:`~.arena.set_endpoint`, as the serve config's ``[[models]]``; one without
    through :func:`~.admin.add_model`, as the admin API) and its judges' annotators
    (:func:`~.arena.judge_annotator`, as ``serve``'s judges), each only when missing."""
    for name, config in entries:
        if config is not None:
            set_endpoint(conn, name, config, now)
        elif conn.execute(sa.select(models.c.id).where(models.c.name == name)).first() is None:
            add_model(conn, name, 1.0, 0)
    for judge in judges:
        judge_annotator(conn, judge, now)


def name_ids(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """The ids of the models named ``names`` (those that exist)."""
    rows = conn.execute(sa.select(models.c.name, models.c.id).where(models.c.name.in_(names)))
    return {n: int(i) for n, i in rows}


def append_record(
    conn: Connection, record: dict[str, Any], now: float, battle_id: str | None = None
) -> None:
    """Append one record (``record["type"]``: run, answer, judgement) to the journal."""
    text = json.dumps(record, separators=(",", ":"), allow_nan=False)
    conn.execute(
        auto_journal.insert().values(
            kind=str(record.get("type", "")), record=text, battle_id=battle_id, created_at=now
        )
    )


def store_judged(
    conn: Connection,
    *,
    judge_id: int,
    x: int,
    y: int,
    outcome: str | None,
    failure: str | None,
    held: dict[str, Any],
    answers: dict[int, dict[str, Any]],
    now: float,
) -> str:
    """Store one judgement of models ``x`` and ``y`` (ids) by the judge's annotator
    ``judge_id``: one battle (x as A) and, with ``outcome`` (``"x"``, ``"y"``, ``"tie"``: the
    verdict of both orders, disagreeing orders a tie), its one vote — one judgement, one vote, as
    the judges of ``serve`` vote and as ``auto`` fits; with ``failure`` the battle is failed. ``held``: prompt_id, prompt, category;
    ``answers``: per model id, its ``battle_answers`` row without battle id and side (those it
    has). Returns the id of the first battle stored."""

    def row(a: int, b: int) -> dict[str, Any]:
        return {
            "id": uuid.uuid4().hex,
            "annotator_id": judge_id,
            "model_a": a,
            "model_b": b,
            "strategy": STRATEGY,
            "propensity": None,
            "served_at": now,
            "expires_at": 0.0,
        }

    def sided(a: int, b: int) -> list[dict[str, Any]]:
        return [{**answers[m], "side": s} for s, m in (("a", a), ("b", b)) if m in answers]

    if outcome is None:
        first = row(x, y)
        insert_held(conn, first, {**held, "served_at": now}, None)
        finish_held(conn, first["id"], sided(x, y), failure or "failed", now, 0.0)
        return str(first["id"])
    done = {**held, "status": "complete", "served_at": now, "completed_at": now}
    r = row(x, y)
    res = record_judgement(conn, r, judge_id, outcome, now, 0.0, done, sided(x, y))
    if res.kind != "new":  # a fresh battle and its first vote: anything else is a bug
        raise RuntimeError(f"the judgement's vote was not recorded: {res.kind} {res.message}")
    return str(r["id"])
