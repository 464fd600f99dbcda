"""The statements of the page's other modes (docs/guides/arena-page.md, "Modes"): a finished
battle's share link and its read-only view, and direct chats with one model.

A side-by-side battle of two models the visitor picked is a held battle like any other
(:func:`~.arena.insert_held` with ``mode = "named"``: ``battles.anony`` false from the start, so
its vote is in the log and the export but never in ``pair_counts``). A direct chat is never a
battle: it lives in ``chats`` / ``chat_turns`` only, which no fit, board or export reads.
"""

from __future__ import annotations

import secrets
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .arena import ANSWER_FIELDS, TurnRefused, conversation
from .tables import OUTCOMES, battle_shares, battles, chat_turns, chats, held_battles, models, votes

__all__ = [
    "share_battle",
    "shared_battle",
    "new_chat",
    "plan_chat",
    "accept_chat_turn",
    "finish_chat_turn",
    "CHAT_ANSWER",
]

#: The columns of a chat turn's answer (as :class:`stablearena.judging.endpoints.Answer` names them).
CHAT_ANSWER = ANSWER_FIELDS


# ---------------------------------------------------------------------------------- shares
def share_battle(
    conn: Connection, battle_id: str, annotator_id: int, now: float
) -> str | TurnRefused:
    """The share token of held battle ``battle_id`` for its voter ``annotator_id``: made on the
    first ask (``secrets.token_urlsafe``: 192 random bits), the same one after. Refused unless
    the battle was served to ``annotator_id`` and has its vote (an unvoted battle has no link:
    its names are not revealed yet)."""
    owner = conn.execute(
        sa.select(held_battles.c.annotator_id).where(held_battles.c.battle_id == battle_id)
    ).first()
    if owner is None:
        return TurnRefused(404, "not_found", f"no held battle {battle_id}")
    if owner.annotator_id != annotator_id:
        return TurnRefused(403, "forbidden", f"battle {battle_id} was not served to you")
    voted = conn.execute(
        sa.select(
            sa.exists().where(votes.c.battle_id == battle_id, votes.c.superseded == sa.false())
        )
    ).scalar_one()
    if not voted:
        return TurnRefused(
            409, "not_voted", "a battle can be shared once it has its vote; vote first"
        )
    q = sa.select(battle_shares.c.token).where(battle_shares.c.battle_id == battle_id)
    token = conn.execute(q).scalar()
    if token is None:
        token = secrets.token_urlsafe(24)  # 32 characters
        conn.execute(
            battle_shares.insert().values(token=token, battle_id=battle_id, created_at=now)
        )
    return str(token)


def shared_battle(engine: Engine, token: str) -> dict[str, Any] | None:
    """The read-only view of the battle shared as ``token``: its mode (``battle``: anonymous,
    ``named``: models picked by name), both model names, the verdict (the current vote's
    outcome, :data:`~.tables.OUTCOMES`) and the conversation, turn by turn (``{"prompt", "a",
    "b"}``: each turn's current answers). Nothing of the voter — no annotator, address, battle
    id or time (a battle id or a time would find the voter's row in an export). None: no such
    token."""
    ma, mb = models.alias("ma"), models.alias("mb")
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(
                battle_shares.c.battle_id,
                held_battles.c.mode,
                ma.c.name.label("model_a"),
                mb.c.name.label("model_b"),
                votes.c.outcome,
            )
            .join(battles, battles.c.id == battle_shares.c.battle_id)
            .join(held_battles, held_battles.c.battle_id == battles.c.id)
            .join(ma, ma.c.id == battles.c.model_a)
            .join(mb, mb.c.id == battles.c.model_b)
            .join(votes, votes.c.battle_id == battles.c.id)
            .where(battle_shares.c.token == token, votes.c.superseded == sa.false())
        ).first()
        if row is None:
            return None
        conv = conversation(conn, row.battle_id) or {"a": [], "b": [], "turns": 0}
    turns = []
    for k in range(0, len(conv["a"]), 2):
        turns.append(
            {
                "prompt": conv["a"][k]["content"],
                "a": conv["a"][k + 1]["content"] if k + 1 < len(conv["a"]) else "",
                "b": conv["b"][k + 1]["content"] if k + 1 < len(conv["b"]) else "",
            }
        )
    return {
        "mode": row.mode or "battle",
        "model_a": row.model_a,
        "model_b": row.model_b,
        "outcome": OUTCOMES[int(row.outcome)],
        "turns": turns,
    }


