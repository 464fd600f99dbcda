"""The statements of the battles the arena holds itself (docs/guides/arena-page.md): models'
endpoints, visitors, each held battle's prompt, state and answers, and the vote on it.

A held battle is stored in ``battles`` with ``expires_at = 0`` while its answers are being
generated, so that :func:`~.votes.record_vote` refuses a vote on it by any route (410) until
:func:`finish_held` marks it complete and gives it its lifetime; a failed battle keeps
``expires_at = 0`` and can never be voted on.
"""

from __future__ import annotations

import secrets
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .queries import bump_revision
from .tables import (
    annotators,
    answer_flags,
    battle_answers,
    battles,
    held_battles,
    model_endpoints,
    models,
    moderation_events,
    terms_acceptances,
    votes,
)
from .votes import VoteResult, insert_battles, record_vote

__all__ = [
    "set_endpoint",
    "drop_endpoint",
    "endpoint_rows",
    "set_auto_outage",
    "visitor_id",
    "annotator_by_id",
    "insert_held",
    "finish_held",
    "held_status",
    "open_held",
    "record_page_vote",
    "OpenHeld",
    "held_columns",
    "held_list",
    "judge_annotator",
    "record_judgement",
    "record_flags",
    "flag_counts",
    "record_moderation",
    "moderation_counts",
    "accept_terms",
    "terms_accepted",
    "terms_count",
    "set_category",
]

#: The per-side columns of ``battle_answers`` the export carries (besides the text).
ANSWER_COLUMNS = (
    "params",
    "ttft",
    "total_time",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "failure",
    "failure_detail",
    "attempts",
    "style_tokens",
    "style_headers",
    "style_lists",
    "style_bold",
)


# ---------------------------------------------------------------------------------- endpoints
def set_endpoint(conn: Connection, name: str, config: str, now: float) -> bool:
    """Give model ``name`` the endpoint ``config`` (JSON, no key), creating the model when new;
    returns whether the model was created. Bumps the revision."""
    mid = conn.execute(sa.select(models.c.id).where(models.c.name == name)).scalar()
    created = mid is None
    if created:
        mid = conn.execute(
            models.insert().values(name=name, added_at=now).returning(models.c.id)
        ).scalar_one()
    old = conn.execute(
        sa.select(model_endpoints.c.config).where(model_endpoints.c.model_id == mid)
    ).scalar()
    if old is None:
        conn.execute(model_endpoints.insert().values(model_id=mid, config=config, updated_at=now))
    elif old != config:
        conn.execute(
            model_endpoints.update()
            .where(model_endpoints.c.model_id == mid)
            .values(config=config, updated_at=now)
        )
    else:
        return created
    bump_revision(conn)
    return created


def drop_endpoint(conn: Connection, model_id: int) -> bool:
    """Take the endpoint from a model (it stays a name); returns whether it had one."""
    n = conn.execute(model_endpoints.delete().where(model_endpoints.c.model_id == model_id))
    if n.rowcount:
        bump_revision(conn)
    return bool(n.rowcount)


def endpoint_rows(conn: Connection) -> list[Any]:
    """(model_id, name, config, auto_outage, outage, retired) of every model with an endpoint."""
    return conn.execute(
        sa.select(
            model_endpoints.c.model_id,
            models.c.name,
            model_endpoints.c.config,
            model_endpoints.c.auto_outage,
            models.c.outage,
            models.c.retired,
        )
        .join(models, models.c.id == model_endpoints.c.model_id)
        .order_by(model_endpoints.c.model_id)
    ).all()


def set_auto_outage(conn: Connection, model_id: int, on: bool) -> bool:
    """Put a model under outage (``on``) because its endpoint keeps failing, or lift an outage
    the breaker set (an outage an admin set stays). Returns whether anything changed."""
    row = conn.execute(
        sa.select(model_endpoints.c.auto_outage, models.c.outage)
        .join(models, models.c.id == model_endpoints.c.model_id)
        .where(model_endpoints.c.model_id == model_id)
    ).first()
    if row is None:
        return False
    auto, outage = bool(row[0]), bool(row[1])
    if not ((on and not outage) or (not on and auto)):  # already so, or an admin's outage
        return False
    conn.execute(models.update().where(models.c.id == model_id).values(outage=on))
    conn.execute(
        model_endpoints.update()
        .where(model_endpoints.c.model_id == model_id)
        .values(auto_outage=on)
    )
    bump_revision(conn)
    return True


# ---------------------------------------------------------------------------------- visitors
def visitor_id(engine: Engine, name: str, now: float, create: bool) -> int | None:
    """The id of the anonymous annotator (no key) ``name`` (``visitor-<hex>``); with
    ``create``, made when new (a visitor's row is made on its first battle, not when the page
    is opened: a crawler makes none). None: not stored (without ``create``)."""
    q = sa.select(annotators.c.id).where(annotators.c.name == name)
    with engine.connect() as conn:
        vid = conn.execute(q).scalar()
    if vid is None and create:
        try:
            with engine.begin() as conn:
                vid = conn.execute(
                    annotators.insert()
                    .values(name=name, role="annotator", created_at=now)
                    .returning(annotators.c.id)
                ).scalar_one()
        except sa.exc.IntegrityError:  # another worker made it a moment ago
            with engine.connect() as conn:
                vid = conn.execute(q).scalar_one()
    return None if vid is None else int(vid)


def annotator_by_id(conn: Connection, annotator_id: int) -> Any:
    """The annotator record ``annotator_id`` or None."""
    return conn.execute(sa.select(annotators).where(annotators.c.id == annotator_id)).first()


# ---------------------------------------------------------------------------------- battles
class OpenHeld(NamedTuple):
    """:func:`insert_held` refused the battle: the annotator (``mine``) or its address
    (``there``) already holds as many battles without a vote as its cap allows."""

    mine: int
    there: int


def insert_held(
    conn: Connection,
    row: dict[str, Any],
    held: dict[str, Any],
    revision: int | None,
    open_caps: tuple[int, int, float] | None = None,
) -> list[str] | None | OpenHeld:
    """Store a served battle (``row``, as for :func:`~.votes.insert_battles`, stored with
    ``expires_at = 0``) and its prompt (``held``: prompt_id, prompt, category, address,
    served_at and open_until) with status ``served``; the result of ``insert_battles``. With
    ``open_caps`` = (annotator's cap, address's cap, now), the battle is first counted against the caps on
    battles without a vote (:func:`open_held`) in the same transaction — exact across workers —
    and refused with :class:`OpenHeld` when either is reached."""
    if open_caps is not None:
        cap_mine, cap_there, now = open_caps
        mine, there = open_held(conn, row["annotator_id"], held.get("address"), now)
        if mine >= cap_mine or there >= cap_there:
            return OpenHeld(mine, there)
    refused = insert_battles(conn, [{**row, "expires_at": 0.0}], revision)
    if refused:
        return refused
    if refused is None:
        return None
    conn.execute(
        held_battles.insert().values(
            battle_id=row["id"], status="served", annotator_id=row["annotator_id"], **held
        )
    )
    return []


def finish_held(
    conn: Connection,
    battle_id: str,
    answers: list[dict[str, Any]],
    failure: str | None,
    now: float,
    ttl: float,
) -> None:
    """Store both answers (rows of ``battle_answers``) and mark the battle ``complete`` —
    votable for ``ttl`` seconds from now — or, with ``failure``, ``failed`` (never votable)."""
    for a in answers:  # one by one: an answer and a failure have different columns
        conn.execute(battle_answers.insert().values(battle_id=battle_id, **a))
    status = "failed" if failure else "complete"
    conn.execute(
        held_battles.update()
        .where(held_battles.c.battle_id == battle_id)
        .values(status=status, failure=failure, completed_at=now)
        .values(**({"open_until": None} if failure else {}))
    )
    if not failure:
        conn.execute(battles.update().where(battles.c.id == battle_id).values(expires_at=now + ttl))


def held_status(conn: Connection, battle_id: str) -> str | None:
    """The status of a held battle (``served``, ``complete``, ``failed``) or None."""
    return conn.execute(
        sa.select(held_battles.c.status).where(held_battles.c.battle_id == battle_id)
    ).scalar()


def open_held(
    conn: Connection, annotator_id: int, address: str | None, now: float
) -> tuple[int, int]:
    """Held battles open at ``now`` — served within their lifetime, not voted on from the page,
    not failed (``held_battles.open_until``) — of the annotator, and from ``address``. Each
    count reads only the open battles (an index on (annotator_id, open_until) and one on
    (address, open_until)), so it costs the same however many battles the arena holds."""
    base = sa.select(sa.func.count()).select_from(held_battles)
    live = held_battles.c.open_until > now
    mine = conn.execute(base.where(held_battles.c.annotator_id == annotator_id, live)).scalar_one()
    there = 0
    if address:
        there = conn.execute(base.where(held_battles.c.address == address, live)).scalar_one()
    return int(mine), int(there)


def record_page_vote(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    outcome: int,
    now: float,
    correction_window: float,
    revision: int | None = None,
) -> VoteResult:
    """:func:`~.votes.record_vote` for a vote from the page (nothing when the registry changed
    since ``revision``, e.g. the key revoked: ``stale``); once recorded, the battle no longer
    counts against the caps on battles without a vote (:func:`open_held`)."""
    res = record_vote(conn, battle_id, annotator_id, outcome, now, correction_window, revision)
    if res.kind in ("new", "replay", "corrected"):
        conn.execute(
            held_battles.update()
            .where(held_battles.c.battle_id == battle_id, held_battles.c.open_until.is_not(None))
            .values(open_until=None)
        )
    return res