# ---------------------------------------------------------------------------------- chats
def new_chat(conn: Connection, chat_id: str, annotator_id: int, model_id: int, now: float) -> None:
    """Store a new direct chat of ``annotator_id`` with ``model_id``, its first turn generating
    (status ``served``, no turn stored yet)."""
    conn.execute(
        chats.insert().values(
            id=chat_id,
            annotator_id=annotator_id,
            model_id=model_id,
            status="served",
            turns=0,
            started_at=now,
        )
    )


def plan_chat(
    conn: Connection,
    chat_id: str,
    annotator_id: int,
    prompt: str,
    max_turns: int,
    max_chars: int,
) -> tuple[int, int, list[dict[str, str]]] | TurnRefused:
    """The next turn of chat ``chat_id`` of ``annotator_id``: (its model id, its number, the
    conversation before it as chat messages) — or why not: not this identity's, a turn still
    generating, a failed chat, or over the page's limits (``max_turns`` turns,
    ``max_chars`` characters in what the model would be sent: the same limits as a battle's)."""
    c = conn.execute(sa.select(chats).where(chats.c.id == chat_id)).first()
    if c is None:
        return TurnRefused(404, "not_found", f"no chat {chat_id}")
    if c.annotator_id != annotator_id:
        return TurnRefused(403, "forbidden", f"chat {chat_id} is not yours")
    if c.status == "served":
        return TurnRefused(409, "busy", "the last answer is still coming; wait")
    if c.status == "failed":
        return TurnRefused(409, "failed", "the model failed to answer; start a new chat")
    if c.turns + 1 > max_turns:
        return TurnRefused(
            422,
            "limit",
            f"this chat has {c.turns} turns, the most arena_page.max_turns = {max_turns} "
            "allows; start a new chat",
        )
    rows = conn.execute(
        sa.select(chat_turns.c.prompt, chat_turns.c.text)
        .where(chat_turns.c.chat_id == chat_id)
        .order_by(chat_turns.c.turn)
    ).all()
    history: list[dict[str, str]] = []
    for r in rows:
        history += [
            {"role": "user", "content": r.prompt},
            {"role": "assistant", "content": r.text or ""},
        ]
    size = sum(len(m["content"]) for m in history) + len(prompt)
    if size > max_chars:
        return TurnRefused(
            422,
            "limit",
            f"the chat would be {size} characters, more than "
            f"arena_page.max_conversation_chars = {max_chars}; start a new chat",
        )
    return int(c.model_id), int(c.turns) + 1, history


def accept_chat_turn(
    conn: Connection, chat_id: str, annotator_id: int, turn: int
) -> TurnRefused | None:
    """Accept turn ``turn`` of a complete chat of ``annotator_id`` that holds ``turn - 1``
    turns (as planned by :func:`plan_chat`): it becomes ``served`` — in one statement, so of
    two turns sent at once one gets 409 ``busy``. None: accepted."""
    changed = conn.execute(
        chats.update()
        .where(
            chats.c.id == chat_id,
            chats.c.annotator_id == annotator_id,
            chats.c.status == "complete",
            chats.c.turns == turn - 1,
        )
        .values(status="served")
    ).rowcount
    if not changed:
        return TurnRefused(409, "busy", "the chat changed meanwhile; try again")
    return None


def finish_chat_turn(
    conn: Connection,
    chat_id: str,
    turn: int,
    prompt: str,
    answer: dict[str, Any],
    failure: str | None,
    now: float,
) -> None:
    """Store turn ``turn`` of chat ``chat_id`` (the user's ``prompt`` and the model's
    ``answer``: :data:`CHAT_ANSWER` columns, as far as it came) and mark the chat ``complete``,
    or ``failed`` with ``failure`` (it then takes no more turns)."""
    conn.execute(
        chat_turns.insert().values(
            chat_id=chat_id,
            turn=turn,
            prompt=prompt,
            failure=failure,
            asked_at=now,
            **{k: answer.get(k) for k in CHAT_ANSWER},
        )
    )
    conn.execute(
        chats.update()
        .where(chats.c.id == chat_id)
        .values(status="failed" if failure else "complete", turns=turn)
    )