def held_columns(engine: Engine, texts: bool) -> dict[str, dict[str, Any]]:
    """Per held battle id, the columns the export adds: prompt_id, category, status, failure
    and, per side s in a/b, ``{column}_{s}`` for :data:`ANSWER_COLUMNS` (and, with ``texts``,
    ``prompt_text``, ``answer_a``/``answer_b`` and, for a judge's battle, ``judge_reasoning``:
    its replies to both orders as JSON text, ``[{"order", "winner", "reasoning"}, …]``)."""
    with engine.connect() as conn:
        held = conn.execute(sa.select(held_battles)).all()
        answers = conn.execute(sa.select(battle_answers)).all()
    out: dict[str, dict[str, Any]] = {}
    for h in held:
        rec: dict[str, Any] = {
            "prompt_id": h.prompt_id,
            "category": h.category,
            "status": h.status,
            "failure": h.failure,
        }
        if texts:
            rec["prompt_text"] = h.prompt
            if h.judge_reasoning is not None:  # a judge's battle: its replies to both orders
                rec["judge_reasoning"] = h.judge_reasoning  # JSON text (every format holds it)
        out[h.battle_id] = rec
    for a in answers:
        rec = out.setdefault(a.battle_id, {})
        for c in ANSWER_COLUMNS:
            rec[f"{c}_{a.side}"] = getattr(a, c)
        if texts:
            rec[f"answer_{a.side}"] = a.text
    return out


def held_list(engine: Engine, status: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest held battles (of ``status`` when given): id, models, status, failure, times,
    whether voted."""
    ma, mb = models.alias("ma"), models.alias("mb")
    q = (
        sa.select(
            held_battles.c.battle_id,
            held_battles.c.status,
            held_battles.c.failure,
            held_battles.c.category,
            held_battles.c.served_at,
            held_battles.c.completed_at,
            ma.c.name.label("model_a"),
            mb.c.name.label("model_b"),
            sa.exists().where(votes.c.battle_id == held_battles.c.battle_id).label("voted"),
        )
        .join(battles, battles.c.id == held_battles.c.battle_id)
        .join(ma, ma.c.id == battles.c.model_a)
        .join(mb, mb.c.id == battles.c.model_b)
        .order_by(held_battles.c.served_at.desc())
        .limit(limit)
    )
    if status:
        q = q.where(held_battles.c.status == status)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q).all()]


def arena_secret(engine: Engine) -> bytes:
    """The key that signs visitors' cookies (made on first use, kept in ``meta``, shared by
    every worker)."""
    from .queries import get_meta, set_meta

    for _ in range(3):
        with engine.begin() as conn:
            got = get_meta(conn, "arena_secret")
            if got is None:
                try:
                    set_meta(conn, "arena_secret", secrets.token_hex(32))
                except sa.exc.IntegrityError:  # another worker made it first
                    continue
                got = get_meta(conn, "arena_secret")
        return bytes.fromhex(got)
    raise RuntimeError("could not create the arena's cookie key")


def judge_annotator(conn: Connection, name: str, now: float) -> int:
    """The id of the annotator ``name`` (a judge), created (without a key) when new."""
    aid = conn.execute(sa.select(annotators.c.id).where(annotators.c.name == name)).scalar()
    if aid is None:
        aid = conn.execute(
            annotators.insert()
            .values(name=name, role="annotator", created_at=now)
            .returning(annotators.c.id)
        ).scalar_one()
    return int(aid)


def record_judgement(
    conn: Connection,
    row: dict[str, Any],
    judge_id: int,
    verdict: str,
    now: float,
    ttl: float,
    held: dict[str, Any],
    answers: list[dict[str, Any]],
) -> VoteResult:
    """A judge's vote on a completed held battle: a battle of the same pair served to the judge
    (``row``: the held battle's row with a new id), stored complete
    with its prompt (``held``) and the judged ``answers``, and the vote — the judgement's
    ``verdict`` (``"x"``: model A, ``"y"``: model B, ``"tie"``) — in one transaction."""
    insert_battles(
        conn, [{**row, "annotator_id": judge_id, "served_at": now, "expires_at": now + ttl}]
    )
    conn.execute(held_battles.insert().values(battle_id=row["id"], **held))
    for a in answers:  # the same answers as the battle judged
        conn.execute(battle_answers.insert().values(battle_id=row["id"], **a))
    outcome = {"x": 0, "y": 1, "tie": 2}[verdict]  # codes of tables.OUTCOMES
    return record_vote(conn, row["id"], judge_id, outcome, now, 0.0)


def record_flags(
    conn: Connection,
    battle_id: str,
    answers: list[dict[str, Any]],
    report: dict[str, Any],
    now: float,
) -> int:
    """The answers of held battle ``battle_id`` that talked to the judge: ``report`` is a
    judgement's injection report (``{"x": rules, "y": rules, "action"}``, side a = x), one row
    per flagged answer. Returns the rows written (none twice: a battle is flagged once)."""
    model = {a["side"]: a["model_id"] for a in answers}
    rows = [
        {
            "battle_id": battle_id,
            "side": side,
            "model_id": model[side],
            "rules": ",".join(report[key]),
            "action": str(report["action"]),
            "flagged_at": now,
        }
        for side, key in (("a", "x"), ("b", "y"))
        if report.get(key) and side in model
    ]
    if not rows:
        return 0
    seen = conn.execute(
        sa.select(sa.func.count())
        .select_from(answer_flags)
        .where(answer_flags.c.battle_id == battle_id)
    ).scalar()
    if seen:
        return 0
    conn.execute(answer_flags.insert(), rows)
    return len(rows)


def flag_counts(engine: Engine) -> list[dict[str, Any]]:
    """Per model, the held battles in which its answer talked to the judge, by action, newest
    first: ``{"model", "battles", "actions": {action: n}, "last"}``, most flagged first."""
    q = (
        sa.select(
            models.c.name,
            answer_flags.c.action,
            sa.func.count().label("n"),
            sa.func.max(answer_flags.c.flagged_at).label("last"),
        )
        .join(models, models.c.id == answer_flags.c.model_id)
        .group_by(models.c.name, answer_flags.c.action)
    )
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for name, action, n, last in conn.execute(q):
            row = out.setdefault(name, {"model": name, "battles": 0, "actions": {}, "last": 0.0})
            row["battles"] += int(n)
            row["actions"][action] = int(n)
            row["last"] = max(row["last"], float(last))
    return sorted(out.values(), key=lambda r: (-r["battles"], r["model"]))


# ---------------------------------------------------------------------------------- duties
def record_moderation(
    conn: Connection, at: float, source: str, reasons: str, annotator_id: int | None
) -> None:
    """A prompt refused by the [moderation] step, or let through unchecked (never its text)."""
    conn.execute(
        moderation_events.insert().values(
            at=at, source=source, reasons=reasons[:300], annotator_id=annotator_id
        )
    )


def moderation_counts(engine: Engine) -> dict[str, Any]:
    """The [moderation] step's events by source (``rules``, ``endpoint``, ``unavailable``:
    refused; ``unchecked``: let through when the endpoint failed open), the reasons of the
    refusals (most frequent first, at most 20) and the time of the last event."""
    t = moderation_events
    with engine.connect() as conn:
        by = {
            s: int(n)
            for s, n in conn.execute(sa.select(t.c.source, sa.func.count()).group_by(t.c.source))
        }
        reasons = conn.execute(
            sa.select(t.c.reasons, sa.func.count().label("n"))
            .where(t.c.source != "unchecked")
            .group_by(t.c.reasons)
            .order_by(sa.desc("n"), t.c.reasons)
            .limit(20)
        ).all()
        last = conn.execute(sa.select(sa.func.max(t.c.at))).scalar()
    return {
        "refused": sum(n for s, n in by.items() if s != "unchecked"),
        "unchecked": by.get("unchecked", 0),
        "by_source": by,
        "reasons": [{"reasons": r, "prompts": int(n)} for r, n in reasons],
        "last": last,
    }


def accept_terms(conn: Connection, annotator_id: int, version: str, now: float) -> float:
    """Store that ``annotator_id`` accepted the terms ``version`` (once: the first time is
    kept); returns the time of acceptance."""
    t = terms_acceptances
    where = (t.c.annotator_id == annotator_id) & (t.c.version == version)
    seen = conn.execute(sa.select(t.c.accepted_at).where(where)).scalar()
    if seen is not None:
        return float(seen)
    conn.execute(t.insert().values(annotator_id=annotator_id, version=version, accepted_at=now))
    return now


def terms_accepted(engine: Engine, annotator_id: int, version: str) -> float | None:
    """When ``annotator_id`` accepted the terms ``version`` (None: not yet)."""
    t = terms_acceptances
    with engine.connect() as conn:
        got = conn.execute(
            sa.select(t.c.accepted_at).where(
                (t.c.annotator_id == annotator_id) & (t.c.version == version)
            )
        ).scalar()
    return None if got is None else float(got)


def terms_count(engine: Engine, version: str) -> int:
    """Identities that accepted the terms ``version``."""
    t = terms_acceptances
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(t).where(t.c.version == version)
            ).scalar()
        )


def set_category(conn: Connection, battle_id: str, category: str) -> None:
    """The held battle's category, from the classifier (replacing the rules' one)."""
    conn.execute(
        held_battles.update().where(held_battles.c.battle_id == battle_id).values(category=category)
    )
